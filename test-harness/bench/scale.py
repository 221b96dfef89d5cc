"""Scale figures: a 1,001-tool catalog from 2,400 messages, served by Switchblade in Envoy.

The .proto is the shape of filter/core/tests/scale.rs (1,000 unary methods with their request and
response messages, a 300-message chain nested one inside the next, a 100-message cycle),
written as text and compiled by the switchblade CLI, as a user would.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import httpx2
from systems import CLUSTER

METHODS = 1000
CHAIN = 300
CYCLE = 100
SCALARS = "  int64 id = 1;\n  string name = 2;\n  int32 count = 3;\n  bool enabled = 4;\n"


def scale_proto() -> str:
    parts = ['syntax = "proto3";\n\npackage scale.v1;\n\nservice ScaleService {\n']
    parts += [f"  rpc Method{i}(Request{i}) returns (Response{i});\n" for i in range(METHODS)]
    parts.append("  rpc Deep(Chain0) returns (Cycle0);\n}\n\n")
    for i in range(METHODS):
        parts.append(f"message Request{i} {{\n{SCALARS}}}\n\nmessage Response{i} {{\n{SCALARS}}}\n\n")
    for i in range(CHAIN):
        link = f"  Chain{i + 1} next = 2;\n" if i + 1 < CHAIN else ""
        parts.append(f"message Chain{i} {{\n  string value = 1;\n{link}}}\n\n")
    for i in range(CYCLE):
        parts.append(f"message Cycle{i} {{\n  string label = 1;\n  Cycle{(i + 1) % CYCLE} next = 2;\n}}\n\n")
    return "".join(parts)


def scale_plugin(cli: Path, work: Path) -> dict:
    """The plugin configuration for the scale catalog, with tools/list pages of 1,000 tools
    (the largest page the filter allows)."""
    proto = work / "scale/v1/scale.proto"
    proto.parent.mkdir(parents=True, exist_ok=True)
    proto.write_text(scale_proto())
    output = subprocess.check_output([str(cli), "config", "scale/v1/scale.proto", "-I", str(work),
                                      "--service", f"scale.v1.ScaleService={CLUSTER}"])
    plugin = json.loads(output)
    plugin["tools_list"] = {"page_size": METHODS}
    return plugin


@dataclass
class CatalogFigures:
    tools: int
    # Tools in the first tools/list page (the answer measured).
    listed: int
    messages: int
    # One build per Wasm VM (Envoy's main thread and each worker).
    build_ms: list[int]
    vm_memory_bytes: int
    tools_list_bytes: int


def catalog_figures(log: str, admin_url: str, mcp_url: str, headers: dict[str, str]) -> CatalogFigures:
    builds = [(int(tools), int(ms)) for tools, ms in
              re.findall(r"serving (\d+) tools at \S+ \(catalog built in (\d+) ms\)", log)]
    stats = httpx2.get(f"{admin_url}/stats?filter=vm_memory_bytes", timeout=2).text
    memory = [int(value) for value in re.findall(r"switchblade\.vm_memory_bytes: (\d+)", stats)]
    listing = httpx2.post(mcp_url, headers=headers, timeout=10,
                          content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    return CatalogFigures(
        tools=max((tools for tools, _ in builds), default=0),
        listed=len(listing.json()["result"]["tools"]),
        messages=2 * METHODS + CHAIN + CYCLE,
        build_ms=[ms for _, ms in builds],
        vm_memory_bytes=max(memory, default=0),
        tools_list_bytes=len(listing.content),
    )

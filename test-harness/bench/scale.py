"""Scale figures: catalogs of 1,001 and 10,001 tools served by Switchblade in Envoy, both builds.

The .proto is the shape of filter/core/tests/scale.rs (N unary methods with their request and
response messages, a 300-message chain nested one inside the next, a 100-message cycle),
written as text and compiled by the switchblade CLI, as a user would.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx2
from memory import MemoryFigures
from systems import CLUSTER

# The largest tools/list page the filter allows.
PAGE = 1000
CHAIN = 300
CYCLE = 100
SCALARS = "  int64 id = 1;\n  string name = 2;\n  int32 count = 3;\n  bool enabled = 4;\n"


def scale_proto(methods: int) -> str:
    parts = ['syntax = "proto3";\n\npackage scale.v1;\n\nservice ScaleService {\n']
    parts += [f"  rpc Method{i}(Request{i}) returns (Response{i});\n" for i in range(methods)]
    parts.append("  rpc Deep(Chain0) returns (Cycle0);\n}\n\n")
    for i in range(methods):
        parts.append(f"message Request{i} {{\n{SCALARS}}}\n\nmessage Response{i} {{\n{SCALARS}}}\n\n")
    for i in range(CHAIN):
        link = f"  Chain{i + 1} next = 2;\n" if i + 1 < CHAIN else ""
        parts.append(f"message Chain{i} {{\n  string value = 1;\n{link}}}\n\n")
    for i in range(CYCLE):
        parts.append(f"message Cycle{i} {{\n  string label = 1;\n  Cycle{(i + 1) % CYCLE} next = 2;\n}}\n\n")
    return "".join(parts)


def scale_messages(methods: int) -> int:
    return 2 * methods + CHAIN + CYCLE


def scale_plugin(cli: Path, work: Path, methods: int) -> dict:
    """The plugin configuration for a scale catalog of `methods` methods (and `Deep`), with
    tools/list pages of PAGE tools."""
    root = work / str(methods)
    proto = root / "scale/v1/scale.proto"
    proto.parent.mkdir(parents=True, exist_ok=True)
    proto.write_text(scale_proto(methods))
    output = subprocess.check_output([str(cli), "config", "scale/v1/scale.proto", "-I", str(root),
                                      "--service", f"scale.v1.ScaleService={CLUSTER}"])
    plugin = json.loads(output)
    plugin["tools_list"] = {"page_size": PAGE}
    return plugin


@dataclass
class CatalogFigures:
    tools: int
    # Tools in the first tools/list page (the answer the load measures).
    listed: int
    # One build per Wasm VM (Envoy's main thread and each worker); one for the module.
    build_ms: list[int]
    # The Wasm VM's linear memory (None for the module, whose heap is Envoy's).
    vm_memory_bytes: int | None
    # Envoy's resident memory and tcmalloc's allocated bytes, idle after the builds.
    envoy_rss_bytes: int
    heap_allocated_bytes: int
    tools_list_bytes: int
    # Every page of tools/list, one after another on one connection: pages, their bytes (what
    # an agent reads before its first call), and the median of WALKS walks in milliseconds.
    pages: int
    all_pages_bytes: int
    walk_ms: float


WALKS = 5


def walk_tools_list(client: httpx2.Client, mcp_url: str, headers: dict[str, str]) -> tuple[int, int, float, int]:
    """Lists every page; returns the tools, the pages, the seconds the exchanges took (the
    client's reading of each page's JSON left out) and the bytes of every page."""
    exchanging = 0.0
    tools = pages = size = 0
    cursor = None
    while True:
        params = {"cursor": cursor} if cursor else {}
        body = json.dumps({"jsonrpc": "2.0", "id": pages + 1, "method": "tools/list", "params": params})
        started = time.perf_counter()
        response = client.post(mcp_url, headers=headers, content=body)
        exchanging += time.perf_counter() - started
        size += len(response.content)
        result = response.json()["result"]
        tools += len(result["tools"])
        pages += 1
        cursor = result.get("nextCursor")
        if not cursor:
            return tools, pages, exchanging, size


def catalog_figures(log: str, admin_url: str, mcp_url: str, headers: dict[str, str], envoy_memory: MemoryFigures,
                    wasm: bool, search: bool = False) -> CatalogFigures:
    """A catalog's figures; in search mode (`search`) tools/list shows two tools, not the
    catalog."""
    builds = [(int(tools), int(ms)) for tools, ms in
              re.findall(r"serving (\d+) tools at \S+ \(catalog built in (\d+) ms", log)]
    memory = None
    if wasm:
        stats = httpx2.get(f"{admin_url}/stats?filter=vm_memory_bytes", timeout=2).text
        memory = max((int(value) for value in re.findall(r"switchblade\.vm_memory_bytes: (\d+)", stats)), default=0)
    with httpx2.Client(timeout=30) as client:
        listing = client.post(mcp_url, headers=headers,
                              content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        walks = [walk_tools_list(client, mcp_url, headers) for _ in range(WALKS)]
    tools = max((tools for tools, _ in builds), default=0)
    expected = 2 if search else tools
    assert all(listed == expected for listed, _, _, _ in walks), f"a walk of tools/list missed tools: {walks}"
    return CatalogFigures(
        tools=tools,
        listed=len(listing.json()["result"]["tools"]),
        build_ms=[ms for _, ms in builds],
        vm_memory_bytes=memory,
        envoy_rss_bytes=envoy_memory.rss,
        heap_allocated_bytes=envoy_memory.heap_allocated,
        tools_list_bytes=len(listing.content),
        pages=walks[0][1],
        all_pages_bytes=walks[0][3],
        walk_ms=statistics.median(seconds for _, _, seconds, _ in walks) * 1000,
    )

"""The README's first command: `scripts/demo` (or `--module`) starts, serves the three demo
tools at http://127.0.0.1:10000/mcp, answers the README's curl session, and needs no Node: its
bootstrap (`--demo`) leaves the tests' TypeScript clients out. It runs on the demo's fixed
ports, which it holds alone across both sessions (the quick start's test uses them too), and it
skips when something else holds one of them."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
from pathlib import Path

import httpx2
import pytest

import filter_build
from processes import REPO, port_in_use, wait_until

DEMO_PORTS = (10000, 9901, 50051, 50052)
MCP_URL = "http://127.0.0.1:10000/mcp"


def node_shims(tmp_path: Path) -> Path:
    """A directory to put first on PATH: node, npm and npx fail and leave a mark, and `cmp`
    says the Node packages' lock files differ from the installed ones (so that a bootstrap that
    installs them calls npm even where they are installed)."""
    shims = tmp_path / "bin"
    shims.mkdir()
    for tool in ("node", "npm", "npx"):
        shim = shims / tool
        shim.write_text(f"#!/bin/sh\necho called >> {tmp_path / 'node-called'}\nexit 1\n")
        shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    real_cmp = shutil.which("cmp")
    cmp = shims / "cmp"
    cmp.write_text(f'#!/bin/sh\ncase "$*" in *package-lock*) exit 1 ;; esac\nexec {real_cmp} "$@"\n')
    cmp.chmod(cmp.stat().st_mode | stat.S_IEXEC)
    return shims


def test_the_demo_starts_without_node_and_serves_the_readmes_session(tmp_path: Path, fixed_ports: None) -> None:
    busy = [port for port in DEMO_PORTS if port_in_use(port)]
    if busy:
        pytest.skip(f"the demo's ports are in use: {busy} (is scripts/demo running?)")
    shims = node_shims(tmp_path)
    arguments = ["--module"] if filter_build.current() is filter_build.MODULE else []
    log = tmp_path / "demo.log"
    with log.open("w") as output:
        demo = subprocess.Popen([str(REPO / "scripts/demo"), *arguments], cwd=REPO,
                                env={**os.environ, "PATH": f"{shims}:{os.environ['PATH']}"},
                                stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # The demo says where it serves once its Envoy is ready.
        wait_until(lambda: "Switchblade is serving MCP at:  http://127.0.0.1:10000/mcp" in log.read_text(),
                   "the demo's MCP URL", timeout=300, process=demo)
        headers = {"content-type": "application/json"}
        listed = httpx2.post(MCP_URL, headers=headers, timeout=10,
                             content='{"jsonrpc":"2.0","id":1,"method":"tools/list"}').json()
        assert [tool["name"] for tool in listed["result"]["tools"]] == [
            "CatalogService_Search", "CatalogService_GetItem", "UserService_GetUser"]
        called = httpx2.post(MCP_URL, headers=headers, timeout=10, content=(
            '{"jsonrpc":"2.0","id":2,"method":"tools/call",'
            '"params":{"name":"UserService_GetUser","arguments":{"user_id":1}}}')).json()
        assert called["result"]["structuredContent"]["username"] == "ada"
        refused = httpx2.post(MCP_URL, headers=headers, timeout=10, content=(
            '{"jsonrpc":"2.0","id":3,"method":"tools/call",'
            '"params":{"name":"UserService_GetUser","arguments":{"user_id":{"$ne":null}}}}')).json()
        assert refused["result"]["isError"] is True
        assert not (tmp_path / "node-called").exists(), "scripts/demo ran node or npm"
    finally:
        os.killpg(demo.pid, signal.SIGTERM)
        demo.wait(timeout=30)
    wait_until(lambda: not any(port_in_use(port) for port in DEMO_PORTS), "the demo's ports freed", timeout=20)

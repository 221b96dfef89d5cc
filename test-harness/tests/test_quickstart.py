"""docs/quickstart.md, run as written: its commands and its client, in a directory of their own
(with the repository's builds where the page's first block puts them: the CLI on PATH as
`cargo install` leaves it, the .wasm under target/, Envoy in .venv). The service is the demo
upstream's InventoryService on the address the printed bootstrap names, 127.0.0.1:50051; the
page's fixed ports are held by this test alone across both sessions (the demo's test uses them
too), and the test skips when something else holds one of them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import httpx2
import pytest

import filter_build
from processes import REPO, free_port, port_in_use, wait_until

PAGE = REPO / "docs/quickstart.md"
PORTS = (10000, 9901, 50051)


def blocks() -> list[tuple[str, str]]:
    """The page's fenced blocks, in order: (language, text)."""
    return re.findall(r"^```(\w+)\n(.*?)^```$", PAGE.read_text(), re.MULTILINE | re.DOTALL)


def test_the_quick_start_serves_your_service_to_an_mcp_client(tmp_path: Path, fixed_ports: None) -> None:
    if filter_build.current() is not filter_build.WASM:
        pytest.skip("the quick start prints the Wasm filter's bootstrap; it runs in the --build wasm session")
    busy = [port for port in PORTS if port_in_use(port)]
    if busy:
        pytest.skip(f"the quick start's ports are in use: {busy}")
    found = blocks()
    assert [language for language, _ in found] == ["sh", "sh", "python", "sh"], found
    (_, setup), (_, serve), (_, client), (_, run_client) = found
    assert "cargo install --locked --path cli" in setup
    # What the first block leaves behind, from the suite's own builds.
    for name in ("target", "test-harness", ".venv"):
        (tmp_path / name).symlink_to(REPO / name)
    bin_dir = tmp_path / "cargo-bin"
    bin_dir.mkdir()
    (bin_dir / "switchblade").symlink_to(REPO / "target/release/switchblade")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    (tmp_path / "client.py").write_text(client)

    upstream = subprocess.Popen([str(REPO / "target/release/demo-upstream"), "--grpc", "127.0.0.1:50051",
                                 "--control", f"127.0.0.1:{free_port()}"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    envoy = subprocess.Popen(["bash", "-euo", "pipefail", "-c", serve], cwd=tmp_path, env=env,
                             start_new_session=True)
    try:
        assert envoy.wait(timeout=60) == 0, "the page's commands failed"
        wait_until(lambda: httpx2.get("http://127.0.0.1:9901/ready", timeout=1).status_code == 200,
                   "the quick start's Envoy", timeout=60)
        ran = subprocess.run(["bash", "-euo", "pipefail", "-c", run_client], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0, ran.stderr[-3000:]
        tools, stock = ran.stdout.splitlines()[:2]
        assert tools == "['InventoryService_GetStock', 'InventoryService_ListWarehouses', 'InventoryService_Reserve']"
        assert "'sku': 'SKU-0001'" in stock and "'warehouse': 'BER'" in stock, stock
    finally:
        # The page's Envoy runs in the background of the shell that started it, in its group.
        try:
            os.killpg(envoy.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        upstream.terminate()
        upstream.wait(timeout=10)
    wait_until(lambda: not any(port_in_use(port) for port in PORTS), "the quick start's ports freed", timeout=20)

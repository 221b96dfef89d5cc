"""A browser-based MCP client, in a real browser: Debian's Chromium (headless, driven by
playwright-core) opens a page that uses the official TypeScript SDK (bundled by esbuild) to
list and call tools through the bootstrap `switchblade config --allowed-origin` prints. From the
allowed origin it works; from another origin the browser refuses, and nothing reaches the
upstream."""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from processes import REPO, Envoy, Upstream, free_port
from test_envoy_configs import USERS, printed_bootstrap

CLIENT = REPO / "test-harness/clients/browser"
CHROMIUM = shutil.which("chromium")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (scripts/test installs Debian's chromium)")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The page and its bundle, as a web app would serve them."""
    site = tmp_path_factory.mktemp("site")
    shutil.copyfile(CLIENT / "index.html", site / "index.html")
    subprocess.run([str(CLIENT / "node_modules/.bin/esbuild"), "page.js", "--bundle", "--format=esm", "--log-level=warning",
                    f"--outfile={site / 'page.bundle.js'}"], cwd=CLIENT, check=True, timeout=60)
    return site


@pytest.fixture
def origins(site: Path) -> Iterator[tuple[str, str]]:
    """The page served from two origins: two ports of 127.0.0.1."""
    handler = functools.partial(Quiet, directory=str(site))
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        allowed, foreign = (f"http://127.0.0.1:{server.server_address[1]}" for server in servers)
        yield allowed, foreign
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *_args) -> None:
        pass


def test_a_web_app_from_an_allowed_origin_lists_and_calls_tools_and_another_is_refused(
        origins: tuple[str, str], upstream: Upstream) -> None:
    allowed, foreign = origins
    proxy = Envoy(upstream, bootstrap=yaml.safe_load(printed_bootstrap("--allowed-origin", allowed)),
                  name="envoy-browser").start()
    try:
        upstream.reset()
        run = subprocess.run(["node", "run.mjs", CHROMIUM, proxy.mcp_url, f"{allowed}/index.html",
                              f"{foreign}/index.html"], cwd=CLIENT, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-3000:]
        first, second = (json.loads(line) for line in run.stdout.splitlines())
        assert "ok" in first, first
        assert sorted(first["ok"]["tools"]) == ["CatalogService_GetItem", "CatalogService_Search", "UserService_GetUser"]
        assert first["ok"]["user"]["username"] == "ada"
        assert "error" in second and "Failed to fetch" in second["error"], second
        assert any("CORS policy" in line for line in second["console"]), second
        assert upstream.calls() == {f"/{USERS}/GetUser": 1}, "the foreign page's call never reached the upstream"
    finally:
        proxy.stop()

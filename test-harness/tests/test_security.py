"""The boundary: browser origins and host names (DNS-rebinding protection)."""

from __future__ import annotations

import pytest

from harness import Envoy, Mcp, Upstream, demo_plugin

CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "UserService_GetUser", "arguments": {"user_id": 1}}}


@pytest.fixture(scope="module")
def guarded(upstream: Upstream):
    plugin = demo_plugin()
    plugin["allowed_origins"] = ["https://chat.example.com"]
    proxy = Envoy(upstream, plugin, name="envoy-guarded")
    plugin["allowed_hosts"] = ["mcp.example.com", f"127.0.0.1:{proxy.port}"]
    proxy.plugin = plugin
    proxy.start()
    yield proxy
    proxy.stop()


@pytest.fixture
def mcp(guarded: Envoy, upstream: Upstream) -> Mcp:
    upstream.reset()
    return Mcp(guarded.mcp_url)


def forbidden(response, message: str) -> None:
    assert response.status_code == 403, response.text
    assert response.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}


def test_requests_without_an_origin_are_served(mcp: Mcp) -> None:
    assert mcp.post(CALL).json()["result"]["isError"] is False


def test_an_allowed_origin_is_served(mcp: Mcp) -> None:
    assert mcp.post(CALL, headers={"origin": "https://chat.example.com"}).json()["result"]["isError"] is False


@pytest.mark.parametrize("origin", ["http://evil.example", "https://chat.example.com.evil.example", "null", "http://127.0.0.1"])
def test_a_foreign_origin_is_refused_before_anything_happens(mcp: Mcp, upstream: Upstream, origin: str) -> None:
    forbidden(mcp.post(CALL, headers={"origin": origin}),
              f'Forbidden: origin "{origin}" is not allowed to call this MCP endpoint')
    assert upstream.total_calls() == 0


def test_a_rebinding_page_is_refused_by_its_host_name(mcp: Mcp, upstream: Upstream, guarded: Envoy) -> None:
    """DNS rebinding: evil.example now resolves here, and the page's requests say so."""
    host = f"evil.example:{guarded.port}"
    forbidden(mcp.post(CALL, headers={"host": host}), f'Forbidden: host "{host}" is not served here')
    assert mcp.post(CALL, headers={"host": "mcp.example.com"}).json()["result"]["isError"] is False
    assert upstream.total_calls() == 1


def test_by_default_every_browser_origin_is_refused(envoy: Envoy, upstream: Upstream) -> None:
    upstream.reset()
    forbidden(Mcp(envoy.mcp_url).post(CALL, headers={"origin": "http://localhost:3000"}),
              'Forbidden: origin "http://localhost:3000" is not allowed to call this MCP endpoint')
    assert upstream.total_calls() == 0

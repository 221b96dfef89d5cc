"""The boundary: browser origins and host names (DNS-rebinding protection), and limits on
what one request may cost."""

from __future__ import annotations

import pytest

from filter_build import demo_plugin
from mcp_client import Mcp
from processes import Envoy, Upstream

CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "UserService_GetUser", "arguments": {"user_id": 1}}}


@pytest.fixture(scope="module")
def guarded(upstream: Upstream):
    plugin = demo_plugin()
    plugin["allowed_origins"] = ["https://chat.example.com"]
    plugin["limits"] = {"max_request_message_bytes": 2000, "max_response_bytes": 300}
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


def test_by_default_every_other_browser_origin_is_refused(envoy: Envoy, upstream: Upstream) -> None:
    upstream.reset()
    for origin in ("http://localhost:3000", f"http://127.0.0.1:{envoy.port + 1}", f"http://localhost:{envoy.port}"):
        forbidden(Mcp(envoy.mcp_url).post(CALL, headers={"origin": origin}),
                  f'Forbidden: origin "{origin}" is not allowed to call this MCP endpoint')
    assert upstream.total_calls() == 0


def test_a_page_from_this_loopback_origin_is_served_by_default(envoy: Envoy, upstream: Upstream) -> None:
    """Origin and Host the same loopback origin: a local client (the conformance suite's
    browser case), not DNS rebinding, whose Origin would carry the attacker's name."""
    upstream.reset()
    client = Mcp(envoy.mcp_url)
    for origin, host in ((f"http://127.0.0.1:{envoy.port}", None), (f"http://localhost:{envoy.port}", f"localhost:{envoy.port}")):
        headers = {"origin": origin} | ({"host": host} if host else {})
        assert client.post(CALL, headers=headers).json()["result"]["isError"] is False, origin
    assert upstream.total_calls() == 2


def test_once_origins_are_listed_the_list_alone_decides(mcp: Mcp, upstream: Upstream, guarded: Envoy) -> None:
    """The loopback page served by default is not in this endpoint's allowlist: refused."""
    origin = f"http://127.0.0.1:{guarded.port}"
    forbidden(mcp.post(CALL, headers={"origin": origin}),
              f'Forbidden: origin "{origin}" is not allowed to call this MCP endpoint')
    assert upstream.total_calls() == 0


def too_large(response, size: int, limit: int = 256 * 1024) -> None:
    assert response.status_code == 413, response.text
    assert response.json()["error"] == {
        "code": -32600, "message": f"Payload Too Large: the request has {size} bytes; the limit is {limit}"}


def test_a_body_over_the_limit_is_413_before_it_is_read(mcp: Mcp, upstream: Upstream) -> None:
    padding = "x" * (300 * 1024)
    body = '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"%s"}}' % padding
    too_large(mcp.post(body), len(body))
    assert upstream.total_calls() == 0


def test_fifty_megabytes_are_refused_by_content_length(mcp: Mcp) -> None:
    body = b"[" + b"1," * (25 * 1024 * 1024) + b"1]"
    too_large(mcp.post(body), len(body))


def test_a_chunked_body_is_refused_once_it_outgrows_the_limit(mcp: Mcp) -> None:
    def chunks():
        yield b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"'
        # 320 KiB: over the limit, yet small enough to be sent whole before the answer is
        # read (a server may close a connection whose upload it has refused).
        for _ in range(20):
            yield b"y" * 16384
        yield b'"}}'
    response = mcp.http.post(mcp.url, content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413, response.text
    assert response.json()["error"]["message"].startswith("Payload Too Large: the request has ")


def test_nesting_ten_thousand_deep_is_refused(mcp: Mcp) -> None:
    body = '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":%s}}' % ("[" * 10000 + "]" * 10000)
    response = mcp.post(body)
    assert response.status_code == 400
    assert response.json()["error"] == {"code": -32600, "message": "Invalid Request: JSON nested deeper than 100 levels"}


def test_arguments_that_encode_over_the_limit_are_a_tool_error(mcp: Mcp, upstream: Upstream) -> None:
    result = mcp.call_tool("CatalogService_Search", {"query": "q" * 3000})
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith(
        "Invalid arguments for tool CatalogService_Search: the arguments encode to 3003 bytes; the limit is 2000.")
    assert upstream.total_calls() == 0


def test_a_response_over_the_limit_is_cut_off(mcp: Mcp) -> None:
    result = mcp.call_tool("CatalogService_Search", {})
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert text.startswith("demo.catalog.v1.CatalogService/Search failed with gRPC status RESOURCE_EXHAUSTED (8): the response has ")
    assert text.endswith("bytes; the limit is 300 (limits.max_response_bytes)")
    # Small answers still pass.
    assert mcp.call_tool("UserService_GetUser", {"user_id": 1})["isError"] is False

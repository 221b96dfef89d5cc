"""Hostile input through a real Envoy, each case with its exact answer. After the matrix Envoy
is healthy, its Wasm VMs were never recreated, and the upstream received no call."""

from __future__ import annotations

import json

import httpx2
import pytest

from mcp_client import Mcp
from processes import Envoy, Upstream

MODERN = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "UserService_GetUser"}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def call(arguments: str, tool: str = "UserService_GetUser") -> str:
    return '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"%s","arguments":%s}}' % (tool, arguments)


# (case, body, extra headers, HTTP status, JSON-RPC error code, or None for a tool error)
PROTOCOL_CASES = [
    ("invalid UTF-8", b"\xff\xfe\xfd", {}, 400, -32700),
    ("invalid UTF-8 inside a string", b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"\xc3\x28"}', {}, 400, -32700),
    ("trailing garbage after valid JSON", b'{"jsonrpc":"2.0","id":1,"method":"ping"} x', {}, 400, -32700),
    ("two JSON documents", b'{"jsonrpc":"2.0","id":1,"method":"ping"}{"a":1}', {}, 400, -32700),
    ("an empty body", b"", {}, 400, -32700),
    ("whitespace only", b" \n\t ", {}, 400, -32700),
    ("NaN literal", b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}', {}, 400, -32700),
    ("a number beyond f64", b'{"jsonrpc":"2.0","id":1e400,"method":"ping"}', {}, 400, -32700),
    ("nesting 10,000 deep", b'{"a":' * 10000 + b"1" + b"}" * 10000, {}, 400, -32600),
    ("a fractional id", b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', {}, 400, -32600),
    ("a null id", b'{"jsonrpc":"2.0","id":null,"method":"ping"}', {}, 400, -32600),
    ("an object id", b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', {}, 400, -32600),
    ("a boolean id", b'{"jsonrpc":"2.0","id":true,"method":"ping"}', {}, 400, -32600),
    ("jsonrpc 1.0", b'{"jsonrpc":"1.0","id":1,"method":"ping"}', {}, 400, -32600),
    ("no jsonrpc", b'{"id":1,"method":"ping"}', {}, 400, -32600),
    ("a numeric method", b'{"jsonrpc":"2.0","id":1,"method":42}', {}, 400, -32600),
    ("no method", b'{"jsonrpc":"2.0","id":1,"params":{}}', {}, 400, -32600),
    ("a bare string", b'"ping"', {}, 400, -32600),
    ("a duplicate id", b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', {}, 400, -32600),
    ("a duplicate tool name", b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"UserService_GetUser","name":"x"}}', {}, 400, -32600),
    ("a batch in 2025-11-25", b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', {"mcp-protocol-version": "2025-11-25"}, 400, -32600),
    ("an empty batch", b"[]", {}, 400, -32600),
    ("a batch in 2026-07-28", b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', {"mcp-protocol-version": "2026-07-28"}, 400, -32600),
    ("params as an array", b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[1]}', {}, 200, -32602),
    ("an unknown method", b'{"jsonrpc":"2.0","id":1,"method":"admin/shutdown"}', {}, 200, -32601),
    ("an unknown tool", call("{}", "DropAllTables").encode(), {}, 200, -32602),
    ("an unsupported version", b'{"jsonrpc":"2.0","id":1,"method":"ping"}', {"mcp-protocol-version": "2099-01-01"}, 400, -32022),
    ("2026-07-28 without _meta", call('{"user_id":1}').encode(), MODERN, 400, -32602),
    ("2026-07-28 naming another tool in the header",
     json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "CatalogService_Search", "arguments": {}, "_meta": META}}).encode(),
     MODERN, 400, -32020),
    ("a foreign Origin", call('{"user_id":1}').encode(), {"origin": "http://evil.example"}, 403, -32600),
    ("text/plain", call('{"user_id":1}').encode(), {"content-type": "text/plain"}, 415, -32600),
    ("Accept: text/html", call('{"user_id":1}').encode(), {"accept": "text/html"}, 406, -32600),
]

# (case, arguments, the start of the tool error after "Invalid arguments for tool UserService_GetUser: ")
ARGUMENT_CASES = [
    ("a NoSQL operator", '{"user_id":{"$ne":null}}', "at `user_id`: expected a 32-bit integer"),
    ("a SQL fragment", '{"user_id":"1; DROP TABLE users"}', "at `user_id`: expected a 32-bit integer"),
    ("one past int32", '{"user_id":2147483648}', "at `user_id`: expected a 32-bit integer"),
    ("a huge negative", '{"user_id":-9223372036854775809}', "at `user_id`: expected a 32-bit integer"),
    ("a boolean", '{"user_id":true}', "at `user_id`: expected a 32-bit integer"),
    ("a list", '{"user_id":[1]}', "at `user_id`: expected a 32-bit integer"),
    ("a fraction", '{"user_id":1.5}', "at `user_id`: expected a 32-bit integer"),
    ("a duplicate key", '{"user_id":1,"user_id":{"$gt":0}}', "duplicate key `user_id`"),
    ("an extra field", '{"user_id":1,"is_admin":true}', "unknown field `is_admin`"),
    ("a string for the arguments", '"user_id=1"', "arguments must be a JSON object, got a string"),
    ("a list for the arguments", "[1]", "arguments must be a JSON object, got an array"),
]
SEARCH_CASES = [
    ("an operator at depth", '{"filters":{"category":{"$in":[1,2]}}}', "at `filters.category`: expected one of CATEGORY_UNSPECIFIED"),
    ("an exponent as a 64-bit string", '{"filters":{"max_price_minor":"1e3"}}', "at `filters.max_price_minor`: expected a 64-bit integer"),
    ("NaN as a page size", '{"page_size":"NaN"}', "at `page_size`: expected a 32-bit integer"),
    ("an enum number not defined", '{"filters":{"category":99}}', "at `filters.category`: expected one of CATEGORY_UNSPECIFIED, CATEGORY_HARDWARE, CATEGORY_BOOKS, CATEGORY_OUTDOOR, got 99 (give the value's name, not its number)"),
]


@pytest.fixture(scope="module")
def target(upstream: Upstream):
    proxy = Envoy(upstream, name="envoy-matrix").start()
    upstream.reset()
    marks_before = proxy.filter_marks()
    yield proxy, upstream
    # After everything: healthy, the same Wasm VMs, and no hostile input reached the upstream.
    assert proxy.is_ready()
    assert Mcp(proxy.mcp_url).request("ping")["result"] == {}
    assert proxy.filter_marks() == marks_before, "the filter failed (a Wasm VM was recreated, or Envoy restarted)"
    assert upstream.total_calls() == 0
    proxy.stop()


def test_the_matrix_has_at_least_forty_cases() -> None:
    assert len(PROTOCOL_CASES) + len(ARGUMENT_CASES) + len(SEARCH_CASES) >= 40


@pytest.mark.parametrize(("case", "body", "headers", "status", "code"), PROTOCOL_CASES, ids=[c[0] for c in PROTOCOL_CASES])
def test_protocol_level(target, case, body, headers, status, code) -> None:
    envoy, _ = target
    response = Mcp(envoy.mcp_url).post(body, headers=headers)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


@pytest.mark.parametrize(("case", "arguments", "expected"), ARGUMENT_CASES, ids=[c[0] for c in ARGUMENT_CASES])
def test_arguments(target, case, arguments, expected) -> None:
    envoy, _ = target
    result = Mcp(envoy.mcp_url).post(call(arguments)).json()["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith(f"Invalid arguments for tool UserService_GetUser: {expected}")


@pytest.mark.parametrize(("case", "arguments", "expected"), SEARCH_CASES, ids=[c[0] for c in SEARCH_CASES])
def test_arguments_at_depth(target, case, arguments, expected) -> None:
    envoy, _ = target
    result = Mcp(envoy.mcp_url).post(call(arguments, "CatalogService_Search")).json()["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith(f"Invalid arguments for tool CatalogService_Search: {expected}")


def test_header_values_that_are_not_utf8_are_read_as_bytes(target) -> None:
    """Any header reaches the filter; the SDK's string readers would panic on such a value
    and take the VM (and every later request) down with it."""
    envoy, _ = target
    mcp = Mcp(envoy.mcp_url)
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    response = mcp.post(ping, headers={"x-note": b"caf\xe9"})
    assert (response.status_code, response.json()["result"]) == (200, {})
    response = mcp.post(ping, headers={"mcp-protocol-version": b"2025-11-25\xff"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32022
    assert response.json()["error"]["data"]["requested"] == "2025-11-25\ufffd"
    # A request the filter passes through is read too (its method and path).
    assert httpx2.get(f"{envoy.url}/calls", headers={"x-note": b"\xff\xfe"}, timeout=5).status_code == 200

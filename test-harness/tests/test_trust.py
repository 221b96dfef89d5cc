"""Callers cannot choose who they are: what a client writes into a request (an
`X-Forwarded-For`, an encoded alias of a tool's name, a request id, a progress token) never
makes it another caller, lets it past a rule in front of the filter, or costs the gateway more
than its bounds. Each test here failed before the fix it stands for."""

from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from filter_build import demo_plugin
from mcp_client import Mcp
from processes import Envoy, Upstream, demo_config, http_filters

GET_ITEM = {"name": "CatalogService_GetItem", "arguments": {"id": "1"}}


def encoded(value: str) -> str:
    """SEP-2243's sentinel form of a header value."""
    return f"=?base64?{base64.b64encode(value.encode()).decode()}?="


def rbac_denying_tool(tool: str) -> dict[str, Any]:
    """Envoy's RBAC filter, denying 2026-07-28 calls of one tool by its `Mcp-Name` header: the
    rule the protocol's headers exist for."""
    return {
        "name": "envoy.filters.http.rbac",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC",
            "rules": {
                "action": "DENY",
                "policies": {
                    "no-get-item": {
                        "permissions": [{"header": {"name": "mcp-name", "string_match": {"exact": tool}}}],
                        "principals": [{"any": True}],
                    }
                },
            },
        },
    }


@pytest.fixture(scope="module")
def behind_rbac(upstream: Upstream):
    bootstrap = demo_config()
    http_filters(bootstrap).insert(0, rbac_denying_tool("CatalogService_GetItem"))
    proxy = Envoy(upstream, demo_plugin(), bootstrap=bootstrap, name="envoy-rbac").start()
    yield proxy
    proxy.stop()


def test_an_encoded_alias_of_a_plain_tool_name_does_not_slip_past_rbac(behind_rbac: Envoy, upstream: Upstream) -> None:
    upstream.reset()
    mcp = Mcp(behind_rbac.mcp_url)
    # The plain name is what RBAC sees: denied in front of the filter.
    denied = mcp.modern("tools/call", GET_ITEM)
    assert (denied.status_code, denied.text) == (403, "RBAC: access denied")
    # Its encoded alias does not match the rule; the filter refuses it, as SEP-2243 has a value
    # that can be sent plain sent plain.
    alias = mcp.modern("tools/call", GET_ITEM, headers={"mcp-name": encoded("CatalogService_GetItem")})
    assert alias.status_code == 400, alias.text
    assert alias.json()["error"] == {
        "code": -32020,
        "message": "Header mismatch: the Mcp-Name header encodes \"CatalogService_GetItem\" as =?base64?...?=, "
                   "which is only for values that cannot be sent plain; send Mcp-Name: CatalogService_GetItem",
    }
    assert upstream.total_calls() == 0
    # Another tool passes RBAC and the filter, plain.
    allowed = mcp.modern("tools/call", {"name": "UserService_GetUser", "arguments": {"user_id": 1}})
    assert allowed.status_code == 200 and allowed.json()["result"]["isError"] is False, allowed.text


CATALOG = "demo.catalog.v1.CatalogService"


def memory(envoy: Envoy) -> tuple[int, int]:
    """What Envoy's allocator holds (`server.memory_allocated`), and the Wasm VM's linear
    memory (0 for the module)."""
    stats = envoy.stats()
    return stats["server.memory_allocated"], stats.get("wasmcustom.switchblade.vm_memory_bytes", 0)


@pytest.fixture(scope="module")
def streaming(upstream: Upstream):
    plugin = demo_plugin()
    plugin["services"][CATALOG]["streaming"] = True
    proxy = Envoy(upstream, plugin, name="envoy-trust-streams").start()
    yield proxy
    proxy.stop()


def watch_with_progress(token: Any, id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "CatalogService_WatchItems", "arguments": {"ids": ["1"]}, "_meta": {"progressToken": token}}}


def test_a_long_progress_token_is_refused_and_progress_cannot_amplify(streaming: Envoy, upstream: Upstream) -> None:
    """A 200 KiB token copied into each of a stream's 100 progress notifications made 20 MB of
    answer from one request, held whole in the Wasm VM. The token is bounded now, and the
    notifications count against the answer's bound: 20 such requests at once, five times over,
    leave Envoy's memory and the VM's flat."""
    upstream.reset()
    upstream.stream_mode("many")  # 10,000 messages, as fast as the upstream can
    mcp = Mcp(streaming.mcp_url)
    headers = {"mcp-protocol-version": "2025-11-25"}
    try:
        long_token = "t" * (200 * 1024)
        with ThreadPoolExecutor(20) as pool:
            answers = list(pool.map(lambda id: mcp.post(watch_with_progress(long_token, id), headers), range(20)))
        for answer in answers:
            assert answer.status_code == 200, answer.text[:300]
            assert answer.json()["error"] == {"code": -32602, "message": (
                "Invalid params: params._meta.progressToken is 204800 bytes long; "
                "a progress token is a string of at most 128 bytes or an integer")}
        assert upstream.streams()["opened"] == 0
        # The longest token taken, on every message of the stream: the answer stays within
        # limits.max_response_bytes, and memory stays where the first rounds put it.
        samples = []
        for _ in range(5):
            with ThreadPoolExecutor(20) as pool:
                answers = list(pool.map(lambda id: Mcp(streaming.mcp_url).post(watch_with_progress("p" * 128, id), headers),
                                        range(20)))
            for answer in answers:
                assert answer.status_code == 200 and answer.headers["content-type"] == "text/event-stream"
                events = [line for line in answer.text.splitlines() if line.startswith("data: ")]
                assert len(events) == 101, len(events)  # 100 notifications, then the result
                assert len(answer.content) < 4 * 1024 * 1024
            samples.append(memory(streaming))
        allocated = [sample[0] for sample in samples[2:]]
        vm = [sample[1] for sample in samples[2:]]
        assert max(allocated) - min(allocated) < 16 * 2**20, f"Envoy's memory kept growing: {samples}"
        assert max(vm) - min(vm) <= 8 * 2**20, f"the Wasm VM's memory kept growing: {samples}"
    finally:
        upstream.reset()

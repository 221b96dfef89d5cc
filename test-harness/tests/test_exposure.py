"""Exposure policy, user descriptor sets, metadata forwarding and hot reload, through a real
Envoy whose filter configuration is swapped while it runs."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import httpx2
import pytest

import filter_build
from filter_build import demo_plugin
from mcp_client import Mcp, is_deadline_error
from processes import REPO, Envoy, Upstream

CLI = REPO / "target/release/switchblade"
CATALOG = "demo.catalog.v1.CatalogService"
USERS = "demo.users.v1.UserService"
INVENTORY = "acme.inventory.v1.InventoryService"


def cli_config(*methods: str, extra: tuple[str, ...] = ()) -> dict:
    """What `switchblade config` prints for the acme inventory protos (not embedded in the .wasm)."""
    args = [str(CLI), "config", "-I", "test-harness/proto", "acme/inventory/v1/inventory.proto",
            "--service", f"{INVENTORY}=demo_grpc", *[f"--method={INVENTORY}/{m}" for m in methods], *extra]
    run = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def live(upstream: Upstream):
    """An Envoy of this module's own, whose configuration the tests swap."""
    proxy = Envoy(upstream, name="envoy-exposure").start()
    yield proxy
    proxy.stop()


@pytest.fixture
def swap(live: Envoy, upstream: Upstream):
    """Swaps `live` to a configuration for one test (with a fresh upstream count and no delay),
    and back to the demo's afterwards."""
    def apply(plugin) -> Mcp:
        assert live.swap_plugin(plugin), live.logs()[-3000:]
        upstream.reset()
        return Mcp(live.mcp_url)
    yield apply
    upstream.reset()
    assert live.swap_plugin(demo_plugin())


def names(mcp: Mcp) -> list[str]:
    return list(mcp.tools())


def test_all_exposes_every_unary_method_and_logs_each_skipped_streaming_one(live: Envoy) -> None:
    assert names(Mcp(live.mcp_url)) == ["CatalogService_Search", "CatalogService_GetItem", "UserService_GetUser"]
    assert (f"skipping server-streaming method {CATALOG}/WatchItems: set `streaming: true` on the service "
            "to expose its streaming methods") in live.logs()


def test_selected_exposes_exactly_the_listed_methods(swap, upstream: Upstream) -> None:
    mcp = swap({"services": {CATALOG: {"cluster": "demo_grpc", "expose": "selected", "methods": [f"{CATALOG}/GetItem"]},
                             USERS: {"cluster": "demo_grpc", "expose": "none"}}})
    assert names(mcp) == ["CatalogService_GetItem"]
    body = mcp.request("tools/call", {"name": "CatalogService_Search", "arguments": {}})
    assert body["error"]["code"] == -32602
    assert upstream.total_calls() == 0


def test_overrides_rename_describe_and_time_tools(swap, upstream: Upstream) -> None:
    mcp = swap({
        "services": {USERS: {"cluster": "demo_grpc", "timeout_ms": 5000}},
        "tools": {f"{USERS}/GetUser": {"name": "get_user", "title": "Find a user", "description": "Looks a user up.",
                                       "timeout_ms": 250, "annotations": {"readOnlyHint": True, "openWorldHint": False}}},
    })
    tool = mcp.tools()["get_user"]
    assert (tool["title"], tool["description"]) == ("Find a user", "Looks a user up.")
    assert tool["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
    upstream.delay(1500)
    started = time.monotonic()
    text = mcp.call_tool("get_user", {"user_id": 1})["content"][0]["text"]
    assert is_deadline_error(text, f"{USERS}/GetUser", 250), text
    assert time.monotonic() - started < 1.2, "the 250 ms override was not applied"


def test_headers_on_the_allowlist_are_forwarded_and_no_others(swap, upstream: Upstream) -> None:
    mcp = swap({"services": {USERS: {"cluster": "demo_grpc", "timeout_ms": 4000, "metadata": {"x-tenant": "acme"}}},
                "forward_headers": ["x-client-version", "x-request-id"]})
    headers = {"authorization": "Bearer token-1", "x-client-version": "7.1", "x-request-id": "req-42",
               "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
               "cookie": "session=secret", "x-api-key": "k", "x-tenant": "evil"}
    response = mcp.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                         "params": {"name": "UserService_GetUser", "arguments": {"user_id": 1}}}, headers=headers)
    assert response.json()["result"]["isError"] is False
    seen = upstream.metadata(f"/{USERS}/GetUser")
    assert seen["x-client-version"] == "7.1"
    assert "authorization" not in seen, "the client's token is never forwarded unlisted"
    assert seen["x-request-id"] == "req-42"
    assert seen["traceparent"] == headers["traceparent"]
    assert seen["x-tenant"] == "acme", "static metadata wins over a client's header"
    assert "cookie" not in seen and "x-api-key" not in seen


def test_a_tools_metadata_carries_its_arguments_values(swap, upstream: Upstream) -> None:
    """`tools.M.metadata`: fixed text over the service's, and an argument's value percent-encoded
    into it, as Google's `x-goog-request-params` wants; absent, the entry is not sent. A binary
    (`-bin`) entry's value is base64, which the upstream's gRPC decodes to the bytes."""
    catalog = "demo.catalog.v1.CatalogService"
    mcp = swap({"services": {catalog: {"cluster": "demo_grpc", "metadata": {"x-tenant": "acme", "x-region": "eu"}}},
                "tools": {f"{catalog}/Search": {"metadata": {"x-goog-request-params": "query={query}&size={page_size}",
                                                             "x-region": "eu-west-1", "x-trace-bin": "AAEC/w=="}}}})
    mcp.call_tool("CatalogService_Search", {"query": "stove/ultra light", "page_size": 3})
    seen = upstream.metadata(f"/{catalog}/Search")
    assert seen["x-goog-request-params"] == "query=stove%2Fultra%20light&size=3"
    assert (seen["x-tenant"], seen["x-region"]) == ("acme", "eu-west-1"), "the tool's key wins over the service's"
    assert seen["x-trace-bin"] == "000102ff", "binary metadata is its base64, which gRPC decodes"
    mcp.call_tool("CatalogService_Search", {"query": "stove"})
    assert "x-goog-request-params" not in upstream.metadata(f"/{catalog}/Search"), "page_size was absent"
    mcp.call_tool("CatalogService_GetItem", {"id": "1"})
    assert upstream.metadata(f"/{catalog}/GetItem")["x-region"] == "eu", "another tool keeps the service's"


def get_user_with_headers(mcp: Mcp, headers: list[tuple[str, str]]) -> httpx2.Response:
    """`UserService_GetUser` called with `headers` besides the MCP ones, as a list: a name may
    come more than once (`Mcp.post` takes a dict)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "UserService_GetUser", "arguments": {"user_id": 1}}})
    mcp_headers = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")]
    return mcp.http.post(mcp.url, content=body, headers=[*mcp_headers, *headers])


def test_a_header_on_the_allowlist_sent_twice_reaches_the_upstream_with_both_values(swap, upstream: Upstream) -> None:
    # The module once kept only one value: the core forwarded the first, and a write of the
    # routed call's headers replaces every value of a name.
    mcp = swap({"services": {USERS: {"cluster": "demo_grpc", "metadata": {"x-tenant": "acme"}}},
                "forward_headers": ["x-team", "x-tenant"]})
    response = get_user_with_headers(mcp, [("x-team", "red"), ("x-tenant", "evil"), ("x-team", "blue")])
    assert response.json()["result"]["isError"] is False, response.text
    seen = upstream.metadata(f"/{USERS}/GetUser")
    assert seen["x-team"] == "red, blue", "both values, in order (the upstream joins repeats)"
    assert seen["x-tenant"] == "acme", "static metadata wins over a client's header"


def test_a_header_on_the_allowlist_with_an_empty_value_is_forwarded_empty_once(swap, upstream: Upstream) -> None:
    mcp = swap({"services": {USERS: {"cluster": "demo_grpc"}}, "forward_headers": ["x-team"]})
    response = get_user_with_headers(mcp, [("x-team", "")])
    assert response.json()["result"]["isError"] is False, response.text
    assert upstream.metadata(f"/{USERS}/GetUser").get("x-team") == ""
    # Sent twice, one value empty: Envoy 1.40's module ABI cannot add an empty value (a write
    # of one removes the header), so the module forwards the other value only
    # (docs/compatibility.md).
    response = get_user_with_headers(mcp, [("x-team", ""), ("x-team", "blue")])
    assert response.json()["result"]["isError"] is False, response.text
    expected = "blue" if filter_build.current().name == "module" else ", blue"
    assert upstream.metadata(f"/{USERS}/GetUser").get("x-team") == expected


def test_nothing_is_forwarded_unless_listed(live: Envoy, upstream: Upstream) -> None:
    mcp = Mcp(live.mcp_url)
    # The demo forwards x-request-id (and the trace context, by default): other headers, the
    # client's token among them, stay behind.
    assert demo_plugin()["forward_headers"] == ["x-request-id"]
    upstream.reset()
    mcp.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": "UserService_GetUser", "arguments": {"user_id": 1}}},
             headers={"cookie": "session=secret", "x-anything": "1"})
    seen = upstream.metadata(f"/{USERS}/GetUser")
    assert "cookie" not in seen and "x-anything" not in seen


def test_the_tool_timeout_is_sent_as_the_grpc_deadline(swap, upstream: Upstream) -> None:
    mcp = swap({"services": {USERS: {"cluster": "demo_grpc", "timeout_ms": 1234}}})
    mcp.call_tool("UserService_GetUser", {"user_id": 1})
    assert upstream.metadata(f"/{USERS}/GetUser")["grpc-timeout"] == "1234m"


def test_a_user_descriptor_set_serves_a_service_the_wasm_does_not_embed(swap, upstream: Upstream) -> None:
    config = cli_config("GetStock", "ListWarehouses")
    mcp = swap(config)
    tools = mcp.tools()
    assert list(tools) == ["InventoryService_GetStock", "InventoryService_ListWarehouses"]
    assert tools["InventoryService_GetStock"]["description"] == "How many units of a SKU one warehouse holds."
    stock = mcp.call_tool("InventoryService_GetStock", {"sku": "SKU-0001", "warehouse": "BER"})
    assert stock["structuredContent"] == {"sku": "SKU-0001", "warehouse": "BER", "on_hand": 12, "reserved": 0}
    assert mcp.call_tool("InventoryService_ListWarehouses", {})["structuredContent"] == {"codes": ["BER", "LIS"]}
    refused = mcp.call_tool("InventoryService_GetStock", {"sku": "SKU-0001", "warehouse": {"$gt": ""}})
    assert refused["isError"] is True and "at `warehouse`" in refused["content"][0]["text"]
    assert upstream.calls() == {f"/{INVENTORY}/GetStock": 1, f"/{INVENTORY}/ListWarehouses": 1}


def test_the_cli_dry_run_shows_the_tools_the_filter_serves(tmp_path, live: Envoy, swap) -> None:
    config = cli_config("GetStock")
    path = tmp_path / "plugin.json"
    path.write_text(json.dumps(config))
    run = subprocess.run([str(CLI), "tools", str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    dry_run = json.loads(run.stdout)["tools"]
    mcp = swap(config)
    assert dry_run == mcp.request("tools/list")["result"]["tools"]


def test_the_cli_refuses_what_the_filter_would(tmp_path) -> None:
    run = subprocess.run(
        [str(CLI), "config", "-I", "test-harness/proto", "acme/inventory/v1/inventory.proto",
         "--service", f"{INVENTORY}=demo_grpc", f"--method={INVENTORY}/Nope"],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert f"service {INVENTORY} has no method Nope; its methods: GetStock, Reserve, ListWarehouses" in run.stderr


def test_a_rejected_swap_keeps_the_old_configuration_serving(live: Envoy) -> None:
    mcp = Mcp(live.mcp_url)
    before = names(mcp)
    bad = {"services": {CATALOG: {"cluster": "demo_grpc", "expose": "selected", "methods": [f"{CATALOG}/Nope"]}}}
    assert live.swap_plugin(bad) is False
    assert names(mcp) == before
    assert (f"invalid plugin configuration: at `services.{CATALOG}.methods[0]`: service {CATALOG} has no method "
            "Nope") in live.logs()
    assert mcp.call_tool("UserService_GetUser", {"user_id": 2})["isError"] is False


def test_hot_reload_adds_a_method_with_requests_in_flight_all_answered(swap, live: Envoy, upstream: Upstream) -> None:
    mcp = swap(cli_config("GetStock", "ListWarehouses"))
    assert "InventoryService_Reserve" not in mcp.tools()
    upstream.delay(150)  # keep calls in flight across the swap
    answers: list[tuple[int, dict]] = []
    stop = threading.Event()

    def load() -> None:
        client = Mcp(live.mcp_url)
        while not stop.is_set():
            response = client.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                    "params": {"name": "InventoryService_GetStock", "arguments": {"sku": "SKU-0004", "warehouse": "BER"}}})
            answers.append((response.status_code, response.json()))

    workers = [threading.Thread(target=load) for _ in range(4)]
    for worker in workers:
        worker.start()
    try:
        time.sleep(0.5)
        assert live.swap_plugin(cli_config("GetStock", "ListWarehouses", "Reserve"))
        time.sleep(0.5)
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=10)

    assert list(Mcp(live.mcp_url).tools()) == ["InventoryService_GetStock", "InventoryService_ListWarehouses", "InventoryService_Reserve"]
    assert len(answers) >= 8
    for status, body in answers:
        assert status == 200, body
        assert body["result"]["isError"] is False, body
        assert body["result"]["structuredContent"]["on_hand"] == 30
    upstream.reset()
    reserved = Mcp(live.mcp_url).call_tool("InventoryService_Reserve", {"sku": "SKU-0001", "warehouse": "LIS", "quantity": 5})
    assert "FAILED_PRECONDITION (9): only 3 units of SKU-0001 at LIS" in reserved["content"][0]["text"]

"""The systems the benchmark compares: ways to reach CatalogService/GetItem, and ways to read a
100-message server stream of CatalogService/WatchItems.

Every Envoy system is one bootstrap on the same binary, with one worker thread, one listener
and one HTTP/2 cluster to the same upstream; only the HTTP filters and the request differ.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

SERVICE = "demo.catalog.v1.CatalogService"
METHOD = "GetItem"
GRPC_PATH = f"/{SERVICE}/{METHOD}"
EMPTY_SERVICE = "test.kitchensink.v1.KitchenSinkService"
# Named as in the demo bootstrap: the harness's Envoy points a cluster of this name at the upstream.
CLUSTER = "demo_grpc"
# The payload every system sends: item 1, whose answer (~230 bytes of JSON) has a nested
# message, a repeated field, a map and a Timestamp.
ITEM_ID = 1
EXPECTED_NAME = "Switchblade multitool"
# GetItemRequest{id: ITEM_ID} in one gRPC frame: uncompressed, 2 bytes (field 1, varint).
GET_ITEM_FRAME = bytes([0, 0, 0, 0, 2, 0x08, ITEM_ID])
MCP_VERSION = "2025-11-25"
MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": MCP_VERSION,
}


def tools_call(tool: str, arguments: dict[str, Any] | None = None, modern: bool = False) -> str:
    params: dict[str, Any] = {"name": tool, "arguments": {"id": str(ITEM_ID)} if arguments is None else arguments}
    if modern:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        }
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, separators=(",", ":"))


# The streaming systems: WatchItems, which the upstream answers with STREAM_MESSAGES events as
# fast as they are taken (its stream mode `count=N`).
STREAM_METHOD = "WatchItems"
STREAM_PATH = f"/{SERVICE}/{STREAM_METHOD}"
STREAM_TOOL = f"CatalogService_{STREAM_METHOD}"
STREAM_MESSAGES = 100
STREAM_ARGUMENTS = {"ids": ["1"]}

# The stateless era (2026-07-28): the version, the method and the tool travel as headers too.
MODERN_VERSION = "2026-07-28"


def modern_headers(tool: str) -> dict[str, str]:
    return {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": "tools/call", "Mcp-Name": tool}


@dataclass
class System:
    key: str
    title: str
    # "grpc" systems are driven by grpc-bench; "http" systems by wrk with `path`, `body`, `headers`.
    client: str
    path: str = ""
    # The request body: text, or bytes (a gRPC frame) that wrk is given as hex.
    body: str | bytes = ""
    headers: dict[str, str] = field(default_factory=dict)
    # The HTTP filters of the Envoy bootstrap, given the descriptor set (base64) and the .wasm
    # path; None for the system without Envoy.
    filters: Callable[[str, str], list[dict[str, Any]]] | None = None
    # Checks one answer's body; returns what is wrong, or "".
    check: Callable[[str], str] = lambda body: ""
    # Whether every answer is a call to the upstream (not so for a floor answered by Envoy).
    reaches_upstream: bool = True
    # A floor: measured to show where a cost lies, not one of the compared systems.
    floor: bool = False
    # Runs the dynamic module (its Envoy needs the module's route and search path).
    module: bool = False
    # Another build than this checkout's (`--baseline`): its .wasm, or its module's .so.
    binary: Path | None = None
    # Messages each answer carries: STREAM_MESSAGES for the streaming systems.
    messages: int = 1


def router() -> dict[str, Any]:
    return {"name": "envoy.filters.http.router", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}


def transcoder(descriptor_set: str) -> dict[str, Any]:
    # auto_mapping serves POST /package.Service/Method with the request message as JSON, so
    # the demo proto needs no google.api.http annotations.
    return {"name": "envoy.filters.http.grpc_json_transcoder", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.grpc_json_transcoder.v3.GrpcJsonTranscoder",
        "proto_descriptor_bin": descriptor_set,
        "services": [SERVICE],
        "auto_mapping": True,
        "convert_grpc_status": True,
    }}


def mcp_bridge() -> dict[str, Any]:
    # Envoy's native MCP front: tools/call of GetItem becomes POST /<service>/GetItem with the
    # arguments as the JSON body, which grpc_json_transcoder then turns into the gRPC call.
    return {"name": "envoy.filters.http.mcp_json_rest_bridge", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.mcp_json_rest_bridge.v3.McpJsonRestBridge",
        "tool_config": {"tools": [{"name": METHOD, "http_rule": {"post": GRPC_PATH, "body": "*"}}]},
    }}


def switchblade_plugin() -> dict[str, Any]:
    return {
        "mcp_path": "/mcp",
        "server": {"name": "switchblade-bench"},
        "services": {
            SERVICE: {"cluster": CLUSTER, "timeout_ms": 5000},
            # For the dispatch floor: a method whose request and response are empty.
            EMPTY_SERVICE: {"cluster": CLUSTER, "timeout_ms": 5000, "expose": "selected", "methods": [f"{EMPTY_SERVICE}/Ping"]},
        },
    }


def streaming_plugin() -> dict[str, Any]:
    """The catalog with its streaming methods as tools, each stream gathered whole."""
    plugin = switchblade_plugin()
    plugin["services"][SERVICE]["streaming"] = True
    plugin["tools"] = {f"{SERVICE}/{STREAM_METHOD}": {"max_messages": 1000}}
    return plugin


def limited_plugin() -> dict[str, Any]:
    """The benchmark's catalog with rate limits and a cap in flight that never trigger: what the
    limits' bookkeeping costs on every call (#26)."""
    plugin = switchblade_plugin()
    plugin["limits"] = {"rules": [
        {"match": f"{SERVICE}/GetItem", "requests_per_second": 1000000, "burst": 1000000},
        {"match": SERVICE, "max_in_flight": 100000},
        {"match": "*", "requests_per_second": 1000000, "burst": 1000000},
    ]}
    return plugin


def switchblade(wasm: str, plugin: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [
        {"name": "switchblade", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
            "config": {
                "name": "switchblade", "root_id": "switchblade",
                "vm_config": {"vm_id": "switchblade", "runtime": "envoy.wasm.runtime.v8",
                              "code": {"local": {"filename": wasm}}},
                "configuration": {"@type": "type.googleapis.com/google.protobuf.StringValue",
                                  "value": json.dumps(plugin or switchblade_plugin())},
            }}},
        # As in envoy/demo.yaml: holds MCP requests back from the router while the filter
        # reads them (enabled on the /mcp route only).
        {"name": "envoy.filters.http.buffer", "disabled": True, "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer",
            "max_request_bytes": 1048576}},
    ]


# The module's route for the calls it forwards through Envoy's router (see envoy/module.yaml).
ROUTE_HEADER = "x-switchblade-cluster"


def switchblade_module(plugin: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Switchblade as a dynamic module: tool calls through Envoy's router, by the cluster header."""
    configured = {**(plugin or switchblade_plugin()), "routing": {"cluster_header": ROUTE_HEADER}}
    return [{"name": "switchblade", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter",
        "dynamic_module_config": {"name": "switchblade_module", "do_not_close": True,
                                  "metrics_namespace": "switchblade"},
        "filter_name": "switchblade",
        "filter_config": {"@type": "type.googleapis.com/google.protobuf.StringValue", "value": json.dumps(configured)},
    }}]


def stream_result(body: str) -> str:
    result = rpc_result(body)
    if result is None or result.get("isError"):
        return f"not a tool result: {body[:300]}"
    end = result.get("structuredContent", {}).get("end")
    expected = {"reason": "complete", "count": STREAM_MESSAGES}
    return "" if end == expected else f"the stream ended {end}, not {expected}: {body[:300]}"


def streamed_array(body: str) -> str:
    try:
        messages = json.loads(body)
    except ValueError:
        return f"not a JSON array: {body[:300]}"
    count = len(messages) if isinstance(messages, list) else 0
    return "" if count == STREAM_MESSAGES else f"{count} messages, not {STREAM_MESSAGES}: {body[:300]}"


def has_item(body: str) -> str:
    return "" if EXPECTED_NAME in body else f"no item {ITEM_ID} in the answer: {body[:300]}"


def rpc_result(body: str) -> dict[str, Any] | None:
    """The `result` of a JSON-RPC answer, or None when the answer has none."""
    try:
        result = json.loads(body)["result"]
    except (ValueError, KeyError, TypeError):
        return None
    return result if isinstance(result, dict) else None


def empty_result(body: str) -> str:
    result = rpc_result(body)
    if result is None:
        return f"not a JSON-RPC result: {body[:300]}"
    return "" if result.get("isError") is False or result == {} else f"unexpected result: {body[:300]}"


def mcp_result(structured: bool) -> Callable[[str], str]:
    def check(body: str) -> str:
        result = rpc_result(body)
        if result is None:
            return f"not a JSON-RPC result: {body[:300]}"
        if result.get("isError"):
            return f"tool error: {body[:300]}"
        if structured and result.get("structuredContent", {}).get("name") != EXPECTED_NAME:
            return f"no item {ITEM_ID} in structuredContent: {body[:300]}"
        return has_item(json.dumps(result))
    return check


SYSTEMS = [
    System("a", "direct gRPC (no Envoy)", "grpc"),
    System("b", "Envoy gRPC proxy", "grpc", filters=lambda descriptors, wasm: [router()]),
    System("c", "Envoy grpc_json_transcoder (REST)", "http", path=GRPC_PATH,
           body=json.dumps({"id": str(ITEM_ID)}), headers={"Content-Type": "application/json"},
           filters=lambda descriptors, wasm: [transcoder(descriptors), router()], check=has_item),
    System("d", "Envoy mcp_json_rest_bridge + grpc_json_transcoder (MCP)", "http", path="/mcp",
           body=tools_call(METHOD), headers=MCP_HEADERS,
           filters=lambda descriptors, wasm: [mcp_bridge(), transcoder(descriptors), router()],
           check=mcp_result(structured=False)),
    System("e", "Switchblade (MCP)", "http", path="/mcp",
           body=tools_call("CatalogService_GetItem"), headers=MCP_HEADERS,
           filters=lambda descriptors, wasm: [*switchblade(wasm), router()],
           check=mcp_result(structured=True)),
    System("h", "Switchblade as a dynamic module (MCP)", "http", path="/mcp",
           body=tools_call("CatalogService_GetItem"), headers=MCP_HEADERS,
           filters=lambda descriptors, wasm: [*switchblade_module(), router()],
           check=mcp_result(structured=True), module=True),
    System("i", "Switchblade, stateless era (MCP 2026-07-28)", "http", path="/mcp",
           body=tools_call("CatalogService_GetItem", modern=True), headers=modern_headers("CatalogService_GetItem"),
           filters=lambda descriptors, wasm: [*switchblade(wasm), router()],
           check=mcp_result(structured=True)),
    # (e) and (h) with rate limits that never trigger.
    System("k", "Switchblade with rate limits that never trigger (MCP)", "http", path="/mcp",
           body=tools_call("CatalogService_GetItem"), headers=MCP_HEADERS,
           filters=lambda descriptors, wasm: [*switchblade(wasm, limited_plugin()), router()],
           check=mcp_result(structured=True)),
    System("l", "Switchblade as a dynamic module with rate limits that never trigger (MCP)", "http", path="/mcp",
           body=tools_call("CatalogService_GetItem"), headers=MCP_HEADERS,
           filters=lambda descriptors, wasm: [*switchblade_module(limited_plugin()), router()],
           check=mcp_result(structured=True), module=True),
    # A 100-message server stream: the REST transcoder streams it as a JSON array; Switchblade
    # gathers it into one tool result.
    System("p", "Envoy grpc_json_transcoder, a 100-message server stream (REST)", "http", path=STREAM_PATH,
           body=json.dumps(STREAM_ARGUMENTS), headers={"Content-Type": "application/json"},
           filters=lambda descriptors, wasm: [transcoder(descriptors), router()], check=streamed_array,
           messages=STREAM_MESSAGES),
    System("q", "Switchblade as a dynamic module, a 100-message server stream (MCP)", "http", path="/mcp",
           body=tools_call(STREAM_TOOL, STREAM_ARGUMENTS), headers=MCP_HEADERS,
           filters=lambda descriptors, wasm: [*switchblade_module(streaming_plugin()), router()],
           check=stream_result, module=True, messages=STREAM_MESSAGES),
    System("r", "Switchblade, a 100-message server stream (MCP)", "http", path="/mcp",
           body=tools_call(STREAM_TOOL, STREAM_ARGUMENTS), headers=MCP_HEADERS,
           filters=lambda descriptors, wasm: [*switchblade(wasm, streaming_plugin()), router()],
           check=stream_result, messages=STREAM_MESSAGES),
    # Floors, to show where Switchblade's cost lies: the filter answering by itself, and a call
    # with nothing to transcode (the cost of one upstream call as an HTTP callout).
    System("f", "floor: Switchblade answers MCP ping (no upstream call)", "http", path="/mcp",
           body=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}), headers=MCP_HEADERS,
           filters=lambda descriptors, wasm: [*switchblade(wasm), router()],
           check=empty_result, reaches_upstream=False, floor=True),
    System("g", "floor: Switchblade tools/call of an Empty→Empty method", "http", path="/mcp",
           body=tools_call("KitchenSinkService_Ping", {}), headers=MCP_HEADERS,
           filters=lambda descriptors, wasm: [*switchblade(wasm), router()],
           check=empty_result, floor=True),
    System("m", "floor: Switchblade as a dynamic module, tools/call of an Empty→Empty method", "http",
           path="/mcp", body=tools_call("KitchenSinkService_Ping", {}), headers=MCP_HEADERS,
           filters=lambda descriptors, wasm: [*switchblade_module(), router()],
           check=empty_result, floor=True, module=True),
    # Envoy's own floor for an MCP system's transport, with no filter at all: the gRPC call
    # itself (GetItem of item 1, one frame) sent over HTTP/1.1 as the MCP clients send theirs,
    # and routed to the same HTTP/2 upstream as (b); the answer comes back over HTTP/1.1 too.
    System("n", "floor: Envoy routes the gRPC call sent over HTTP/1.1 (no filter)", "http", path=GRPC_PATH,
           body=GET_ITEM_FRAME, headers={"Content-Type": "application/grpc", "TE": "trailers"},
           filters=lambda descriptors, wasm: [router()], check=has_item, floor=True),
    System("o", "floor: the dynamic module in the chain, passing (n)'s gRPC call through", "http",
           path=GRPC_PATH, body=GET_ITEM_FRAME, headers={"Content-Type": "application/grpc", "TE": "trailers"},
           filters=lambda descriptors, wasm: [*switchblade_module(), router()], check=has_item, floor=True,
           module=True),
]


def baseline_systems(checkout: Path) -> list[System]:
    """(E), (H), (K), (L), (Q) and (R): (e), (h), (k), (l), (q) and (r) as another checkout builds
    them (`--baseline`), to measure a change in the same rounds as the code before it."""
    wasm, module = baseline_builds(checkout)
    return [
        System("E", f"Switchblade (MCP), baseline {checkout}", "http", path="/mcp",
               body=tools_call("CatalogService_GetItem"), headers=MCP_HEADERS,
               filters=lambda descriptors, _wasm: [*switchblade(str(wasm)), router()],
               check=mcp_result(structured=True), binary=wasm),
        System("H", f"Switchblade as a dynamic module (MCP), baseline {checkout}", "http", path="/mcp",
               body=tools_call("CatalogService_GetItem"), headers=MCP_HEADERS,
               filters=lambda descriptors, _wasm: [*switchblade_module(), router()],
               check=mcp_result(structured=True), module=True, binary=module),
        System("K", f"Switchblade with rate limits that never trigger (MCP), baseline {checkout}", "http",
               path="/mcp", body=tools_call("CatalogService_GetItem"), headers=MCP_HEADERS,
               filters=lambda descriptors, _wasm: [*switchblade(str(wasm), limited_plugin()), router()],
               check=mcp_result(structured=True), binary=wasm),
        System("L", f"Switchblade as a dynamic module with rate limits that never trigger (MCP), baseline {checkout}",
               "http", path="/mcp", body=tools_call("CatalogService_GetItem"), headers=MCP_HEADERS,
               filters=lambda descriptors, _wasm: [*switchblade_module(limited_plugin()), router()],
               check=mcp_result(structured=True), module=True, binary=module),
        System("Q", f"Switchblade as a dynamic module, a 100-message server stream (MCP), baseline {checkout}",
               "http", path="/mcp", body=tools_call(STREAM_TOOL, STREAM_ARGUMENTS), headers=MCP_HEADERS,
               filters=lambda descriptors, _wasm: [*switchblade_module(streaming_plugin()), router()],
               check=stream_result, module=True, messages=STREAM_MESSAGES, binary=module),
        System("R", f"Switchblade, a 100-message server stream (MCP), baseline {checkout}", "http", path="/mcp",
               body=tools_call(STREAM_TOOL, STREAM_ARGUMENTS), headers=MCP_HEADERS,
               filters=lambda descriptors, _wasm: [*switchblade(str(wasm), streaming_plugin()), router()],
               check=stream_result, messages=STREAM_MESSAGES, binary=wasm),
    ]


# The request the search systems make of every catalog: words that match some tools of each.
SEARCH_QUERY = "get the item count of method 42"


def tools_found(body: str) -> str:
    result = rpc_result(body) or {}
    tools = (result.get("structuredContent") or {}).get("tools")
    if result.get("isError") or not isinstance(tools, list):
        return f"not a search_tools result: {body[:300]}"
    return "" if tools else "a search that found nothing"


def search_system(key: str, title: str, plugin: dict[str, Any] | None, module: bool = False,
                  build: Path | None = None) -> System:
    """Switchblade answering a `search_tools` call (no upstream call) over the catalog of
    `plugin` in search mode; `build` is another checkout's .wasm or module (`--baseline`)."""
    searching = {**(plugin or switchblade_plugin()), "discovery": "search"}

    def filters(descriptors: str, wasm: str) -> list[dict[str, Any]]:
        if module:
            return [*switchblade_module(searching), router()]
        return [*switchblade(str(build) if build else wasm, searching), router()]
    return System(key, title, "http", path="/mcp", body=tools_call("search_tools", {"query": SEARCH_QUERY}),
                  headers=MCP_HEADERS, filters=filters, check=tools_found, reaches_upstream=False, floor=True,
                  module=module, binary=build)


def baseline_builds(checkout: Path) -> tuple[Path, Path]:
    """Another checkout's .wasm and dynamic module (`--baseline`)."""
    return (checkout / "target/wasm32-wasip1/release/switchblade_filter.wasm",
            checkout / "target/module/libswitchblade_module.so")


def tools_listed(body: str) -> str:
    tools = (rpc_result(body) or {}).get("tools")
    if not isinstance(tools, list):
        return f"not a tools/list result: {body[:300]}"
    return "" if tools else "an empty tool list"


def tools_list_system(key: str, title: str, plugin: dict[str, Any] | None, module: bool = False) -> System:
    """Switchblade answering tools/list (no upstream call) with the given plugin configuration."""
    def filters(descriptors: str, wasm: str) -> list[dict[str, Any]]:
        return [*(switchblade_module(plugin) if module else switchblade(wasm, plugin)), router()]
    return System(key, title, "http", path="/mcp",
                  body=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}), headers=MCP_HEADERS,
                  filters=filters, check=tools_listed, reaches_upstream=False, floor=True, module=module)


def bootstrap(system: System, descriptors: str, wasm: str) -> dict[str, Any]:
    """The system's Envoy bootstrap. Ports are 0: the harness's Envoy fills in its own and the
    upstream's."""
    assert system.filters is not None
    filters = system.filters(descriptors, wasm)
    routes: list[dict[str, Any]] = []
    if any(entry["name"] == "switchblade" for entry in filters):
        routes.append({"match": {"path": "/mcp"}, "route": {"cluster": CLUSTER},
                       "typed_per_filter_config": {"envoy.filters.http.buffer": {
                           "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.BufferPerRoute",
                           "buffer": {"max_request_bytes": 1048576}}}})
    routes.append({"match": {"prefix": "/"}, "route": {"cluster": CLUSTER, "timeout": "5s"}})
    manager = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": "bench",
        "codec_type": "AUTO",
        "route_config": {"name": "local", "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": routes}]},
        "http_filters": filters,
    }
    return {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
        "static_resources": {
            "listeners": [{"name": "bench", "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
                           "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager",
                                                           "typed_config": manager}]}]}],
            "clusters": [{
                "name": CLUSTER, "type": "STATIC", "connect_timeout": "1s",
                "typed_extension_protocol_options": {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                    "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                    "explicit_http_config": {"http2_protocol_options": {}}}},
                "load_assignment": {"cluster_name": CLUSTER, "endpoints": [{"lb_endpoints": [{"endpoint": {
                    "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}}}]}]},
            }],
        },
    }

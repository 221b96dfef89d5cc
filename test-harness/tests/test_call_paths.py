"""How a tool call reaches the upstream, at its edges: calls Envoy cannot make (no healthy
endpoint, a full circuit breaker) are answered at once, alone or batched, with and without the
module's routing; and a routed call keeps its deadline after the upstream's headers, takes an
answer larger than Envoy's buffer, carries none of the client's trailers, and meets a reset the
way docs/deployment.md says."""

from __future__ import annotations

import concurrent.futures
import copy
import json
import socket
import time

import h2.config
import h2.connection
import h2.events
import httpx2
import pytest

import filter_build
from filter_build import demo_plugin
from mcp_client import Mcp
from peers import GRPC_ANSWER_HEADERS, HeadersThenReset, HeadersThenSilence, RawHttp2Upstream
from processes import Envoy, Upstream, demo_config, in_front_of

USERS = "demo.users.v1.UserService"
CATALOG = "demo.catalog.v1.CatalogService"
DEMO_CLUSTERS = ("demo_grpc", "demo_control")


class WithExtraClusters:
    """The demo upstream, and clusters of the bootstrap's own: one with no endpoints, one that
    takes a single request at a time."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream

    @property
    def clusters(self) -> dict[str, int]:
        return {**self.upstream.clusters, "empty_grpc": 0, "limited_grpc": self.upstream.grpc_port}


def bootstrap_with_extra_clusters() -> dict:
    config = demo_config()
    clusters = config["static_resources"]["clusters"]
    demo_grpc = next(cluster for cluster in clusters if cluster["name"] == "demo_grpc")
    empty = copy.deepcopy(demo_grpc)
    empty.update(name="empty_grpc", load_assignment={"cluster_name": "empty_grpc", "endpoints": []})
    limited = copy.deepcopy(demo_grpc)
    limited["name"] = "limited_grpc"
    limited["load_assignment"]["cluster_name"] = "limited_grpc"
    limited["circuit_breakers"] = {"thresholds": [{"max_requests": 1, "max_pending_requests": 1}]}
    clusters.extend([empty, limited])
    return config


ROUTINGS = ["routed", "callouts"] if filter_build.current().name == "module" else ["callouts"]


@pytest.fixture(scope="module", params=ROUTINGS)
def edges(request: pytest.FixtureRequest, upstream: Upstream):
    plugin = demo_plugin()
    plugin["services"][USERS]["cluster"] = "empty_grpc"
    plugin["services"][CATALOG]["cluster"] = "limited_grpc"
    if request.param == "callouts":
        plugin["routing"] = {}
    proxy = Envoy(WithExtraClusters(upstream), plugin, bootstrap=bootstrap_with_extra_clusters(),
                  name=f"envoy-edges-{request.param}").start()
    yield proxy
    proxy.stop()


def text_of(result: dict) -> str:
    return result["content"][0]["text"]


def test_a_cluster_without_endpoints_answers_unavailable_at_once(edges: Envoy) -> None:
    mcp = Mcp(edges.mcp_url)
    started = time.monotonic()
    result = mcp.call_tool("UserService_GetUser", {"user_id": 1})
    assert result["isError"] is True
    assert text_of(result).startswith(f"{USERS}/GetUser failed with gRPC status UNAVAILABLE (14): "), result
    batch = mcp.post([{"jsonrpc": "2.0", "id": id, "method": "tools/call",
                       "params": {"name": "UserService_GetUser", "arguments": {"user_id": 1}}} for id in (1, 2)]).json()
    assert [text_of(answer["result"]).split(":")[0] for answer in batch] == [
        f"{USERS}/GetUser failed with gRPC status UNAVAILABLE (14)"] * 2
    assert time.monotonic() - started < 3, "answered at once, not at a timeout"


def test_a_full_circuit_breaker_answers_unavailable_at_once(edges: Envoy, upstream: Upstream) -> None:
    """One request at a time: of two at once, the second is refused by Envoy, and answered."""
    upstream.reset()
    upstream.delay(400)
    mcp = Mcp(edges.mcp_url)
    started = time.monotonic()
    call = {"name": "CatalogService_GetItem", "arguments": {"id": 1}}
    batch = mcp.post([{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": call} for id in (1, 2)]).json()
    outcomes = sorted(answer["result"]["isError"] for answer in batch)
    assert outcomes == [False, True], batch
    refused = next(answer["result"] for answer in batch if answer["result"]["isError"])
    assert text_of(refused).startswith(f"{CATALOG}/GetItem failed with gRPC status UNAVAILABLE (14): "), refused
    # Two requests of one call each, at once (each is routed, where the module routes).
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: Mcp(edges.mcp_url).call_tool("CatalogService_GetItem", {"id": 1}),
                                range(2)))
    assert sorted(result["isError"] for result in results) == [False, True], results
    assert time.monotonic() - started < 4
    upstream.reset()


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def routed_bootstrap(buffer_limit: int | None = None) -> dict:
    config = demo_config()
    if buffer_limit is not None:
        config["static_resources"]["listeners"][0]["per_connection_buffer_limit_bytes"] = buffer_limit
    return config


@pytest.fixture(scope="module")
def silent_upstream():
    """One Envoy in front of an upstream that sends its headers and then nothing, with a
    deadline of 3 s for GetUser and 500 ms for GetItem."""
    peer = HeadersThenSilence(stands_in_for=DEMO_CLUSTERS)
    plugin = {"services": {USERS: {"cluster": "demo_grpc", "timeout_ms": 3000},
                           CATALOG: {"cluster": "demo_grpc", "timeout_ms": 500}}}
    with in_front_of(peer, plugin, "envoy-stalled") as envoy:
        yield envoy


def test_a_deadline_after_the_upstreams_headers_is_deadline_exceeded(silent_upstream: Envoy) -> None:
    """The upstream sends its headers and then nothing: the call ends at its deadline with
    DEADLINE_EXCEEDED (where the module routes, Envoy's router alone could only reset it)."""
    mcp = Mcp(silent_upstream.mcp_url)
    started = time.monotonic()
    result = mcp.call_tool("CatalogService_GetItem", {"id": 1})
    elapsed = time.monotonic() - started
    assert text_of(result) == (
        f"{CATALOG}/GetItem failed with gRPC status DEADLINE_EXCEEDED (4): no answer within the 500 ms deadline")
    assert 0.45 < elapsed < 1.4, f"answered after {elapsed:.2f}s"
    assert mcp.request("ping")["result"] == {}


def test_a_shorter_deadline_filed_after_a_longer_one_still_ends_its_call_on_time(silent_upstream: Envoy) -> None:
    """A call with a 3 s deadline is waiting when one with a 500 ms deadline starts: the second
    ends at its own deadline, not after the first (the module's deadline thread sleeps until the
    first deadline it knows, and only a deadline ahead of all others wakes it)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        long_call = pool.submit(Mcp(silent_upstream.mcp_url).call_tool, "UserService_GetUser", {"user_id": 1})
        time.sleep(0.3)
        short_started = time.monotonic()
        short = Mcp(silent_upstream.mcp_url).call_tool("CatalogService_GetItem", {"id": 1})
        short_elapsed = time.monotonic() - short_started
        assert text_of(short) == (
            f"{CATALOG}/GetItem failed with gRPC status DEADLINE_EXCEEDED (4): no answer within the 500 ms deadline")
        assert 0.45 < short_elapsed < 1.4, f"the 500 ms call answered after {short_elapsed:.2f}s"
        long = long_call.result(timeout=10)
        long_elapsed = time.monotonic() - started
    assert text_of(long) == (
        f"{USERS}/GetUser failed with gRPC status DEADLINE_EXCEEDED (4): no answer within the 3000 ms deadline")
    assert 2.9 < long_elapsed < 4.5, f"the 3000 ms call answered after {long_elapsed:.2f}s"


def test_an_answer_larger_than_envoys_buffer_is_read_up_to_max_response_bytes() -> None:
    """The listener buffers 32 KiB; the answer is 1 MB, under `limits.max_response_bytes`: it
    is a tool result, not Envoy's plain 500."""
    name = b"n" * 1_000_000
    user = b"\x08\x01\x12" + varint(len(name)) + name
    frame = b"\x00" + len(user).to_bytes(4, "big") + user
    peer = RawHttp2Upstream(GRPC_ANSWER_HEADERS, frame,
                            [(b"grpc-status", b"0")], stands_in_for=DEMO_CLUSTERS)
    plugin = {"services": {USERS: {"cluster": "demo_grpc"}}, "limits": {"max_request_bytes": 16384}}
    with in_front_of(peer, plugin, "envoy-big-answer", bootstrap=routed_bootstrap(buffer_limit=32768)) as envoy:
        result = Mcp(envoy.mcp_url).call_tool("UserService_GetUser", {"user_id": 1})
        assert result["isError"] is False, text_of(result)[:300]
        assert result["structuredContent"]["username"] == name.decode()


def post_with_trailers(url_port: int, body: bytes, trailers: list[tuple[str, str]]) -> dict:
    """A POST to /mcp over HTTP/2 whose body is followed by trailers (httpx sends none)."""
    with socket.create_connection(("127.0.0.1", url_port)) as sock:
        connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        connection.initiate_connection()
        connection.send_headers(1, [(":method", "POST"), (":path", "/mcp"), (":scheme", "http"),
                                    (":authority", f"127.0.0.1:{url_port}"), ("content-type", "application/json"),
                                    ("accept", "application/json")])
        connection.send_data(1, body)
        connection.send_headers(1, trailers, end_stream=True)
        sock.sendall(connection.data_to_send())
        answer = b""
        while True:
            data = sock.recv(65536)
            if not data:
                raise AssertionError("the connection closed before an answer")
            for event in connection.receive_data(data):
                if isinstance(event, h2.events.DataReceived):
                    answer += event.data
                    connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                if isinstance(event, h2.events.StreamEnded):
                    return json.loads(answer)
            sock.sendall(connection.data_to_send())


def test_the_clients_request_trailers_never_reach_the_upstream() -> None:
    user = b"\x08\x01\x12\x03ada"
    peer = RawHttp2Upstream(GRPC_ANSWER_HEADERS,
                            b"\x00" + len(user).to_bytes(4, "big") + user, [(b"grpc-status", b"0")],
                            stands_in_for=DEMO_CLUSTERS)
    with in_front_of(peer, {"services": {USERS: {"cluster": "demo_grpc"}}}, "envoy-trailers") as envoy:
        call = (b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
                b'"params":{"name":"UserService_GetUser","arguments":{"user_id":1}}}')
        answer = post_with_trailers(envoy.port, call, [("x-smuggled", "1"), ("grpc-timeout", "1S")])
        assert answer["result"]["structuredContent"]["username"] == "ada", answer
        assert peer.received, "the upstream was called"
        assert peer.received_trailers == [], peer.received_trailers
        names = {name for name, _ in peer.received[-1]}
        assert b"x-smuggled" not in names


def test_a_reset_after_the_upstreams_headers() -> None:
    """The upstream sends its headers, then resets the stream. The Wasm filter (and the
    module's callouts) answer UNAVAILABLE. A call the module routes holds the upstream's
    headers back by then, and Envoy's router answers the client itself, past the module: HTTP
    503 with its own words (docs/deployment.md: Wasm filter or dynamic module?)."""
    peer = HeadersThenReset(stands_in_for=DEMO_CLUSTERS)
    with in_front_of(peer, {"services": {USERS: {"cluster": "demo_grpc"}}}, "envoy-reset-after-headers") as envoy:
        mcp = Mcp(envoy.mcp_url)
        if envoy.build.name == "module":
            response = mcp.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                 "params": {"name": "UserService_GetUser", "arguments": {"user_id": 1}}})
            assert response.status_code == 503
            assert response.text == "upstream connect error or disconnect/reset before headers. reset reason: remote reset"
        else:
            text = text_of(mcp.call_tool("UserService_GetUser", {"user_id": 1}))
            assert text.startswith(f"{USERS}/GetUser failed with gRPC status UNAVAILABLE (14): "), text
        assert Mcp(envoy.mcp_url).request("ping")["result"] == {}

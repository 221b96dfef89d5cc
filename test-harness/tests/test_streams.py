"""Streaming methods as tools, through a real Envoy and the demo upstream's streaming methods:
each kind (server-streaming WatchItems and EchoStream, client-streaming ImportItems,
bidirectional Chat) with raw JSON-RPC and with the official Python and TypeScript SDKs; each
bound (messages, bytes, the deadline window) and how the upstream stream is cancelled at it;
progress over SSE; cancellation by closing the connection and by `notifications/cancelled`;
errors mid-stream; hostile upstreams (frames split at every byte, the compressed flag, an
oversized message, a stream that never ends, 10,000 messages). The upstream's own count of
open and cancelled streams shows what reached it."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import threading
import time
from typing import Any

import httpx2
import jsonschema
import pytest
from mcp import Client

from filter_build import demo_plugin
from mcp_client import Mcp, modern_meta
from peers import GRPC_ANSWER_HEADERS, RawHttp2Upstream
from processes import REPO, Envoy, Upstream, in_front_of, wait_until

CATALOG = "demo.catalog.v1.CatalogService"
USERS = "demo.users.v1.UserService"
SINK = "test.kitchensink.v1.KitchenSinkService"
DEMO_CLUSTERS = ("demo_grpc", "demo_control")
TS_CLIENT = REPO / "test-harness/clients/typescript"
LEGACY = "2025-11-25"


def streaming_plugin(**tools: dict[str, Any]) -> dict[str, Any]:
    plugin = demo_plugin()
    for service in (CATALOG, USERS):
        plugin["services"][service]["streaming"] = True
    plugin["services"][SINK] = {"cluster": "demo_grpc", "streaming": True}
    plugin["tools"] = tools
    return plugin


@pytest.fixture(scope="module")
def streaming(upstream: Upstream):
    plugin = streaming_plugin(**{
        f"{CATALOG}/WatchItems": {"timeout_ms": 1500, "max_messages": 5},
        f"{SINK}/EchoStream": {"max_messages": 20000},
    })
    proxy = Envoy(upstream, plugin, name="envoy-streams").start()
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def long_watch(upstream: Upstream):
    """WatchItems with a window of 30 s: a stream that stays open until something ends it."""
    plugin = streaming_plugin(**{f"{CATALOG}/WatchItems": {"timeout_ms": 30000, "max_messages": 1000}})
    proxy = Envoy(upstream, plugin, name="envoy-long-watch").start()
    yield proxy
    proxy.stop()


@pytest.fixture
def mcp(streaming: Envoy, upstream: Upstream) -> Mcp:
    upstream.reset()
    wait_until(lambda: upstream.streams()["open"] == 0, "earlier streams to close")
    return Mcp(streaming.mcp_url)


def call(mcp: Mcp, name: str, arguments: Any, meta: dict | None = None, headers: dict | None = None,
         id: Any = 1) -> Any:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    return mcp.post({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params},
                    headers={"mcp-protocol-version": LEGACY, **(headers or {})})


def result_of(response: httpx2.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json", response.headers
    return response.json()["result"]


def sse_messages(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[len("data: "):]) for line in text.splitlines() if line.startswith("data: ")]


def text_of(result: dict[str, Any]) -> str:
    return result["content"][0]["text"]


def test_every_kind_is_a_tool_with_its_schemas(mcp: Mcp) -> None:
    tools = mcp.tools()
    for name in ["CatalogService_WatchItems", "CatalogService_ImportItems", "UserService_Chat",
                 "KitchenSinkService_EchoStream", "KitchenSinkService_CollectTrees", "KitchenSinkService_EchoEach"]:
        assert name in tools, sorted(tools)
    watch = tools["CatalogService_WatchItems"]
    assert set(watch["inputSchema"]["properties"]) == {"ids", "interval_ms"}
    assert watch["outputSchema"]["required"] == ["messages", "end"]
    assert watch["outputSchema"]["properties"]["end"]["properties"]["reason"]["enum"] == [
        "complete", "max_messages", "max_bytes", "deadline"]
    imports = tools["CatalogService_ImportItems"]
    assert imports["inputSchema"]["properties"]["messages"]["maxItems"] == 100
    assert set(imports["outputSchema"]["properties"]) == {"imported_count", "total_stock", "total_value_minor"}
    chat = tools["UserService_Chat"]
    assert chat["inputSchema"]["required"] == ["messages"]
    assert set(chat["outputSchema"]["properties"]) == {"messages", "end"}


def test_a_server_stream_that_ends_is_complete(mcp: Mcp, upstream: Upstream) -> None:
    result = mcp.call_tool("KitchenSinkService_EchoStream", {"must": "hi"})
    assert result["isError"] is False, text_of(result)
    content = result["structuredContent"]
    assert content["end"] == {"reason": "complete", "count": 3}
    assert [message["must"] for message in content["messages"]] == ["hi"] * 3
    assert json.loads(text_of(result)) == content


def test_max_messages_ends_the_stream_and_cancels_it_upstream(mcp: Mcp, upstream: Upstream) -> None:
    result = mcp.call_tool("CatalogService_WatchItems", {"ids": ["1"], "interval_ms": 10})
    assert result["isError"] is False, text_of(result)
    assert result["structuredContent"]["end"] == {"reason": "max_messages", "count": 5}
    assert [event["sequence"] for event in result["structuredContent"]["messages"]] == [1, 2, 3, 4, 5]
    wait_until(lambda: upstream.streams() == {"open": 0, "opened": 1, "cancelled": 1}, "the stream cancelled upstream",
               timeout=3)


def test_the_deadline_is_the_collection_window(mcp: Mcp, upstream: Upstream) -> None:
    started = time.monotonic()
    result = mcp.call_tool("CatalogService_WatchItems", {"ids": ["2"], "interval_ms": 1000})
    elapsed = time.monotonic() - started
    assert result["isError"] is False, text_of(result)
    assert result["structuredContent"]["end"] == {"reason": "deadline", "count": 2}
    assert 1.4 < elapsed < 3.0, f"answered after {elapsed:.2f}s (window 1.5 s)"
    wait_until(lambda: upstream.streams()["open"] == 0, "the stream closed upstream", timeout=3)


def test_an_error_mid_stream_is_a_tool_error_that_keeps_the_messages(mcp: Mcp, upstream: Upstream) -> None:
    upstream.stream_mode("error_after=2")
    result = result_of(call(mcp, "KitchenSinkService_EchoStream", {"must": "x"}))
    assert result["isError"] is True
    assert "failed with gRPC status FAILED_PRECONDITION (9): the upstream's stream mode error_after=2 fails every " \
           "stream after 2 messages" in text_of(result), text_of(result)
    assert "(after 2 messages, in structuredContent)" in text_of(result)
    assert len(result["structuredContent"]["messages"]) == 2


def test_ten_thousand_messages_are_gathered_within_their_bound(mcp: Mcp, upstream: Upstream) -> None:
    upstream.stream_mode("many")
    result = result_of(call(mcp, "KitchenSinkService_EchoStream", {"must": "m"}))
    assert result["isError"] is False, text_of(result)[:300]
    assert result["structuredContent"]["end"] == {"reason": "complete", "count": 10000}
    # With a smaller bound, the same flood stops at it and is cancelled.
    result = result_of(call(mcp, "CatalogService_WatchItems", {"ids": ["1"]}))
    assert result["structuredContent"]["end"] == {"reason": "max_messages", "count": 5}
    assert mcp.request("ping")["result"] == {}


def test_a_stream_that_never_ends_is_answered_at_its_deadline(mcp: Mcp, upstream: Upstream) -> None:
    upstream.stream_mode("never_end")
    started = time.monotonic()
    result = result_of(call(mcp, "CatalogService_WatchItems", {"ids": ["3"]}))
    assert result["structuredContent"]["end"] == {"reason": "deadline", "count": 1}
    assert time.monotonic() - started < 3.0
    wait_until(lambda: upstream.streams()["open"] == 0, "the stream cancelled upstream", timeout=3)


def test_a_client_stream_is_checked_item_by_item_and_sent_as_frames(mcp: Mcp, upstream: Upstream) -> None:
    items = [{"name": "Lamp", "price_minor": "1500", "stock": 2, "category": "CATEGORY_OUTDOOR"},
             {"name": "Rope", "price_minor": 700, "stock": 3}]
    result = mcp.call_tool("CatalogService_ImportItems", {"messages": items})
    assert result["isError"] is False, text_of(result)
    assert result["structuredContent"] == {"imported_count": 2, "total_stock": "5", "total_value_minor": "5100"}
    refused = mcp.call_tool("CatalogService_ImportItems", {"messages": [items[0], {"name": "x", "price_minor": {"$ne": None}}]})
    assert refused["isError"] is True
    assert "Invalid arguments for tool CatalogService_ImportItems: at `messages[1].price_minor`:" in text_of(refused)
    too_many = mcp.call_tool("CatalogService_ImportItems", {"messages": [items[1]] * 101})
    assert too_many["isError"] is True
    assert "messages" in text_of(too_many) and "100" in text_of(too_many), text_of(too_many)
    # The upstream's own check, after the gate: a tool error with its details.
    upstream_refusal = mcp.call_tool("CatalogService_ImportItems", {"messages": [{"name": "", "price_minor": 1}]})
    assert upstream_refusal["isError"] is True
    assert "INVALID_ARGUMENT (3)" in text_of(upstream_refusal)
    assert upstream.calls() == {f"/{CATALOG}/ImportItems": 2}


def test_a_bidirectional_call_is_half_duplex(mcp: Mcp) -> None:
    result = mcp.call_tool("UserService_Chat", {"messages": [{"text": "hello", "sender": "ada"}, {"text": "bye?"}]})
    assert result["isError"] is False, text_of(result)
    replies = [message["text"] for message in result["structuredContent"]["messages"]]
    assert replies == ["you said: hello", "you said: bye?", "bye"]
    assert result["structuredContent"]["end"] == {"reason": "complete", "count": 3}


def test_progress_is_one_notification_per_message_then_the_result(mcp: Mcp) -> None:
    for era_headers, meta in [({}, {}), (None, modern_meta())]:
        meta = {**meta, "progressToken": "watch-1"}
        if era_headers is None:
            response = mcp.modern("tools/call", {"name": "CatalogService_WatchItems",
                                                 "arguments": {"ids": ["1"], "interval_ms": 10}, "_meta": meta})
        else:
            response = call(mcp, "CatalogService_WatchItems", {"ids": ["1"], "interval_ms": 10}, meta=meta)
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        messages = sse_messages(response.text)
        progress = [message["params"] for message in messages if message.get("method") == "notifications/progress"]
        assert [p["progress"] for p in progress] == [1, 2, 3, 4, 5]
        assert all(p["progressToken"] == "watch-1" for p in progress)
        assert progress[0]["message"] == "1 message received"
        assert messages[-1]["id"] == 1
        assert messages[-1]["result"]["structuredContent"]["end"] == {"reason": "max_messages", "count": 5}
    # Without a token, or without SSE in Accept, the answer is one JSON object.
    response = mcp.post({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                         "params": {"name": "CatalogService_WatchItems", "arguments": {"interval_ms": 10},
                                    "_meta": {"progressToken": "t"}}},
                        headers={"accept": "application/json"})
    assert response.headers["content-type"] == "application/json"


def test_the_byte_bound_ends_the_stream(upstream: Upstream) -> None:
    upstream.reset()
    plugin = streaming_plugin()
    plugin["limits"] = {"max_response_bytes": 200}
    proxy = Envoy(upstream, plugin, name="envoy-stream-bytes").start()
    try:
        result = Mcp(proxy.mcp_url).call_tool("CatalogService_WatchItems", {"interval_ms": 10})
        assert result["isError"] is False, text_of(result)
        end = result["structuredContent"]["end"]
        assert end["reason"] == "max_bytes" and 1 <= end["count"] < 5, end
        wait_until(lambda: upstream.streams()["open"] == 0, "the stream cancelled upstream", timeout=3)
        assert upstream.streams()["cancelled"] == 1
    finally:
        proxy.stop()


async def _python_session(url: str, mode: str) -> dict[str, Any]:
    notified: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notified.append((progress, message))

    async with Client(url, mode=mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        watch = await client.call_tool("CatalogService_WatchItems", {"ids": ["4"], "interval_ms": 10},
                                       progress_callback=on_progress)
        imported = await client.call_tool("CatalogService_ImportItems", {"messages": [{"name": "Cup", "price_minor": 250, "stock": 4}]})
        chat = await client.call_tool("UserService_Chat", {"messages": [{"text": "hi"}]})
        return {"tools": tools, "watch": watch, "imported": imported, "chat": chat, "notified": notified}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_python_sdk_calls_each_kind_with_progress(streaming: Envoy, upstream: Upstream, mode: str) -> None:
    upstream.reset()
    seen = asyncio.run(_python_session(streaming.mcp_url, mode))
    watch = seen["watch"]
    assert watch.is_error is False
    assert watch.structured_content["end"] == {"reason": "max_messages", "count": 5}
    jsonschema.validate(watch.structured_content, seen["tools"]["CatalogService_WatchItems"].output_schema)
    assert [progress for progress, _ in seen["notified"]] == [1, 2, 3, 4, 5]
    assert seen["notified"][1][1] == "2 messages received"
    assert seen["imported"].structured_content == {"imported_count": 1, "total_stock": "4", "total_value_minor": "1000"}
    assert [m["text"] for m in seen["chat"].structured_content["messages"]] == ["you said: hi", "bye"]


def test_the_typescript_sdk_calls_each_kind_with_progress(streaming: Envoy, upstream: Upstream) -> None:
    upstream.reset()
    run = subprocess.run(["node", "streams.mjs", streaming.mcp_url], cwd=TS_CLIENT, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert seen["watch"]["structuredContent"]["end"] == {"reason": "max_messages", "count": 5}
    assert seen["progress"] == [1, 2, 3, 4, 5]
    assert seen["imported"]["structuredContent"]["imported_count"] == 1
    assert [m["text"] for m in seen["chat"]["structuredContent"]["messages"]] == ["you said: ahoy", "bye"]


def watch_in_background(url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[threading.Thread, dict]:
    """Posts a long watch on its own connection; the outcome lands in the dict."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        started = time.monotonic()
        with httpx2.Client(timeout=40) as client:
            response = client.post(url, content=json.dumps(body), headers={
                "content-type": "application/json", "accept": "application/json, text/event-stream", **headers})
        outcome.update(status=response.status_code, type=response.headers.get("content-type"), body=response.text,
                       elapsed=time.monotonic() - started)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def long_watch_call(id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "CatalogService_WatchItems", "arguments": {"ids": ["1"], "interval_ms": 100}}}


def cancel(id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "enough"}}


def test_notifications_cancelled_stops_the_callers_stream(long_watch: Envoy, upstream: Upstream) -> None:
    upstream.reset()
    wait_until(lambda: upstream.streams()["open"] == 0, "earlier streams to close")
    legacy = {"mcp-protocol-version": LEGACY, "authorization": "Bearer agent-a"}
    thread, outcome = watch_in_background(long_watch.mcp_url, long_watch_call("w-1"), legacy)
    wait_until(lambda: upstream.streams()["open"] == 1, "the watch to open upstream")
    mcp = Mcp(long_watch.mcp_url)
    # Another caller (another credential) naming the same id cancels nothing.
    assert mcp.post(cancel("w-1"), {**legacy, "authorization": "Bearer agent-b"}).status_code == 202
    time.sleep(0.6)
    assert upstream.streams()["open"] == 1 and thread.is_alive()
    # Nor does the right caller naming another id.
    assert mcp.post(cancel("w-2"), legacy).status_code == 202
    time.sleep(0.6)
    assert upstream.streams()["open"] == 1 and thread.is_alive()
    accepted = mcp.post(cancel("w-1"), legacy)
    assert (accepted.status_code, accepted.text) == (202, "")
    thread.join(timeout=5)
    assert not thread.is_alive(), "the cancelled request was not answered"
    # No JSON-RPC response for a cancelled request: an SSE stream with a comment only.
    assert outcome["status"] == 200 and outcome["type"] == "text/event-stream", outcome
    assert sse_messages(outcome["body"]) == [] and outcome["body"] == ": cancelled\n\n", outcome
    assert outcome["elapsed"] < 10
    wait_until(lambda: upstream.streams() == {"open": 0, "opened": 1, "cancelled": 1}, "the stream cancelled upstream",
               timeout=3)
    assert mcp.request("ping")["result"] == {}


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_closing_the_connection_cancels_the_stream(long_watch: Envoy, upstream: Upstream, era: str) -> None:
    """The 2026-07-28 way to cancel (close the request's SSE stream), and every era's last
    resort: Envoy resets the upstream stream of a request that goes away."""
    upstream.reset()
    wait_until(lambda: upstream.streams()["open"] == 0, "earlier streams to close")
    body = long_watch_call(9)
    headers = {"mcp-protocol-version": LEGACY}
    if era == "modern":
        body["params"]["_meta"] = {**modern_meta(), "progressToken": "p"}
        headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                   "mcp-name": "CatalogService_WatchItems"}
    request = json.dumps(body).encode()
    head = "".join(f"{name}: {value}\r\n" for name, value in {
        "host": f"127.0.0.1:{long_watch.port}", "content-type": "application/json",
        "accept": "application/json, text/event-stream", "content-length": str(len(request)), **headers}.items())
    with socket.create_connection(("127.0.0.1", long_watch.port)) as connection:
        connection.sendall(f"POST /mcp HTTP/1.1\r\n{head}\r\n".encode() + request)
        wait_until(lambda: upstream.streams()["open"] == 1, "the watch to open upstream")
        time.sleep(0.3)
    wait_until(lambda: upstream.streams() == {"open": 0, "opened": 1, "cancelled": 1}, "the stream cancelled upstream",
               timeout=3)


class HostileStreamPeer(RawHttp2Upstream):
    """A raw HTTP/2 peer for hostile server streams: what `answer_with` sets, its body sent in
    DATA frames of `chunk` bytes each if set (gRPC frames split at every boundary)."""

    chunk: int | None = None

    def _send_body(self, peer, stream_id, pending):
        if self.chunk is None:
            return super()._send_body(peer, stream_id, pending)
        data = pending.pop(stream_id)
        for start in range(0, len(data), self.chunk):
            peer.send_data(stream_id, data[start:start + self.chunk])
        peer.send_headers(stream_id, self.trailers or [(b"grpc-status", b"0")], end_stream=True)


@pytest.fixture(scope="module")
def hostile_stream():
    """One Envoy in front of a `HostileStreamPeer` whose answer each test sets (every start of
    the Wasm build compiles the .wasm again)."""
    peer = HostileStreamPeer(GRPC_ANSWER_HEADERS, stands_in_for=DEMO_CLUSTERS)
    plugin = {"services": {CATALOG: {"cluster": "demo_grpc", "streaming": True}},
              "tools": {f"{CATALOG}/WatchItems": {"timeout_ms": 800}}}
    with in_front_of(peer, plugin, "envoy-hostile-stream") as envoy:
        yield peer, envoy


def event_frame(id: int) -> bytes:
    item = bytes([0x08, id])
    event = bytes([0x0A, len(item)]) + item + bytes([0x18, id])
    return b"\x00" + len(event).to_bytes(4, "big") + event


def test_frames_split_at_every_byte_come_whole(hostile_stream) -> None:
    peer, envoy = hostile_stream
    peer.chunk, peer.silent = 1, False
    peer.answer_with(GRPC_ANSWER_HEADERS, b"".join(event_frame(id) for id in (1, 2, 3)), [(b"grpc-status", b"0")])
    result = result_of(call(Mcp(envoy.mcp_url), "CatalogService_WatchItems", {}))
    assert result["isError"] is False, text_of(result)
    assert result["structuredContent"]["end"] == {"reason": "complete", "count": 3}
    assert [e["sequence"] for e in result["structuredContent"]["messages"]] == [1, 2, 3]


@pytest.mark.parametrize("case", ["compressed", "oversized", "silent"])
def test_hostile_streams_end_cleanly(hostile_stream, case: str) -> None:
    peer, envoy = hostile_stream
    peer.chunk, peer.silent = None, case == "silent"
    if case == "compressed":
        peer.answer_with(GRPC_ANSWER_HEADERS, event_frame(1) + b"\x01\x00\x00\x00\x02zz", [(b"grpc-status", b"0")])
    elif case == "oversized":
        peer.answer_with(GRPC_ANSWER_HEADERS, event_frame(1) + b"\x00\xff\xff\xff\xff" + b"x" * 1000)
    mcp = Mcp(envoy.mcp_url)
    result = result_of(call(mcp, "CatalogService_WatchItems", {}))
    if case == "compressed":
        assert result["isError"] is True
        assert "compress" in text_of(result).lower() or "INTERNAL" in text_of(result), text_of(result)
    elif case == "oversized":
        # The module refuses the frame from its prefix (max_bytes); Envoy's gRPC client, which
        # reads the Wasm filter's streams, refuses it itself (a tool error).
        end = result["structuredContent"].get("end") if result["isError"] is False else None
        assert end == {"reason": "max_bytes", "count": 1} or result["isError"] is True, result
    else:
        assert result["isError"] is False
        assert result["structuredContent"] == {"messages": [], "end": {"reason": "deadline", "count": 0}}
    assert mcp.request("ping")["result"] == {}

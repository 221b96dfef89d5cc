"""What one request may make the filter do, bounded: the messages of a batch, the calls it has
out at once, the size of a batch's reply and of each rendered answer, and nesting at the JSON
depth limit. Each bound holds at its value, is answered past it with an error that names it,
lets through no more upstream calls than it allows, and leaves Envoy (and its Wasm VM)
serving, with memory that stays flat."""

from __future__ import annotations

import json

import pytest

from filter_build import demo_plugin
from mcp_client import Mcp
from peers import GRPC_ANSWER_HEADERS, RawHttp2Upstream
from processes import Envoy, Upstream, in_front_of

SINK = "test.kitchensink.v1.KitchenSinkService"
# The demo bootstrap's clusters, which a raw peer stands in for.
DEMO_CLUSTERS = ("demo_grpc", "demo_control")


def get_user(id: int) -> dict:
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "UserService_GetUser", "arguments": {"user_id": 1}}}


def echo(id: int, arguments: dict, name: str = "KitchenSinkService_Echo") -> dict:
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


@pytest.fixture(scope="module")
def bounded(upstream: Upstream):
    plugin = demo_plugin()
    plugin["services"][SINK] = {"cluster": "demo_grpc"}
    plugin["limits"] = {"max_batch_size": 8, "max_calls_in_flight": 3, "max_batch_reply_bytes": 70000,
                        "max_rendered_bytes": 20000}
    proxy = Envoy(upstream, plugin, name="envoy-bounds").start()
    yield proxy
    proxy.stop()


@pytest.fixture
def mcp(bounded: Envoy, upstream: Upstream) -> Mcp:
    upstream.reset()
    return Mcp(bounded.mcp_url)


def test_a_batch_over_its_size_is_refused_whole(mcp: Mcp, upstream: Upstream) -> None:
    response = mcp.post([get_user(id) for id in range(9)])
    assert response.status_code == 400, response.text
    assert response.json()["error"] == {
        "code": -32600, "message": "Invalid Request: the batch has 9 messages; the limit is 8 (limits.max_batch_size)"}
    assert upstream.total_calls() == 0


def test_a_batch_at_its_size_is_served(mcp: Mcp) -> None:
    answers = mcp.post([{"jsonrpc": "2.0", "id": id, "method": "ping"} for id in range(8)]).json()
    assert [answer["id"] for answer in answers] == list(range(8))


def test_a_batch_keeps_at_most_its_calls_in_flight(mcp: Mcp, upstream: Upstream) -> None:
    upstream.delay(300)
    answers = mcp.post([get_user(id) for id in range(7)]).json()
    assert [answer["result"]["isError"] for answer in answers] == [False] * 7
    assert upstream.total_calls() == 7
    assert upstream.most_in_flight() == 3


def test_a_batch_reply_stops_at_its_bound(mcp: Mcp) -> None:
    """Each tools/list answer (the kitchen sink's schemas) is about 31 KB: two fit in 70,000
    bytes, the rest are replaced by an error that names the bound."""
    listing = [{"jsonrpc": "2.0", "id": id, "method": "tools/list"} for id in range(6)]
    response = mcp.post(listing)
    answers = response.json()
    assert [answer["id"] for answer in answers] == list(range(6))
    listed = [answer for answer in answers if "result" in answer]
    refused = [answer for answer in answers if "error" in answer]
    assert listed and refused, answers
    for answer in refused:
        assert answer["error"]["code"] == -32603
        assert "(limits.max_batch_reply_bytes)" in answer["error"]["message"]
        assert "would take the batch's reply over 70000 bytes" in answer["error"]["message"]
    assert len(listed) == 2
    assert len(response.content) <= 70000 + 2 + len(refused) * 300


def test_an_answer_whose_json_would_pass_the_bound_is_a_tool_error(mcp: Mcp, upstream: Upstream) -> None:
    """Fields left out are rendered at their defaults: 200 empty messages (400 bytes of
    protobuf) are 60 KB of JSON."""
    result = mcp.call_tool("KitchenSinkService_Echo", {"must": "x", "many": [{}] * 200})
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        "test.kitchensink.v1.KitchenSinkService/Echo failed with gRPC status RESOURCE_EXHAUSTED (8): "
        "the response's JSON would be over 20000 bytes (limits.max_rendered_bytes): "
        "fields left out are written at their defaults; ask for less")
    assert upstream.total_calls() == 1
    small = mcp.call_tool("KitchenSinkService_Echo", {"must": "x", "many": [{}] * 10})
    assert small["isError"] is False and len(small["structuredContent"]["many"]) == 10


def tree(levels: int) -> dict:
    """A Tree `levels` deep: each level an object and an array of JSON."""
    node: dict = {"label": "leaf", "children": []}
    for _ in range(levels - 1):
        node = {"label": "node", "children": [node]}
    return node


def depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(inner) for inner in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(inner) for inner in value), default=0)
    return 0


@pytest.mark.parametrize("body_depth", [99, 100])
def test_arguments_and_answers_at_the_depth_limit_round_trip(bounded: Envoy, mcp: Mcp, body_depth: int) -> None:
    """Arguments nested as deep as the body may be come back rendered as they went, in both
    builds (the Wasm VM reads and writes them on its own stack). A Tree of n levels is 2n
    levels of JSON (its leaf's `children` is an empty array): 49 inside the body and `params`
    make 100, 48 inside `Everything.tree` too make 99."""
    marks = bounded.filter_marks()
    if body_depth == 100:
        arguments = tree(49)
        body = echo(1, arguments, "KitchenSinkService_EchoTree")
    else:
        arguments = tree(48)
        body = echo(1, {"must": "x", "tree": arguments})
    assert depth(body) == body_depth
    answer = mcp.post(body).json()
    assert answer["result"]["isError"] is False, answer
    structured = answer["result"]["structuredContent"]
    assert (structured if body_depth == 100 else structured["tree"]) == arguments
    assert bounded.filter_marks() == marks


def test_a_body_past_the_depth_limit_is_refused_before_anything_is_read(mcp: Mcp, upstream: Upstream) -> None:
    body = echo(1, {"must": "x", "tree": tree(49)})
    assert depth(body) == 101
    response = mcp.post(body)
    assert response.status_code == 400
    assert response.json()["error"] == {"code": -32600, "message": "Invalid Request: JSON nested deeper than 100 levels"}
    assert upstream.total_calls() == 0


@pytest.mark.parametrize("values", [30, 99])
def test_values_nested_deep_get_an_answer_that_says_why(bounded: Envoy, mcp: Mcp, values: int) -> None:
    """A google.protobuf.Value holds a Struct holds Values: each JSON level is three protobuf
    messages. Nested as deep as the body allows, the call is answered (echoed, or refused by
    the upstream or the renderer with its reason), and the filter keeps serving."""
    marks = bounded.filter_marks()
    value: object = 1
    for _ in range(values - 3):
        value = {"v": value}
    assert depth(echo(1, {"must": "x", "a_value": value})) == values
    answer = mcp.post(echo(1, {"must": "x", "a_value": value})).json()
    result = answer.get("result", {})
    if result.get("isError") is False:
        assert result["structuredContent"]["a_value"] == value
    else:
        text = result["content"][0]["text"] if result else answer["error"]["message"]
        assert "nested" in text or "recursion" in text.lower(), answer
    assert mcp.request("ping")["result"] == {}
    assert bounded.filter_marks() == marks


def nested_tree_bytes(levels: int) -> bytes:
    """A Tree nested `levels` messages deep, encoded."""
    def varint(value: int) -> bytes:
        out = bytearray()
        while True:
            byte = value & 0x7F
            value >>= 7
            out.append(byte | (0x80 if value else 0))
            if not value:
                return bytes(out)
    message = b""
    for _ in range(levels - 1):
        message = b"\x12" + varint(len(message)) + message
    return message


@pytest.fixture(scope="module")
def deep_answers():
    """One Envoy in front of a raw HTTP/2 peer whose answer each test sets (every start of the
    Wasm build compiles the .wasm again)."""
    peer = RawHttp2Upstream(GRPC_ANSWER_HEADERS, stands_in_for=DEMO_CLUSTERS)
    with in_front_of(peer, {"services": {SINK: {"cluster": "demo_grpc"}}}, "envoy-deep-answer") as envoy:
        yield peer, envoy


@pytest.mark.parametrize(("levels", "rendered"), [(100, True), (101, True), (102, False)])
def test_answers_nested_to_the_message_depth_limit(deep_answers, levels: int, rendered: bool) -> None:
    """An upstream's answer of nested messages: up to protobuf's 100 levels under the root it is
    rendered, past them it is refused with its reason, in both builds."""
    peer, envoy = deep_answers
    message = nested_tree_bytes(levels)
    frame = b"\x00" + len(message).to_bytes(4, "big") + message
    peer.answer_with(GRPC_ANSWER_HEADERS, frame, [(b"grpc-status", b"0")])
    marks = envoy.filter_marks()
    result = Mcp(envoy.mcp_url).request("tools/call", {"name": "KitchenSinkService_EchoTree",
                                                       "arguments": {}})["result"]
    if rendered:
        assert result["isError"] is False, result
        assert depth(result["structuredContent"]) == 2 * levels
    else:
        assert result["content"][0]["text"].endswith("messages are nested more than 100 deep"), result
    assert envoy.filter_marks() == marks


def rss_mib(envoy: Envoy) -> float:
    with open(f"/proc/{envoy.process.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_the_attacks_of_the_review_cost_nothing_and_memory_stays_flat(upstream: Upstream) -> None:
    """The review's batches, against the default bounds: 2,200 tools/call in 256 KiB made 1,024
    upstream calls at once, and thousands of tools/list would build gigabytes of answers. Then
    the largest batch the defaults allow, of answers near the render bound, again and again:
    Envoy's memory (and, for Wasm, the VM's) stays flat."""
    plugin = demo_plugin()
    plugin["services"][SINK] = {"cluster": "demo_grpc"}
    envoy = Envoy(upstream, plugin, name="envoy-bounds-default").start()
    try:
        mcp = Mcp(envoy.mcp_url)
        upstream.reset()
        calls = json.dumps([get_user(id) for id in range(2200)], separators=(",", ":"))
        assert len(calls) < 256 * 1024
        response = mcp.post(calls)
        assert response.status_code == 400
        assert "the limit is 64 (limits.max_batch_size)" in response.json()["error"]["message"]
        listing = mcp.post(json.dumps([{"jsonrpc": "2.0", "id": id, "method": "tools/list"} for id in range(5000)],
                                      separators=(",", ":")))
        assert listing.status_code == 400
        assert upstream.total_calls() == 0
        # 64 echoes of 1,200 empty messages each (the largest batch a 256 KiB body holds): every
        # answer renders to about 360 KB, twice, and the batch's reply holds what fits its bound.
        large = json.dumps([echo(id, {"must": "x", "many": [{}] * 1200}) for id in range(64)], separators=(",", ":"))
        assert len(large) < 256 * 1024
        upstream.delay(20)
        samples = []
        for _ in range(5):
            answers = mcp.post(large).json()
            assert len(answers) == 64
            assert any("result" in answer for answer in answers)
            assert any("limits.max_batch_reply_bytes" in answer.get("error", {}).get("message", "") for answer in answers)
            samples.append((*envoy.memory(), rss_mib(envoy)))
        assert upstream.most_in_flight() <= 8
        # The first rounds warm the allocator (and grow the Wasm VM's memory, which never
        # shrinks) up to what one bounded reply takes; after them nothing more is kept. What the
        # allocator holds is the measure, not RSS: RSS follows the pages the allocator gives
        # back and takes again (in CI it fell by 26 MiB and rose by 40 holding the same bytes).
        Envoy.assert_memory_flat(samples, warm_rounds=2, allocated_spread=2**20)
        rss = [sample[2] for sample in samples]
        assert max(rss) < 512, f"Envoy's RSS: {samples}"
        assert mcp.request("ping")["result"] == {}
    finally:
        envoy.stop()


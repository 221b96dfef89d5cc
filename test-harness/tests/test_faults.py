"""Upstream faults: the filter answers every call, and Envoy and its Wasm VM keep serving."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from filter_build import demo_plugin
from mcp_client import Mcp, is_deadline_error
from peers import GRPC_ANSWER_HEADERS, Blackhole, RawHttp2Upstream, Slammer, grpc_failure
from processes import REPO, Envoy, Upstream, in_front_of

# A raw peer stands in for every cluster of the demo bootstrap: the gRPC services' and the
# router's, which MCP requests never reach; none is left at the bootstrap's fixed port.
DEMO_CLUSTERS = ("demo_grpc", "demo_control")


@pytest.fixture
def isolated():
    """An upstream and an Envoy of this test's own, so faults disturb no other test.

    UserService gets a 300 ms deadline."""
    upstream = Upstream().start()
    plugin = demo_plugin()
    plugin["services"]["demo.users.v1.UserService"]["timeout_ms"] = 300
    with in_front_of(upstream, plugin, "envoy-faults") as envoy:
        yield envoy, upstream


def test_upstream_down_is_unavailable_and_envoy_keeps_serving(isolated: tuple[Envoy, Upstream]) -> None:
    envoy, upstream = isolated
    mcp = Mcp(envoy.mcp_url)
    assert mcp.call_tool("UserService_GetUser", {"user_id": 1})["isError"] is False
    marks_before = envoy.filter_marks()

    upstream.stop()
    for _ in range(3):
        result = mcp.call_tool("UserService_GetUser", {"user_id": 1})
        assert result["isError"] is True
        text = result["content"][0]["text"]
        assert text.startswith("demo.users.v1.UserService/GetUser failed with gRPC status UNAVAILABLE (14)"), text
    assert mcp.request("ping")["result"] == {}
    assert len(mcp.tools()) == 3

    upstream.start()  # same ports as before
    result = mcp.call_tool("UserService_GetUser", {"user_id": 1})
    assert result["isError"] is False, result
    assert result["structuredContent"]["username"] == "ada"

    assert envoy.filter_marks() == marks_before, "the filter failed (a Wasm VM was recreated, or Envoy restarted)"


def test_mcp_requests_never_reach_the_router(envoy: Envoy, mcp: Mcp) -> None:
    before = envoy.stats()["cluster.demo_control.upstream_rq_total"]
    mcp.request("ping")
    mcp.tools()
    mcp.call_tool("UserService_GetUser", {"user_id": 1})
    mcp.call_tool("UserService_GetUser", {"user_id": "x"})
    assert envoy.stats()["cluster.demo_control.upstream_rq_total"] == before


def test_slow_upstream_is_deadline_exceeded_at_the_configured_timeout(isolated: tuple[Envoy, Upstream]) -> None:
    envoy, upstream = isolated
    mcp = Mcp(envoy.mcp_url)
    upstream.delay(3000)
    started = time.monotonic()
    result = mcp.call_tool("UserService_GetUser", {"user_id": 1})
    elapsed = time.monotonic() - started
    assert result["isError"] is True
    assert is_deadline_error(result["content"][0]["text"], "demo.users.v1.UserService/GetUser", 300), result
    assert elapsed < 2.5, f"the 300 ms deadline was not applied (answer after {elapsed:.1f}s)"
    upstream.reset()
    assert mcp.call_tool("UserService_GetUser", {"user_id": 1})["isError"] is False


def test_a_hung_upstream_is_cut_off_at_the_tool_deadline() -> None:
    """The upstream accepts the connection and never answers, ignoring `grpc-timeout`: the
    filter's own deadline ends the call, and Envoy goes on serving."""
    hole = Blackhole(stands_in_for=DEMO_CLUSTERS)
    plugin = {"services": {"demo.users.v1.UserService": {"cluster": "demo_grpc", "timeout_ms": 400}}}
    with in_front_of(hole, plugin, "envoy-hung") as envoy:
        mcp = Mcp(envoy.mcp_url)
        for _ in range(2):
            started = time.monotonic()
            result = mcp.call_tool("UserService_GetUser", {"user_id": 1})
            elapsed = time.monotonic() - started
            assert result["content"][0]["text"] == (
                "demo.users.v1.UserService/GetUser failed with gRPC status DEADLINE_EXCEEDED (4): "
                "no answer within the 400 ms deadline"
            )
            assert 0.35 < elapsed < 2.0, f"answered after {elapsed:.2f}s"
        assert mcp.request("ping")["result"] == {}
        assert envoy.filter_marks().get("wasm.switchblade.vm_reload", 0) == 0


def test_an_upstream_that_resets_mid_exchange_is_unavailable() -> None:
    slammer = Slammer(stands_in_for=DEMO_CLUSTERS)
    plugin = {"services": {"demo.users.v1.UserService": {"cluster": "demo_grpc"}}}
    with in_front_of(slammer, plugin, "envoy-reset") as envoy:
        mcp = Mcp(envoy.mcp_url)
        text = mcp.call_tool("UserService_GetUser", {"user_id": 1})["content"][0]["text"]
        assert text.startswith("demo.users.v1.UserService/GetUser failed with gRPC status UNAVAILABLE (14): "), text
        assert mcp.request("ping")["result"] == {}


USER_1 = b"\x08\x01"  # demo.users.v1.User{user_id: 1}


@pytest.fixture(scope="module")
def raw_peer():
    """One Envoy in front of a raw HTTP/2 peer whose answer each test sets: the broken answers
    below need no Envoy each (every start of the Wasm build compiles the .wasm again)."""
    raw = RawHttp2Upstream(GRPC_ANSWER_HEADERS, stands_in_for=DEMO_CLUSTERS)
    with in_front_of(raw, {"services": {"demo.users.v1.UserService": {"cluster": "demo_grpc"}}}, "envoy-raw") as envoy:
        yield raw, envoy


@pytest.mark.parametrize("trailers_only", [False, True], ids=["in trailers", "trailers-only"])
def test_a_grpc_message_that_is_not_utf8_is_read_as_bytes(raw_peer, trailers_only: bool) -> None:
    """The SDK reads the host's status message as a string and panics when it is not UTF-8,
    which would take the VM down; the filter reads grpc-message from the metadata instead."""
    raw, envoy = raw_peer
    raw.answer_with(*grpc_failure(b"caf\xe9 %41", trailers_only=trailers_only))
    marks_before = envoy.filter_marks()
    mcp = Mcp(envoy.mcp_url)
    for _ in range(2):
        text = mcp.call_tool("UserService_GetUser", {"user_id": 1})["content"][0]["text"]
        assert text == "demo.users.v1.UserService/GetUser failed with gRPC status INTERNAL (13): caf\ufffd A", text
    assert mcp.request("ping")["result"] == {}
    assert envoy.filter_marks() == marks_before


@pytest.mark.parametrize(
    ("headers", "body", "trailers", "expected"),
    [
        ([(b":status", b"503"), (b"content-type", b"text/plain")], b"overloaded", None,
         "UNAVAILABLE (14): the upstream answered HTTP 503 instead of a gRPC status: overloaded"),
        ([(b":status", b"404")], b"", None,
         "UNIMPLEMENTED (12): the upstream answered HTTP 404 instead of a gRPC status"),
        (GRPC_ANSWER_HEADERS, b"\x00\x00\x00\x00\x02" + USER_1, None,
         "INTERNAL (13): the upstream's answer has no grpc-status"),
        (GRPC_ANSWER_HEADERS, b"\x01\x00\x00\x00\x02" + USER_1, [(b"grpc-status", b"0")],
         "INTERNAL (13): the upstream's answer is compressed, and no compression was offered"),
        (GRPC_ANSWER_HEADERS, (b"\x00\x00\x00\x00\x02" + USER_1) * 2, [(b"grpc-status", b"0")],
         "INTERNAL (13): the upstream's answer has more than one message for a unary method"),
        (GRPC_ANSWER_HEADERS, b"\x00\x00\x00\x00\x09" + USER_1, [(b"grpc-status", b"0")],
         "INTERNAL (13): the upstream's answer ends inside a gRPC frame"),
        (GRPC_ANSWER_HEADERS, b"", [(b"grpc-status", b"0")],
         "INTERNAL (13): the upstream's answer has no message"),
        (GRPC_ANSWER_HEADERS, b"", [(b"grpc-status", b"OK")],
         "INTERNAL (13): the upstream's grpc-status is not a number"),
    ],
    ids=["HTTP 503", "HTTP 404", "no grpc-status", "compressed", "two messages", "truncated frame", "no message",
         "grpc-status not a number"],
)
def test_answers_that_break_the_grpc_protocol_are_tool_errors(raw_peer, headers, body, trailers, expected) -> None:
    """What a misconfigured or broken server sends back is read, not trusted: each answer is a
    tool error naming what is wrong, and Envoy's Wasm VM keeps serving."""
    raw, envoy = raw_peer
    raw.answer_with(headers, body, trailers)
    mcp = Mcp(envoy.mcp_url)
    text = mcp.call_tool("UserService_GetUser", {"user_id": 1})["content"][0]["text"]
    assert text == f"demo.users.v1.UserService/GetUser failed with gRPC status {expected}", text
    assert mcp.request("ping")["result"] == {}
    assert envoy.filter_marks().get("wasm.switchblade.vm_reload", 0) == 0


def test_bytes_that_do_not_fit_the_declared_type_are_a_tool_error(tmp_path, upstream: Upstream) -> None:
    """Schema drift: the descriptor says user_id is a string, the service sends an integer."""
    proto = tmp_path / "demo/users/v1/users.proto"
    proto.parent.mkdir(parents=True)
    proto.write_text(
        'syntax = "proto3";\npackage demo.users.v1;\n'
        "service UserService { rpc GetUser(GetUserRequest) returns (User); }\n"
        "message GetUserRequest { int32 user_id = 1; }\n"
        "message User { string user_id = 1; }\n"
    )
    run = subprocess.run(
        [str(REPO / "target/release/switchblade"), "config", "-I", str(tmp_path), "demo/users/v1/users.proto",
         "--service", "demo.users.v1.UserService=demo_grpc"],
        capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    envoy = Envoy(upstream, json.loads(run.stdout), name="envoy-drift")
    try:
        envoy.start()
        result = Mcp(envoy.mcp_url).call_tool("UserService_GetUser", {"user_id": 1})
        assert result["isError"] is True
        assert result["content"][0]["text"].startswith(
            "demo.users.v1.UserService/GetUser answered with a response that could not be decoded: not a valid demo.users.v1.User"
        ), result
    finally:
        envoy.stop()

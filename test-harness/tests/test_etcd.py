"""etcd, a real server (Debian's `etcd-server`), behind Switchblade from its own protos (Debian's
`golang-etcd-server-dev`): KV as tools, and Watch, a bidirectional stream whose collection
window ends as the window, with the events seen in it. etcd keeps the deadline it is sent, and
ends a watch with an error of its own at that moment (`UNKNOWN`: "context deadline exceeded");
the demo upstream, with its DEADLINE_EXCEEDED, is kinder. The packages are downloaded and
unpacked, not installed, so the test needs no root (only Debian's package lists)."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import httpx2
import pytest

from debian import unpacked
from mcp_client import Mcp
from processes import CLI_BIN, Peer, free_port, in_front_of

GOCODE = "usr/share/gocode/src"
WINDOW_MS = 2000
WATCH = "etcdserverpb.Watch/Watch"


class Etcd(Peer):
    """A one-member etcd cluster on loopback, its data in a directory of its own."""

    def __init__(self, binary: Path) -> None:
        super().__init__(f"etcd-{free_port()}")
        self.binary = binary
        self.port = free_port()
        self.peer_port = free_port()

    def start(self) -> "Etcd":
        data = self.dir / "data"
        shutil.rmtree(data, ignore_errors=True)
        client, peer = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{self.peer_port}"
        self.launch([
            str(self.binary), "--name", "test", "--data-dir", str(data),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"test={peer}", "--log-level", "warn",
        ], self.healthy, "etcd")
        return self

    def healthy(self) -> bool:
        return httpx2.get(f"http://127.0.0.1:{self.port}/health", timeout=2).json().get("health") == "true"

    @property
    def clusters(self) -> dict[str, int]:
        # The demo bootstrap's clusters, both at etcd: the configuration names demo_grpc.
        return {"demo_grpc": self.port, "demo_control": self.port}


def etcd_plugin() -> dict:
    """`switchblade config` over etcd's own rpc.proto, as a user would write it."""
    etcd_protos = unpacked("golang-etcd-server-dev") / GOCODE / "go.etcd.io"
    gogo_protos = unpacked("golang-github-gogo-protobuf-dev") / GOCODE / "github.com/gogo/protobuf"
    result = subprocess.run(
        [str(CLI_BIN), "config", "-I", str(etcd_protos), "-I", str(gogo_protos),
         "etcd/etcdserver/etcdserverpb/rpc.proto",
         "--service", "etcdserverpb.KV=demo_grpc", "--service", "etcdserverpb.Watch=demo_grpc",
         "--streaming", "--timeout-ms", f"{WATCH}={WINDOW_MS}"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def etcd_envoy():
    binary = unpacked("etcd-server") / "usr/bin/etcd"
    plugin = etcd_plugin()
    with in_front_of(Etcd(binary).start(), plugin, "envoy-etcd") as envoy:
        yield envoy


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_a_watch_window_ends_as_the_window_with_what_etcd_saw_in_it(etcd_envoy) -> None:
    """A watch on a key, and the key put a moment after it starts: the result holds the watch's
    creation and the put, and ends with the window (`deadline`), not with etcd's own error at
    the deadline it was sent."""
    mcp = Mcp(etcd_envoy.mcp_url)
    watch = {"messages": [{"createRequest": {"key": b64("switchblade/window")}}]}

    def put_later() -> None:
        time.sleep(WINDOW_MS / 4000)
        put = Mcp(etcd_envoy.mcp_url).call_tool("KV_Put", {"key": b64("switchblade/window"), "value": b64("seen")})
        assert put["isError"] is False, put

    putter = threading.Thread(target=put_later)
    putter.start()
    started = time.monotonic()
    result = mcp.call_tool("Watch_Watch", watch)
    took = time.monotonic() - started
    putter.join()
    assert result["isError"] is False, result
    content = result["structuredContent"]
    assert content["end"] == {"reason": "deadline", "count": 2}, content
    created, changed = content["messages"]
    assert created["created"] is True, created
    [event] = changed["events"]
    assert event["kv"]["key"] == b64("switchblade/window") and event["kv"]["value"] == b64("seen"), event
    # The window, not etcd's deadline (a second later) or the client's.
    assert WINDOW_MS / 1000 <= took < WINDOW_MS / 1000 + 0.9, took


def test_kv_round_trips_through_etcd(etcd_envoy) -> None:
    """A put and a range read back, through the tools written from etcd's protos."""
    mcp = Mcp(etcd_envoy.mcp_url)
    put = mcp.call_tool("KV_Put", {"key": b64("switchblade/kv"), "value": b64("1")})
    assert put["isError"] is False, put
    got = mcp.call_tool("KV_Range", {"key": b64("switchblade/kv")})
    assert got["isError"] is False, got
    [kv] = got["structuredContent"]["kvs"]
    assert kv["value"] == b64("1"), kv
    # A field of the wrong type never reaches etcd.
    refused = mcp.call_tool("KV_Range", {"key": b64("switchblade/kv"), "limit": {"$ne": None}})
    assert refused["isError"] is True, refused
    assert "at `limit`: expected a 64-bit integer" in refused["content"][0]["text"], refused

"""containerd, a real daemon (Debian's `containerd`, with its own root, state and sockets under
.work), behind Switchblade from its own API protos (Debian's
`golang-github-containerd-containerd-dev`), in tool search mode. containerd refuses a call
that names no namespace; `services.S.metadata` sends its `containerd-namespace` header, and a
search finds its tools, among them `Events/Subscribe`, a server stream whose window sees a
namespace created while it is open. The packages are downloaded and unpacked, not
installed."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from debian import unpacked
from mcp_client import Mcp
from processes import CLI_BIN, Peer, free_port, in_front_of

API = "usr/share/gocode/src"
SERVICES = "github.com/containerd/containerd/api/services"
NAMESPACES = "containerd.services.namespaces.v1.Namespaces"
CONTAINERS = "containerd.services.containers.v1.Containers"
VERSION = "containerd.services.version.v1.Version"
LEASES = "containerd.services.leases.v1.Leases"
EVENTS = "containerd.services.events.v1.Events"
SERVICES_SERVED = (NAMESPACES, CONTAINERS, VERSION, LEASES, EVENTS)
# How long a Subscribe gathers events: its tool's window.
SUBSCRIBE_WINDOW_MS = 4000


class Containerd(Peer):
    """containerd on a Unix socket (its TCP listener serves only the CRI), its root, state and
    sockets in a directory of its own, with only the plugins a metadata store needs."""

    def __init__(self, binary: Path) -> None:
        super().__init__(f"containerd-{free_port()}")
        self.binary = binary
        self.socket = self.dir / "containerd.sock"

    def start(self) -> "Containerd":
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        config = self.dir / "config.toml"
        # Plugins that need a kernel feature, a network or a runtime are left out: what is tested
        # is the API's metadata (namespaces, containers, leases, version).
        config.write_text(f"""version = 2
root = "{self.dir / 'root'}"
state = "{self.dir / 'state'}"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.internal.v1.opt", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "{self.socket}"
[ttrpc]
  address = "{self.dir / 'containerd.sock.ttrpc'}"
""")
        self.launch([str(self.binary), "--config", str(config), "--log-level", "warn"], self.listening, "containerd")
        return self

    def listening(self) -> bool:
        with socket.socket(socket.AF_UNIX) as probe:
            return probe.connect_ex(str(self.socket)) == 0

    @property
    def clusters(self) -> dict[str, str]:
        return {"demo_grpc": str(self.socket), "demo_control": str(self.socket)}


def containerd_plugin(namespace: str | None) -> dict:
    """`switchblade config` over containerd's own protos, in search mode, with its namespace
    header."""
    api = unpacked("golang-github-containerd-containerd-dev") / API
    gogo = unpacked("golang-github-gogo-protobuf-dev") / API / "github.com/gogo/protobuf"
    protos = [f"{SERVICES}/{name}" for name in ["namespaces/v1/namespace.proto", "containers/v1/containers.proto",
                                                 "version/v1/version.proto", "leases/v1/leases.proto",
                                                 "events/v1/events.proto"]]
    # The events' own messages, which an envelope's `event` (an Any) holds.
    protos.append("github.com/containerd/containerd/api/events/namespace.proto")
    command = [str(CLI_BIN), "config", "-I", str(api), "-I", str(gogo), *protos, "--streaming", "--discovery", "search",
               "--timeout-ms", f"{EVENTS}/Subscribe={SUBSCRIBE_WINDOW_MS}"]
    for service in SERVICES_SERVED:
        command += ["--service", f"{service}=demo_grpc"]
        if namespace:
            command += ["--metadata", f"{service}:containerd-namespace={namespace}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def containerd_binary() -> Path:
    if os.geteuid() != 0:
        pytest.skip("containerd needs root for its own state directories")
    return unpacked("containerd") / "usr/bin/containerd"


def test_an_agent_finds_and_calls_containerds_tools_with_its_namespace(containerd_binary) -> None:
    with in_front_of(Containerd(containerd_binary).start(), containerd_plugin("switchblade"), "envoy-containerd") as envoy:
        mcp = Mcp(envoy.mcp_url)
        found = mcp.call_tool("search_tools", {"query": "create a namespace"})["structuredContent"]["tools"]
        assert found[0]["name"] == "Namespaces_Create", [tool["name"] for tool in found]
        created = mcp.call_tool("call_tool", {"name": "Namespaces_Create",
                                              "arguments": {"namespace": {"name": "switchblade", "labels": {"by": "mcp"}}}})
        assert created["isError"] is False, created
        listed = mcp.call_tool("call_tool", {"name": "Namespaces_List", "arguments": {}})
        assert "switchblade" in [item["name"] for item in listed["structuredContent"]["namespaces"]], listed
        # containerd keeps a container's spec as it is given (an Any of a type the descriptors
        # know), and wants one.
        container = {"container": {"id": "web", "runtime": {"name": "io.containerd.runc.v2"},
                                   "spec": {"@type": "type.googleapis.com/google.protobuf.Timestamp",
                                            "value": "2026-12-05T00:00:00Z"}}}
        made = mcp.call_tool("call_tool", {"name": "Containers_Create", "arguments": container})
        assert made["isError"] is False, made
        containers = mcp.call_tool("call_tool", {"name": "Containers_List", "arguments": {}})["structuredContent"]
        assert [item["id"] for item in containers["containers"]] == ["web"], containers
        version = mcp.call_tool("call_tool", {"name": "Version_Version", "arguments": {}})["structuredContent"]
        assert version["version"].startswith("1."), version
        # A wrongly typed argument never reaches containerd.
        refused = mcp.call_tool("call_tool", {"name": "Containers_Get", "arguments": {"id": {"$ne": None}}})
        assert refused["isError"] is True and "Invalid arguments for tool Containers_Get" in refused["content"][0]["text"]


def test_a_subscription_sees_a_namespace_created_in_its_window(containerd_binary) -> None:
    with in_front_of(Containerd(containerd_binary).start(), containerd_plugin("switchblade"), "envoy-containerd-events") as envoy:
        mcp = Mcp(envoy.mcp_url)
        found = mcp.call_tool("search_tools", {"query": "watch the events of containerd as they happen",
                                               "kind": "server-streaming"})["structuredContent"]["tools"]
        assert found[0]["name"] == "Events_Subscribe", [tool["name"] for tool in found]
        subscribed: dict = {}

        def subscribe() -> None:
            subscribed.update(Mcp(envoy.mcp_url).call_tool(
                "call_tool", {"name": "Events_Subscribe", "arguments": {"filters": ['topic~="/namespaces/"']}}))

        window = threading.Thread(target=subscribe)
        window.start()
        # Well inside the window: containerd has the subscription before the namespace comes.
        time.sleep(SUBSCRIBE_WINDOW_MS / 4000)
        created = mcp.call_tool("call_tool", {"name": "Namespaces_Create", "arguments": {"namespace": {"name": "during"}}})
        assert created["isError"] is False, created
        window.join(timeout=SUBSCRIBE_WINDOW_MS / 1000 + 10)
        # The window's end is how a subscription ends: the events gathered, not an error.
        assert subscribed.get("isError") is False, subscribed
        envelopes = subscribed["structuredContent"]["messages"]
        creations = [envelope for envelope in envelopes if envelope["topic"] == "/namespaces/create"]
        # containerd writes the event's type URL bare (its typeurl package), and the Any is
        # rendered with the message the descriptors give that name.
        assert [envelope["event"] for envelope in creations] == [
            {"@type": "containerd.events.NamespaceCreate", "name": "during", "labels": {}}], envelopes
        assert creations[0]["namespace"] == "switchblade"


def test_without_its_namespace_containerd_refuses_the_call(containerd_binary) -> None:
    with in_front_of(Containerd(containerd_binary).start(), containerd_plugin(None), "envoy-containerd-bare") as envoy:
        refused = Mcp(envoy.mcp_url).call_tool("call_tool", {"name": "Containers_List", "arguments": {}})
        assert refused["isError"] is True
        assert "namespace is required" in refused["content"][0]["text"], refused

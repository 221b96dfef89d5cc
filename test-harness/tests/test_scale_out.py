"""Several Envoys from one configuration, as a platform scales Switchblade out: two replicas
follow the same ECDS file behind a round-robin Envoy. Clients of either protocol era are served
by whichever replica gets each request (the filter keeps no session), and one configuration
swap reaches both replicas."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest
import yaml
from mcp import Client

from filter_build import demo_plugin
from mcp_client import Mcp
from processes import ECDS_STATS, ENVOY_BIN, Envoy, Peer, Upstream, free_port, wait_until

USERS = "demo.users.v1.UserService"


class RoundRobin(Peer):
    """An Envoy in front of the replicas, with no filter: each request goes to the next one."""

    def __init__(self, replicas: list[Envoy]) -> None:
        self.port = free_port()
        self.admin_port = free_port()
        super().__init__(f"front-{self.port}")
        endpoints = [{"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": replica.port}}}}
                     for replica in replicas]
        self.config = {
            "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": self.admin_port}}},
            "static_resources": {
                "listeners": [{
                    "name": "front",
                    "address": {"socket_address": {"address": "127.0.0.1", "port_value": self.port}},
                    "filter_chains": [{"filters": [{
                        "name": "envoy.filters.network.http_connection_manager",
                        "typed_config": {
                            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                            "stat_prefix": "front",
                            "route_config": {"virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [
                                {"match": {"prefix": "/"}, "route": {"cluster": "replicas"}}]}]},
                            "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
                                "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
                        },
                    }]}],
                }],
                "clusters": [{
                    "name": "replicas", "type": "STATIC", "lb_policy": "ROUND_ROBIN", "connect_timeout": "1s",
                    "load_assignment": {"cluster_name": "replicas", "endpoints": [{"lb_endpoints": endpoints}]},
                }],
            },
        }

    def start(self) -> "RoundRobin":
        self.dir.mkdir(parents=True, exist_ok=True)
        config_path = self.dir / "envoy.yaml"
        config_path.write_text(yaml.safe_dump(self.config))
        self.launch([str(ENVOY_BIN), "-c", str(config_path), "--disable-hot-restart", "--concurrency", "1",
                     "--log-level", "warn"],
                    lambda: httpx2.get(f"http://127.0.0.1:{self.admin_port}/ready", timeout=1).status_code == 200,
                    "the round-robin Envoy")
        return self

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


@pytest.fixture(scope="module")
def replicas(upstream: Upstream):
    first = Envoy(upstream, name="replica-a").start()
    second = Envoy(upstream, name="replica-b", shared_ecds=first).start()
    front = RoundRobin([first, second]).start()
    yield first, second, front
    front.stop()
    second.stop()
    first.stop()


def tool_calls_served(replica: Envoy) -> int:
    """The `tools/call` requests this replica's filter has handled, in any protocol version
    (the stat's name carries its labels in either build)."""
    return sum(value for name, value in replica.stats().items()
               if name.removeprefix("wasmcustom.").startswith("switchblade.requests.method.tools/call."))


async def session(url: str, mode: str, calls: int) -> list[Any]:
    async with Client(url, mode=mode) as client:
        tools = (await client.list_tools()).tools
        assert [tool.name for tool in tools] == ["CatalogService_Search", "CatalogService_GetItem", "UserService_GetUser"]
        return [await client.call_tool("CatalogService_GetItem", {"id": "3"}) for _ in range(calls)]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_either_replica_serves_either_era(replicas: tuple[Envoy, Envoy, RoundRobin], mode: str) -> None:
    first, second, front = replicas
    before = [tool_calls_served(first), tool_calls_served(second)]
    results = asyncio.run(session(front.mcp_url, mode, calls=6))
    assert all(result.is_error is False and result.structured_content["name"] == "The Pragmatic Programmer"
               for result in results)
    served = [tool_calls_served(first) - before[0], tool_calls_served(second) - before[1]]
    # One session, its requests spread over both replicas: no affinity is needed.
    assert sum(served) == 6 and min(served) >= 2, served


def test_one_swap_reaches_every_replica(replicas: tuple[Envoy, Envoy, RoundRobin]) -> None:
    first, second, _ = replicas

    def ecds_updates(replica: Envoy) -> int:
        return replica.stats().get(f"{ECDS_STATS}.update_success", 0)

    def tool_names(replica: Envoy) -> list[str]:
        return [tool["name"] for tool in Mcp(replica.mcp_url).request("tools/list")["result"]["tools"]]

    users_only = {**demo_plugin(), "services": {USERS: {"cluster": "demo_grpc"}}}
    seen_by_second = ecds_updates(second)
    assert first.swap_plugin(users_only)
    wait_until(lambda: ecds_updates(second) > seen_by_second, "the second replica's ECDS update")
    try:
        assert tool_names(first) == tool_names(second) == ["UserService_GetUser"]
    finally:
        seen_by_second = ecds_updates(second)
        assert first.swap_plugin(demo_plugin())
        wait_until(lambda: ecds_updates(second) > seen_by_second, "the second replica's ECDS update")
    assert tool_names(first) == tool_names(second) == [
        "CatalogService_Search", "CatalogService_GetItem", "UserService_GetUser"]

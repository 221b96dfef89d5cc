"""Live discovery: a service configured `from_reflection` is read from the upstream's own gRPC
server reflection, through Envoy, when the filter is configured and then every
`reflection.interval_ms`; the tools follow the upstream's API without touching Envoy's
configuration, and a failing or garbled reflection keeps the last good catalog."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx2
import pytest
from mcp import Client

from mcp_client import Mcp
from processes import Envoy, Upstream, wait_until

INVENTORY = "acme.inventory.v1.InventoryService"
INTERVAL_MS = 1000


def plugin(*services: str, **extra) -> dict:
    return {
        "services": {service: {"cluster": "demo_grpc", "from_reflection": True} for service in services},
        "reflection": {"interval_ms": INTERVAL_MS},
        **extra,
    }


def listed(mcp: Mcp, era: str = "legacy") -> list[str]:
    """Every tool name, walking the pages, in one era."""
    names, cursor = [], None
    while True:
        params = {"cursor": cursor} if cursor else {}
        if era == "legacy":
            result = mcp.request("tools/list", params)["result"]
        else:
            result = mcp.modern("tools/list", params).json()["result"]
        names += [tool["name"] for tool in result["tools"]]
        cursor = result.get("nextCursor")
        if not cursor:
            return names


async def _follow(url: str, mode: str, change, expected: list[str]) -> tuple[list[str], list[str]]:
    async with Client(url, mode=mode) as client:
        async def names() -> list[str]:
            return [tool.name for tool in (await client.list_tools()).tools]
        before = await names()
        await asyncio.to_thread(change)
        deadline = time.monotonic() + 15
        after = await names()
        while after != expected and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            after = await names()
        return before, after


def sdk_follows(url: str, mode: str, change, expected: list[str]) -> tuple[list[str], list[str]]:
    """What one session of the official Python SDK lists before `change`, and (listing again
    until it does, for 15 s at most) after it: a 2026-07-28 client keeps the list for ttlMs."""
    return asyncio.run(_follow(url, mode, change, expected))


def refreshes(envoy: Envoy, outcome: str) -> int:
    """The reflection refreshes counted with `outcome`, over every worker."""
    return sum(value for name, value in envoy.stats().items()
               if "reflection_refreshes" in name and f"outcome.{outcome}" in name)


@pytest.fixture
def upstream_of_its_own():
    """An upstream this test may restart with other flags."""
    started: list[Upstream] = []

    def start(*args: str) -> Upstream:
        upstream = Upstream(args=list(args)).start()
        started.append(upstream)
        return upstream
    yield start
    for upstream in started:
        upstream.stop()


@pytest.fixture
def envoys():
    started: list[Envoy] = []

    def start(upstream: Upstream, config: dict, workers: int = 1) -> Envoy:
        proxy = Envoy(upstream, plugin=config, name=f"envoy-reflection-{len(started)}", workers=workers).start()
        started.append(proxy)
        return proxy
    yield start
    for proxy in started:
        proxy.stop()


def restart(upstream: Upstream, *args: str) -> None:
    upstream.stop()
    upstream.args = list(args)
    upstream.start()


def test_tools_follow_the_upstream_restarted_with_a_larger_api_in_both_eras(upstream_of_its_own, envoys) -> None:
    upstream = upstream_of_its_own("--api", "small")
    envoy = envoys(upstream, plugin(INVENTORY))
    mcp = Mcp(envoy.mcp_url)
    wait_until(lambda: listed(mcp) == ["InventoryService_GetStock"], "the small API's tools")
    assert mcp.call_tool("InventoryService_GetStock", {"sku": "SKU-0001", "warehouse": "BER"})["isError"] is False
    modern = mcp.modern("tools/list").json()["result"]
    # A 2026-07-28 client may keep the list no longer than reflection may take to change it.
    assert modern["ttlMs"] == INTERVAL_MS
    assert "reading acme.inventory.v1.InventoryService through gRPC server reflection" in envoy.logs()

    # The upstream comes back with a larger API: a 2026-07-28 session of the official SDK sees
    # the tools follow once its cached list expires (ttlMs), and so does a raw client of each era.
    full = ["InventoryService_GetStock", "InventoryService_Reserve", "InventoryService_ListWarehouses"]
    before, after = sdk_follows(envoy.mcp_url, "2026-07-28", lambda: restart(upstream, "--api", "full"), full)
    assert (before, after) == (["InventoryService_GetStock"], full)
    assert listed(mcp) == full and listed(mcp, "modern") == full
    assert Mcp(envoy.mcp_url).call_tool("InventoryService_ListWarehouses", {})["isError"] is False
    assert refreshes(envoy, "changed") >= 2
    assert "gRPC server reflection: serving 3 tools (before: 1)" in envoy.logs()

    # And back, seen by a handshake-era session: a method removed upstream disappears, and
    # calling it says it is unknown.
    before, after = sdk_follows(envoy.mcp_url, "legacy", lambda: restart(upstream, "--api", "small"), ["InventoryService_GetStock"])
    assert (before, after) == (full, ["InventoryService_GetStock"])
    body = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "InventoryService_Reserve", "arguments": {}}}
    answer = mcp.post(body, headers={"mcp-protocol-version": "2025-11-25"}).json()
    assert answer["error"]["message"].startswith('Invalid params: unknown tool "InventoryService_Reserve"')


def test_calls_in_flight_finish_while_the_catalog_changes(upstream_of_its_own, envoys) -> None:
    upstream = upstream_of_its_own("--api", "small")
    envoy = envoys(upstream, plugin(INVENTORY))
    mcp = Mcp(envoy.mcp_url)
    wait_until(lambda: listed(mcp) == ["InventoryService_GetStock"], "the small API's tools")
    # The swap must come while the call is out: if a refresh happens to land between the
    # restart and the call (a few ms of a 1 s interval), go again.
    for _ in range(3):
        restart(upstream, "--api", "full")
        httpx2.post(f"{upstream.control_url}/delay", params={"ms": 2500}, timeout=2).raise_for_status()
        result: dict = {}
        call = threading.Thread(target=lambda: result.update(
            Mcp(envoy.mcp_url).call_tool("InventoryService_GetStock", {"sku": "SKU-0001", "warehouse": "BER"})))
        call.start()
        time.sleep(0.2)
        started_before_the_swap = listed(mcp) == ["InventoryService_GetStock"]
        wait_until(lambda: len(listed(mcp)) == 3, "the full API's tools")
        swapped_in_flight = call.is_alive()
        call.join(timeout=10)
        assert result["isError"] is False, result
        if started_before_the_swap and swapped_in_flight:
            return
        restart(upstream, "--api", "small")
        wait_until(lambda: listed(mcp) == ["InventoryService_GetStock"], "the small API again")
    pytest.fail("the catalog never changed while a call was out")


def test_until_reflection_answers_the_state_is_explicit_and_failures_are_counted(upstream_of_its_own, envoys) -> None:
    upstream = upstream_of_its_own("--reflection", "off")
    envoy = envoys(upstream, plugin(INVENTORY, services={
        INVENTORY: {"cluster": "demo_grpc", "from_reflection": True},
        "demo.users.v1.UserService": {"cluster": "demo_grpc"},
    }))
    mcp = Mcp(envoy.mcp_url)
    wait_until(lambda: refreshes(envoy, "failed") >= 2, "failed refreshes counted")
    # The configured service serves; the reflected one is not known yet, and a call says so.
    assert listed(mcp) == ["UserService_GetUser"]
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "InventoryService_GetStock", "arguments": {}}}
    answer = mcp.post(body, headers={"mcp-protocol-version": "2025-11-25"}).json()
    assert answer["error"]["message"] == (
        'Invalid params: unknown tool "InventoryService_GetStock"; the tools of acme.inventory.v1.InventoryService are '
        "not known yet (their descriptors are being read through gRPC server reflection); call tools/list again shortly")
    assert ("gRPC server reflection failed, keeping the last good catalog (1 tools): cluster demo_grpc: the server does "
            "not offer gRPC server reflection (neither grpc.reflection.v1 nor v1alpha)") in envoy.logs()
    assert upstream.calls() == {}
    # Reflection comes back: the tools appear.
    restart(upstream)
    wait_until(lambda: "InventoryService_GetStock" in listed(mcp), "the reflected tools")


KEPT = "gRPC server reflection failed, keeping the last good catalog (3 tools): "


@pytest.mark.parametrize("reflection, why", [
    ("garbage", "cluster demo_grpc: a garbled reflection answer"),
    # prost-reflect 0.16.5 panics on a file whose syntax is neither proto2 nor proto3, and a
    # panic in a refresh killed the Wasm VM: the filter refuses such a file first.
    ("editions", "the reflected descriptors do not make a catalog: `acme/inventory/v1/inventory.proto` declares syntax "
                 "\"editions\": only proto2 and proto3 descriptors are supported, not editions"),
], ids=["garbled", "editions"])
def test_a_bad_reflection_answer_keeps_the_last_good_catalog(upstream_of_its_own, envoys, reflection: str,
                                                             why: str) -> None:
    upstream = upstream_of_its_own()
    envoy = envoys(upstream, plugin(INVENTORY))
    mcp = Mcp(envoy.mcp_url)
    wait_until(lambda: len(listed(mcp)) == 3, "the reflected tools")
    restart(upstream, "--reflection", reflection)
    failed = refreshes(envoy, "failed")
    wait_until(lambda: refreshes(envoy, "failed") >= failed + 2, "failed refreshes counted")
    assert KEPT + why in envoy.logs(), envoy.logs()[-3000:]
    assert len(listed(mcp)) == 3
    assert mcp.call_tool("InventoryService_GetStock", {"sku": "SKU-0001", "warehouse": "BER"})["isError"] is False


def test_a_thousand_method_api_becomes_a_thousand_tools(upstream_of_its_own, envoys) -> None:
    upstream = upstream_of_its_own("--api", "big")
    envoy = envoys(upstream, plugin("big.v1.Big"))
    mcp = Mcp(envoy.mcp_url)
    wait_until(lambda: len(listed(mcp)) == 1000, "a thousand tools", timeout=30)
    names = listed(mcp, "modern")
    assert names[0] == "Big_Method0" and names[-1] == "Big_Method999" and len(set(names)) == 1000
    # The upstream does not implement them: the call reaches it and says so.
    result = mcp.request("tools/call", {"name": "Big_Method999", "arguments": {}})["result"]
    assert result["isError"] is True
    assert "UNIMPLEMENTED (12)" in result["content"][0]["text"]


def test_every_worker_converges_on_the_upstreams_api(upstream_of_its_own, envoys) -> None:
    """Two workers (two Wasm VMs, each reading reflection on its own; one configuration in the
    module): every new connection, whichever worker takes it, lists the same tools."""
    upstream = upstream_of_its_own("--api", "small")
    envoy = envoys(upstream, plugin(INVENTORY), workers=2)

    def every_connection_lists(expected: list[str]) -> bool:
        # A new client (a new connection) each time, so that both workers answer.
        return all(listed(Mcp(envoy.mcp_url)) == expected for _ in range(12))

    wait_until(lambda: every_connection_lists(["InventoryService_GetStock"]), "both workers on the small API")
    restart(upstream, "--api", "full")
    full = ["InventoryService_GetStock", "InventoryService_Reserve", "InventoryService_ListWarehouses"]
    wait_until(lambda: every_connection_lists(full), "both workers on the full API")
    # Both workers took connections.
    per_worker = [value for name, value in envoy.stats().items()
                  if name.startswith(f"listener.127.0.0.1_{envoy.port}.worker_") and name.endswith(".downstream_cx_total")]
    assert len(per_worker) == 2 and all(per_worker), per_worker

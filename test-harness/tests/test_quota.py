"""Rate limits and caps on calls in flight per tool and caller (`limits.rules`), in one Envoy
(its workers share the counters) and across two Envoys that share one budget through a rate
limit service (the `ratelimit-peer` test peer, which speaks Envoy's ShouldRateLimit
protocol). Upstream call counts prove that nothing over a limit reaches the service."""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx2
import jwt
import pytest

from filter_build import demo_plugin
from processes import REPO, Envoy, Peer, Upstream, demo_config, free_port
from test_auth import ISSUER, AUDIENCE, auth_bootstrap, auth_plugin_entry, new_key, with_plugin

GET_USER = "demo.users.v1.UserService/GetUser"
CATALOG = "demo.catalog.v1.CatalogService"
RETRY_META = "io.switchblade/retryAfterMs"
RATELIMIT_BIN = REPO / "target/release/ratelimit-peer"


def with_limits(limits: dict[str, Any]) -> dict[str, Any]:
    plugin = demo_plugin()
    plugin["limits"] = limits
    return plugin


def call_body(id: int, name: str = "UserService_GetUser") -> dict[str, Any]:
    arguments = {"user_id": 1} if name == "UserService_GetUser" else {"query": "knife"}
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


class Client:
    """Raw JSON-RPC over its own connections, from a loopback address of its choosing: a
    caller Envoy sees as `source.address`."""

    def __init__(self, url: str, address: str = "127.0.0.1", headers: dict[str, str] | None = None) -> None:
        self.url = url
        self.headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                        "mcp-protocol-version": "2025-03-26", **(headers or {})}
        self.http = httpx2.Client(timeout=10, transport=httpx2.HTTPTransport(local_address=address))

    def post(self, body: Any) -> httpx2.Response:
        return self.http.post(self.url, content=json.dumps(body), headers=self.headers)

    def call(self, name: str = "UserService_GetUser") -> dict[str, Any]:
        response = self.post(call_body(1, name))
        assert response.status_code == 200, response.text
        return response.json()["result"]


def rate_limited_calls(envoy: Envoy, tool: str) -> int:
    """`switchblade_tool_calls{tool, outcome="rate_limited"}`, as Prometheus would scrape it."""
    text = httpx2.get(f"{envoy.admin_url}/stats/prometheus", timeout=5).text
    total = 0
    for line in text.splitlines():
        if "switchblade_tool_calls{" in line and f'tool="{tool}"' in line and 'outcome="rate_limited"' in line:
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


@pytest.fixture(scope="module")
def limited(upstream: Upstream):
    """GetUser at 2 per second (burst 2) per caller, the catalog at 2 calls in flight."""
    plugin = with_limits({"rules": [
        {"match": GET_USER, "requests_per_second": 2, "burst": 2},
        {"match": CATALOG, "max_in_flight": 2},
    ]})
    proxy = Envoy(upstream, plugin, name="envoy-quota").start()
    yield proxy
    proxy.stop()


def test_a_two_per_second_limit_holds_over_five_seconds_for_one_caller_and_not_another(limited: Envoy, upstream: Upstream) -> None:
    upstream.reset()
    time.sleep(1.1)  # earlier tests' tokens come back
    first, second = Client(limited.mcp_url, "127.0.0.1"), Client(limited.mcp_url, "127.0.0.2")
    served, refused = 0, []
    started = time.monotonic()
    while time.monotonic() - started < 5.0:
        result = first.call()
        if result["isError"]:
            refused.append(result)
        else:
            served += 1
        time.sleep(0.02)
    elapsed = time.monotonic() - started
    # A bucket of 2, refilled at 2 a second: within one call of what the limit allows (the
    # last token may come as the loop ends).
    allowed = 2 + 2 * elapsed
    assert int(allowed) - 1 <= served <= allowed, (served, elapsed)
    assert upstream.calls() == {f"/{GET_USER}": served}
    text = refused[0]["content"][0]["text"]
    assert re.fullmatch(
        r"Rate limited: UserService_GetUser allows each caller 2 calls per second, 2 at once "
        r"\(limits\.rules\[0\], match \"demo\.users\.v1\.UserService/GetUser\"\); retry after \d+ ms\. The call was not sent\.", text), text
    assert 1 <= refused[0]["_meta"][RETRY_META] <= 500
    # Another caller (another address) has a bucket of its own.
    assert [second.call()["isError"] for _ in range(3)] == [False, False, True]
    assert rate_limited_calls(limited, "UserService_GetUser") >= len(refused) + 1


def test_a_batch_counts_each_call(limited: Envoy, upstream: Upstream) -> None:
    upstream.reset()
    client = Client(limited.mcp_url, "127.0.0.3")
    answers = client.post([call_body(id) for id in range(5)]).json()
    assert [answer["result"]["isError"] for answer in answers] == [False, False, True, True, True]
    assert upstream.calls() == {f"/{GET_USER}": 2}


def test_max_in_flight_caps_calls_at_a_slow_upstream(limited: Envoy, upstream: Upstream) -> None:
    upstream.reset()
    upstream.delay(600)
    try:
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda _: Client(limited.mcp_url).call("CatalogService_Search"), range(8)))
    finally:
        upstream.reset()
    served = [result for result in results if not result["isError"]]
    refused = [result for result in results if result["isError"]]
    assert 2 <= len(served) < 8, results
    assert refused[0]["content"][0]["text"] == (
        "Rate limited: CatalogService_Search allows 2 calls in flight at once, and 2 are out "
        f"(limits.rules[1], match \"{CATALOG}\"); retry after 1000 ms. The call was not sent.")
    assert refused[0]["_meta"] == {RETRY_META: 1000}
    # Once the slow calls are answered, their places are free again.
    assert Client(limited.mcp_url).call("CatalogService_Search")["isError"] is False


def test_the_upstream_never_sees_more_than_max_in_flight(limited: Envoy, upstream: Upstream) -> None:
    upstream.reset()
    upstream.delay(500)
    with ThreadPoolExecutor(10) as pool:
        results = list(pool.map(lambda _: Client(limited.mcp_url).call("CatalogService_Search"), range(10)))
    most = upstream.most_in_flight()
    calls = upstream.calls()
    upstream.reset()
    served = sum(1 for result in results if not result["isError"])
    assert most == 2, results
    assert calls == {f"/{CATALOG}/Search": served}


def test_a_caller_over_its_limit_across_every_tool_gets_429_with_retry_after(upstream: Upstream) -> None:
    plugin = with_limits({"rules": [{"match": "*", "requests_per_second": 1, "burst": 3}]})
    proxy = Envoy(upstream, plugin, name="envoy-quota-all").start()
    try:
        upstream.reset()
        client = Client(proxy.mcp_url)
        assert [client.call(name)["isError"] for name in ["UserService_GetUser", "CatalogService_Search"]] == [False, False]
        refused = client.post([call_body(1), call_body(2, "CatalogService_Search")])
        assert refused.status_code == 429, refused.text
        assert refused.headers["retry-after"] == "1"
        answer = refused.json()
        retry_ms = answer["error"]["data"]["retryAfterMs"]
        assert 0 < retry_ms <= 1000
        assert answer == {"jsonrpc": "2.0", "id": None, "error": {
            "code": -32029,
            "message": "Too Many Requests: this caller may make 1 tool calls per second across every tool, 3 at once "
                       f"(limits.rules[0], match \"*\"); this request has 2 calls; retry after {retry_ms} ms",
            "data": {"retryAfterMs": retry_ms}}}
        assert upstream.total_calls() == 2
        lone = client.post(call_body(7))
        assert lone.status_code == 200 and lone.json()["result"]["isError"] is False
        lone = client.post(call_body(8))
        assert lone.status_code == 429 and lone.json()["id"] == 8
        assert upstream.total_calls() == 3
    finally:
        proxy.stop()


def test_workers_share_one_budget_exactly_under_many_connections(upstream: Upstream) -> None:
    """Two workers (two Wasm VMs, or two module threads) and 40 connections at once: exactly
    the burst is served, whichever worker each connection lands on."""
    plugin = with_limits({"rules": [{"match": GET_USER, "requests_per_second": 0.01, "burst": 15}]})
    proxy = Envoy(upstream, plugin, name="envoy-quota-workers", workers=2).start()
    try:
        upstream.reset()
        barrier = threading.Barrier(40)

        def one(_: int) -> bool:
            client = Client(proxy.mcp_url)
            barrier.wait()
            return client.call()["isError"]

        with ThreadPoolExecutor(40) as pool:
            errors = list(pool.map(one, range(40)))
        assert errors.count(False) == 15
        assert upstream.calls() == {f"/{GET_USER}": 15}
    finally:
        proxy.stop()


def signed(key, subject: str) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": subject, "scope": "users:read catalog:read", "iat": now, "exp": now + 300}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "test"})


def test_callers_are_counted_by_the_tokens_subject(upstream: Upstream) -> None:
    key = new_key()
    bootstrap = auth_bootstrap(key)
    plugin = json.loads(auth_plugin_entry(bootstrap)["config"]["configuration"]["value"])
    plugin["limits"] = {"rules": [{"match": GET_USER, "requests_per_second": 0.01, "burst": 2}]}
    proxy = Envoy(upstream, bootstrap=with_plugin(bootstrap, plugin), name="envoy-quota-auth").start()
    try:
        upstream.reset()
        seven = Client(proxy.mcp_url, headers={"authorization": f"Bearer {signed(key, 'agent-7')}"})
        eight = Client(proxy.mcp_url, headers={"authorization": f"Bearer {signed(key, 'agent-8')}"})
        assert [seven.call()["isError"] for _ in range(3)] == [False, False, True]
        # The same subject in a new token is the same caller; another subject is not.
        again = Client(proxy.mcp_url, headers={"authorization": f"Bearer {signed(key, 'agent-7')}"})
        assert again.call()["isError"] is True
        assert [eight.call()["isError"] for _ in range(3)] == [False, False, True]
        assert upstream.calls() == {f"/{GET_USER}": 4}
    finally:
        proxy.stop()


# Two Envoys, one budget: the rate limit service.

RLS_CONFIG = {"domain": "switchblade", "descriptors": [
    {"key": "tool", "value": "UserService_GetUser",
     "descriptors": [{"key": "caller", "rate_limit": {"unit": "hour", "requests_per_unit": 3}}]},
    {"key": "caller", "rate_limit": {"unit": "hour", "requests_per_unit": 6}},
]}


class RateLimitPeer(Peer):
    """The test peer that speaks ShouldRateLimit, with one shared counter per limit."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.grpc_port = free_port()
        self.control_port = free_port()
        super().__init__(f"ratelimit-{self.grpc_port}")
        self.config = config

    def start(self) -> "RateLimitPeer":
        self.dir.mkdir(parents=True, exist_ok=True)
        config_path = self.dir / "config.json"
        config_path.write_text(json.dumps(self.config))
        self.launch([str(RATELIMIT_BIN), "--grpc", f"127.0.0.1:{self.grpc_port}", "--control", f"127.0.0.1:{self.control_port}",
                     "--config", str(config_path)],
                    lambda: self.requests() >= 0, "ratelimit-peer")
        return self

    def requests(self) -> int:
        return httpx2.get(f"http://127.0.0.1:{self.control_port}/requests", timeout=2).raise_for_status().json()

    def delay(self, ms: int) -> None:
        httpx2.post(f"http://127.0.0.1:{self.control_port}/delay", params={"ms": ms}, timeout=2).raise_for_status()


class WithRateLimit:
    """The demo upstream's clusters, and rate limit services' clusters (`ratelimit` and any
    other) at ports of their own."""

    def __init__(self, upstream: Upstream, port: int, **others: int) -> None:
        self.clusters = {**upstream.clusters, "ratelimit": port, **others}


def rls_bootstrap(*others: str) -> dict[str, Any]:
    """The demo bootstrap with a `ratelimit` cluster and one for each of `others` (HTTP/2, as
    the service's gRPC needs)."""
    config = demo_config()
    clusters = config["static_resources"]["clusters"]
    grpc = next(cluster for cluster in clusters if cluster["name"] == "demo_grpc")
    for name in ("ratelimit", *others):
        cluster = copy.deepcopy(grpc)
        cluster["name"] = name
        cluster["load_assignment"]["cluster_name"] = name
        clusters.append(cluster)
    return config


def rls_plugin(failure_mode: str = "allow", timeout_ms: int = 200, cluster: str = "ratelimit") -> dict[str, Any]:
    return with_limits({"rate_limit_service": {"cluster": cluster, "domain": "switchblade",
                                               "timeout_ms": timeout_ms, "failure_mode": failure_mode}})


@pytest.fixture(scope="module")
def fleet(upstream: Upstream):
    peer = RateLimitPeer(RLS_CONFIG).start()
    backend = WithRateLimit(upstream, peer.grpc_port)
    envoys = [Envoy(backend, rls_plugin(), bootstrap=rls_bootstrap(), name=f"envoy-fleet-{index}").start() for index in range(2)]
    yield peer, envoys
    for envoy in envoys:
        envoy.stop()
    peer.stop()


def test_two_envoys_share_one_budget_through_the_rate_limit_service(fleet, upstream: Upstream) -> None:
    peer, (first, second) = fleet
    upstream.reset()
    # From 127.0.0.4 (a caller of its own at the peer), alternating between the Envoys.
    clients = [Client(first.mcp_url, "127.0.0.4"), Client(second.mcp_url, "127.0.0.4")]
    results = [clients[index % 2].call() for index in range(5)]
    assert [result["isError"] for result in results] == [False, False, False, True, True]
    text = results[3]["content"][0]["text"]
    assert re.fullmatch(r"Rate limited: the rate limit service says UserService_GetUser is over its limit for this caller "
                        r"\(3 per hour\); retry after \d+ ms\. The call was not sent\.", text), text
    assert results[3]["_meta"][RETRY_META] > 0
    assert upstream.calls() == {f"/{GET_USER}": 3}
    # The caller's limit across every tool (6 an hour): one more call passes, then 429.
    assert clients[0].call("CatalogService_Search")["isError"] is False
    refused = clients[1].post(call_body(9, "CatalogService_Search"))
    assert refused.status_code == 429, refused.text
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.json()["error"]["message"].startswith(
        "Too Many Requests: the rate limit service says this caller is over its limit across every tool (6 per hour); retry after ")
    assert upstream.total_calls() == 4
    assert peer.requests() == 7
    assert rate_limited_calls(first, "UserService_GetUser") + rate_limited_calls(second, "UserService_GetUser") == 2


@pytest.fixture(scope="module")
def failing_services(upstream: Upstream):
    """One Envoy for the rate limit service's failures, each test swapping in the plugin it needs
    (an ECDS swap reuses the compiled .wasm, a start compiles it again): `ratelimit` is the test
    peer, made slow by the test that needs it, and `ratelimit_down` a port where nothing listens."""
    peer = RateLimitPeer(RLS_CONFIG).start()
    backend = WithRateLimit(upstream, peer.grpc_port, ratelimit_down=free_port())
    proxy = Envoy(backend, rls_plugin(), bootstrap=rls_bootstrap("ratelimit_down"), name="envoy-rls-failing")
    try:
        proxy.start()
        yield peer, proxy
    finally:
        proxy.stop()
        peer.stop()


@pytest.mark.parametrize("failure_mode", ["allow", "deny"])
def test_a_rate_limit_service_that_is_down_lets_calls_go_or_refuses_them(failing_services, upstream: Upstream,
                                                                          failure_mode: str) -> None:
    _, proxy = failing_services
    assert proxy.swap_plugin(rls_plugin(failure_mode, cluster="ratelimit_down"))
    upstream.reset()
    result = Client(proxy.mcp_url).call()
    if failure_mode == "allow":
        assert result["isError"] is False
        assert upstream.total_calls() == 1
    else:
        assert result["isError"] is True
        assert result["content"][0]["text"].startswith(
            "Rate limited: the rate limit service (cluster \"ratelimit_down\") did not answer (")
        assert result["content"][0]["text"].endswith(
            "and limits.rate_limit_service.failure_mode is \"deny\"; retry after 1000 ms. The call was not sent.")
        assert result["_meta"] == {RETRY_META: 1000}
        assert upstream.total_calls() == 0


@pytest.mark.parametrize("failure_mode", ["allow", "deny"])
def test_a_slow_rate_limit_service_is_given_up_at_its_timeout(failing_services, upstream: Upstream,
                                                              failure_mode: str) -> None:
    peer, proxy = failing_services
    assert proxy.swap_plugin(rls_plugin(failure_mode, timeout_ms=50))
    peer.delay(1000)
    upstream.reset()
    started = time.monotonic()
    result = Client(proxy.mcp_url).call()
    took = time.monotonic() - started
    assert took < 0.9, took
    assert result["isError"] is (failure_mode == "deny"), result
    if failure_mode == "deny":
        assert "(no answer within its timeout)" in result["content"][0]["text"], result
    assert upstream.total_calls() == (1 if failure_mode == "allow" else 0)

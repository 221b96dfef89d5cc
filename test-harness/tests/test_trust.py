"""Callers cannot choose who they are: what a client writes into a request (an
`X-Forwarded-For`, an encoded alias of a tool's name, a request id, a progress token) never
makes it another caller, lets it past a rule in front of the filter, or costs the gateway more
than its bounds. Each test here failed before the fix it stands for."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import os
import socket
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

import httpx2
import pytest

import filter_build
from filter_build import demo_plugin
from mcp_client import Mcp
from processes import Envoy, Upstream, demo_config, free_port, http_filters, static_bootstrap

GET_ITEM = {"name": "CatalogService_GetItem", "arguments": {"id": "1"}}


def encoded(value: str) -> str:
    """SEP-2243's sentinel form of a header value."""
    return f"=?base64?{base64.b64encode(value.encode()).decode()}?="


def rbac_denying_tool(tool: str) -> dict[str, Any]:
    """Envoy's RBAC filter, denying 2026-07-28 calls of one tool by its `Mcp-Name` header: the
    rule the protocol's headers exist for."""
    return {
        "name": "envoy.filters.http.rbac",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC",
            "rules": {
                "action": "DENY",
                "policies": {
                    "no-get-item": {
                        "permissions": [{"header": {"name": "mcp-name", "string_match": {"exact": tool}}}],
                        "principals": [{"any": True}],
                    }
                },
            },
        },
    }


@pytest.fixture(scope="module")
def behind_rbac(upstream: Upstream):
    bootstrap = demo_config()
    http_filters(bootstrap).insert(0, rbac_denying_tool("CatalogService_GetItem"))
    proxy = Envoy(upstream, demo_plugin(), bootstrap=bootstrap, name="envoy-rbac").start()
    yield proxy
    proxy.stop()


def test_an_encoded_alias_of_a_plain_tool_name_does_not_slip_past_rbac(behind_rbac: Envoy, upstream: Upstream) -> None:
    upstream.reset()
    mcp = Mcp(behind_rbac.mcp_url)
    # The plain name is what RBAC sees: denied in front of the filter.
    denied = mcp.modern("tools/call", GET_ITEM)
    assert (denied.status_code, denied.text) == (403, "RBAC: access denied")
    # Its encoded alias does not match the rule; the filter refuses it, as SEP-2243 has a value
    # that can be sent plain sent plain.
    alias = mcp.modern("tools/call", GET_ITEM, headers={"mcp-name": encoded("CatalogService_GetItem")})
    assert alias.status_code == 400, alias.text
    assert alias.json()["error"] == {
        "code": -32020,
        "message": "Header mismatch: the Mcp-Name header encodes \"CatalogService_GetItem\" as =?base64?...?=, "
                   "which is only for values that cannot be sent plain; send Mcp-Name: CatalogService_GetItem",
    }
    assert upstream.total_calls() == 0
    # Another tool passes RBAC and the filter, plain.
    allowed = mcp.modern("tools/call", {"name": "UserService_GetUser", "arguments": {"user_id": 1}})
    assert allowed.status_code == 200 and allowed.json()["result"]["isError"] is False, allowed.text


CATALOG = "demo.catalog.v1.CatalogService"


@pytest.fixture(scope="module")
def streaming(upstream: Upstream):
    plugin = demo_plugin()
    plugin["services"][CATALOG]["streaming"] = True
    proxy = Envoy(upstream, plugin, name="envoy-trust-streams").start()
    yield proxy
    proxy.stop()


def watch_with_progress(token: Any, id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "CatalogService_WatchItems", "arguments": {"ids": ["1"]}, "_meta": {"progressToken": token}}}


def test_a_long_progress_token_is_refused_and_progress_cannot_amplify(streaming: Envoy, upstream: Upstream) -> None:
    """A 200 KiB token copied into each of a stream's 100 progress notifications made 20 MB of
    answer from one request, held whole in the Wasm VM. The token is bounded now, and the
    notifications count against the answer's bound: 20 such requests at once, five times over,
    leave Envoy's memory and the VM's flat."""
    upstream.reset()
    upstream.stream_mode("many")  # 10,000 messages, as fast as the upstream can
    mcp = Mcp(streaming.mcp_url)
    headers = {"mcp-protocol-version": "2025-11-25"}
    try:
        long_token = "t" * (200 * 1024)
        with ThreadPoolExecutor(20) as pool:
            answers = list(pool.map(lambda id: mcp.post(watch_with_progress(long_token, id), headers), range(20)))
        for answer in answers:
            assert answer.status_code == 200, answer.text[:300]
            assert answer.json()["error"] == {"code": -32602, "message": (
                "Invalid params: params._meta.progressToken is 204800 bytes long; "
                "a progress token is a string of at most 128 bytes or an integer")}
        assert upstream.streams()["opened"] == 0
        # The longest token taken, on every message of the stream: the answer stays within
        # limits.max_response_bytes, and memory stays where the first rounds put it.
        samples = []
        for _ in range(5):
            with ThreadPoolExecutor(20) as pool:
                answers = list(pool.map(lambda id: Mcp(streaming.mcp_url).post(watch_with_progress("p" * 128, id), headers),
                                        range(20)))
            for answer in answers:
                assert answer.status_code == 200 and answer.headers["content-type"] == "text/event-stream"
                events = [line for line in answer.text.splitlines() if line.startswith("data: ")]
                assert len(events) == 101, len(events)  # 100 notifications, then the result
                assert len(answer.content) < 4 * 1024 * 1024
            samples.append(streaming.memory())
        Envoy.assert_memory_flat(samples, warm_rounds=2, allocated_spread=16 * 2**20)
    finally:
        upstream.reset()


# -- Who a caller is: the connection's peer, never what a client writes ----------------------

def call_body(id: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                       "params": {"name": "UserService_GetUser", "arguments": {"user_id": 1}}}).encode()


def http_request(host: str, body: bytes, extra: str = "") -> bytes:
    return (f"POST /mcp HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
            f"accept: application/json, text/event-stream\r\nmcp-protocol-version: 2025-03-26\r\n"
            f"content-length: {len(body)}\r\n{extra}\r\n").encode() + body


async def read_response(reader: asyncio.StreamReader) -> int:
    """The status of one HTTP/1.1 response, its body read and dropped."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
    await reader.readexactly(length)
    return int(lines[0].split()[1])


async def from_forged_addresses(port: int, count: int, connections: int = 8) -> Counter:
    """`count` calls over a few kept-alive connections from 127.0.0.1, each naming a caller
    of its own in `X-Forwarded-For`."""
    statuses: Counter = Counter()

    async def connection(first: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for index in range(first, count, connections):
            forged = f"10.{index >> 16 & 255}.{index >> 8 & 255}.{index & 255}"
            writer.write(http_request(f"127.0.0.1:{port}", call_body(index), f"x-forwarded-for: {forged}\r\n"))
            statuses[await read_response(reader)] += 1
        writer.close()

    await asyncio.gather(*(connection(first) for first in range(connections)))
    return statuses


async def from_addresses(host: str, port: int, addresses: Iterator[str], concurrency: int = 32) -> Counter:
    """One call per address, each on a connection of its own from that address."""
    statuses: Counter = Counter()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET

    async def one(address: str) -> None:
        sock = socket.socket(family, socket.SOCK_STREAM)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, IPV6_FREEBIND, 1)
        sock.bind((address, 0))
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (host, port))
        reader, writer = await asyncio.open_connection(sock=sock)
        writer.write(http_request(f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}", call_body(1),
                                  "connection: close\r\n"))
        statuses[await read_response(reader)] += 1
        writer.close()

    async def worker() -> None:
        for address in addresses:
            await one(address)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return statuses


IPV6_FREEBIND = 78
# A /64 routed to the loopback device for the test: any address in it can be bound. One of
# this process's own, so that two sessions at once (one per build, say) never share one.
TEST_PREFIX = f"fd00:5b:0:{os.getpid() & 0xffff:x}"


@contextlib.contextmanager
def ipv6_test_prefix() -> Iterator[None]:
    route = ["ip", "-6", "route", "add", "local", f"{TEST_PREFIX}::/64", "dev", "lo"]
    if os.geteuid() != 0 or subprocess.run(route, capture_output=True).returncode != 0:
        pytest.skip(f"needs root to route {TEST_PREFIX}::/64 to the loopback device")
    try:
        yield
    finally:
        subprocess.run(["ip", "-6", "route", "del", "local", f"{TEST_PREFIX}::/64", "dev", "lo"], capture_output=True)


def ipv6_listener(bootstrap: dict[str, Any]) -> int:
    """A second listener, on [::1], serving the same routes and filters (a copy of the first,
    as an Envoy has set it up); its port."""
    listener = copy.deepcopy(bootstrap["static_resources"]["listeners"][0])
    port = free_port()
    listener["name"] = "mcp-ipv6"
    listener["address"]["socket_address"] = {"address": "::1", "port_value": port}
    bootstrap["static_resources"]["listeners"].append(listener)
    return port


def test_callers_cannot_choose_who_they_are_and_any_number_of_them_is_held_in_bounded_memory(upstream: Upstream) -> None:
    """Each client is counted by its connection's address (the bootstrap's
    `use_remote_address: true`), an IPv6 client by its /64, and the callers held are bounded
    (`limits.max_callers`, 2,000 places here). 35,000 calls: 5,000 naming a fresh caller in
    X-Forwarded-For each, 5,000 from fresh addresses in one IPv6 /64 (both one caller, limited
    as one), then 25,000 from fresh IPv4 addresses (as many callers, each served) with Envoy's
    memory flat once the table is full."""
    plugin = demo_plugin()
    plugin["limits"] = {"rules": [{"match": "*", "requests_per_second": 1, "burst": 2}], "max_callers": 2000}
    with ipv6_test_prefix():
        envoy = Envoy(upstream, plugin, name="envoy-trust-callers")
        ipv6_port = ipv6_listener(envoy.config)
        envoy.start()
        try:
            upstream.reset()
            assert ("rate limits: callers are counted by Envoy's downstream address (source.address), "
                    "IPv4 by /32 and IPv6 by /64") in envoy.logs()
            started = time.monotonic()
            forged = asyncio.run(from_forged_addresses(envoy.port, 5_000))
            allowed = 2 + (time.monotonic() - started)
            assert forged[200] <= allowed and forged[429] == 5_000 - forged[200], (forged, allowed)
            started = time.monotonic()
            one_network = (f"{TEST_PREFIX}::{index >> 16 & 0xffff:x}:{index & 0xffff:x}" for index in range(1, 5_001))
            rotated = asyncio.run(from_addresses("::1", ipv6_port, one_network))
            allowed = 2 + (time.monotonic() - started)
            assert rotated[200] <= allowed and rotated[429] == 5_000 - rotated[200], (rotated, allowed)
            samples = []
            for first in range(0, 25_000, 5_000):
                addresses = (f"127.{(first + i) >> 16 & 255}.{(first + i) >> 8 & 255}.{((first + i) & 255) or 1}"
                             for i in range(5_000))
                many = asyncio.run(from_addresses("127.0.0.1", envoy.port, addresses))
                assert many[200] >= 4_750, many  # a fresh caller each (an address ending .0 is .1 again)
                samples.append(envoy.memory())
            # The table of 2,000 places fills in the first round; after it, nothing more is kept:
            # the spread is under 64 KiB; a place per caller grew it by 1.8 MiB (the module) and
            # 2.7 MiB (Wasm) over the last four rounds.
            Envoy.assert_memory_flat(samples, warm_rounds=1, allocated_spread=2**20)
        finally:
            envoy.stop()


async def first_calls_at_once(port: int, address: str, count: int) -> Counter:
    """`count` calls from one new caller, on `count` connections opened first, sent at once."""
    statuses: Counter = Counter()
    connections = [await asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0)) for _ in range(count)]
    for index, (_, writer) in enumerate(connections):
        writer.write(http_request(f"127.0.0.1:{port}", call_body(index)))
    for reader, writer in connections:
        statuses[await read_response(reader)] += 1
        writer.close()
    return statuses


def test_concurrent_first_calls_of_a_caller_get_exactly_its_burst(upstream: Upstream) -> None:
    """A caller's first calls, at once on two workers: both found its bucket new, and the
    second's fresh bucket was written over the first's take (two calls passed a burst of 1).
    Now a new bucket is written only where none is."""
    plugin = demo_plugin()
    plugin["limits"] = {"rules": [{"match": "*", "requests_per_second": 0.001, "burst": 1}]}
    envoy = Envoy(upstream, plugin, name="envoy-trust-first", workers=2).start()
    try:
        served = [asyncio.run(first_calls_at_once(envoy.port, f"127.77.{caller // 250}.{caller % 250 + 1}", 32))[200]
                  for caller in range(1000)]
        assert set(served) == {1}, Counter(served)
    finally:
        envoy.stop()


# -- Only the caller cancels its requests ---------------------------------------------------

LEGACY = {"mcp-protocol-version": "2025-11-25", "content-type": "application/json",
          "accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def long_watch(upstream: Upstream):
    """WatchItems with a window of 30 s: a stream that stays open until something ends it."""
    plugin = demo_plugin()
    plugin["services"][CATALOG]["streaming"] = True
    plugin["tools"] = {f"{CATALOG}/WatchItems": {"timeout_ms": 30000}}
    proxy = Envoy(upstream, plugin, name="envoy-trust-cancel").start()
    yield proxy
    proxy.stop()


def session(client: httpx2.Client, url: str) -> str:
    """A handshake: the session id the server hands the client."""
    initialized = client.post(url, headers=LEGACY, content=json.dumps({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "victim", "version": "1"}}}))
    assert initialized.status_code == 200, initialized.text
    return initialized.headers["mcp-session-id"]


def cancel(id: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "x"}})


def wait_for(check, what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("http2", [False, True], ids=["http1", "http2"])
def test_only_the_caller_can_cancel_its_stream(long_watch: Envoy, upstream: Upstream, http2: bool) -> None:
    """A request was known by its client's address, `Authorization` and id: a client with no
    credential could cancel another's stream from the same address (or one it wrote in
    X-Forwarded-For) by guessing sequential ids. Now a handshake-era client is handed a session
    id at initialize, and a cancel must carry it."""
    upstream.reset()
    wait_for(lambda: upstream.streams()["open"] == 0, "earlier streams to close")
    victim = httpx2.Client(http1=not http2, http2=http2, timeout=40)
    session_id = session(victim, long_watch.mcp_url)
    assert len(session_id) == 32 and session_id != session(victim, long_watch.mcp_url)
    outcome: dict[str, Any] = {}

    def watch() -> None:
        response = victim.post(long_watch.mcp_url, headers={**LEGACY, "mcp-session-id": session_id}, content=json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
             "params": {"name": "CatalogService_WatchItems", "arguments": {"ids": ["1"], "interval_ms": 100}}}))
        outcome.update(status=response.status_code, body=response.text, version=response.http_version)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    wait_for(lambda: upstream.streams()["open"] == 1, "the watch to open upstream")
    # Another client, from the same address and naming the same address in X-Forwarded-For,
    # with the same id: without the session id, or with another, it cancels nothing.
    with httpx2.Client(timeout=10) as attacker:
        for extra in ({}, {"x-forwarded-for": "127.0.0.1"}, {"mcp-session-id": "0" * 32},
                      {"mcp-session-id": session(attacker, long_watch.mcp_url)}):
            assert attacker.post(long_watch.mcp_url, headers={**LEGACY, **extra}, content=cancel(1)).status_code == 202
    time.sleep(0.6)
    assert upstream.streams()["open"] == 1 and thread.is_alive(), "another client cancelled the stream"
    # The caller itself: over HTTP/1.1 from a second connection, over HTTP/2 on the same one.
    canceller = victim if http2 else httpx2.Client(timeout=10)
    accepted = canceller.post(long_watch.mcp_url, headers={**LEGACY, "mcp-session-id": session_id}, content=cancel(1))
    assert (accepted.status_code, accepted.text) == (202, "")
    thread.join(timeout=5)
    assert not thread.is_alive(), "the cancelled request was not answered"
    assert (outcome["status"], outcome["body"]) == (200, ": cancelled\n\n"), outcome
    assert outcome["version"] == ("HTTP/2" if http2 else "HTTP/1.1")
    wait_for(lambda: upstream.streams() == {"open": 0, "opened": 1, "cancelled": 1}, "the stream cancelled upstream")
    victim.close()


# -- Shared data belongs to the plugin ------------------------------------------------------

def test_plugins_that_share_a_vm_id_do_not_share_the_filters_state(upstream: Upstream) -> None:
    """Two Switchblade plugins on two listeners with the same vm_id (empty, as Istio leaves
    it) shared proxy-wasm's store and the filter's keys in it: a caller's calls through one
    spent its budget in the other. Each plugin's keys are under its own name now."""
    build = filter_build.current()
    if build.name != "wasm":
        pytest.skip("shared data is the Wasm filter's: the module keeps its state per configuration")
    plugin = demo_plugin()
    plugin["limits"] = {"rules": [{"match": "*", "requests_per_second": 0.001, "burst": 1}]}
    envoy = Envoy(upstream, plugin, bootstrap=static_bootstrap(plugin), name="envoy-trust-vm-id")
    first = envoy.config["static_resources"]["listeners"][0]
    second = copy.deepcopy(first)
    second["name"], second_port = "mcp-second", free_port()
    second["address"]["socket_address"]["port_value"] = second_port
    for listener, name in ((first, "alpha"), (second, "beta")):
        manager = listener["filter_chains"][0]["filters"][0]["typed_config"]
        [wasm] = [entry for entry in manager["http_filters"] if entry["name"] == "switchblade"]
        wasm["typed_config"]["config"]["name"] = name
        wasm["typed_config"]["config"]["vm_config"]["vm_id"] = ""
    envoy.config["static_resources"]["listeners"].append(second)
    envoy.start()
    try:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "UserService_GetUser", "arguments": {"user_id": 1}}}
        served = lambda port: Mcp(f"http://127.0.0.1:{port}/mcp").post(call).status_code  # noqa: E731
        assert [served(envoy.port), served(envoy.port)] == [200, 429]
        assert served(second_port) == 200, "the other plugin's budget was spent"
        assert served(second_port) == 429
    finally:
        envoy.stop()


# -- A task's polls are bounded --------------------------------------------------------------

def test_a_loop_of_polls_cannot_flood_the_operations_service(upstream: Upstream) -> None:
    """Polls were free: a client looping on tasks/get sent the Operations service as many
    GetOperation calls. Each task's polls, per caller, now have a bucket of their own
    (tasks.max_polls_per_second, tasks.poll_burst); past it a client's poll is 429."""
    from test_tasks import EXPORT, GET_OPERATION, KEY, legacy_task, tasks_plugin

    plugin = tasks_plugin([KEY])
    plugin["tasks"].update(max_polls_per_second=2, poll_burst=3)
    envoy = Envoy(upstream, plugin, name="envoy-trust-polls").start()
    try:
        upstream.reset()
        mcp = Mcp(envoy.mcp_url)
        task = legacy_task(mcp, EXPORT, {"query": "knife"})
        started = time.monotonic()
        statuses = Counter()
        for id in range(40):
            response = mcp.post({"jsonrpc": "2.0", "id": id, "method": "tasks/get", "params": {"taskId": task["taskId"]}},
                                headers={"mcp-protocol-version": "2025-11-25"})
            statuses[response.status_code] += 1
            if response.status_code == 429:
                refused = response
        allowed = 3 + 2 * (time.monotonic() - started)
        polls = upstream.calls().get(GET_OPERATION, 0)
        assert polls <= allowed and statuses[200] == polls and statuses[429] == 40 - polls, (statuses, polls, allowed)
        error = refused.json()["error"]
        assert error["code"] == -32029 and error["message"].startswith(
            "Too Many Requests: task operation operations/export-")
        assert int(refused.headers["retry-after"]) >= 1
    finally:
        envoy.stop()

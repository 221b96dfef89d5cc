"""Faults under load: every request gets an answer while the upstream dies and returns and
while the configuration is swapped, and a short soak has no unexpected answer."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from filter_build import demo_plugin  # noqa: E402
from processes import Envoy, Upstream  # noqa: E402
from load import Tally, drive, rss_kib  # noqa: E402

CONNECTIONS = 16


def in_background(url: str, seconds: float) -> tuple[threading.Thread, list[Tally], float]:
    results: list[Tally] = []
    thread = threading.Thread(target=lambda: results.append(drive(url, seconds, CONNECTIONS)))
    started = time.monotonic()
    thread.start()
    return thread, results, started


def test_a_short_soak_has_no_unexpected_answer(envoy: Envoy) -> None:
    rss_before = rss_kib(envoy.process.pid)
    tally = drive(envoy.mcp_url, 5, CONNECTIONS)
    print(f"{tally.total} calls in 5 s; Envoy RSS {rss_before} -> {rss_kib(envoy.process.pid)} KiB")
    assert tally.total > 100
    assert (dict(tally.unexpected), dict(tally.tool_errors)) == ({}, {})


def test_the_upstream_dies_and_returns_under_load() -> None:
    upstream = Upstream().start()
    envoy = Envoy(upstream, name="envoy-load-faults").start()
    try:
        thread, results, started = in_background(envoy.mcp_url, 7)
        time.sleep(2)
        upstream.stop()
        time.sleep(2)
        upstream.start()  # the same ports
        back = time.monotonic() - started
        thread.join(timeout=30)
        [tally] = results
    finally:
        envoy.stop()
        upstream.stop()
    assert dict(tally.unexpected) == {}, "every request gets a well-formed answer"
    assert set(tally.tool_errors) <= {"UNAVAILABLE"}, tally.tool_errors
    assert tally.tool_errors["UNAVAILABLE"] > 0, "the outage was seen"
    first_success_after = min(t for t, outcome in tally.timeline if outcome == "ok" and t >= back)
    assert first_success_after - back < 1.0, f"calls succeeded again {first_success_after - back:.2f}s after the upstream returned"


def test_configuration_swaps_under_load_lose_no_request(upstream: Upstream) -> None:
    envoy = Envoy(upstream, name="envoy-load-reload").start()
    try:
        thread, results, _ = in_background(envoy.mcp_url, 6)
        time.sleep(1.5)
        for ttl in (60000, 120000, 180000):
            plugin = demo_plugin()
            plugin["tools_list"] = {"ttl_ms": ttl}
            assert envoy.swap_plugin(plugin)
            time.sleep(0.5)
        thread.join(timeout=30)
        [tally] = results
    finally:
        envoy.stop()
    assert tally.total > 100
    assert (dict(tally.unexpected), dict(tally.tool_errors)) == ({}, {})

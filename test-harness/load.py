"""Drives tools/call through Envoy from many concurrent connections and counts every answer.

Used by the soak command (scripts/soak) and by the fault-under-load tests. Each worker holds
its own connection and calls UserService_GetUser in a loop; an answer is a success, a tool
error (isError, with its gRPC status), or unexpected (anything else: an HTTP error, a
malformed body, a timeout).
"""

from __future__ import annotations

import asyncio
import collections
import time
from dataclasses import dataclass, field

import httpx2

CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "UserService_GetUser", "arguments": {"user_id": 1}}}


@dataclass
class Tally:
    successes: int = 0
    tool_errors: collections.Counter = field(default_factory=collections.Counter)
    unexpected: collections.Counter = field(default_factory=collections.Counter)
    # (seconds since start, "ok" | status name) for every answer, in order.
    timeline: list[tuple[float, str]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.successes + sum(self.tool_errors.values()) + sum(self.unexpected.values())


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def _worker(url: str, deadline: float, started: float, tally: Tally) -> None:
    async with httpx2.AsyncClient(timeout=10) as client:
        while time.monotonic() < deadline:
            try:
                response = await client.post(url, json=CALL, headers={"accept": "application/json"})
                body = response.json()
                result = body["result"]
                if result.get("isError"):
                    text = result["content"][0]["text"]
                    status = text.split("gRPC status ", 1)[1].split(" ", 1)[0] if "gRPC status " in text else "other"
                    tally.tool_errors[status] += 1
                    tally.timeline.append((time.monotonic() - started, status))
                else:
                    tally.successes += 1
                    tally.timeline.append((time.monotonic() - started, "ok"))
            except Exception as error:  # noqa: BLE001 - every failure is counted, none is lost
                tally.unexpected[type(error).__name__] += 1
                tally.timeline.append((time.monotonic() - started, "unexpected"))


async def _drive(url: str, seconds: float, connections: int) -> Tally:
    tally = Tally()
    started = time.monotonic()
    deadline = started + seconds
    await asyncio.gather(*(_worker(url, deadline, started, tally) for _ in range(connections)))
    return tally


def drive(url: str, seconds: float, connections: int) -> Tally:
    """Runs the load for `seconds`; returns what came back."""
    return asyncio.run(_drive(url, seconds, connections))

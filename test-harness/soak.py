"""Soak: Switchblade under steady load for a while, with memory sampled along the way.

    .venv/bin/python test-harness/soak.py [SECONDS] [CONNECTIONS] [--build wasm|module]

Starts the demo upstream and Envoy (as the tests do) with the chosen build of the filter,
drives tools/call from CONNECTIONS concurrent connections for SECONDS, and reports the
answers, unexpected errors, and Envoy's RSS at the start, every minute, and at the end (and,
for the Wasm build, the VM's linear memory and VM counts). Exits non-zero on any unexpected
answer.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "tests"))

import filter_build  # noqa: E402
from processes import Envoy, Upstream  # noqa: E402
from load import drive, rss_kib  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description="Switchblade under steady load, memory sampled.")
    parser.add_argument("seconds", type=float, nargs="?", default=600)
    parser.add_argument("connections", type=int, nargs="?", default=16)
    parser.add_argument("--build", choices=sorted(filter_build.BUILDS), default="wasm")
    args = parser.parse_args()
    seconds, connections = args.seconds, args.connections
    build = filter_build.choose(args.build)
    if not build.binary.exists():
        print(f"missing {build.binary}: run scripts/soak (it builds it first)", file=sys.stderr)
        return 2
    upstream = Upstream().start()
    envoy = Envoy(upstream, name="envoy-soak", build=build).start()
    try:
        pid = envoy.process.pid
        time.sleep(1.2)  # one reading of the VM's memory gauge
        vm_memory_start = envoy.stats().get("wasmcustom.switchblade.vm_memory_bytes", 0)
        samples = [(0.0, rss_kib(pid))]
        stop = threading.Event()

        def sample() -> None:
            started = time.monotonic()
            while not stop.wait(60):
                samples.append((time.monotonic() - started, rss_kib(pid)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        tally = drive(envoy.mcp_url, seconds, connections)
        stop.set()
        samples.append((seconds, rss_kib(pid)))
        stats = envoy.stats()
        wasm = {k: v for k, v in stats.items() if k.startswith("wasm.")}
        vm_memory_end = stats.get("wasmcustom.switchblade.vm_memory_bytes", 0)
    finally:
        envoy.stop()
        upstream.stop()

    print(f"soak ({args.build}): {seconds:.0f}s, {connections} connections, {tally.total} calls, {tally.total / seconds:.0f} calls/s")
    print(f"  successes {tally.successes}, tool errors {dict(tally.tool_errors)}, unexpected {dict(tally.unexpected)}")
    print("  Envoy RSS (KiB): " + ", ".join(f"{t:.0f}s {kib}" for t, kib in samples))
    if build is filter_build.WASM:
        print(f"  Wasm VM linear memory (bytes): start {vm_memory_start}, end {vm_memory_end}")
        print(f"  Wasm VMs: {wasm.get('wasm.envoy.wasm.runtime.v8.active')} active, "
              f"{wasm.get('wasm.envoy.wasm.runtime.v8.created')} created, reloads {wasm.get('wasm.switchblade.vm_reload', 0)}")
    unexpected = sum(tally.unexpected.values()) + sum(tally.tool_errors.values())
    print(f"{tally.total - unexpected} passed, {unexpected} failed")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())

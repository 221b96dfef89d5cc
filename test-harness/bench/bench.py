"""Runs the systems of systems.py side by side and prints one table with the ratios.

For each system and each concurrency: a warm-up run, then a measured run of the load
generator (wrk for HTTP, grpc-bench for gRPC) with one call in flight per connection. Around
the measured run it reads Envoy's CPU time and RSS from /proc and the upstream's call count,
so every request counted is a call that reached the upstream. The whole set runs --runs times,
round after round; figures and ratios are medians over the rounds, with their spread.

Usage: bench.py [--seconds S] [--warmup S] [--connections 1,16,64] [--systems abcdefghiklmnopqr]
                [--runs N] [--no-pin] [--json PATH] [--smoke]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import re
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx2

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from filter_build import MODULE, WASM  # noqa: E402
from processes import ENVOY_BIN, REPO, WORK, Envoy, Upstream, wait_until  # noqa: E402
from memory import memory_figures, memory_table  # noqa: E402
from scale import CatalogFigures, catalog_figures, scale_messages, scale_plugin  # noqa: E402
from systems import (  # noqa: E402
    CLUSTER, MCP_HEADERS, SERVICE, STREAM_MESSAGES, SYSTEMS, System, baseline_builds, baseline_systems, bootstrap,
    search_system, switchblade_plugin, tools_found, tools_list_system,
)

GRPC_BENCH = REPO / "target/release/grpc-bench"
CLI = REPO / "target/release/switchblade"
WRK_SCRIPT = HERE / "report.lua"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# Every system measured in this run, by key (the scale systems join when they are built).
SYSTEMS_BY_KEY = {system.key: system for system in SYSTEMS}


@dataclass
class Run:
    system: str
    connections: int
    # Which repetition of the whole set of systems this run belongs to.
    round: int
    requests: int
    errors: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    upstream_calls: int
    envoy_cpu_s_per_1000: float | None
    envoy_rss_mib: float | None


def descriptor_set() -> str:
    """The catalog's descriptor set (base64), compiled from the .proto by the switchblade CLI."""
    output = subprocess.check_output([
        str(CLI), "config", "demo/catalog/v1/catalog.proto", "-I", str(REPO / "proto"),
        "--service", f"{SERVICE}={CLUSTER}"])
    return json.loads(output)["descriptor_set"]


def pinned(command: list[str], cpus: str | None) -> list[str]:
    return ["taskset", "-c", cpus, *command] if cpus else command


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def start_envoy(system: System, upstream: Upstream, descriptors: str, cpus: str | None, workers: int = 1) -> Envoy:
    """One Envoy (one worker thread unless told) running the system's bootstrap."""
    config = bootstrap(system, descriptors, str(WASM.binary))
    build = MODULE if system.module else WASM
    if system.module and system.binary is not None:
        build = copy.copy(MODULE)
        build.binary = system.binary
    return Envoy(upstream, bootstrap=config, name=f"bench-{system.key}", command_prefix=pinned([], cpus),
                 build=build, workers=workers).start()


def wait_for_vm_memory(envoy: Envoy) -> None:
    """The Wasm filter publishes its VM's memory once a second (0 until then)."""
    gauge = re.compile(r"switchblade\.vm_memory_bytes: [1-9]")
    wait_until(lambda: gauge.search(httpx2.get(f"{envoy.admin_url}/stats", timeout=1).text),
               "the switchblade.vm_memory_bytes gauge", process=envoy.process)


def envoy_catalog_figures(envoy: Envoy, system: System) -> CatalogFigures:
    if not system.module:
        wait_for_vm_memory(envoy)
    return catalog_figures(envoy.logs(), envoy.admin_url, envoy.mcp_url, MCP_HEADERS,
                           memory_figures(envoy.process.pid, envoy.admin_url), wasm=not system.module,
                           search=system.check is tools_found)


def load(system: System, port: int, connections: int, seconds: int, cpus: str | None) -> dict[str, Any]:
    """One closed-loop run of the system's load generator; its JSON summary."""
    if system.client == "grpc":
        command = [str(GRPC_BENCH), "--target", f"http://127.0.0.1:{port}",
                   "--connections", str(connections), "--seconds", str(seconds)]
        env = None
    else:
        command = ["wrk", "-t", "1", "-c", str(connections), "-d", f"{seconds}s", "--timeout", "5s",
                   "-s", str(WRK_SCRIPT), f"http://127.0.0.1:{port}{system.path}"]
        body = {"BENCH_BODY_HEX": system.body.hex()} if isinstance(system.body, bytes) else {"BENCH_BODY": system.body}
        env = {**os.environ, **body,
               "BENCH_HEADERS": "\n".join(f"{name}: {value}" for name, value in system.headers.items())}
    output = subprocess.run(pinned(command, cpus), env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def check_answer(system: System, port: int) -> None:
    """One request before the load: the system must answer item 1 correctly."""
    if system.client == "grpc":
        summary = load(system, port, 1, 1, None)
        problem = "" if summary["requests"] > 0 and summary["errors"] == 0 else f"gRPC calls failed: {summary}"
    else:
        response = httpx2.post(f"http://127.0.0.1:{port}{system.path}", content=system.body,
                               headers=system.headers, timeout=5)
        problem = system.check(response.text) if response.status_code == 200 else \
            f"HTTP {response.status_code}: {response.text[:300]}"
    if problem:
        raise SystemExit(f"system ({system.key}) {system.title} answers wrongly: {problem}")


def measure(system: System, port: int, envoy: Envoy | None, upstream: Upstream,
            connections: int, round_: int, options: argparse.Namespace) -> Run:
    if options.warmup > 0:
        load(system, port, connections, options.warmup, options.client_cpus)
    calls_before = upstream.total_calls()
    cpu_before = cpu_seconds(envoy.process.pid) if envoy else 0.0
    summary = load(system, port, connections, options.seconds, options.client_cpus)
    cpu = cpu_seconds(envoy.process.pid) - cpu_before if envoy else 0.0
    requests = summary["requests"]
    errors = summary["errors"] + summary.get("non_2xx", 0)
    return Run(
        system=system.key, connections=connections, round=round_, requests=requests, errors=errors,
        seconds=summary["seconds"], rps=requests / summary["seconds"],
        p50_ms=summary["p50_us"] / 1000, p99_ms=summary["p99_us"] / 1000,
        upstream_calls=upstream.total_calls() - calls_before,
        envoy_cpu_s_per_1000=(cpu / requests * 1000) if envoy and requests else None,
        envoy_rss_mib=rss_mib(envoy.process.pid) if envoy else None,
    )


def run_system(system: System, upstream: Upstream, descriptors: str, options: argparse.Namespace,
               connections_list: list[int] | None = None, figures: list[CatalogFigures] | None = None,
               round_: int = 1) -> list[Run]:
    envoy = start_envoy(system, upstream, descriptors, options.envoy_cpus) if system.filters else None
    port = envoy.port if envoy else upstream.grpc_port
    try:
        check_answer(system, port)
        if envoy and figures is not None:
            figures.append(envoy_catalog_figures(envoy, system))
        runs = []
        for connections in connections_list or options.connections:
            run = measure(system, port, envoy, upstream, connections, round_, options)
            print(f"  ({system.key}) c={connections:<3} {run.rps:9.0f} req/s  p50 {run.p50_ms:6.2f} ms  "
                  f"p99 {run.p99_ms:6.2f} ms  errors {run.errors}", file=sys.stderr, flush=True)
            runs.append(run)
        return runs
    finally:
        if envoy:
            envoy.stop()


def run_system_retried(system: System, upstream: Upstream, descriptors: str, options: argparse.Namespace,
                       round_: int, retried: list[str]) -> list[Run]:
    """A system's round; one that fails to run (a process that does not start, a port taken
    meanwhile, a load generator that fails) is run once more, and the failure is reported in
    `retried`. A wrong answer is not retried: it stops the benchmark."""
    try:
        return run_system(system, upstream, descriptors, options, round_=round_)
    except (OSError, RuntimeError, TimeoutError, subprocess.CalledProcessError) as failure:
        what = f"({system.key}) round {round_}: {type(failure).__name__}: {failure}"
        print(f"  {what}; running the round again", file=sys.stderr, flush=True)
        retried.append(what)
        return run_system(system, upstream, descriptors, options, round_=round_)


def verify(runs: list[Run]) -> list[str]:
    """Every request counted must have succeeded and reached the upstream."""
    problems = []
    for run in runs:
        if run.errors:
            problems.append(f"({run.system}) c={run.connections}: {run.errors} failed requests")
        if run.requests == 0:
            problems.append(f"({run.system}) c={run.connections}: no request completed")
        # A connection may have one call the upstream answered after the generator stopped.
        if SYSTEMS_BY_KEY[run.system].reaches_upstream and run.upstream_calls < run.requests:
            problems.append(f"({run.system}) c={run.connections}: {run.requests} answers but only "
                            f"{run.upstream_calls} upstream calls")
    return problems


def round_pairs(runs: list[Run], first: str, second: str, connections: int, field: str) -> list[tuple[float, float]]:
    """Two systems' figure, round by round: each pair from the same round of both."""
    pairs = []
    for round_ in sorted({run.round for run in runs}):
        values = {run.system: getattr(run, field) for run in runs
                  if run.connections == connections and run.round == round_}
        if values.get(first) is not None and values.get(second) is not None:
            pairs.append((values[first], values[second]))
    return pairs


def ratio(runs: list[Run], numerator: str, denominator: str, connections: int, field: str) -> list[float]:
    """The ratio of two systems' figure, round by round."""
    return [value / base for value, base in round_pairs(runs, numerator, denominator, connections, field) if base]


def added(runs: list[Run], system: str, connections: int, field: str) -> list[float]:
    """What `system` adds to the plain gRPC proxy's (b) figure (in ms), round by round, in µs."""
    return [(value - base) * 1000 for value, base in round_pairs(runs, system, "b", connections, field)]


def median_and_spread(values: list[float], digits: int) -> str:
    """The median, and the lowest and highest value when there are several."""
    if not values:
        return "–"
    median = statistics.median(values)
    if len(values) == 1:
        return f"{median:.{digits}f}"
    return f"{median:.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    version = subprocess.run([str(ENVOY_BIN), "--version"], capture_output=True, text=True).stdout
    envoy = re.search(r"/(\d+\.\d+\.\d+)/", version)
    return (f"{os.cpu_count()} CPUs ({cpu}), {memory_gib:.0f} GiB, {platform.system()} {platform.release()}; "
            f"Envoy {envoy.group(1) if envoy else '?'}")


def runs_table(runs: list[Run]) -> str:
    """Each system at each concurrency: the median of its runs, with the lowest and highest."""
    titles = {key: system.title for key, system in SYSTEMS_BY_KEY.items()}
    lines = ["| system | conns | req/s | p50 ms | p99 ms | Envoy CPU s / 1000 req | Envoy RSS MiB |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    keys = list(dict.fromkeys((run.system, run.connections) for run in runs))
    for system, connections in keys:
        group = [run for run in runs if (run.system, run.connections) == (system, connections)]
        column = lambda field: [getattr(run, field) for run in group if getattr(run, field) is not None]  # noqa: E731
        lines.append(f"| ({system}) {titles[system]} | {connections} | {median_and_spread(column('rps'), 0)} | "
                     f"{median_and_spread(column('p50_ms'), 2)} | {median_and_spread(column('p99_ms'), 2)} | "
                     f"{median_and_spread(column('envoy_cpu_s_per_1000'), 3)} | "
                     f"{median_and_spread(column('envoy_rss_mib'), 1)} |")
    return "\n".join(lines)


def streams_table(runs: list[Run]) -> str:
    """The streaming systems per message: messages per second and Envoy CPU per 1000 messages."""
    lines = ["| system | conns | messages/s | Envoy CPU s / 1000 messages |", "|---|---:|---:|---:|"]
    keys = list(dict.fromkeys((run.system, run.connections) for run in runs
                              if SYSTEMS_BY_KEY[run.system].messages > 1))
    for system, connections in keys:
        messages = SYSTEMS_BY_KEY[system].messages
        group = [run for run in runs if (run.system, run.connections) == (system, connections)]
        rates = [run.rps * messages for run in group]
        cpu = [run.envoy_cpu_s_per_1000 / messages for run in group if run.envoy_cpu_s_per_1000 is not None]
        lines.append(f"| ({system}) {SYSTEMS_BY_KEY[system].title} | {connections} | "
                     f"{median_and_spread(rates, 0)} | {median_and_spread(cpu, 4)} |")
    return "\n".join(lines) if len(lines) > 2 else ""


# Which systems the targets compare: Switchblade (e, and i in the stateless era, h as a dynamic
# module) against the REST transcoder (c) and the native MCP chain (d).
COMPARISONS = [("e", "c"), ("e", "d"), ("i", "d"), ("h", "c"), ("h", "d"),
               # The module against a plain gRPC proxy (#27's target), and what of that is
               # Envoy's own floor for HTTP/1.1 in and HTTP/2 out (n) and what is the module's.
               ("h", "b"), ("n", "b"), ("n", "c"), ("h", "n"), ("m", "n"), ("o", "n"),
               # This checkout against the baseline's builds (`--baseline`).
               ("e", "E"), ("h", "H"), ("k", "K"), ("l", "L"), ("q", "Q"), ("r", "R"),
               # A 100-message server stream: Switchblade (q as a module, r in Wasm) against the
               # REST transcoder streaming it (p); per request is per stream, so the ratios hold
               # per message too.
               ("q", "p"), ("r", "p"),
               # Rate limits that never trigger, against none (#26).
               ("k", "e"), ("l", "h"),
               # A search (S: Wasm filter, T: module) over containerd's API and 1,001 and 10,001
               # tools, against a tools/call of GetItem in the same build.
               ("Sctd", "e"), ("S1k", "e"), ("S10k", "e"), ("Tctd", "h"), ("T1k", "h"), ("T10k", "h"),
               # A search against the same search as the baseline's builds (`--baseline`).
               *[(f"{build}{size}", f"{build}{size}-base") for build in "ST" for size in ("ctd", "1k", "10k", "3")]]


# What each way of reaching the method from HTTP adds to a plain gRPC proxy's latency per call.
ADDED_OVER_PROXY = ["c", "d", "e", "i", "h"]


def added_latency_table(runs: list[Run], connections_list: list[int]) -> str:
    """The latency each system adds per call to the plain gRPC proxy (b): its p50 and p99 minus
    (b)'s in the same round, as medians over the rounds (lowest–highest)."""
    present = {run.system for run in runs}
    if "b" not in present:
        return ""
    titles = {key: system.title for key, system in SYSTEMS_BY_KEY.items()}
    lines = ["| system | conns | p50 added, µs | p99 added, µs |", "|---|---:|---:|---:|"]
    for system in ADDED_OVER_PROXY:
        if system not in present:
            continue
        for connections in connections_list:
            cells = [median_and_spread(added(runs, system, connections, field), 0) for field in ("p50_ms", "p99_ms")]
            lines.append(f"| ({system}) {titles[system]} | {connections} | " + " | ".join(cells) + " |")
    return "\n".join(lines) if len(lines) > 2 else ""


def ratios_table(runs: list[Run], connections_list: list[int]) -> str:
    """Ratios of the same runs, as medians over the rounds (lowest–highest)."""
    present = {run.system for run in runs}
    lines = ["| comparison | conns | req/s | p99 | Envoy CPU per req |", "|---|---:|---:|---:|---:|"]
    for numerator, denominator in COMPARISONS:
        if numerator not in present or denominator not in present:
            continue
        for connections in connections_list:
            cells = [median_and_spread(ratio(runs, numerator, denominator, connections, field), 2)
                     for field in ("rps", "p99_ms", "envoy_cpu_s_per_1000")]
            lines.append(f"| ({numerator})/({denominator}) | {connections} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def side_by_side(system: System, counterpart: System | None, options: argparse.Namespace) -> list[System]:
    """A system and its baseline counterpart, one right after the other so that both see the same
    minute; the baseline's first with `--baseline-first`."""
    if counterpart is None:
        return [system]
    return [counterpart, system] if options.baseline_first else [system, counterpart]


def run_scale(upstream: Upstream, descriptors: str, options: argparse.Namespace) -> tuple[list[Run], str]:
    """tools/list of each scale catalog against the benchmark's 3-tool one, in both builds; each
    catalog's build time, memory and full listing; and the .wasm size."""
    catalogs = [(f"{methods // 1000}k", f"{methods + 1:,} tools ({scale_messages(methods):,} messages)",
                 scale_plugin(CLI, WORK / "bench-scale", methods)) for methods in options.scale_methods]
    catalogs.append(("3", "3 tools (the benchmark's own catalog)", None))
    containerd = real_catalog("containerd")
    if containerd and not options.smoke:
        catalogs.insert(0, ("ctd", "containerd 1.6's API (Debian's protos, streams included)", containerd))
    systems = [scale_system(size, f"tools/list, {title}", plugin, module)
               for size, title, plugin in catalogs for module in (False, True)]
    # Search mode over the same catalogs: what a search costs, and what an agent reads first.
    # With `--baseline`, each search also runs as the other checkout built it, beside its
    # counterpart in every round: what a change to the search costs.
    searches: list[System] = []
    counterparts: dict[str, System] = {}
    baseline_wasm, baseline_module = baseline_builds(options.baseline) if options.baseline else (None, None)
    for size, title, plugin in catalogs:
        for module in (False, True):
            key = f"{'T' if module else 'S'}{size}"
            described = f"{'dynamic module' if module else 'Wasm filter'}, search_tools, {title}"
            searches.append(search_system(key, described, plugin, module=module))
            if options.baseline:
                counterparts[key] = search_system(f"{key}-base", f"{described}, baseline {options.baseline}", plugin,
                                                  module=module, build=baseline_module if module else baseline_wasm)
    systems += searches
    runs: list[Run] = []
    figures: list[CatalogFigures] = []
    for system in systems:
        for each in side_by_side(system, counterparts.get(system.key), options):
            SYSTEMS_BY_KEY[each.key] = each
            print(f"({each.key}) {each.title}", file=sys.stderr, flush=True)
            runs += run_system(each, upstream, descriptors, options, options.scale_connections,
                               figures if each is system else None)
    for round_ in range(2, options.runs + 1) if counterparts else ():
        for system in searches:
            for each in side_by_side(system, counterparts[system.key], options):
                print(f"({each.key}) {each.title}, round {round_} of {options.runs}", file=sys.stderr, flush=True)
                runs += run_system(each, upstream, descriptors, options, options.scale_connections, round_=round_)
    # A tools/call of GetItem in each build at the same concurrencies, in the same minutes: what
    # a search's cost is compared with.
    for key in ("e", "h"):
        print(f"({key}) {SYSTEMS_BY_KEY[key].title}, beside the searches", file=sys.stderr, flush=True)
        runs += run_system(SYSTEMS_BY_KEY[key], upstream, descriptors, options, options.scale_connections)
    lines = ["| catalog | tools | first page | catalog build (ms, per VM) | Wasm VM memory | Envoy RSS | "
             "tcmalloc allocated | first page's bytes | every page's bytes (before a first call) | "
             "every page, one after another |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for system, figure in zip(systems, figures):
        vm_memory = "–" if figure.vm_memory_bytes is None else f"{figure.vm_memory_bytes / 2**20:.1f} MiB"
        lines.append(f"| ({system.key}) {system.title.replace(', tools/list', '')} | {figure.tools:,} | "
                     f"{figure.listed:,} | {', '.join(map(str, figure.build_ms))} | {vm_memory} | "
                     f"{figure.envoy_rss_bytes / 2**20:.1f} MiB | {figure.heap_allocated_bytes / 2**20:.1f} MiB | "
                     f"{figure.tools_list_bytes:,} | {figure.all_pages_bytes:,} | "
                     f"{figure.pages} page{'' if figure.pages == 1 else 's'} in "
                     f"{figure.walk_ms:.1f} ms |")
    lines.append(f"\n`.wasm`: {WASM.binary.stat().st_size:,} bytes.")
    # Memory by what holds it: the benchmark's own catalog, and (not in a smoke run) 1,001 tools.
    measured = ["3"] if options.smoke else ["3", "1k"]
    memory = run_memory(upstream, descriptors, options,
                        [catalog for key in measured for catalog in catalogs if catalog[0] == key])
    return runs, ("\n".join(lines) + "\n\nWhere Envoy's memory goes, idle after one tools/list (MiB):\n\n" + memory
                  + ("" if options.smoke else "\n\nTool search's index against the catalog it indexes (live heap, "
                     "natively):\n\n" + index_table(catalogs)))


def index_table(catalogs: list[tuple[str, str, dict | None]]) -> str:
    """What the search index holds against its catalog, counted natively by the core's
    `search_index` bench over each catalog's configuration. Not in a smoke run: the bench
    profile's build of the core takes longer than the smoke itself (clippy --all-targets
    checks that the bench compiles)."""
    directory = WORK / "bench-index"
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for size, _, plugin in catalogs:
        path = directory / f"{size}.json"
        path.write_text(json.dumps(plugin or switchblade_plugin()))
        files.append(str(path))
    return subprocess.run(["cargo", "bench", "--quiet", "--locked", "-p", "switchblade-core", "--bench", "search_index",
                           "--", *files], cwd=REPO, check=True, capture_output=True, text=True).stdout.strip()


def real_catalog(api: str) -> dict | None:
    """The plugin configuration of a real API from its Debian protos, as the search suite builds
    it (search_sets.py), or None where its packages cannot be fetched."""
    import pytest
    from search_sets import api_config
    try:
        return api_config(api)
    except pytest.skip.Exception as skipped:
        print(f"  no {api} catalog: {skipped}", file=sys.stderr, flush=True)
        return None


def scale_system(size: str, title: str, plugin: dict | None, module: bool) -> System:
    """A scale system: `W` and the size for the Wasm filter, `M` for the module."""
    build = "dynamic module" if module else "Wasm filter"
    return tools_list_system(f"{'M' if module else 'W'}{size}", f"{build}, {title}", plugin, module=module)


def run_memory(upstream: Upstream, descriptors: str, options: argparse.Namespace,
               catalogs: list[tuple[str, str, dict | None]]) -> str:
    """Each build with each catalog at each count of worker threads: Envoy's resident memory,
    by what holds it."""
    rows = []
    for size, title, plugin in catalogs:
        for module in (False, True):
            system = scale_system(size, title, plugin, module)
            for workers in options.memory_workers:
                print(f"  memory: {system.title}, {workers} worker(s)", file=sys.stderr, flush=True)
                envoy = start_envoy(system, upstream, descriptors, None, workers=workers)
                try:
                    check_answer(system, envoy.port)
                    if not module:
                        wait_for_vm_memory(envoy)
                    rows.append((system.title, workers, memory_figures(envoy.process.pid, envoy.admin_url)))
                finally:
                    envoy.stop()
    return memory_table(rows)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # Whole seconds: wrk takes no fractions.
    parser.add_argument("--seconds", type=int, default=10, help="length of each measured run")
    parser.add_argument("--warmup", type=int, default=3, help="length of the warm-up run before each (0: none)")
    parser.add_argument("--connections", default="1,16,64", help="comma-separated concurrencies")
    parser.add_argument("--systems", default="abcdefghiklmnopqr",
                        help="which systems to run (letters; f, g, m and o are floors of Switchblade's cost, n "
                             "Envoy's own for the MCP systems' transport; p, q "
                             "and r read a 100-message server stream; k and l are e and h with rate limits "
                             "that never trigger)")
    parser.add_argument("--runs", type=int, default=3,
                        help="rounds of every system, one after another; figures are medians over them")
    parser.add_argument("--no-pin", action="store_true",
                        help="do not pin Envoy to its own CPU (the upstream and the load generator share the rest)")
    parser.add_argument("--no-scale", action="store_true", help="skip the scale catalogs' figures")
    parser.add_argument("--scale-methods", default="1000,10000",
                        help="comma-separated sizes of the scale catalogs, in unary methods (each has one more tool)")
    parser.add_argument("--json", type=Path, help="also write the runs as JSON here")
    parser.add_argument("--baseline", type=Path, metavar="CHECKOUT",
                        help="also run (e), (h), (k), (l), (q) and (r) as another checkout built them, as (E), "
                             "(H), (K), (L), (Q) and (R), and the scale part's searches, as (S1k-base) and so on, "
                             "in the same rounds (build it there first: scripts/bootstrap)")
    parser.add_argument("--baseline-first", action="store_true",
                        help="run each baseline system right before its counterpart, not right after: the other "
                             "order, for a change measured in both")
    parser.add_argument("--smoke", action="store_true", help="a run of a few seconds, to check the command works")
    options = parser.parse_args()
    if options.smoke:
        # One concurrency: every system and table once, which is what a smoke run checks.
        options.seconds, options.warmup, options.connections, options.runs = 1, 0, "1", 1
    options.connections = [int(part) for part in options.connections.split(",")]
    options.memory_workers = [1] if options.smoke else [1, 2, 4]
    options.scale_methods = [1000] if options.smoke else [int(part) for part in options.scale_methods.split(",")]
    options.baseline = options.baseline.resolve() if options.baseline else None
    baseline = [system for system in (baseline_systems(options.baseline) if options.baseline else [])
                if system.key.lower() in options.systems]
    # The builds the chosen systems run, and both (the scale part's searches run in both builds).
    needed = {system.binary for system in baseline if system.binary}
    if options.baseline and not options.no_scale:
        needed.update(baseline_builds(options.baseline))
    missing = sorted(str(build) for build in needed if not build.exists())
    if missing:
        parser.error(f"the baseline has no builds: {', '.join(missing)} (run scripts/bootstrap there)")
    options.systems_run = []
    for system in SYSTEMS:
        if system.key in options.systems:
            counterpart = next((other for other in baseline if other.key == system.key.upper()), None)
            options.systems_run += side_by_side(system, counterpart, options)
    for system in baseline:
        SYSTEMS_BY_KEY[system.key] = system
    options.scale_connections = [1] if options.smoke else [1, 16]
    pin = not options.no_pin and (os.cpu_count() or 1) >= 2
    last = (os.cpu_count() or 1) - 1
    options.envoy_cpus = str(last) if pin else None
    options.client_cpus = f"0-{last - 1}" if pin else None
    return options


def main() -> None:
    options = arguments()
    for tool in ("wrk", "taskset"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode != 0:
            raise SystemExit(f"bench needs `{tool}` on PATH (scripts/bench installs it)")
    descriptors = descriptor_set()
    upstream = Upstream(command_prefix=pinned([], options.client_cpus)).start()
    # The streaming systems' WatchItems: STREAM_MESSAGES events, unpaced, then OK.
    upstream.stream_mode(f"count={STREAM_MESSAGES}")
    runs: list[Run] = []
    retried: list[str] = []
    scale_runs: list[Run] = []
    scale_table = ""
    try:
        # Round after round of every system, so that a slow minute of a shared machine spreads
        # over all of them instead of falling on one.
        for round_ in range(1, options.runs + 1):
            for system in options.systems_run:
                print(f"({system.key}) {system.title}, round {round_} of {options.runs}", file=sys.stderr, flush=True)
                runs += run_system_retried(system, upstream, descriptors, options, round_, retried)
        if not options.no_scale:
            scale_runs, scale_table = run_scale(upstream, descriptors, options)
    finally:
        upstream.stop()
    pinning = (f"Envoy pinned to CPU {options.envoy_cpus}; upstream and load generator on CPUs {options.client_cpus}"
               if options.envoy_cpus else "no CPU pinning")
    print(f"\nMachine: {machine()}. {pinning}. {options.runs} round(s) of every system; each run "
          f"{options.seconds:g} s after a {options.warmup:g} s warm-up; one call in flight per connection. "
          f"Figures are medians over the rounds (lowest–highest).\n")
    print(runs_table(runs))
    print()
    print(ratios_table(runs, options.connections))
    latency = added_latency_table(runs, options.connections)
    if latency:
        print("\nLatency added per call to the plain gRPC proxy (b):\n")
        print(latency)
    streams = streams_table(runs)
    if streams:
        print("\nStreams, per message:\n")
        print(streams)
    if scale_runs:
        print("\nScale (Switchblade only):\n")
        print(runs_table(scale_runs))
        print("\nA search against a tools/call of GetItem (one round each)"
              + (f", and against the baseline's build ({options.runs} rounds)" if options.baseline else "") + ":\n")
        print(ratios_table(scale_runs, options.scale_connections))
        print()
        print(scale_table)
    if retried:
        print("\nRounds run again after a failure (once each; a second failure stops the benchmark):\n")
        print("\n".join(f"- {line}" for line in retried))
    if options.json:
        options.json.write_text(json.dumps([asdict(run) for run in runs + scale_runs], indent=2))
    problems = verify(runs + scale_runs)
    if problems:
        raise SystemExit("benchmark invalid:\n" + "\n".join(problems))


if __name__ == "__main__":
    main()

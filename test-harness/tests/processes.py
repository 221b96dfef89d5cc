"""The real processes of the integration tests and their wiring: the demo gRPC upstream, and
Envoy running a bootstrap whose clusters point at a backend (that upstream, or a raw peer).

Each process gets free loopback ports, is polled until ready, and is always stopped; Envoy's
log is kept so a failing test can show it.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import os
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import httpx2
import yaml

import filter_build
from filter_build import FilterBuild, demo_plugin, ecds_resource

REPO = Path(__file__).resolve().parents[2]
WORK = REPO / ".work"
UPSTREAM_BIN = Path(os.environ.get("SWITCHBLADE_UPSTREAM_BIN", REPO / "target/release/demo-upstream"))
ENVOY_BIN = Path(os.environ.get("ENVOY_BIN", REPO / ".venv/bin/envoy"))
DEMO_CONFIG = REPO / "envoy/demo.yaml"
CLI_BIN = REPO / "target/release/switchblade"
# Debian's prometheus package (scripts/test installs it).
PROMETHEUS_BIN = shutil.which("prometheus")
PROMETHEUS_CONFIG = REPO / "envoy/prometheus/prometheus.yml"
ECDS_STATS = "extension_config_discovery.http_filter.switchblade"


def stop_process(process: subprocess.Popen) -> None:
    """Asks a process to stop, and kills it if it has not within 10 seconds."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _ephemeral_ports() -> range:
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


# Ports the Fetch standard forbids: Node's fetch (the TypeScript SDK's transport) refuses
# them with "bad port". Only these lie in the range free_port picks from.
FETCH_BAD_PORTS = frozenset({10080})


# Every port free_port has handed out in this process: a port is free again once the check
# closes it, and two processes started one after the other (an Envoy's listener and its admin)
# would otherwise be given the same port now and then.
_handed_out: set[int] = set()


def port_in_use(port: int) -> bool:
    """Whether something listens on 127.0.0.1:`port` (a fixed port of the demo's or the
    quick start's)."""
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def fixed_ports_held() -> Iterator[None]:
    """The demo's and the quick start's fixed ports (10000, 9901, 50051, 50052) for one test
    at a time across processes: scripts/test runs the Wasm and the module sessions at once.
    The holder frees them before it lets go."""
    WORK.mkdir(parents=True, exist_ok=True)
    with open(WORK / ".fixed-ports.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _port_band(ports: range) -> range:
    """This session's share of `ports`: the Wasm session the lower half, the module's the upper
    one, so that two sessions running at once never pick the same port in the moment between
    one's check and its process's bind."""
    middle = (ports.start + ports.stop) // 2
    if filter_build.current() is filter_build.MODULE:
        return range(middle, ports.stop)
    return range(ports.start, middle)


def free_port() -> int:
    """A port free now, below the ephemeral range, in this session's band, and never handed out
    before by this process: a port the kernel hands out for `bind(0)` may be taken as an
    outgoing connection's source port (a load generator opens thousands) before the process it
    was picked for binds it."""
    ephemeral = _ephemeral_ports()
    band = _port_band(range(10000, ephemeral.start))
    for _ in range(100):
        if ephemeral.start < 11000:  # no room below it: take what the kernel gives
            port = 0
        else:
            port = random.randrange(band.start, band.stop)
        if port in FETCH_BAD_PORTS or port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            if port == 0:
                port = sock.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise RuntimeError(f"no free port between {band.start} and {band.stop}")


def wait_until(check, what: str, timeout: float = 20.0, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what}: process exited with {process.returncode}")
        try:
            if check():
                return
        except (httpx2.HTTPError, OSError):
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{what}: not ready after {timeout}s")


class Peer:
    """A process a test starts beside Envoy (Prometheus, a registry, another Envoy): its files
    in a directory of its own under .work, its output in a log there."""

    def __init__(self, name: str) -> None:
        self.dir = WORK / name
        self.process: subprocess.Popen | None = None

    def launch(self, command: list[str], ready, what: str) -> None:
        """Starts `command` and waits until `ready()` says it serves."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log = (self.dir / "output.log").open("w")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        wait_until(ready, f"{what} (log: {self.dir / 'output.log'})", process=self.process)

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            self.log.close()
        self.process = None


class Backend(Protocol):
    """What an Envoy's clusters point at: the port on 127.0.0.1 of each cluster it stands in
    for. It must name every cluster of the bootstrap, so none is left at the bootstrap's fixed
    port, where another process (scripts/demo's upstream) may answer."""

    @property
    def clusters(self) -> Mapping[str, int | str]: ...


class TestPeer(Backend, Protocol):
    """A backend the test started, and stops."""

    def stop(self) -> None: ...


class Upstream:
    """The demo gRPC upstream (tonic), with its call-count control API."""

    def __init__(self, command_prefix: list[str] | None = None, args: list[str] | None = None) -> None:
        self.grpc_port = free_port()
        self.control_port = free_port()
        # For example `taskset -c 0`, to keep the upstream off the benchmarked Envoy's CPU.
        self.command_prefix = command_prefix or []
        # More flags, for example `--reflection off`.
        self.args = args or []
        self.process: subprocess.Popen | None = None

    def start(self) -> "Upstream":
        self.process = subprocess.Popen(
            [*self.command_prefix, str(UPSTREAM_BIN), "--grpc", f"127.0.0.1:{self.grpc_port}", "--control", f"127.0.0.1:{self.control_port}",
             *self.args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(lambda: self.calls() is not None, "demo upstream", process=self.process)
        return self

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
        self.process = None

    @property
    def clusters(self) -> dict[str, int]:
        return {"demo_grpc": self.grpc_port, "demo_control": self.control_port}

    @property
    def control_url(self) -> str:
        return f"http://127.0.0.1:{self.control_port}"

    def calls(self) -> dict[str, int]:
        return httpx2.get(f"{self.control_url}/calls", timeout=2).raise_for_status().json()

    def metadata(self, method: str) -> dict[str, str]:
        """The gRPC metadata of the last call to `method` (`/package.Service/Method`)."""
        return httpx2.get(f"{self.control_url}/metadata", timeout=2).raise_for_status().json()[method]

    def total_calls(self) -> int:
        return sum(self.calls().values())

    def reset(self) -> None:
        httpx2.post(f"{self.control_url}/reset", timeout=2).raise_for_status()

    def most_in_flight(self) -> int:
        """The most calls that were in the delay at once since the last reset."""
        return httpx2.get(f"{self.control_url}/in_flight", timeout=2).raise_for_status().json()

    def delay(self, ms: int) -> None:
        """Delays every later gRPC answer by `ms` milliseconds (until reset)."""
        httpx2.post(f"{self.control_url}/delay", params={"ms": ms}, timeout=2).raise_for_status()

    def streams(self) -> dict[str, int]:
        """Server-streaming and bidirectional answers: `open` now, and `opened` and `cancelled`
        (ended by the client, a broken request stream or the deadline) since the last reset."""
        return httpx2.get(f"{self.control_url}/streams", timeout=2).raise_for_status().json()

    def stream_mode(self, mode: str) -> None:
        """How every later server-streaming answer behaves (until reset): `normal`, `many`
        (10,000 messages, then OK), `count=N` (N messages, then OK), `error_after=N` (N messages, then FAILED_PRECONDITION) or
        `never_end` (one message, then silence, whatever the deadline)."""
        httpx2.post(f"{self.control_url}/stream", params={"mode": mode}, timeout=2).raise_for_status()


def demo_config() -> dict[str, Any]:
    """The demo bootstrap, whose switchblade filter is configured through ECDS."""
    return yaml.safe_load(DEMO_CONFIG.read_text())


def connection_manager(config: dict[str, Any]) -> dict[str, Any]:
    """The HTTP connection manager of the bootstrap's (first) listener."""
    listener = config["static_resources"]["listeners"][0]
    return listener["filter_chains"][0]["filters"][0]["typed_config"]


def http_filters(config: dict[str, Any]) -> list[dict[str, Any]]:
    return connection_manager(config)["http_filters"]


def static_bootstrap(plugin: dict[str, Any] | str, build: FilterBuild | None = None) -> dict[str, Any]:
    """The demo bootstrap with the plugin configuration inline instead of from ECDS, as
    `envoy --mode validate` loads and checks it."""
    build = build or filter_build.current()
    config = demo_config()
    build.prepare(config)
    for entry in http_filters(config):
        if entry["name"] == "switchblade":
            entry.pop("config_discovery")
            entry["typed_config"] = build.typed_config(plugin)
    return config


class Envoy:
    """A real Envoy running the demo bootstrap on free ports, its clusters pointed at a backend.

    The switchblade filter reads its configuration from this instance's own ECDS file, so a
    test can swap it while Envoy runs. Pass `bootstrap` to run another bootstrap instead.
    """

    def __init__(
        self,
        backend: Backend,
        plugin: dict[str, Any] | str | None = None,
        bootstrap: dict[str, Any] | None = None,
        name: str = "envoy",
        command_prefix: list[str] | None = None,
        build: FilterBuild | None = None,
        shared_ecds: "Envoy | None" = None,
        workers: int = 1,
    ) -> None:
        self.backend = backend
        # Envoy's worker threads (`--concurrency`); each runs its own Wasm VM.
        self.workers = workers
        self.build = build or filter_build.current()
        # For example `taskset -c 1`, to give the benchmarked Envoy a CPU of its own.
        self.command_prefix = command_prefix or []
        self.port = free_port()
        self.admin_port = free_port()
        self.name = name
        self.dir = WORK / f"{name}-{self.port}"
        # Another instance's ECDS file, when both are to follow one configuration.
        self.shares_ecds = shared_ecds is not None
        self.ecds_dir = shared_ecds.ecds_dir if shared_ecds else self.dir / "ecds"
        self.ecds_path = self.ecds_dir / "switchblade.yaml"
        self.log_path = self.dir / "envoy.log"
        self.access_log_path = self.dir / "access.log"
        self.config_path = self.dir / "envoy.yaml"
        self.plugin = plugin if plugin is not None else demo_plugin()
        self.config = copy.deepcopy(bootstrap) if bootstrap is not None else demo_config()
        self.process: subprocess.Popen | None = None
        self._retarget()

    def _retarget(self) -> None:
        config = self.config
        self.build.prepare(config)
        config["admin"]["address"]["socket_address"]["port_value"] = self.admin_port
        config["static_resources"]["listeners"][0]["address"]["socket_address"]["port_value"] = self.port
        ports = self.backend.clusters
        clusters = config["static_resources"]["clusters"]
        # A cluster without endpoints (a bootstrap's dead end) needs no stand-in.
        unserved = [cluster["name"] for cluster in clusters
                    if cluster["name"] not in ports and cluster["load_assignment"]["endpoints"]]
        if unserved:
            raise ValueError(f"the backend stands in for no cluster named {', '.join(unserved)}")
        for cluster in clusters:
            for group in cluster["load_assignment"]["endpoints"]:
                for endpoint in group["lb_endpoints"]:
                    target = ports[cluster["name"]]
                    if isinstance(target, str):
                        # A Unix socket's path (a daemon that serves its API on one).
                        endpoint["endpoint"]["address"] = {"pipe": {"path": target}}
                    else:
                        endpoint["endpoint"]["address"]["socket_address"]["port_value"] = target
        for access_log in connection_manager(config).get("access_log", []):
            access_log["typed_config"]["path"] = str(self.access_log_path)
        for entry in http_filters(config):
            if entry["name"] != "switchblade":
                continue
            if "config_discovery" in entry:
                discovery = entry["config_discovery"]
                source = discovery["config_source"]["path_config_source"]
                source["path"] = str(self.ecds_path)
                source["watched_directory"]["path"] = str(self.ecds_dir)
                discovery["type_urls"] = [self.build.type_url]
            else:
                entry["typed_config"] = self.build.adopt(entry["typed_config"])

    def command(self) -> list[str]:
        return [
            *self.command_prefix,
            str(ENVOY_BIN),
            "-c", str(self.config_path),
            "--disable-hot-restart",
            "--concurrency", str(self.workers),
            # Access logs written within a tenth of a second, for the tests that read them
            # (Envoy's default flushes files every 10 s).
            "--file-flush-interval-msec", "100",
            "--log-level", "warn",
            "--component-log-level", f"{self.build.log_component}:info,config:info",
        ]

    def start(self, wait: bool = True) -> "Envoy":
        self.ecds_dir.mkdir(parents=True, exist_ok=True)
        if not self.shares_ecds:
            self.ecds_path.write_text(ecds_resource(self.build, self.plugin))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(self.config))
        self.log = self.log_path.open("w")
        environment = {**os.environ, **self.build.environment()}
        self.process = subprocess.Popen(self.command(), stdout=self.log, stderr=subprocess.STDOUT, env=environment)
        if wait:
            wait_until(self.is_ready, f"envoy (log: {self.log_path})", process=self.process)
        return self

    def swap_plugin(self, plugin: dict[str, Any] | str, timeout: float = 10.0) -> bool:
        """Replaces the plugin configuration the way an operator would (write beside, rename
        over), and waits until Envoy has accepted (True) or rejected (False) it."""
        def counter(stats: dict[str, int], outcome: str) -> int:
            return stats.get(f"{ECDS_STATS}.{outcome}", 0)

        before = self.stats()
        staged = self.ecds_dir / "switchblade.next.yaml"
        staged.write_text(ecds_resource(self.build, plugin))
        staged.rename(self.ecds_path)
        outcome: list[bool] = []

        def settled() -> bool:
            now = self.stats()
            if counter(now, "update_success") > counter(before, "update_success"):
                outcome.append(True)
            elif counter(now, "update_rejected") > counter(before, "update_rejected"):
                outcome.append(False)
            return bool(outcome)

        wait_until(settled, "ECDS update", timeout=timeout, process=self.process)
        return outcome[0]

    def filter_marks(self) -> dict[str, int]:
        """What must not change while Envoy keeps serving (see `FilterBuild.marks`)."""
        assert self.process is not None and self.process.poll() is None, f"Envoy died (log: {self.log_path})"
        return self.build.marks(self.stats())

    def is_ready(self) -> bool:
        return httpx2.get(f"{self.admin_url}/ready", timeout=1).status_code == 200

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
        self.process = None
        if getattr(self, "log", None):
            self.log.close()

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def memory(self) -> tuple[int, int]:
        """The bytes Envoy's allocator holds now (the admin's /memory: the
        `server.memory_allocated` stat is only as fresh as the last stats flush), and the Wasm
        VM's linear memory (0 for the module, whose allocations are Envoy's allocator's)."""
        allocated = int(httpx2.get(f"{self.admin_url}/memory", timeout=2).json()["allocated"])
        return allocated, self.stats().get("wasmcustom.switchblade.vm_memory_bytes", 0)

    @staticmethod
    def assert_memory_flat(samples: list[tuple], warm_rounds: int, allocated_spread: int) -> None:
        """After the first `warm_rounds` rounds, each of `samples` (a round's `memory()` first,
        anything else after it, shown on failure) keeps what Envoy's allocator holds within
        `allocated_spread` bytes and the Wasm VM's memory within 8 MiB (it grows by whole pages
        and never shrinks)."""
        allocated = [sample[0] for sample in samples[warm_rounds:]]
        assert max(allocated) - min(allocated) < allocated_spread, f"Envoy's memory kept growing: {samples}"
        vm = [sample[1] for sample in samples[warm_rounds:]]
        assert max(vm) - min(vm) <= 8 * 2**20, f"the Wasm VM's memory kept growing: {samples}"

    def stats(self) -> dict[str, int]:
        text = httpx2.get(f"{self.admin_url}/stats", timeout=2).text
        stats = {}
        for line in text.splitlines():
            name, _, value = line.partition(": ")
            if value.isdigit():
                stats[name] = int(value)
        return stats



@contextlib.contextmanager
def in_front_of(peer: TestPeer, plugin: dict[str, Any], name: str, *,
                bootstrap: dict[str, Any] | None = None) -> Iterator[Envoy]:
    """A started Envoy in front of a test peer, running `bootstrap` if given (else the demo
    bootstrap); afterwards both are stopped, the peer also when Envoy does not start."""
    envoy = Envoy(peer, plugin, bootstrap=bootstrap, name=name)
    try:
        envoy.start()
        yield envoy
    finally:
        envoy.stop()
        peer.stop()


class Prometheus(Peer):
    """A real Prometheus with the shipped configuration (envoy/prometheus/), scraping one
    Envoy's admin endpoint every second and evaluating the shipped rules every second."""

    def __init__(self, envoy: Envoy) -> None:
        self.envoy = envoy
        self.port = free_port()
        super().__init__(f"prometheus-{self.port}")

    def start(self) -> "Prometheus":
        config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
        config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
        config["rule_files"] = [str(PROMETHEUS_CONFIG.parent / name) for name in config["rule_files"]]
        config["scrape_configs"][0]["static_configs"] = [{"targets": [f"127.0.0.1:{self.envoy.admin_port}"]}]
        self.dir.mkdir(parents=True, exist_ok=True)
        config_path = self.dir / "prometheus.yml"
        config_path.write_text(yaml.safe_dump(config))
        self.launch([str(PROMETHEUS_BIN), f"--config.file={config_path}", f"--storage.tsdb.path={self.dir / 'data'}",
                     f"--web.listen-address=127.0.0.1:{self.port}"],
                    lambda: httpx2.get(f"{self.url}/-/ready", timeout=1).status_code == 200, "prometheus")
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant vector of a PromQL query: each series' labels and value."""
        answer = httpx2.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=5).raise_for_status().json()
        return [{"labels": sample["metric"], "value": float(sample["value"][1])} for sample in answer["data"]["result"]]

    def rules(self) -> list[dict[str, Any]]:
        answer = httpx2.get(f"{self.url}/api/v1/rules", timeout=5).raise_for_status().json()
        return [rule for group in answer["data"]["groups"] for rule in group["rules"]]

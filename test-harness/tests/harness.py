"""Real processes for the integration tests: the demo gRPC upstream and Envoy with the filter.

Each process gets free loopback ports, is polled until ready, and is always stopped; Envoy's
log is kept so a failing test can show it.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
import httpx2
import jsonschema
import yaml

REPO = Path(__file__).resolve().parents[2]
WORK = REPO / ".work"
WASM = REPO / "target/wasm32-wasip1/release/switchblade_filter.wasm"
UPSTREAM_BIN = Path(os.environ.get("SWITCHBLADE_UPSTREAM_BIN", REPO / "target/release/demo-upstream"))
ENVOY_BIN = Path(os.environ.get("ENVOY_BIN", REPO / ".venv/bin/envoy"))
DEMO_CONFIG = REPO / "envoy/demo.yaml"


def is_deadline_error(text: str, method: str, deadline_ms: int) -> bool:
    """A call that ran out of time. Envoy sends the deadline upstream as `grpc-timeout`, so two
    timers race: Envoy's own (reported as DEADLINE_EXCEEDED with the deadline), or the
    upstream's (tonic answers CANCELLED "Timeout expired"). Either shows the deadline applied."""
    envoy = f"{method} failed with gRPC status DEADLINE_EXCEEDED (4): no answer within the {deadline_ms} ms deadline"
    upstream = f"{method} failed with gRPC status CANCELLED (1): Timeout expired"
    return text in (envoy, upstream)


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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


class Upstream:
    """The demo gRPC upstream (tonic), with its call-count control API."""

    def __init__(self, command_prefix: list[str] | None = None) -> None:
        self.grpc_port = free_port()
        self.control_port = free_port()
        # For example `taskset -c 0`, to keep the upstream off the benchmarked Envoy's CPU.
        self.command_prefix = command_prefix or []
        self.process: subprocess.Popen | None = None

    def start(self) -> "Upstream":
        self.process = subprocess.Popen(
            [*self.command_prefix, str(UPSTREAM_BIN), "--grpc", f"127.0.0.1:{self.grpc_port}", "--control", f"127.0.0.1:{self.control_port}"],
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

    def delay(self, ms: int) -> None:
        """Delays every later gRPC answer by `ms` milliseconds (until reset)."""
        httpx2.post(f"{self.control_url}/delay", params={"ms": ms}, timeout=2).raise_for_status()


DEMO_ECDS = REPO / "envoy/ecds/demo.yaml"
ECDS_STATS = "extension_config_discovery.http_filter.switchblade"


class Blackhole:
    """An "upstream" that accepts TCP connections and never answers: a hung service."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(64)
        self.grpc_port = self.control_port = self.socket.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection = self.socket.accept()[0]
            except OSError:
                return
            self._handle(connection)

    def _handle(self, connection: socket.socket) -> None:
        self.held.append(connection)

    def stop(self) -> None:
        self.socket.close()
        for connection in self.held:
            connection.close()


class Slammer(Blackhole):
    """An "upstream" that reads what it is sent, then resets the connection mid-exchange."""

    def _handle(self, connection: socket.socket) -> None:
        connection.recv(65536)
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()


class RawGrpcUpstream(Blackhole):
    """An HTTP/2 "upstream" that fails every gRPC call with a `grpc-message` of raw bytes that
    are not UTF-8 (the gRPC wire form is percent-encoded ASCII; a hostile peer need not care),
    in its trailers, or in a trailers-only answer."""

    def __init__(self, message: bytes, trailers_only: bool = False) -> None:
        self.message = message
        self.trailers_only = trailers_only
        super().__init__()

    def _handle(self, connection: socket.socket) -> None:
        self.held.append(connection)
        threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        config = h2.config.H2Configuration(client_side=False, header_encoding=None,
                                           validate_outbound_headers=False, normalize_outbound_headers=False)
        peer = h2.connection.H2Connection(config=config)
        peer.initiate_connection()
        connection.sendall(peer.data_to_send())
        while data := self._read(connection):
            for event in peer.receive_data(data):
                if isinstance(event, h2.events.StreamEnded):
                    self._fail(peer, event.stream_id)
            connection.sendall(peer.data_to_send())

    @staticmethod
    def _read(connection: socket.socket) -> bytes:
        try:
            return connection.recv(65536)
        except OSError:
            return b""

    def _fail(self, peer: "h2.connection.H2Connection", stream_id: int) -> None:
        status = [(b"grpc-status", b"13"), (b"grpc-message", self.message)]
        headers = [(b":status", b"200"), (b"content-type", b"application/grpc")]
        if self.trailers_only:
            peer.send_headers(stream_id, headers + status, end_stream=True)
        else:
            peer.send_headers(stream_id, headers)
            peer.send_headers(stream_id, status, end_stream=True)


def demo_config() -> dict[str, Any]:
    """The demo bootstrap, whose switchblade filter is configured through ECDS."""
    return yaml.safe_load(DEMO_CONFIG.read_text())


def demo_plugin() -> dict[str, Any]:
    """The demo's plugin configuration (the JSON inside envoy/ecds/demo.yaml)."""
    resource = yaml.safe_load(DEMO_ECDS.read_text())["resources"][0]
    return json.loads(resource["typed_config"]["config"]["configuration"]["value"])


def wasm_typed_config(plugin: dict[str, Any] | str) -> dict[str, Any]:
    """The Wasm filter's typed_config for a plugin configuration (a dict, or raw text)."""
    resource = yaml.safe_load(DEMO_ECDS.read_text())["resources"][0]
    typed = resource["typed_config"]
    typed["config"]["vm_config"]["code"]["local"]["filename"] = str(WASM)
    typed["config"]["configuration"]["value"] = plugin if isinstance(plugin, str) else json.dumps(plugin)
    return typed


def ecds_resource(plugin: dict[str, Any] | str) -> str:
    return yaml.safe_dump({"resources": [{
        "@type": "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig",
        "name": "switchblade",
        "typed_config": wasm_typed_config(plugin),
    }]})


def http_filters(config: dict[str, Any]) -> list[dict[str, Any]]:
    listener = config["static_resources"]["listeners"][0]
    return listener["filter_chains"][0]["filters"][0]["typed_config"]["http_filters"]


def static_bootstrap(plugin: dict[str, Any] | str) -> dict[str, Any]:
    """The demo bootstrap with the plugin configuration inline instead of from ECDS, as
    `envoy --mode validate` loads and checks it."""
    config = demo_config()
    for entry in http_filters(config):
        if entry["name"] == "switchblade":
            entry.pop("config_discovery")
            entry["typed_config"] = wasm_typed_config(plugin)
    return config


class Envoy:
    """A real Envoy running the demo bootstrap on free ports, pointed at an upstream.

    The switchblade filter reads its configuration from this instance's own ECDS file, so a
    test can swap it while Envoy runs. Pass `bootstrap` to run another bootstrap instead.
    """

    def __init__(
        self,
        upstream: Upstream,
        plugin: dict[str, Any] | str | None = None,
        bootstrap: dict[str, Any] | None = None,
        name: str = "envoy",
        command_prefix: list[str] | None = None,
    ) -> None:
        self.upstream = upstream
        # For example `taskset -c 1`, to give the benchmarked Envoy a CPU of its own.
        self.command_prefix = command_prefix or []
        self.port = free_port()
        self.admin_port = free_port()
        self.name = name
        self.dir = WORK / f"{name}-{self.port}"
        self.ecds_dir = self.dir / "ecds"
        self.ecds_path = self.ecds_dir / "switchblade.yaml"
        self.log_path = self.dir / "envoy.log"
        self.config_path = self.dir / "envoy.yaml"
        self.plugin = plugin if plugin is not None else demo_plugin()
        self.config = copy.deepcopy(bootstrap) if bootstrap is not None else demo_config()
        self.process: subprocess.Popen | None = None
        self._retarget()

    def _retarget(self) -> None:
        config = self.config
        config["admin"]["address"]["socket_address"]["port_value"] = self.admin_port
        config["static_resources"]["listeners"][0]["address"]["socket_address"]["port_value"] = self.port
        ports = {"demo_grpc": self.upstream.grpc_port, "demo_control": self.upstream.control_port}
        for cluster in config["static_resources"]["clusters"]:
            if cluster["name"] in ports:
                for group in cluster["load_assignment"]["endpoints"]:
                    for endpoint in group["lb_endpoints"]:
                        endpoint["endpoint"]["address"]["socket_address"]["port_value"] = ports[cluster["name"]]
        for entry in http_filters(config):
            if entry["name"] != "switchblade":
                continue
            if "config_discovery" in entry:
                source = entry["config_discovery"]["config_source"]["path_config_source"]
                source["path"] = str(self.ecds_path)
                source["watched_directory"]["path"] = str(self.ecds_dir)
            else:
                entry["typed_config"]["config"]["vm_config"]["code"]["local"]["filename"] = str(WASM)

    def command(self) -> list[str]:
        return [
            *self.command_prefix,
            str(ENVOY_BIN),
            "-c", str(self.config_path),
            "--disable-hot-restart",
            "--concurrency", "1",
            "--log-level", "warn",
            "--component-log-level", "wasm:info,config:info",
        ]

    def start(self, wait: bool = True) -> "Envoy":
        self.ecds_dir.mkdir(parents=True, exist_ok=True)
        self.ecds_path.write_text(ecds_resource(self.plugin))
        self.config_path.write_text(yaml.safe_dump(self.config))
        self.log = self.log_path.open("w")
        self.process = subprocess.Popen(self.command(), stdout=self.log, stderr=subprocess.STDOUT)
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
        staged.write_text(ecds_resource(plugin))
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

    def stats(self) -> dict[str, int]:
        text = httpx2.get(f"{self.admin_url}/stats", timeout=2).text
        stats = {}
        for line in text.splitlines():
            name, _, value = line.partition(": ")
            if value.isdigit():
                stats[name] = int(value)
        return stats


MODERN_VERSION = "2026-07-28"
SUPPORTED_VERSIONS = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]


def modern_meta() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "switchblade-tests", "version": "0"},
    }


class Mcp:
    """Raw JSON-RPC over HTTP to the filter, for tests that check exact answers."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx2.Client(timeout=10)
        self.next_id = 0
        self._output_schemas: dict[str, Any] | None = None

    def post(self, body: Any, headers: dict[str, str] | None = None) -> httpx2.Response:
        content = body if isinstance(body, (bytes, str)) else json.dumps(body)
        all_headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        all_headers.update(headers or {})
        return self.http.post(self.url, content=content, headers=all_headers)

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        response = self.post(message)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/json"
        body = response.json()
        assert body["id"] == self.next_id
        return body

    def modern(
        self, method: str, params: dict[str, Any] | None = None, headers: dict[str, str] | None = None, id: Any = 1
    ) -> httpx2.Response:
        """A 2026-07-28 request with the `_meta` envelope and the SEP-2243 headers, which
        `headers` may override (a value of None drops a header)."""
        params = dict(params or {})
        params.setdefault("_meta", modern_meta())
        all_headers = {"mcp-protocol-version": MODERN_VERSION, "mcp-method": method}
        if method == "tools/call" and "name" in params:
            all_headers["mcp-name"] = params["name"]
        all_headers.update(headers or {})
        sent = {k: v for k, v in all_headers.items() if v is not None}
        return self.post({"jsonrpc": "2.0", "id": id, "method": method, "params": params}, headers=sent)

    def call_tool(self, name: str, arguments: Any) -> dict[str, Any]:
        """Calls a tool. Every successful result is checked against the tool's outputSchema,
        so every response an integration test sees honours the contract."""
        body = self.request("tools/call", {"name": name, "arguments": arguments})
        assert "result" in body, body
        result = body["result"]
        if result.get("isError") is False:
            schema = self.output_schemas().get(name)
            assert schema is not None, f"{name} is not in tools/list"
            jsonschema.validate(result["structuredContent"], schema)
        return result

    def output_schemas(self) -> dict[str, Any]:
        if self._output_schemas is None:
            self._output_schemas, cursor = {}, None
            while True:
                params = {"cursor": cursor} if cursor else {}
                page = self.request("tools/list", params)["result"]
                self._output_schemas.update({tool["name"]: tool["outputSchema"] for tool in page["tools"]})
                cursor = page.get("nextCursor")
                if not cursor:
                    return self._output_schemas
        return self._output_schemas

    def tools(self) -> dict[str, dict[str, Any]]:
        return {tool["name"]: tool for tool in self.request("tools/list")["result"]["tools"]}

"""Real processes for the integration tests: the demo gRPC upstream and Envoy with the filter.

Each process gets free loopback ports, is polled until ready, and is always stopped; Envoy's
log is kept so a failing test can show it.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx2
import yaml

REPO = Path(__file__).resolve().parents[2]
WORK = REPO / ".work"
WASM = REPO / "target/wasm32-wasip1/release/switchblade_filter.wasm"
UPSTREAM_BIN = Path(os.environ.get("SWITCHBLADE_UPSTREAM_BIN", REPO / "target/release/demo-upstream"))
ENVOY_BIN = Path(os.environ.get("ENVOY_BIN", REPO / ".venv/bin/envoy"))
DEMO_CONFIG = REPO / "envoy/demo.yaml"


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

    def __init__(self) -> None:
        self.grpc_port = free_port()
        self.control_port = free_port()
        self.process: subprocess.Popen | None = None

    def start(self) -> "Upstream":
        self.process = subprocess.Popen(
            [str(UPSTREAM_BIN), "--grpc", f"127.0.0.1:{self.grpc_port}", "--control", f"127.0.0.1:{self.control_port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(lambda: self.calls() is not None, "demo upstream", process=self.process)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    @property
    def control_url(self) -> str:
        return f"http://127.0.0.1:{self.control_port}"

    def calls(self) -> dict[str, int]:
        return httpx2.get(f"{self.control_url}/calls", timeout=2).raise_for_status().json()

    def total_calls(self) -> int:
        return sum(self.calls().values())

    def reset(self) -> None:
        httpx2.post(f"{self.control_url}/reset", timeout=2).raise_for_status()

    def delay(self, ms: int) -> None:
        """Delays every later gRPC answer by `ms` milliseconds (until reset)."""
        httpx2.post(f"{self.control_url}/delay", params={"ms": ms}, timeout=2).raise_for_status()


def demo_config() -> dict[str, Any]:
    return yaml.safe_load(DEMO_CONFIG.read_text())


def switchblade_filter(config: dict[str, Any]) -> dict[str, Any]:
    listener = config["static_resources"]["listeners"][0]
    manager = listener["filter_chains"][0]["filters"][0]["typed_config"]
    return next(f for f in manager["http_filters"] if f["name"] == "switchblade")["typed_config"]["config"]


def plugin_config(config: dict[str, Any]) -> dict[str, Any]:
    return json.loads(switchblade_filter(config)["configuration"]["value"])


def set_plugin_config(config: dict[str, Any], plugin: dict[str, Any] | str) -> None:
    value = plugin if isinstance(plugin, str) else json.dumps(plugin)
    switchblade_filter(config)["configuration"]["value"] = value


class Envoy:
    """A real Envoy running a copy of envoy/demo.yaml on free ports, pointed at an upstream."""

    def __init__(self, upstream: Upstream, config: dict[str, Any] | None = None, name: str = "envoy") -> None:
        self.upstream = upstream
        self.port = free_port()
        self.admin_port = free_port()
        self.config = copy.deepcopy(config) if config is not None else demo_config()
        self.name = name
        self.log_path = WORK / f"{name}-{self.port}.log"
        self.config_path = WORK / f"{name}-{self.port}.yaml"
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
        switchblade_filter(config)["vm_config"]["code"]["local"]["filename"] = str(WASM)

    def command(self) -> list[str]:
        return [
            str(ENVOY_BIN),
            "-c", str(self.config_path),
            "--disable-hot-restart",
            "--concurrency", "1",
            "--log-level", "warn",
            "--component-log-level", "wasm:info",
        ]

    def start(self, wait: bool = True) -> "Envoy":
        WORK.mkdir(exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(self.config))
        self.log = self.log_path.open("w")
        self.process = subprocess.Popen(self.command(), stdout=self.log, stderr=subprocess.STDOUT)
        if wait:
            wait_until(self.is_ready, f"envoy (log: {self.log_path})", process=self.process)
        return self

    def is_ready(self) -> bool:
        return httpx2.get(f"{self.admin_url}/ready", timeout=1).status_code == 200

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
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
        body = self.request("tools/call", {"name": name, "arguments": arguments})
        assert "result" in body, body
        return body["result"]

    def tools(self) -> dict[str, dict[str, Any]]:
        return {tool["name"]: tool for tool in self.request("tools/list")["result"]["tools"]}

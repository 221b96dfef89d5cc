"""A service whose message tree is exponential (16 messages, each holding four fields of the
next, as the demo upstream's `--api deep` describes `deep.v1.Deep`): written out in full, its
schemas would hold 4^15 copies of the last message, and building them blocked Envoy's main
thread. Its schemas write each message once under `$defs`, so the catalog builds at once,
through live reflection or from a descriptor set in the plugin configuration, and Envoy's admin
`/ready` keeps answering while it does."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import httpx2
import jsonschema
import pytest

from mcp_client import Mcp
from processes import CLI_BIN, REPO, Envoy, Upstream, wait_until

DEEP = "deep.v1.Deep"
USERS = "demo.users.v1.UserService"
LEVELS = 16
# Far more than the build takes now; without the shared layout it never finished.
PATIENCE_S = 15


@pytest.fixture(scope="module")
def deep_upstream():
    """The full demo API, plus deep.v1.Deep in its reflection (not implemented: calls answer
    UNIMPLEMENTED)."""
    server = Upstream(args=["--api", "deep"]).start()
    yield server
    server.stop()


@pytest.fixture
def envoys():
    started: list[Envoy] = []

    def start(upstream: Upstream, plugin: dict, name: str, wait: bool = True) -> Envoy:
        proxy = Envoy(upstream, plugin=plugin, name=name)
        started.append(proxy)
        return proxy.start(wait=wait)
    yield start
    for proxy in started:
        proxy.stop()


class ReadyWatch:
    """Asks Envoy's admin `/ready` every 50 ms on a thread of its own, each time allowing
    `ASK_S` for the answer, and keeps what each ask got after the first 200 (until then Envoy
    is starting, and with the Wasm build its admin answers slowly while V8 compiles the
    filter)."""

    ASK_S = 2

    def __init__(self, envoy: Envoy) -> None:
        self.envoy = envoy
        self.ready = False
        self.answers: list[str] = []
        self.slowest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                answer = str(httpx2.get(f"{self.envoy.admin_url}/ready", timeout=self.ASK_S).status_code)
            except httpx2.HTTPError as error:
                answer = type(error).__name__
            if self.ready:
                self.answers.append(answer)
                self.slowest = max(self.slowest, time.monotonic() - started)
            self.ready = self.ready or answer == "200"
            self._stop.wait(0.05)

    def __enter__(self) -> "ReadyWatch":
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def check_shared(tool: dict) -> None:
    """Both schemas write Level1 … Level15 once each under `$defs`, and are valid JSON Schema."""
    levels = sorted(f"deep.v1.Level{level}" for level in range(1, LEVELS))
    for side in ("inputSchema", "outputSchema"):
        schema = tool[side]
        jsonschema.Draft202012Validator.check_schema(schema)
        assert {name: schema["properties"][name] for name in "abcd"} == {
            name: {"$ref": "#/$defs/deep.v1.Level1"} for name in "abcd"}
        assert sorted(schema["$defs"]) == levels
        last = schema["$defs"][f"deep.v1.Level{LEVELS - 1}"]
        assert last["properties"] == {"value": {"type": "string"}}
    assert len(json.dumps(tool)) < 20_000


def nested(levels: int) -> dict:
    """Arguments `levels` messages deep along `a`, with an empty `d` beside each `a`."""
    value: dict = {"value": "leaf"}
    for _ in range(levels - 1):
        value = {"a": value, "d": {}}
    return value


def check_calls(mcp: Mcp) -> None:
    """The gate reads arguments of the shared schema's shape to the last level, and refuses an
    unknown field deep inside; the upstream does not implement the method."""
    result = mcp.call_tool("Deep_Grow", nested(LEVELS))
    assert result["isError"] is True
    assert "UNIMPLEMENTED (12)" in result["content"][0]["text"], result
    arguments = nested(LEVELS)
    arguments["a"]["a"]["d"]["typo"] = 1
    refused = mcp.call_tool("Deep_Grow", arguments)
    assert refused["isError"] is True
    assert "at `a.a.d`: unknown field `typo`; deep.v1.Level3 has: a, b, c, d." in refused["content"][0]["text"], refused


def test_a_reflected_exponential_tree_is_served_shared_while_envoy_stays_ready(deep_upstream, envoys) -> None:
    envoy = envoys(deep_upstream, {
        "services": {
            USERS: {"cluster": "demo_grpc"},
            DEEP: {"cluster": "demo_grpc", "from_reflection": True},
        },
        "reflection": {"interval_ms": 1000},
    }, "envoy-deep-reflection", wait=False)
    mcp = Mcp(envoy.mcp_url)
    started = time.monotonic()
    # Watched from Envoy's start: reflection may be read before /ready first answers.
    with ReadyWatch(envoy) as watch:
        wait_until(envoy.is_ready, "envoy", process=envoy.process)
        ready = time.monotonic() - started
        wait_until(lambda: "Deep_Grow" in mcp.tools(), "the reflected deep tool", timeout=PATIENCE_S)
        listed = time.monotonic() - started
        # And a refresh more (which reads reflection again, and finds it unchanged).
        time.sleep(1.5)
    print(f"Envoy ready after {ready:.2f} s, the deep tool listed after {listed:.2f} s; "
          f"slowest /ready answer {watch.slowest:.3f} s of {len(watch.answers)}")
    assert len(watch.answers) > 5 and set(watch.answers) == {"200"}, watch.answers
    assert watch.slowest < ReadyWatch.ASK_S
    assert "gRPC server reflection: serving 2 tools (before: 1)" in envoy.logs()
    check_shared(mcp.tools()["Deep_Grow"])
    check_calls(mcp)


def test_an_exponential_tree_in_the_configured_descriptor_set_is_served_shared(deep_upstream, envoys, tmp_path) -> None:
    # The descriptor set as `switchblade config --reflect` writes it from the upstream.
    run = subprocess.run(
        [str(CLI_BIN), "config", "--reflect", f"127.0.0.1:{deep_upstream.grpc_port}", f"--service={DEEP}=demo_grpc"],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    plugin = json.loads(run.stdout)
    assert "descriptor_set" in plugin and "from_reflection" not in plugin["services"][DEEP]
    # What the CLI shows is what Envoy serves.
    path = tmp_path / "plugin.json"
    path.write_text(run.stdout)
    dry_run = subprocess.run([str(CLI_BIN), "tools", str(path)], capture_output=True, text=True, timeout=60)
    assert dry_run.returncode == 0, dry_run.stderr

    started = time.monotonic()
    envoy = envoys(deep_upstream, plugin, "envoy-deep-set")
    took = time.monotonic() - started
    print(f"Envoy ready {took:.2f} s after it started")
    assert took < PATIENCE_S
    mcp = Mcp(envoy.mcp_url)
    listed = mcp.request("tools/list")["result"]["tools"]
    assert listed == json.loads(dry_run.stdout)["tools"]
    assert [tool["name"] for tool in listed] == ["Deep_Grow"]
    check_shared(listed[0])
    check_calls(mcp)
    assert envoy.is_ready()

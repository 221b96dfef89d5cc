"""What an operator sees: per-tool stats in a real Prometheus (the shipped scrape configuration
and rules), the MCP facts in Envoy's JSON access log, and the trace context at the upstream.

One Envoy of its own, so that every count is exact; the same tests for either build."""

from __future__ import annotations

import json
import re
import subprocess
import uuid

import httpx2
import pytest
import yaml

import filter_build
from filter_build import demo_plugin
from processes import CLI_BIN, PROMETHEUS_BIN, PROMETHEUS_CONFIG, REPO, Envoy, Prometheus, Upstream, wait_until

VERSION = "2025-06-18"
HEADERS = {"content-type": "application/json", "accept": "application/json", "mcp-protocol-version": VERSION}
GET_USER = "/demo.users.v1.UserService/GetUser"
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
# Every upstream answer waits this long, so that the latency histogram has something to show.
DELAY_MS = 60

# promtool comes with Prometheus, beside it.
PROMTOOL = PROMETHEUS_BIN.replace("prometheus", "promtool") if PROMETHEUS_BIN else "promtool"

needs_prometheus = pytest.mark.skipif(
    PROMETHEUS_BIN is None, reason="Prometheus is not installed (scripts/test installs Debian's prometheus)"
)


# An argument name a client chose to break a log line, and to make it long.
HOSTILE_KEY = '\n{"forged":"entry"}\u001b[2J' + "k" * 400


def call(envoy: Envoy, tool: str, arguments: dict | str, headers: dict[str, str] | None = None) -> httpx2.Response:
    arguments_json = arguments if isinstance(arguments, str) else json.dumps(arguments)
    body = (f'{{"jsonrpc":"2.0","id":1,"method":"tools/call",'
            f'"params":{{"name":"{tool}","arguments":{arguments_json}}}}}')
    return httpx2.post(envoy.mcp_url, content=body, headers={**HEADERS, **(headers or {})}, timeout=10)


class Observed:
    """The Envoy and Prometheus of this module, after the known requests below."""

    def __init__(self, envoy: Envoy, prometheus: Prometheus | None, request_ids: dict[str, str]) -> None:
        self.envoy = envoy
        self.prometheus = prometheus
        self.request_ids = request_ids


@pytest.fixture(scope="module")
def observed(upstream: Upstream):
    plugin = demo_plugin()
    plugin["services"]["test.kitchensink.v1.KitchenSinkService"] = {"cluster": "demo_grpc"}
    envoy = Envoy(upstream, plugin, name="observed").start()
    prometheus = Prometheus(envoy).start() if PROMETHEUS_BIN else None
    upstream.reset()
    upstream.delay(DELAY_MS)
    request_ids: dict[str, str] = {}

    def tagged(kind: str) -> dict[str, str]:
        request_ids[kind] = str(uuid.uuid4())
        return {"x-request-id": request_ids[kind]}

    try:
        for _ in range(3):
            assert call(envoy, "UserService_GetUser", {"user_id": 1}, tagged("success")).json()["result"]["isError"] is False
        for _ in range(2):
            assert call(envoy, "UserService_GetUser", {"user_id": 99}, tagged("not_found")).json()["result"]["isError"]
        refused = call(envoy, "UserService_GetUser", '{"user_id":{"$ne":null}}', tagged("injection")).json()
        assert "Invalid arguments" in refused["result"]["content"][0]["text"]
        hostile = call(envoy, "KitchenSinkService_Echo", {"must": "x", "by_name": {HOSTILE_KEY: 1}},
                       tagged("hostile_key")).json()
        assert hostile["result"]["isError"] is True
        for _ in range(2):
            assert call(envoy, "CatalogService_GetItem", {"id": "1"}).json()["result"]["isError"] is False
        assert call(envoy, "Made_Up_Tool", {}).json()["error"]["code"] == -32602
        listed = httpx2.post(envoy.mcp_url, content='{"jsonrpc":"2.0","id":2,"method":"tools/list"}', headers=HEADERS)
        assert listed.status_code == 200
        plain = {**HEADERS, "content-type": "text/plain", **tagged("refusal")}
        assert httpx2.post(envoy.mcp_url, content="{}", headers=plain).status_code == 415
        yield Observed(envoy, prometheus, request_ids)
    finally:
        upstream.reset()
        if prometheus is not None:
            prometheus.stop()
        envoy.stop()


def by_labels(samples: list[dict], *names: str) -> dict[tuple[str, ...], float]:
    return {tuple(sample["labels"].get(name, "") for name in names): sample["value"] for sample in samples}


def eventually(prometheus: Prometheus, promql: str, names: tuple[str, ...], expected: dict) -> None:
    """Waits until the query answers exactly `expected` (scrapes come every second; Envoy shows
    histograms after its 5-second flush). Queries keep the series above 0: the module defines
    its most used series up front."""
    seen: list[dict] = []

    def matches() -> bool:
        seen[:] = [by_labels(prometheus.query(promql), *names)]
        return seen[0] == expected

    try:
        wait_until(matches, f"Prometheus: {promql}", timeout=30)
    except (AssertionError, TimeoutError) as error:
        raise AssertionError(f"{promql} answered {seen[0] if seen else None}, expected {expected}") from error


@needs_prometheus
def test_prometheus_counts_each_call_by_tool_and_status(observed: Observed) -> None:
    prometheus = observed.prometheus
    eventually(prometheus, "sum by (tool, grpc_status) (switchblade_tool_calls) > 0", ("tool", "grpc_status"), {
        ("UserService_GetUser", "OK"): 3,
        ("UserService_GetUser", "NOT_FOUND"): 2,
        ("UserService_GetUser", "INVALID_ARGUMENT"): 1,
        ("KitchenSinkService_Echo", "INVALID_ARGUMENT"): 1,
        ("CatalogService_GetItem", "OK"): 2,
    })
    # A tool the catalog does not have made no series. (The module defines each tool's success
    # series up front, at 0: only those that counted something are compared.)
    assert by_labels(prometheus.query("count by (outcome) (switchblade_tool_calls > 0)"), "outcome") == {
        ("success",): 2, ("tool_error",): 1, ("invalid_arguments",): 2,
    }
    eventually(prometheus, "sum by (method, protocol_version) (switchblade_requests) > 0", ("method", "protocol_version"), {
        ("tools/call", VERSION): 10,
        ("tools/list", VERSION): 1,
    })
    eventually(prometheus, "sum by (reason) (switchblade_http_refusals) > 0", ("reason",), {("unsupported_media_type",): 1})


@needs_prometheus
def test_the_readmes_queries_answer(observed: Observed) -> None:
    prometheus = observed.prometheus
    # Which tool fails most.
    eventually(prometheus, 'topk(1, sum by (tool) (switchblade_tool_calls{outcome!="success"}))', ("tool",), {
        ("UserService_GetUser",): 3,
    })
    # The p99 of each tool's upstream time: every answer waited DELAY_MS, so each falls in
    # Envoy's (50, 100] ms bucket.
    quantile = "histogram_quantile(0.99, sum by (tool, le) (switchblade_tool_upstream_ms_bucket)) > 0"
    wait_until(lambda: len(prometheus.query(quantile)) == 2, f"Prometheus: {quantile}", timeout=30)
    p99 = by_labels(prometheus.query(quantile), "tool")
    assert set(p99) == {("UserService_GetUser",), ("CatalogService_GetItem",)}
    assert all(50 < value <= 100 for value in p99.values()), p99
    # The upstream time of calls that were sent: 5 to GetUser (the refused one was not).
    eventually(prometheus, "sum by (tool) (switchblade_tool_upstream_ms_count) > 0", ("tool",), {
        ("UserService_GetUser",): 5, ("CatalogService_GetItem",): 2,
    })


@needs_prometheus
def test_the_shipped_rules_run_in_prometheus(observed: Observed) -> None:
    prometheus = observed.prometheus
    wait_until(lambda: all(rule["health"] == "ok" for rule in prometheus.rules()) and
               all(rule.get("lastEvaluation", "").startswith("2") for rule in prometheus.rules()),
               "the rules evaluated", timeout=30)
    names = {rule["name"] for rule in prometheus.rules()}
    assert names == {
        "tool_outcome:switchblade_tool_calls:rate5m",
        "tool:switchblade_tool_calls:error_ratio_rate5m",
        "tool:switchblade_tool_upstream_ms:p99_rate5m",
        "SwitchbladeToolErrorRatioHigh",
        "SwitchbladeToolSlow",
    }
    assert all(not rule.get("lastError") for rule in prometheus.rules())


@needs_prometheus
def test_promtool_checks_and_tests_the_rules() -> None:
    folder = PROMETHEUS_CONFIG.parent
    for command in (["check", "config", "prometheus.yml"],
                    ["check", "rules", "switchblade.rules.yml"],
                    ["test", "rules", "switchblade.rules.test.yml"]):
        result = subprocess.run([PROMTOOL, *command], cwd=folder, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, f"promtool {' '.join(command)}:\n{result.stdout}{result.stderr}"


DASHBOARD = REPO / "deploy/grafana/switchblade.json"
# The dashboard's panels whose series this module's requests produce, in either build: each must
# show data. The others (rate limits, tasks, reflection, and the Wasm VM's memory under the
# module) must still be queries Prometheus runs, over stats Switchblade documents.
PANELS_WITH_DATA = {
    "Calls per second, by tool and outcome", "Share of calls that failed, by tool", "Upstream time, p99, by tool",
    "Failures by gRPC status", "Arguments refused at the gate, by tool",
    "Requests refused before JSON-RPC, by reason", "JSON-RPC requests, by method and protocol version",
}


@needs_prometheus
def test_every_panel_of_the_grafana_dashboard_is_a_query_prometheus_answers(observed: Observed) -> None:
    """deploy/grafana/switchblade.json: each panel's query, with Grafana's variables given
    values, run by promtool against the Prometheus that scrapes this module's Envoy."""
    dashboard = json.loads(DASHBOARD.read_text())
    documented = set(re.findall(r"^\| `(switchblade_\w+)` \|", (REPO / "docs/observability.md").read_text(), re.MULTILINE))
    targets = [(panel["title"], target["expr"]) for panel in dashboard["panels"] for target in panel.get("targets", [])]
    assert {title for title, _ in targets} >= PANELS_WITH_DATA
    with_data = PANELS_WITH_DATA | ({"Wasm VM memory"} if filter_build.current() is filter_build.WASM else set())

    def answer(expr: str) -> list:
        run = subprocess.run([PROMTOOL, "query", "instant", "-o", "json", observed.prometheus.url, expr],
                             capture_output=True, text=True, timeout=30)
        assert run.returncode == 0, f"promtool query instant {expr}:\n{run.stdout}{run.stderr}"
        return json.loads(run.stdout)

    for title, expr in targets:
        metrics = {name.removesuffix("_bucket") for name in re.findall(r"\b(switchblade_\w+)", expr)}
        assert metrics and metrics <= documented, (title, metrics - documented)
        concrete = expr.replace("$__rate_interval", "1m").replace("$tool", ".+")
        if title in with_data:
            wait_until(lambda: len(answer(concrete)) > 0, f"the panel {title!r} shows data: {concrete}", timeout=30)
        else:
            answer(concrete)


def test_stat_names_carry_labels_not_tools(observed: Observed) -> None:
    """`/stats/prometheus` has one series name per stat, the tool a label of it."""
    text = httpx2.get(f"{observed.envoy.admin_url}/stats/prometheus", timeout=5).text
    names = {line.split("{")[0] for line in text.splitlines() if "switchblade_tool_calls{" in line}
    assert names <= {"switchblade_tool_calls", "envoy_switchblade_tool_calls"} and len(names) == 1, names
    assert any('tool="UserService_GetUser"' in line and 'grpc_status="NOT_FOUND"' in line
               and 'outcome="tool_error"' in line for line in text.splitlines())
    assert "Made_Up_Tool" not in text


def access_log(envoy: Envoy, request_ids: dict[str, str]) -> dict[str, dict]:
    """The access-log entry of each tagged request, by kind, once all are written."""
    entries: dict[str, dict] = {}

    def read() -> bool:
        lines = envoy.access_log_path.read_text().splitlines() if envoy.access_log_path.exists() else []
        for line in lines:
            entry = json.loads(line)
            for kind, request_id in request_ids.items():
                if entry.get("request_id") == request_id:
                    entries[kind] = entry
        return set(entries) == set(request_ids)

    wait_until(read, f"the access log ({envoy.access_log_path})", timeout=15)
    return entries


def test_the_access_log_has_the_mcp_facts(observed: Observed) -> None:
    entries = access_log(observed.envoy, observed.request_ids)
    common = {"mcp_method": "tools/call", "mcp_protocol_version": VERSION, "tool": "UserService_GetUser"}
    assert entries["success"] | common == entries["success"]
    assert (entries["success"]["outcome"], entries["success"]["grpc_status"], entries["success"]["status"]) == (
        "success", "OK", 200)
    assert (entries["not_found"]["outcome"], entries["not_found"]["grpc_status"]) == ("tool_error", "NOT_FOUND")
    injection = entries["injection"]
    assert (injection["outcome"], injection["grpc_status"], injection["refused_path"]) == (
        "invalid_arguments", "INVALID_ARGUMENT", "user_id")
    refusal = entries["refusal"]
    assert (refusal["refusal"], refusal["status"], refusal["tool"]) == ("unsupported_media_type", 415, None)
    # A client's argument name is escaped (one line, whatever the log's format) and cut.
    escaped = HOSTILE_KEY.replace("\n", "\\n").replace('"', '\\"').replace("\u001b", "\\u{1b}")
    assert entries["hostile_key"]["refused_path"] == ("by_name." + escaped)[:256] + "…"


def test_the_trace_context_reaches_the_upstream(observed: Observed, upstream: Upstream) -> None:
    envoy = observed.envoy
    trace = {"traceparent": TRACEPARENT, "tracestate": "vendor=opaque"}
    assert call(envoy, "UserService_GetUser", {"user_id": 2}, trace).status_code == 200
    metadata = upstream.metadata(GET_USER)
    assert (metadata.get("traceparent"), metadata.get("tracestate")) == (TRACEPARENT, "vendor=opaque")
    # Turned off, it stays at the edge.
    assert envoy.swap_plugin({**demo_plugin(), "forward_trace_context": False})
    try:
        assert call(envoy, "UserService_GetUser", {"user_id": 2}, trace).status_code == 200
        metadata = upstream.metadata(GET_USER)
        assert "traceparent" not in metadata and "tracestate" not in metadata, metadata
    finally:
        assert envoy.swap_plugin(demo_plugin())


def stats_tags(config: dict) -> list[dict]:
    return config.get("stats_config", {}).get("stats_tags", [])


def test_every_bootstrap_ships_the_tag_extraction_the_cli_prints() -> None:
    printed = subprocess.run(
        [str(CLI_BIN), "config", "-I", "proto", "demo/users/v1/users.proto",
         "--service", "demo.users.v1.UserService=demo_grpc", "--format", "envoy"],
        cwd=REPO, capture_output=True, text=True, check=True, timeout=60,
    ).stdout
    expected = stats_tags(yaml.safe_load(printed[printed.index("\nstats_config:"):]))
    assert [tag["tag_name"] for tag in expected] == [
        "tool", "outcome", "grpc_status", "method", "protocol_version", "reason"]
    for path in sorted((REPO / "envoy").glob("*.yaml")):
        assert stats_tags(yaml.safe_load(path.read_text())) == expected, path.name

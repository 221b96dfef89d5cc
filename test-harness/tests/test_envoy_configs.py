"""Every Envoy config in envoy/ validates, the bootstraps `switchblade config --format envoy`
and `--format module` print validate and serve tool calls as printed, and Envoy refuses a bad
plugin configuration, at validation, at start and on a reload, with a log line that names the
key at fault."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx2
import pytest

import filter_build
from filter_build import MODULE, demo_plugin
from mcp_client import Mcp
from processes import CLI_BIN, ENVOY_BIN, REPO, Envoy, Upstream, static_bootstrap
import yaml

CONFIGS = sorted((REPO / "envoy").glob("*.yaml"))


def validate(config_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ENVOY_BIN), "--mode", "validate", "-c", str(config_path), "--disable-hot-restart"],
        cwd=REPO,
        # envoy/module.yaml loads the dynamic module from its search path, whichever build runs.
        env={**os.environ, **MODULE.environment()},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_there_are_configs_to_check() -> None:
    assert {p.name for p in CONFIGS} >= {"demo.yaml", "docker.yaml", "module.yaml"}
    # Each loads one build, which test_envoy_validates finds, and is validated in its session alone.
    assert {p.name: len(builds_loaded(p)) for p in CONFIGS} == {p.name: 1 for p in CONFIGS}


@pytest.fixture(scope="module", autouse=True)
def demo_ecds_file():
    """envoy/demo.yaml reads its filter configuration from .work/ecds, as scripts/demo seeds it."""
    ecds = REPO / ".work/ecds"
    ecds.mkdir(parents=True, exist_ok=True)
    # Written beside and renamed: the other build's session may be reading it.
    written = ecds / f".switchblade.yaml.{os.getpid()}"
    written.write_text((REPO / "envoy/ecds/demo.yaml").read_text())
    written.replace(ecds / "switchblade.yaml")


def builds_loaded(config: Path) -> list[str]:
    """The builds of the filter a config loads, by the typed_config it names."""
    text = config.read_text()
    return [name for name, build in filter_build.BUILDS.items() if build.type_url in text]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_envoy_validates(config) -> None:
    loaded = builds_loaded(config)
    if loaded and filter_build.current().name not in loaded:
        # Validating a Wasm config compiles the .wasm (V8, seconds of CPU) whichever session asks.
        pytest.skip(f"{config.name} loads the {' and '.join(loaded)} build; it is validated in that build's session")
    result = validate(config)
    assert result.returncode == 0, result.stdout + result.stderr
    if "config_discovery" not in config.read_text():
        # A static filter configuration is loaded and checked by the filter itself.
        assert "serving 3 tools at /mcp" in result.stdout + result.stderr


def test_envoy_loads_the_module_with_its_own_abi_version() -> None:
    """Envoy 1.40 logs whether a module was built against its ABI version; it loads one that
    was not and only says so, which for this module would be a defect."""
    result = validate(REPO / "envoy/module.yaml")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Dynamic module ABI version v0.2.0 matched." in output, output


def test_the_demo_filter_configuration_validates(tmp_path: Path) -> None:
    """envoy/ecds/demo.yaml is only read at run time; check it through a static bootstrap."""
    path = tmp_path / "demo-static.yaml"
    path.write_text(yaml.safe_dump(static_bootstrap(demo_plugin())))
    result = validate(path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "serving 3 tools at /mcp" in result.stdout + result.stderr


USERS = "demo.users.v1.UserService"
CATALOG = "demo.catalog.v1.CatalogService"


# What `switchblade config` prints for Envoy: the Wasm filter's bootstrap (`--format envoy`)
# or the module's (`--format module`), whichever build this session runs.

def printed_bootstrap(*extra: str) -> str:
    flavour = "module" if filter_build.current().name == "module" else "envoy"
    return subprocess.run(
        [str(CLI_BIN), "config", "-I", "proto", "demo/catalog/v1/catalog.proto", "demo/users/v1/users.proto",
         "--service", f"{CATALOG}=demo_grpc", "--service", f"{USERS}=demo_grpc", "--format", flavour, *extra],
        cwd=REPO, capture_output=True, text=True, check=True, timeout=60,
    ).stdout


def test_the_bootstrap_the_cli_prints_validates(tmp_path) -> None:
    path = tmp_path / "printed.yaml"
    path.write_text(printed_bootstrap())
    result = validate(path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "serving 3 tools at /mcp" in output, output


def test_the_bootstrap_the_cli_prints_serves_tool_calls(upstream: Upstream) -> None:
    """Run as printed, but for its ports (the listener's, the admin's, the cluster's) and the
    .wasm's path (absolute, as the test's Envoy runs elsewhere)."""
    bootstrap = yaml.safe_load(printed_bootstrap())
    proxy = Envoy(upstream, bootstrap=bootstrap, name="envoy-printed").start()
    try:
        upstream.reset()
        mcp = Mcp(proxy.mcp_url)
        assert sorted(mcp.tools()) == ["CatalogService_GetItem", "CatalogService_Search", "UserService_GetUser"]
        user = mcp.call_tool("UserService_GetUser", {"user_id": 1})
        assert user["structuredContent"]["username"] == "ada"
        assert upstream.calls() == {f"/{USERS}/GetUser": 1}
        if filter_build.current().name == "module":
            # The routed-call route is the module's alone: a client that sends its header is
            # refused, on the MCP path (403) and as a gRPC call of its own (PERMISSION_DENIED),
            # and nothing reaches the upstream.
            sneaked = httpx2.post(proxy.mcp_url, headers={"x-switchblade-cluster": "demo_grpc"},
                                  json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=5)
            assert sneaked.status_code == 403, sneaked.text
            sneaked = httpx2.post(f"{proxy.url}/{USERS}/GetUser", content=b"\0\0\0\0\0", timeout=5,
                                  headers={"x-switchblade-cluster": "demo_grpc", "content-type": "application/grpc"})
            assert sneaked.headers.get("grpc-status") == "7", (sneaked.status_code, sneaked.headers)
            assert upstream.calls() == {f"/{USERS}/GetUser": 1}
    finally:
        proxy.stop()


ALLOWED_ORIGIN = "http://app.example.test:8080"
FOREIGN_ORIGIN = "http://evil.example.test"


def test_with_allowed_origins_the_printed_bootstrap_lets_those_browsers_in(upstream: Upstream) -> None:
    """`--allowed-origin`: Envoy's CORS filter answers an allowed origin's preflight with the MCP
    headers allowed and the session id exposed, and marks its answers; another origin's
    preflight gets no permission and its POST is refused (403); nothing refused is sent."""
    bootstrap = yaml.safe_load(printed_bootstrap("--allowed-origin", ALLOWED_ORIGIN))
    proxy = Envoy(upstream, bootstrap=bootstrap, name="envoy-cors").start()
    try:
        upstream.reset()

        def preflight(origin: str) -> httpx2.Response:
            return httpx2.options(proxy.mcp_url, timeout=5, headers={
                "origin": origin, "access-control-request-method": "POST",
                "access-control-request-headers": "content-type, mcp-protocol-version, mcp-session-id"})

        allowed = preflight(ALLOWED_ORIGIN)
        assert allowed.status_code == 200, allowed.text
        assert allowed.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
        assert "POST" in allowed.headers["access-control-allow-methods"]
        granted = {name.strip() for name in allowed.headers["access-control-allow-headers"].split(",")}
        assert {"content-type", "mcp-protocol-version", "mcp-session-id", "authorization"} <= granted
        foreign = preflight(FOREIGN_ORIGIN)
        assert "access-control-allow-origin" not in foreign.headers, foreign.headers

        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "UserService_GetUser", "arguments": {"user_id": 1}}}
        headers = {"accept": "application/json, text/event-stream"}
        answered = httpx2.post(proxy.mcp_url, json=body, timeout=5, headers={**headers, "origin": ALLOWED_ORIGIN})
        assert answered.json()["result"]["structuredContent"]["username"] == "ada"
        assert answered.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
        assert "mcp-session-id" in answered.headers["access-control-expose-headers"]
        refused = httpx2.post(proxy.mcp_url, json=body, timeout=5, headers={**headers, "origin": FOREIGN_ORIGIN})
        assert refused.status_code == 403, refused.text
        assert "access-control-allow-origin" not in refused.headers
        assert upstream.calls() == {f"/{USERS}/GetUser": 1}
    finally:
        proxy.stop()


def services(**extra) -> str:
    """A plugin configuration exposing the catalog service with `extra` settings."""
    return json.dumps({"services": {CATALOG: {"cluster": "demo_grpc", **extra}}})


BAD_PLUGIN_CONFIGS = [
    ("", "the plugin configuration is empty"),
    ("{", "the configuration is not valid JSON for this filter: EOF while parsing an object at line 1 column 1"),
    ('{"services": {}}', "at `services`: no services"),
    (json.dumps({"services": {USERS: {"clustr": "x"}}}), f"at `services.{USERS}.clustr`: unknown field `clustr`"),
    (json.dumps({"services": {USERS: {}}}), f"at `services.{USERS}`: missing field `cluster`"),
    (json.dumps({"services": {"demo.users.v1.Nope": {"cluster": "demo_grpc"}}}),
     "at `services.demo.users.v1.Nope`: service demo.users.v1.Nope is not in the descriptor set; known services: "),
    (json.dumps({"mcp_path": "mcp", "services": {USERS: {"cluster": "demo_grpc"}}}), "at `mcp_path`"),
    # Exposure policy: every mistake is refused with the key and the fix.
    (services(expose="selected", methods=[f"{CATALOG}/Nope"]),
     f"at `services.{CATALOG}.methods[0]`: service {CATALOG} has no method Nope; its methods: Search, GetItem, WatchItems, ImportItems"),
    (services(expose="selected", methods=["GetItem"]), f"at `services.{CATALOG}.methods[0]`: \"GetItem\" is not a method selector"),
    (services(expose="selected", methods=[f"{CATALOG}/GetItem", f"{CATALOG}/GetItem"]),
     f"at `services.{CATALOG}.methods[1]`: {CATALOG}/GetItem is listed twice"),
    (services(max_messages=0), f"at `services.{CATALOG}.max_messages`: must be greater than 0"),
    (services(expose="selected"), f"at `services.{CATALOG}.methods`: `expose: selected` needs the methods"),
    (json.dumps({"services": {CATALOG: {"cluster": "demo_grpc"}, USERS: {"cluster": "demo_grpc"}},
                 "tools": {f"{USERS}/GetUser": {"name": "CatalogService_Search"}}}),
     f"{USERS}/GetUser would be tool \"CatalogService_Search\", which {CATALOG}/Search already is; tool names must be unique"),
    (json.dumps({"services": {USERS: {"cluster": "demo_grpc"}}, "tools": {f"{USERS}/GetUser": {"name": "get user"}}}),
     f"at `tools.{USERS}/GetUser.name`: tool name \"get user\" for {USERS}/GetUser is not 1-64 characters of [A-Za-z0-9_-]"),
    (json.dumps({"services": {USERS: {"cluster": "demo_grpc"}}, "tools": {f"{CATALOG}/GetItem": {"title": "x"}}}),
     f"at `tools.{CATALOG}/GetItem`: {CATALOG}/GetItem is not an exposed method"),
    (json.dumps({"services": {CATALOG: {"cluster": "demo_grpc"}},
                 "tools": {f"{CATALOG}/GetItem": {"metadata": {"x-item": "{nope}"}}}}),
     f"at `tools.{CATALOG}/GetItem.metadata.x-item`: {{nope}}: demo.catalog.v1.GetItemRequest has no field \"nope\""),
    (json.dumps({"services": {CATALOG: {"cluster": "demo_grpc"}}, "discovery": "search",
                 "tools": {f"{CATALOG}/GetItem": {"name": "search_tools"}}}),
     "at `discovery_tools`: a tool is named \"search_tools\", the name of one of discovery's own tools"),
    (json.dumps({"services": {USERS: {"cluster": "demo_grpc"}}, "forward_headers": ["Authorization"]}),
     "at `forward_headers[0]`: \"Authorization\" is not a lowercase header name"),
    (json.dumps({"descriptor_set": "not base64!", "services": {USERS: {"cluster": "demo_grpc"}}}), "at `descriptor_set`: not base64"),
    (json.dumps({"services": {USERS: {"cluster": "demo_grpc"}}, "forward_headers": ["x-envoy-max-retries"]}),
     "at `forward_headers[0]`: \"x-envoy-max-retries\" is an Envoy control header (x-envoy-*): Envoy's router acts on it, "
     "so it cannot be forwarded or set"),
    (json.dumps({"services": {USERS: {"cluster": "demo_grpc"}}, "limits": {"max_batch_size": 0}}),
     "at `limits.max_batch_size`: must be greater than 0"),
    # Rate limits (#26): each mistake names its rule and key.
    (json.dumps({"services": {USERS: {"cluster": "demo_grpc"}},
                 "limits": {"rules": [{"match": "*", "requests_per_second": 5}, {"match": f"{USERS}/DeleteUser", "max_in_flight": 2}]}}),
     f"at `limits.rules[1].match`: \"{USERS}/DeleteUser\" names no configured service and no exposed tool's method"),
    (json.dumps({"services": {USERS: {"cluster": "demo_grpc"}}, "limits": {"rules": [{"match": USERS, "requests_per_second": 0}]}}),
     "at `limits.rules[0].requests_per_second`: 0 is not a rate"),
    (json.dumps({"services": {USERS: {"cluster": "demo_grpc"}}, "limits": {"rules": [{"match": USERS, "requests_per_second": 2, "burst": 0}]}}),
     "at `limits.rules[0].burst`: must be at least 1"),
    (json.dumps({"services": {USERS: {"cluster": "demo_grpc"}}, "limits": {"rules": [{"match": USERS}]}}),
     "at `limits.rules[0]`: the rule limits nothing"),
    (json.dumps({"services": {USERS: {"cluster": "demo_grpc"}}, "limits": {"caller": {"claim": "sub"}}}),
     "at `limits.caller`: the claim \"sub\" is read from the verified token, and `authorization` (which reads the token) is not configured"),
    (json.dumps({"services": {USERS: {"cluster": "demo_grpc"}},
                 "limits": {"rate_limit_service": {"cluster": "ratelimit", "domain": "d", "failure_mode": "closed"}}}),
     "at `limits.rate_limit_service.failure_mode`: unknown variant `closed`, expected `allow` or `deny`"),
]


@pytest.mark.parametrize(("plugin", "expected"), BAD_PLUGIN_CONFIGS[:3])
def test_bad_plugin_config_is_refused_by_validation(plugin: str, expected: str, tmp_path: Path) -> None:
    path = tmp_path / "bad-plugin-config.yaml"
    path.write_text(yaml.safe_dump(static_bootstrap(plugin)))
    result = validate(path)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "invalid plugin configuration: " + expected in output, output


@pytest.fixture(scope="module")
def reloading(upstream: Upstream):
    """One Envoy that every bad configuration is offered to as a reload: a Wasm filter's
    validation costs a V8 compile of the .wasm (docs/benchmarks/scale-and-memory.md), a reload of the
    plugin's configuration none."""
    proxy = Envoy(upstream, name="envoy-bad-configs").start()
    yield proxy
    proxy.stop()


@pytest.mark.parametrize(("plugin", "expected"), BAD_PLUGIN_CONFIGS)
def test_bad_plugin_config_is_refused_by_a_reload(plugin: str, expected: str, reloading: Envoy) -> None:
    """The same refusal with the same words when an operator reloads the configuration, and
    the configuration before keeps serving."""
    logged = len(reloading.logs())
    assert reloading.swap_plugin(plugin) is False, reloading.logs()[logged:]
    assert "invalid plugin configuration: " + expected in reloading.logs()[logged:], reloading.logs()[logged:]
    assert Mcp(reloading.mcp_url).call_tool("UserService_GetUser", {"user_id": 2})["isError"] is False


def test_envoy_refuses_to_start_with_a_bad_plugin_config() -> None:
    upstream = Upstream()  # never started: Envoy must not get that far
    plugin = demo_plugin()
    plugin["services"]["demo.catalog.v1.CatalogService"]["cluster"] = ""
    envoy = Envoy(upstream, bootstrap=static_bootstrap(plugin), name="envoy-bad-config").start(wait=False)
    try:
        assert envoy.process.wait(timeout=30) != 0
    finally:
        envoy.stop()
    assert "invalid plugin configuration: at `services.demo.catalog.v1.CatalogService.cluster`: empty" in envoy.logs()

"""Every Envoy config in envoy/ validates, and Envoy refuses a bad plugin configuration
with a log line that names the key at fault."""

from __future__ import annotations

import subprocess

import pytest

from harness import ENVOY_BIN, REPO, WORK, Envoy, Upstream, demo_config, plugin_config, set_plugin_config
import yaml

CONFIGS = sorted((REPO / "envoy").glob("*.yaml"))


def validate(config_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ENVOY_BIN), "--mode", "validate", "-c", str(config_path), "--disable-hot-restart"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_there_are_configs_to_check() -> None:
    assert {p.name for p in CONFIGS} >= {"demo.yaml", "docker.yaml"}


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_envoy_validates(config) -> None:
    result = validate(config)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "serving 3 tools at /mcp" in result.stdout + result.stderr


BAD_PLUGIN_CONFIGS = [
    ("", "the plugin configuration is empty"),
    ("{", "the configuration is not valid JSON for this filter: EOF while parsing an object at line 1 column 1"),
    ('{"services": []}', "at `services`: the list is empty"),
    ('{"services": [{"name": "demo.users.v1.UserService", "clustr": "x"}]}', "at `services[0].clustr`: unknown field `clustr`"),
    ('{"services": [{"name": "demo.users.v1.UserService"}]}', "at `services[0]`: missing field `cluster`"),
    ('{"services": [{"name": "demo.users.v1.Nope", "cluster": "demo_grpc"}]}',
     "at `services[0].name`: service demo.users.v1.Nope is not in the descriptor set; known services: "),
    ('{"mcp_path": "mcp", "services": [{"name": "demo.users.v1.UserService", "cluster": "demo_grpc"}]}', "at `mcp_path`"),
]


@pytest.mark.parametrize(("plugin", "expected"), BAD_PLUGIN_CONFIGS)
def test_bad_plugin_config_is_refused_by_validation(plugin: str, expected: str) -> None:
    config = demo_config()
    set_plugin_config(config, plugin)
    WORK.mkdir(exist_ok=True)
    path = WORK / "bad-plugin-config.yaml"
    path.write_text(yaml.safe_dump(config))
    result = validate(path)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "invalid plugin configuration: " + expected in output, output


def test_envoy_refuses_to_start_with_a_bad_plugin_config() -> None:
    upstream = Upstream()  # never started: Envoy must not get that far
    config = demo_config()
    plugin = plugin_config(config)
    plugin["services"][0]["cluster"] = ""
    set_plugin_config(config, plugin)
    envoy = Envoy(upstream, config, name="envoy-bad-config").start(wait=False)
    try:
        assert envoy.process.wait(timeout=30) != 0
    finally:
        envoy.stop()
    assert "invalid plugin configuration: at `services[0].cluster`: empty" in envoy.logs()

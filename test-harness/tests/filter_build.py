"""How a build of the Switchblade filter is wired into an Envoy bootstrap.

There are two builds of the same core: the Wasm module run by Envoy's V8 runtime (`WASM`), and
the native dynamic module (`MODULE`). Everything that depends on a build (its typed_config, its
routes, its environment, how a test sees it survive) is here; `Envoy` takes whichever build the
test session runs (`scripts/test` runs the suite once per build: `pytest --build wasm|module`).
"""

from __future__ import annotations

import copy
import json
import os
import re
import time
from pathlib import Path
from typing import Any, Protocol

import yaml

_REPO = Path(__file__).resolve().parents[2]
# The demo's filter configuration: an ECDS resource holding a Wasm typed_config.
DEMO_ECDS = _REPO / "envoy/ecds/demo.yaml"


class FilterBuild(Protocol):
    """One build of the filter, as an Envoy bootstrap refers to it."""

    # Its name, as `pytest --build` takes it.
    name: str
    # What the build produces; the tests cannot run without it.
    binary: Path
    # The type of its typed_config, which an ECDS filter entry must list in its type_urls.
    type_url: str
    # Envoy's log component for the filter's own log lines, which some tests read.
    log_component: str

    def typed_config(self, plugin: dict[str, Any] | str) -> dict[str, Any]:
        """The filter's typed_config for a plugin configuration (a dict, or raw text)."""
        ...

    def adopt(self, typed_config: dict[str, Any]) -> dict[str, Any]:
        """What to run in place of a typed_config that a bootstrap (envoy/auth.yaml, the
        bench's) writes inline for the Wasm build, with a path relative to the repository."""
        ...

    def prepare(self, bootstrap: dict[str, Any]) -> None:
        """Changes a bootstrap the build needs changed (routes), in place."""
        ...

    def environment(self) -> dict[str, str]:
        """What Envoy's environment needs for the build."""
        ...

    def marks(self, stats: dict[str, int]) -> dict[str, int]:
        """What must not change while Envoy keeps serving: a test compares them before and after
        hostile input, and any change means the filter failed (a Wasm VM crashed and was
        recreated)."""
        ...


class WasmBuild:
    """The filter compiled to wasm32-wasip1, run by Envoy's V8 runtime."""

    name = "wasm"
    binary = _REPO / "target/wasm32-wasip1/release/switchblade_filter.wasm"
    type_url = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm"
    log_component = "wasm"

    def typed_config(self, plugin: dict[str, Any] | str) -> dict[str, Any]:
        typed = _demo_typed_config()
        typed["config"]["configuration"]["value"] = plugin if isinstance(plugin, str) else json.dumps(plugin)
        return self.adopt(typed)

    def adopt(self, typed_config: dict[str, Any]) -> dict[str, Any]:
        typed_config["config"]["vm_config"]["code"]["local"]["filename"] = str(self.binary)
        return typed_config

    @staticmethod
    def plugin(typed_config: dict[str, Any]) -> str:
        """The plugin configuration inside a Wasm typed_config."""
        return typed_config["config"]["configuration"]["value"]

    def prepare(self, bootstrap: dict[str, Any]) -> None:
        pass

    def environment(self) -> dict[str, str]:
        return {}

    def marks(self, stats: dict[str, int]) -> dict[str, int]:
        return {name: value for name, value in stats.items() if name.startswith("wasm.")}


WASM = WasmBuild()

# The header the module sets to a tool's cluster, for the route that forwards routed calls.
CLUSTER_HEADER = "x-switchblade-cluster"
# The filter state the module sets on each call it routes; the route matches it too, so that
# only the module can choose that route (docs/configuration.md: Envoy wiring).
ROUTED_CALL_FILTER_STATE = "switchblade.routed_call"


class ModuleBuild:
    """The filter as an Envoy dynamic module (native, for Envoy 1.40), calling through Envoy's
    router: each bootstrap gets the route that forwards by the cluster header."""

    name = "module"
    binary = _REPO / "target/module/libswitchblade_module.so"
    type_url = "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter"
    log_component = "dynamic_modules"

    def typed_config(self, plugin: dict[str, Any] | str) -> dict[str, Any]:
        text = plugin if isinstance(plugin, str) else json.dumps(self._routed(plugin))
        return {
            "@type": self.type_url,
            "dynamic_module_config": {"name": "switchblade_module", "do_not_close": True,
                                      "metrics_namespace": "switchblade"},
            "filter_name": "switchblade",
            "filter_config": {"@type": "type.googleapis.com/google.protobuf.StringValue", "value": text},
        }

    def adopt(self, typed_config: dict[str, Any]) -> dict[str, Any]:
        if typed_config.get("@type") == self.type_url:
            return typed_config
        text = WasmBuild.plugin(typed_config)
        try:
            return self.typed_config(json.loads(text))
        except ValueError:
            return self.typed_config(text)

    @staticmethod
    def _routed(plugin: dict[str, Any]) -> dict[str, Any]:
        """Tool calls through Envoy's router, as a module is meant to run (a test that says
        otherwise keeps its own `routing`)."""
        return plugin if "routing" in plugin else {**plugin, "routing": {"cluster_header": CLUSTER_HEADER}}

    def prepare(self, bootstrap: dict[str, Any]) -> None:
        _module_access_logs(bootstrap)
        _module_token_payload(bootstrap)
        route = {"match": {"prefix": "/", "headers": [{"name": CLUSTER_HEADER, "present_match": True}],
                           "filter_state": [{"key": ROUTED_CALL_FILTER_STATE, "string_match": {"safe_regex": {"regex": ".+"}}}]},
                 "route": {"cluster_header": CLUSTER_HEADER}}
        for listener in bootstrap["static_resources"]["listeners"]:
            for chain in listener["filter_chains"]:
                for network_filter in chain["filters"]:
                    manager = network_filter.get("typed_config", {})
                    for host in manager.get("route_config", {}).get("virtual_hosts", []):
                        routes = host.setdefault("routes", [])
                        if not any(CLUSTER_HEADER in json.dumps(existing.get("match", {})) for existing in routes):
                            routes.insert(0, copy.deepcopy(route))

    def environment(self) -> dict[str, str]:
        return {"ENVOY_DYNAMIC_MODULES_SEARCH_PATH": str(self.binary.parent)}

    def marks(self, stats: dict[str, int]) -> dict[str, int]:
        # A module has no VM to recreate: a crash is Envoy's, which the test sees as a dead
        # process. Envoy's own restarts of the listener would show here.
        return {name: value for name, value in stats.items() if name in ("server.hot_restart_epoch", "listener_manager.total_listeners_active")}


def _module_access_logs(bootstrap: dict[str, Any]) -> None:
    """The Wasm filter's access-log fields are filter state (`wasm.switchblade.<field>`); the
    module's `switchblade.<field>`, as in envoy/module.yaml (proxy-wasm prefixes every key)."""
    text = json.dumps(bootstrap)
    moved = re.sub(r"%FILTER_STATE\(wasm\.switchblade\.(\w+):PLAIN\)%", r"%FILTER_STATE(switchblade.\1:PLAIN)%", text)
    if moved != text:
        bootstrap.clear()
        bootstrap.update(json.loads(moved))


# Where the module reads the token payload (docs/authorization.md, the dynamic module).
MODULE_TOKEN_PAYLOAD = "switchblade.token_payload"


def _module_token_payload(bootstrap: dict[str, Any]) -> None:
    """Envoy 1.40's module ABI reads no metadata objects: a bootstrap whose (Wasm) filter reads
    the token payload from jwt_authn's metadata gets docs/authorization.md's bridge instead, a
    set_filter_state filter copying it into filter state, where the module reads it."""
    for listener in bootstrap["static_resources"]["listeners"]:
        for chain in listener["filter_chains"]:
            for network_filter in chain["filters"]:
                filters = network_filter.get("typed_config", {}).get("http_filters", [])
                for index, entry in enumerate(filters):
                    typed = entry.get("typed_config", {})
                    if entry["name"] != "switchblade" or typed.get("@type") != WasmBuild.type_url:
                        continue
                    plugin = json.loads(WasmBuild.plugin(typed))
                    source = plugin.get("authorization", {}).get("token_payload", {"metadata": {}})
                    if "metadata" not in source:
                        continue
                    namespace = source["metadata"].get("namespace", "envoy.filters.http.jwt_authn")
                    key = source["metadata"].get("key", "jwt_payload")
                    plugin["authorization"]["token_payload"] = {"filter_state": MODULE_TOKEN_PAYLOAD}
                    typed["config"]["configuration"]["value"] = json.dumps(plugin)
                    filters.insert(index, token_payload_bridge(namespace, key))
                    break


def token_payload_bridge(namespace: str, key: str) -> dict[str, Any]:
    """The set_filter_state filter that copies a verified token payload from dynamic metadata
    into filter state, as JSON text."""
    return {
        "name": "envoy.filters.http.set_filter_state",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.set_filter_state.v3.Config",
            "on_request_headers": [{
                "object_key": MODULE_TOKEN_PAYLOAD,
                "factory_key": "envoy.string",
                "format_string": {"text_format_source": {"inline_string": f"%DYNAMIC_METADATA({namespace}:{key})%"}},
            }],
        },
    }


MODULE = ModuleBuild()
class CelWasmBuild(WasmBuild):
    """The Wasm filter built with the `cel` feature (buf.validate's CEL rules enforced):
    `scripts/test` builds it into target/cel, for test_validate.py."""

    name = "wasm-cel"
    binary = _REPO / "target/cel/wasm32-wasip1/release/switchblade_filter.wasm"


_CEL_TARGET = _REPO / "target/cel"


def wait_for_cel_build(timeout: float = 1200) -> None:
    """Waits for the cel build `scripts/test` runs in the background while the suite runs
    (target/cel/build.pid names the job; build.status holds its exit status once it ends), and
    fails with its log if it failed. Returns at once when no such job is running."""
    status, pid, log = (_CEL_TARGET / name for name in ("build.status", "build.pid", "build.log"))
    deadline = time.monotonic() + timeout
    while not status.exists() and pid.exists() and _running(pid) and time.monotonic() < deadline:
        time.sleep(1)
    if status.exists() and status.read_text().strip() != "0":
        raise AssertionError(f"the cel build failed:\n{log.read_text() if log.exists() else ''}")


def _running(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text().strip()), 0)
    except (ValueError, ProcessLookupError, PermissionError):
        return False
    return True


CEL_WASM = CelWasmBuild()
BUILDS: dict[str, FilterBuild] = {build.name: build for build in (WASM, MODULE)}
_current: list[FilterBuild] = [WASM]


def current() -> FilterBuild:
    """The build this test session runs (`pytest --build`)."""
    return _current[0]


def choose(name: str) -> FilterBuild:
    _current[0] = BUILDS[name]
    return _current[0]


def _demo_typed_config() -> dict[str, Any]:
    return yaml.safe_load(DEMO_ECDS.read_text())["resources"][0]["typed_config"]


def demo_plugin() -> dict[str, Any]:
    """The demo's plugin configuration (the JSON inside envoy/ecds/demo.yaml); the same for
    every build."""
    return json.loads(WASM.plugin(_demo_typed_config()))


def ecds_resource(build: FilterBuild, plugin: dict[str, Any] | str) -> str:
    """An ECDS file that configures the `switchblade` filter entry with `build`."""
    return yaml.safe_dump({"resources": [{
        "@type": "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig",
        "name": "switchblade",
        "typed_config": build.typed_config(plugin),
    }]})

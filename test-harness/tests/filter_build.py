"""How a build of the Switchblade filter is wired into an Envoy bootstrap.

There is one build today: the Wasm module run by Envoy's V8 runtime (`WASM`). Everything that
depends on a build's typed_config is here, so that another build (an Envoy dynamic module, say)
is one more class meeting `FilterBuild`, and `Envoy` and `static_bootstrap` take it unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

import yaml

_REPO = Path(__file__).resolve().parents[2]
# The demo's filter configuration: an ECDS resource holding a Wasm typed_config.
DEMO_ECDS = _REPO / "envoy/ecds/demo.yaml"


class FilterBuild(Protocol):
    """One build of the filter, as an Envoy bootstrap refers to it."""

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


class WasmBuild:
    """The filter compiled to wasm32-wasip1, run by Envoy's V8 runtime."""

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


WASM = WasmBuild()


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

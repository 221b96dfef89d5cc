"""The Kubernetes examples (deploy/) and every Envoy file: the Switchblade configuration inside
each passes the filter's own validation (`switchblade check`), a wrong one is refused with the
key named, and each manifest holds together the way its control plane reads it: the clusters
are named as Istio and Envoy Gateway name them, the buffer filter follows the Wasm filter on the
MCP route, and Envoy Gateway's proxy gets the stats' tag extraction the CLI prints. What
`switchblade config --format istio|envoy-gateway` prints is what these manifests hold, and
`switchblade check` reports every file of the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from processes import CLI_BIN, REPO

ISTIO = REPO / "deploy/istio/switchblade.yaml"
ENVOY_GATEWAY = REPO / "deploy/envoy-gateway/switchblade.yaml"
ENVOY_FILES = [REPO / "envoy/ecds/demo.yaml", REPO / "envoy/docker.yaml", REPO / "envoy/module.yaml",
               REPO / "envoy/auth.yaml"]


def check(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI_BIN), "check", *map(str, paths)], capture_output=True, text=True, timeout=60)


def documents(path: Path) -> list[dict]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def resource(path: Path, kind: str, name: str | None = None) -> dict:
    [found] = [d for d in documents(path) if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    return found


def test_every_embedded_configuration_passes_the_filters_validation() -> None:
    result = check(ISTIO, ENVOY_GATEWAY, *ENVOY_FILES)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert f"{ISTIO}: WasmPlugin istio-system/switchblade: 3 tools" in lines
    assert f"{ENVOY_GATEWAY}: EnvoyExtensionPolicy switchblade/switchblade: 3 tools" in lines
    assert len(lines) == 2 + len(ENVOY_FILES), lines


def test_check_reports_every_file_of_the_repository(tmp_path: Path) -> None:
    """The command docs/your-services.md shows, from a directory without the demo's ECDS file: each file that
    configures the filter passes; envoy/demo.yaml says where its ECDS file is not."""
    files = sorted(REPO.glob("envoy/*.yaml")) + sorted(REPO.glob("deploy/*/*.yaml")) + sorted(REPO.glob("envoy/ecds/*.yaml"))
    result = subprocess.run([str(CLI_BIN), "check", *map(str, files)], cwd=tmp_path, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(files), lines
    for path, line in zip(files, lines):
        assert line.startswith(f"{path}: "), line
        if path.name == "demo.yaml" and path.parent.name == "envoy":
            assert ".work/ecds/switchblade.yaml does not exist (yet), so it was not checked" in line, line
        else:
            assert line.endswith(": 3 tools"), line


def printed(flavour: str, cluster: str) -> list[dict]:
    """What `switchblade config --format FLAVOUR` prints for the demo's services on `cluster`."""
    text = subprocess.run(
        [str(CLI_BIN), "config", "-I", "proto", "demo/catalog/v1/catalog.proto", "demo/users/v1/users.proto",
         "--service", f"demo.catalog.v1.CatalogService={cluster}", "--service", f"demo.users.v1.UserService={cluster}",
         "--timeout-ms", "5000", "--forward-header", "x-request-id",
         "--format", flavour],
        cwd=REPO, capture_output=True, text=True, check=True, timeout=60,
    ).stdout
    return [document for document in yaml.safe_load_all(text) if document]


def test_the_cli_prints_the_istio_manifests_resources(tmp_path: Path) -> None:
    plugin = resource(ISTIO, "WasmPlugin")
    cluster = next(iter(plugin["spec"]["pluginConfig"]["services"].values()))["cluster"]
    buffer, wasm_plugin = printed("istio", cluster)
    assert buffer == resource(ISTIO, "EnvoyFilter")
    assert wasm_plugin["metadata"] == plugin["metadata"]
    printed_config = wasm_plugin["spec"].pop("pluginConfig")
    expected = dict(plugin["spec"])
    expected_config = expected.pop("pluginConfig")
    assert wasm_plugin["spec"] == expected
    assert printed_config["services"] == expected_config["services"]
    assert printed_config["forward_headers"] == expected_config["forward_headers"]
    output = tmp_path / "istio.yaml"
    output.write_text(yaml.safe_dump_all([buffer, {**wasm_plugin, "spec": {**wasm_plugin["spec"],
                                                                          "pluginConfig": printed_config}}]))
    assert check(output).stdout == f"{output}: WasmPlugin istio-system/switchblade: 3 tools\n"


def test_the_cli_prints_the_envoy_gateway_manifests_resources(tmp_path: Path) -> None:
    policy = resource(ENVOY_GATEWAY, "EnvoyExtensionPolicy")
    cluster = next(iter(policy["spec"]["wasm"][0]["config"]["services"].values()))["cluster"]
    proxy, client, buffer, extension = printed("envoy-gateway", cluster)
    # The same resources, in the namespace `kubectl apply` is given rather than a fixed one.
    for document, kind in ((proxy, "EnvoyProxy"), (client, "ClientTrafficPolicy"), (buffer, "BackendTrafficPolicy"),
                           (extension, "EnvoyExtensionPolicy")):
        expected = resource(ENVOY_GATEWAY, kind)
        assert document["kind"] == kind and document["metadata"]["name"] == expected["metadata"]["name"]
        if kind != "EnvoyExtensionPolicy":
            assert document["spec"] == expected["spec"], kind
    [wasm], [expected_wasm] = extension["spec"]["wasm"], policy["spec"]["wasm"]
    assert wasm["config"]["services"] == expected_wasm["config"]["services"]
    assert {k: v for k, v in wasm.items() if k != "config"} == {k: v for k, v in expected_wasm.items() if k != "config"}
    assert extension["spec"]["targetRefs"] == policy["spec"]["targetRefs"]
    output = tmp_path / "envoy-gateway.yaml"
    output.write_text(yaml.safe_dump_all([proxy, client, buffer, extension]))
    assert check(output).stdout == f"{output}: EnvoyExtensionPolicy switchblade: 3 tools\n"


def test_a_wrong_configuration_in_a_manifest_is_refused_with_the_key_named(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(ISTIO.read_text().replace("timeout_ms: 5000", "timout_ms: 5000", 1))
    result = check(broken)
    assert result.returncode == 1
    assert "WasmPlugin istio-system/switchblade: invalid plugin configuration" in result.stderr
    assert "timout_ms" in result.stderr, result.stderr
    empty = tmp_path / "empty.yaml"
    empty.write_text("kind: ConfigMap\nmetadata: {name: x}\n")
    assert "no Switchblade plugin configuration found" in check(empty).stderr


def test_istio_names_clusters_and_routes_as_the_manifest_uses_them() -> None:
    plugin = resource(ISTIO, "WasmPlugin")["spec"]
    assert plugin["pluginName"] == "switchblade" and plugin["url"].startswith("oci://")
    service = resource(ISTIO, "Service", "demo-upstream")
    grpc_port = next(port["port"] for port in service["spec"]["ports"] if port["name"].startswith("grpc"))
    host = f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc.cluster.local"
    assert {s["cluster"] for s in plugin["pluginConfig"]["services"].values()} == {f"outbound|{grpc_port}||{host}"}
    # The buffer filter goes before the router (so after the plugin), enabled on the MCP route only.
    patches = resource(ISTIO, "EnvoyFilter")["spec"]["configPatches"]
    assert patches[0]["patch"]["operation"] == "INSERT_BEFORE" and patches[0]["patch"]["value"]["disabled"] is True
    route_name = patches[1]["match"]["routeConfiguration"]["vhost"]["route"]["name"]
    [route] = resource(ISTIO, "VirtualService")["spec"]["http"]
    assert route["name"] == route_name and route["match"] == [{"uri": {"exact": plugin["pluginConfig"]["mcp_path"]}}]


def test_envoy_gateway_names_clusters_and_orders_filters_as_the_manifest_needs() -> None:
    policy = resource(ENVOY_GATEWAY, "EnvoyExtensionPolicy")
    [wasm] = policy["spec"]["wasm"]
    assert wasm["rootID"] == "switchblade" and wasm["code"]["type"] == "Image"
    grpc_route = resource(ENVOY_GATEWAY, "GRPCRoute")
    cluster = f"grpcroute/{grpc_route['metadata']['namespace']}/{grpc_route['metadata']['name']}/rule/0"
    assert {s["cluster"] for s in wasm["config"]["services"].values()} == {cluster}
    mcp_route = {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "mcp"}
    assert policy["spec"]["targetRefs"] == [mcp_route]
    assert resource(ENVOY_GATEWAY, "BackendTrafficPolicy")["spec"]["targetRefs"] == [mcp_route]
    [rule] = resource(ENVOY_GATEWAY, "HTTPRoute", "mcp")["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "Exact", "value": wasm["config"]["mcp_path"]}}]
    proxy = resource(ENVOY_GATEWAY, "EnvoyProxy")["spec"]
    assert proxy["filterOrder"] == [{"name": "envoy.filters.http.buffer", "after": "envoy.filters.http.wasm"}]
    # The stats' tag extraction, as the CLI prints it for any bootstrap.
    printed = subprocess.run(
        [str(CLI_BIN), "config", "-I", "proto", "demo/users/v1/users.proto",
         "--service", "demo.users.v1.UserService=demo_grpc", "--format", "envoy"],
        cwd=REPO, capture_output=True, text=True, check=True, timeout=60,
    ).stdout
    expected = yaml.safe_load(printed)["stats_config"]["stats_tags"]
    patches = proxy["bootstrap"]["jsonPatches"]
    assert all(patch["op"] == "add" and patch["path"] == "/stats_config/stats_tags/-" for patch in patches)
    assert [patch["value"] for patch in patches] == expected


def test_the_deploy_manifests_name_only_images_this_repository_builds() -> None:
    images = {container["image"] for path in (ISTIO, ENVOY_GATEWAY) for document in documents(path)
              if document["kind"] == "Deployment"
              for container in document["spec"]["template"]["spec"]["containers"]}
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert images == {compose["services"]["upstream"]["image"]}
    # The Wasm image's name in both manifests is the same, and docs/deployment.md pushes to it.
    urls = {resource(ISTIO, "WasmPlugin")["spec"]["url"].removeprefix("oci://"),
            resource(ENVOY_GATEWAY, "EnvoyExtensionPolicy")["spec"]["wasm"][0]["code"]["image"]["url"]}
    assert len(urls) == 1
    assert re.search(rf"--push {re.escape(urls.pop())}\b", (REPO / "docs/deployment.md").read_text())

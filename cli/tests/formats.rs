//! `switchblade config --format`: each flavour's wiring, complete and accepted by `switchblade
//! check`, and the overrides and notes of `config` itself. (Envoy validates the bootstraps in
//! test-harness/tests/test_cli_formats.py.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{scratch, switchblade};
use serde_json::{json, Value};

const USERS: &str = "demo.users.v1.UserService";
const CATALOG: &str = "demo.catalog.v1.CatalogService";

/// `switchblade config` of the demo's catalog and users services, in `format`.
fn demo(format: &str, extra: &[&str]) -> common::Run {
    let mut args = vec![
        "config",
        "-I",
        "proto",
        "demo/catalog/v1/catalog.proto",
        "demo/users/v1/users.proto",
        "--service",
        "demo.catalog.v1.CatalogService=catalog_grpc",
        "--service",
        "demo.users.v1.UserService=users_grpc",
        "--format",
        format,
    ];
    args.extend_from_slice(extra);
    switchblade(&args)
}

fn yaml_documents(text: &str) -> Vec<Value> {
    use serde::Deserialize;
    yaml_serde::Deserializer::from_str(text)
        .map(|document| Value::deserialize(document).unwrap())
        .collect()
}

/// The plugin configuration inside a typed config's `StringValue`.
fn plugin_of(string_value: &Value) -> Value {
    serde_json::from_str(string_value["value"].as_str().unwrap()).unwrap()
}

/// `switchblade check` of `text`, written to a file: its one report line.
fn checked(name: &str, text: &str) -> String {
    let dir = scratch(name);
    let path = dir.join("out.yaml");
    std::fs::write(&path, text).unwrap();
    let report = switchblade(&["check", path.to_str().unwrap()]).ok();
    std::fs::remove_dir_all(dir).unwrap();
    report.trim_end().split_once(": ").unwrap().1.to_owned()
}

fn listener_routes(bootstrap: &Value) -> &Vec<Value> {
    bootstrap
        .pointer(
            "/static_resources/listeners/0/filter_chains/0/filters/0/typed_config/route_config/virtual_hosts/0/routes",
        )
        .and_then(Value::as_array)
        .unwrap()
}

fn http_filters(bootstrap: &Value) -> &Vec<Value> {
    bootstrap
        .pointer("/static_resources/listeners/0/filter_chains/0/filters/0/typed_config/http_filters")
        .and_then(Value::as_array)
        .unwrap()
}

/// Both bootstraps: one HTTP/2 cluster per named cluster, the stats' tag extraction, and the
/// address policy the rate limits rely on (the peer, never a client's X-Forwarded-For).
fn assert_clusters_and_stats(bootstrap: &Value) {
    let manager = bootstrap
        .pointer("/static_resources/listeners/0/filter_chains/0/filters/0/typed_config")
        .unwrap();
    assert_eq!(manager["use_remote_address"], true);
    assert_eq!(manager["xff_num_trusted_hops"], 0);
    let clusters = bootstrap["static_resources"]["clusters"].as_array().unwrap();
    let names: Vec<&str> = clusters.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["catalog_grpc", "users_grpc"]);
    for cluster in clusters {
        let options =
            &cluster["typed_extension_protocol_options"]["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
        assert_eq!(options["explicit_http_config"], json!({"http2_protocol_options": {}}));
    }
    let tags: Vec<&str> = bootstrap["stats_config"]["stats_tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tag| tag["tag_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tags,
        ["tool", "outcome", "grpc_status", "method", "protocol_version", "reason"]
    );
}

#[test]
fn envoy_prints_a_bootstrap_with_the_filter_the_buffer_the_route_and_the_clusters() {
    let text = demo("envoy", &[]).ok();
    let [bootstrap] = &yaml_documents(&text)[..] else {
        panic!("{text}")
    };
    let filters = http_filters(bootstrap);
    let names: Vec<&str> = filters.iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["switchblade", "envoy.filters.http.buffer", "envoy.filters.http.router"]
    );
    let wasm = &filters[0]["typed_config"]["config"];
    assert_eq!(wasm["root_id"], "switchblade");
    assert_eq!(
        wasm["vm_config"]["code"]["local"]["filename"],
        "target/wasm32-wasip1/release/switchblade_filter.wasm"
    );
    assert!(plugin_of(&wasm["configuration"])["services"][USERS].is_object());
    assert_eq!(filters[1]["disabled"], true);
    let [mcp] = &listener_routes(bootstrap)[..] else {
        panic!()
    };
    assert_eq!(mcp["match"], json!({"path": "/mcp"}));
    assert_eq!(
        mcp["typed_per_filter_config"]["envoy.filters.http.buffer"]["buffer"],
        json!({"max_request_bytes": 1048576})
    );
    assert_clusters_and_stats(bootstrap);
    assert_eq!(checked("envoy", &text), "document 1, the Wasm filter: 3 tools");
}

#[test]
fn module_prints_a_bootstrap_whose_routed_call_route_needs_the_filter_state() {
    let text = demo("module", &[]).ok();
    let [bootstrap] = &yaml_documents(&text)[..] else {
        panic!("{text}")
    };
    let filters = http_filters(bootstrap);
    let module = &filters[0]["typed_config"];
    assert_eq!(
        module["dynamic_module_config"],
        json!({"name": "switchblade_module", "do_not_close": true, "metrics_namespace": "switchblade"})
    );
    assert_eq!(module["filter_name"], "switchblade");
    let plugin = plugin_of(&module["filter_config"]);
    assert_eq!(plugin["routing"], json!({"cluster_header": "x-switchblade-cluster"}));
    assert_eq!(filters.len(), 2, "no buffer filter");
    // The routed-call route matches the header AND the filter state no client can write: on
    // the header alone, a client could choose the route around the module's checks.
    let routes = listener_routes(bootstrap);
    assert_eq!(
        routes[0],
        json!({
            "match": {
                "prefix": "/",
                "headers": [{"name": "x-switchblade-cluster", "present_match": true}],
                "filter_state": [{"key": "switchblade.routed_call", "string_match": {"safe_regex": {"regex": ".+"}}}]
            },
            "route": {"cluster_header": "x-switchblade-cluster"}
        })
    );
    assert_eq!(routes[1]["match"], json!({"path": "/mcp"}));
    assert_eq!(routes.len(), 2);
    assert_clusters_and_stats(bootstrap);
    assert_eq!(checked("module", &text), "document 1, the dynamic module: 3 tools");
}

#[test]
fn the_module_bootstrap_matches_the_repositorys_own_routed_call_route() {
    let text = demo("module", &[]).ok();
    let printed = listener_routes(&yaml_documents(&text)[0])[0].clone();
    let ours = std::fs::read_to_string(common::repo().join("envoy/module.yaml")).unwrap();
    assert_eq!(listener_routes(&yaml_documents(&ours)[0])[0], printed);
}

#[test]
fn ecds_prints_a_resource_file() {
    let text = demo("ecds", &["--wasm", "/opt/switchblade.wasm"]).ok();
    let [resource] = &yaml_documents(&text)[..] else {
        panic!()
    };
    let typed = &resource["resources"][0]["typed_config"];
    assert_eq!(
        typed["config"]["vm_config"]["code"]["local"]["filename"],
        "/opt/switchblade.wasm"
    );
    assert_eq!(checked("ecds", &text), "document 1, the Wasm filter: 3 tools");
}

#[test]
fn istio_prints_a_wasm_plugin_and_the_buffer() {
    let text = demo("istio", &["--image", "oci://registry.example.com/team/switchblade:1.0"]).ok();
    let documents = yaml_documents(&text);
    let kinds: Vec<&str> = documents.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["EnvoyFilter", "WasmPlugin"]);
    let patches = &documents[0]["spec"]["configPatches"];
    assert_eq!(patches[0]["patch"]["operation"], "INSERT_BEFORE");
    assert_eq!(patches[0]["patch"]["value"]["name"], "envoy.filters.http.buffer");
    assert_eq!(
        patches[1]["match"]["routeConfiguration"]["vhost"]["route"]["name"],
        "mcp"
    );
    let plugin = &documents[1]["spec"];
    assert_eq!(plugin["url"], "oci://registry.example.com/team/switchblade:1.0");
    assert_eq!(plugin["pluginName"], "switchblade");
    assert_eq!(plugin["pluginConfig"]["services"][CATALOG]["cluster"], "catalog_grpc");
    assert_eq!(checked("istio", &text), "WasmPlugin istio-system/switchblade: 3 tools");
}

#[test]
fn envoy_gateway_prints_the_policies_and_the_proxy_settings() {
    let text = demo("envoy-gateway", &[]).ok();
    let documents = yaml_documents(&text);
    let kinds: Vec<&str> = documents.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "EnvoyProxy",
            "ClientTrafficPolicy",
            "BackendTrafficPolicy",
            "EnvoyExtensionPolicy"
        ]
    );
    assert_eq!(
        documents[0]["spec"]["filterOrder"],
        json!([{"name": "envoy.filters.http.buffer", "after": "envoy.filters.http.wasm"}])
    );
    assert_eq!(
        documents[1]["spec"]["clientIPDetection"],
        json!({"xForwardedFor": {"numTrustedHops": 0}})
    );
    assert_eq!(documents[2]["spec"]["requestBuffer"], json!({"limit": "1Mi"}));
    let wasm = &documents[3]["spec"]["wasm"][0];
    assert_eq!(wasm["rootID"], "switchblade");
    assert_eq!(
        wasm["code"]["image"]["url"],
        "registry.example.com/switchblade/filter:0.1.0"
    );
    assert_eq!(
        checked("envoy-gateway", &text),
        "EnvoyExtensionPolicy switchblade: 3 tools"
    );
}

#[test]
fn streaming_methods_skipped_are_listed_on_standard_error() {
    let run = demo("json", &[]);
    assert_eq!(run.code, 0);
    assert_eq!(
        run.stderr,
        "switchblade: skipped demo.catalog.v1.CatalogService/WatchItems: a server-streaming method (add \
         --streaming to expose streaming methods)\n\
         switchblade: skipped demo.catalog.v1.CatalogService/ImportItems: a client-streaming method (add \
         --streaming to expose streaming methods)\n\
         switchblade: skipped demo.users.v1.UserService/Chat: a bidirectional-streaming method (add \
         --streaming to expose streaming methods)\n"
    );
    // A service whose methods are chosen skips nothing; the other service is still whole.
    let chosen = demo("json", &["--method", "demo.catalog.v1.CatalogService/Search"]);
    assert_eq!(
        chosen.stderr,
        "switchblade: skipped demo.users.v1.UserService/Chat: a bidirectional-streaming method (add \
         --streaming to expose streaming methods)\n"
    );
}

#[test]
fn streaming_exposes_the_streaming_methods_of_whole_services() {
    let run = demo("json", &["--streaming"]);
    assert_eq!(run.stderr, "");
    let plugin: Value = serde_json::from_str(&run.ok()).unwrap();
    assert_eq!(plugin["services"][CATALOG]["streaming"], json!(true));
    assert_eq!(plugin["services"][USERS]["streaming"], json!(true));
}

#[test]
fn tool_names_timeouts_and_headers_are_written_as_the_filter_takes_them() {
    let text = demo(
        "json",
        &[
            "--tool-name",
            "demo.users.v1.UserService/GetUser=get_user",
            "--timeout-ms",
            "2500",
            "--timeout-ms",
            "demo.users.v1.UserService=4000",
            "--timeout-ms",
            "demo.catalog.v1.CatalogService/Search=800",
            "--forward-header",
            "X-Client-Version",
            "--forward-header",
            "X-Request-Id",
        ],
    )
    .ok();
    let plugin: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        plugin["services"][CATALOG],
        json!({"cluster": "catalog_grpc", "timeout_ms": 2500})
    );
    assert_eq!(
        plugin["services"][USERS],
        json!({"cluster": "users_grpc", "timeout_ms": 4000})
    );
    assert_eq!(
        plugin["tools"],
        json!({
            "demo.users.v1.UserService/GetUser": {"name": "get_user"},
            "demo.catalog.v1.CatalogService/Search": {"timeout_ms": 800}
        })
    );
    assert_eq!(plugin["forward_headers"], json!(["x-client-version", "x-request-id"]));
}

#[test]
fn two_services_with_one_short_name_need_a_tool_name() {
    let dir = scratch("same-short-name");
    common::write(
        &dir,
        &[
            (
                "a/v1/s.proto",
                "syntax = \"proto3\";\npackage a.v1;\nservice S { rpc Get(M) returns (M); }\nmessage M {}\n",
            ),
            (
                "b/v1/s.proto",
                "syntax = \"proto3\";\npackage b.v1;\nservice S { rpc Get(M) returns (M); }\nmessage M {}\n",
            ),
        ],
    );
    let run = |extra: &[&str]| {
        let mut args = vec![
            "config",
            "a/v1/s.proto",
            "b/v1/s.proto",
            "--service",
            "a.v1.S=a",
            "--service",
            "b.v1.S=b",
        ];
        args.extend_from_slice(extra);
        common::switchblade_in(&dir, &args, "")
    };
    assert_eq!(
        run(&[]).error(),
        "the configuration would be refused: b.v1.S/Get would be tool \"S_Get\", which a.v1.S/Get already is; tool \
         names must be unique (rename one under `tools.b.v1.S/Get.name`)"
    );
    let plugin: Value = serde_json::from_str(&run(&["--tool-name", "b.v1.S/Get=b_get"]).ok()).unwrap();
    assert_eq!(plugin["tools"], json!({"b.v1.S/Get": {"name": "b_get"}}));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn mistakes_in_the_arguments_are_refused() {
    assert_eq!(
        demo("json", &["--service", "demo.users.v1.UserService=other"]).error(),
        "--service demo.users.v1.UserService is given twice; give each service once"
    );
    assert_eq!(
        demo("json", &["--tool-name", "other.v1.S/Get=x"]).error(),
        "--tool-name other.v1.S/Get: not a method of any --service (write package.Service/Method)"
    );
    assert_eq!(
        demo("json", &["--timeout-ms", "other.v1.S=5"]).error(),
        "--timeout-ms other.v1.S=…: names no --service and no method of one"
    );
    let usage = demo("json", &["--timeout-ms", "0"]);
    assert_eq!(usage.code, 2);
    assert!(
        usage.stderr.contains("invalid value '0' for '--timeout-ms <[TARGET=]MS>': \"0\": the milliseconds must be a whole number above 0"),
        "{}",
        usage.stderr
    );
    let usage = demo("json", &["--tool-name", "GetUser=x"]);
    assert!(
        usage
            .stderr
            .contains("\"GetUser=x\": write package.Service/Method=name"),
        "{}",
        usage.stderr
    );
}

//! What `switchblade config --format` prints around the plugin configuration: the wiring of
//! each flavour (the Wasm filter or the dynamic module in an Envoy bootstrap, an ECDS file,
//! Istio's and Envoy Gateway's resources), built as values and written as YAML, each document
//! after a comment that says what to do with it.

mod authentication;
mod envoy;
mod kubernetes;
mod module;

pub use authentication::{Authentication, MODULE_TOKEN_PAYLOAD};

use serde_json::{json, Map, Value};
use switchblade_core::observe::tag_extraction_rules;

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The plugin configuration's JSON alone.
    Json,
    /// A complete Envoy bootstrap with the Wasm filter.
    Envoy,
    /// An ECDS resource file for the Wasm filter.
    Ecds,
    /// A complete Envoy bootstrap with the dynamic module.
    Module,
    /// Istio: a WasmPlugin and the EnvoyFilter for the buffer.
    Istio,
    /// Envoy Gateway: an EnvoyExtensionPolicy, a BackendTrafficPolicy and an EnvoyProxy.
    EnvoyGateway,
}

/// What every flavour is made of.
pub struct Wiring<'a> {
    /// The plugin configuration, and the same as the filter receives it (pretty JSON text).
    pub plugin: &'a Map<String, Value>,
    pub plugin_json: &'a str,
    /// The `.wasm` for Envoy (a file) and for the control planes (an OCI image reference).
    pub wasm: &'a str,
    pub image: &'a str,
    /// The token check in front, for an authenticated configuration (`--resource`).
    pub authentication: Option<&'a Authentication>,
}

/// The header the dynamic module sets to a routed call's cluster (`routing.cluster_header`).
pub const ROUTING_HEADER: &str = "x-switchblade-cluster";

/// The largest MCP request the buffer filter holds (Envoy answers 413 past it).
const BUFFER_MAX_REQUEST_BYTES: u64 = 1024 * 1024;

pub fn render(format: Format, wiring: &Wiring<'_>) -> Result<String, String> {
    match format {
        Format::Json => Ok(wiring.plugin_json.to_owned()),
        Format::Envoy => envoy::bootstrap(wiring),
        Format::Ecds => envoy::ecds_resource(wiring),
        Format::Module => module::bootstrap(wiring),
        Format::Istio => kubernetes::istio(wiring),
        Format::EnvoyGateway => kubernetes::envoy_gateway(wiring),
    }
}

/// One YAML document: `comment` as `#` lines, then `value`.
fn document(comment: &str, value: &Value) -> Result<String, String> {
    let yaml = yaml_serde::to_string(value).map_err(|error| error.to_string())?;
    let comment: String = comment
        .lines()
        .map(|line| {
            if line.is_empty() {
                "#\n".to_owned()
            } else {
                format!("# {line}\n")
            }
        })
        .collect();
    Ok(format!("{comment}{yaml}"))
}

/// Several documents of one file, as `kubectl apply -f` takes them.
fn documents(parts: &[(&str, Value)]) -> Result<String, String> {
    let written = parts
        .iter()
        .map(|(comment, value)| document(comment, value))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(written.join("---\n"))
}

fn mcp_path(wiring: &Wiring<'_>) -> String {
    wiring
        .plugin
        .get("mcp_path")
        .and_then(Value::as_str)
        .unwrap_or(switchblade_core::config::DEFAULT_MCP_PATH)
        .to_owned()
}

/// The clusters the configuration's services name, each once, in order.
fn cluster_names(wiring: &Wiring<'_>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let services = wiring.plugin.get("services").and_then(Value::as_object);
    for service in services.into_iter().flat_map(Map::values) {
        if let Some(cluster) = service.get("cluster").and_then(Value::as_str) {
            if !names.iter().any(|name| name == cluster) {
                names.push(cluster.to_owned());
            }
        }
    }
    names
}

/// The tag extraction rules of Switchblade's stats: the labels the filter writes into its stat
/// names (proxy-wasm stats have none) made labels again (README: Observability).
fn stats_tags() -> Value {
    let rules: Vec<Value> = tag_extraction_rules()
        .into_iter()
        .map(|(tag, regex)| json!({"tag_name": tag, "regex": regex}))
        .collect();
    Value::Array(rules)
}

/// An HTTP/2 cluster (gRPC needs it) for `name`, at an address to be replaced.
fn http2_cluster(name: &str) -> Value {
    json!({
        "name": name,
        "type": "STRICT_DNS",
        "connect_timeout": "1s",
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}}
            }
        },
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {
                "socket_address": {"address": "127.0.0.1", "port_value": 50051}
            }}}]}]
        }
    })
}

/// A bootstrap with one listener on 127.0.0.1:10000 that serves `routes` through
/// `http_filters`, the HTTP/2 clusters of the configuration, the stats' tag extraction, and
/// Envoy's admin on 127.0.0.1:9901 (its /stats show the filter's); for an authenticated
/// configuration, with the token check's cluster and local reply mapping.
fn bootstrap_with(wiring: &Wiring<'_>, routes: Vec<Value>, mut http_filters: Vec<Value>) -> Result<Value, String> {
    let mut virtual_host = json!({"name": "all", "domains": ["*"], "routes": routes});
    let mut clusters: Vec<Value> = cluster_names(wiring).iter().map(|name| http2_cluster(name)).collect();
    if let Some(policy) = cors_policy(wiring) {
        http_filters.insert(0, cors_filter());
        virtual_host["typed_per_filter_config"] = json!({ CORS_FILTER: policy });
        clusters.push(unanswered_cluster());
    }
    if let Some(authentication) = wiring.authentication {
        clusters.push(authentication::jwks_cluster(authentication)?);
    }
    let mut bootstrap = json!({
        "stats_config": {"stats_tags": stats_tags()},
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 9901}}},
        "static_resources": {
            "listeners": [{
                "name": "mcp",
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": 10000}},
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.http_connection_manager",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                        "stat_prefix": "mcp",
                        // Who the client is: the connection's peer, never an X-Forwarded-For
                        // entry a client wrote (the rate limits count callers by it); behind N
                        // proxies of one's own, xff_num_trusted_hops: N.
                        "use_remote_address": true,
                        "xff_num_trusted_hops": 0,
                        // A client's X-Request-Id, which Envoy would replace at the edge, names
                        // its calls in the access log.
                        "preserve_external_request_id": true,
                        "route_config": {
                            "name": "local",
                            "virtual_hosts": [virtual_host]
                        },
                        "http_filters": http_filters
                    }
                }]}]
            }],
            "clusters": clusters
        }
    });
    if let Some(authentication) = wiring.authentication {
        let manager =
            &mut bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"];
        manager["local_reply_config"] = authentication::local_reply_config(authentication);
    }
    Ok(bootstrap)
}

const CORS_FILTER: &str = "envoy.filters.http.cors";

/// Envoy's CORS filter, first: it answers a browser's preflight (`OPTIONS`) itself, before a
/// token check or Switchblade, and marks the answers to allowed origins.
fn cors_filter() -> Value {
    json!({
        "name": CORS_FILTER,
        "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"}
    })
}

/// The headers a browser-based MCP client sends and reads: the protocol's own (the version,
/// the session, the stateless era's method and name), a bearer token, and the resumption of a
/// stream of events; the session id and an OAuth challenge are read back.
const CORS_ALLOW_HEADERS: &str =
    "content-type, accept, authorization, mcp-protocol-version, mcp-session-id, mcp-method, mcp-name, last-event-id";
const CORS_EXPOSE_HEADERS: &str = "mcp-session-id, mcp-protocol-version, www-authenticate";

/// The CORS policy for the configuration's `allowed_origins`, the same list the filter checks
/// `Origin` against: none without it.
fn cors_policy(wiring: &Wiring<'_>) -> Option<Value> {
    let origins = wiring.plugin.get("allowed_origins")?.as_array()?;
    let matchers: Vec<Value> = origins
        .iter()
        .filter_map(Value::as_str)
        .map(|origin| match origin {
            "*" => json!({"safe_regex": {"regex": ".*"}}),
            origin => json!({"exact": origin}),
        })
        .collect();
    (!matchers.is_empty()).then(|| {
        json!({
            "@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy",
            "allow_origin_string_match": matchers,
            "allow_methods": "GET, POST, DELETE, OPTIONS",
            "allow_headers": CORS_ALLOW_HEADERS,
            "expose_headers": CORS_EXPOSE_HEADERS,
            "max_age": "600"
        })
    })
}

fn router_filter() -> Value {
    json!({
        "name": "envoy.filters.http.router",
        "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}
    })
}

/// The route for the MCP path, which the filter answers itself: anything that reaches its
/// direct response means the filter did not. With a CORS policy, Envoy's CORS filter would
/// pass over a direct response's route, so the route leads instead to a cluster without
/// endpoints (Envoy answers 503 `no healthy upstream`), which nothing unanswered gets past.
fn mcp_route(wiring: &Wiring<'_>, filter: &str) -> Value {
    if cors_policy(wiring).is_some() {
        return json!({"match": {"path": mcp_path(wiring)}, "route": {"cluster": UNANSWERED_CLUSTER}});
    }
    json!({
        "match": {"path": mcp_path(wiring)},
        "direct_response": {
            "status": 503,
            "body": {"inline_string": format!("the Switchblade {filter} did not answer this request\n")}
        }
    })
}

/// The MCP route's cluster when CORS is on: no endpoints, so no request the filter did not
/// answer reaches anything.
const UNANSWERED_CLUSTER: &str = "switchblade_unanswered";

fn unanswered_cluster() -> Value {
    json!({
        "name": UNANSWERED_CLUSTER,
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {"cluster_name": UNANSWERED_CLUSTER, "endpoints": []}
    })
}

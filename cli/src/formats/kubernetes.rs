//! The control planes' resources: Istio's WasmPlugin and the EnvoyFilter that adds the buffer
//! (`--format istio`), Envoy Gateway's EnvoyExtensionPolicy, BackendTrafficPolicy and
//! EnvoyProxy (`--format envoy-gateway`). Both pass the configuration to the filter as JSON
//! text; here it is written as YAML, which they convert.

use serde_json::{json, Value};

use super::{documents, stats_tags, Wiring, BUFFER_MAX_REQUEST_BYTES};

/// The name both files give the MCP route, which the buffer is enabled on.
const MCP_ROUTE: &str = "mcp";

const ISTIO_BUFFER_COMMENT: &str = "\
Switchblade on an Istio ingress gateway (apply with `kubectl apply -f`; see
deploy/istio/switchblade.yaml for a whole example with a Gateway, a VirtualService and a
service). Istio names a mesh service's cluster outbound|PORT||HOST (a port named grpc gets
HTTP/2): --service should name that.

Envoy's buffer filter before the router (so after the WasmPlugin), off except on the route
named `mcp`: name the VirtualService's HTTP route for the MCP path `mcp`.";

const ISTIO_PLUGIN_COMMENT: &str = "\
The filter, pulled from an OCI registry (push it with scripts/wasm-image, and pin the digest it
prints with `sha256:`). Istio passes pluginConfig to the filter as JSON.";

const GATEWAY_PROXY_COMMENT: &str = "\
Switchblade on Envoy Gateway (apply with `kubectl apply -f` in the namespace of the MCP
HTTPRoute, named `mcp`; see deploy/envoy-gateway/switchblade.yaml for a whole example). Envoy
Gateway names a GRPCRoute rule's cluster grpcroute/NAMESPACE/NAME/rule/INDEX: --service should
name that.

The proxy's settings (the Gateway's infrastructure.parametersRef names it): the buffer filter
after Wasm filters (Envoy Gateway puts it first by default), and the tag extraction of
Switchblade's stats.";

const GATEWAY_CLIENT_COMMENT: &str = "\
Who the client is: the connection's peer (Envoy Gateway sets use_remote_address), never an
X-Forwarded-For entry a client wrote; Switchblade's rate limits count callers by it. Behind N
load balancers of your own, set numTrustedHops: N.";

const ISTIO_ADDRESS_NOTE: &str = "

Istio's gateways count the connection's peer as the client (use_remote_address); Switchblade's
rate limits count callers by it. Behind N load balancers of your own, set the gateway's
proxy.istio.io/config annotation to {gatewayTopology: {numTrustedProxies: N}}. Istio sets no
vm_id: the filter keeps its shared data under keys of its own (SECURITY.md).";

const GATEWAY_BUFFER_COMMENT: &str = "\
Envoy's buffer filter on the MCP route: it holds MCP requests back from the router while the
filter reads the body.";

const GATEWAY_POLICY_COMMENT: &str = "\
The filter on the MCP route, pulled from an OCI registry (push it with scripts/wasm-image,
and pin the digest it prints with `sha256:`).";

/// The image reference without a scheme, as Envoy Gateway takes it; Istio's `url` adds `oci://`.
fn image_reference<'a>(wiring: &Wiring<'a>) -> &'a str {
    wiring.image.strip_prefix("oci://").unwrap_or(wiring.image)
}

pub fn istio(wiring: &Wiring<'_>) -> Result<String, String> {
    let gateway = json!({"istio": "ingressgateway"});
    let buffer = json!({
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "EnvoyFilter",
        "metadata": {"name": "switchblade-buffer", "namespace": "istio-system"},
        "spec": {
            "workloadSelector": {"labels": gateway},
            "configPatches": [
                {
                    "applyTo": "HTTP_FILTER",
                    "match": {
                        "context": "GATEWAY",
                        "listener": {"filterChain": {"filter": {
                            "name": "envoy.filters.network.http_connection_manager",
                            "subFilter": {"name": "envoy.filters.http.router"}
                        }}}
                    },
                    "patch": {
                        "operation": "INSERT_BEFORE",
                        "value": {
                            "name": "envoy.filters.http.buffer",
                            "disabled": true,
                            "typed_config": {
                                "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer",
                                "max_request_bytes": BUFFER_MAX_REQUEST_BYTES
                            }
                        }
                    }
                },
                {
                    "applyTo": "HTTP_ROUTE",
                    "match": {"context": "GATEWAY", "routeConfiguration": {"vhost": {"route": {"name": MCP_ROUTE}}}},
                    "patch": {
                        "operation": "MERGE",
                        "value": {"typed_per_filter_config": {"envoy.filters.http.buffer": {
                            "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.BufferPerRoute",
                            "buffer": {"max_request_bytes": BUFFER_MAX_REQUEST_BYTES}
                        }}}
                    }
                }
            ]
        }
    });
    let plugin = json!({
        "apiVersion": "extensions.istio.io/v1alpha1",
        "kind": "WasmPlugin",
        "metadata": {"name": "switchblade", "namespace": "istio-system"},
        "spec": {
            "selector": {"matchLabels": gateway},
            "url": format!("oci://{}", image_reference(wiring)),
            "imagePullPolicy": "IfNotPresent",
            "pluginName": "switchblade",
            "phase": "UNSPECIFIED_PHASE",
            "failStrategy": "FAIL_CLOSE",
            "type": "HTTP",
            "pluginConfig": wiring.plugin
        }
    });
    let plugin_comment = format!("{ISTIO_PLUGIN_COMMENT}{ISTIO_ADDRESS_NOTE}");
    documents(&[(ISTIO_BUFFER_COMMENT, buffer), (&plugin_comment, plugin)])
}

pub fn envoy_gateway(wiring: &Wiring<'_>) -> Result<String, String> {
    let mcp_route = json!([{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": MCP_ROUTE}]);
    let patches: Vec<Value> = stats_tags()
        .as_array()
        .into_iter()
        .flatten()
        .map(|rule| json!({"op": "add", "path": "/stats_config/stats_tags/-", "value": rule}))
        .collect();
    let proxy = json!({
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": "EnvoyProxy",
        "metadata": {"name": "switchblade"},
        "spec": {
            "filterOrder": [{"name": "envoy.filters.http.buffer", "after": "envoy.filters.http.wasm"}],
            "bootstrap": {"type": "JSONPatch", "jsonPatches": patches}
        }
    });
    let client = json!({
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": "ClientTrafficPolicy",
        "metadata": {"name": "mcp-client-address"},
        "spec": {
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": MCP_ROUTE}],
            "clientIPDetection": {"xForwardedFor": {"numTrustedHops": 0}}
        }
    });
    let buffer = json!({
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": "BackendTrafficPolicy",
        "metadata": {"name": "mcp-buffer"},
        "spec": {"targetRefs": mcp_route, "requestBuffer": {"limit": "1Mi"}}
    });
    let policy = json!({
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": "EnvoyExtensionPolicy",
        "metadata": {"name": "switchblade"},
        "spec": {
            "targetRefs": mcp_route,
            "wasm": [{
                "name": "switchblade",
                "rootID": "switchblade",
                "failOpen": false,
                "code": {"type": "Image", "image": {"url": image_reference(wiring)}},
                "config": wiring.plugin
            }]
        }
    });
    documents(&[
        (GATEWAY_PROXY_COMMENT, proxy),
        (GATEWAY_CLIENT_COMMENT, client),
        (GATEWAY_BUFFER_COMMENT, buffer),
        (GATEWAY_POLICY_COMMENT, policy),
    ])
}

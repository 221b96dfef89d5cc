//! The dynamic module in Envoy (`--format module`): a complete bootstrap with the filter, the
//! route of the calls it forwards, the HTTP/2 clusters and the stats' tag extraction.

use serde_json::{json, Value};

use super::{authentication, bootstrap_with, document, mcp_route, router_filter, Wiring, ROUTING_HEADER};

const COMMENT: &str = "\
Switchblade as an Envoy dynamic module (Envoy 1.40.0): a complete bootstrap. Run it with the
module's directory on Envoy's search path
  ENVOY_DYNAMIC_MODULES_SEARCH_PATH=target/module envoy -c FILE
or copy its parts into your own:
  1. http_filters: `switchblade` (the module), before the router. No buffer filter.
  2. The routed-call route, first in its virtual host: it matches the header
     x-switchblade-cluster AND the filter state switchblade.routed_call, which the module
     sets on each tool call it has checked and no client can write. Never match on the header
     alone: a client could then pick the route itself, around the filter's checks.
  3. The route for the MCP path, which the module answers itself.
  4. clusters: one HTTP/2 cluster per gRPC service; set each address (127.0.0.1:50051 here).
  5. stats_config: the tag extraction of Switchblade's stats (README: Observability).
The listener serves 127.0.0.1:10000, the admin 127.0.0.1:9901; put your other routes after
these two.";

/// The route of the tool calls the module forwards, to the cluster it names in the header.
fn routed_call_route() -> Value {
    json!({
        "match": {
            "prefix": "/",
            "headers": [{"name": ROUTING_HEADER, "present_match": true}],
            "filter_state": [{
                "key": "switchblade.routed_call",
                "string_match": {"safe_regex": {"regex": ".+"}}
            }]
        },
        "route": {"cluster_header": ROUTING_HEADER}
    })
}

pub fn bootstrap(wiring: &Wiring<'_>) -> Result<String, String> {
    let module = json!({
        "name": "switchblade",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter",
            "dynamic_module_config": {
                // Envoy loads libswitchblade_module.so from ENVOY_DYNAMIC_MODULES_SEARCH_PATH.
                "name": "switchblade_module",
                "do_not_close": true,
                // The module's stats are `switchblade.*`.
                "metrics_namespace": "switchblade"
            },
            "filter_name": "switchblade",
            "filter_config": {
                "@type": "type.googleapis.com/google.protobuf.StringValue",
                "value": format!("{}\n", wiring.plugin_json)
            }
        }
    });
    let routes = vec![routed_call_route(), mcp_route(wiring, "module")];
    let mut filters = authentication::filters(wiring, true);
    filters.extend([module, router_filter()]);
    document(COMMENT, &bootstrap_with(wiring, routes, filters)?)
}

//! The Wasm filter in Envoy: a complete bootstrap (`--format envoy`) and an ECDS resource file
//! (`--format ecds`).

use serde_json::{json, Value};

use super::{authentication, bootstrap_with, document, mcp_route, router_filter, Wiring, BUFFER_MAX_REQUEST_BYTES};

const BOOTSTRAP_COMMENT: &str = "\
Switchblade as Envoy's Wasm filter: a complete bootstrap. Run it as it is (`envoy -c FILE`,
from the directory the .wasm path is relative to), or copy its parts into your own:
  1. http_filters: `switchblade`, then `envoy.filters.http.buffer` (disabled), before the router.
  2. The route for the MCP path, before your other routes, with the buffer enabled on it
     (typed_per_filter_config): it holds MCP requests back from the router while the filter
     reads the body, and caps their size (Envoy answers 413 past it).
  3. clusters: one HTTP/2 cluster per gRPC service; set each address (127.0.0.1:50051 here).
  4. stats_config: the tag extraction of Switchblade's stats (README: Observability).
The listener serves 127.0.0.1:10000, the admin 127.0.0.1:9901; put your other routes after
the MCP one.";

const ECDS_COMMENT: &str = "\
ECDS resource for the switchblade filter. Write it beside the watched file, then rename it
over that file: Envoy swaps the configuration without a restart.";

/// The Wasm filter's `typed_config`, its configuration as JSON text.
fn wasm_typed_config(wiring: &Wiring<'_>) -> Value {
    json!({
        "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
        "config": {
            "name": "switchblade",
            "root_id": "switchblade",
            "vm_config": {
                "vm_id": "switchblade",
                "runtime": "envoy.wasm.runtime.v8",
                "code": {"local": {"filename": wiring.wasm}}
            },
            "configuration": {
                "@type": "type.googleapis.com/google.protobuf.StringValue",
                "value": format!("{}\n", wiring.plugin_json)
            }
        }
    })
}

pub fn bootstrap(wiring: &Wiring<'_>) -> Result<String, String> {
    let mut route = mcp_route(wiring, "filter");
    route["typed_per_filter_config"] = json!({
        "envoy.filters.http.buffer": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.BufferPerRoute",
            "buffer": {"max_request_bytes": BUFFER_MAX_REQUEST_BYTES}
        }
    });
    let mut filters = authentication::filters(wiring, false);
    filters.extend([
        json!({"name": "switchblade", "typed_config": wasm_typed_config(wiring)}),
        json!({
            "name": "envoy.filters.http.buffer",
            "disabled": true,
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer",
                "max_request_bytes": BUFFER_MAX_REQUEST_BYTES
            }
        }),
        router_filter(),
    ]);
    document(BOOTSTRAP_COMMENT, &bootstrap_with(wiring, vec![route], filters)?)
}

/// What a filter with `config_discovery` and a `path_config_source` reads.
pub fn ecds_resource(wiring: &Wiring<'_>) -> Result<String, String> {
    let resource = json!({"resources": [{
        "@type": "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig",
        "name": "switchblade",
        "typed_config": wasm_typed_config(wiring)
    }]});
    document(ECDS_COMMENT, &resource)
}

//! The call the benchmarks make: a `tools/call` of `CatalogService_GetItem` through the core,
//! planned from its JSON-RPC body (the request half) and answered with an item as the upstream
//! would encode it (the reply half).

use std::time::Duration;

use serde_json::Value;
use switchblade_core::access::Caller;
use switchblade_core::grpc::call_end::{CallEnd, GrpcReply};
use switchblade_core::http::McpHeaders;
use switchblade_core::observe::Observations;
use switchblade_core::server::{McpRequest, Outcome, Reply, Server};
use switchblade_core::upstream::UpstreamCall;

const CONFIG: &str = r#"{"services": {"demo.catalog.v1.CatalogService": {"cluster": "upstream"}}}"#;
pub const REQUEST: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"CatalogService_GetItem","arguments":{"id":"1"}}}"#;

pub struct GetItem {
    server: Server,
    headers: McpHeaders,
    /// The item the upstream answers with, protobuf-encoded.
    response: Vec<u8>,
}

impl GetItem {
    pub fn new() -> Self {
        let server = Server::from_config_bytes(CONFIG.as_bytes()).unwrap();
        let headers = McpHeaders {
            content_type: Some("application/json".into()),
            accept: Some("application/json, text/event-stream".into()),
            protocol_version: Some("2025-11-25".into()),
            ..McpHeaders::default()
        };
        let item: Value = serde_json::from_str(
            r#"{"id":"1","name":"Switchblade multitool","description":"A folding knife with eleven tools",
            "category":"CATEGORY_HARDWARE","price":{"currency_code":"EUR","amount_minor":"4999"},"stock":12,
            "tags":["edc","steel"],"attributes":{"sku":"SKU-0001"},"updated_at":"2026-01-01T01:00:00Z"}"#,
        )
        .unwrap();
        let tool = server.catalog().get("CatalogService_GetItem").unwrap();
        let response = server.catalog().gate().encode(&tool.method.output(), &item).unwrap();
        GetItem {
            server,
            headers,
            response,
        }
    }

    /// The request half: the body read, checked and encoded into the call to start.
    pub fn plan(&self) -> (Reply, Vec<UpstreamCall>) {
        let request = McpRequest {
            headers: &self.headers,
            body: REQUEST,
            caller: &Caller::Anyone,
            client_address: None,
            counters: None,
        };
        match self.server.handle(request, &mut Observations::default()) {
            Outcome::Await(mut reply) => {
                let calls = reply.take_calls_to_start();
                (reply, calls)
            }
            Outcome::Respond(answer) => panic!("no call: {}", String::from_utf8_lossy(&answer.body)),
            Outcome::Cancel { .. } => panic!("no call: a cancellation"),
        }
    }

    /// The reply half: the upstream's answer to `call` filed as the tool result.
    pub fn answer(&self, pending: &mut Reply, call: &UpstreamCall) {
        let reply = GrpcReply {
            status: 0,
            message: None,
            body: &self.response,
            details: None,
        };
        let end = CallEnd::Replied(reply);
        self.server
            .file(pending, call, end, Duration::ZERO, &mut Observations::default());
    }
}

//! The call the benchmarks make: a `tools/call` of `CatalogService_GetItem` through the core's
//! exchange, as a host drives it: the request's headers and body, then the call started (the
//! request half), and its answer whole, rendered and sent as the tool result (the reply half).
//! The host is the core's fake one, quiet: it writes down nothing but the calls out.

use serde_json::Value;
use switchblade_core::exchange::fake_host::{frame, whole_answer, FakeExchange, FakeHead, FakeHost, Sent};
use switchblade_core::exchange::Step;
use switchblade_core::server::Server;

const CONFIG: &str = r#"{"services": {"demo.catalog.v1.CatalogService": {"cluster": "upstream"}}}"#;
pub const REQUEST: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"CatalogService_GetItem","arguments":{"id":"1"}}}"#;

pub struct GetItem {
    server: Server,
    head: FakeHead,
    /// The item the upstream answers with, protobuf-encoded and framed.
    response: Vec<u8>,
}

impl GetItem {
    pub fn new() -> Self {
        let server = Server::from_config_bytes(CONFIG.as_bytes()).unwrap();
        let head = FakeHead::post("/mcp").with("content-length", REQUEST.len().to_string());
        let item: Value = serde_json::from_str(
            r#"{"id":"1","name":"Switchblade multitool","description":"A folding knife with eleven tools",
            "category":"CATEGORY_HARDWARE","price":{"currency_code":"EUR","amount_minor":"4999"},"stock":12,
            "tags":["edc","steel"],"attributes":{"sku":"SKU-0001"},"updated_at":"2026-01-01T01:00:00Z"}"#,
        )
        .unwrap();
        let tool = server.catalog().get("CatalogService_GetItem").unwrap();
        let response = frame(&server.catalog().gate().encode(&tool.method.output(), &item).unwrap());
        GetItem { server, head, response }
    }

    /// A host for the calls: quiet for timing and counting, or one that keeps the answer.
    pub fn host(quiet: bool) -> FakeHost {
        FakeHost {
            quiet,
            ..FakeHost::default()
        }
    }

    /// The request half: the headers and body read, checked and encoded into the call started.
    pub fn plan(&self, host: &mut FakeHost) -> FakeExchange {
        host.next_exchange();
        let mut exchange = FakeExchange::default();
        assert_eq!(
            exchange.request_headers(&self.server, host, &self.head, false),
            Step::ReadBody
        );
        let step = exchange.request_body(&self.server, host, REQUEST.len(), true, || REQUEST.to_vec());
        assert_eq!(step, Step::Waiting, "no call: {:?}", host.sent);
        exchange
    }

    /// The reply half: the upstream's answer heard whole, and the tool result sent.
    pub fn answer(&self, exchange: &mut FakeExchange, host: &mut FakeHost) {
        let id = host.out[0];
        host.call_gone(id);
        let read = || whole_answer(&self.response, &[("grpc-status", b"0")]);
        exchange.call_answered(&self.server, host, id, self.response.len(), read);
        assert!(host.has_answered());
    }

    /// One call whole, and the JSON-RPC answer it got.
    pub fn answered(&self) -> Value {
        let mut host = Self::host(false);
        let mut exchange = self.plan(&mut host);
        self.answer(&mut exchange, &mut host);
        let [Sent::Whole(200, body)] = &host.sent[..] else {
            panic!("{:?}", host.sent)
        };
        serde_json::from_str(body).unwrap()
    }
}

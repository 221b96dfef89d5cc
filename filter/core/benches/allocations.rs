//! How many blocks the filter allocates per `tools/call`, natively:
//! `cargo bench -p switchblade-core --bench allocations`.
//!
//! The same `CatalogService_GetItem` call as `hot_path`, counted instead of timed (the counting
//! allocator takes a lock per allocation, so it lives in its own binary). With
//! `SWITCHBLADE_DHAT=1` it also writes `dhat-heap.json`, each allocation site with its stack.

// A benchmark: a broken expectation should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::Duration;

use serde_json::Value;
use switchblade_core::access::Caller;
use switchblade_core::grpc::call_end::{CallEnd, GrpcReply};
use switchblade_core::http::McpHeaders;
use switchblade_core::observe::Observations;
use switchblade_core::server::{McpRequest, Outcome, Server};

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

const CONFIG: &str = r#"{"services": {"demo.catalog.v1.CatalogService": {"cluster": "upstream"}}}"#;
const REQUEST: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"CatalogService_GetItem","arguments":{"id":"1"}}}"#;
const CALLS: u64 = 1000;

fn main() {
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
    let call = || {
        let outcome = server.handle(
            McpRequest {
                headers: &headers,
                body: REQUEST,
                caller: &Caller::Anyone,
                client_address: None,
                counters: None,
            },
            &mut Observations::default(),
        );
        let Outcome::Await(mut pending) = outcome else {
            panic!("no call");
        };
        let calls = pending.take_calls_to_start();
        let reply = GrpcReply {
            status: 0,
            message: None,
            body: &response,
            details: None,
        };
        let requested = dhat::HeapStats::get().total_blocks;
        let end = CallEnd::Replied(reply);
        server.file(
            &mut pending,
            &calls[0],
            end,
            Duration::ZERO,
            &mut Observations::default(),
        );
        black_box(pending.into_response());
        requested
    };
    let profiler = match std::env::var_os("SWITCHBLADE_DHAT") {
        Some(_) => dhat::Profiler::new_heap(),
        None => dhat::Profiler::builder().testing().build(),
    };
    // What the first call sets up once (lazily built tables) is not the call's.
    call();
    let (mut request_half, mut both) = (0, 0);
    for _ in 0..CALLS {
        let before = dhat::HeapStats::get().total_blocks;
        let requested = call();
        request_half += requested - before;
        both += dhat::HeapStats::get().total_blocks - before;
    }
    drop(profiler);
    println!("tools/call CatalogService_GetItem, natively, blocks allocated per call:");
    println!("  request half (parse, validate, encode)    {:8}", request_half / CALLS);
    println!(
        "  reply half (decode, render the result)    {:8}",
        (both - request_half) / CALLS
    );
}

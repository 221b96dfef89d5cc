//! The filter's own work per `tools/call`, natively: `cargo bench -p switchblade-core --bench hot_path`.
//!
//! Measures the request half (headers read, body parsed, validated, transcoded to protobuf, the
//! call started) and the reply half (the response decoded, the result rendered and sent) of a
//! `CatalogService_GetItem` call through the exchange over a quiet fake host, against an
//! anchor run side by side: serde_json parsing the same request and writing the same answer,
//! the least JSON work any MCP server does. Then the cost of buf.validate rules: the gate on
//! an order whose 37 fields all carry rules, against the same gate with the rules gone.
//! Prints nanoseconds and ratios; asserts nothing.

// A benchmark: a broken expectation should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::Instant;

use prost::Message;
use serde_json::{json, Value};
use switchblade_core::descriptors::EMBEDDED_DESCRIPTOR_SET;
use switchblade_core::proto_json::gate::Gate;

mod get_item;
use get_item::{GetItem, REQUEST};

const ITERATIONS: u32 = 100_000;

const ROUNDS: u32 = 10;

/// Nanoseconds per call of `work`: the best of several rounds, after a warm-up, since other
/// work on the machine only ever adds time.
fn time(mut work: impl FnMut()) -> f64 {
    for _ in 0..ITERATIONS / ROUNDS {
        work();
    }
    (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..ITERATIONS / ROUNDS {
                work();
            }
            started.elapsed().as_nanos() as f64 / f64::from(ITERATIONS / ROUNDS)
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let get_item = GetItem::new();
    let mut host = GetItem::host(true);
    let request_half = time(|| {
        black_box(get_item.plan(&mut host));
    });
    let reply_half = time(|| {
        let mut exchange = get_item.plan(&mut host);
        get_item.answer(&mut exchange, &mut host);
        black_box(exchange);
    }) - request_half;
    let answer = get_item.answered();
    assert_eq!(answer["result"]["structuredContent"]["name"], "Switchblade multitool");
    let anchor = time(|| {
        let request: Value = serde_json::from_slice(black_box(REQUEST)).unwrap();
        black_box(request);
        black_box(serde_json::to_vec(&answer).unwrap());
    });

    let total = request_half + reply_half;
    println!(
        "tools/call CatalogService_GetItem, natively, best of {ROUNDS} rounds of {} calls:",
        ITERATIONS / ROUNDS
    );
    println!("  request half (read, check, encode, start) {request_half:8.0} ns");
    println!("  reply half (decode, render, send)         {reply_half:8.0} ns");
    println!("  both                                      {total:8.0} ns");
    println!("  anchor: serde_json parse + write only     {anchor:8.0} ns");
    println!("  ratio both / anchor                       {:8.2}", total / anchor);
    rules_cost();
}

/// The gate on one `test.rules.v1.Order`, with its rules and without: decoded into prost_types
/// and encoded again, the descriptors lose every custom option, buf.validate's included.
fn rules_cost() {
    let with_rules = prost_reflect::DescriptorPool::decode(EMBEDDED_DESCRIPTOR_SET).unwrap();
    let bare_set = prost_types::FileDescriptorSet::decode(EMBEDDED_DESCRIPTOR_SET).unwrap();
    let without_rules = prost_reflect::DescriptorPool::decode(bare_set.encode_to_vec().as_slice()).unwrap();
    let order = json!({
        "name": "ada", "phone": "+15551234", "email": "ada@example.com", "website": "https://example.com/a?b#c",
        "request_id": "8a9c1e0e-7b1f-4c1e-9f5e-0d2b6a3c4e5f", "host": "example.com", "client_ip": "::1",
        "sku": "SKU-1234", "tier": "pro", "endpoint": "example.com:443", "subnet": "10.0.0.0/8",
        "quantity": 100, "account": 14, "discount": 0.5, "port": 80, "weight": 1.5, "offset": -1,
        "batch": 20, "terms_accepted": true, "token": "AAECAw==", "raw_ip": "fwAAAQ==", "magic": "iVBORw==",
        "color": "COLOR_RED", "shade": "COLOR_GREEN", "tags": ["a", "b"], "limits": {"x": 0},
        "timeout": "30s", "not_before": "2001-01-01T00:00:00Z", "placed_at": "2020-01-01T00:00:00Z",
        "update_mask": "name,tags", "priority": 5, "ship_to": {"city": "Oslo", "country": "NO"}, "coupon": "C",
        "nickname": "nick", "note": "hello",
        "extra": {"@type": "type.googleapis.com/google.protobuf.Duration", "value": "1s"},
    });
    let timed = |pool: &prost_reflect::DescriptorPool| {
        let gate = Gate::build(pool).unwrap();
        let message = pool.get_message_by_name("test.rules.v1.Order").unwrap();
        gate.encode(&message, &order).unwrap();
        time(|| {
            black_box(gate.encode(&message, black_box(&order)).unwrap());
        })
    };
    let (checked, unchecked) = (timed(&with_rules), timed(&without_rules));
    println!("gate on test.rules.v1.Order (37 fields, every rule family):");
    println!("  without its rules                         {unchecked:8.0} ns");
    println!("  with its rules                            {checked:8.0} ns");
    println!(
        "  the rules' cost                           {:8.0} ns ({:.2}x)",
        checked - unchecked,
        checked / unchecked
    );
}

//! Any bytes from the upstream: as the HTTP body of a call's answer (framed, so that the message
//! decoder of every kitchen-sink type sees them, or raw, for the framing), as `grpc-message` and
//! as `grpc-status-details-bin`.
#![no_main]

#[path = "kitchen_sink.rs"]
mod kitchen_sink;

use libfuzzer_sys::fuzz_target;
use switchblade_core::exchange::fake_host::{frame, whole_answer};
use switchblade_core::exchange::Step;

fuzz_target!(|data: &[u8]| {
    let first = data.first().copied().unwrap_or_default();
    let body = if first & 2 == 0 { frame(data) } else { data.to_vec() };
    let status: &[u8] = if first & 1 == 1 { b"3" } else { b"0" };
    let trailers = [
        ("grpc-status", status),
        ("grpc-message", data),
        ("grpc-status-details-bin", data),
    ];
    for (tool, arguments) in [
        ("KitchenSinkService_Echo", r#"{"must":"m"}"#),
        ("KitchenSinkService_EchoTree", "{}"),
        ("KitchenSinkService_EchoTime", "{}"),
        ("KitchenSinkService_Ping", "{}"),
    ] {
        kitchen_sink::call(tool, arguments, |server, exchange, step, host| {
            assert_eq!(step, Step::Waiting, "{tool} did not become a call");
            let id = host.out[0];
            host.call_gone(id);
            exchange.call_answered(server, host, id, body.len(), || whole_answer(&body, &trailers));
            assert!(host.has_answered(), "{tool}: no answer to its call's end");
        });
    }
});

//! Any bytes from the upstream: as a response message of every kitchen-sink type, and as
//! `grpc-status-details-bin`.
#![no_main]

#[path = "kitchen_sink.rs"]
mod kitchen_sink;

use libfuzzer_sys::fuzz_target;
use switchblade_core::server::Outcome;
use switchblade_core::upstream::{CallEnd, GrpcReply};

fuzz_target!(|data: &[u8]| {
    for (tool, arguments) in [
        ("KitchenSinkService_Echo", r#"{"must":"m"}"#),
        ("KitchenSinkService_EchoTree", "{}"),
        ("KitchenSinkService_EchoTime", "{}"),
        ("KitchenSinkService_Ping", "{}"),
    ] {
        kitchen_sink::call(tool, arguments, |server, outcome| {
            let Outcome::Await(mut reply) = outcome else {
                panic!("{tool} did not become a call");
            };
            let calls = reply.take_calls_to_start();
            let status = if data.first().is_some_and(|b| b & 1 == 1) { 3 } else { 0 };
            server.file(&mut reply, &calls[0], CallEnd::Replied(GrpcReply { status, message: None, body: data, details: Some(data) }));
            let _ = reply.into_response();
        });
    }
});

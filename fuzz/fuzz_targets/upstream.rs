//! Any bytes from the upstream: as the HTTP body of a call's answer (framed, so that the message
//! decoder of every kitchen-sink type sees them, or raw, for the framing), as `grpc-message` and
//! as `grpc-status-details-bin`.
#![no_main]

#[path = "kitchen_sink.rs"]
mod kitchen_sink;

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use switchblade_core::observe::Observations;
use switchblade_core::server::Outcome;
use switchblade_core::grpc::call_end::call_end;

fuzz_target!(|data: &[u8]| {
    let first = data.first().copied().unwrap_or_default();
    let body = if first & 2 == 0 {
        let mut frame = vec![0];
        frame.extend_from_slice(&u32::try_from(data.len()).unwrap_or(u32::MAX).to_be_bytes());
        frame.extend_from_slice(data);
        frame
    } else {
        data.to_vec()
    };
    let status: &[u8] = if first & 1 == 1 { b"3" } else { b"0" };
    let headers = [(":status", b"200".as_slice()), ("content-type", b"application/grpc".as_slice())];
    let trailers = [("grpc-status", status), ("grpc-message", data), ("grpc-status-details-bin", data)];
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
            let mut observed = Observations::default();
            server.file(&mut reply, &calls[0], call_end(&headers, &body, &trailers), Duration::ZERO, &mut observed);
            let _ = (observed.samples(), observed.log_fields());
            let _ = reply.into_response();
        });
    }
});

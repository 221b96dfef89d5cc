//! A stream of answers cut at arbitrary chunk boundaries: the decoder gathers the same messages
//! and ends the same way however the bytes are split (checked against a reading of the whole
//! body, frame by frame), keeps to its bounds, and the exchange answers any such stream as a
//! tool result without panicking.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use switchblade_core::exchange::fake_host::{post, FakeExchange, FakeHead, FakeHost, Sent};
use switchblade_core::exchange::Step;
use switchblade_core::grpc::call_end::CallPart;
use switchblade_core::grpc::stream::{EndReason, StreamCollector};
use switchblade_core::http::HeaderCopy;
use switchblade_core::server::Server;

thread_local! {
    static SERVER: Server = Server::from_config_bytes(
        br#"{"limits":{"max_response_bytes":4096},
             "services":{"demo.catalog.v1.CatalogService":{"cluster":"c","streaming":true,"max_messages":8}}}"#,
    )
    .expect("the fuzz configuration is valid");
}

const WATCH: &[u8] =
    br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"CatalogService_WatchItems","arguments":{}}}"#;

/// The messages of `body` read frame by frame, up to the bounds, and why reading stopped.
fn reference(body: &[u8], max_messages: usize, max_bytes: usize) -> (Vec<Vec<u8>>, Result<EndReason, ()>) {
    let (mut messages, mut bytes, mut rest) = (Vec::new(), 0usize, body);
    loop {
        if messages.len() >= max_messages {
            return (messages, Ok(EndReason::MaxMessages));
        }
        if rest.is_empty() {
            return (messages, Ok(EndReason::Complete));
        }
        if rest.len() < 5 {
            // A frame prefix cut short: a broken stream, unless a bound had stopped it.
            return (messages, Err(()));
        }
        if rest[0] != 0 {
            return (messages, Err(()));
        }
        let length = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        if length > max_bytes - bytes {
            return (messages, Ok(EndReason::MaxBytes));
        }
        if rest.len() < 5 + length {
            return (messages, Err(()));
        }
        messages.push(rest[5..5 + length].to_vec());
        bytes += length;
        rest = &rest[5 + length..];
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&[bounds, cuts], rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let max_messages = usize::from(bounds % 8) + 1;
    let max_bytes = usize::from(bounds / 8) * 16;
    // The next `cuts` bytes are chunk lengths; the rest is the body.
    let cuts = usize::from(cuts % 16).min(rest.len());
    let (lengths, body) = rest.split_at(cuts);
    let mut chunks = Vec::new();
    let mut remaining = body;
    for length in lengths.iter().map(|length| usize::from(*length)) {
        let (chunk, after) = remaining.split_at(length.min(remaining.len()));
        chunks.push(chunk);
        remaining = after;
    }
    chunks.push(remaining);

    let mut whole = StreamCollector::new(max_messages, max_bytes);
    whole.feed(body);
    let mut cut = StreamCollector::new(max_messages, max_bytes);
    let completed: usize = chunks.iter().map(|chunk| cut.feed(chunk)).sum();
    assert_eq!(
        cut.messages(),
        whole.messages(),
        "the messages depend on where the body was cut"
    );
    assert_eq!(completed, cut.messages().len());
    assert_eq!(cut.end(false), whole.end(false));
    assert_eq!(cut.end(true), whole.end(true));
    assert!(cut.messages().len() <= max_messages);
    assert!(cut.messages().iter().map(Vec::len).sum::<usize>() <= max_bytes);

    let (expected, ending) = reference(body, max_messages, max_bytes);
    assert_eq!(cut.messages(), expected.as_slice());
    match ending {
        Ok(reason) => assert_eq!(cut.end(false), Ok(reason)),
        Err(()) => assert!(cut.end(false).is_err()),
    }

    SERVER.with(|server| {
        let mut host = FakeHost::default();
        let (mut exchange, step) = post(server, &mut host, &FakeHead::post("/mcp"), WATCH);
        assert_eq!(step, Step::Waiting, "the watch makes a call");
        let id = host.out[0];
        let heard =
            |exchange: &mut FakeExchange, host: &mut FakeHost, part| exchange.call_heard(server, host, id, part);
        heard(
            &mut exchange,
            &mut host,
            CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])),
        );
        for chunk in &chunks {
            heard(&mut exchange, &mut host, CallPart::Data(chunk));
            if host.out.is_empty() {
                // A bound reached: the exchange reset the call.
                break;
            }
        }
        if !host.out.is_empty() {
            heard(
                &mut exchange,
                &mut host,
                CallPart::Trailers(HeaderCopy::from_iter([("grpc-status", "0")])),
            );
            host.clock = Duration::from_millis(1);
            host.call_gone(id);
            exchange.call_ended(server, &mut host, id, false);
        }
        let [Sent::Whole(200, body)] = &host.sent[..] else {
            panic!("one answer, whole: {:?}", host.sent);
        };
        let answer: Value = serde_json::from_str(body).expect("the answer is JSON");
        assert!(answer["result"]["content"][0]["text"].is_string(), "{answer}");
    });
});

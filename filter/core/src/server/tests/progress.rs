//! Progress notifications: the token a client names them by is bounded, and their bytes count
//! against the answer's bound, so that one request cannot be multiplied into a large answer.

use super::*;
use crate::grpc::call_end::CallPart;
use crate::http::HeaderCopy;
use crate::server::tool_call::MAX_PROGRESS_TOKEN_BYTES;

fn streaming_server(max_response_bytes: usize) -> Server {
    let config = format!(
        r#"{{"services": {{"demo.catalog.v1.CatalogService": {{"cluster": "catalog", "streaming": true}}}},
            "limits": {{"max_response_bytes": {max_response_bytes}}}}}"#
    );
    Server::from_config_bytes(config.as_bytes()).unwrap()
}

fn watch(token: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "CatalogService_WatchItems", "arguments": {"ids": ["1"]}, "_meta": {"progressToken": token}}})
    .to_string()
}

#[test]
fn a_progress_token_is_a_short_string_or_an_integer() {
    let server = streaming_server(1 << 20);
    let longest = "p".repeat(MAX_PROGRESS_TOKEN_BYTES);
    for token in [json!(longest), json!(7), json!(-7), json!(u64::MAX)] {
        assert!(
            matches!(post(&server, &legacy("2025-11-25"), &watch(&token)), Outcome::Await(_)),
            "{token}"
        );
    }
    for (token, problem) in [
        (json!("p".repeat(MAX_PROGRESS_TOKEN_BYTES + 1)), "is 129 bytes long"),
        (json!("x".repeat(100 * 1024)), "is 102400 bytes long"),
        (json!(1.5), "is a number that is not an integer"),
        (json!({"a": 1}), "is an object"),
        (json!(null), "is null"),
    ] {
        let (status, body) = answer(post(&server, &legacy("2025-11-25"), &watch(&token)));
        assert_eq!((status, &body["error"]["code"]), (200, &json!(INVALID_PARAMS)));
        assert_eq!(
            body["error"]["message"],
            format!("Invalid params: params._meta.progressToken {problem}; a progress token is a string of at most 128 bytes or an integer")
        );
    }
}

/// `ItemEvent { sequence: 150 }`, 3 bytes.
const SEQUENCE_150: &[u8] = b"\x18\x96\x01";

/// Messages of 3 bytes and a bound of 1,000: the notifications' bytes count too, so the stream
/// stops well before 100 messages (300 bytes), and what went out (events and messages) stays within it.
#[test]
fn progress_notifications_count_against_the_response_bound() {
    let bound = 1_000;
    let server = streaming_server(bound);
    let token = json!("p".repeat(MAX_PROGRESS_TOKEN_BYTES));
    let Outcome::Await(mut reply) = post(&server, &legacy("2025-11-25"), &watch(&token)) else {
        panic!("expected calls");
    };
    server.start_calls(&mut reply, |_| Ok(1), Duration::ZERO, &mut Observations::default());
    server.heard(
        &mut reply,
        1,
        CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])),
    );
    let mut events = Vec::new();
    let mut messages = 0;
    for _ in 0..100 {
        let heard = server.heard(&mut reply, 1, CallPart::Message(SEQUENCE_150));
        messages += 1;
        if let Some(more) = reply.take_progress_events() {
            events.extend(more);
        }
        if heard.stop {
            break;
        }
    }
    assert!(messages < 10, "{messages} messages gathered");
    assert!(
        events.len() + messages * SEQUENCE_150.len() <= bound,
        "{} bytes of events",
        events.len()
    );
    server.call_ended(&mut reply, 1, true, Duration::ZERO, &mut Observations::default());
    let body = String::from_utf8(reply.into_response().body).unwrap();
    assert!(body.contains(r#""end":{"reason":"max_bytes","count":"#), "{body}");
}

/// A message whose size is known before it is read (the Wasm filter's gRPC streams) stops
/// the stream unread when it would pass the bound.
#[test]
fn a_message_past_the_bound_stops_the_stream_before_it_is_read() {
    let server = streaming_server(1_000);
    let Outcome::Await(mut reply) = post(&server, &legacy("2025-11-25"), &watch(&json!(1))) else {
        panic!("expected calls");
    };
    server.start_calls(&mut reply, |_| Ok(1), Duration::ZERO, &mut Observations::default());
    server.heard(
        &mut reply,
        1,
        CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])),
    );
    assert!(!server.admits_message(&mut reply, 1, 500).stop);
    assert!(server.admits_message(&mut reply, 1, 1_001).stop);
    server.call_ended(&mut reply, 1, true, Duration::ZERO, &mut Observations::default());
    let body = String::from_utf8(reply.into_response().body).unwrap();
    assert!(body.contains(r#""end":{"reason":"max_bytes","count":0}"#), "{body}");
}

//! `notifications/cancelled` (handshake eras): what the core hands a host to cancel with, and
//! what it answers for the request cancelled.

use super::*;
use crate::grpc::call_end::CallPart;
use crate::http::HeaderCopy;
use crate::observe::CallOutcome;

const STREAMING: &str =
    r#"{"services": {"demo.catalog.v1.CatalogService": {"cluster": "catalog", "streaming": true}}}"#;

fn streaming_server() -> Server {
    Server::from_config_bytes(STREAMING.as_bytes()).unwrap()
}

fn watch(id: u64, progress: bool) -> String {
    let meta = if progress {
        r#","_meta":{"progressToken":"p"}"#
    } else {
        ""
    };
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"CatalogService_WatchItems","arguments":{{"ids":["1"]}}{meta}}}}}"#
    )
}

fn cancelled(params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{params}}}"#)
}

fn awaiting(outcome: Outcome) -> Reply {
    match outcome {
        Outcome::Await(reply) => reply,
        _ => panic!("expected calls"),
    }
}

#[test]
fn a_cancellation_names_the_request_and_is_accepted() {
    let server = streaming_server();
    for id in [r#"7"#, r#""seven""#] {
        match post(
            &server,
            &legacy("2025-11-25"),
            &cancelled(&format!(r#"{{"requestId":{id},"reason":"x"}}"#)),
        ) {
            Outcome::Cancel { request_id, response } => {
                assert_eq!(request_id.to_string(), id);
                assert_eq!(response.status, 202);
                assert!(response.body.is_empty());
            }
            other => panic!("expected a cancellation, got {other:?}"),
        }
    }
}

#[test]
fn malformed_cancellations_and_the_modern_era_are_only_accepted() {
    let server = streaming_server();
    for params in [
        r#"{}"#,
        r#"{"requestId":null}"#,
        r#"{"requestId":1.5}"#,
        r#"{"requestId":{}}"#,
        r#"7"#,
    ] {
        let (status, body) = answer(post(&server, &legacy("2025-11-25"), &cancelled(params)));
        assert_eq!((status, body), (202, Value::Null), "{params}");
    }
    let notification =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "_meta": meta()}});
    let (status, _) = answer(post(
        &server,
        &modern("notifications/cancelled", None),
        &notification.to_string(),
    ));
    assert_eq!(status, 202);
}

#[test]
fn only_a_lone_streaming_call_can_be_cancelled() {
    let server = streaming_server();
    let reply = awaiting(post(&server, &legacy("2025-11-25"), &watch(9, false)));
    assert_eq!(reply.cancellable_id(), Some(&json!(9)));
    let unary = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"CatalogService_GetItem","arguments":{"id":"1"}}}"#;
    let reply = awaiting(post(&server, &legacy("2025-11-25"), unary));
    assert_eq!(reply.cancellable_id(), None);
    let batch = format!("[{},{}]", watch(1, false), watch(2, false));
    let reply = awaiting(post(&server, &legacy(crate::eras::BATCH_VERSION), &batch));
    assert_eq!(reply.cancellable_id(), None);
}

#[test]
fn a_cancelled_call_is_stopped_counted_and_answered_with_no_response() {
    let server = streaming_server();
    let mut reply = awaiting(post(&server, &legacy("2025-11-25"), &watch(9, false)));
    let started = server.start_calls(&mut reply, |_| Ok(41), Duration::ZERO, &mut Observations::default());
    assert!(!started);
    let mut observed = Observations::default();
    let cancelled = server.cancel(reply, Duration::from_millis(30), &mut observed);
    assert_eq!(cancelled.calls, [41]);
    let response = cancelled.response.unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(
        response.body,
        crate::cancel::CANCELLED_COMMENT,
        "an SSE comment, no JSON-RPC message"
    );
    assert!(response
        .headers
        .iter()
        .any(|(name, value)| *name == "content-type" && value == "text/event-stream"));
    let calls = observed.tool_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].outcome, CallOutcome::Cancelled);
    assert_eq!(calls[0].outcome.label(), "cancelled");
    assert_eq!(calls[0].upstream_time, Some(Duration::from_millis(30)));
}

#[test]
fn a_cancelled_sse_answer_is_ended_by_the_host() {
    let server = streaming_server();
    let mut reply = awaiting(post(&server, &legacy("2025-11-25"), &watch(9, true)));
    server.start_calls(&mut reply, |_| Ok(5), Duration::ZERO, &mut Observations::default());
    server.heard(
        &mut reply,
        5,
        CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])),
    );
    server.heard(&mut reply, 5, CallPart::Message(&[]));
    assert!(reply.take_progress_events().is_some());
    let cancelled = server.cancel(reply, Duration::ZERO, &mut Observations::default());
    assert_eq!(cancelled.calls, [5]);
    assert!(
        cancelled.response.is_none(),
        "the SSE answer has begun: the host ends it"
    );
}

#[test]
fn a_stream_its_upstream_ends_at_the_deadline_closed_its_window() {
    // WatchItems' window is the default, 10 s. At its end, whatever error the upstream ends the
    // stream with is the window closing: DEADLINE_EXCEEDED from a server that keeps its
    // deadline, UNKNOWN from etcd (its handler returns the context's error), CANCELLED from tonic.
    for (ended_at_ms, status, message, deadline) in [
        (10_000, "4", "", true),
        (10_000, "2", "context deadline exceeded", true),
        (9_960, "1", "Timeout expired", true),
        (9_000, "4", "", false),
        (9_000, "2", "context deadline exceeded", false),
    ] {
        let server = streaming_server();
        let mut reply = awaiting(post(&server, &legacy("2025-11-25"), &watch(9, false)));
        server.start_calls(&mut reply, |_| Ok(1), Duration::ZERO, &mut Observations::default());
        server.heard(
            &mut reply,
            1,
            CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])),
        );
        server.heard(&mut reply, 1, CallPart::Data(&[0, 0, 0, 0, 0]));
        server.heard(
            &mut reply,
            1,
            CallPart::Trailers(HeaderCopy::from_iter([
                ("grpc-status", status),
                ("grpc-message", message),
            ])),
        );
        let now = Duration::from_millis(ended_at_ms);
        server.call_ended(&mut reply, 1, false, now, &mut Observations::default());
        let (_, body) = finish(reply);
        let result = &body["result"];
        if deadline {
            assert_eq!(result["isError"], false, "{result}");
            assert_eq!(
                result["structuredContent"]["end"],
                json!({"reason": "deadline", "count": 1}),
                "{status} at {ended_at_ms} ms"
            );
        } else {
            assert_eq!(
                result["isError"], true,
                "an upstream's own error before the window closes is an error: {result}"
            );
        }
    }
}

#[test]
fn a_stream_tells_its_upstream_a_deadline_past_its_window() {
    // The filter closes the window; the upstream's own deadline comes a second later, so that a
    // server keeping it does not end the stream first. A unary call sends the tool's deadline.
    let server = streaming_server();
    let get_item = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"CatalogService_GetItem","arguments":{"id":"1"}}}"#;
    for (request, expected) in [(watch(9, false), "11000m"), (get_item.to_owned(), "10000m")] {
        let mut reply = awaiting(post(&server, &legacy("2025-11-25"), &request));
        let mut sent = Vec::new();
        let start = |call: &UpstreamCall| {
            sent.push(call.grpc_timeout().to_owned());
            Ok(1)
        };
        server.start_calls(&mut reply, start, Duration::ZERO, &mut Observations::default());
        assert_eq!(sent, [expected]);
    }
}

//! The host contract for upstream calls: starting what may go, hearing answers in parts or
//! whole, the bounds on a batch, and how a call cut off at its deadline ends.

use std::cell::RefCell;

use super::*;
use crate::eras::BATCH_VERSION;
use crate::grpc::call_end::CallPart;
use crate::http::HeaderCopy;

fn bounded(limits: &str) -> Server {
    let config = CONFIG.replacen('{', &format!(r#"{{"limits": {{{limits}}},"#), 1);
    Server::from_config_bytes(config.as_bytes()).unwrap()
}

fn batch_of_calls(count: usize) -> String {
    let calls: Vec<String> = (0..count)
        .map(|id| {
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"UserService_GetUser","arguments":{{"user_id":7}}}}}}"#)
        })
        .collect();
    format!("[{}]", calls.join(","))
}

fn awaiting(outcome: Outcome) -> Reply {
    match outcome {
        Outcome::Await(reply) => reply,
        Outcome::Respond(response) => panic!("expected calls, got {}", String::from_utf8_lossy(&response.body)),
        Outcome::Cancel { .. } => panic!("expected calls, got a cancellation"),
    }
}

/// Hears a whole successful answer to `token`, in parts, and its end.
fn hear_success(server: &Server, reply: &mut Reply, token: u64) {
    server.heard(
        reply,
        token,
        CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])),
    );
    server.heard(reply, token, CallPart::Data(&[0, 0, 0, 0, 2, 0x08, 7]));
    server.heard(
        reply,
        token,
        CallPart::Trailers(HeaderCopy::from_iter([("grpc-status", "0")])),
    );
    server.call_ended(
        reply,
        token,
        false,
        Duration::from_millis(5),
        &mut Observations::default(),
    );
}

#[test]
fn at_most_the_bound_is_out_and_the_rest_start_as_calls_end() {
    let server = bounded(r#""max_calls_in_flight": 2"#);
    let mut reply = awaiting(post(&server, &legacy(BATCH_VERSION), &batch_of_calls(5)));
    let started = RefCell::new(Vec::new());
    let start = |_: &UpstreamCall| {
        let mut started = started.borrow_mut();
        let token = started.len() as u64 + 1;
        started.push(token);
        Ok(token)
    };
    let mut observed = Observations::default();
    assert!(!server.start_calls(&mut reply, start, Duration::ZERO, &mut observed));
    assert_eq!(*started.borrow(), [1, 2]);
    hear_success(&server, &mut reply, 1);
    assert!(!server.start_calls(&mut reply, start, Duration::ZERO, &mut observed));
    assert_eq!(*started.borrow(), [1, 2, 3]);
    for token in [2, 3] {
        hear_success(&server, &mut reply, token);
    }
    server.start_calls(&mut reply, start, Duration::ZERO, &mut observed);
    for token in [4, 5] {
        hear_success(&server, &mut reply, token);
    }
    assert!(server.start_calls(&mut reply, start, Duration::ZERO, &mut observed));
    let (status, answers) = finish(reply);
    assert_eq!(status, 200);
    let users: Vec<&Value> = answers
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["result"]["structuredContent"]["user_id"])
        .collect();
    assert_eq!(users, [7, 7, 7, 7, 7]);
}

#[test]
fn calls_that_cannot_start_are_filed_and_free_their_place() {
    let server = bounded(r#""max_calls_in_flight": 1"#);
    let mut reply = awaiting(post(&server, &legacy(BATCH_VERSION), &batch_of_calls(3)));
    let refuse = |_: &UpstreamCall| Err("no such cluster".to_owned());
    assert!(server.start_calls(&mut reply, refuse, Duration::ZERO, &mut Observations::default()));
    let (_, answers) = finish(reply);
    for answer in answers.as_array().unwrap() {
        let text = answer["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.ends_with("could not be started: no such cluster"), "{text}");
    }
}

#[test]
fn what_is_heard_of_a_call_not_out_is_ignored() {
    let server = server();
    let mut reply = awaiting(call_user(&server, &legacy("2025-06-18"), r#"{"user_id":7}"#));
    server.start_calls(&mut reply, |_| Ok(1), Duration::ZERO, &mut Observations::default());
    server.heard(&mut reply, 9, CallPart::Data(b"stray"));
    server.call_ended(&mut reply, 9, false, Duration::ZERO, &mut Observations::default());
    assert!(!reply.is_complete());
    hear_success(&server, &mut reply, 1);
    server.call_ended(&mut reply, 1, true, Duration::ZERO, &mut Observations::default());
    let (_, body) = finish(reply);
    assert_eq!(body["result"]["structuredContent"]["user_id"], 7);
}

#[test]
fn an_answer_heard_whole_over_the_limit_is_not_read() {
    let server = bounded(r#""max_response_bytes": 10"#);
    let mut reply = awaiting(call_user(&server, &legacy("2025-06-18"), r#"{"user_id":7}"#));
    server.start_calls(&mut reply, |_| Ok(1), Duration::ZERO, &mut Observations::default());
    let read = || -> crate::grpc::call_end::WholeCallResponse { panic!("read an answer over the limit") };
    server.call_answered(&mut reply, 1, 16, read, Duration::ZERO, &mut Observations::default());
    let (_, body) = finish(reply);
    let text = body["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.ends_with("the response has 11 bytes; the limit is 10 (limits.max_response_bytes)"),
        "{text}"
    );
}

/// The text of a GetUser call started at 100 s (its deadline is the default, 10 s) whose
/// upstream answered `headers` and then ended (`reset`: without a whole answer) `ended_at_ms`
/// after it started.
fn call_ended_at(ended_at_ms: u64, headers: &[(&str, &str)], reset: bool) -> String {
    let server = server();
    let mut reply = awaiting(call_user(&server, &legacy("2025-06-18"), r#"{"user_id":7}"#));
    let started = Duration::from_secs(100);
    server.start_calls(&mut reply, |_| Ok(1), started, &mut Observations::default());
    server.heard(&mut reply, 1, CallPart::Headers(headers.iter().copied().collect()));
    let now = started + Duration::from_millis(ended_at_ms);
    server.call_ended(&mut reply, 1, reset, now, &mut Observations::default());
    let (_, body) = finish(reply);
    body["result"]["content"][0]["text"].as_str().unwrap().to_owned()
}

#[test]
fn a_call_cut_off_at_its_deadline_is_deadline_exceeded_and_earlier_unavailable() {
    for (ended_at_ms, expected) in [
        (10_000, "DEADLINE_EXCEEDED (4): no answer within the 10000 ms deadline"),
        (9_000, "UNAVAILABLE (14)"),
    ] {
        let text = call_ended_at(ended_at_ms, &[(":status", "200")], true);
        assert!(text.contains(expected), "{ended_at_ms}: {text}");
    }
}

#[test]
fn an_upstream_cancelled_at_the_deadline_is_deadline_exceeded_and_earlier_cancelled() {
    // The upstream's own timer, on the grpc-timeout it was sent, can answer before the host's.
    let trailers_only = [
        (":status", "200"),
        ("grpc-status", "1"),
        ("grpc-message", "Timeout expired"),
    ];
    for (ended_at_ms, expected) in [
        (10_000, "DEADLINE_EXCEEDED (4): no answer within the 10000 ms deadline"),
        (9_960, "DEADLINE_EXCEEDED (4): no answer within the 10000 ms deadline"),
        (9_000, "CANCELLED (1): Timeout expired"),
    ] {
        let text = call_ended_at(ended_at_ms, &trailers_only, false);
        assert!(text.contains(expected), "{ended_at_ms}: {text}");
    }
}

#[test]
fn a_batch_is_refused_past_its_size() {
    let server = bounded(r#""max_batch_size": 3"#);
    assert!(matches!(
        post(&server, &legacy(BATCH_VERSION), &batch_of_calls(3)),
        Outcome::Await(_)
    ));
    let (status, body) = answer(post(&server, &legacy(BATCH_VERSION), &batch_of_calls(4)));
    assert_eq!(status, 400);
    assert_eq!(
        body["error"]["message"],
        "Invalid Request: the batch has 4 messages; the limit is 3 (limits.max_batch_size)"
    );
}

#[test]
fn a_batchs_reply_keeps_to_its_bound_whatever_order_calls_end_in() {
    let server = bounded(r#""max_batch_reply_bytes": 700"#);
    let mut reply = awaiting(post(&server, &legacy(BATCH_VERSION), &batch_of_calls(4)));
    let mut tokens = 0;
    server.start_calls(
        &mut reply,
        |_| {
            tokens += 1;
            Ok(tokens)
        },
        Duration::ZERO,
        &mut Observations::default(),
    );
    for token in [4, 2, 3, 1] {
        hear_success(&server, &mut reply, token);
    }
    assert!(reply.is_complete());
    let response = reply.into_response();
    assert!(response.body.len() <= 700 + 400, "{}", response.body.len());
    let answers: Value = serde_json::from_slice(&response.body).unwrap();
    let kinds: Vec<bool> = answers
        .as_array()
        .unwrap()
        .iter()
        .map(|answer| answer.get("result").is_some())
        .collect();
    assert!(kinds.contains(&true) && kinds.contains(&false), "{answers}");
    let refused = answers
        .as_array()
        .unwrap()
        .iter()
        .find(|answer| answer.get("error").is_some())
        .unwrap();
    assert_eq!(refused["error"]["code"], -32603);
    assert!(refused["error"]["message"]
        .as_str()
        .unwrap()
        .contains("over 700 bytes (limits.max_batch_reply_bytes)"));
}

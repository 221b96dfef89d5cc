//! What a request tells an operator: the stats samples and access-log fields of each kind of
//! request, from the server that handled it.

use super::*;
use crate::grpc::status::status_name;
use crate::http::HeaderPair;
use crate::http::Refusal;
use crate::observe::{CallOutcome, Metric, Sample};

fn tool_call(name: &str, arguments: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{name}","arguments":{arguments}}}}}"#)
}

fn sample<'a>(metric: Metric, labels: &[&'a str], value: u64) -> Sample<'a> {
    Sample {
        metric,
        labels: labels.into(),
        value,
    }
}

#[test]
fn a_call_is_counted_by_tool_outcome_and_status_with_its_upstream_time() {
    let server = server();
    let (outcome, mut observed) = observe(
        &server,
        &legacy("2025-06-18"),
        &tool_call("UserService_GetUser", r#"{"user_id":7}"#),
    );
    let (mut reply, mut calls) = super::calls(outcome);
    let call = calls.remove(0);
    reply.started(9, call, Duration::from_millis(1_000));
    let (call, _) = reply.take(9).unwrap();
    server.file(
        &mut reply,
        &call,
        CallEnd::Replied(USER_7),
        Duration::from_millis(1_042),
        &mut observed,
    );
    assert_eq!(
        observed.samples().as_slice(),
        [
            sample(Metric::Requests, &["tools/call", "2025-06-18"], 1),
            sample(Metric::ToolCalls, &["UserService_GetUser", "success", "OK"], 1),
            sample(Metric::ToolUpstreamMs, &["UserService_GetUser"], 42),
        ]
    );
    assert_eq!(
        observed.log_fields(),
        [
            ("protocol_version", "2025-06-18".to_owned()),
            ("method", "tools/call".to_owned()),
            ("tool", "UserService_GetUser".to_owned()),
            ("outcome", "success".to_owned()),
            ("grpc_status", "OK".to_owned()),
        ]
    );
}

#[test]
fn failures_are_counted_by_kind() {
    let server = server();
    let not_found = GrpcReply {
        status: 5,
        message: Some(b"no user 7"),
        body: &[],
        details: None,
    };
    let cases = [
        (CallEnd::Replied(not_found), CallOutcome::ToolError, "NOT_FOUND", true),
        (
            CallEnd::DeadlinePassed,
            CallOutcome::DeadlineExceeded,
            "DEADLINE_EXCEEDED",
            true,
        ),
        (CallEnd::Reset, CallOutcome::Unavailable, "UNAVAILABLE", true),
        (
            CallEnd::HttpError { status: 503, body: b"" },
            CallOutcome::Unavailable,
            "UNAVAILABLE",
            true,
        ),
        (
            CallEnd::Malformed { problem: "bad frame" },
            CallOutcome::ToolError,
            "INTERNAL",
            true,
        ),
        (
            CallEnd::NotStarted { reason: "no cluster" },
            CallOutcome::Unavailable,
            "UNAVAILABLE",
            false,
        ),
    ];
    for (end, outcome, status, sent) in cases {
        let mut observed = Observations::default();
        let (mut reply, calls) = super::calls(call_user(&server, &json_headers(), r#"{"user_id":7}"#));
        let call = calls.into_iter().next().unwrap();
        let call = if sent {
            reply.started(1, call, Duration::from_millis(5));
            reply.take(1).unwrap().0
        } else {
            call
        };
        server.file(&mut reply, &call, end, Duration::from_millis(8), &mut observed);
        let [record] = observed.tool_calls() else {
            panic!("one call")
        };
        assert_eq!((record.outcome, status_name(record.grpc_status)), (outcome, status));
        assert_eq!(record.upstream_time, sent.then(|| Duration::from_millis(3)));
    }
}

#[test]
fn arguments_refused_at_the_gate_name_the_path_and_were_never_sent() {
    let (_, observed) = observe(
        &server(),
        &json_headers(),
        &tool_call("UserService_GetUser", r#"{"user_id":{"$ne":null}}"#),
    );
    assert_eq!(
        observed.samples().as_slice(),
        [
            sample(Metric::Requests, &["tools/call", "2025-03-26"], 1),
            sample(
                Metric::ToolCalls,
                &["UserService_GetUser", "invalid_arguments", "INVALID_ARGUMENT"],
                1
            ),
        ]
    );
    let fields = observed.log_fields();
    assert!(fields.contains(&("refused_path", "user_id".to_owned())), "{fields:?}");
}

#[test]
fn a_tool_no_catalog_has_is_no_series() {
    let (_, observed) = observe(&server(), &json_headers(), &tool_call("Made_Up_Tool", "{}"));
    assert_eq!(
        observed.samples().as_slice(),
        [sample(Metric::Requests, &["tools/call", "2025-03-26"], 1)]
    );
}

#[test]
fn refusals_at_the_boundary_say_why() {
    let server = server();
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let cases: [(McpHeaders, &str, Refusal); 6] = [
        (
            McpHeaders {
                content_type: Some("text/plain".into()),
                ..json_headers()
            },
            ping,
            Refusal::UnsupportedMediaType,
        ),
        (
            McpHeaders {
                accept: Some("text/html".into()),
                ..json_headers()
            },
            ping,
            Refusal::NotAcceptable,
        ),
        (
            McpHeaders {
                origin: Some("http://evil.example".into()),
                ..json_headers()
            },
            ping,
            Refusal::OriginNotAllowed,
        ),
        (json_headers(), "{not json", Refusal::InvalidJson),
        (legacy("1999-01-01"), ping, Refusal::ProtocolVersion),
        (legacy("2025-06-18"), &format!("[{ping}]"), Refusal::Batch),
    ];
    for (headers, body, refusal) in cases {
        let (outcome, observed) = observe(&server, &headers, body);
        assert!(matches!(outcome, Outcome::Respond(_)));
        assert_eq!(observed.refusal(), Some(refusal), "{body}");
        assert_eq!(
            observed.samples().as_slice(),
            [sample(Metric::HttpRefusals, &[refusal.label()], 1)]
        );
    }
    let mut observed = Observations::default();
    let get: &[HeaderPair<'_>] = &[(":method", b"GET")];
    assert!(server.admit_headers("/mcp", get, &mut observed).is_err());
    assert_eq!(observed.refusal(), Some(Refusal::MethodNotAllowed));
    let mut observed = Observations::default();
    assert!(server.refuse_body_over_limit(1 << 30, &mut observed).is_some());
    assert_eq!(observed.refusal(), Some(Refusal::PayloadTooLarge));
}

#[test]
fn a_batch_logs_each_call_in_order() {
    let server = server();
    let body = format!(
        "[{},{}]",
        tool_call("UserService_GetUser", r#"{"user_id":"x"}"#),
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#
    );
    let (_, observed) = observe(&server, &legacy("2025-03-26"), &body);
    let fields = observed.log_fields();
    assert!(
        fields.contains(&("method", "tools/call,tools/list".to_owned())),
        "{fields:?}"
    );
    assert!(
        fields.contains(&("outcome", "invalid_arguments".to_owned())),
        "{fields:?}"
    );
}

#[test]
fn the_trace_context_goes_upstream_unless_turned_off() {
    let traced = McpHeaders::from_pairs(
        [
            ("content-type", "application/json"),
            ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
            ("tracestate", "vendor=1"),
        ],
        &server().forward_headers,
    );
    let (_, sent) = super::calls(call_user(&server(), &traced, r#"{"user_id":7}"#));
    let metadata: Vec<_> = sent[0].metadata().map(|(name, _)| name).collect();
    assert_eq!(metadata, ["x-tenant", "traceparent", "tracestate"]);
    let config = CONFIG.replacen('{', r#"{"forward_trace_context": false,"#, 1);
    let quiet = Server::from_config_bytes(config.as_bytes()).unwrap();
    assert_eq!(quiet.forward_headers, ["x-client-version", "x-request-id"]);
}

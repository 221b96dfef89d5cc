//! The filter run natively against a fake Envoy ([`fake_envoy`]): the SDK's dispatcher, this
//! adapter and the core, as they run in Envoy's VM, with the host's side written down. What a
//! request reads, the callouts and streams it starts, what the root context's tick does on its
//! behalf, and what two workers' VMs share. (The same paths run through a real Envoy in
//! `test-harness/tests`.)

mod fake_envoy;

use std::sync::Arc;
use std::time::Duration;

use proxy_wasm::types::{Action, BufferType, MapType};
use serde_json::Value;

use fake_envoy::{call, envoy, Envoy, LocalReply, Map};

const GET_USER: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"UserService_GetUser","arguments":{"user_id":1}}}"#;
/// demo.users.v1.User{user_id: 1, username: "ada"}, in one gRPC frame.
const USER_FRAME: &[u8] = &[0, 0, 0, 0, 7, 0x08, 1, 0x12, 3, b'a', b'd', b'a'];
const WATCH: &str =
    r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"CatalogService_WatchItems","arguments":{}}}"#;
/// The client's session, which names its requests for a cancellation.
const SESSION: (&str, &[u8]) = ("mcp-session-id", b"s1");

fn users() -> String {
    r#"{"services": {"demo.users.v1.UserService": {"cluster": "users", "timeout_ms": 5000}}}"#.to_owned()
}

fn catalog(limits: &str) -> String {
    format!(
        r#"{{"services": {{"demo.catalog.v1.CatalogService": {{"cluster": "catalog", "streaming": true, "timeout_ms": 1000}}}},
            "limits": {{{limits}}}}}"#
    )
}

fn map(pairs: &[(&str, &[u8])]) -> Map {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), value.to_vec()))
        .collect()
}

/// Sends `body` to the MCP path as request `context`: its headers, then its body in one chunk.
fn post(context: u32, body: &str, extra: &[(&str, &[u8])]) -> (Action, Action) {
    let mut headers = map(&[
        (":method", b"POST"),
        (":path", b"/mcp"),
        (":authority", b"localhost"),
        ("content-type", b"application/json"),
        ("accept", b"application/json, text/event-stream"),
    ]);
    headers.extend(map(extra));
    let head = call::request_headers(context, headers, false);
    (head, call::request_body(context, body.as_bytes(), true))
}

fn value_of<'a>(headers: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|(known, _)| known == name)
        .map(|(_, value)| value.as_slice())
}

/// The one reply sent for `context`, with its body as JSON.
fn reply_to(context: u32) -> (LocalReply, Value) {
    let replies: Vec<LocalReply> = envoy(|envoy| envoy.replies.clone())
        .into_iter()
        .filter(|reply| reply.context == context)
        .collect();
    assert_eq!(replies.len(), 1, "one reply for context {context}: {replies:?}");
    let reply = replies[0].clone();
    let body = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
    (reply, body)
}

fn grpc_ok() -> (Map, Map) {
    (
        map(&[(":status", b"200"), ("content-type", b"application/grpc")]),
        map(&[("grpc-status", b"0")]),
    )
}

fn advance(by: Duration) {
    let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
    envoy(|envoy| envoy.now_nanos += nanos);
}

/// The tool result of a JSON-RPC answer.
fn structured(answer: &Value) -> &Value {
    &answer["result"]["structuredContent"]
}

/// The access-log fields set for the request, by key.
fn log_field(envoy: &Envoy, key: &str) -> Option<String> {
    envoy
        .properties_set
        .iter()
        .rev()
        .find(|(path, _)| path == key)
        .map(|(_, value)| String::from_utf8_lossy(value).into_owned())
}

#[test]
fn a_tool_call_is_one_callout_answered_whole() {
    assert!(call::start(&users()));
    envoy(|envoy| envoy.now_nanos = 1_000_000_000);
    assert_eq!(envoy(|envoy| envoy.tick_period_ms), None, "nothing for a tick to do");
    // The headers go on (the `buffer` filter after this one holds them); the body pauses.
    assert_eq!(post(2, GET_USER, &[]), (Action::Continue, Action::Pause));
    let callout = envoy(|envoy| envoy.callouts.clone());
    assert_eq!(callout.len(), 1);
    let callout = &callout[0];
    assert_eq!(callout.cluster, "users");
    assert_eq!(callout.timeout_ms, 5000);
    assert_eq!(
        value_of(&callout.headers, ":path"),
        Some(&b"/demo.users.v1.UserService/GetUser"[..])
    );
    assert_eq!(value_of(&callout.headers, "grpc-timeout"), Some(&b"5000m"[..]));
    // GetUserRequest{user_id: 1}, framed.
    assert_eq!(callout.body, [0, 0, 0, 0, 2, 0x08, 1]);
    assert!(envoy(|envoy| envoy.replies.is_empty()), "waiting for the call");

    let (headers, trailers) = grpc_ok();
    advance(Duration::from_millis(3));
    call::callout_answered(callout.token, headers, USER_FRAME, trailers);
    let (reply, answer) = reply_to(2);
    assert_eq!(reply.status, 200);
    assert_eq!(value_of(&reply.headers, "content-type"), Some(&b"application/json"[..]));
    assert_eq!(answer["id"], 7);
    assert_eq!(structured(&answer)["username"], "ada");
    assert_eq!(answer["result"]["isError"], false);
    // What the request told: a counted call, its latency, and the access log's fields.
    envoy(|envoy| {
        let calls = "switchblade.tool_calls.tool.UserService_GetUser.outcome.success.grpc_status.OK";
        assert_eq!(envoy.metric(calls), Some(1), "{:?}", envoy.metrics);
        assert_eq!(
            log_field(envoy, "switchblade.tool").as_deref(),
            Some("UserService_GetUser")
        );
        assert_eq!(log_field(envoy, "switchblade.grpc_status").as_deref(), Some("OK"));
    });
    call::done(2);
    assert_eq!(
        envoy(|envoy| envoy.replies.len()),
        1,
        "nothing more when the stream ends"
    );
}

#[test]
fn other_paths_are_let_through_with_one_header_read() {
    assert!(call::start(&users()));
    let headers = map(&[(":method", b"GET"), (":path", b"/healthz")]);
    assert_eq!(call::request_headers(2, headers, true), Action::Continue);
    call::done(2);
    envoy(|envoy| {
        assert!(envoy.replies.is_empty());
        assert!(envoy.callouts.is_empty());
        assert_eq!(
            envoy.map_reads.get(&MapType::HttpRequestHeaders),
            None,
            "never copied whole"
        );
        assert!(envoy.properties_set.is_empty(), "nothing for the access log");
    });
}

/// Header values are bytes: a client's (any header) or an upstream's (`grpc-message`) that is
/// not UTF-8 is read without a panic, which would kill the VM for every later request.
#[test]
fn header_values_that_are_not_utf8_are_read_without_a_panic() {
    assert!(call::start(&users()));
    post(2, GET_USER, &[("x-note", &[0xff, 0xfe, b'a'])]);
    let token = envoy(|envoy| envoy.callouts[0].token);
    let (headers, _) = grpc_ok();
    let trailers = map(&[("grpc-status", b"5"), ("grpc-message", &[b'n', 0xff, b'o'])]);
    call::callout_answered(token, headers, &[], trailers);
    let (reply, answer) = reply_to(2);
    assert_eq!(reply.status, 200);
    assert_eq!(answer["result"]["isError"], true);
    let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("NOT_FOUND"), "{text}");
    // The VM lives on: the next request is served.
    post(3, GET_USER, &[]);
    assert_eq!(envoy(|envoy| envoy.callouts.len()), 2);
}

#[test]
fn a_callout_the_host_refuses_is_answered_at_once() {
    assert!(call::start(&users()));
    envoy(|envoy| envoy.refuses_calls = true);
    post(2, GET_USER, &[]);
    let (reply, answer) = reply_to(2);
    assert_eq!(reply.status, 200);
    assert_eq!(answer["result"]["isError"], true, "{answer}");
}

/// demo.catalog.v1.ItemEvent{item: {id: n}}, as Envoy's gRPC client hands it (unframed).
fn item_event(id: u8) -> Vec<u8> {
    vec![0x0a, 2, 0x08, id]
}

/// Opens the watch of request `context` and hears its first event; the stream's token.
fn watching(context: u32, extra: &[(&str, &[u8])]) -> u32 {
    assert_eq!(post(context, WATCH, extra), (Action::Continue, Action::Pause));
    let token = envoy(|envoy| envoy.streams.last().map(|stream| stream.token).unwrap_or_default());
    call::stream_initial_metadata(token);
    call::stream_message(token, &item_event(1));
    token
}

/// Proxy-wasm's gRPC streams take no timeout: the root context's tick ends a stream at its
/// deadline, and the call's result is what came until then.
#[test]
fn a_stream_is_opened_half_closed_and_ended_by_the_tick_at_its_deadline() {
    assert!(call::start(&catalog("")));
    assert_eq!(
        envoy(|envoy| envoy.tick_period_ms),
        Some(100),
        "streams are looked at each 100 ms"
    );
    envoy(|envoy| envoy.now_nanos = 1_000_000_000);
    let token = watching(2, &[]);
    let stream = envoy(|envoy| envoy.streams[0].clone());
    assert_eq!(stream.cluster, "catalog");
    assert_eq!(stream.path, "/demo.catalog.v1.CatalogService/WatchItems");
    // Sent so that the upstream stops too, a grace later than the window (whose end is a
    // deadline of the filter's, not an error of the upstream's).
    assert_eq!(value_of(&stream.metadata, "grpc-timeout"), Some(&b"2000m"[..]));
    // One empty request message, and the half-close.
    assert_eq!(stream.messages, [Vec::<u8>::new()]);
    assert!(stream.half_closed);

    advance(Duration::from_millis(900));
    call::tick();
    assert!(envoy(|envoy| envoy.replies.is_empty()), "before the deadline");
    advance(Duration::from_millis(200));
    call::tick();
    assert!(envoy(|envoy| envoy.streams[0].cancelled), "stopped at the deadline");
    let (reply, answer) = reply_to(2);
    assert_eq!(reply.status, 200);
    assert_eq!(
        structured(&answer)["end"],
        serde_json::json!({"reason": "deadline", "count": 1})
    );
    assert_eq!(structured(&answer)["messages"][0]["item"]["id"], "1");
    // Envoy's close of the cancelled stream changes nothing.
    call::stream_closed(token, 1, Vec::new());
    assert_eq!(envoy(|envoy| envoy.replies.len()), 1);
}

/// The status of a closed stream comes as a number; its message, in the trailing metadata.
#[test]
fn a_stream_closed_with_an_error_is_a_tool_error_with_its_message() {
    assert!(call::start(&catalog("")));
    let token = watching(2, &[]);
    call::stream_closed(token, 7, map(&[("grpc-status", b"7"), ("grpc-message", b"not yours")]));
    let (_, answer) = reply_to(2);
    assert_eq!(answer["result"]["isError"], true);
    let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("PERMISSION_DENIED") && text.contains("not yours"),
        "{text}"
    );
}

/// A message past `max_response_bytes` stops the stream before it is copied into the VM,
/// whose memory never shrinks.
#[test]
fn a_message_past_the_bound_is_never_copied_into_the_vm() {
    assert!(call::start(&catalog(r#""max_response_bytes": 64"#)));
    let token = watching(2, &[]);
    let reads = || envoy(|envoy| envoy.buffer_reads.get(&BufferType::GrpcReceiveBuffer).copied());
    assert_eq!(reads(), Some(1));
    call::stream_message(token, &[0; 100]);
    assert_eq!(reads(), Some(1), "the large message was not read");
    assert!(envoy(|envoy| envoy.streams[0].cancelled));
    let (_, answer) = reply_to(2);
    assert_eq!(structured(&answer)["end"]["reason"], "max_bytes", "{answer}");
}

/// A client's `notifications/cancelled` may reach another worker than the stream it cancels:
/// it goes through shared data, and the tick of the stream's VM stops it. Each worker is one
/// thread here, with a VM of its own.
#[test]
fn a_cancellation_heard_by_another_worker_stops_the_stream_at_the_next_tick() {
    assert!(call::start(&catalog("")));
    let shared = envoy(|envoy| Arc::clone(&envoy.shared));
    let token = watching(2, &[SESSION]);
    let other_worker = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || {
            envoy(|envoy| envoy.shared = shared);
            assert!(call::start(&catalog("")));
            let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}"#;
            post(2, cancel, &[SESSION]);
            reply_to(2).0.status
        })
    };
    assert_eq!(other_worker.join().ok(), Some(202));
    let keys: Vec<String> = shared
        .lock()
        .map(|data| data.keys().cloned().collect())
        .unwrap_or_default();
    assert!(
        keys.iter()
            .any(|key| key.starts_with("switchblade/switchblade/cancelled/")),
        "under the plugin's own prefix: {keys:?}"
    );
    advance(Duration::from_millis(100));
    call::tick();
    assert!(envoy(|envoy| envoy.streams[0].cancelled));
    let (_, answer) = reply_to(2);
    assert!(
        answer.get("result").is_none(),
        "no result for a cancelled request: {answer}"
    );
    assert_eq!(
        envoy(|envoy| log_field(envoy, "switchblade.outcome")).as_deref(),
        Some("cancelled")
    );
    call::stream_closed(token, 1, Vec::new());
    assert_eq!(envoy(|envoy| envoy.replies.len()), 1);
}

/// Without `tasks.keys`, the workers agree on one key through shared data: the first VM
/// makes it, the others read it (a poll may reach any worker).
#[test]
fn workers_share_one_task_key() {
    let key = "switchblade/switchblade/tasks/process_key";
    assert!(call::start(&users()));
    let shared = envoy(|envoy| Arc::clone(&envoy.shared));
    let first = shared.lock().ok().and_then(|data| data.get(key).cloned());
    let (value, version) = first.unwrap_or_default();
    assert_eq!((value.len(), version), (32, 1));
    let other_worker = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || {
            envoy(|envoy| envoy.shared = shared);
            call::start(&users())
        })
    };
    assert_eq!(other_worker.join().ok(), Some(true));
    let second = shared.lock().ok().and_then(|data| data.get(key).cloned());
    assert_eq!(second, Some((value, 1)), "read, not written again");
}

/// A task tool's call from a caller without tasks waits for its Operation: the tick starts
/// each poll on the request's behalf, and its answer, which the SDK hands to the root
/// context, is filed into the request, whose reply goes out under its own context.
#[test]
fn a_tasks_polls_are_started_by_the_tick_and_answered_to_its_request() {
    use prost::Message;
    use switchblade_core::tasks::operation::{Any, Operation};

    let configuration = r#"{"services": {"demo.exports.v1.ExportService": {"cluster": "exports", "operations_cluster": "ops"}},
        "tasks": {"keys": ["BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="], "wait_poll_interval_ms": 50}}"#;
    assert!(call::start(configuration));
    envoy(|envoy| envoy.now_nanos = 1_000_000_000);
    let export = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ExportService_ExportCatalog","arguments":{}}}"#;
    post(2, export, &[("mcp-protocol-version", b"2025-06-18")]);
    let answer = |token: u32, operation: &Operation| {
        let message = operation.encode_to_vec();
        let mut frame = vec![0];
        frame.extend_from_slice(&u32::try_from(message.len()).unwrap_or_default().to_be_bytes());
        frame.extend_from_slice(&message);
        let (headers, trailers) = grpc_ok();
        call::callout_answered(token, headers, &frame, trailers);
    };
    let running = Operation {
        name: "operations/export-1".into(),
        ..Operation::default()
    };
    let first = envoy(|envoy| envoy.callouts[0].clone());
    assert_eq!(first.cluster, "exports");
    answer(first.token, &running);
    assert!(envoy(|envoy| envoy.replies.is_empty()), "waiting");
    call::tick();
    assert_eq!(envoy(|envoy| envoy.callouts.len()), 1, "not due yet");
    advance(Duration::from_millis(60));
    call::tick();
    let poll = envoy(|envoy| envoy.callouts[1].clone());
    assert_eq!(poll.cluster, "ops");
    assert_eq!(poll.context, 2, "started on the request's behalf");
    assert_eq!(
        value_of(&poll.headers, ":path"),
        Some(&b"/google.longrunning.Operations/GetOperation"[..])
    );
    let done = Operation {
        done: true,
        response: Some(Any {
            type_url: "type.googleapis.com/demo.exports.v1.ExportCatalogResponse".into(),
            value: vec![0x10, 0x02],
        }),
        ..running
    };
    answer(poll.token, &done);
    let (_, answer) = reply_to(2);
    assert_eq!(structured(&answer)["item_count"], 2, "{answer}");
}

#[test]
fn an_invalid_configuration_is_refused_with_its_reason_logged() {
    assert!(!call::start(
        r#"{"services": {"demo.users.v1.NoSuchService": {"cluster": "users"}}}"#
    ));
    let logs = envoy(|envoy| envoy.logs.clone());
    assert!(
        logs.iter()
            .any(|(_, line)| line.contains("invalid plugin configuration") && line.contains("NoSuchService")),
        "{logs:?}"
    );
}

/// Reflection is read by the root context: its calls are the root's callouts, answered to it,
/// and a refresh that fails is counted (an upstream without v1 is asked v1alpha first).
#[test]
fn reflection_is_read_by_the_root_context_and_a_failed_refresh_counted() {
    let configuration =
        r#"{"services": {"demo.catalog.v1.CatalogService": {"cluster": "catalog", "from_reflection": true}}}"#;
    assert!(call::start(configuration));
    assert_eq!(envoy(|envoy| envoy.tick_period_ms), Some(500), "reflection's pace");
    let unimplemented = || map(&[(":status", b"200"), ("grpc-status", b"12")]);
    let asked = |index: usize| {
        let callout = envoy(|envoy| envoy.callouts[index].clone());
        assert_eq!((callout.context, callout.cluster.as_str()), (call::ROOT, "catalog"));
        let path = value_of(&callout.headers, ":path").unwrap_or_default();
        (callout.token, String::from_utf8_lossy(path).into_owned())
    };
    let (token, path) = asked(0);
    assert_eq!(path, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo");
    call::callout_answered(token, unimplemented(), &[], Vec::new());
    let (token, path) = asked(1);
    assert_eq!(path, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo");
    call::callout_answered(token, unimplemented(), &[], Vec::new());
    envoy(|envoy| {
        let failed = "switchblade.reflection_refreshes.outcome.failed";
        assert_eq!(envoy.metric(failed), Some(1), "{:?}", envoy.metrics);
        assert!(envoy.replies.is_empty());
    });
}

/// A request that goes away while its stream is out (the client closed the connection): the
/// stream is cancelled, what the request told is published, and nothing is answered.
#[test]
fn a_request_gone_while_its_stream_is_out_cancels_it() {
    assert!(call::start(&catalog("")));
    watching(2, &[]);
    call::done(2);
    envoy(|envoy| {
        assert!(envoy.streams[0].cancelled);
        assert!(envoy.replies.is_empty());
        let cancelled = "switchblade.tool_calls.tool.CatalogService_WatchItems.outcome.cancelled.grpc_status.CANCELLED";
        assert_eq!(envoy.metric(cancelled), Some(1), "{:?}", envoy.metrics);
        assert!(
            envoy.properties_set.is_empty(),
            "no access-log fields for a context that is done"
        );
    });
    // The tick has nothing left to end for it.
    advance(Duration::from_secs(5));
    call::tick();
    assert!(envoy(|envoy| envoy.replies.is_empty()));
}

#[test]
fn a_body_over_the_limit_is_refused_before_it_is_read() {
    assert!(call::start(&catalog(r#""max_request_bytes": 64"#)));
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(100)
    );
    let head = call::request_headers(2, map(&[(":method", b"POST"), (":path", b"/mcp")]), false);
    assert_eq!(head, Action::Continue);
    assert_eq!(call::request_body(2, body.as_bytes(), false), Action::Pause);
    let (reply, _) = reply_to(2);
    assert_eq!(reply.status, 413);
    assert_eq!(
        envoy(|envoy| envoy.buffer_reads.get(&BufferType::HttpRequestBody).copied()),
        None,
        "never copied into the VM"
    );
}

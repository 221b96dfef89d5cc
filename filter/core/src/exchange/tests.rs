//! The exchange over a fake host: what each event makes the host do, for every path a request
//! takes through it.

use std::time::Duration;

use base64::Engine;
use prost::Message;
use serde_json::{json, Value};

use super::fake_host::{frame, whole_answer, FakeExchange, FakeHead as Head, FakeHost, Sent};
use super::*;
use crate::http::HeaderCopy;
use crate::tasks::operation::Operation;

const CONFIG: &str = r#"{
    "limits": {"max_request_bytes": 4096},
    "services": {"demo.catalog.v1.CatalogService": {"cluster": "catalog", "streaming": true}}}"#;

pub(super) fn server() -> Server {
    Server::from_config_bytes(CONFIG.as_bytes()).unwrap()
}

/// The calls started: their ids and methods.
fn started(host: &FakeHost) -> Vec<(CallId, String)> {
    host.started.iter().map(|call| (call.id, call.method.clone())).collect()
}

fn call(id: u64, name: &str, arguments: Value, meta: Option<Value>) -> String {
    let mut params = json!({"name": name, "arguments": arguments});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
}

pub(super) fn get_item() -> String {
    call(7, "CatalogService_GetItem", json!({"id": "1"}), None)
}

pub(super) fn watch(progress: bool) -> String {
    let meta = progress.then(|| json!({"progressToken": "p"}));
    call(9, "CatalogService_WatchItems", json!({"ids": ["1"]}), meta)
}

/// Posts `body` in one chunk, as a host would: its headers, then the body.
pub(super) fn post(server: &Server, host: &mut FakeHost, body: &str) -> (FakeExchange, Step) {
    let mut exchange = FakeExchange::default();
    let head = Head::post("/mcp").with("content-length", body.len().to_string());
    assert_eq!(exchange.request_headers(server, host, &head, false), Step::ReadBody);
    let step = exchange.request_body(server, host, body.len(), true, || body.as_bytes().to_vec());
    (exchange, step)
}

pub(super) fn json_of(sent: &Sent) -> Value {
    let (Sent::Whole(_, body) | Sent::Part(body, _)) = sent else {
        panic!("no body in {sent:?}");
    };
    let body = body.strip_prefix("event: message\ndata: ").unwrap_or(body);
    serde_json::from_str(body.trim_end()).unwrap_or_else(|error| panic!("{error}: {body}"))
}

/// `message` answered whole: headers, one frame, an OK status.
pub(super) fn answered_ok(message: &[u8]) -> WholeCallResponse {
    whole_answer(&frame(message), &[("grpc-status", b"0")])
}

/// `Item { id: 1, name: "pen" }`.
pub(super) const ITEM: &[u8] = b"\x08\x01\x12\x03pen";
/// `ItemEvent { sequence: 150 }`.
pub(super) const EVENT: &[u8] = b"\x18\x96\x01";

#[test]
fn another_path_passes_through_untouched() {
    let (server, mut host) = (server(), FakeHost::default());
    let mut exchange = FakeExchange::default();
    let step = exchange.request_headers(&server, &mut host, &Head::post("/other"), false);
    assert_eq!(step, Step::Continue);
    assert_eq!(
        exchange.request_body(&server, &mut host, 10, true, Vec::new),
        Step::Continue
    );
    assert!(host.sent.is_empty() && host.published.is_empty());
}

#[test]
fn the_header_phase_answers_before_the_body() {
    let (server, mut host) = (server(), FakeHost::default());
    let get = Head::post("/mcp").with(":method", "GET");
    assert_eq!(
        FakeExchange::default().request_headers(&server, &mut host, &get, false),
        Step::Answered
    );
    let long = Head::post("/mcp").with("content-length", "5000");
    host.next_exchange();
    assert_eq!(
        FakeExchange::default().request_headers(&server, &mut host, &long, false),
        Step::Answered
    );
    assert!(
        matches!(host.sent[..], [Sent::Whole(405, _), Sent::Whole(413, _)]),
        "{:?}",
        host.sent
    );
    // Published before each answer went.
    assert_eq!(host.published, [0, 1]);
}

#[test]
fn a_body_is_refused_as_soon_as_it_outgrows_the_limit() {
    let (server, mut host) = (server(), FakeHost::default());
    let mut exchange = FakeExchange::default();
    assert_eq!(
        exchange.request_headers(&server, &mut host, &Head::post("/mcp"), false),
        Step::ReadBody
    );
    assert_eq!(
        exchange.request_body(&server, &mut host, 4000, false, Vec::new),
        Step::ReadBody
    );
    let step = exchange.request_body(&server, &mut host, 5000, false, || unreachable!("not read"));
    assert_eq!(step, Step::Answered);
    assert!(matches!(host.sent[..], [Sent::Whole(413, _)]), "{:?}", host.sent);
    // Later chunks find it answered.
    assert_eq!(
        exchange.request_body(&server, &mut host, 6000, true, Vec::new),
        Step::Answered
    );
    assert_eq!(host.sent.len(), 1);
}

#[test]
fn a_request_with_trailers_ends_with_them() {
    let (server, mut host) = (server(), FakeHost::default());
    let mut exchange = FakeExchange::default();
    exchange.request_headers(&server, &mut host, &Head::post("/mcp"), false);
    let body = get_item();
    assert_eq!(
        exchange.request_body(&server, &mut host, body.len(), false, Vec::new),
        Step::ReadBody
    );
    let step = exchange.request_trailers(&server, &mut host, || body.as_bytes().to_vec());
    assert_eq!(step, Step::Waiting);
    assert_eq!(started(&host), [(1, "GetItem".to_owned())]);
}

#[test]
fn a_method_that_needs_no_call_is_answered_whole() {
    let (server, mut host) = (server(), FakeHost::default());
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let (_, step) = post(&server, &mut host, &list);
    assert_eq!(step, Step::Answered);
    assert!(host.started.is_empty());
    let tools = &json_of(&host.sent[0])["result"]["tools"];
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .any(|tool| tool["name"] == "CatalogService_GetItem"),
        "{tools}"
    );
}

#[test]
fn a_unary_call_is_answered_with_its_result_once_it_ends() {
    let (server, mut host) = (server(), FakeHost::default());
    let (mut exchange, step) = post(&server, &mut host, &get_item());
    assert_eq!(step, Step::Waiting);
    assert!(exchange.is_calling_out());
    assert_eq!(started(&host), [(1, "GetItem".to_owned())]);
    assert!(host.sent.is_empty());
    exchange.call_answered(&server, &mut host, 1, 9, || answered_ok(ITEM));
    assert!(!exchange.is_calling_out());
    assert_eq!(host.published, [0]);
    let answer = json_of(&host.sent[0]);
    let item = &answer["result"]["structuredContent"];
    assert_eq!((&item["id"], &item["name"]), (&json!("1"), &json!("pen")), "{answer}");
    // An answer for a call that has ended, or was never started, is ignored.
    exchange.call_answered(&server, &mut host, 1, 9, || unreachable!("not read"));
    exchange.call_ended(&server, &mut host, 2, false);
    assert_eq!(host.sent.len(), 1);
}

#[test]
fn a_call_the_host_cannot_start_is_a_tool_error_at_once() {
    let (server, mut host) = (
        server(),
        FakeHost {
            refuses_calls: true,
            ..FakeHost::default()
        },
    );
    let (_, step) = post(&server, &mut host, &get_item());
    assert_eq!(step, Step::Answered);
    let answer = json_of(&host.sent[0]);
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(answer.to_string().contains("no healthy upstream"), "{answer}");
}

#[test]
fn call_ids_are_the_exchanges_own_and_a_batch_takes_one_each() {
    let (server, mut host) = (server(), FakeHost::default());
    let batch = format!(
        "[{},{}]",
        get_item(),
        call(8, "CatalogService_GetItem", json!({"id": "2"}), None)
    );
    let mut exchange = FakeExchange::default();
    let head = Head::post("/mcp").with("mcp-protocol-version", "2025-03-26");
    exchange.request_headers(&server, &mut host, &head, false);
    exchange.request_body(&server, &mut host, batch.len(), true, || batch.as_bytes().to_vec());
    assert_eq!(started(&host).iter().map(|(id, _)| *id).collect::<Vec<_>>(), [1, 2]);
    exchange.call_answered(&server, &mut host, 2, 9, || answered_ok(ITEM));
    assert!(host.sent.is_empty(), "the reply waits for every call");
    exchange.call_answered(&server, &mut host, 1, 9, || answered_ok(ITEM));
    let answers = json_of(&host.sent[0]);
    assert_eq!(answers.as_array().map(Vec::len), Some(2), "{answers}");
}

/// A stream's parts as they come: its headers, `count` messages, its trailers, its end.
fn stream(server: &Server, host: &mut FakeHost, exchange: &mut FakeExchange, count: usize) {
    let headers = HeaderCopy::from_iter([(":status", "200")]);
    exchange.call_heard(server, host, 1, CallPart::Headers(headers));
    for _ in 0..count {
        assert!(exchange.message_coming(server, host, 1, EVENT.len()));
        exchange.call_heard(server, host, 1, CallPart::Message(EVENT));
    }
    let trailers = HeaderCopy::from_iter([("grpc-status", "0")]);
    exchange.call_heard(server, host, 1, CallPart::Trailers(trailers));
    exchange.call_ended(server, host, 1, false);
}

#[test]
fn progress_goes_out_as_it_comes_from_a_host_that_sends_in_parts() {
    let (server, mut host) = (
        server(),
        FakeHost {
            in_parts: true,
            ..FakeHost::default()
        },
    );
    let (mut exchange, _) = post(&server, &mut host, &watch(true));
    stream(&server, &mut host, &mut exchange, 2);
    let [Sent::Begin(first), Sent::Part(second, false), last @ Sent::Part(_, true)] = &host.sent[..] else {
        panic!("{:?}", host.sent);
    };
    assert!(
        first.contains("notifications/progress") && second.contains("notifications/progress"),
        "{first}"
    );
    assert_eq!(
        json_of(last)["result"]["structuredContent"]["messages"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    // Published once, before the last part.
    assert_eq!(host.published, [2]);
}

#[test]
fn progress_goes_with_the_result_from_a_host_that_answers_whole() {
    let (server, mut host) = (server(), FakeHost::default());
    let (mut exchange, _) = post(&server, &mut host, &watch(true));
    stream(&server, &mut host, &mut exchange, 2);
    let [Sent::Whole(200, body)] = &host.sent[..] else {
        panic!("{:?}", host.sent);
    };
    assert_eq!(body.matches("notifications/progress").count(), 2, "{body}");
}

#[test]
fn a_message_past_the_bound_stops_its_stream_unread() {
    let server = Server::from_config_bytes(
        br#"{"limits": {"max_response_bytes": 1000},
             "services": {"demo.catalog.v1.CatalogService": {"cluster": "catalog", "streaming": true}}}"#,
    )
    .unwrap();
    let mut host = FakeHost::default();
    let (mut exchange, _) = post(&server, &mut host, &watch(false));
    exchange.call_heard(
        &server,
        &mut host,
        1,
        CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])),
    );
    assert!(!exchange.message_coming(&server, &mut host, 1, 1001));
    assert_eq!(host.resets, [1]);
    let body = json_of(&host.sent[0]).to_string();
    assert!(body.contains(r#""reason":"max_bytes""#), "{body}");
    // The host's report of the reset stream's end finds it filed.
    exchange.call_ended(&server, &mut host, 1, true);
    assert_eq!(host.sent.len(), 1);
}

#[test]
fn a_cancelled_streaming_call_is_reset_and_answered_with_no_response() {
    let (server, mut host) = (server(), FakeHost::default());
    let (mut exchange, _) = post(&server, &mut host, &watch(false));
    assert!(host.listening.is_some(), "a lone streaming call may be cancelled");
    exchange.cancelled(&server, &mut host);
    assert_eq!(host.resets, [1]);
    assert_eq!(host.sent, [Sent::Whole(200, ": cancelled\n\n".into())]);
    // Its stream's end, heard after, changes nothing.
    exchange.call_ended(&server, &mut host, 1, true);
    exchange.cancelled(&server, &mut host);
    assert_eq!(host.sent.len(), 1);
}

#[test]
fn a_cancelled_answer_in_parts_just_ends() {
    let (server, mut host) = (
        server(),
        FakeHost {
            in_parts: true,
            ..FakeHost::default()
        },
    );
    let (mut exchange, _) = post(&server, &mut host, &watch(true));
    exchange.call_heard(
        &server,
        &mut host,
        1,
        CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])),
    );
    exchange.call_heard(&server, &mut host, 1, CallPart::Message(EVENT));
    exchange.cancelled(&server, &mut host);
    assert!(matches!(&host.sent[..], [Sent::Begin(_), Sent::Part(comment, true)] if comment == ": cancelled\n\n"));
}

#[test]
fn a_unary_call_is_not_listened_for_and_a_cancellation_is_filed() {
    let (server, mut host) = (server(), FakeHost::default());
    post(&server, &mut host, &get_item());
    assert!(host.listening.is_none());
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}).to_string();
    let (_, step) = post(&server, &mut host, &cancel);
    assert_eq!(step, Step::Answered);
    assert_eq!(host.filed.len(), 1);
    assert!(matches!(host.sent[..], [Sent::Whole(202, _)]), "{:?}", host.sent);
}

#[test]
fn a_request_that_goes_resets_its_calls_and_tells_what_it_did() {
    let (server, mut host) = (server(), FakeHost::default());
    let (mut exchange, _) = post(&server, &mut host, &watch(false));
    exchange.request_gone(&server, &mut host);
    assert_eq!(
        (host.resets.as_slice(), host.published.as_slice()),
        (&[1][..], &[0][..])
    );
    assert!(host.sent.is_empty());
    // A request answered already has nothing to reset.
    host.next_exchange();
    let (mut exchange, _) = post(&server, &mut host, &get_item());
    exchange.call_answered(&server, &mut host, 1, 9, || answered_ok(ITEM));
    exchange.request_gone(&server, &mut host);
    assert_eq!(host.resets, [1]);
}

/// A service whose calls start long-running operations, polled by the gateway for a caller
/// without tasks.
fn operations_server() -> Server {
    let key = base64::engine::general_purpose::STANDARD.encode([7; 32]);
    let config = format!(
        r#"{{"services": {{"demo.exports.v1.ExportService": {{"cluster": "exports", "operations_cluster": "ops", "timeout_ms": 1000}}}},
            "tasks": {{"keys": ["{key}"], "wait_poll_interval_ms": 300}}}}"#
    );
    Server::from_config_bytes(config.as_bytes()).unwrap()
}

/// An operation still running, as its service answers.
fn running() -> Vec<u8> {
    let operation = Operation {
        name: "operations/export-1".into(),
        ..Operation::default()
    };
    operation.encode_to_vec()
}

fn export() -> String {
    call(1, "ExportService_ExportCatalog", json!({"query": "knife"}), None)
}

#[test]
fn a_running_operation_is_polled_when_the_host_wakes_the_exchange() {
    let server = operations_server();
    let mut host = FakeHost {
        clock: Duration::from_secs(100),
        ..FakeHost::default()
    };
    let (mut exchange, _) = post(&server, &mut host, &export());
    let running = running();
    exchange.call_answered(&server, &mut host, 1, running.len() + 5, || answered_ok(&running));
    assert_eq!(host.wake, Some(Duration::from_millis(100_300)));
    assert_eq!(host.started.len(), 1, "the poll waits for its time");
    host.clock = Duration::from_millis(100_300);
    exchange.wake(&server, &mut host);
    assert_eq!(started(&host)[1], (2, "GetOperation".to_owned()));
    assert!(host.sent.is_empty());
}

#[test]
fn a_host_that_cannot_wake_the_exchange_gets_the_operation_as_still_running() {
    let server = operations_server();
    let mut host = FakeHost {
        cannot_wake: true,
        ..FakeHost::default()
    };
    let (mut exchange, _) = post(&server, &mut host, &export());
    let running = running();
    exchange.call_answered(&server, &mut host, 1, running.len() + 5, || answered_ok(&running));
    assert_eq!(host.started.len(), 1);
    let answer = json_of(&host.sent[0]);
    assert!(answer.to_string().contains("operations/export-1"), "{answer}");
}

fn routing_server() -> Server {
    Server::from_config_bytes(
        br#"{"routing": {"cluster_header": "x-switchblade-cluster"},
             "services": {"demo.catalog.v1.CatalogService": {"cluster": "catalog", "streaming": true, "timeout_ms": 2000}}}"#,
    )
    .unwrap()
}

fn routing_host() -> FakeHost {
    FakeHost {
        routes: true,
        ..FakeHost::default()
    }
}

#[test]
fn a_host_with_a_router_makes_a_lone_unary_call_the_request_itself() {
    let (server, mut host) = (routing_server(), routing_host());
    let (mut exchange, step) = post(&server, &mut host, &get_item());
    assert_eq!(step, Step::Routed);
    assert!(exchange.is_routed() && host.started.is_empty());
    assert_eq!(
        host.routed,
        [("catalog".to_owned(), "x-switchblade-cluster".to_owned())]
    );
    let (headers, body, trailers) = answered_ok(ITEM);
    exchange.routed_heard(&server, CallPart::Headers(headers));
    exchange.routed_heard(&server, CallPart::Data(&body));
    exchange.routed_heard(&server, CallPart::Trailers(trailers));
    let answer = exchange.routed_answer(&server, &mut host).unwrap();
    assert_eq!(answer.upstream_headers.iter().count(), 2);
    let result: Value = serde_json::from_slice(&answer.response.body).unwrap();
    assert_eq!(result["result"]["structuredContent"]["name"], "pen", "{result}");
    // Published before it goes; the exchange sends nothing itself.
    assert_eq!((host.published.as_slice(), host.sent.len()), (&[0][..], 0));
    assert!(exchange.routed_answer(&server, &mut host).is_none());
}

#[test]
fn a_routed_call_past_its_deadline_is_answered_deadline_exceeded() {
    let (server, mut host) = (routing_server(), routing_host());
    let (mut exchange, _) = post(&server, &mut host, &get_item());
    exchange.routed_heard(&server, CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])));
    host.clock = Duration::from_secs(2);
    exchange.routed_deadline_passed(&server, &mut host);
    let answer = json_of(&host.sent[0]).to_string();
    assert!(answer.contains("DEADLINE_EXCEEDED"), "{answer}");
    assert!(exchange.routed_answer(&server, &mut host).is_none());
}

#[test]
fn a_stream_a_batch_or_a_host_without_a_router_is_called_out() {
    let server = routing_server();
    let mut host = routing_host();
    let (_, step) = post(&server, &mut host, &watch(false));
    assert_eq!(step, Step::Waiting);
    let mut host = FakeHost::default();
    let (_, step) = post(&server, &mut host, &get_item());
    assert_eq!((step, host.started.len()), (Step::Waiting, 1));
}

#[test]
fn a_clients_routing_header_is_refused_on_every_path() {
    let (server, mut host) = (routing_server(), routing_host());
    for path in ["/mcp", "/other"] {
        host.next_exchange();
        let head = Head::post(path).with("x-switchblade-cluster", "catalog");
        assert_eq!(
            FakeExchange::default().request_headers(&server, &mut host, &head, false),
            Step::Answered
        );
    }
    assert!(
        matches!(host.sent[..], [Sent::Whole(mcp, _), Sent::Whole(other, _)] if mcp >= 400 && other >= 400),
        "{:?}",
        host.sent
    );
    assert!(host.routed.is_empty());
}

/// Found by the `exchange` fuzz target: an event for another state (a routed call's answer, its
/// deadline) left a request that was calling out answered, its reply lost.
#[test]
fn an_event_for_another_state_changes_nothing() {
    let (server, mut host) = (server(), FakeHost::default());
    let (mut exchange, _) = post(&server, &mut host, &get_item());
    assert!(exchange.routed_answer(&server, &mut host).is_none());
    exchange.routed_deadline_passed(&server, &mut host);
    assert_eq!(exchange.step(), Step::Waiting);
    exchange.call_answered(&server, &mut host, 1, 9, || answered_ok(ITEM));
    assert!(matches!(host.sent[..], [Sent::Whole(200, _)]), "{:?}", host.sent);
    let mut passing = FakeExchange::default();
    passing.request_headers(&server, &mut host, &Head::post("/other"), false);
    passing.request_gone(&server, &mut host);
    passing.cancelled(&server, &mut host);
    assert_eq!(passing.step(), Step::Continue);
}

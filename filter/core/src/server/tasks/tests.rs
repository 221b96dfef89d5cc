//! Task tools from the tool list to the last poll, against the demo ExportService's
//! descriptors, with the Operations service's answers made here.

use std::cell::RefCell;
use std::time::Duration;

use base64::Engine;
use prost::Message;
use prost_reflect::{DynamicMessage, Value as ProtoValue};
use serde_json::{json, Value};

use crate::access::Caller;
use crate::descriptors::embedded_pool;
use crate::eras::{CLIENT_CAPABILITIES_META, MODERN_VERSION, PROTOCOL_VERSION_META};
use crate::grpc::frame::grpc_frame;
use crate::http::{HeaderCopy, McpHeaders};
use crate::jsonrpc::{INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY};
use crate::observe::{Observations, TaskOutcome};
use crate::quota::counters::{Counters, MemoryCounters};
use crate::server::{McpRequest, Outcome, Reply, Server};
use crate::tasks::operation::{Any, Operation};
use crate::tasks::task_id::{caller_digest, KeyRing, TaskId, TaskRefusal};
use crate::tasks::{wall_clock_ms, TASKS_EXTENSION};
use crate::upstream::UpstreamCall;

const KEY: [u8; 32] = [7; 32];
const EXPORT: &str = "ExportService_ExportCatalog";

fn config(extra: &str) -> String {
    let key = base64::engine::general_purpose::STANDARD.encode(KEY);
    format!(
        r#"{{"services": {{"demo.exports.v1.ExportService": {{"cluster": "exports", "operations_cluster": "ops", "timeout_ms": 1000}},
             "demo.users.v1.UserService": {{"cluster": "users"}}}},
            "tasks": {{"keys": ["{key}"], "poll_interval_ms": 500, "ttl_ms": 60000, "wait_poll_interval_ms": 300}}{extra}}}"#
    )
}

fn server() -> Server {
    Server::from_config_bytes(config("").as_bytes()).unwrap()
}

fn headers(version: &str) -> McpHeaders {
    McpHeaders {
        content_type: Some("application/json".into()),
        protocol_version: Some(version.into()),
        ..McpHeaders::default()
    }
}

fn modern_headers(method: &str, name: &str) -> McpHeaders {
    McpHeaders {
        mcp_method: Some(method.into()),
        mcp_name: Some(name.into()),
        ..headers(MODERN_VERSION)
    }
}

fn meta(extension: bool) -> Value {
    let extensions = if extension {
        json!({TASKS_EXTENSION: {}})
    } else {
        json!({})
    };
    json!({PROTOCOL_VERSION_META: MODERN_VERSION, CLIENT_CAPABILITIES_META: {"extensions": extensions}})
}

/// A call started: its token, path, cluster and request message.
type Started = (u64, String, String, Vec<u8>);

/// One POST, its calls made with the answers a test gives, on a clock the test moves.
struct Exchange<'a> {
    server: &'a Server,
    reply: Reply,
    observed: Observations,
    started: RefCell<Vec<Started>>,
    now: Duration,
}

// A test's value, made once per POST: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Posted<'a> {
    Answer(u16, Value, Observations),
    Calls(Box<Exchange<'a>>),
}

fn post<'a>(server: &'a Server, headers: &McpHeaders, body: Value, caller: &Caller) -> Posted<'a> {
    post_counted(server, headers, body, caller, None)
}

/// [`post`], with counters for the bounds that keep state (the polls').
fn post_counted<'a>(
    server: &'a Server,
    headers: &McpHeaders,
    body: Value,
    caller: &Caller,
    counters: Option<&Counters>,
) -> Posted<'a> {
    let mut observed = Observations::default();
    let body = body.to_string();
    let request = McpRequest {
        headers,
        body: body.as_bytes(),
        caller,
        client_address: None,
        counters,
    };
    match server.handle(request, &mut observed) {
        Outcome::Respond(response) | Outcome::Cancel { response, .. } => {
            let body = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
            Posted::Answer(response.status, body, observed)
        }
        Outcome::Await(reply) => {
            let mut exchange = Exchange {
                server,
                reply,
                observed,
                started: RefCell::default(),
                now: Duration::from_secs(100),
            };
            exchange.start();
            Posted::Calls(Box::new(exchange))
        }
    }
}

fn answered(posted: Posted<'_>) -> (u16, Value, Observations) {
    match posted {
        Posted::Answer(status, body, observed) => (status, body, observed),
        Posted::Calls(exchange) => panic!("expected an answer, got calls: {:?}", exchange.started.borrow()),
    }
}

fn calling(posted: Posted<'_>) -> Exchange<'_> {
    match posted {
        Posted::Calls(exchange) => *exchange,
        Posted::Answer(status, body, _) => panic!("expected calls, got {status} {body}"),
    }
}

impl Exchange<'_> {
    /// Starts what may start now; whether the reply is complete.
    fn start(&mut self) -> bool {
        let started = &self.started;
        let start = |call: &UpstreamCall| {
            let path = call
                .http_headers()
                .iter()
                .find(|(name, _)| *name == ":path")
                .map(|(_, value)| value.to_string())
                .unwrap_or_default();
            let mut started = started.borrow_mut();
            let token = started.len() as u64 + 1;
            started.push((token, path, call.cluster().to_owned(), call.message().to_vec()));
            Ok(token)
        };
        self.server
            .start_calls(&mut self.reply, start, self.now, &mut self.observed)
    }

    /// The last call started: its token, path, cluster and request message.
    fn last(&self) -> Started {
        self.started.borrow().last().cloned().unwrap()
    }

    /// Answers the last call with `body` (gRPC status `status`), then starts what follows.
    fn answer(&mut self, status: u32, body: &[u8]) -> bool {
        let (token, ..) = self.last();
        let framed = grpc_frame(body);
        let size = framed.len();
        let read = || {
            (
                HeaderCopy::from_iter([(":status", "200")]),
                framed,
                HeaderCopy::from_iter([("grpc-status", status.to_string())]),
            )
        };
        self.now += Duration::from_millis(10);
        self.server
            .call_answered(&mut self.reply, token, size, read, self.now, &mut self.observed);
        self.start()
    }

    fn answer_operation(&mut self, operation: &Operation) -> bool {
        self.answer(0, &operation.encode_to_vec())
    }

    /// Moves the clock to the next wake-up and starts what is due.
    fn wake(&mut self) -> bool {
        self.now = self.reply.next_wake().expect("a wake-up");
        self.start()
    }

    fn finish(self) -> (u16, Value, Observations) {
        assert!(self.reply.is_complete());
        let response = self.reply.into_response();
        (
            response.status,
            serde_json::from_slice(&response.body).unwrap(),
            self.observed,
        )
    }
}

fn message(name: &str, fields: &[(&str, ProtoValue)]) -> Vec<u8> {
    let pool = embedded_pool().unwrap();
    let mut message = DynamicMessage::new(pool.get_message_by_name(name).unwrap());
    for (field, value) in fields {
        message.set_field_by_name(field, value.clone());
    }
    message.encode_to_vec()
}

fn any(name: &str, fields: &[(&str, ProtoValue)]) -> Any {
    Any {
        type_url: format!("type.googleapis.com/{name}"),
        value: message(name, fields),
    }
}

fn running(name: &str, step: i32) -> Operation {
    Operation {
        name: name.into(),
        metadata: Some(any(
            "demo.exports.v1.JobProgress",
            &[
                ("stage", ProtoValue::String("exporting".into())),
                ("steps_done", ProtoValue::I32(step)),
            ],
        )),
        ..Operation::default()
    }
}

fn exported(name: &str) -> Operation {
    Operation {
        name: name.into(),
        done: true,
        response: Some(any(
            "demo.exports.v1.ExportCatalogResponse",
            &[
                ("uri", ProtoValue::String("file:///exports/1.jsonl".into())),
                ("item_count", ProtoValue::I32(3)),
            ],
        )),
        ..Operation::default()
    }
}

fn failed(name: &str, code: i32) -> Operation {
    let pool = embedded_pool().unwrap();
    let mut status = DynamicMessage::new(pool.get_message_by_name("google.rpc.Status").unwrap());
    status.set_field_by_name("code", ProtoValue::I32(code));
    status.set_field_by_name("message", ProtoValue::String("no exchange rates".into()));
    let detail = pool.get_message_by_name("google.protobuf.Any").unwrap();
    let mut detail = DynamicMessage::new(detail);
    detail.set_field_by_name(
        "type_url",
        ProtoValue::String("type.googleapis.com/google.rpc.ErrorInfo".into()),
    );
    detail.set_field_by_name(
        "value",
        ProtoValue::Bytes(
            message(
                "google.rpc.ErrorInfo",
                &[
                    ("reason", ProtoValue::String("NO_RATES".into())),
                    ("domain", ProtoValue::String("exports.demo".into())),
                ],
            )
            .into(),
        ),
    );
    status.set_field_by_name("details", ProtoValue::List(vec![ProtoValue::Message(detail)]));
    Operation {
        name: name.into(),
        done: true,
        error: Some(status.encode_to_vec()),
        ..Operation::default()
    }
}

fn name_of(request: &[u8]) -> String {
    let pool = embedded_pool().unwrap();
    let descriptor = pool
        .get_message_by_name("google.longrunning.GetOperationRequest")
        .unwrap();
    let request = DynamicMessage::decode(descriptor, request).unwrap();
    request.get_field_by_name("name").unwrap().as_str().unwrap().to_owned()
}

fn legacy_call(task: bool) -> Value {
    let mut params = json!({"name": EXPORT, "arguments": {"query": "knife"}});
    if task {
        params["task"] = json!({"ttl": 1000});
    }
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
}

fn legacy_task_request(method: &str, task_id: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": {"taskId": task_id}})
}

fn modern_task_request(method: &str, task_id: &str, extension: bool) -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": {"taskId": task_id, "_meta": meta(extension)}})
}

/// A 2025-11-25 task made by the call, and its id.
fn legacy_task(server: &Server) -> String {
    let mut exchange = calling(post(server, &headers("2025-11-25"), legacy_call(true), &Caller::Anyone));
    assert!(exchange.answer_operation(&running("operations/export-1", 0)));
    let (status, body, observed) = exchange.finish();
    assert_eq!(status, 200);
    assert_eq!(observed.task_steps()[0].outcome, TaskOutcome::Created);
    body["result"]["task"]["taskId"].as_str().unwrap().to_owned()
}

#[test]
fn a_task_tool_lists_its_response_as_output_and_its_task_support_in_the_handshake_era() {
    let server = server();
    let tool = server.catalog().get(EXPORT).unwrap();
    assert!(tool.task.is_some());
    assert_eq!(tool.task.as_ref().unwrap().operations_cluster, "ops");
    let definition = &tool.definition_value();
    assert_eq!(
        definition["outputSchema"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["uri", "item_count", "item_ids"]
    );
    assert!(definition["description"].as_str().unwrap().contains("Runs as a task"));
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let (_, body, _) = answered(post(&server, &headers("2025-11-25"), list.clone(), &Caller::Anyone));
    let tools = body["result"]["tools"].as_array().unwrap();
    let export = tools.iter().find(|tool| tool["name"] == EXPORT).unwrap();
    assert_eq!(export["execution"], json!({"taskSupport": "optional"}));
    let purge = tools
        .iter()
        .find(|tool| tool["name"] == "ExportService_PurgeCaches")
        .unwrap();
    assert!(
        purge.get("execution").is_none(),
        "no operation_info, no configured types: a plain tool"
    );
    let mut list = list;
    list["params"] = json!({"_meta": meta(false)});
    let (_, body, _) = answered(post(&server, &modern_headers("tools/list", ""), list, &Caller::Anyone));
    assert!(
        body["result"]["tools"][0].get("execution").is_none(),
        "no such field in 2026-07-28"
    );
}

#[test]
fn the_capabilities_say_tasks_where_each_era_declares_them() {
    let server = server();
    let initialize = |version: &str| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        answered(post(&server, &headers(version), body, &Caller::Anyone)).1
    };
    assert_eq!(
        initialize("2025-11-25")["result"]["capabilities"]["tasks"],
        json!({"cancel": {}, "requests": {"tools": {"call": {}}}})
    );
    assert!(initialize("2025-06-18")["result"]["capabilities"]
        .get("tasks")
        .is_none());
    let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta(false)}});
    let (_, body, _) = answered(post(
        &server,
        &modern_headers("server/discover", ""),
        discover,
        &Caller::Anyone,
    ));
    assert_eq!(
        body["result"]["capabilities"]["extensions"],
        json!({TASKS_EXTENSION: {}})
    );
}

#[test]
fn a_legacy_task_is_made_polled_and_its_result_read() {
    let server = server();
    let mut exchange = calling(post(
        &server,
        &headers("2025-11-25"),
        legacy_call(true),
        &Caller::Anyone,
    ));
    let (_, path, cluster, _) = exchange.last();
    assert_eq!(
        (path.as_str(), cluster.as_str()),
        ("/demo.exports.v1.ExportService/ExportCatalog", "exports")
    );
    assert!(exchange.answer_operation(&running("operations/export-1", 0)));
    let (_, body, observed) = exchange.finish();
    let task = &body["result"]["task"];
    assert_eq!(task["status"], "working");
    assert_eq!(
        (task["ttl"].clone(), task["pollInterval"].clone()),
        (json!(60000), json!(500))
    );
    assert!(
        task["statusMessage"]
            .as_str()
            .unwrap()
            .contains(r#""stage":"exporting""#),
        "{task}"
    );
    assert!(body["result"]["_meta"]["io.modelcontextprotocol/model-immediate-response"].is_string());
    assert_eq!(
        observed
            .log_fields()
            .iter()
            .find(|(field, _)| *field == "operation")
            .unwrap()
            .1,
        "operations/export-1"
    );
    let task_id = task["taskId"].as_str().unwrap();

    // tasks/get: GetOperation on the operations cluster, with the operation's name.
    let mut exchange = calling(post(
        &server,
        &headers("2025-11-25"),
        legacy_task_request("tasks/get", task_id),
        &Caller::Anyone,
    ));
    let (_, path, cluster, request) = exchange.last();
    assert_eq!(
        (path.as_str(), cluster.as_str()),
        ("/google.longrunning.Operations/GetOperation", "ops")
    );
    assert_eq!(name_of(&request), "operations/export-1");
    assert!(exchange.answer_operation(&running("operations/export-1", 2)));
    let (_, body, _) = exchange.finish();
    assert_eq!(body["result"]["status"], "working");
    assert_eq!(body["result"]["taskId"], task_id);
    assert!(body["result"]["statusMessage"]
        .as_str()
        .unwrap()
        .contains(r#""steps_done":2"#));

    let mut exchange = calling(post(
        &server,
        &headers("2025-11-25"),
        legacy_task_request("tasks/get", task_id),
        &Caller::Anyone,
    ));
    assert!(exchange.answer_operation(&exported("operations/export-1")));
    let (_, body, _) = exchange.finish();
    assert_eq!(body["result"]["status"], "completed");
    assert!(
        body["result"].get("result").is_none(),
        "2025-11-25 has tasks/result for that"
    );

    let mut exchange = calling(post(
        &server,
        &headers("2025-11-25"),
        legacy_task_request("tasks/result", task_id),
        &Caller::Anyone,
    ));
    assert!(exchange.answer_operation(&exported("operations/export-1")));
    let (_, body, _) = exchange.finish();
    let result = &body["result"];
    assert_eq!(result["isError"], false);
    assert_eq!(
        result["structuredContent"],
        json!({"uri": "file:///exports/1.jsonl", "item_count": 3, "item_ids": []})
    );
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id
    );
}

#[test]
fn tasks_result_waits_for_the_operation_within_the_deadline() {
    let server = server();
    let task_id = legacy_task(&server);
    let mut exchange = calling(post(
        &server,
        &headers("2025-11-25"),
        legacy_task_request("tasks/result", task_id.as_str()),
        &Caller::Anyone,
    ));
    assert!(!exchange.answer_operation(&running("operations/export-1", 1)));
    assert!(!exchange.wake());
    assert!(exchange.answer_operation(&exported("operations/export-1")));
    let (_, body, _) = exchange.finish();
    assert_eq!(body["result"]["structuredContent"]["item_count"], 3);
    // Still running when the deadline (1000 ms) passes: a JSON-RPC error, the task goes on.
    let mut exchange = calling(post(
        &server,
        &headers("2025-11-25"),
        legacy_task_request("tasks/result", task_id.as_str()),
        &Caller::Anyone,
    ));
    let mut complete = exchange.answer_operation(&running("operations/export-1", 1));
    while !complete {
        assert!(!exchange.wake());
        complete = exchange.answer_operation(&running("operations/export-1", 1));
    }
    let (_, body, observed) = exchange.finish();
    assert_eq!(body["error"]["code"], -32603);
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("still working after 1000 ms"));
    assert_eq!(observed.task_steps().last().unwrap().outcome, TaskOutcome::StillRunning);
}

#[test]
fn an_operation_that_fails_is_a_completed_task_with_a_tool_error() {
    let server = server();
    let task_id = legacy_task(&server);
    let mut exchange = calling(post(
        &server,
        &headers("2025-11-25"),
        legacy_task_request("tasks/get", &task_id),
        &Caller::Anyone,
    ));
    assert!(exchange.answer_operation(&failed("operations/export-1", 9)));
    let (_, body, observed) = exchange.finish();
    assert_eq!(body["result"]["status"], "completed");
    assert_eq!(observed.task_steps()[0].outcome, TaskOutcome::OperationError);
    let mut exchange = calling(post(
        &server,
        &headers("2025-11-25"),
        legacy_task_request("tasks/result", &task_id),
        &Caller::Anyone,
    ));
    assert!(exchange.answer_operation(&failed("operations/export-1", 9)));
    let (_, body, _) = exchange.finish();
    let result = &body["result"];
    assert_eq!(result["isError"], true);
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("demo.exports.v1.ExportService/ExportCatalog failed with gRPC status FAILED_PRECONDITION (9): no exchange rates\n- ErrorInfo: reason NO_RATES in domain exports.demo"),
        "{text}"
    );
    assert!(text.ends_with("(operation operations/export-1)"));
    // An operation cancelled is a cancelled task.
    let mut exchange = calling(post(
        &server,
        &headers("2025-11-25"),
        legacy_task_request("tasks/get", &task_id),
        &Caller::Anyone,
    ));
    assert!(exchange.answer_operation(&failed("operations/export-1", 1)));
    assert_eq!(exchange.finish().1["result"]["status"], "cancelled");
}

#[test]
fn a_modern_task_inlines_its_result_and_needs_the_extension() {
    let server = server();
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": EXPORT, "arguments": {}, "_meta": meta(true)}});
    let mut exchange = calling(post(
        &server,
        &modern_headers("tools/call", EXPORT),
        call,
        &Caller::Anyone,
    ));
    assert!(exchange.answer_operation(&running("operations/export-2", 0)));
    let (_, body, _) = exchange.finish();
    let result = &body["result"];
    assert_eq!(result["resultType"], "task");
    assert_eq!(
        (result["ttlMs"].clone(), result["pollIntervalMs"].clone()),
        (json!(60000), json!(500))
    );
    let task_id = result["taskId"].as_str().unwrap();

    let get = modern_task_request("tasks/get", task_id, true);
    let mut exchange = calling(post(
        &server,
        &modern_headers("tasks/get", task_id),
        get,
        &Caller::Anyone,
    ));
    assert!(exchange.answer_operation(&exported("operations/export-2")));
    let (_, body, _) = exchange.finish();
    let result = &body["result"];
    assert_eq!(
        (result["resultType"].clone(), result["status"].clone()),
        (json!("complete"), json!("completed"))
    );
    assert_eq!(result["result"]["structuredContent"]["uri"], "file:///exports/1.jsonl");
    assert_eq!(result["result"]["isError"], false);

    // Without the extension: -32021, and no call.
    let undeclared = modern_task_request("tasks/get", task_id, false);
    let (status, body, observed) = answered(post(
        &server,
        &modern_headers("tasks/get", task_id),
        undeclared,
        &Caller::Anyone,
    ));
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!(MISSING_REQUIRED_CLIENT_CAPABILITY))
    );
    assert_eq!(
        body["error"]["data"],
        json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})
    );
    assert_eq!(observed.task_refusals(), [TaskRefusal::Undeclared]);
    // Mcp-Name must be the task id.
    let get = modern_task_request("tasks/get", task_id, true);
    let (status, body, _) = answered(post(
        &server,
        &modern_headers("tasks/get", "other"),
        get,
        &Caller::Anyone,
    ));
    assert_eq!((status, body["error"]["code"].clone()), (400, json!(-32020)));
    // A done operation answers the call itself, without a task.
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": EXPORT, "arguments": {}, "_meta": meta(true)}});
    let mut exchange = calling(post(
        &server,
        &modern_headers("tools/call", EXPORT),
        call,
        &Caller::Anyone,
    ));
    assert!(exchange.answer_operation(&exported("operations/export-3")));
    let (_, body, _) = exchange.finish();
    assert_eq!(body["result"]["resultType"], "complete");
    assert_eq!(body["result"]["structuredContent"]["item_count"], 3);
}

#[test]
fn a_caller_without_tasks_gets_the_result_after_the_gateway_polls() {
    let server = server();
    let mut exchange = calling(post(
        &server,
        &headers("2025-06-18"),
        legacy_call(false),
        &Caller::Anyone,
    ));
    assert!(!exchange.answer_operation(&running("operations/export-4", 0)));
    assert_eq!(
        exchange.reply.next_wake(),
        Some(exchange.now + Duration::from_millis(300))
    );
    assert!(!exchange.wake());
    let (_, path, ..) = exchange.last();
    assert_eq!(path, "/google.longrunning.Operations/GetOperation");
    assert!(!exchange.answer_operation(&running("operations/export-4", 1)));
    assert!(!exchange.wake());
    assert!(exchange.answer_operation(&exported("operations/export-4")));
    let (_, body, observed) = exchange.finish();
    assert_eq!(body["result"]["structuredContent"]["item_count"], 3);
    let outcomes: Vec<TaskOutcome> = observed.task_steps().iter().map(|step| step.outcome).collect();
    assert_eq!(
        outcomes,
        [TaskOutcome::Working, TaskOutcome::Working, TaskOutcome::Completed]
    );

    // Past the tool's deadline (1000 ms): a tool error that names the operation.
    let mut exchange = calling(post(
        &server,
        &headers("2025-06-18"),
        legacy_call(false),
        &Caller::Anyone,
    ));
    let mut complete = exchange.answer_operation(&running("operations/export-5", 0));
    while !complete {
        assert!(!exchange.wake());
        complete = exchange.answer_operation(&running("operations/export-5", 1));
    }
    let (_, body, _) = exchange.finish();
    assert_eq!(body["result"]["isError"], true);
    let text = body["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("is still running after 1000 ms") && text.contains("operations/export-5"),
        "{text}"
    );

    // A host that cannot wake the request ends the wait at once.
    let mut exchange = calling(post(
        &server,
        &headers("2025-06-18"),
        legacy_call(false),
        &Caller::Anyone,
    ));
    assert!(!exchange.answer_operation(&running("operations/export-6", 0)));
    server.stop_waiting(&mut exchange.reply, &mut exchange.observed);
    assert!(exchange.reply.is_complete());
}

#[test]
fn legacy_cancel_reads_the_operation_first_and_modern_cancel_acknowledges() {
    let server = server();
    let task_id = legacy_task(&server);
    let mut exchange = calling(post(
        &server,
        &headers("2025-11-25"),
        legacy_task_request("tasks/cancel", &task_id),
        &Caller::Anyone,
    ));
    assert!(!exchange.answer_operation(&running("operations/export-1", 1)));
    let (_, path, cluster, request) = exchange.last();
    assert_eq!(
        (path.as_str(), cluster.as_str()),
        ("/google.longrunning.Operations/CancelOperation", "ops")
    );
    assert_eq!(name_of(&request), "operations/export-1");
    assert!(exchange.answer(0, &[]));
    let (_, body, _) = exchange.finish();
    assert_eq!(body["result"]["status"], "cancelled");
    assert_eq!(body["result"]["taskId"], task_id.as_str());
    // A done task cannot be cancelled.
    let mut exchange = calling(post(
        &server,
        &headers("2025-11-25"),
        legacy_task_request("tasks/cancel", &task_id),
        &Caller::Anyone,
    ));
    assert!(exchange.answer_operation(&exported("operations/export-1")));
    let (_, body, _) = exchange.finish();
    assert_eq!(body["error"]["code"], INVALID_PARAMS);
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("already in terminal status 'completed'"));
    // An operation the service does not know: -32602.
    let mut exchange = calling(post(
        &server,
        &headers("2025-11-25"),
        legacy_task_request("tasks/get", &task_id),
        &Caller::Anyone,
    ));
    assert!(exchange.answer(5, &[]));
    let (_, body, _) = exchange.finish();
    assert_eq!(body["error"]["code"], INVALID_PARAMS);
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("google.longrunning.Operations/GetOperation failed with gRPC status NOT_FOUND"));

    let key = KeyRing::new(vec![KEY.to_vec()]).unwrap();
    let task_id = key
        .sign(&TaskId {
            created_ms: wall_clock_ms(),
            tool: EXPORT.into(),
            operation: "operations/export-9".into(),
            caller: caller_digest(b""),
        })
        .unwrap();
    let cancel = modern_task_request("tasks/cancel", &task_id, true);
    let mut exchange = calling(post(
        &server,
        &modern_headers("tasks/cancel", &task_id),
        cancel,
        &Caller::Anyone,
    ));
    let (_, path, ..) = exchange.last();
    assert_eq!(path, "/google.longrunning.Operations/CancelOperation");
    assert!(exchange.answer(0, &[]));
    let (_, body, _) = exchange.finish();
    assert_eq!(body["result"]["resultType"], "complete");
}

#[test]
fn a_task_id_that_is_forged_expired_foreign_or_for_another_tool_is_refused_without_a_call() {
    let server = server();
    let sign = |key: [u8; 32], created_ms: u64, tool: &str, identity: &[u8]| {
        KeyRing::new(vec![key.to_vec()])
            .unwrap()
            .sign(&TaskId {
                created_ms,
                tool: tool.into(),
                operation: "operations/export-1".into(),
                caller: caller_digest(identity),
            })
            .unwrap()
    };
    let now = wall_clock_ms();
    for (task_id, refusal, words) in [
        ("not-a-task".to_owned(), TaskRefusal::Malformed, "unknown task id"),
        (sign([8; 32], now, EXPORT, b""), TaskRefusal::Forged, "unknown task id"),
        (
            sign(KEY, now - 61_000, EXPORT, b""),
            TaskRefusal::Expired,
            "has expired",
        ),
        (
            sign(KEY, now, "UserService_GetUser", b""),
            TaskRefusal::NotATaskTool,
            "not a task tool",
        ),
        (
            sign(KEY, now, "Nope", b""),
            TaskRefusal::NotATaskTool,
            "not a task tool",
        ),
        (
            sign(KEY, now, EXPORT, b"someone"),
            TaskRefusal::OtherCaller,
            "another caller",
        ),
    ] {
        let (status, body, observed) = answered(post(
            &server,
            &headers("2025-11-25"),
            legacy_task_request("tasks/get", &task_id),
            &Caller::Anyone,
        ));
        assert_eq!(
            (status, body["error"]["code"].clone()),
            (200, json!(INVALID_PARAMS)),
            "{refusal:?}"
        );
        assert!(body["error"]["message"].as_str().unwrap().contains(words), "{body}");
        assert_eq!(observed.task_refusals(), [refusal]);
    }
}

#[test]
fn tasks_belong_to_the_caller_that_made_them_and_follow_its_grants() {
    let config = config(
        r#", "authorization": {"rules": {"demo.exports.v1.ExportService/ExportCatalog": ["exports"]}, "unlisted": "allow"}"#,
    );
    let server = Server::from_config_bytes(config.as_bytes()).unwrap();
    let grants = |grants: &[&str]| grants.iter().map(|grant| (*grant).to_owned()).collect();
    let ada = Caller::verified(grants(&["exports"]), r#"["idp","ada"]"#);
    let bob = Caller::verified(grants(&["exports"]), r#"["idp","bob"]"#);
    let ada_without_grant = Caller::verified(grants(&[]), r#"["idp","ada"]"#);
    let mut exchange = calling(post(&server, &headers("2025-11-25"), legacy_call(true), &ada));
    assert!(exchange.answer_operation(&running("operations/export-1", 0)));
    let task_id = exchange.finish().1["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let get = legacy_task_request("tasks/get", &task_id);
    assert!(matches!(
        post(&server, &headers("2025-11-25"), get.clone(), &ada),
        Posted::Calls(_)
    ));
    let (_, body, observed) = answered(post(&server, &headers("2025-11-25"), get.clone(), &bob));
    assert_eq!(body["error"]["code"], INVALID_PARAMS);
    assert_eq!(observed.task_refusals(), [TaskRefusal::OtherCaller]);
    let (_, body, observed) = answered(post(&server, &headers("2025-11-25"), get, &ada_without_grant));
    assert_eq!(body["error"]["code"], INVALID_PARAMS);
    assert_eq!(observed.task_refusals(), [TaskRefusal::NotATaskTool]);
}

#[test]
fn what_each_era_does_not_serve() {
    let server = server();
    let task_id = legacy_task(&server);
    for (version, method) in [
        ("2025-06-18", "tasks/get"),
        ("2025-11-25", "tasks/update"),
        ("2025-11-25", "tasks/list"),
    ] {
        let (_, body, _) = answered(post(
            &server,
            &headers(version),
            legacy_task_request(method, &task_id),
            &Caller::Anyone,
        ));
        assert_eq!(body["error"]["code"], METHOD_NOT_FOUND, "{version} {method}");
    }
    let (_, body, _) = answered(post(
        &server,
        &headers("2025-11-25"),
        legacy_task_request("tasks/list", ""),
        &Caller::Anyone,
    ));
    assert!(body["error"]["message"].as_str().unwrap().contains("keeps no tasks"));
    // `task` on a tool that is not a task tool: -32601, as 2025-11-25 asks.
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "UserService_GetUser", "arguments": {"user_id": 1}, "task": {}}});
    let (_, body, _) = answered(post(&server, &headers("2025-11-25"), call, &Caller::Anyone));
    assert_eq!(body["error"]["code"], METHOD_NOT_FOUND);
    // tasks/update in 2026-07-28: nothing to take, acknowledged.
    let update = modern_task_request("tasks/update", &task_id, true);
    let (_, body, _) = answered(post(
        &server,
        &modern_headers("tasks/update", &task_id),
        update,
        &Caller::Anyone,
    ));
    assert_eq!(body["result"]["resultType"], "complete");
    // No task tool, no tasks/* at all.
    let plain =
        Server::from_config_bytes(br#"{"services": {"demo.users.v1.UserService": {"cluster": "users"}}}"#).unwrap();
    let (_, body, _) = answered(post(
        &plain,
        &headers("2025-11-25"),
        legacy_task_request("tasks/get", &task_id),
        &Caller::Anyone,
    ));
    assert_eq!(body["error"]["code"], METHOD_NOT_FOUND);
}

#[test]
fn configured_operation_types_make_a_task_tool_and_bad_ones_are_refused() {
    let config = config(
        r#", "tools": {"demo.exports.v1.ExportService/PurgeCaches": {"operation": {"response_type": "PurgeCachesResponse", "metadata_type": "demo.exports.v1.JobProgress"}}}"#,
    );
    let server = Server::from_config_bytes(config.as_bytes()).unwrap();
    let purge = server.catalog().get("ExportService_PurgeCaches").unwrap();
    assert_eq!(
        purge.task.as_ref().unwrap().operation.response.full_name(),
        "demo.exports.v1.PurgeCachesResponse"
    );
    for (tools, words) in [
        (
            r#"{"demo.users.v1.UserService/GetUser": {"operation": {"response_type": "User"}}}"#,
            "at `tools.demo.users.v1.UserService/GetUser.operation`: demo.users.v1.UserService/GetUser does not return a google.longrunning.Operation",
        ),
        (
            r#"{"demo.exports.v1.ExportService/PurgeCaches": {"operation": {"response_type": "Nope"}}}"#,
            "at `tools.demo.exports.v1.ExportService/PurgeCaches.operation.response_type`: \"Nope\" is not a message",
        ),
    ] {
        let config = config.replacen(r#""tools": {"demo.exports.v1.ExportService/PurgeCaches": {"operation": {"response_type": "PurgeCachesResponse", "metadata_type": "demo.exports.v1.JobProgress"}}}"#, &format!(r#""tools": {tools}"#), 1);
        let error = Server::from_config_bytes(config.as_bytes()).unwrap_err();
        assert!(error.0.starts_with(words), "{error}");
    }
    for (tasks, words) in [
        (
            r#"{"keys": ["c2hvcnQ="]}"#,
            "at `tasks.keys[0]`: 5 bytes; a key takes at least 32",
        ),
        (r#"{"keys": ["!"]}"#, "at `tasks.keys[0]`: not base64"),
        (
            r#"{"keys": ["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]}"#,
            "at `tasks.keys`: 3 keys; at most 2",
        ),
        (
            r#"{"poll_interval_ms": 0}"#,
            "at `tasks.poll_interval_ms`: must be greater than 0",
        ),
        (r#"{"process_key": "x"}"#, "at `tasks.process_key`: unknown field"),
    ] {
        let config =
            format!(r#"{{"services": {{"demo.users.v1.UserService": {{"cluster": "users"}}}}, "tasks": {tasks}}}"#);
        let error = Server::from_config_bytes(config.as_bytes()).unwrap_err();
        assert!(error.0.starts_with(words), "{error}");
    }
}

/// A loop of polls cannot flood the Operations service: each task's polls, per caller, are a
/// bucket of their own. A client's poll over it is refused with 429; the gateway's own polling
/// (tasks/result here) waits until the bucket has one.
#[test]
fn a_tasks_polls_are_bounded_per_caller() {
    let server = Server::from_config_bytes(
        config(r#", "limits": {}"#)
            .replace(
                r#""wait_poll_interval_ms": 300}"#,
                r#""wait_poll_interval_ms": 300, "max_polls_per_second": 1, "poll_burst": 2}"#,
            )
            .as_bytes(),
    )
    .unwrap();
    let task_id = legacy_task(&server);
    let counters: Counters = std::sync::Arc::new(MemoryCounters::default());
    let poll = |caller: &Caller| {
        post_counted(
            &server,
            &headers("2025-11-25"),
            legacy_task_request("tasks/get", &task_id),
            caller,
            Some(&counters),
        )
    };
    for _ in 0..2 {
        let exchange = calling(poll(&Caller::Anyone));
        assert_eq!(exchange.started.borrow().len(), 1);
    }
    // Refused where the call would start: nothing goes out.
    let exchange = calling(poll(&Caller::Anyone));
    assert!(exchange.started.borrow().is_empty());
    let (status, body, observed) = exchange.finish();
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], -32029);
    assert_eq!(
        body["error"]["message"],
        "Too Many Requests: task operation operations/export-1 may be polled 1 times a second, 2 at once, by each caller \
         (tasks.max_polls_per_second, tasks.poll_burst); poll again after 1000 ms"
    );
    assert_eq!(body["error"]["data"], json!({"retryAfterMs": 1000}));
    assert_eq!(observed.refusal(), Some(crate::http::Refusal::RateLimited));
    // tasks/result polls through the same bucket, put off instead of refused.
    let mut exchange = calling(post_counted(
        &server,
        &headers("2025-11-25"),
        legacy_task_request("tasks/result", &task_id),
        &Caller::Anyone,
        Some(&counters),
    ));
    assert!(exchange.started.borrow().is_empty(), "the poll waits for the bucket");
    assert_eq!(exchange.reply.next_wake(), Some(exchange.now + Duration::from_secs(1)));
    assert!(!exchange.wake());
    assert_eq!(exchange.started.borrow().len(), 1);
    assert!(exchange.answer_operation(&exported("operations/export-1")));
    let (_, body, _) = exchange.finish();
    assert_eq!(body["result"]["structuredContent"]["item_count"], 3);
}

use super::*;
use crate::access::Caller;
use crate::eras::{CLIENT_CAPABILITIES_META, MODERN_VERSION, PROTOCOL_VERSION_META};
use crate::grpc::call_end::{CallEnd, GrpcReply};
use crate::jsonrpc::{HEADER_MISMATCH, PARSE_ERROR, UNSUPPORTED_PROTOCOL_VERSION};
use crate::jsonrpc::{INVALID_PARAMS, METHOD_NOT_FOUND};
use crate::observe::Observations;
use std::time::Duration;

const CONFIG: &str = r#"{
    "server": {"name": "demo", "version": "1.2.3", "instructions": "Use the catalog."},
    "forward_headers": ["x-client-version", "x-request-id"],
    "services": {
        "demo.catalog.v1.CatalogService": {"cluster": "catalog"},
        "demo.users.v1.UserService": {"cluster": "users", "metadata": {"x-tenant": "demo"}}
    }}"#;

fn server() -> Server {
    Server::from_config_bytes(CONFIG.as_bytes()).unwrap()
}

fn json_headers() -> McpHeaders {
    McpHeaders {
        content_type: Some("application/json".into()),
        accept: Some("application/json, text/event-stream".into()),
        ..McpHeaders::default()
    }
}

fn legacy(version: &str) -> McpHeaders {
    McpHeaders {
        protocol_version: Some(version.into()),
        ..json_headers()
    }
}

fn modern(method: &str, name: Option<&str>) -> McpHeaders {
    McpHeaders {
        protocol_version: Some(MODERN_VERSION.into()),
        mcp_method: Some(method.into()),
        mcp_name: name.map(Into::into),
        ..json_headers()
    }
}

fn meta() -> Value {
    json!({PROTOCOL_VERSION_META: MODERN_VERSION, CLIENT_CAPABILITIES_META: {}, "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}})
}

fn post(server: &Server, headers: &McpHeaders, body: &str) -> Outcome {
    observe(server, headers, body).0
}

/// The outcome of a POST, and what it told an operator.
fn observe(server: &Server, headers: &McpHeaders, body: &str) -> (Outcome, Observations) {
    let mut observed = Observations::default();
    let request = McpRequest {
        headers,
        body: body.as_bytes(),
        caller: &Caller::Anyone,
        client_address: None,
        counters: None,
    };
    (server.handle(request, &mut observed), observed)
}

/// Files how `call` ended, with nothing to observe.
fn file(server: &Server, reply: &mut Reply, call: &UpstreamCall, end: CallEnd<'_>) {
    server.file(reply, call, end, Duration::ZERO, &mut Observations::default());
}

fn answer(outcome: Outcome) -> (u16, Value) {
    match outcome {
        Outcome::Respond(response) => {
            let body = if response.body.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&response.body).unwrap()
            };
            (response.status, body)
        }
        Outcome::Await(_) => panic!("expected a reply, got calls"),
        Outcome::Cancel { .. } => panic!("expected a reply, got a cancellation"),
    }
}

fn calls(outcome: Outcome) -> (Reply, Vec<UpstreamCall>) {
    match outcome {
        Outcome::Await(mut reply) => {
            let calls = reply.take_calls_to_start();
            (reply, calls)
        }
        Outcome::Respond(response) => panic!("expected calls, got {}", String::from_utf8_lossy(&response.body)),
        Outcome::Cancel { .. } => panic!("expected calls, got a cancellation"),
    }
}

fn finish(reply: Reply) -> (u16, Value) {
    assert!(reply.is_complete());
    answer(Outcome::Respond(reply.into_response()))
}

fn call_user(server: &Server, headers: &McpHeaders, arguments: &str) -> Outcome {
    post(
        server,
        headers,
        &format!(
            r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"UserService_GetUser","arguments":{arguments}}}}}"#
        ),
    )
}

const USER_7: GrpcReply<'static> = GrpcReply {
    status: 0,
    message: None,
    body: &[0x08, 7],
    details: None,
};

mod batches;
mod calls;
mod cancellation;
mod content_negotiation;
mod header_phase;
mod legacy_era;
mod metadata;
mod modern_era;
mod observations;
mod progress;
mod routing_header;
mod strict_arguments;
mod tool_search;
mod wrapped_roots;

use super::protocol::{Answer, ErrorResponse, FileDescriptorResponse, ReflectionRequest, ReflectionResponse};
use super::*;
use crate::http::HeaderPair;
use crate::http::McpHeaders;
use crate::observe::Observations;
use crate::server::{McpRequest, Outcome};
use crate::upstream::{grpc_frame, unframe_all};
use prost::Message;
use prost_reflect::FileDescriptor;
use prost_types::{DescriptorProto, FileDescriptorProto, MethodDescriptorProto, ServiceDescriptorProto};
use serde_json::{json, Value};

const CATALOG: &str = "demo.catalog.v1.CatalogService";
const USERS: &str = "demo.users.v1.UserService";

fn config(extra: &str) -> PluginConfig {
    PluginConfig::parse(
        format!(
            r#"{{"services": {{
                "{CATALOG}": {{"cluster": "catalog", "from_reflection": true}},
                "{USERS}": {{"cluster": "users"}}
            }}{extra}}}"#
        )
        .as_bytes(),
    )
    .unwrap()
}

fn discovery(config: &PluginConfig) -> Discovery {
    Discovery::new(config, &embedded_pool().unwrap()).unwrap()
}

/// How a reflection server behaves in a test.
#[derive(Clone, Copy, PartialEq)]
enum Behaviour {
    /// Every file with the files it imports (as tonic, grpc-go and grpc-java answer).
    WithImports,
    /// Only the file asked for: the client must follow the imports.
    FileOnly,
    /// No v1 (UNIMPLEMENTED), v1alpha only.
    V1AlphaOnly,
    /// No reflection at all.
    Off,
}

/// Answers a reflection call from `pool`, as a server would: HTTP headers, body, trailers.
/// HTTP headers, body, and whether trailers with status OK follow (a trailers-only answer has
/// its status in the headers).
type Served = (Vec<(String, Vec<u8>)>, Vec<u8>, bool);

/// Answers a reflection call from `pool`, as a server would.
fn serve(pool: &DescriptorPool, call: &ReflectionCall, behaviour: Behaviour) -> Served {
    let headers = vec![(":status".to_owned(), b"200".to_vec())];
    let unimplemented =
        behaviour == Behaviour::Off || (behaviour == Behaviour::V1AlphaOnly && call.path.contains(".v1."));
    if unimplemented {
        let mut headers = headers;
        headers.push(("grpc-status".into(), b"12".to_vec()));
        return (headers, Vec::new(), false);
    }
    let mut body = Vec::new();
    for question in unframe_all(call.http_body()).unwrap() {
        let request = ReflectionRequest::decode(question).unwrap();
        let file = match request.question.unwrap() {
            Question::FileContainingSymbol(symbol) => {
                pool.get_service_by_name(&symbol).map(|service| service.parent_file())
            }
            Question::FileByFilename(name) => pool.get_file_by_name(&name),
        };
        let answer = match file {
            None => Answer::Error(ErrorResponse {
                error_code: 5,
                error_message: "not found".into(),
            }),
            Some(file) => {
                let mut files = vec![file.clone()];
                if behaviour != Behaviour::FileOnly {
                    files.extend(file.dependencies());
                }
                Answer::Files(FileDescriptorResponse {
                    // Encoded with their custom options, as a server sends them.
                    file_descriptor_proto: files.iter().map(FileDescriptor::encode_to_vec).collect(),
                })
            }
        };
        body.extend(grpc_frame(&ReflectionResponse { answer: Some(answer) }.encode_to_vec()));
    }
    (headers, body, true)
}

const OK_TRAILERS: [(&str, &[u8]); 1] = [("grpc-status", b"0")];

/// Runs one refresh against `pool` to its end.
fn refresh(discovery: &mut Discovery, pool: &DescriptorPool, behaviour: Behaviour) -> (Refreshed, Vec<&'static str>) {
    let mut calls = discovery.start(Duration::ZERO);
    let mut paths = Vec::new();
    loop {
        let call = calls.remove(0);
        paths.push(call.path);
        let (headers, body, trailers) = serve(pool, &call, behaviour);
        let headers: Vec<HeaderPair<'_>> = headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_slice()))
            .collect();
        let answer = ReflectionAnswer::Http {
            headers: &headers,
            body: &body,
            trailers: if trailers { &OK_TRAILERS } else { &[] },
        };
        match discovery.file(call.id, answer, Duration::ZERO) {
            Step::Call(more) => calls.extend(more),
            Step::Wait => {}
            Step::Done(refreshed) => return (refreshed, paths),
        }
    }
}

fn changed(refreshed: Refreshed) -> Server {
    match refreshed {
        Refreshed::Changed(server) => *server,
        Refreshed::Failed(why) => panic!("expected a new server, got a failure: {why}"),
        Refreshed::Unchanged => panic!("expected a new server, got none"),
    }
}

fn failure(refreshed: Refreshed) -> String {
    match refreshed {
        Refreshed::Failed(why) => why,
        other => panic!("expected a failure, got {}", other.label()),
    }
}

fn tool_names(server: &Server) -> Vec<String> {
    server.catalog().tools().map(|tool| tool.name.clone()).collect()
}

fn headers(version: &str, method: Option<&str>) -> McpHeaders {
    McpHeaders {
        content_type: Some("application/json".into()),
        accept: Some("application/json".into()),
        protocol_version: Some(version.into()),
        mcp_method: method.map(Into::into),
        ..McpHeaders::default()
    }
}

/// The server's answer to a POST it answers without calling out.
fn answer_at_once(server: &Server, headers: McpHeaders, body: &Value) -> Value {
    let body = body.to_string();
    let request = McpRequest {
        headers: &headers,
        body: body.as_bytes(),
        caller: &crate::access::Caller::Anyone,
    };
    let Outcome::Respond(response) = server.handle(request, &mut Observations::default()) else {
        panic!("answered at once");
    };
    serde_json::from_slice(&response.body).unwrap()
}

#[test]
fn reflected_services_are_pending_until_read_and_then_served() {
    let config = config("");
    let before = Server::new(&config, &embedded_pool().unwrap()).unwrap();
    assert_eq!(tool_names(&before), ["UserService_GetUser"]);
    assert_eq!(before.catalog().pending_services(), [CATALOG]);
    let mut discovery = discovery(&config);
    let calls = discovery.start(Duration::ZERO);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].cluster(), "catalog");
    assert!(calls[0]
        .http_headers()
        .contains(&(":path", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo")));
    // A refresh runs once at a time.
    assert!(discovery.start(Duration::ZERO).is_empty());
    let mut discovery = self::discovery(&config);
    let (refreshed, _) = refresh(&mut discovery, &embedded_pool().unwrap(), Behaviour::WithImports);
    let after = changed(refreshed);
    assert_eq!(
        tool_names(&after),
        ["CatalogService_Search", "CatalogService_GetItem", "UserService_GetUser"]
    );
    assert!(after.catalog().pending_services().is_empty());
    // The same API again is not a change.
    let (refreshed, _) = refresh(&mut discovery, &embedded_pool().unwrap(), Behaviour::WithImports);
    assert!(matches!(refreshed, Refreshed::Unchanged));
    assert!(!discovery.is_due(Duration::from_secs(29)));
    assert!(discovery.is_due(Duration::from_secs(30)));
}

#[test]
fn a_call_while_the_tools_are_not_known_yet_says_so() {
    let config = config("");
    let server = Server::new(&config, &embedded_pool().unwrap()).unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "CatalogService_Search"}});
    let answer = answer_at_once(&server, headers("2025-11-25", None), &body);
    assert_eq!(
        answer["error"]["message"],
        "Invalid params: unknown tool \"CatalogService_Search\"; the tools of demo.catalog.v1.CatalogService are not known yet (their descriptors are being read through gRPC server reflection); call tools/list again shortly"
    );
}

#[test]
fn imports_are_followed_when_the_server_sends_files_alone() {
    // The kitchen sink imports google/api/field_behavior.proto and a file of its own, which
    // the filter has no well-known copy of: they are asked for by name, in a second round.
    let config = PluginConfig::parse(
        br#"{"services": {"test.kitchensink.v1.KitchenSinkService": {"cluster": "sink", "from_reflection": true}}}"#,
    )
    .unwrap();
    let mut discovery = discovery(&config);
    let (refreshed, paths) = refresh(&mut discovery, &embedded_pool().unwrap(), Behaviour::FileOnly);
    let server = changed(refreshed);
    let echo = server.catalog().get("KitchenSinkService_Echo").unwrap();
    // Custom options come through reflection: google.api.field_behavior = REQUIRED.
    assert_eq!(echo.definition["inputSchema"]["required"], json!(["must"]));
    assert_eq!(paths.len(), 2, "{paths:?}");
}

#[test]
fn v1alpha_is_asked_when_v1_is_unimplemented_and_kept() {
    let config = config("");
    let mut discovery = discovery(&config);
    let (refreshed, paths) = refresh(&mut discovery, &embedded_pool().unwrap(), Behaviour::V1AlphaOnly);
    changed(refreshed);
    assert_eq!(
        paths,
        [
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
        ]
    );
    let (_, paths) = refresh(&mut discovery, &embedded_pool().unwrap(), Behaviour::V1AlphaOnly);
    assert_eq!(
        paths,
        ["/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"]
    );
}

#[test]
fn failures_say_which_cluster_and_why_and_retry_soon() {
    let config = config("");
    let mut discovery = discovery(&config);
    let (refreshed, _) = refresh(&mut discovery, &embedded_pool().unwrap(), Behaviour::Off);
    assert_eq!(
        failure(refreshed),
        "cluster catalog: the server does not offer gRPC server reflection (neither grpc.reflection.v1 nor v1alpha)"
    );
    assert!(discovery.is_due(RETRY_AFTER));
    // A server that does not know the service.
    let mut discovery = self::discovery(&config);
    let other = DescriptorPool::new();
    let (refreshed, _) = refresh(&mut discovery, &other, Behaviour::WithImports);
    assert_eq!(
        failure(refreshed),
        "cluster catalog: reflection answered NOT_FOUND: not found"
    );
}

fn file_one(
    discovery: &mut Discovery,
    headers: &[HeaderPair<'_>],
    body: &[u8],
    trailers: &[HeaderPair<'_>],
) -> Refreshed {
    let call = discovery.start(Duration::ZERO).remove(0);
    let answer = ReflectionAnswer::Http {
        headers,
        body,
        trailers,
    };
    match discovery.file(call.id, answer, Duration::ZERO) {
        Step::Done(refreshed) => refreshed,
        _ => panic!("expected the end"),
    }
}

#[test]
fn garbled_answers_fail_the_refresh_and_name_the_problem() {
    let config = config("");
    let ok: [(&str, &[u8]); 1] = [(":status", b"200")];
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            vec![0, 0, 0, 0, 9, 1, 2],
            "cluster catalog: a garbled reflection answer: the answer ends inside a gRPC frame",
        ),
        (
            grpc_frame(&[0xff, 0xff, 0xff]),
            "cluster catalog: a garbled reflection answer: ",
        ),
        (
            grpc_frame(&[]),
            "cluster catalog: a reflection answer with neither files nor an error",
        ),
        (
            grpc_frame(
                &ReflectionResponse {
                    answer: Some(Answer::Files(FileDescriptorResponse {
                        file_descriptor_proto: vec![vec![0x0a, 0x05, b'x']],
                    })),
                }
                .encode_to_vec(),
            ),
            "cluster catalog: a garbled file descriptor: ",
        ),
    ];
    for (body, expected) in cases {
        let mut discovery = discovery(&config);
        let why = failure(file_one(&mut discovery, &ok, &body, &OK_TRAILERS));
        assert!(why.starts_with(expected), "{why}");
    }
    let mut discovery = discovery(&config);
    let not_grpc: [(&str, &[u8]); 1] = [(":status", b"404")];
    let why = failure(file_one(&mut discovery, &not_grpc, b"nope", &[]));
    assert_eq!(
        why,
        "cluster catalog: HTTP 404 without a gRPC status: not a gRPC server, or no such cluster"
    );
    let mut discovery = self::discovery(&config);
    let call = discovery.start(Duration::ZERO).remove(0);
    let Step::Done(refreshed) =
        discovery.file(call.id, ReflectionAnswer::Failed("no healthy upstream"), Duration::ZERO)
    else {
        panic!("expected the end");
    };
    assert_eq!(
        failure(refreshed),
        "cluster catalog: the reflection call failed: no healthy upstream"
    );
}

#[test]
fn a_reflected_api_that_breaks_the_configuration_keeps_the_last_good_server() {
    // An override for a method the reflected service does not have is checked once it is read.
    let config = config(r#", "tools": {"demo.catalog.v1.CatalogService/Delete": {"name": "delete"}}"#);
    assert!(Server::new(&config, &embedded_pool().unwrap()).is_ok());
    let mut discovery = discovery(&config);
    let (refreshed, _) = refresh(&mut discovery, &embedded_pool().unwrap(), Behaviour::WithImports);
    assert_eq!(
        failure(refreshed),
        "the reflected descriptors do not make a catalog: at `tools.demo.catalog.v1.CatalogService/Delete`: demo.catalog.v1.CatalogService/Delete is not an exposed method; expose it under `services` or remove the override"
    );
}

/// A service of `methods` unary methods, in a file of its own.
fn big_api(methods: usize) -> DescriptorPool {
    let message = DescriptorProto {
        name: Some("Empty".into()),
        ..DescriptorProto::default()
    };
    let service = ServiceDescriptorProto {
        name: Some("Big".into()),
        method: (0..methods)
            .map(|index| MethodDescriptorProto {
                name: Some(format!("Method{index}")),
                input_type: Some(".big.v1.Empty".into()),
                output_type: Some(".big.v1.Empty".into()),
                ..MethodDescriptorProto::default()
            })
            .collect(),
        ..ServiceDescriptorProto::default()
    };
    let file = FileDescriptorProto {
        name: Some("big/v1/big.proto".into()),
        package: Some("big.v1".into()),
        message_type: vec![message],
        service: vec![service],
        syntax: Some("proto3".into()),
        ..FileDescriptorProto::default()
    };
    let mut pool = DescriptorPool::new();
    pool.add_file_descriptor_proto(file).unwrap();
    pool
}

#[test]
fn a_thousand_methods_become_a_thousand_tools_and_a_larger_api_is_a_change() {
    let config = PluginConfig::parse(br#"{"services": {"big.v1.Big": {"cluster": "big", "from_reflection": true}}, "tools_list": {"page_size": 1000}}"#)
        .unwrap();
    let mut discovery = discovery(&config);
    let (refreshed, _) = refresh(&mut discovery, &big_api(10), Behaviour::WithImports);
    assert_eq!(changed(refreshed).catalog().tool_count(), 10);
    let (refreshed, _) = refresh(&mut discovery, &big_api(1000), Behaviour::WithImports);
    let server = changed(refreshed);
    assert_eq!(server.catalog().tool_count(), 1000);
    assert!(server.catalog().get("Big_Method999").is_some());
}

#[test]
fn the_list_ttl_is_no_longer_than_the_reflection_interval() {
    let config = config(r#", "reflection": {"interval_ms": 2000}"#);
    let server = Server::new(&config, &embedded_pool().unwrap()).unwrap();
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}});
    let answer = answer_at_once(&server, headers("2026-07-28", Some("tools/list")), &body);
    assert_eq!(answer["result"]["ttlMs"], 2000);
    let error = PluginConfig::parse(
        format!(r#"{{"services": {{"{CATALOG}": {{"cluster": "c", "from_reflection": true}}}}, "reflection": {{"interval_ms": 10}}}}"#).as_bytes(),
    )
    .unwrap_err()
    .0;
    assert!(
        error.starts_with("at `reflection.interval_ms`: 10 is below 1000"),
        "{error}"
    );
}

use super::acceptance::Asked;
use super::protocol::{ErrorResponse, FileDescriptorResponse, MessageResponse, ReflectionRequest, ReflectionResponse};
use super::*;
use crate::grpc::call_end::CallPart;
use crate::grpc::frame::{grpc_frame, unframe_all};
use crate::http::HeaderPair;
use crate::http::{HeaderCopy, McpHeaders};
use crate::observe::Observations;
use crate::server::{McpRequest, Outcome};
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
type Served = (HeaderCopy, Vec<u8>, bool);

/// Answers a reflection call from `pool`, as a server would.
fn serve(pool: &DescriptorPool, call: &ReflectionCall, behaviour: Behaviour) -> Served {
    let headers = HeaderCopy::from_iter([(":status", "200")]);
    let unimplemented =
        behaviour == Behaviour::Off || (behaviour == Behaviour::V1AlphaOnly && call.path.contains(".v1."));
    if unimplemented {
        let mut headers = headers;
        headers.push(b"grpc-status", b"12");
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
            None => MessageResponse::Error(ErrorResponse {
                error_code: 5,
                error_message: "not found".into(),
            }),
            Some(file) => {
                let mut files = vec![file.clone()];
                if behaviour != Behaviour::FileOnly {
                    files.extend(file.dependencies());
                }
                MessageResponse::Files(FileDescriptorResponse {
                    // Encoded with their custom options, as a server sends them.
                    file_descriptor_proto: files.iter().map(FileDescriptor::encode_to_vec).collect(),
                })
            }
        };
        body.extend(grpc_frame(
            &ReflectionResponse {
                message_response: Some(answer),
            }
            .encode_to_vec(),
        ));
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
        let headers = headers.pairs();
        let answer = ReflectionCallEnd::Http {
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
        Refreshed::Changed { server, .. } => *server,
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
        client_address: None,
        counters: None,
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
    assert_eq!(echo.definition_value()["inputSchema"]["required"], json!(["must"]));
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
    let answer = ReflectionCallEnd::Http {
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
                    message_response: Some(MessageResponse::Files(FileDescriptorResponse {
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
    let Step::Done(refreshed) = discovery.file(
        call.id,
        ReflectionCallEnd::Failed("no healthy upstream"),
        Duration::ZERO,
    ) else {
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

// What a server's reflection is trusted with (see `acceptance`).

const TIMESTAMP: &str = "google/protobuf/timestamp.proto";
const VALIDATE: &str = "buf/validate/validate.proto";
const USERS_FILE: &str = "demo/users/v1/users.proto";
const CATALOG_FILE: &str = "demo/catalog/v1/catalog.proto";

/// Runs one refresh whose every question `answer` answers with the files it gives for the call.
fn refresh_answering(discovery: &mut Discovery, answer: impl Fn(&ReflectionCall) -> Vec<Vec<u8>>) -> Refreshed {
    let mut calls = discovery.start(Duration::ZERO);
    loop {
        let call = calls.remove(0);
        let mut body = Vec::new();
        for _ in unframe_all(call.http_body()).unwrap() {
            let files = FileDescriptorResponse {
                file_descriptor_proto: answer(&call),
            };
            let response = ReflectionResponse {
                message_response: Some(MessageResponse::Files(files)),
            };
            body.extend(grpc_frame(&response.encode_to_vec()));
        }
        let headers: [(&str, &[u8]); 1] = [(":status", b"200")];
        let answer = ReflectionCallEnd::Http {
            headers: &headers,
            body: &body,
            trailers: &OK_TRAILERS,
        };
        match discovery.file(call.id, answer, Duration::ZERO) {
            Step::Call(more) => calls.extend(more),
            Step::Wait => {}
            Step::Done(refreshed) => return refreshed,
        }
    }
}

fn changed_with(refreshed: Refreshed) -> (Server, Declined) {
    match refreshed {
        Refreshed::Changed { server, declined } => (*server, declined),
        Refreshed::Failed(why) => panic!("expected a new server, got a failure: {why}"),
        Refreshed::Unchanged => panic!("expected a new server, got none"),
    }
}

/// A file of the embedded set, decoded to be changed (none of these has custom options).
fn embedded_file(name: &str) -> FileDescriptorProto {
    embedded_pool()
        .unwrap()
        .get_file_by_name(name)
        .unwrap()
        .file_descriptor_proto()
        .clone()
}

/// The embedded file, encoded as a server sends it.
fn served(name: &str) -> Vec<u8> {
    embedded_pool().unwrap().get_file_by_name(name).unwrap().encode_to_vec()
}

/// `google/protobuf/timestamp.proto` with the numbers of `seconds` and `nanos` swapped.
fn lying_timestamp() -> Vec<u8> {
    let mut file = embedded_file(TIMESTAMP);
    for field in &mut file.message_type[0].field {
        field.number = Some(3 - field.number());
    }
    file.encode_to_vec()
}

/// `demo/users/v1/users.proto` whose GetUser takes a name instead of an id.
fn lying_users() -> Vec<u8> {
    let mut file = embedded_file(USERS_FILE);
    let request = file
        .message_type
        .iter_mut()
        .find(|message| message.name() == "GetUserRequest")
        .unwrap();
    request.field[0].name = Some("user_name".into());
    request.field[0].json_name = Some("userName".into());
    request.field[0].r#type = Some(prost_types::field_descriptor_proto::Type::String.into());
    file.encode_to_vec()
}

/// `buf/validate/validate.proto` whose `field` option has another number (every field rule
/// would vanish).
fn lying_validate() -> Vec<u8> {
    let mut file = embedded_file(VALIDATE);
    for extension in &mut file.extension {
        extension.number = Some(extension.number() + 1000);
    }
    file.encode_to_vec()
}

/// The catalog file with one more method, `Count`, importing `more` besides its own imports.
fn catalog_importing(more: &[&str]) -> Vec<u8> {
    let mut file = embedded_file(CATALOG_FILE);
    file.dependency.extend(more.iter().map(|name| (*name).to_owned()));
    let mut count = file.service[0].method[1].clone();
    count.name = Some("Count".into());
    file.service[0].method.push(count);
    file.encode_to_vec()
}

fn file_named(server: &Server, name: &str) -> Vec<u8> {
    let tool = server.catalog().tools().next().unwrap();
    tool.method
        .parent_pool()
        .get_file_by_name(name)
        .unwrap()
        .encode_to_vec()
}

fn definition(server: &Server, tool: &str) -> Value {
    server.catalog().get(tool).unwrap().definition_value()
}

#[test]
fn files_nobody_asked_for_are_ignored_and_counted() {
    let config = config("");
    let before = Server::new(&config, &embedded_pool().unwrap()).unwrap();
    let mut discovery = discovery(&config);
    // A file redeclaring the asked service would break the pool if it were read.
    let mut shadow = embedded_file(CATALOG_FILE);
    shadow.name = Some("demo/catalog/v1/shadow.proto".into());
    let refreshed = refresh_answering(&mut discovery, |_| {
        vec![
            served(CATALOG_FILE),
            served(TIMESTAMP),
            lying_users(),
            lying_timestamp(),
            shadow.encode_to_vec(),
        ]
    });
    let (server, declined) = changed_with(refreshed);
    assert_eq!(
        declined,
        Declined {
            unasked: 3,
            replacements: Vec::new()
        }
    );
    assert_eq!(
        tool_names(&server),
        ["CatalogService_Search", "CatalogService_GetItem", "UserService_GetUser"]
    );
    assert_eq!(
        definition(&server, "UserService_GetUser"),
        definition(&before, "UserService_GetUser")
    );
    assert_eq!(file_named(&server, TIMESTAMP), served(TIMESTAMP));
}

#[test]
fn the_answering_file_and_its_imports_within_the_answer_are_taken_at_once() {
    // The kitchen sink's own imports come in its answer: one round, custom options kept.
    let config = PluginConfig::parse(
        br#"{"services": {"test.kitchensink.v1.KitchenSinkService": {"cluster": "sink", "from_reflection": true}}}"#,
    )
    .unwrap();
    let mut discovery = discovery(&config);
    let (refreshed, paths) = refresh(&mut discovery, &embedded_pool().unwrap(), Behaviour::WithImports);
    let (server, declined) = changed_with(refreshed);
    assert_eq!(paths.len(), 1);
    // Identical copies of the well-known files it imports are nothing to say.
    assert_eq!(declined, Declined::default());
    let echo = server.catalog().get("KitchenSinkService_Echo").unwrap();
    assert_eq!(echo.definition_value()["inputSchema"]["required"], json!(["must"]));
}

#[test]
fn which_files_of_an_answer_are_read() {
    let file = |name: &str, package: &str, imports: &[&str], service: Option<&str>| FileDescriptorProto {
        name: Some(name.into()),
        package: Some(package.into()),
        dependency: imports.iter().map(|import| (*import).to_owned()).collect(),
        service: service
            .map(|service| ServiceDescriptorProto {
                name: Some(service.into()),
                ..ServiceDescriptorProto::default()
            })
            .into_iter()
            .collect(),
        ..FileDescriptorProto::default()
    };
    let files = [
        file("x.proto", "other", &[], Some("S")),
        file("a.proto", "p", &["b.proto", "gone.proto"], Some("S")),
        // An import cycle ends.
        file("b.proto", "p", &["a.proto", "c.proto", "kept.proto"], None),
        file("c.proto", "p", &[], None),
        // A second file of a name already there is left out.
        file("b.proto", "p", &[], None),
        // Reached, but its imports are not followed: its local copy is used.
        file("kept.proto", "p", &["d.proto"], None),
        file("d.proto", "p", &[], None),
        file("unasked.proto", "p", &[], None),
    ];
    let files: Vec<&FileDescriptorProto> = files.iter().collect();
    let kept_local = |name: &str| name == "kept.proto";
    let read = |asked: &[Asked<'_>]| acceptance::answering_files(asked, &files, kept_local);
    assert_eq!(read(&[Asked::Symbol("p.S")]), Ok(vec![1, 2, 3, 5]));
    assert_eq!(read(&[Asked::File("c.proto")]), Ok(vec![3]));
    assert_eq!(
        read(&[Asked::File("d.proto"), Asked::Symbol("other.S")]),
        Ok(vec![0, 6])
    );
    assert_eq!(
        read(&[Asked::Symbol("p.T")]),
        Err("the answer to a request for p.T holds no file that declares it".into())
    );
    assert_eq!(
        read(&[Asked::File("gone.proto")]),
        Err("the answer to a request for `gone.proto` does not hold that file".into())
    );
    // A symbol of another package with the same local name is not the one asked for.
    assert_eq!(
        read(&[Asked::Symbol("q.S")]),
        Err("the answer to a request for q.S holds no file that declares it".into())
    );
}

#[test]
fn a_reflected_file_never_replaces_a_protected_one() {
    let config = config("");
    let before = Server::new(&config, &embedded_pool().unwrap()).unwrap();
    let mut discovery = discovery(&config);
    // The asked file imports the lies, so they are read: the names protect the local copies.
    let refreshed = refresh_answering(&mut discovery, |_| {
        vec![
            catalog_importing(&[USERS_FILE, VALIDATE]),
            lying_timestamp(),
            lying_users(),
            lying_validate(),
        ]
    });
    let (server, declined) = changed_with(refreshed);
    let kept = |name: &str| format!("kept the filter's built-in `{name}`, not cluster catalog's different copy");
    assert_eq!(
        declined,
        Declined {
            unasked: 0,
            replacements: vec![kept(VALIDATE), kept(USERS_FILE), kept(TIMESTAMP)],
        }
    );
    for name in [TIMESTAMP, USERS_FILE, VALIDATE] {
        assert_eq!(file_named(&server, name), served(name), "{name}");
    }
    assert_eq!(
        definition(&server, "UserService_GetUser"),
        definition(&before, "UserService_GetUser")
    );
    // The reflected service's own file is the server's: the configured one is superseded.
    assert!(server.catalog().get("CatalogService_Count").is_some());
    // The same lies again are no change, and so are not logged again.
    let refreshed = refresh_answering(&mut discovery, |_| {
        vec![
            catalog_importing(&[USERS_FILE, VALIDATE]),
            lying_timestamp(),
            lying_users(),
            lying_validate(),
        ]
    });
    assert!(matches!(refreshed, Refreshed::Unchanged));
}

#[test]
fn a_copy_that_differs_only_in_comments_is_nothing_to_say() {
    let config = config("");
    let mut discovery = discovery(&config);
    let mut timestamp = embedded_file(TIMESTAMP);
    timestamp.source_code_info = Some(prost_types::SourceCodeInfo {
        location: vec![prost_types::source_code_info::Location {
            path: vec![4, 0],
            leading_comments: Some(" Another server's words.\n".into()),
            ..Default::default()
        }],
    });
    let refreshed = refresh_answering(&mut discovery, |_| {
        vec![served(CATALOG_FILE), timestamp.encode_to_vec()]
    });
    let (server, declined) = changed_with(refreshed);
    assert_eq!(declined, Declined::default());
    assert_eq!(file_named(&server, TIMESTAMP), served(TIMESTAMP));
}

#[test]
fn a_configured_descriptor_set_is_named_as_such() {
    use base64::Engine;
    let set = base64::engine::general_purpose::STANDARD.encode(crate::descriptors::EMBEDDED_DESCRIPTOR_SET);
    let config = config(&format!(r#", "descriptor_set": "{set}""#));
    let configured = crate::descriptors::configured_pool(config.descriptor_set.as_deref()).unwrap();
    let mut discovery = Discovery::new(&config, &configured).unwrap();
    let refreshed = refresh_answering(&mut discovery, |_| {
        vec![catalog_importing(&[USERS_FILE]), served(TIMESTAMP), lying_users()]
    });
    let (_, declined) = changed_with(refreshed);
    assert_eq!(
        declined.replacements,
        ["kept the configured `demo/users/v1/users.proto`, not cluster catalog's different copy"]
    );
}

#[test]
fn a_file_one_cluster_gave_is_not_replaced_by_another_clusters() {
    let config = PluginConfig::parse(
        br#"{"services": {
            "one.v1.One": {"cluster": "first", "from_reflection": true},
            "two.v1.Two": {"cluster": "second", "from_reflection": true}
        }}"#,
    )
    .unwrap();
    let message = |field: &str| DescriptorProto {
        name: Some("Shared".into()),
        field: vec![prost_types::FieldDescriptorProto {
            name: Some(field.into()),
            number: Some(1),
            r#type: Some(prost_types::field_descriptor_proto::Type::String.into()),
            label: Some(prost_types::field_descriptor_proto::Label::Optional.into()),
            ..Default::default()
        }],
        ..DescriptorProto::default()
    };
    let shared = |field: &str| FileDescriptorProto {
        name: Some("shared/v1/shared.proto".into()),
        package: Some("shared.v1".into()),
        message_type: vec![message(field)],
        syntax: Some("proto3".into()),
        ..FileDescriptorProto::default()
    };
    let service = |package: &str, name: &str| FileDescriptorProto {
        name: Some(format!("{package}/{name}.proto")),
        package: Some(format!("{package}.v1")),
        dependency: vec!["shared/v1/shared.proto".into()],
        service: vec![ServiceDescriptorProto {
            name: Some(name.into()),
            method: vec![MethodDescriptorProto {
                name: Some("Get".into()),
                input_type: Some(".shared.v1.Shared".into()),
                output_type: Some(".shared.v1.Shared".into()),
                ..MethodDescriptorProto::default()
            }],
            ..ServiceDescriptorProto::default()
        }],
        syntax: Some("proto3".into()),
        ..FileDescriptorProto::default()
    };
    let mut discovery = discovery(&config);
    let refreshed = refresh_answering(&mut discovery, |call| match call.cluster() {
        "first" => vec![service("one", "One").encode_to_vec(), shared("mine").encode_to_vec()],
        _ => vec![service("two", "Two").encode_to_vec(), shared("theirs").encode_to_vec()],
    });
    let (server, declined) = changed_with(refreshed);
    assert_eq!(
        declined.replacements,
        ["kept cluster first's `shared/v1/shared.proto`, not cluster second's different copy"]
    );
    let schema = &definition(&server, "Two_Get")["inputSchema"]["properties"];
    assert!(schema.get("mine").is_some(), "{schema}");
}

#[test]
fn protected_names_are_what_the_configuration_serves_and_what_reflected_services_do_not_reach() {
    let config = PluginConfig::parse(
        br#"{"services": {
            "demo.catalog.v1.CatalogService": {"cluster": "c", "from_reflection": true},
            "test.kitchensink.v1.KitchenSinkService": {"cluster": "k", "from_reflection": true},
            "demo.users.v1.UserService": {"cluster": "u"}
        }}"#,
    )
    .unwrap();
    let protected = Protected::of(&config, &embedded_pool().unwrap(), None);
    for name in [
        USERS_FILE,
        TIMESTAMP,
        VALIDATE,
        "test/rules/v1/rules.proto",
        "google/rpc/status.proto",
    ] {
        assert!(protected.contains(name), "{name}");
    }
    for name in [
        CATALOG_FILE,
        "test/kitchensink/v1/kitchen_sink.proto",
        "test/kitchensink/v1/legacy.proto",
        "google/api/field_behavior.proto",
    ] {
        assert!(!protected.contains(name), "{name}");
    }
    // A file that declares a reflected service and a configured one is the configuration's;
    // so is what it imports, even if a reflected service's file imports it too.
    let file = |name: &str, imports: &[&str], services: &[&str]| FileDescriptorProto {
        name: Some(name.into()),
        package: Some("p".into()),
        dependency: imports.iter().map(|import| (*import).to_owned()).collect(),
        service: services
            .iter()
            .map(|service| ServiceDescriptorProto {
                name: Some((*service).into()),
                ..ServiceDescriptorProto::default()
            })
            .collect(),
        ..FileDescriptorProto::default()
    };
    let mut pool = DescriptorPool::new();
    pool.add_file_descriptor_protos([
        file("common.proto", &[], &[]),
        file("only_reflected.proto", &[], &[]),
        file("both.proto", &["common.proto"], &["Reflected", "Configured"]),
        file("reflected.proto", &["common.proto", "only_reflected.proto"], &["Alone"]),
    ])
    .unwrap();
    let config = PluginConfig::parse(
        br#"{"services": {
            "p.Reflected": {"cluster": "r", "from_reflection": true},
            "p.Alone": {"cluster": "r", "from_reflection": true},
            "p.Configured": {"cluster": "c"}
        }}"#,
    )
    .unwrap();
    let protected = Protected::of(&config, &pool, None);
    assert!(protected.contains("both.proto") && protected.contains("common.proto"));
    assert!(!protected.contains("reflected.proto") && !protected.contains("only_reflected.proto"));
}

#[test]
fn an_answer_without_the_asked_service_fails_and_kept_copies_are_named_when_the_catalog_fails() {
    let config = config("");
    let mut discovery = discovery(&config);
    let refreshed = refresh_answering(&mut discovery, |_| vec![served(USERS_FILE)]);
    assert_eq!(
        failure(refreshed),
        "cluster catalog: the answer to a request for demo.catalog.v1.CatalogService holds no file that declares it"
    );
    let config = self::config(r#", "tools": {"demo.catalog.v1.CatalogService/Delete": {"name": "delete"}}"#);
    let mut discovery = self::discovery(&config);
    let refreshed = refresh_answering(&mut discovery, |_| vec![served(CATALOG_FILE), lying_timestamp()]);
    let why = failure(refreshed);
    assert!(
        why.ends_with(
            "; kept the filter's built-in `google/protobuf/timestamp.proto`, not cluster catalog's different copy"
        ),
        "{why}"
    );
}

/// The host contract: a refresh driven through the [`Refresher`], with calls started under the
/// host's tokens, answered in parts, whole, or refused.
mod refresher {
    use std::cell::RefCell;

    use super::*;
    use crate::grpc::call_end::CallPart;

    fn new_refresher() -> Refresher {
        Refresher::new(discovery(&config("")))
    }

    /// A host that starts every call, under tokens from 100 up, and keeps them to answer.
    fn host(started: &RefCell<Vec<(u64, ReflectionCall)>>) -> impl FnMut(&ReflectionCall) -> Result<u64, String> + '_ {
        move |call| {
            let mut started = started.borrow_mut();
            let token = 100 + started.len() as u64;
            started.push((token, call.clone()));
            Ok(token)
        }
    }

    #[test]
    fn a_refresh_heard_in_parts_ends_with_its_new_server() {
        let pool = embedded_pool().unwrap();
        let mut refresher = new_refresher();
        let started = RefCell::new(Vec::new());
        assert!(refresher.tick(Duration::ZERO, host(&started)).is_none());
        assert!(
            refresher.tick(Duration::ZERO, host(&started)).is_none(),
            "not due while one runs"
        );
        let mut done = None;
        while done.is_none() {
            let (token, call) = started.borrow_mut().remove(0);
            let (headers, body, _) = serve(&pool, &call, Behaviour::FileOnly);
            refresher.heard(token, CallPart::Headers(headers));
            let (first, rest) = body.split_at(body.len() / 2);
            refresher.heard(token, CallPart::Data(first));
            refresher.heard(token, CallPart::Data(rest));
            refresher.heard(token, CallPart::Trailers(HeaderCopy::from_iter([("grpc-status", "0")])));
            // Anything about a token not out is ignored.
            refresher.heard(7, CallPart::Data(b"stray"));
            assert!(refresher.ended(7, false, Duration::ZERO, host(&started)).is_none());
            done = refresher.ended(token, false, Duration::ZERO, host(&started));
        }
        let server = changed(done.unwrap());
        assert!(server.catalog().get("CatalogService_Search").is_some());
    }

    #[test]
    fn a_refresh_heard_whole_and_one_over_the_limit() {
        let pool = embedded_pool().unwrap();
        let mut refresher = new_refresher();
        let started = RefCell::new(Vec::new());
        refresher.tick(Duration::ZERO, host(&started));
        let (token, call) = started.borrow_mut().remove(0);
        let (headers, body, _) = serve(&pool, &call, Behaviour::WithImports);
        let trailers = HeaderCopy::from_iter([("grpc-status", "0")]);
        let read = || (headers, body.clone(), trailers);
        let done = refresher.answered(token, body.len(), read, Duration::ZERO, host(&started));
        changed(done.unwrap());

        let mut refresher = new_refresher();
        refresher.tick(Duration::ZERO, host(&started));
        let (token, _) = started.borrow_mut().pop().unwrap();
        let read = || -> crate::grpc::call_end::WholeCallResponse { panic!("read an answer over the limit") };
        let done = refresher.answered(token, MAX_ANSWER_BYTES + 1, read, Duration::ZERO, host(&started));
        assert!(failure(done.unwrap()).contains("over 16777216"));
    }

    #[test]
    fn calls_the_host_cannot_start_end_the_refresh_at_once() {
        let mut refresher = new_refresher();
        let refuse = |_: &ReflectionCall| Err("no such cluster".to_owned());
        let done = refresher.tick(Duration::ZERO, refuse);
        assert!(failure(done.unwrap()).contains("cannot call cluster \"catalog\": no such cluster"));
    }

    #[test]
    fn a_reset_call_fails_the_refresh() {
        let mut refresher = new_refresher();
        let started = RefCell::new(Vec::new());
        refresher.tick(Duration::ZERO, host(&started));
        let (token, _) = started.borrow_mut().remove(0);
        refresher.heard(token, CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])));
        let done = refresher.ended(token, true, Duration::ZERO, host(&started));
        assert!(failure(done.unwrap()).contains("the call was reset"));
    }
}

/// Envoy may answer a call from inside the host's own call that starts it: a shared
/// refresher keeps what it is told then, and hands it over as soon as the start returns.
#[test]
fn a_shared_refresher_answered_while_it_starts_a_call_loses_nothing() {
    use std::cell::Cell;

    // The kitchen sink's imports are asked for in a second round, started while the first
    // round's answer is being handed over.
    let config = PluginConfig::parse(
        br#"{"services": {"test.kitchensink.v1.KitchenSinkService": {"cluster": "sink", "from_reflection": true}}}"#,
    )
    .unwrap();
    let pool = embedded_pool().unwrap();
    let shared = SharedRefresher::new(Refresher::new(discovery(&config)));
    let tokens = Cell::new(0);
    let start_answered_inline = |call: &ReflectionCall| -> Result<u64, String> {
        tokens.set(tokens.get() + 1);
        let token = tokens.get();
        let (headers, body, _) = serve(&pool, call, Behaviour::FileOnly);
        shared.heard(token, CallPart::Headers(headers));
        shared.heard(token, CallPart::Data(&body));
        shared.heard(token, CallPart::Trailers(HeaderCopy::from_iter([("grpc-status", "0")])));
        assert!(shared
            .ended(token, false, Duration::ZERO, |_| Err("not now".into()))
            .is_none());
        Ok(token)
    };
    let refreshed = shared.tick(Duration::ZERO, start_answered_inline);
    let server = changed(refreshed.expect("the refresh ended within the tick"));
    assert!(server.catalog().get("KitchenSinkService_Echo").is_some());
    assert_eq!(tokens.get(), 2, "the imports were followed");
}

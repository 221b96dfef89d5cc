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
    "forward_headers": ["authorization", "x-request-id"],
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

mod legacy_era {
    use super::*;

    #[test]
    fn initialize_negotiates_the_version() {
        let server = server();
        let (status, body) = answer(post(
            &server,
            &json_headers(),
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        ));
        assert_eq!(status, 200);
        assert_eq!(body["result"]["protocolVersion"], "2025-06-18");
        assert_eq!(
            body["result"]["serverInfo"],
            json!({"name": "demo", "version": "1.2.3"})
        );
        assert_eq!(body["result"]["instructions"], "Use the catalog.");
        assert_eq!(body["result"]["capabilities"], json!({"tools": {"listChanged": false}}));
        for unknown in ["1999-01-01", "2026-07-28"] {
            let request = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"{unknown}"}}}}"#
            );
            let (_, body) = answer(post(&server, &json_headers(), &request));
            assert_eq!(body["result"]["protocolVersion"], "2025-11-25");
        }
    }

    #[test]
    fn notifications_and_responses_are_accepted_without_a_body() {
        let server = server();
        assert_eq!(
            answer(post(
                &server,
                &json_headers(),
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
            )),
            (202, Value::Null)
        );
        assert_eq!(
            answer(post(
                &server,
                &legacy("2025-11-25"),
                r#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#
            )),
            (202, Value::Null)
        );
        assert_eq!(
            answer(post(
                &server,
                &json_headers(),
                r#"{"jsonrpc":"2.0","id":9,"result":{}}"#
            )),
            (202, Value::Null)
        );
    }

    #[test]
    fn ping_and_methods_not_served() {
        let server = server();
        assert_eq!(
            answer(post(
                &server,
                &json_headers(),
                r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#
            ))
            .1["result"],
            json!({})
        );
        for method in [
            "resources/list",
            "prompts/list",
            "completion/complete",
            "logging/setLevel",
            "server/discover",
        ] {
            let (status, body) = answer(post(
                &server,
                &legacy("2025-11-25"),
                &format!(r#"{{"jsonrpc":"2.0","id":2,"method":"{method}"}}"#),
            ));
            assert_eq!(
                (status, body["error"]["code"].clone()),
                (200, json!(METHOD_NOT_FOUND)),
                "{method}"
            );
        }
    }

    #[test]
    fn envelope_errors_are_http_400() {
        let server = server();
        let (status, body) = answer(post(&server, &json_headers(), "{"));
        assert_eq!(
            (status, body["error"]["code"].clone(), body["id"].clone()),
            (400, json!(PARSE_ERROR), Value::Null)
        );
        let (status, body) = answer(post(
            &server,
            &json_headers(),
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
        ));
        assert_eq!((status, body["error"]["code"].clone()), (400, json!(INVALID_REQUEST)));
        let (status, body) = answer(post(&server, &json_headers(), r#"{"id":3,"method":"ping"}"#));
        assert_eq!((status, body["id"].clone()), (400, json!(3)));
    }

    #[test]
    fn params_of_the_wrong_type_are_invalid_params() {
        let (status, body) = answer(post(
            &server(),
            &json_headers(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[]}"#,
        ));
        assert_eq!((status, body["error"]["code"].clone()), (200, json!(INVALID_PARAMS)));
    }

    #[test]
    fn unsupported_version_header_is_400_with_the_supported_list() {
        let (status, body) = answer(post(
            &server(),
            &legacy("1999-01-01"),
            r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#,
        ));
        assert_eq!(status, 400);
        assert_eq!(body["id"], 5);
        assert_eq!(body["error"]["code"], UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(body["error"]["data"]["requested"], "1999-01-01");
    }

    #[test]
    fn tools_list_has_no_modern_fields() {
        let (_, body) = answer(post(
            &server(),
            &legacy("2025-11-25"),
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
        ));
        let names: Vec<&str> = body["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["CatalogService_Search", "CatalogService_GetItem", "UserService_GetUser"]
        );
        assert!(body["result"].get("resultType").is_none());
        let (_, body) = answer(post(
            &server(),
            &json_headers(),
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"bogus"}}"#,
        ));
        assert_eq!(body["error"]["code"], INVALID_PARAMS);
    }

    #[test]
    fn tools_call_becomes_an_upstream_call_and_its_reply_a_result() {
        let server = server();
        let (mut reply, calls) = calls(call_user(&server, &json_headers(), r#"{"user_id":7}"#));
        let [call] = calls.as_slice() else { panic!("one call") };
        assert_eq!(
            call.http_headers(),
            [
                (":method", "POST"),
                (":path", "/demo.users.v1.UserService/GetUser"),
                (":authority", "users"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
                ("grpc-timeout", "10000m"),
                ("x-tenant", "demo"),
            ]
        );
        assert_eq!((call.cluster(), call.message()), ("users", [0x08, 7].as_slice()));
        assert_eq!(call.http_body(), [0, 0, 0, 0, 2, 0x08, 7]);
        assert!(!reply.is_complete());
        file(&server, &mut reply, call, CallEnd::Replied(USER_7));
        let (status, body) = finish(reply);
        assert_eq!(status, 200);
        let result = &body["result"];
        assert_eq!(
            (
                result["isError"].clone(),
                result["structuredContent"]["user_id"].clone()
            ),
            (json!(false), json!(7))
        );
        let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, result["structuredContent"]);
        assert!(result.get("resultType").is_none());
    }

    #[test]
    fn failures_become_tool_errors() {
        let server = server();
        let text = |grpc: GrpcReply<'_>| {
            let (mut reply, calls) = calls(call_user(&server, &json_headers(), r#"{"user_id":7}"#));
            file(&server, &mut reply, &calls[0], CallEnd::Replied(grpc));
            let (_, body) = finish(reply);
            assert_eq!(body["result"]["isError"], true);
            body["result"]["content"][0]["text"].as_str().unwrap().to_owned()
        };
        assert_eq!(
            text(GrpcReply {
                status: 5,
                message: Some(b"no%20user%207{via_upstream}"),
                body: &[],
                details: None
            }),
            "demo.users.v1.UserService/GetUser failed with gRPC status NOT_FOUND (5): no user 7"
        );
        assert!(text(GrpcReply {
            status: 0,
            message: None,
            body: &[0xff, 0xff],
            details: None
        })
        .contains("could not be decoded"));

        let (mut reply, overdue) = calls(call_user(&server, &json_headers(), r#"{"user_id":7}"#));
        file(&server, &mut reply, &overdue[0], CallEnd::DeadlinePassed);
        let (_, body) = finish(reply);
        assert_eq!(
            body["result"]["content"][0]["text"],
            "demo.users.v1.UserService/GetUser failed with gRPC status DEADLINE_EXCEEDED (4): no answer within the 10000 ms deadline"
        );

        let ended = |end: CallEnd<'_>| {
            let (mut reply, calls) = calls(call_user(&server, &json_headers(), r#"{"user_id":7}"#));
            file(&server, &mut reply, &calls[0], end);
            let (_, body) = finish(reply);
            body["result"]["content"][0]["text"].as_str().unwrap().to_owned()
        };
        assert!(ended(CallEnd::NotStarted { reason: "BadArgument" }).contains("UNAVAILABLE (14)"));
        assert_eq!(
            ended(CallEnd::Reset),
            "demo.users.v1.UserService/GetUser failed with gRPC status UNAVAILABLE (14): the connection to the upstream failed or was reset before a whole answer came"
        );
        assert_eq!(
            ended(CallEnd::Malformed { problem: "the upstream's answer has no grpc-status" }),
            "demo.users.v1.UserService/GetUser failed with gRPC status INTERNAL (13): the upstream's answer has no grpc-status"
        );
        assert_eq!(
            ended(CallEnd::TooLarge { size: 5000 }),
            "demo.users.v1.UserService/GetUser failed with gRPC status RESOURCE_EXHAUSTED (8): the response has 5000 bytes; the limit is 4194304 (limits.max_response_bytes)"
        );
    }

    #[test]
    fn the_filters_own_failure_words_are_not_decoded_like_a_grpc_message() {
        let server = server();
        let (mut reply, sent) = calls(call_user(&server, &json_headers(), r#"{"user_id":7}"#));
        file(
            &server,
            &mut reply,
            &sent[0],
            CallEnd::NotStarted {
                reason: "100%25 {busy}",
            },
        );
        let (_, body) = finish(reply);
        let text = body["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.ends_with("could not be started: 100%25 {busy}"), "{text}");
    }

    #[test]
    fn injection_is_refused_as_a_tool_error_without_a_call() {
        let (status, body) = answer(call_user(&server(), &json_headers(), r#"{"user_id":{"$ne":null}}"#));
        assert_eq!(status, 200);
        assert_eq!(body["result"]["isError"], true);
        let text = body["result"]["content"][0]["text"].as_str().unwrap();
        assert_eq!(
            text,
            "Invalid arguments for tool UserService_GetUser: at `user_id`: expected a 32-bit integer from -2147483648 \
             to 2147483647, got {\"$ne\":null}. The request was not sent; fix the arguments to match the tool's inputSchema."
        );
    }

    #[test]
    fn unknown_tool_and_bad_params_are_protocol_errors() {
        let server = server();
        for params in [r#"{"name":"Nope"}"#, "{}", r#"{"name":7}"#] {
            let request = format!(r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{params}}}"#);
            let (status, body) = answer(post(&server, &json_headers(), &request));
            assert_eq!(
                (status, body["error"]["code"].clone()),
                (200, json!(INVALID_PARAMS)),
                "{params}"
            );
        }
    }
}

mod header_phase {
    use super::*;

    #[test]
    fn another_method_or_a_declared_length_over_the_limit_is_answered_before_the_body() {
        let server = server();
        let get: &[HeaderPair<'_>] = &[(":method", b"GET"), (":path", b"/mcp")];
        assert_eq!(
            server
                .admit_headers("/mcp", get, &mut Observations::default())
                .unwrap_err()
                .status,
            405
        );
        let limit = server.limits().max_request_bytes.to_string();
        let over = (server.limits().max_request_bytes + 1).to_string();
        let at_limit: &[HeaderPair<'_>] = &[(":method", b"POST"), ("content-length", limit.as_bytes())];
        assert!(server
            .admit_headers("/mcp", at_limit, &mut Observations::default())
            .is_ok());
        let too_long: &[HeaderPair<'_>] = &[(":method", b"POST"), ("content-length", over.as_bytes())];
        let refusal = server
            .admit_headers("/mcp?x=1", too_long, &mut Observations::default())
            .unwrap_err();
        assert_eq!(refusal.status, 413);
        assert!(String::from_utf8_lossy(&refusal.body).contains(&over), "{refusal:?}");
    }

    #[test]
    fn the_headers_read_keep_values_that_are_not_utf8_readable() {
        let server = server();
        let pairs: &[HeaderPair<'_>] = &[
            (":method", b"POST"),
            ("content-type", b"application/json"),
            ("mcp-protocol-version", b"2025-11-25"),
            ("authorization", b"Bearer \xff"),
            ("x-request-id", b"id-\xfe"),
            ("cookie", b"not forwarded"),
        ];
        let headers = server
            .admit_headers("/mcp", pairs, &mut Observations::default())
            .unwrap();
        assert_eq!(headers.content_type.as_deref(), Some("application/json"));
        assert_eq!(headers.protocol_version.as_deref(), Some("2025-11-25"));
        let forwarded: Vec<&str> = headers.forwarded.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(forwarded, ["authorization", "x-request-id"]);
        assert_eq!(headers.forwarded[1].1, "id-\u{fffd}");
    }
}

mod routing_header {
    use super::*;

    fn routed() -> Server {
        let config = CONFIG.replacen('{', r#"{"routing": {"cluster_header": "x-switchblade-cluster"},"#, 1);
        Server::from_config_bytes(config.as_bytes()).unwrap()
    }

    #[test]
    fn a_request_that_carries_it_is_refused_on_every_path() {
        let server = routed();
        for (path, content_type) in [
            ("/mcp", "application/json"),
            ("/pkg.S/M", "text/plain"),
            ("/mcp?x", "application/json"),
        ] {
            let mut observed = Observations::default();
            let mut asked = Vec::new();
            let refusal = server
                .refuse_routing_header(
                    path,
                    |name| {
                        asked.push(name.to_owned());
                        true
                    },
                    &mut observed,
                )
                .unwrap();
            assert_eq!(asked, ["x-switchblade-cluster"]);
            assert_eq!(refusal.status, 403);
            assert!(
                refusal.header_pairs().contains(&("content-type", content_type)),
                "{path}: {refusal:?}"
            );
            assert!(refusal.header_pairs().contains(&("grpc-status", "7")), "{refusal:?}");
            let text = String::from_utf8_lossy(&refusal.body);
            assert!(
                text.contains("Forbidden: the x-switchblade-cluster header is reserved"),
                "{text}"
            );
            assert_eq!(observed.refusal(), Some(Refusal::RoutingHeader));
        }
    }

    #[test]
    fn a_request_without_it_and_a_server_without_routing_pass() {
        let mut observed = Observations::default();
        assert!(routed().refuse_routing_header("/x", |_| false, &mut observed).is_none());
        let mut asked = false;
        assert!(server()
            .refuse_routing_header(
                "/x",
                |_| {
                    asked = true;
                    true
                },
                &mut observed
            )
            .is_none());
        assert!(!asked, "no header to look for without `routing`");
        assert_eq!(observed.refusal(), None);
    }
}

mod content_negotiation {
    use super::*;

    #[test]
    fn json_must_be_acceptable_and_sent() {
        let server = server();
        let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let sse_only = McpHeaders {
            accept: Some("text/event-stream".into()),
            ..json_headers()
        };
        assert_eq!(answer(post(&server, &sse_only, ping)).0, 406);
        let form = McpHeaders {
            content_type: Some("application/x-www-form-urlencoded".into()),
            ..json_headers()
        };
        assert_eq!(answer(post(&server, &form, ping)).0, 415);
        let no_accept = McpHeaders {
            accept: None,
            ..json_headers()
        };
        assert_eq!(answer(post(&server, &no_accept, ping)).0, 200);
    }
}

mod batches {
    use super::*;

    #[test]
    fn are_answered_in_2025_03_26_with_one_array() {
        let server = server();
        for headers in [json_headers(), legacy("2025-03-26")] {
            let body = r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"b","method":"nope"},{"jsonrpc":"2.0","id":2,"method":"initialize","params":{}},7]"#;
            let (status, body) = answer(post(&server, &headers, body));
            assert_eq!(status, 200);
            let answers = body.as_array().unwrap();
            assert_eq!(answers.len(), 4);
            assert_eq!(
                (answers[0]["id"].clone(), answers[0]["result"].clone()),
                (json!(1), json!({}))
            );
            assert_eq!(
                (answers[1]["id"].clone(), answers[1]["error"]["code"].clone()),
                (json!("b"), json!(METHOD_NOT_FOUND))
            );
            assert_eq!(
                (answers[2]["id"].clone(), answers[2]["error"]["code"].clone()),
                (json!(2), json!(INVALID_REQUEST))
            );
            assert_eq!(
                (answers[3]["id"].clone(), answers[3]["error"]["code"].clone()),
                (Value::Null, json!(INVALID_REQUEST))
            );
        }
    }

    #[test]
    fn with_several_calls_wait_for_all_of_them() {
        let server = server();
        let body = r#"[
            {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"UserService_GetUser","arguments":{"user_id":7}}},
            {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"UserService_GetUser","arguments":{"user_id":"x"}}},
            {"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"UserService_GetUser","arguments":{"user_id":8}}}]"#;
        let (mut reply, calls) = calls(post(&server, &json_headers(), body));
        assert_eq!(calls.len(), 2);
        file(
            &server,
            &mut reply,
            &calls[1],
            CallEnd::Replied(GrpcReply {
                status: 5,
                message: Some(b"gone"),
                body: &[],
                details: None,
            }),
        );
        assert!(!reply.is_complete());
        file(&server, &mut reply, &calls[0], CallEnd::Replied(USER_7));
        let (status, body) = finish(reply);
        assert_eq!(status, 200);
        let ids: Vec<&Value> = body.as_array().unwrap().iter().map(|answer| &answer["id"]).collect();
        assert_eq!(ids, [&json!(1), &json!(2), &json!(3)]);
        assert_eq!(body[0]["result"]["isError"], false);
        assert_eq!(
            body[1]["result"]["isError"], true,
            "invalid arguments, answered without a call"
        );
        assert_eq!(body[2]["result"]["isError"], true, "NOT_FOUND");
    }

    #[test]
    fn of_notifications_only_get_202() {
        let body = r#"[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":5,"result":{}}]"#;
        assert_eq!(answer(post(&server(), &json_headers(), body)), (202, Value::Null));
    }

    #[test]
    fn are_refused_elsewhere_and_when_empty() {
        let server = server();
        let ping = r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#;
        for headers in [
            legacy("2025-06-18"),
            legacy("2025-11-25"),
            legacy("2024-11-05"),
            modern("ping", None),
        ] {
            let (status, body) = answer(post(&server, &headers, ping));
            assert_eq!((status, body["error"]["code"].clone()), (400, json!(INVALID_REQUEST)));
            assert!(body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("only allowed in protocol version 2025-03-26"));
        }
        let (status, body) = answer(post(&server, &json_headers(), "[]"));
        assert_eq!(
            (status, body["error"]["message"].clone()),
            (400, json!("Invalid Request: an empty JSON-RPC batch"))
        );
    }
}

mod modern_era {
    use super::*;

    fn request(method: &str, params: Value) -> String {
        let mut params = params;
        params["_meta"] = meta();
        json!({"jsonrpc": "2.0", "id": 11, "method": method, "params": params}).to_string()
    }

    #[test]
    fn server_discover_lists_versions_and_capabilities() {
        let (status, body) = answer(post(
            &server(),
            &modern("server/discover", None),
            &request("server/discover", json!({})),
        ));
        assert_eq!(status, 200);
        let result = &body["result"];
        assert_eq!(result["resultType"], "complete");
        assert_eq!(
            result["supportedVersions"],
            json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
        );
        assert_eq!(result["capabilities"], json!({"tools": {}}));
        assert_eq!(result["instructions"], "Use the catalog.");
        assert_eq!(
            (result["ttlMs"].clone(), result["cacheScope"].clone()),
            (json!(300_000), json!("public"))
        );
        assert_eq!(
            result["_meta"][SERVER_INFO_META],
            json!({"name": "demo", "version": "1.2.3"})
        );
    }

    #[test]
    fn tools_list_carries_cache_hints_and_identity() {
        let (status, body) = answer(post(
            &server(),
            &modern("tools/list", None),
            &request("tools/list", json!({})),
        ));
        assert_eq!(status, 200);
        let result = &body["result"];
        assert_eq!(result["tools"].as_array().unwrap().len(), 3);
        assert_eq!(
            (result["resultType"].clone(), result["cacheScope"].clone()),
            (json!("complete"), json!("public"))
        );
        assert_eq!(result["_meta"][SERVER_INFO_META]["name"], "demo");
    }

    #[test]
    fn tools_call_results_carry_result_type() {
        let server = server();
        let call = request(
            "tools/call",
            json!({"name": "UserService_GetUser", "arguments": {"user_id": 7}}),
        );
        let (mut reply, calls) = calls(post(&server, &modern("tools/call", Some("UserService_GetUser")), &call));
        file(&server, &mut reply, &calls[0], CallEnd::Replied(USER_7));
        let (_, body) = finish(reply);
        assert_eq!(
            (body["result"]["resultType"].clone(), body["result"]["isError"].clone()),
            (json!("complete"), json!(false))
        );
        assert_eq!(body["result"]["_meta"][SERVER_INFO_META]["version"], "1.2.3");

        let bad = request(
            "tools/call",
            json!({"name": "UserService_GetUser", "arguments": {"user_id": []}}),
        );
        let (status, body) = answer(post(&server, &modern("tools/call", Some("UserService_GetUser")), &bad));
        assert_eq!(
            (
                status,
                body["result"]["isError"].clone(),
                body["result"]["resultType"].clone()
            ),
            (200, json!(true), json!("complete"))
        );

        let unknown = request("tools/call", json!({"name": "Nope"}));
        let (status, body) = answer(post(&server, &modern("tools/call", Some("Nope")), &unknown));
        assert_eq!((status, body["error"]["code"].clone()), (400, json!(INVALID_PARAMS)));
    }

    #[test]
    fn missing_envelope_is_400_invalid_params() {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
        let (status, body) = answer(post(&server(), &modern("tools/list", None), &body));
        assert_eq!(
            (status, body["error"]["code"].clone(), body["id"].clone()),
            (400, json!(INVALID_PARAMS), json!(1))
        );
    }

    #[test]
    fn header_mismatch_is_400_and_no_call() {
        let call = request(
            "tools/call",
            json!({"name": "UserService_GetUser", "arguments": {"user_id": 7}}),
        );
        let (status, body) = answer(post(
            &server(),
            &modern("tools/call", Some("CatalogService_Search")),
            &call,
        ));
        assert_eq!((status, body["error"]["code"].clone()), (400, json!(HEADER_MISMATCH)));
        let without_header = McpHeaders {
            protocol_version: None,
            ..modern("tools/call", Some("UserService_GetUser"))
        };
        let (status, body) = answer(post(&server(), &without_header, &call));
        assert_eq!((status, body["error"]["code"].clone()), (400, json!(HEADER_MISMATCH)));
    }

    #[test]
    fn unsupported_envelope_version_is_400_with_data() {
        let mut body: Value = serde_json::from_str(&request("tools/list", json!({}))).unwrap();
        body["params"]["_meta"][PROTOCOL_VERSION_META] = json!("2030-01-01");
        let headers = McpHeaders {
            protocol_version: Some("2030-01-01".into()),
            ..modern("tools/list", None)
        };
        let (status, body) = answer(post(&server(), &headers, &body.to_string()));
        assert_eq!(
            (status, body["error"]["code"].clone(), body["id"].clone()),
            (400, json!(UNSUPPORTED_PROTOCOL_VERSION), json!(11))
        );
        assert_eq!(body["error"]["data"]["requested"], "2030-01-01");
    }

    #[test]
    fn removed_and_unknown_methods_are_404() {
        for method in ["initialize", "ping", "subscriptions/listen", "resources/list", "nope"] {
            let (status, body) = answer(post(&server(), &modern(method, None), &request(method, json!({}))));
            assert_eq!(
                (status, body["error"]["code"].clone()),
                (404, json!(METHOD_NOT_FOUND)),
                "{method}"
            );
        }
    }

    #[test]
    fn notifications_are_accepted_and_responses_refused() {
        let server = server();
        let notification =
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"_meta": meta()}}).to_string();
        assert_eq!(
            answer(post(&server, &modern("notifications/cancelled", None), &notification)),
            (202, Value::Null)
        );
        let response = json!({"jsonrpc": "2.0", "id": 1, "result": {}}).to_string();
        let (status, body) = answer(post(&server, &modern("", None), &response));
        assert_eq!((status, body["error"]["code"].clone()), (400, json!(INVALID_REQUEST)));
    }
}

mod metadata {
    use super::*;

    #[test]
    fn calls_carry_static_metadata_and_only_allowlisted_headers() {
        let server = server();
        let headers = McpHeaders::from_pairs(
            [
                ("content-type", "application/json"),
                ("authorization", "Bearer abc"),
                ("x-request-id", "req-1"),
                ("cookie", "secret"),
                ("x-tenant", "evil"),
            ],
            server.forward_headers(),
        );
        let (_, sent) = calls(call_user(&server, &headers, r#"{"user_id":7}"#));
        assert_eq!(
            sent[0].metadata().collect::<Vec<_>>(),
            [
                ("x-tenant", "demo"),
                ("authorization", "Bearer abc"),
                ("x-request-id", "req-1"),
            ]
        );
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"CatalogService_GetItem","arguments":{"id":"1"}}}"#;
        let (_, sent) = calls(post(&server, &json_headers(), body));
        assert_eq!(sent[0].metadata().count(), 0);
    }
}

mod strict_arguments {
    use super::*;

    fn tool_error_text(server: &Server, body: &str) -> String {
        let (status, body) = answer(post(server, &json_headers(), body));
        assert_eq!(status, 200);
        assert_eq!(body["result"]["isError"], true, "{body}");
        body["result"]["content"][0]["text"].as_str().unwrap().to_owned()
    }

    #[test]
    fn duplicate_argument_keys_are_a_tool_error_naming_the_path() {
        let server = server();
        let text = tool_error_text(
            &server,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"UserService_GetUser","arguments":{"user_id":1,"user_id":{"$ne":null}}}}"#,
        );
        assert!(
            text.starts_with("Invalid arguments for tool UserService_GetUser: duplicate key `user_id`."),
            "{text}"
        );
        let text = tool_error_text(
            &server,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"CatalogService_Search","arguments":{"filters":{"category":"CATEGORY_BOOKS","category":"CATEGORY_OUTDOOR"}}}}"#,
        );
        assert!(
            text.starts_with(
                "Invalid arguments for tool CatalogService_Search: at `filters`: duplicate key `category`."
            ),
            "{text}"
        );
    }

    #[test]
    fn duplicate_keys_elsewhere_are_an_invalid_request() {
        let server = server();
        let (status, body) = answer(post(
            &server,
            &json_headers(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"UserService_GetUser","name":"CatalogService_Search","arguments":{}}}"#,
        ));
        assert_eq!(
            (status, body["error"]["code"].clone(), body["id"].clone()),
            (400, json!(INVALID_REQUEST), json!(1))
        );
        assert_eq!(
            body["error"]["message"],
            "Invalid Request: duplicate key `name` at `params`"
        );
        let (status, _) = answer(post(
            &server,
            &json_headers(),
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"UserService_GetUser","arguments":{"user_id":1,"user_id":2}}}]"#,
        ));
        assert_eq!(status, 400);
    }
}

mod wrapped_roots {
    use super::*;

    fn kitchen_sink() -> Server {
        Server::from_config_bytes(br#"{"services":{"test.kitchensink.v1.KitchenSinkService":{"cluster":"k"}}}"#)
            .unwrap()
    }

    #[test]
    fn a_non_object_response_is_wrapped_in_schema_and_content() {
        let server = kitchen_sink();
        let tool = server.catalog().get("KitchenSinkService_EchoTime").unwrap();
        assert!(tool.wrap_output && !tool.wrap_input);
        let schema = &tool.definition["outputSchema"];
        assert_eq!(schema["type"], "object");
        let value = &schema["properties"]["value"];
        assert_eq!(
            (&value["type"], &value["format"]),
            (&json!("string"), &json!("date-time"))
        );
        assert_eq!(schema["required"], json!(["value"]));

        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"KitchenSinkService_EchoTime","arguments":{"at":"2026-01-01T00:00:00Z"}}}"#;
        let (mut reply, calls) = calls(post(&server, &json_headers(), body));
        // Timestamp{seconds: 1767225600}
        let timestamp = [0x08, 0x80, 0xf2, 0xd6, 0xca, 0x06];
        file(
            &server,
            &mut reply,
            &calls[0],
            CallEnd::Replied(GrpcReply {
                status: 0,
                message: None,
                body: &timestamp,
                details: None,
            }),
        );
        let (_, body) = finish(reply);
        assert_eq!(
            body["result"]["structuredContent"],
            json!({"value": "2026-01-01T00:00:00Z"})
        );
    }

    #[test]
    fn object_roots_are_not_wrapped() {
        let server = kitchen_sink();
        let ping = server.catalog().get("KitchenSinkService_Ping").unwrap();
        assert!(!ping.wrap_input && !ping.wrap_output);
        assert_eq!(
            ping.definition["inputSchema"],
            json!({"type": "object", "additionalProperties": false})
        );
        let echo = server.catalog().get("KitchenSinkService_EchoTree").unwrap();
        assert_eq!(echo.definition["inputSchema"]["$ref"], Value::Null);
        assert!(echo.definition["inputSchema"]["$defs"]["test.kitchensink.v1.Tree"].is_object());
    }
}

mod calls;
mod cancellation;
mod observations;

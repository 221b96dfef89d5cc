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
        let request =
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"{unknown}"}}}}"#);
        let (_, body) = answer(post(&server, &json_headers(), &request));
        assert_eq!(body["result"]["protocolVersion"], "2025-11-25");
    }
}

/// Each `initialize` hands its client a fresh session id, and nothing else carries one.
#[test]
fn initialize_hands_out_a_session_id_of_its_own() {
    let server = server();
    let session = |body: &str| match post(&server, &json_headers(), body) {
        Outcome::Respond(response) => response
            .headers
            .iter()
            .find(|(name, _)| *name == "mcp-session-id")
            .map(|(_, value)| value.to_string()),
        _ => panic!("expected an answer"),
    };
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#;
    let (first, second) = (session(initialize).unwrap(), session(initialize).unwrap());
    assert_ne!(first, second);
    assert_eq!(first.len(), 32);
    assert_eq!(session(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#), None);
    assert_eq!(session(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#), None);
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
        call.http_headers().as_slice(),
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

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

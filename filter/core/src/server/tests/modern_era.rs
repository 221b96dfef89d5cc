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

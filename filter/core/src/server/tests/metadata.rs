use super::*;

#[test]
fn calls_carry_static_metadata_and_only_allowlisted_headers() {
    let server = server();
    let headers = McpHeaders::from_pairs(
        [
            ("content-type", "application/json"),
            ("x-client-version", "7.1"),
            ("x-request-id", "req-1"),
            ("cookie", "secret"),
            ("x-tenant", "evil"),
        ],
        &server.forward_headers,
    );
    let (_, sent) = calls(call_user(&server, &headers, r#"{"user_id":7}"#));
    assert_eq!(
        sent[0].metadata().collect::<Vec<_>>(),
        [
            ("x-tenant", "demo"),
            ("x-client-version", "7.1"),
            ("x-request-id", "req-1"),
        ]
    );
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"CatalogService_GetItem","arguments":{"id":"1"}}}"#;
    let (_, sent) = calls(post(&server, &json_headers(), body));
    assert_eq!(sent[0].metadata().count(), 0);
}

#[test]
fn a_forwarded_header_sent_twice_is_forwarded_with_both_values_in_order() {
    let server = server();
    let headers = McpHeaders::from_pairs(
        [
            ("content-type", "application/json"),
            ("x-request-id", "req-1"),
            ("x-client-version", "7.1"),
            ("x-request-id", "req-2"),
        ],
        &server.forward_headers,
    );
    let (_, sent) = calls(call_user(&server, &headers, r#"{"user_id":7}"#));
    assert_eq!(
        sent[0].metadata().collect::<Vec<_>>(),
        [
            ("x-tenant", "demo"),
            ("x-request-id", "req-1"),
            ("x-client-version", "7.1"),
            ("x-request-id", "req-2"),
        ]
    );
}

fn item_server(tool: &str) -> Server {
    let config = CONFIG.replacen(
        '{',
        &format!(r#"{{"tools": {{"demo.catalog.v1.CatalogService/GetItem": {tool}}},"#),
        1,
    );
    Server::from_config_bytes(config.as_bytes()).unwrap()
}

fn get_item(server: &Server, arguments: &str) -> Outcome {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"CatalogService_GetItem","arguments":{arguments}}}}}"#
    );
    post(server, &json_headers(), &body)
}

#[test]
fn an_argument_sent_as_metadata_only_is_checked_then_left_out_of_the_message() {
    let kept = item_server(r#"{"metadata": {"x-item": "item={id}"}}"#);
    let (_, sent) = calls(get_item(&kept, r#"{"id": "42"}"#));
    assert_eq!(sent[0].metadata().collect::<Vec<_>>(), [("x-item", "item=42")]);
    // One field, 1 (id) as the varint 42, after the 5-byte frame header.
    assert_eq!(&sent[0].http_body()[5..], b"\x08\x2a");

    let removed = item_server(r#"{"metadata": {"x-item": "item={id}"}, "metadata_arguments": "remove"}"#);
    let (_, sent) = calls(get_item(&removed, r#"{"id": "42"}"#));
    assert_eq!(sent[0].metadata().collect::<Vec<_>>(), [("x-item", "item=42")]);
    assert_eq!(sent[0].http_body(), b"\0\0\0\0\0", "an empty message");
    // Still checked at the gate: a query object is refused, and nothing is sent.
    let (_, refused) = answer(get_item(&removed, r#"{"id": {"$ne": null}}"#));
    assert_eq!(refused["result"]["isError"], true, "{refused}");

    let error = Server::from_config_bytes(
        CONFIG
            .replacen(
                '{',
                r#"{"tools": {"demo.catalog.v1.CatalogService/GetItem": {"metadata": {"x-item": "fixed"}, "metadata_arguments": "remove"}},"#,
                1,
            )
            .as_bytes(),
    )
    .unwrap_err()
    .0;
    assert!(
        error.starts_with("at `tools.demo.catalog.v1.CatalogService/GetItem.metadata_arguments`: `remove` clears"),
        "{error}"
    );
}

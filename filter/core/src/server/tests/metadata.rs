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
        server.forward_headers(),
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
        server.forward_headers(),
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

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

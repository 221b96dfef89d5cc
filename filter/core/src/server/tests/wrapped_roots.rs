use super::*;

fn kitchen_sink() -> Server {
    Server::from_config_bytes(br#"{"services":{"test.kitchensink.v1.KitchenSinkService":{"cluster":"k"}}}"#).unwrap()
}

#[test]
fn a_non_object_response_is_wrapped_in_schema_and_content() {
    let server = kitchen_sink();
    let tool = server.catalog().get("KitchenSinkService_EchoTime").unwrap();
    assert!(tool.wrap_output && !tool.wrap_input);
    let schema = &tool.definition_value()["outputSchema"];
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
        ping.definition_value()["inputSchema"],
        json!({"type": "object", "additionalProperties": false})
    );
    let echo = server.catalog().get("KitchenSinkService_EchoTree").unwrap();
    assert_eq!(echo.definition_value()["inputSchema"]["$ref"], Value::Null);
    assert!(echo.definition_value()["inputSchema"]["$defs"]["test.kitchensink.v1.Tree"].is_object());
}

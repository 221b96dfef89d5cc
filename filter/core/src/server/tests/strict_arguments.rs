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
        text.starts_with("Invalid arguments for tool CatalogService_Search: at `filters`: duplicate key `category`."),
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

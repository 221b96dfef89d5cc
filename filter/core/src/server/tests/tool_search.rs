use super::*;

fn search_server(extra: &str) -> Server {
    let config = CONFIG.replacen('{', &format!(r#"{{"discovery": "search",{extra}"#), 1);
    Server::from_config_bytes(config.as_bytes()).unwrap()
}

fn tools_call(name: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
        .to_string()
}

#[test]
fn the_list_is_two_tools_whatever_the_catalog_in_both_eras() {
    let server = search_server("");
    let (_, legacy_list) = answer(post(
        &server,
        &legacy("2025-11-25"),
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    ));
    let names: Vec<&str> = legacy_list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["search_tools", "call_tool"]);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}).to_string();
    let (_, modern_list) = answer(post(&server, &modern("tools/list", None), &body));
    assert_eq!(modern_list["result"]["tools"], legacy_list["result"]["tools"]);
    assert_eq!(modern_list["result"]["cacheScope"], "public");
    assert_eq!(modern_list["result"]["ttlMs"], 300_000);
}

#[test]
fn a_search_answers_with_definitions_and_call_tool_calls_as_tools_call_would() {
    let server = search_server("");
    let (status, found) = answer(post(
        &server,
        &legacy("2025-11-25"),
        &tools_call("search_tools", json!({"query": "look up a user by id"})),
    ));
    assert_eq!(status, 200);
    let result = &found["result"];
    assert_eq!(result["isError"], false);
    assert_eq!(result["structuredContent"]["tools"][0]["name"], "UserService_GetUser");
    assert!(result["structuredContent"]["tools"][0]["inputSchema"].is_object());

    // call_tool's call is the tool's own call: the same upstream call, the same result.
    let through = call_user_through(&server, r#"{"user_id": 7}"#);
    let direct = calls(call_user(&server, &legacy("2025-11-25"), r#"{"user_id": 7}"#)).1;
    assert_eq!(through.len(), 1);
    assert_eq!(through[0].http_body(), direct[0].http_body());
    assert_eq!(through[0].tool.name, "UserService_GetUser");

    // Bad arguments are refused at the gate exactly as for the tool called directly.
    let refused = |outcome: Outcome| answer(outcome).1["result"].clone();
    let via = refused(post(
        &server,
        &legacy("2025-11-25"),
        &tools_call(
            "call_tool",
            json!({"name": "UserService_GetUser", "arguments": {"user_id": {"$ne": null}}}),
        ),
    ));
    let direct = refused(call_user(
        &server,
        &legacy("2025-11-25"),
        r#"{"user_id": {"$ne": null}}"#,
    ));
    assert_eq!(via, direct);
    assert_eq!(via["isError"], true);
    // An unknown tool is the same protocol error either way.
    let (_, unknown) = answer(post(
        &server,
        &legacy("2025-11-25"),
        &tools_call("call_tool", json!({"name": "NoSuchTool", "arguments": {}})),
    ));
    let (_, direct) = answer(post(
        &server,
        &legacy("2025-11-25"),
        &tools_call("NoSuchTool", json!({})),
    ));
    assert_eq!(unknown, direct);
}

fn call_user_through(server: &Server, arguments: &str) -> Vec<UpstreamCall> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"call_tool","arguments":{{"name":"UserService_GetUser","arguments":{arguments}}}}}}}"#
    );
    calls(post(server, &legacy("2025-11-25"), &body)).1
}

#[test]
fn search_and_call_tool_refuse_bad_arguments_as_tool_errors() {
    let server = search_server("");
    for (name, arguments, expected) in [
        (
            "search_tools",
            json!({}),
            "Invalid arguments for tool search_tools: `query` is required",
        ),
        (
            "search_tools",
            json!({"query": "x", "limit": 99}),
            "`limit` must be a whole number from 1 to 20",
        ),
        (
            "call_tool",
            json!({"arguments": {}}),
            "Invalid arguments for tool call_tool: `name` is required",
        ),
        (
            "call_tool",
            json!({"name": "call_tool"}),
            "call_tool is not called through call_tool",
        ),
    ] {
        let (_, refused) = answer(post(&server, &legacy("2025-11-25"), &tools_call(name, arguments)));
        assert_eq!(refused["result"]["isError"], true);
        let text = refused["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(expected), "{text}");
    }
}

#[test]
fn a_catalog_tool_may_not_take_a_discovery_tools_name() {
    let config = CONFIG.replacen(
        '{',
        r#"{"discovery": "search", "tools": {"demo.users.v1.UserService/GetUser": {"name": "call_tool"}},"#,
        1,
    );
    let error = Server::from_config_bytes(config.as_bytes()).unwrap_err().0;
    assert!(
        error.starts_with("at `discovery_tools`: a tool is named \"call_tool\""),
        "{error}"
    );
}

#[test]
fn discovery_tools_answer_to_the_names_configured() {
    let server = search_server(r#""discovery_tools": {"search": "find_tools", "call": "run_tool"},"#);
    let (_, list) = answer(post(
        &server,
        &legacy("2025-11-25"),
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    ));
    let tools = list["result"]["tools"].as_array().unwrap();
    assert_eq!(
        (tools[0]["name"].as_str(), tools[1]["name"].as_str()),
        (Some("find_tools"), Some("run_tool"))
    );
    assert!(tools[0]["description"]
        .as_str()
        .unwrap()
        .ends_with("Then call one with run_tool."));
    let (_, found) = answer(post(
        &server,
        &legacy("2025-11-25"),
        &tools_call("find_tools", json!({"query": "look up a user by id", "limit": 1})),
    ));
    assert_eq!(
        found["result"]["structuredContent"]["tools"][0]["name"],
        "UserService_GetUser"
    );
    let (_, called) = answer(post(
        &server,
        &legacy("2025-11-25"),
        &tools_call("run_tool", json!({"name": "find_tools"})),
    ));
    let text = called["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("find_tools is not called through run_tool"), "{text}");
    // The default names are then ordinary (unknown) tool names.
    let (_, unknown) = answer(post(
        &server,
        &legacy("2025-11-25"),
        &tools_call("search_tools", json!({"query": "x"})),
    ));
    assert!(unknown["error"].is_object(), "{unknown}");
}

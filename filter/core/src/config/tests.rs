use super::*;

fn parse(json: &str) -> Result<PluginConfig, String> {
    PluginConfig::parse(json.as_bytes()).map_err(|e| e.0)
}

#[test]
fn minimal_config_gets_defaults() {
    let config = parse(r#"{"services":{"a.B":{"cluster":"c"}}}"#).unwrap();
    assert_eq!(config.mcp_path, "/mcp");
    let (name, service) = config.services.iter().next().unwrap();
    assert_eq!(
        (name, service.expose, service.timeout_ms),
        ("a.B", Exposure::All, DEFAULT_TIMEOUT_MS)
    );
    assert_eq!(config.server, ServerIdentity::default());
    assert_eq!(
        config.tools_list,
        ToolsListConfig {
            page_size: 100,
            ttl_ms: 300_000,
        }
    );
    assert!(config.descriptor_set.is_none() && config.forward_headers.is_empty() && config.tools.is_empty());
    assert_eq!(config.discovery, Discovery::List);
    assert_eq!(
        (
            config.discovery_tools.search.as_str(),
            config.discovery_tools.call.as_str()
        ),
        ("search_tools", "call_tool")
    );
}

#[test]
fn services_keep_their_order() {
    let config = parse(r#"{"services":{"z.Z":{"cluster":"c"},"a.A":{"cluster":"c"},"m.M":{"cluster":"c"}}}"#).unwrap();
    let names: Vec<&str> = config.services.iter().map(|(name, _)| name).collect();
    assert_eq!(names, ["z.Z", "a.A", "m.M"]);
}

#[test]
fn full_config_parses() {
    let config = parse(
        r#"{"descriptor_set":"AA==","forward_headers":["x-client-version","x-request-id"],
            "services":{"a.B":{"cluster":"c","expose":"selected","methods":["a.B/Get"],"timeout_ms":5,"metadata":{"x-tenant":"t1","x-trace-bin":"AAE="}}},
            "tools":{"a.B/Get":{"name":"get","title":"Get","description":"d","timeout_ms":7,"annotations":{"readOnlyHint":true,"openWorldHint":false}}}}"#,
    )
    .unwrap();
    let tool = &config.tools["a.B/Get"];
    assert_eq!(tool.name.as_deref(), Some("get"));
    assert_eq!(
        Value::Object(tool.annotations.as_ref().unwrap().to_json()),
        serde_json::json!({"readOnlyHint": true, "openWorldHint": false})
    );
}

#[test]
fn unknown_keys_and_wrong_types_are_named_with_their_path() {
    let error = parse(r#"{"services":{"a.B":{"clustr":"c"}}}"#).unwrap_err();
    assert!(
        error.starts_with("at `services.a.B.clustr`: unknown field `clustr`"),
        "{error}"
    );
    let error = parse(r#"{"services":{"a.B":{"cluster":"c","timeout_ms":"5s"}}}"#).unwrap_err();
    assert!(
        error.starts_with("at `services.a.B.timeout_ms`: invalid type"),
        "{error}"
    );
    let error = parse(r#"{"services":{"a.B":{"cluster":"c","expose":"some"}}}"#).unwrap_err();
    assert!(
        error
            .starts_with("at `services.a.B.expose`: unknown variant `some`, expected one of `all`, `selected`, `none`"),
        "{error}"
    );
    let error = parse(r#"{"services":{"a.B":{"cluster":"c"}},"tools":{"a.B/X":{"nam":"x"}}}"#).unwrap_err();
    assert!(
        error.starts_with("at `tools.a.B/X.nam`: unknown field `nam`"),
        "{error}"
    );
}

#[test]
fn refuses_empty_and_missing_services() {
    assert!(parse("").unwrap_err().contains("configuration is empty"));
    assert_eq!(
        parse("{}").unwrap_err(),
        "the configuration is not valid JSON for this filter: missing field `services` at line 1 column 2"
    );
    assert_eq!(
        parse("{").unwrap_err(),
        "the configuration is not valid JSON for this filter: EOF while parsing an object at line 1 column 1"
    );
    assert!(parse(r#"{"services":{}}"#)
        .unwrap_err()
        .starts_with("at `services`: no services"));
    assert!(parse(r#"{"services":[]}"#)
        .unwrap_err()
        .starts_with("at `services`: invalid type: sequence"));
    let twice = parse(r#"{"services":{"a.B":{"cluster":"c"},"a.B":{"cluster":"d"}}}"#).unwrap_err();
    assert!(twice.contains("a.B is listed twice"), "{twice}");
}

#[test]
fn refuses_bad_values() {
    let cases = [
        (
            r#"{"mcp_path":"mcp","services":{"a.B":{"cluster":"c"}}}"#,
            "at `mcp_path`",
        ),
        (
            r#"{"tools_list":{"page_size":0},"services":{"a.B":{"cluster":"c"}}}"#,
            "at `tools_list.page_size`: 0 is not between 1 and 1000",
        ),
        (
            r#"{"discovery":"search","discovery_tools":{"search":"find.tools"},"services":{"a.B":{"cluster":"c"}}}"#,
            "at `discovery_tools.search`: \"find.tools\" is not a tool name, 1-64 characters of [A-Za-z0-9_-]",
        ),
        (
            r#"{"discovery_tools":{"search":"x","call":"x"},"services":{"a.B":{"cluster":"c"}}}"#,
            "at `discovery_tools`: search and call are both named \"x\"; give them two names",
        ),
        (
            r#"{"discovery":"full","services":{"a.B":{"cluster":"c"}}}"#,
            "unknown variant `full`, expected `list` or `search`",
        ),
        (
            r#"{"services":{"a.B":{"cluster":" "}}}"#,
            "at `services.a.B.cluster`: empty",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c","timeout_ms":0}}}"#,
            "at `services.a.B.timeout_ms`: must be greater than 0",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c","expose":"selected"}}}"#,
            "at `services.a.B.methods`: `expose: selected` needs the methods",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c","methods":["a.B/X"]}}}"#,
            "at `services.a.B.methods`: methods are only read with `expose: selected`",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c","metadata":{"X-Up":"1"}}}}"#,
            "at `services.a.B.metadata.X-Up`: \"X-Up\" is not a lowercase header name",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c","metadata":{"grpc-timeout":"1S"}}}}"#,
            "is reserved",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c","metadata":{"x":"caf\u00e9"}}}}"#,
            "metadata values must be printable ASCII",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c","metadata":{"x-trace-bin":"not base64!"}}}}"#,
            "at `services.a.B.metadata.x-trace-bin`: \"x-trace-bin\" is binary metadata (`-bin`), so its value must be base64",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c"}},"tools":{"a.B/X":{"metadata":{"x-id-bin":"{id}"}}}}"#,
            "at `tools.a.B/X.metadata.x-id-bin`: \"x-id-bin\" is binary metadata, so its value is fixed base64",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c","metadata":{"grpc-trace-bin":"AAE="}}}}"#,
            "\"grpc-trace-bin\" is reserved",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c"}},"forward_headers":["x-trace-bin"]}"#,
            "at `forward_headers[0]`: \"x-trace-bin\" is binary metadata (`-bin`), whose values are base64 bytes; only a service's or tool's fixed `metadata` can set one",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c"}},"forward_headers":[":path"]}"#,
            "at `forward_headers[0]`: \":path\" is not a lowercase header name",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c"}},"forward_headers":["content-type"]}"#,
            "at `forward_headers[0]`: \"content-type\" is reserved",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c"}},"forward_headers":["x-a","x-a"]}"#,
            "at `forward_headers[1]`: \"x-a\" is listed twice",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c"}},"forward_headers":["x-envoy-max-retries"]}"#,
            "at `forward_headers[0]`: \"x-envoy-max-retries\" is an Envoy control header (x-envoy-*): Envoy's router acts on it, so it cannot be forwarded or set",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c","metadata":{"x-envoy-upstream-rq-timeout-ms":"1"}}}}"#,
            "at `services.a.B.metadata.x-envoy-upstream-rq-timeout-ms`: \"x-envoy-upstream-rq-timeout-ms\" is an Envoy control header",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c"}},"limits":{"max_batch_size":0}}"#,
            "at `limits.max_batch_size`: must be greater than 0",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c"}},"limits":{"max_calls_in_flight":0}}"#,
            "at `limits.max_calls_in_flight`: must be greater than 0",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c"}},"limits":{"max_rendered_bytes":0}}"#,
            "at `limits.max_rendered_bytes`: must be greater than 0",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c"}},"limits":{"max_batch_reply_bytes":0}}"#,
            "at `limits.max_batch_reply_bytes`: must be greater than 0",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c"}},"tools":{"a.B/X":{"timeout_ms":0}}}"#,
            "at `tools.a.B/X.timeout_ms`: must be greater than 0",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c"}},"allowed_origins":["chat.example.com"]}"#,
            "at `allowed_origins[0]`: \"chat.example.com\" is not an origin",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c"}},"allowed_origins":["https://x.com/app"]}"#,
            "at `allowed_origins[0]`",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c"}},"limits":{"max_json_depth":500}}"#,
            "at `limits.max_json_depth`: 500 is not between 1 and 100",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c"}},"limits":{"max_response_bytes":0}}"#,
            "at `limits.max_response_bytes`: must be greater than 0",
        ),
        (
            r#"{"services":{"a.B":{"cluster":"c"}},"allowed_hosts":["MCP.example.com"]}"#,
            "at `allowed_hosts[0]`: \"MCP.example.com\" is not a lowercase host[:port]",
        ),
    ];
    for (json, expected) in cases {
        let error = parse(json).unwrap_err();
        assert!(
            error.starts_with(expected) || error.contains(expected),
            "{json}: {error}"
        );
    }
}

#[test]
fn refuses_trailing_garbage() {
    let error = parse(r#"{"services":{"a.B":{"cluster":"c"}}} x"#).unwrap_err();
    assert!(error.contains("trailing characters"), "{error}");
}

#[test]
fn selectors() {
    assert_eq!(
        parse_selector("demo.catalog.v1.CatalogService/GetItem"),
        Some(("demo.catalog.v1.CatalogService", "GetItem"))
    );
    assert_eq!(parse_selector("Svc/M"), Some(("Svc", "M")));
    for bad in ["", "a.B", "a.B/", "/M", "a.B/M/N", "a.B/M.x", "a B/M"] {
        assert_eq!(parse_selector(bad), None, "{bad}");
    }
}

#[test]
fn the_render_and_batch_reply_bounds_follow_max_response_bytes_unless_set() {
    let limits = Limits::default();
    assert_eq!(
        (limits.rendered_bytes(), limits.batch_reply_bytes()),
        (16 << 20, 32 << 20)
    );
    let config = parse(r#"{"services":{"a.B":{"cluster":"c"}},"limits":{"max_response_bytes":1000}}"#).unwrap();
    assert_eq!(
        (config.limits.rendered_bytes(), config.limits.batch_reply_bytes()),
        (4000, 8000)
    );
    let config =
        parse(r#"{"services":{"a.B":{"cluster":"c"}},"limits":{"max_rendered_bytes":10,"max_batch_reply_bytes":7}}"#)
            .unwrap();
    assert_eq!(
        (config.limits.rendered_bytes(), config.limits.batch_reply_bytes()),
        (10, 7)
    );
}

#[test]
fn a_tasks_poll_bound_follows_its_intervals_unless_set() {
    let tasks = |json: &str| {
        parse(&format!(r#"{{"services":{{"a.B":{{"cluster":"c"}}}},"tasks":{json}}}"#))
            .unwrap()
            .tasks
    };
    let defaults = tasks("{}");
    assert_eq!((defaults.polls_per_second(), defaults.poll_burst_size()), (2, 10));
    let quick = tasks(r#"{"wait_poll_interval_ms": 100}"#);
    assert_eq!((quick.polls_per_second(), quick.poll_burst_size()), (20, 20));
    let set = tasks(r#"{"max_polls_per_second": 3, "poll_burst": 4}"#);
    assert_eq!((set.polls_per_second(), set.poll_burst_size()), (3, 4));
    for (json, expected) in [
        (
            r#"{"max_polls_per_second": 0}"#,
            "at `tasks.max_polls_per_second`: must be greater than 0",
        ),
        (r#"{"poll_burst": 0}"#, "at `tasks.poll_burst`: must be greater than 0"),
    ] {
        let error = parse(&format!(r#"{{"services":{{"a.B":{{"cluster":"c"}}}},"tasks":{json}}}"#)).unwrap_err();
        assert_eq!(error, expected);
    }
}

#[test]
fn the_clients_token_goes_upstream_only_when_allowed_in_so_many_words() {
    let services = r#""services": {"a.B": {"cluster": "c", "metadata": {"x-tenant": "t"}}}"#;
    let error = parse(&format!(
        r#"{{{services}, "forward_headers": ["x-request-id", "authorization"]}}"#
    ))
    .unwrap_err();
    assert!(
        error.starts_with("at `forward_headers[1]`: \"authorization\" would hand the client's token to the upstream"),
        "{error}"
    );
    let allowed = parse(&format!(
        r#"{{{services}, "forward_headers": ["authorization"], "allow_token_passthrough": true}}"#
    ));
    assert!(allowed.is_ok());
    let authorization = |metadata: &str, forward: &str| {
        parse(&format!(
            r#"{{{services}, "forward_headers": [{forward}], "authorization": {{"rules": {{}}, "caller_metadata": {metadata}}}}}"#
        ))
        .unwrap_err()
    };
    for (metadata, forward, expected) in [
        (
            r#"{"x-caller": "sub"}"#,
            r#""x-caller""#,
            "at `authorization.caller_metadata.x-caller`: \"x-caller\" is also in `forward_headers`",
        ),
        (
            r#"{"x-tenant": "sub"}"#,
            "",
            "at `authorization.caller_metadata.x-tenant`: \"x-tenant\" is also fixed metadata of a.B",
        ),
        (
            r#"{"authorization": "sub"}"#,
            "",
            "at `authorization.caller_metadata.authorization`: \"authorization\" carries credentials",
        ),
        (
            r#"{"X-Caller": "sub"}"#,
            "",
            "at `authorization.caller_metadata.X-Caller`: \"X-Caller\" is not a lowercase header name",
        ),
        (
            r#"{"grpc-caller": "sub"}"#,
            "",
            "is reserved for the HTTP/2 and gRPC protocols",
        ),
        (
            r#"{"x-caller": []}"#,
            "",
            "at `authorization.caller_metadata.x-caller`: a claim name must not be empty",
        ),
    ] {
        let error = authorization(metadata, forward);
        assert!(error.contains(expected), "{error}");
    }
}

use super::*;
use crate::descriptors::embedded_pool;
use crate::http::{HttpResponse, McpHeaders};
use crate::observe::Observations;
use crate::server::{McpRequest, Outcome, Server};
use prost_types::value::Kind;
use serde_json::json;

const SERVICES: &str = r#""services": {
    "demo.catalog.v1.CatalogService": {"cluster": "c"},
    "demo.users.v1.UserService": {"cluster": "c"}
}"#;

fn config(authorization: &str) -> PluginConfig {
    PluginConfig::parse(format!(r#"{{{SERVICES}, "authorization": {authorization}}}"#).as_bytes()).unwrap()
}

fn policy(authorization: &str) -> Result<AccessPolicy, ConfigError> {
    let config = config(authorization);
    let catalog = Catalog::build(&config, &embedded_pool().unwrap(), false)?;
    Ok(AccessPolicy::build(&config, &catalog)?.unwrap())
}

fn grants(values: &[&str]) -> BTreeSet<String> {
    values.iter().map(|value| (*value).to_owned()).collect()
}

fn proto_value(value: &Value) -> prost_types::Value {
    let kind = match value {
        Value::Null => Kind::NullValue(0),
        Value::Bool(flag) => Kind::BoolValue(*flag),
        Value::Number(number) => Kind::NumberValue(number.as_f64().unwrap()),
        Value::String(text) => Kind::StringValue(text.clone()),
        Value::Array(items) => Kind::ListValue(prost_types::ListValue {
            values: items.iter().map(proto_value).collect(),
        }),
        Value::Object(map) => Kind::StructValue(proto_struct(map)),
    };
    prost_types::Value { kind: Some(kind) }
}

fn proto_struct(map: &Map<String, Value>) -> prost_types::Struct {
    prost_types::Struct {
        fields: map
            .iter()
            .map(|(key, value)| (key.clone(), proto_value(value)))
            .collect(),
    }
}

/// Dynamic metadata as Envoy serializes it, with `payload` where jwt_authn puts it.
fn metadata(namespace: &str, key: &str, payload: Value) -> Vec<u8> {
    let mut namespace_struct = Map::new();
    namespace_struct.insert(key.to_owned(), payload);
    let mut filter_metadata = BTreeMap::new();
    filter_metadata.insert(namespace.to_owned(), proto_struct(&namespace_struct));
    filter_metadata.insert("other.filter".to_owned(), proto_struct(&Map::new()));
    Metadata { filter_metadata }.encode_to_vec()
}

const RULES: &str = r#"{"rules": {
    "demo.catalog.v1.CatalogService": ["catalog:read"],
    "demo.catalog.v1.CatalogService/GetItem": ["catalog:read", "items:read"]
}}"#;

#[test]
fn a_method_rule_replaces_its_service_rule_and_unlisted_tools_are_closed() {
    let policy = policy(RULES).unwrap();
    let reader = grants(&["catalog:read"]);
    assert!(policy.permits(&reader, "CatalogService_Search"));
    assert!(!policy.permits(&reader, "CatalogService_GetItem"));
    assert!(policy.permits(&grants(&["catalog:read", "items:read", "x"]), "CatalogService_GetItem"));
    // UserService has no rule: closed to everyone by default.
    assert!(!policy.permits(
        &grants(&["catalog:read", "items:read", "users:read"]),
        "UserService_GetUser"
    ));
    assert!(!policy.permits(&reader, "NoSuchTool"));
}

#[test]
fn unlisted_allow_opens_unnamed_tools_to_any_verified_caller() {
    let policy =
        policy(r#"{"rules": {"demo.catalog.v1.CatalogService": ["catalog:read"]}, "unlisted": "allow"}"#).unwrap();
    assert!(policy.permits(&BTreeSet::new(), "UserService_GetUser"));
    assert!(!policy.permits(&BTreeSet::new(), "CatalogService_Search"));
    assert!(Caller::verified(BTreeSet::new(), "").may_call(Some(&policy), "UserService_GetUser"));
    assert!(!Caller::Unverified("none".into()).may_call(Some(&policy), "UserService_GetUser"));
    assert!(Caller::Anyone.may_call(None, "UserService_GetUser"));
    assert!(!Caller::Anyone.may_call(Some(&policy), "UserService_GetUser"));
}

#[test]
fn rules_that_name_nothing_served_are_refused_when_the_configuration_loads() {
    let cases = [
        (
            r#"{"rules": {"demo.catalog.v1.CatalogServce": ["a"]}}"#,
            "at `authorization.rules.demo.catalog.v1.CatalogServce`: names no configured service and no exposed tool's method; write a service from `services` (demo.catalog.v1.CatalogService, demo.users.v1.UserService) or `package.Service/Method` of a tool",
        ),
        (
            r#"{"rules": {"demo.catalog.v1.CatalogService/Delete": ["a"]}}"#,
            "at `authorization.rules.demo.catalog.v1.CatalogService/Delete`: names no configured service",
        ),
        (
            r#"{"rules": {"demo.catalog.v1.CatalogService": ["a b"]}}"#,
            "at `authorization.rules.demo.catalog.v1.CatalogService[0]`: \"a b\" is not a claim value; a scope is one word",
        ),
        (r#"{"rules": {}, "claim": []}"#, "at `authorization.claim`: a claim name must not be empty"),
        (
            r#"{"rules": {}, "token_payload": {"filter_state": ""}}"#,
            "at `authorization.token_payload`: names must not be empty",
        ),
    ];
    for (authorization, expected) in cases {
        let error = policy(authorization).unwrap_err().0;
        assert!(error.starts_with(expected), "{error}");
    }
    let server = Server::from_config_bytes(
        format!(r#"{{{SERVICES}, "authorization": {{"rules": {{"demo.users.v1.UserService/ListUsers": ["a"]}}}}}}"#)
            .as_bytes(),
    );
    assert!(server.unwrap_err().0.contains("names no configured service"));
    // Unknown keys and wrong shapes are refused by the parser, naming the key.
    let error =
        PluginConfig::parse(format!(r#"{{{SERVICES}, "authorization": {{"rules": {{}}, "scopes": 1}}}}"#).as_bytes())
            .unwrap_err()
            .0;
    assert!(
        error.starts_with("at `authorization.scopes`: unknown field `scopes`"),
        "{error}"
    );
    let error = PluginConfig::parse(
        format!(r#"{{{SERVICES}, "authorization": {{"rules": {{}}, "unlisted": "maybe"}}}}"#).as_bytes(),
    )
    .unwrap_err()
    .0;
    assert!(
        error.starts_with("at `authorization.unlisted`: unknown variant `maybe`"),
        "{error}"
    );
}

#[test]
fn grants_come_from_the_payload_in_dynamic_metadata() {
    let policy = policy(RULES).unwrap();
    let bytes = metadata(
        JWT_AUTHN,
        "jwt_payload",
        json!({"sub": "agent-7", "scope": "catalog:read  items:read"}),
    );
    // The subject is the caller's key for the rate limits (`limits.caller` unset).
    assert_eq!(
        policy.caller(Some(&bytes)),
        Caller::Verified {
            grants: grants(&["catalog:read", "items:read"]),
            key: Some("agent-7".into()),
            identity: r#"[null,"agent-7"]"#.into(),
            metadata: Vec::new(),
        }
    );
    // A token without the claim is verified, and grants nothing.
    let bytes = metadata(JWT_AUTHN, "jwt_payload", json!({"scope": ""}));
    assert_eq!(
        policy.caller(Some(&bytes)),
        Caller::verified(BTreeSet::new(), r#"{"scope":""}"#)
    );
    // Nothing where the payload should be: not verified.
    let elsewhere = metadata(JWT_AUTHN, "other_key", json!({"scope": "catalog:read"}));
    let unverified = |found: Option<&[u8]>| matches!(policy.caller(found), Caller::Unverified(_));
    assert!(unverified(Some(&elsewhere)));
    assert!(unverified(Some(&metadata(
        "other.namespace",
        "jwt_payload",
        json!({"scope": "x"})
    ))));
    assert!(unverified(Some(&metadata(
        JWT_AUTHN,
        "jwt_payload",
        json!("not an object")
    ))));
    assert!(unverified(Some(b"\xff\xff garbage")));
    assert!(unverified(Some(b"")));
    assert!(unverified(None));
    assert_eq!(
        policy.caller(None),
        Caller::Unverified("nothing at dynamic metadata `envoy.filters.http.jwt_authn` key `jwt_payload`".into())
    );
}

const JWT_AUTHN: &str = crate::config::authorization::JWT_AUTHN_NAMESPACE;

#[test]
fn scopes_are_split_on_the_ascii_space_alone() {
    let policy = policy(r#"{"rules": {}, "token_payload": {"filter_state": "switchblade.token_payload"}}"#).unwrap();
    for (scope, expected) in [
        ("a  admin ", &["a", "admin"][..]),
        // JSON escapes, read by the token's parser: NBSP, tab and newline, EM SPACE.
        (r"a\u00a0admin", &["a\u{a0}admin"][..]),
        (r"a\tadmin\nroot", &["a\tadmin\nroot"][..]),
        (r"a\u2003admin", &["a\u{2003}admin"][..]),
    ] {
        let payload = format!(r#"{{"scope": "{scope}"}}"#);
        assert_eq!(
            policy.caller(Some(payload.as_bytes())),
            Caller::verified(grants(expected), &payload_identity(&payload)),
            "{scope}"
        );
    }
}

#[test]
fn a_claim_may_be_an_array_or_nested_and_the_payload_may_come_from_filter_state() {
    let policy = policy(
        r#"{"rules": {}, "claim": ["realm_access", "roles"], "token_payload": {"filter_state": "switchblade.token_payload"}}"#,
    )
    .unwrap();
    let payload = json!({"realm_access": {"roles": ["admin", 7, "viewer"]}}).to_string();
    assert_eq!(
        policy.caller(Some(payload.as_bytes())),
        Caller::verified(grants(&["admin", "viewer"]), &payload_identity(&payload))
    );
    // Envoy's formatter writes `-` when the metadata is absent.
    assert!(matches!(policy.caller(Some(b"-")), Caller::Unverified(_)));
    assert!(matches!(policy.caller(Some(b"[1]")), Caller::Unverified(_)));
    let wrong_shape = json!({"realm_access": {"roles": {"admin": true}}}).to_string();
    assert_eq!(
        policy.caller(Some(wrong_shape.as_bytes())),
        Caller::verified(BTreeSet::new(), &payload_identity(&wrong_shape))
    );
}

fn payload_identity(payload: &str) -> String {
    identity_of(&serde_json::from_str(payload).unwrap())
}

#[test]
fn a_callers_identity_is_its_subject_or_its_lasting_claims() {
    let refreshed = |iat: u64| json!({"iss": "https://idp", "sub": "ada", "iat": iat, "scope": "a"});
    assert_eq!(identity_of(&refreshed(1)), r#"["https://idp","ada"]"#);
    assert_eq!(identity_of(&refreshed(1)), identity_of(&refreshed(2)));
    assert_ne!(
        identity_of(&refreshed(1)),
        identity_of(&json!({"iss": "https://other", "sub": "ada"}))
    );
    // Without a subject: the claims that last, in one order whatever the token's.
    let one = json!({"exp": 1, "client_id": "bot", "scope": "a b"});
    let two = json!({"scope": "a b", "client_id": "bot", "exp": 2, "jti": "x"});
    assert_eq!(identity_of(&one), identity_of(&two));
    assert_ne!(
        identity_of(&one),
        identity_of(&json!({"client_id": "other", "scope": "a b"}))
    );
}

fn modern_headers(method: &str, name: Option<&str>) -> McpHeaders {
    McpHeaders {
        content_type: Some("application/json".into()),
        accept: Some("application/json, text/event-stream".into()),
        protocol_version: Some("2026-07-28".into()),
        mcp_method: Some(method.into()),
        mcp_name: name.map(Into::into),
        ..McpHeaders::default()
    }
}

fn legacy_headers() -> McpHeaders {
    McpHeaders {
        content_type: Some("application/json".into()),
        accept: Some("application/json, text/event-stream".into()),
        protocol_version: Some("2025-11-25".into()),
        ..McpHeaders::default()
    }
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}})
}

fn outcome(server: &Server, headers: &McpHeaders, body: &Value, caller: &Caller) -> Outcome {
    let body = body.to_string();
    let request = McpRequest {
        headers,
        body: body.as_bytes(),
        caller,
        client_address: None,
        counters: None,
    };
    server.handle(request, &mut Observations::default())
}

fn respond(server: &Server, headers: &McpHeaders, body: &Value, caller: &Caller) -> (u16, Value, bool) {
    match outcome(server, headers, body, caller) {
        Outcome::Respond(response) => (response.status, serde_json::from_slice(&response.body).unwrap(), false),
        Outcome::Await(_) => (0, Value::Null, true),
        Outcome::Cancel { .. } => panic!("no test here cancels"),
    }
}

fn guarded_server() -> Server {
    Server::from_config_bytes(
        format!(r#"{{{SERVICES}, "tools_list": {{"page_size": 1}}, "authorization": {RULES}}}"#).as_bytes(),
    )
    .unwrap()
}

fn listed(server: &Server, caller: &Caller) -> Vec<String> {
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let params = match &cursor {
            None => json!({"_meta": meta()}),
            Some(cursor) => json!({"_meta": meta(), "cursor": cursor}),
        };
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params});
        let (status, answer, _) = respond(server, &modern_headers("tools/list", None), &body, caller);
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["result"]["cacheScope"], "private");
        for tool in answer["result"]["tools"].as_array().unwrap() {
            names.push(tool["name"].as_str().unwrap().to_owned());
        }
        match answer["result"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return names,
        }
    }
}

#[test]
fn each_caller_lists_and_pages_through_only_what_it_may_call() {
    let server = guarded_server();
    let reader = Caller::verified(grants(&["catalog:read"]), "reader");
    let full = Caller::verified(grants(&["catalog:read", "items:read"]), "full");
    assert_eq!(listed(&server, &reader), ["CatalogService_Search"]);
    assert_eq!(
        listed(&server, &full),
        ["CatalogService_Search", "CatalogService_GetItem"]
    );
    assert!(listed(&server, &Caller::verified(BTreeSet::new(), "")).is_empty());
    // The full caller's cursor is not valid in the reader's list.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}});
    let (_, first, _) = respond(&server, &modern_headers("tools/list", None), &body, &full);
    let cursor = first["result"]["nextCursor"].as_str().unwrap();
    let body =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta(), "cursor": cursor}});
    let (_, refused, _) = respond(&server, &modern_headers("tools/list", None), &body, &reader);
    assert_eq!(refused["error"]["code"], -32602);
    // The handshake era lists the same way.
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    let (_, legacy, _) = respond(&server, &legacy_headers(), &body, &reader);
    assert_eq!(legacy["result"]["tools"][0]["name"], "CatalogService_Search");
    assert!(legacy["result"].get("cacheScope").is_none());
}

#[test]
fn a_hidden_tool_answers_exactly_like_an_unknown_one_in_both_eras() {
    let server = guarded_server();
    let reader = Caller::verified(grants(&["catalog:read"]), "reader");
    let mut statuses = Vec::new();
    for name in ["CatalogService_GetItem", "UserService_GetUser", "NoSuchTool"] {
        let params = json!({"_meta": meta(), "name": name, "arguments": {}});
        let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": params});
        let (status, modern, started) = respond(&server, &modern_headers("tools/call", Some(name)), &body, &reader);
        assert!(!started);
        statuses.push(status);
        let expected =
            format!("Invalid params: unknown tool {name:?}; call tools/list for the tools this server offers");
        assert_eq!(modern["error"], json!({"code": -32602, "message": expected}));
        let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": name}});
        let (_, legacy, started) = respond(&server, &legacy_headers(), &body, &reader);
        assert!(!started);
        assert_eq!(legacy["error"], json!({"code": -32602, "message": expected}));
    }
    assert_eq!(statuses, [statuses[2]; 3]);
    // What the caller may call is called.
    let params = json!({"_meta": meta(), "name": "CatalogService_Search", "arguments": {}});
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params});
    let (_, _, started) = respond(
        &server,
        &modern_headers("tools/call", Some("CatalogService_Search")),
        &body,
        &reader,
    );
    assert!(started);
}

#[test]
fn without_a_verified_token_nothing_is_served() {
    let server = guarded_server();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    for caller in [
        Caller::Unverified("nothing at dynamic metadata `envoy.filters.http.jwt_authn` key `jwt_payload`".into()),
        Caller::Anyone,
    ] {
        let (status, answer, _) = respond(&server, &legacy_headers(), &body, &caller);
        assert_eq!(status, 401);
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(
                "Unauthorized: this server authorizes each tool from a verified token, and none reached it ("
            ),
            "{message}"
        );
        assert!(
            message.contains("(dynamic metadata `envoy.filters.http.jwt_authn` key `jwt_payload`)"),
            "{message}"
        );
    }
    // Without authorization, nobody needs a token.
    let open = Server::from_config_bytes(format!("{{{SERVICES}}}").as_bytes()).unwrap();
    assert_eq!(open.caller(None), Caller::Anyone);
    let (status, _, _) = respond(&open, &legacy_headers(), &body, &Caller::Anyone);
    assert_eq!(status, 200);
}

/// An authorization that publishes its resource, checks the audience, tells callers which
/// scopes a tool needs, and hands the upstream who calls.
const OAUTH: &str = r#"{"rules": {
    "demo.catalog.v1.CatalogService": ["catalog:read"],
    "demo.catalog.v1.CatalogService/GetItem": ["catalog:read", "items:read"]
  },
  "insufficient_scope": "challenge",
  "resource_metadata": {"resource": "https://mcp.example.com/mcp", "authorization_servers": ["https://auth.example.com"]},
  "caller_metadata": {"x-caller-sub": "sub", "x-caller-org": ["org", "id"], "x-caller-roles": "roles"}
}"#;

fn oauth_server() -> Server {
    Server::from_config_bytes(format!(r#"{{{SERVICES}, "authorization": {OAUTH}}}"#).as_bytes()).unwrap()
}

/// The whole HTTP answer to `body`, or `None` when it makes a call.
fn whole_answer(server: &Server, headers: &McpHeaders, body: &Value, caller: &Caller) -> Option<HttpResponse> {
    match outcome(server, headers, body, caller) {
        Outcome::Respond(response) => Some(response),
        _ => None,
    }
}

const METADATA_URL: &str = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp";

#[test]
fn the_caller_tells_the_upstream_who_it_is_from_its_claims_as_metadata_text() {
    let policy = policy(OAUTH).unwrap();
    let payload = json!({"aud": "https://mcp.example.com/mcp", "sub": " agent é\n7% ", "org": {"id": 42},
                         "roles": ["admin", 3, true], "scope": "catalog:read"});
    let caller = policy.caller(Some(&metadata(JWT_AUTHN, "jwt_payload", payload)));
    assert_eq!(
        caller.metadata(),
        [
            ("x-caller-org".to_owned(), "42".to_owned()),
            ("x-caller-roles".to_owned(), "admin 3 true".to_owned()),
            // Percent-encoded: `%`, bytes outside printable ASCII, and a space at either end.
            ("x-caller-sub".to_owned(), "%20agent %C3%A9%0A7%25%20".to_owned()),
        ]
    );
    // Claims that are absent, or not text, numbers or flat lists, send nothing.
    let payload = json!({"aud": "https://mcp.example.com/mcp", "org": {"id": {"deep": 1}}, "roles": [["nested"]]});
    let caller = policy.caller(Some(&metadata(JWT_AUTHN, "jwt_payload", payload)));
    assert!(caller.metadata().is_empty());
}

#[test]
fn a_token_for_another_resource_is_refused_with_an_invalid_token_challenge() {
    let server = oauth_server();
    let policy = server.access().unwrap();
    for (audience, verified) in [
        (json!("https://mcp.example.com/mcp"), true),
        (json!(["x", "https://mcp.example.com/mcp"]), true),
        (json!("https://other.example.com/mcp"), false),
        (json!(null), false),
    ] {
        let payload = json!({"aud": audience, "scope": "catalog:read"});
        let caller = policy.caller(Some(&metadata(JWT_AUTHN, "jwt_payload", payload)));
        assert_eq!(matches!(caller, Caller::Verified { .. }), verified, "{audience}");
    }
    let caller = Caller::WrongAudience("its audience \"x\" does not name https://mcp.example.com/mcp".into());
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let refused = whole_answer(&server, &legacy_headers(), &body, &caller).unwrap();
    assert_eq!(refused.status, 401);
    let challenge = format!("Bearer error=\"invalid_token\", resource_metadata=\"{METADATA_URL}\"");
    assert!(refused
        .header_pairs()
        .contains(&("www-authenticate", challenge.as_str())));
    let missing = whole_answer(&server, &legacy_headers(), &body, &Caller::Unverified("nothing".into())).unwrap();
    let challenge = format!("Bearer resource_metadata=\"{METADATA_URL}\"");
    assert!(missing
        .header_pairs()
        .contains(&("www-authenticate", challenge.as_str())));
}

#[test]
fn with_challenge_every_callable_tool_is_listed_and_a_call_without_its_scopes_is_a_step_up() {
    let server = oauth_server();
    let reader = Caller::verified(grants(&["catalog:read"]), "reader");
    // UserService has no rule and `unlisted` is deny: nobody may call it, so nobody sees it.
    assert_eq!(
        listed(&server, &reader),
        ["CatalogService_Search", "CatalogService_GetItem"]
    );
    let call = json!({"name": "CatalogService_GetItem", "arguments": {"id": "1"}});
    let mut modern_call = call.clone();
    modern_call["_meta"] = meta();
    for (headers, params) in [
        (
            modern_headers("tools/call", Some("CatalogService_GetItem")),
            modern_call,
        ),
        (legacy_headers(), call),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": params});
        let refused = whole_answer(&server, &headers, &body, &reader).unwrap();
        assert_eq!(refused.status, 403, "{}", String::from_utf8_lossy(&refused.body));
        let challenge = format!(
            "Bearer error=\"insufficient_scope\", scope=\"catalog:read items:read\", resource_metadata=\"{METADATA_URL}\""
        );
        assert!(refused
            .header_pairs()
            .contains(&("www-authenticate", challenge.as_str())));
        let answer: Value = serde_json::from_slice(&refused.body).unwrap();
        assert_eq!(answer["id"], 6);
        assert_eq!(answer["error"]["code"], -32600);
    }
    // A tool nobody may call is still unknown.
    let params = json!({"_meta": meta(), "name": "UserService_GetUser", "arguments": {}});
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
    let unknown = whole_answer(
        &server,
        &modern_headers("tools/call", Some("UserService_GetUser")),
        &body,
        &reader,
    );
    assert_eq!(unknown.unwrap().status, 400);
    // In a batch, the step-up is that message's error, and the batch is 200.
    let batch = json!([{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "CatalogService_GetItem", "arguments": {"id": "1"}}}]);
    let headers = McpHeaders {
        protocol_version: Some("2025-03-26".into()),
        ..legacy_headers()
    };
    let answer = whole_answer(&server, &headers, &batch, &reader).unwrap();
    assert_eq!(answer.status, 200);
    let answers: Value = serde_json::from_slice(&answer.body).unwrap();
    assert!(answers[0]["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("Forbidden: tool CatalogService_GetItem needs the scopes \"catalog:read items:read\""));
}

#[test]
fn the_metadata_is_served_where_rfc_9728_puts_it_and_defaults_to_the_rules_scopes() {
    let server = oauth_server();
    let answer = server
        .protected_resource_metadata("/.well-known/oauth-protected-resource/mcp", || "GET".into())
        .unwrap();
    let document: Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(document["scopes_supported"], json!(["catalog:read", "items:read"]));
    let mut asked = false;
    let elsewhere = server.protected_resource_metadata("/mcp", || {
        asked = true;
        "GET".into()
    });
    assert!(
        elsewhere.is_none() && !asked,
        "the method is read only for the metadata's path"
    );
    assert!(guarded_server()
        .protected_resource_metadata("/.well-known/oauth-protected-resource", || "GET".into())
        .is_none());
    // Scopes are a default only where the rules are OAuth scopes.
    let roles = Server::from_config_bytes(
        format!(
            r#"{{{SERVICES}, "authorization": {{"claim": "roles", "rules": {{"demo.users.v1.UserService": ["admin"]}},
               "resource_metadata": {{"resource": "https://mcp.example.com/mcp", "authorization_servers": ["https://a.example"]}}}}}}"#
        )
        .as_bytes(),
    )
    .unwrap();
    let answer = roles
        .protected_resource_metadata("/.well-known/oauth-protected-resource", || "GET".into())
        .unwrap();
    let document: Value = serde_json::from_slice(&answer.body).unwrap();
    assert!(document.get("scopes_supported").is_none(), "{document}");
}

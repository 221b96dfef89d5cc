//! The MCP server: answers JSON-RPC over Streamable HTTP from the catalog, and turns
//! `tools/call` into an upstream gRPC call and its reply into a tool result.
//!
//! Pure: the adapter feeds it request bytes and gRPC replies and sends what it returns.

use std::rc::Rc;

use prost_reflect::DescriptorPool;
use serde_json::{json, Map, Value};

use crate::catalog::{Catalog, Tool};
use crate::config::{ConfigError, PluginConfig};
use crate::descriptors::embedded_pool;
use crate::grpc::{is_envoy_timeout, readable_message, status_name, DEADLINE_EXCEEDED};
use crate::http::HttpResponse;
use crate::jsonrpc::{self, Incoming, RpcError};
use crate::transcode::{decode_response, encode_arguments, json_type};

/// Protocol revisions served, newest first.
pub const SUPPORTED_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The parts of a POST to the MCP path that the protocol looks at.
#[derive(Debug, Clone, Copy)]
pub struct McpRequest<'a> {
    /// The `MCP-Protocol-Version` header, if sent.
    pub protocol_version: Option<&'a str>,
    pub body: &'a [u8],
}

/// What to do with a request.
#[derive(Debug)]
pub enum Outcome {
    Respond(HttpResponse),
    Call(UpstreamCall),
}

/// A validated `tools/call`, ready to send upstream.
#[derive(Debug)]
pub struct UpstreamCall {
    pub tool: Rc<Tool>,
    pub request_id: Value,
    /// The request message, protobuf-encoded.
    pub message: Vec<u8>,
}

/// How an upstream call ended.
#[derive(Debug, Clone, Copy)]
pub struct GrpcReply<'a> {
    pub status: u32,
    pub message: Option<&'a str>,
    pub body: &'a [u8],
}

/// One configuration's MCP server, built once per VM configuration.
#[derive(Debug)]
pub struct Server {
    mcp_path: String,
    catalog: Catalog,
    server_info: Value,
    instructions: Option<String>,
    /// The `tools/list` result, rendered once: the list never varies per request.
    tools_list_result: String,
}

impl Server {
    /// Builds the server from the plugin configuration bytes and the embedded descriptors.
    pub fn from_config_bytes(bytes: &[u8]) -> Result<Self, ConfigError> {
        let config = PluginConfig::parse(bytes)?;
        let pool = embedded_pool().map_err(|error| {
            ConfigError(format!(
                "the embedded descriptor set does not load: {error}"
            ))
        })?;
        Self::new(&config, &pool)
    }

    pub fn new(config: &PluginConfig, pool: &DescriptorPool) -> Result<Self, ConfigError> {
        let catalog = Catalog::build(config, pool)?;
        let identity = &config.server;
        let mut server_info = Map::new();
        server_info.insert(
            "name".into(),
            json!(identity.name.as_deref().unwrap_or("switchblade")),
        );
        server_info.insert(
            "version".into(),
            json!(identity
                .version
                .as_deref()
                .unwrap_or(env!("CARGO_PKG_VERSION"))),
        );
        if let Some(title) = &identity.title {
            server_info.insert("title".into(), json!(title));
        }
        let tools: Vec<&Value> = catalog.tools().map(|tool| &tool.definition).collect();
        let tools_list_result = serde_json::to_string(&json!({ "tools": tools }))
            .map_err(|error| ConfigError(format!("cannot render tools/list: {error}")))?;
        Ok(Server {
            mcp_path: config.mcp_path.clone(),
            catalog,
            server_info: Value::Object(server_info),
            instructions: identity.instructions.clone(),
            tools_list_result,
        })
    }

    pub fn mcp_path(&self) -> &str {
        &self.mcp_path
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Answers a POST to the MCP path, or asks for an upstream call.
    pub fn handle(&self, request: McpRequest<'_>) -> Outcome {
        if let Some(version) = request.protocol_version {
            if !SUPPORTED_VERSIONS.contains(&version) {
                let message = format!(
                    "Bad Request: unsupported MCP-Protocol-Version {version:?}; supported: {}",
                    SUPPORTED_VERSIONS.join(", ")
                );
                return respond_error(
                    400,
                    RpcError::new(&Value::Null, jsonrpc::INVALID_REQUEST, message),
                );
            }
        }
        match jsonrpc::parse(request.body) {
            Err(error) => respond_error(400, error),
            Ok(Incoming::Notification { .. } | Incoming::Response) => {
                Outcome::Respond(HttpResponse::accepted())
            }
            Ok(Incoming::Request { id, method, params }) => self.dispatch(id, &method, params),
        }
    }

    fn dispatch(&self, id: Value, method: &str, params: Option<Value>) -> Outcome {
        let params = match params {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(params)) => params,
            Some(other) => {
                let message = format!(
                    "Invalid params: `params` must be an object, got {}",
                    json_type(&other)
                );
                return respond_error(200, RpcError::new(&id, jsonrpc::INVALID_PARAMS, message));
            }
        };
        match method {
            "initialize" => respond(&id, &self.initialize(&params)),
            "ping" => respond(&id, &json!({})),
            "tools/list" => Outcome::Respond(HttpResponse::json(
                200,
                jsonrpc::success_raw(&id, &self.tools_list_result),
            )),
            "tools/call" => self.call_tool(id, &params),
            _ => respond_error(
                200,
                RpcError::new(
                    &id,
                    jsonrpc::METHOD_NOT_FOUND,
                    format!("Method not found: {method}"),
                ),
            ),
        }
    }

    fn initialize(&self, params: &Map<String, Value>) -> Value {
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        let version = requested
            .filter(|version| SUPPORTED_VERSIONS.contains(version))
            .unwrap_or(SUPPORTED_VERSIONS[0]);
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": self.server_info,
        });
        if let (Some(instructions), Value::Object(map)) = (&self.instructions, &mut result) {
            map.insert("instructions".into(), json!(instructions));
        }
        result
    }

    fn call_tool(&self, id: Value, params: &Map<String, Value>) -> Outcome {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            let message = "Invalid params: tools/call needs `name`, a string";
            return respond_error(200, RpcError::new(&id, jsonrpc::INVALID_PARAMS, message));
        };
        let Some(tool) = self.catalog.get(name) else {
            let message =
                format!("Unknown tool: {name:?}; call tools/list for the tools this server offers");
            return respond_error(200, RpcError::new(&id, jsonrpc::INVALID_PARAMS, message));
        };
        let empty = Value::Object(Map::new());
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => &empty,
            Some(arguments) => arguments,
        };
        match encode_arguments(&tool.method.input(), arguments) {
            Ok(message) => Outcome::Call(UpstreamCall { tool: Rc::clone(tool), request_id: id, message }),
            Err(error) => respond(
                &id,
                &tool_error(format!(
                    "Invalid arguments for tool {name}: {error}. The request was not sent; fix the arguments to match the tool's inputSchema."
                )),
            ),
        }
    }

    /// The tool result for a finished upstream call.
    pub fn complete(&self, call: &UpstreamCall, reply: GrpcReply<'_>) -> HttpResponse {
        let result = if reply.status == 0 {
            match decode_response(&call.tool.method.output(), reply.body) {
                Ok(content) => tool_success(content),
                Err(error) => tool_error(format!(
                    "{} answered with a response that could not be decoded: {}",
                    rpc_name(&call.tool),
                    error.0
                )),
            }
        } else {
            tool_error(grpc_failure_text(&call.tool, reply.status, reply.message))
        };
        HttpResponse::json(200, jsonrpc::success(&call.request_id, &result))
    }

    /// The tool result when the call could not even be started (for example, no such cluster).
    pub fn dispatch_failed(&self, call: &UpstreamCall, reason: &str) -> HttpResponse {
        let text = format!(
            "{} failed with gRPC status UNAVAILABLE (14): the call to cluster {:?} could not be started: {reason}",
            rpc_name(&call.tool),
            call.tool.cluster
        );
        HttpResponse::json(200, jsonrpc::success(&call.request_id, &tool_error(text)))
    }
}

fn rpc_name(tool: &Tool) -> String {
    format!("{}/{}", tool.service_name(), tool.method_name())
}

fn grpc_failure_text(tool: &Tool, status: u32, message: Option<&str>) -> String {
    let message = message.map(readable_message).unwrap_or_default();
    let (status, message) = if is_envoy_timeout(status, &message) {
        let deadline = format!(
            "no answer within the {} ms deadline",
            tool.timeout.as_millis()
        );
        (DEADLINE_EXCEEDED, deadline)
    } else {
        (status, message)
    };
    let mut text = format!(
        "{} failed with gRPC status {} ({status})",
        rpc_name(tool),
        status_name(status)
    );
    if !message.is_empty() {
        text.push_str(": ");
        text.push_str(&message);
    }
    text
}

fn tool_success(content: Value) -> Value {
    let text = content.to_string();
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": content,
        "isError": false,
    })
}

fn tool_error(text: String) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

fn respond(id: &Value, result: &Value) -> Outcome {
    Outcome::Respond(HttpResponse::json(200, jsonrpc::success(id, result)))
}

fn respond_error(status: u16, error: RpcError) -> Outcome {
    Outcome::Respond(HttpResponse::rpc_error(status, &error))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"{
        "server": {"name": "demo", "version": "1.2.3", "instructions": "Use the catalog."},
        "services": [
            {"name": "demo.catalog.v1.CatalogService", "cluster": "catalog"},
            {"name": "demo.users.v1.UserService", "cluster": "users"}
        ]}"#;

    fn server() -> Server {
        Server::from_config_bytes(CONFIG.as_bytes()).unwrap()
    }

    fn post(server: &Server, body: &str) -> Outcome {
        server.handle(McpRequest {
            protocol_version: None,
            body: body.as_bytes(),
        })
    }

    fn reply(outcome: Outcome) -> (u16, Value) {
        match outcome {
            Outcome::Respond(response) => {
                let body = if response.body.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_slice(&response.body).unwrap()
                };
                (response.status, body)
            }
            Outcome::Call(call) => panic!("expected a reply, got a call to {}", call.tool.name),
        }
    }

    fn call(outcome: Outcome) -> UpstreamCall {
        match outcome {
            Outcome::Call(call) => call,
            Outcome::Respond(response) => panic!(
                "expected a call, got {}",
                String::from_utf8_lossy(&response.body)
            ),
        }
    }

    #[test]
    fn initialize_negotiates_the_version() {
        let server = server();
        let (status, body) = post(&server, r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#).pipe(reply);
        assert_eq!(status, 200);
        assert_eq!(body["result"]["protocolVersion"], "2025-06-18");
        assert_eq!(
            body["result"]["serverInfo"],
            json!({"name": "demo", "version": "1.2.3"})
        );
        assert_eq!(body["result"]["instructions"], "Use the catalog.");
        assert_eq!(
            body["result"]["capabilities"],
            json!({"tools": {"listChanged": false}})
        );
        let (_, body) = post(&server, r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}"#).pipe(reply);
        assert_eq!(body["result"]["protocolVersion"], SUPPORTED_VERSIONS[0]);
    }

    #[test]
    fn notifications_and_responses_are_accepted_without_a_body() {
        let server = server();
        assert_eq!(
            post(
                &server,
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
            )
            .pipe(reply),
            (202, Value::Null)
        );
        assert_eq!(
            post(&server, r#"{"jsonrpc":"2.0","id":9,"result":{}}"#).pipe(reply),
            (202, Value::Null)
        );
    }

    #[test]
    fn ping_and_unknown_methods() {
        let server = server();
        assert_eq!(
            post(&server, r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
                .pipe(reply)
                .1["result"],
            json!({})
        );
        let (status, body) = post(
            &server,
            r#"{"jsonrpc":"2.0","id":2,"method":"resources/list"}"#,
        )
        .pipe(reply);
        assert_eq!(
            (status, body["error"]["code"].clone()),
            (200, json!(jsonrpc::METHOD_NOT_FOUND))
        );
    }

    #[test]
    fn envelope_errors_are_http_400() {
        let server = server();
        let (status, body) = post(&server, "{").pipe(reply);
        assert_eq!(
            (status, body["error"]["code"].clone(), body["id"].clone()),
            (400, json!(-32700), Value::Null)
        );
        let (status, _) = server
            .handle(McpRequest {
                protocol_version: Some("2099-01-01"),
                body: br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            })
            .pipe(reply);
        assert_eq!(status, 400);
    }

    #[test]
    fn tools_list_is_the_prerendered_catalog() {
        let (_, body) = post(
            &server(),
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
        )
        .pipe(reply);
        let names: Vec<&str> = body["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "CatalogService_Search",
                "CatalogService_GetItem",
                "UserService_GetUser"
            ]
        );
        assert_eq!(body["id"], 3);
    }

    #[test]
    fn tools_call_becomes_an_upstream_call() {
        let call = post(&server(), r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"UserService_GetUser","arguments":{"user_id":7}}}"#).pipe(call);
        assert_eq!(
            (call.tool.service_name(), call.tool.method_name()),
            ("demo.users.v1.UserService", "GetUser")
        );
        assert_eq!(call.tool.cluster, "users");
        assert_eq!(call.message, [0x08, 7]);
        assert_eq!(call.request_id, 4);
    }

    #[test]
    fn injection_is_refused_as_a_tool_error_without_a_call() {
        let (status, body) = post(&server(), r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"UserService_GetUser","arguments":{"user_id":{"$ne":null}}}}"#).pipe(reply);
        assert_eq!(status, 200);
        assert_eq!(body["result"]["isError"], true);
        let text = body["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            text.starts_with(
                "Invalid arguments for tool UserService_GetUser: at `user_id`: invalid type: map"
            ),
            "{text}"
        );
    }

    #[test]
    fn unknown_tool_and_bad_params_are_protocol_errors() {
        let server = server();
        let (_, body) = post(
            &server,
            r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"Nope"}}"#,
        )
        .pipe(reply);
        assert_eq!(body["error"]["code"], jsonrpc::INVALID_PARAMS);
        let (_, body) = post(
            &server,
            r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":[1]}"#,
        )
        .pipe(reply);
        assert_eq!(body["error"]["code"], jsonrpc::INVALID_PARAMS);
        let (_, body) = post(
            &server,
            r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{}}"#,
        )
        .pipe(reply);
        assert_eq!(body["error"]["code"], jsonrpc::INVALID_PARAMS);
    }

    #[test]
    fn replies_become_tool_results() {
        let server = server();
        let call = post(&server, r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"UserService_GetUser","arguments":{"user_id":7}}}"#).pipe(call);

        let ok = server.complete(
            &call,
            GrpcReply {
                status: 0,
                message: None,
                body: &[0x08, 7],
            },
        );
        let body: Value = serde_json::from_slice(&ok.body).unwrap();
        let result = &body["result"];
        assert_eq!(result["isError"], false);
        assert_eq!(result["structuredContent"]["user_id"], 7);
        let text: Value =
            serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, result["structuredContent"]);

        let not_found = server.complete(
            &call,
            GrpcReply {
                status: 5,
                message: Some("no user 7"),
                body: &[],
            },
        );
        let body: Value = serde_json::from_slice(&not_found.body).unwrap();
        assert_eq!(body["result"]["isError"], true);
        assert_eq!(
            body["result"]["content"][0]["text"],
            "demo.users.v1.UserService/GetUser failed with gRPC status NOT_FOUND (5): no user 7"
        );

        let timed_out = server.complete(
            &call,
            GrpcReply {
                status: 14,
                message: Some("upstream request timeout"),
                body: &[],
            },
        );
        let body: Value = serde_json::from_slice(&timed_out.body).unwrap();
        assert_eq!(
            body["result"]["content"][0]["text"],
            "demo.users.v1.UserService/GetUser failed with gRPC status DEADLINE_EXCEEDED (4): no answer within the 10000 ms deadline"
        );

        let failed = server.dispatch_failed(&call, "BadArgument");
        let body: Value = serde_json::from_slice(&failed.body).unwrap();
        assert!(body["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("UNAVAILABLE"));
    }

    trait Pipe: Sized {
        fn pipe<T>(self, f: impl FnOnce(Self) -> T) -> T {
            f(self)
        }
    }
    impl Pipe for Outcome {}
}

//! The MCP server: answers JSON-RPC over Streamable HTTP in both protocol eras, and turns
//! `tools/call` into upstream gRPC calls and their replies into tool results.
//!
//! Pure: the adapter feeds it headers, body bytes and gRPC replies, and sends what it returns.

use std::rc::Rc;

use prost_reflect::DescriptorPool;
use serde_json::{json, Map, Value};

use crate::catalog::{Catalog, Tool, WRAPPED_VALUE};
use crate::config::{ConfigError, Limits, PluginConfig};
use crate::descriptors::{configured_pool, embedded_pool};
use crate::explain::explain;
use crate::grpc::{readable_message, status_name, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, UNAVAILABLE};
use crate::http::{CallerPolicy, HttpResponse, McpHeaders};
use crate::jsonrpc::{self, Body, Incoming, RpcError, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND};
use crate::protocol::{
    check_modern_request, declares_modern_envelope, supported_versions, Era, BATCH_VERSION, LEGACY_VERSIONS,
    MODERN_VERSION, SERVER_INFO_META,
};
use crate::status_details::StatusDetails;
use crate::strict_json::DuplicateKey;
use crate::tools_list::ToolsListPages;
use crate::transcode::{encode_arguments, json_type, render_response, ArgumentError};

/// A POST to the MCP path.
#[derive(Debug, Clone, Copy)]
pub struct McpRequest<'a> {
    pub headers: &'a McpHeaders,
    pub body: &'a [u8],
}

/// What to do with a request.
#[derive(Debug)]
pub enum Outcome {
    Respond(HttpResponse),
    /// Make these calls; the reply is complete when each has been answered.
    Await(Reply, Vec<UpstreamCall>),
}

/// A validated `tools/call`, ready to send upstream.
#[derive(Debug)]
pub struct UpstreamCall {
    pub tool: Rc<Tool>,
    pub request_id: Value,
    /// The request message, protobuf-encoded.
    pub message: Vec<u8>,
    /// gRPC metadata: the service's static metadata, then the forwarded request headers.
    pub metadata: Vec<(String, String)>,
    era: Era,
    slot: usize,
}

/// How an upstream call ended.
#[derive(Debug, Clone, Copy)]
pub struct GrpcReply<'a> {
    pub status: u32,
    pub message: Option<&'a str>,
    pub body: &'a [u8],
    /// The `grpc-status-details-bin` trailer, if the upstream sent one.
    pub details: Option<&'a [u8]>,
}

/// The answer to a POST, assembled as its upstream calls return.
#[derive(Debug)]
pub struct Reply {
    batch: bool,
    /// One JSON-RPC response per request in the body; `None` while its call is out.
    slots: Vec<Option<Answer>>,
}

#[derive(Debug)]
struct Answer {
    status: u16,
    body: Vec<u8>,
}

impl Reply {
    pub fn is_complete(&self) -> bool {
        self.slots.iter().all(Option::is_some)
    }

    /// The HTTP response: one JSON-RPC response, or a batch array (always 200).
    pub fn into_response(self) -> HttpResponse {
        let mut answers = self.slots.into_iter().flatten();
        if !self.batch {
            return match answers.next() {
                Some(answer) => HttpResponse::json(answer.status, answer.body),
                None => HttpResponse::accepted(),
            };
        }
        let mut body = vec![b'['];
        for (index, answer) in answers.enumerate() {
            if index > 0 {
                body.push(b',');
            }
            body.extend_from_slice(&answer.body);
        }
        body.push(b']');
        if body.len() == 2 {
            return HttpResponse::accepted();
        }
        HttpResponse::json(200, body)
    }
}

/// One configuration's MCP server, built once per VM configuration.
#[derive(Debug)]
pub struct Server {
    mcp_path: String,
    catalog: Catalog,
    server_info: Value,
    /// The modern era's `_meta` of every tool result, rendered once.
    result_meta: String,
    instructions: Option<String>,
    tools_list: ToolsListPages,
    /// The `server/discover` result, rendered once.
    discover_result: String,
    /// Request headers sent upstream as gRPC metadata.
    forward_headers: Vec<String>,
    /// Renders error details; decoded with the embedded `google.rpc` messages.
    status_details: Option<StatusDetails>,
    /// Who may call (Origin and Host allowlists).
    callers: CallerPolicy,
    limits: Limits,
}

/// What every message of one POST shares.
struct RequestContext<'a> {
    era: Era,
    batch: bool,
    headers: &'a McpHeaders,
    /// A key given twice inside a single request's `params.arguments`: the tool call is
    /// refused like any other bad argument, naming the path.
    duplicate_argument: Option<ArgumentError>,
}

/// What one message of a body turns into.
enum Handled {
    /// Nothing to answer (a notification, or a client's response).
    Nothing,
    Answer(Answer),
    Call(UpstreamCall),
}

impl Server {
    /// Builds the server from the plugin configuration bytes, with the configuration's own
    /// descriptor set or the embedded one.
    pub fn from_config_bytes(bytes: &[u8]) -> Result<Self, ConfigError> {
        let config = PluginConfig::parse(bytes)?;
        let pool = configured_pool(config.descriptor_set.as_deref())?;
        Self::new(&config, &pool)
    }

    pub fn new(config: &PluginConfig, pool: &DescriptorPool) -> Result<Self, ConfigError> {
        let catalog = Catalog::build(config, pool)?;
        let identity = &config.server;
        let mut server_info = Map::new();
        server_info.insert("name".into(), json!(identity.name.as_deref().unwrap_or("switchblade")));
        server_info.insert(
            "version".into(),
            json!(identity.version.as_deref().unwrap_or(env!("CARGO_PKG_VERSION"))),
        );
        if let Some(title) = &identity.title {
            server_info.insert("title".into(), json!(title));
        }
        let server_info = Value::Object(server_info);
        let list = &config.tools_list;
        let tools_list = ToolsListPages::render(&catalog, list.page_size, list.ttl_ms, &server_info);
        let discover_result = discover_result(&server_info, identity.instructions.as_deref(), list.ttl_ms);
        Ok(Server {
            mcp_path: config.mcp_path.clone(),
            catalog,
            result_meta: json!({ SERVER_INFO_META: server_info }).to_string(),
            server_info,
            instructions: identity.instructions.clone(),
            tools_list,
            discover_result,
            forward_headers: config.forward_headers.clone(),
            status_details: details_pool(config, pool).and_then(StatusDetails::new),
            limits: config.limits,
            callers: CallerPolicy {
                allowed_origins: config.allowed_origins.clone(),
                allowed_hosts: config.allowed_hosts.clone(),
            },
        })
    }

    pub fn mcp_path(&self) -> &str {
        &self.mcp_path
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The request headers this configuration forwards upstream (lowercase).
    pub fn forward_headers(&self) -> &[String] {
        &self.forward_headers
    }

    /// Answers a POST to the MCP path, or asks for upstream calls.
    pub fn handle(&self, request: McpRequest<'_>) -> Outcome {
        let headers = request.headers;
        if let Some(refusal) = self.callers.refusal(headers) {
            return Outcome::Respond(HttpResponse::forbidden(&refusal));
        }
        if !headers.accepts_json() {
            return Outcome::Respond(HttpResponse::not_acceptable());
        }
        if !headers.content_type_is_json() {
            return Outcome::Respond(HttpResponse::unsupported_media_type());
        }
        if request.body.len() > self.limits.max_request_bytes {
            return Outcome::Respond(HttpResponse::too_large(
                request.body.len(),
                self.limits.max_request_bytes,
            ));
        }
        let parsed = match jsonrpc::parse_body(request.body, self.limits.max_json_depth) {
            Err(error) => return respond_error(400, &error),
            Ok(parsed) => parsed,
        };
        let (messages, batch) = match parsed.body {
            Body::Single(message) => (vec![message], false),
            Body::Batch(messages) => (messages, true),
        };
        let first_id = || {
            if batch {
                Value::Null
            } else {
                messages
                    .first()
                    .map(|message| jsonrpc::reply_id(message.get("id")))
                    .unwrap_or(Value::Null)
            }
        };
        let duplicate_argument = match parsed.duplicate {
            None => None,
            Some(duplicate) => match argument_duplicate(&duplicate, batch) {
                Some(error) => Some(error),
                None => {
                    let message = format!(
                        "Invalid Request: duplicate key `{}` at `{}`",
                        duplicate.key, duplicate.path
                    );
                    return respond_error(400, &RpcError::new(&first_id(), INVALID_REQUEST, message));
                }
            },
        };
        let version_header = headers.protocol_version.as_deref();
        let declares_modern = !batch && messages.iter().any(declares_modern_envelope);
        let era = match Era::of(version_header, declares_modern) {
            Ok(era) => era,
            Err(error) => {
                return respond_error(
                    400,
                    &RpcError {
                        id: first_id(),
                        ..error
                    },
                )
            }
        };
        if batch {
            if let Some(refusal) = refuse_batch(era, messages.is_empty()) {
                return respond_error(400, &refusal);
            }
        }
        let context = RequestContext {
            era,
            batch,
            headers,
            duplicate_argument,
        };
        self.plan(&context, messages)
    }

    fn plan(&self, context: &RequestContext<'_>, messages: Vec<Value>) -> Outcome {
        let mut reply = Reply {
            batch: context.batch,
            slots: Vec::with_capacity(messages.len()),
        };
        let mut calls = Vec::new();
        for message in messages {
            let slot = reply.slots.len();
            match self.handle_message(context, message, slot) {
                Handled::Nothing => {}
                Handled::Answer(answer) => reply.slots.push(Some(answer)),
                Handled::Call(call) => {
                    reply.slots.push(None);
                    calls.push(call);
                }
            }
        }
        if calls.is_empty() {
            Outcome::Respond(reply.into_response())
        } else {
            Outcome::Await(reply, calls)
        }
    }

    fn handle_message(&self, context: &RequestContext<'_>, message: Value, slot: usize) -> Handled {
        let era = context.era;
        let incoming = match jsonrpc::classify(message) {
            Ok(incoming) => incoming,
            Err(error) => return Handled::Answer(error_answer(era, &error)),
        };
        match incoming {
            Incoming::Notification { .. } => Handled::Nothing,
            Incoming::Response if era == Era::Modern => Handled::Answer(error_answer(
                era,
                &RpcError::new(
                    &Value::Null,
                    INVALID_REQUEST,
                    format!(
                        "Invalid Request: clients do not send JSON-RPC responses in protocol version {MODERN_VERSION}"
                    ),
                ),
            )),
            Incoming::Response => Handled::Nothing,
            Incoming::Request { id, method, params } => {
                match self.handle_request(context, &id, &method, params, slot) {
                    Ok(handled) => handled,
                    Err(error) => Handled::Answer(error_answer(era, &error)),
                }
            }
        }
    }

    fn handle_request(
        &self,
        context: &RequestContext<'_>,
        id: &Value,
        method: &str,
        params: Option<Value>,
        slot: usize,
    ) -> Result<Handled, RpcError> {
        let era = context.era;
        let params = match params {
            None => Map::new(),
            Some(Value::Object(params)) => params,
            Some(other) => {
                let message = format!("Invalid params: `params` must be an object, got {}", json_type(&other));
                return Err(RpcError::new(id, INVALID_PARAMS, message));
            }
        };
        if era == Era::Modern {
            check_modern_request(id, method, &params, context.headers)?;
        }
        let result = match (era, method) {
            (Era::Legacy(_), "initialize") if context.batch => {
                return Err(RpcError::new(
                    id,
                    INVALID_REQUEST,
                    "Invalid Request: initialize must not be part of a JSON-RPC batch",
                ))
            }
            (Era::Legacy(_), "initialize") => self.initialize(&params),
            (Era::Legacy(_), "ping") => json!({}),
            (Era::Modern, "server/discover") => return Ok(answer_raw(id, &self.discover_result)),
            (_, "tools/list") => return self.tools_list(era, id, &params),
            (_, "tools/call") => return self.call_tool(context, id, &params, slot),
            _ => return Err(method_not_found(era, id, method)),
        };
        Ok(Handled::Answer(Answer {
            status: 200,
            body: jsonrpc::encode(&jsonrpc::success(id, result)),
        }))
    }

    fn initialize(&self, params: &Map<String, Value>) -> Value {
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        let version = requested
            .and_then(|requested| LEGACY_VERSIONS.iter().find(|known| **known == requested))
            .copied()
            .unwrap_or(LEGACY_VERSIONS[0]);
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

    fn tools_list(&self, era: Era, id: &Value, params: &Map<String, Value>) -> Result<Handled, RpcError> {
        let cursor = match params.get("cursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(cursor)) => Some(cursor.as_str()),
            Some(other) => {
                let message = format!("Invalid params: `cursor` must be a string, got {}", json_type(other));
                return Err(RpcError::new(id, INVALID_PARAMS, message));
            }
        };
        let result = self.tools_list.result(era, cursor).map_err(|_| {
            RpcError::new(
                id,
                INVALID_PARAMS,
                "Invalid params: this cursor was not issued for the current tool list; list again without a cursor",
            )
        })?;
        Ok(answer_raw(id, result))
    }

    fn call_tool(
        &self,
        context: &RequestContext<'_>,
        id: &Value,
        params: &Map<String, Value>,
        slot: usize,
    ) -> Result<Handled, RpcError> {
        let era = context.era;
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err(RpcError::new(
                id,
                INVALID_PARAMS,
                "Invalid params: tools/call needs `name`, a string",
            ));
        };
        let Some(tool) = self.catalog.get(name) else {
            let message =
                format!("Invalid params: unknown tool {name:?}; call tools/list for the tools this server offers");
            return Err(RpcError::new(id, INVALID_PARAMS, message));
        };
        let empty = Value::Object(Map::new());
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => &empty,
            Some(arguments) => arguments,
        };
        let checked = match &context.duplicate_argument {
            Some(duplicate) => Err(duplicate.clone()),
            None => unwrap_arguments(tool, arguments).and_then(|arguments| {
                let input = tool.method.input();
                let message = encode_arguments(&input, arguments).map_err(|error| explain(&input, arguments, error))?;
                let limit = self.limits.max_request_message_bytes;
                if message.len() > limit {
                    let problem = format!("the arguments encode to {} bytes; the limit is {limit}", message.len());
                    return Err(ArgumentError {
                        path: ".".into(),
                        problem,
                    });
                }
                self.catalog.rules().check(&input, arguments)?;
                Ok(message)
            }),
        };
        match checked {
            Ok(message) => Ok(Handled::Call(UpstreamCall {
                tool: Rc::clone(tool),
                request_id: id.clone(),
                message,
                metadata: call_metadata(tool, context.headers),
                era,
                slot,
            })),
            Err(error) => {
                let text = format!(
                    "Invalid arguments for tool {name}: {error}. The request was not sent; fix the arguments to match the tool's inputSchema."
                );
                Ok(Handled::Answer(self.tool_result(era, id, &ToolResult::error(&text))))
            }
        }
    }

    /// Files the tool result of a finished upstream call into its reply.
    pub fn complete(&self, reply: &mut Reply, call: &UpstreamCall, grpc: GrpcReply<'_>) {
        match self.content_or_failure(call, grpc) {
            Ok(content) => self.fill(reply, call, &ToolResult::success(&content)),
            Err(text) => self.fill(reply, call, &ToolResult::error(&text)),
        }
    }

    /// The structured content of a successful call, as JSON text; or the words for a failure.
    fn content_or_failure(&self, call: &UpstreamCall, grpc: GrpcReply<'_>) -> Result<String, String> {
        if grpc.status == 0 {
            return match render_response(&call.tool.method.output(), grpc.body) {
                Ok(content) if call.tool.wrap_output => Ok(format!("{{\"{WRAPPED_VALUE}\":{content}}}")),
                Ok(content) => Ok(content),
                Err(error) => Err(format!(
                    "{} answered with a response that could not be decoded: {}",
                    rpc_name(&call.tool),
                    error.0
                )),
            };
        }
        let message = grpc.message.map(readable_message).unwrap_or_default();
        let mut text = grpc_failure_text(&call.tool, grpc.status, &message);
        if let (Some(details), Some(renderer)) = (grpc.details, &self.status_details) {
            for line in renderer.render(details) {
                text.push_str("\n- ");
                text.push_str(&line);
            }
        }
        Err(text)
    }

    /// Files the tool result of a call whose response was larger than the limit (the stream is
    /// cancelled; the response is not read).
    pub fn response_too_large(&self, reply: &mut Reply, call: &UpstreamCall, size: usize) {
        let limit = self.limits.max_response_bytes;
        let message = format!("the response has {size} bytes; the limit is {limit} (limits.max_response_bytes)");
        self.fail(reply, call, RESOURCE_EXHAUSTED, &message);
    }

    /// Files the tool result of a call whose deadline passed without an answer.
    pub fn deadline_passed(&self, reply: &mut Reply, call: &UpstreamCall) {
        let message = format!("no answer within the {} ms deadline", call.tool.timeout.as_millis());
        self.fail(reply, call, DEADLINE_EXCEEDED, &message);
    }

    /// Files the tool result of a call that could not even be started (for example, no such cluster).
    pub fn dispatch_failed(&self, reply: &mut Reply, call: &UpstreamCall, reason: &str) {
        let message = format!(
            "the call to cluster {:?} could not be started: {reason}",
            call.tool.cluster
        );
        self.fail(reply, call, UNAVAILABLE, &message);
    }

    /// Files a failure the filter itself decided on, worded like an upstream's.
    fn fail(&self, reply: &mut Reply, call: &UpstreamCall, status: u32, message: &str) {
        let text = grpc_failure_text(&call.tool, status, message);
        self.fill(reply, call, &ToolResult::error(&text));
    }

    fn fill(&self, reply: &mut Reply, call: &UpstreamCall, result: &ToolResult<'_>) {
        if let Some(slot) = reply.slots.get_mut(call.slot) {
            *slot = Some(self.tool_result(call.era, &call.request_id, result));
        }
    }

    /// A `tools/call` answer; modern results carry `resultType` and the server's identity.
    /// Written as text: every successful call comes through here, and the structured
    /// content is already JSON text.
    fn tool_result(&self, era: Era, id: &Value, result: &ToolResult<'_>) -> Answer {
        // Serializing a string cannot fail; this writes it quoted and escaped, without a copy.
        let escaped_text = serde_json::to_string(result.text).unwrap_or_default();
        let mut json = String::with_capacity(escaped_text.len() + result.structured.map_or(0, str::len) + 128);
        json.push_str(r#"{"content":[{"type":"text","text":"#);
        json.push_str(&escaped_text);
        json.push_str("}]");
        if let Some(structured) = result.structured {
            json.push_str(r#","structuredContent":"#);
            json.push_str(structured);
        }
        json.push_str(if result.structured.is_some() {
            r#","isError":false"#
        } else {
            r#","isError":true"#
        });
        if era == Era::Modern {
            json.push_str(r#","resultType":"complete","_meta":"#);
            json.push_str(&self.result_meta);
        }
        json.push('}');
        Answer {
            status: 200,
            body: jsonrpc::success_raw(id, &json),
        }
    }
}

/// The pool error details are decoded with: the embedded set, which has the `google.rpc`
/// messages. Without a `descriptor_set` the catalog's pool is that set already, and decoding it
/// again would double the start-up work of every VM.
fn details_pool(config: &PluginConfig, pool: &DescriptorPool) -> Option<DescriptorPool> {
    match config.descriptor_set {
        None => Some(pool.clone()),
        Some(_) => embedded_pool().ok(),
    }
}

/// The service's static metadata, then each forwarded header the request carries (a static
/// key is not overridden by a client).
fn call_metadata(tool: &Tool, headers: &McpHeaders) -> Vec<(String, String)> {
    let mut metadata = tool.metadata.clone();
    for (name, value) in &headers.forwarded {
        if !metadata.iter().any(|(key, _)| key == name) {
            metadata.push((name.clone(), value.clone()));
        }
    }
    metadata
}

fn discover_result(server_info: &Value, instructions: Option<&str>, ttl_ms: u64) -> String {
    let mut result = json!({
        "resultType": "complete",
        "supportedVersions": supported_versions(),
        "capabilities": {"tools": {}},
        "ttlMs": ttl_ms,
        "cacheScope": "public",
        "_meta": { SERVER_INFO_META: server_info },
    });
    if let (Some(instructions), Value::Object(map)) = (instructions, &mut result) {
        map.insert("instructions".into(), json!(instructions));
    }
    result.to_string()
}

/// The arguments the request message is read from: `arguments.value` for a wrapped root.
fn unwrap_arguments<'a>(tool: &Tool, arguments: &'a Value) -> Result<&'a Value, ArgumentError> {
    if !tool.wrap_input {
        return Ok(arguments);
    }
    let refuse = |problem: String| ArgumentError {
        path: ".".into(),
        problem,
    };
    let Value::Object(map) = arguments else {
        return Err(refuse(format!(
            "arguments must be a JSON object, got {}",
            json_type(arguments)
        )));
    };
    if let Some(unknown) = map.keys().find(|key| *key != WRAPPED_VALUE) {
        return Err(refuse(format!(
            "unknown field `{unknown}`; this tool takes only `{WRAPPED_VALUE}`"
        )));
    }
    map.get(WRAPPED_VALUE)
        .ok_or_else(|| refuse(format!("missing required field `{WRAPPED_VALUE}`")))
}

/// A duplicate key inside a single request's tool arguments, as an argument error relative
/// to the arguments; `None` when it is anywhere else.
fn argument_duplicate(duplicate: &DuplicateKey, batch: bool) -> Option<ArgumentError> {
    const ARGUMENTS: &str = "params.arguments";
    let rest = duplicate.path.strip_prefix(ARGUMENTS).filter(|_| !batch)?;
    let path = match rest {
        "" => ".".to_owned(),
        rest if rest.starts_with('[') => rest.to_owned(),
        rest => rest.strip_prefix('.')?.to_owned(),
    };
    Some(ArgumentError {
        path,
        problem: format!("duplicate key `{}`", duplicate.key),
    })
}

/// Batches are a 2025-03-26 feature, and never empty.
fn refuse_batch(era: Era, empty: bool) -> Option<RpcError> {
    let message = match era {
        Era::Legacy(BATCH_VERSION) if empty => "Invalid Request: an empty JSON-RPC batch".to_owned(),
        Era::Legacy(BATCH_VERSION) => return None,
        Era::Legacy(version) => format!(
            "Invalid Request: JSON-RPC batches are only allowed in protocol version {BATCH_VERSION}, not {version}"
        ),
        Era::Modern => format!(
            "Invalid Request: JSON-RPC batches are only allowed in protocol version {BATCH_VERSION}, not {MODERN_VERSION}"
        ),
    };
    Some(RpcError::new(&Value::Null, INVALID_REQUEST, message))
}

fn method_not_found(era: Era, id: &Value, method: &str) -> RpcError {
    let message = match (era, method) {
        (Era::Modern, "initialize" | "ping" | "logging/setLevel") => format!(
            "Method not found: {method} is not part of protocol version {MODERN_VERSION} (handshake-era versions served: {})",
            LEGACY_VERSIONS.join(", ")
        ),
        (Era::Modern, "subscriptions/listen") => "Method not found: subscriptions/listen is not served; \
             the tool list changes only when Envoy reconfigures the filter, so list again after ttlMs"
            .to_owned(),
        _ => format!("Method not found: {method}"),
    };
    RpcError::new(id, METHOD_NOT_FOUND, message)
}

fn answer_raw(id: &Value, result_json: &str) -> Handled {
    Handled::Answer(Answer {
        status: 200,
        body: jsonrpc::success_raw(id, result_json),
    })
}

fn error_answer(era: Era, error: &RpcError) -> Answer {
    Answer {
        status: era.error_status(error.code),
        body: jsonrpc::encode(&error.to_value()),
    }
}

fn respond_error(status: u16, error: &RpcError) -> Outcome {
    Outcome::Respond(HttpResponse::rpc_error(status, error))
}

fn rpc_name(tool: &Tool) -> String {
    format!("{}/{}", tool.service_name(), tool.method_name())
}

/// `Service/Method failed with gRPC status NAME (code): message`, with a readable message
/// (a wire `grpc-message` is decoded by the caller).
fn grpc_failure_text(tool: &Tool, status: u32, message: &str) -> String {
    let mut text = format!(
        "{} failed with gRPC status {} ({status})",
        rpc_name(tool),
        status_name(status)
    );
    if !message.is_empty() {
        text.push_str(": ");
        text.push_str(message);
    }
    text
}

/// A tool result: a success carries its content as JSON text, twice (as text, and as
/// `structuredContent`); an error carries only words.
struct ToolResult<'a> {
    text: &'a str,
    structured: Option<&'a str>,
}

impl<'a> ToolResult<'a> {
    fn success(content_json: &'a str) -> Self {
        ToolResult {
            text: content_json,
            structured: Some(content_json),
        }
    }

    fn error(text: &'a str) -> Self {
        ToolResult { text, structured: None }
    }
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;

//! `tools/call`: from the tool's name and arguments to the upstream call, or to a tool error
//! that names what was wrong. Arguments reach the upstream only after every check here:
//! duplicate keys, the wrapped root, the gate (the mapping table's forms, required fields,
//! oneofs), the size limit.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::rpc_response::RpcResponse;
use super::tool_result::ToolResult;
use super::{Handled, RequestContext, Server};
use crate::access::protected_resource::bearer_challenge;
use crate::access::{Caller, ProtectedResource};
use crate::catalog::{remove_argument, Tool};
use crate::config::MetadataArguments;
use crate::grpc::frame::grpc_frame;
use crate::http::McpHeaders;
use crate::jsonrpc::{RpcError, INVALID_PARAMS, INVALID_REQUEST};
use crate::observe::Observations;
use crate::proto_json::gate::ArgumentError;
use crate::proto_json::json_type;
use crate::streams::MESSAGES;
use crate::unique_keys::DuplicateKey;
use crate::upstream::UpstreamCall;
use crate::wrapped_root::unwrap_arguments;

impl Server {
    pub(super) fn call_tool(
        &self,
        context: &RequestContext<'_>,
        id: &Value,
        params: &Map<String, Value>,
        slot: usize,
        observed: &mut Observations,
    ) -> Result<Handled, RpcError> {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err(RpcError::new(
                id,
                INVALID_PARAMS,
                "Invalid params: tools/call needs `name`, a string",
            ));
        };
        if let Some(handled) = self.call_search_tool(context, id, name, params, slot, observed) {
            return handled;
        }
        // A tool outside the caller's grants answers exactly like one that does not exist,
        // unless callers are told which scopes it needs (step-up).
        let found = self.catalog.get(name);
        let tool = found.filter(|tool| context.caller.may_call(self.access.as_ref(), &tool.name));
        if let (Some(hidden), None) = (found, tool) {
            if let Some(refusal) = self.step_up(context.caller, id, hidden) {
                return Ok(Handled::Response(refusal));
            }
        }
        let Some(tool) = tool else {
            let pending = self.catalog.pending_services();
            let message = if pending.is_empty() {
                format!("Invalid params: unknown tool {name:?}; call tools/list for the tools this server offers")
            } else {
                format!(
                    "Invalid params: unknown tool {name:?}; the tools of {} are not known yet (their descriptors are being read through gRPC server reflection); call tools/list again shortly",
                    pending.join(", ")
                )
            };
            return Err(RpcError::new(id, INVALID_PARAMS, message));
        };
        let progress_token = progress_token(id, params)?;
        // A task tool's call is a task, or waits for its operation; a task asked of another
        // tool is refused before its arguments are read.
        let task = self.call_purpose(context, id, tool, params)?;
        let empty = Value::Object(Map::new());
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => &empty,
            Some(arguments) => arguments,
        };
        let checked = match &context.duplicate_argument {
            Some(duplicate) => Err(duplicate.clone()),
            None => self.request_frames(tool, arguments),
        };
        match checked {
            Ok(frames) => {
                let mut call = UpstreamCall::new(
                    Arc::clone(tool),
                    id.clone(),
                    context.era,
                    slot,
                    frames,
                    call_metadata(tool, Some(arguments), context.headers, context.caller),
                );
                call.task = task.map(Box::new);
                // Progress goes on an SSE answer to one call, when the client reads SSE.
                if !context.batch && tool.kind.receives_many() && context.headers.accepts_event_stream() {
                    call.progress_token = progress_token;
                }
                Ok(Handled::Call(call))
            }
            Err(error) => {
                observed.arguments_refused(tool, &error.path);
                let text = format!(
                    "Invalid arguments for tool {name}: {error}. The request was not sent; fix the arguments to match the tool's inputSchema."
                );
                Ok(Handled::Response(self.tool_result(
                    context.era,
                    id,
                    &ToolResult::error(&text),
                )))
            }
        }
    }

    /// The step-up answer to a verified caller whose grants do not cover `tool`, when the
    /// configuration tells callers which scopes a tool needs: HTTP 403 with an
    /// `insufficient_scope` challenge that names them (in a batch, only the JSON-RPC error).
    fn step_up(&self, caller: &Caller, id: &Value, tool: &Tool) -> Option<RpcResponse> {
        let policy = self.access.as_ref().filter(|policy| policy.challenges())?;
        if !matches!(caller, Caller::Verified { .. }) {
            return None;
        }
        let required = policy.required(&tool.name)?;
        let metadata_url = policy.protected_resource().map(ProtectedResource::metadata_url);
        let challenge = bearer_challenge(Some("insufficient_scope"), Some(&required), metadata_url);
        let message = format!(
            "Forbidden: tool {} needs the scopes \"{required}\", which the token does not grant all of; \
             ask the authorization server for a token with them, and call again",
            tool.name
        );
        let error = RpcError::new(id, INVALID_REQUEST, message);
        Some(RpcResponse::refusal(403, &error, ("www-authenticate", challenge)))
    }

    /// The request's gRPC frames, if the arguments pass every check: one message, or, for a
    /// method that takes a stream, one per item of `messages`, each checked like a unary call's
    /// arguments (a refusal names its item: `messages[3].user_id`).
    fn request_frames(&self, tool: &Tool, arguments: &Value) -> Result<Vec<u8>, ArgumentError> {
        if !tool.kind.sends_many() {
            let arguments = unwrap_arguments(tool.wrap_input, arguments)?;
            return Ok(grpc_frame(&self.request_message(tool, arguments)?));
        }
        let items = stream_items(tool, arguments)?;
        let mut frames = Vec::new();
        for (index, item) in items.iter().enumerate() {
            let message = self.request_message(tool, item).map_err(|error| ArgumentError {
                path: match error.path.as_str() {
                    "." => format!("{MESSAGES}[{index}]"),
                    path if path.starts_with('[') => format!("{MESSAGES}[{index}]{path}"),
                    path => format!("{MESSAGES}[{index}].{path}"),
                },
                ..error
            })?;
            frames.extend_from_slice(&grpc_frame(&message));
        }
        let limit = self.limits.max_request_message_bytes;
        if frames.len() > limit {
            return Err(ArgumentError {
                path: MESSAGES.into(),
                problem: format!("the messages encode to {} bytes; the limit is {limit}", frames.len()),
            });
        }
        Ok(frames)
    }

    /// One request message, protobuf-encoded, if its JSON passes every check.
    fn request_message(&self, tool: &Tool, arguments: &Value) -> Result<Vec<u8>, ArgumentError> {
        let input = tool.method.input();
        let mut message = self.catalog.gate().encode(&input, arguments)?;
        if tool.metadata_arguments == MetadataArguments::Remove {
            // Checked whole above; sent without what goes as metadata only.
            let mut kept = arguments.clone();
            for path in tool.metadata.iter().flat_map(|(_, value)| value.arguments()) {
                remove_argument(&mut kept, path);
            }
            message = self.catalog.gate().encode(&input, &kept)?;
        }
        let limit = self.limits.max_request_message_bytes;
        if message.len() > limit {
            return Err(ArgumentError {
                path: ".".into(),
                problem: format!("the arguments encode to {} bytes; the limit is {limit}", message.len()),
            });
        }
        Ok(message)
    }
}

/// The longest `params._meta.progressToken` taken, in bytes of its JSON string: every progress
/// notification repeats it, so a longer one would multiply a small request into a large answer.
pub const MAX_PROGRESS_TOKEN_BYTES: usize = 128;

/// `params._meta.progressToken`, if the request asks for progress: a string of at most
/// [`MAX_PROGRESS_TOKEN_BYTES`] bytes, or an integer.
fn progress_token(id: &Value, params: &Map<String, Value>) -> Result<Option<Value>, RpcError> {
    let Some(token) = params.get("_meta").and_then(|meta| meta.get("progressToken")) else {
        return Ok(None);
    };
    let refuse = |problem: String| {
        Err(RpcError::new(
            id,
            INVALID_PARAMS,
            format!("Invalid params: params._meta.progressToken {problem}; a progress token is a string of at most {MAX_PROGRESS_TOKEN_BYTES} bytes or an integer"),
        ))
    };
    match token {
        Value::String(text) if text.len() > MAX_PROGRESS_TOKEN_BYTES => refuse(format!("is {} bytes long", text.len())),
        Value::String(_) => Ok(Some(token.clone())),
        Value::Number(number) if number.is_i64() || number.is_u64() => Ok(Some(token.clone())),
        Value::Number(_) => refuse("is a number that is not an integer".to_owned()),
        other => refuse(format!("is {}", json_type(other))),
    }
}

/// The items of a streaming call's `messages`: an array of at most the tool's `max_messages`,
/// and nothing else beside it.
fn stream_items<'a>(tool: &Tool, arguments: &'a Value) -> Result<&'a Vec<Value>, ArgumentError> {
    let refuse = |path: &str, problem: String| ArgumentError {
        path: path.to_owned(),
        problem,
    };
    let Value::Object(object) = arguments else {
        return Err(refuse(
            ".",
            format!("expected an object with `{MESSAGES}`, got {}", json_type(arguments)),
        ));
    };
    if let Some(other) = object.keys().find(|key| key.as_str() != MESSAGES) {
        return Err(refuse(
            other,
            format!("unknown field; the arguments take `{MESSAGES}` only"),
        ));
    }
    let items = match object.get(MESSAGES) {
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(refuse(
                MESSAGES,
                format!("expected an array of messages, got {}", json_type(other)),
            ))
        }
        None => return Err(refuse(MESSAGES, "required: the request messages, in order".to_owned())),
    };
    if items.len() > tool.max_messages {
        return Err(refuse(
            MESSAGES,
            format!(
                "{} messages; the tool takes at most {} (max_messages)",
                items.len(),
                tool.max_messages
            ),
        ));
    }
    Ok(items)
}

/// The tool's metadata (the service's, and the tool's own from its `arguments`, where it has
/// them), then each forwarded header the request carries, every value of one sent more than
/// once (a configured key is not overridden by a client), then who the verified caller is
/// (`caller_metadata`, whose names nothing else may set).
pub(super) fn call_metadata(
    tool: &Tool,
    arguments: Option<&Value>,
    headers: &McpHeaders,
    caller: &Caller,
) -> Vec<(String, String)> {
    let mut metadata: Vec<(String, String)> = tool
        .metadata
        .iter()
        .filter_map(|(key, value)| Some((key.clone(), value.render(arguments)?)))
        .collect();
    let forwarded = headers
        .forwarded
        .iter()
        .filter(|(name, _)| !tool.metadata.iter().any(|(key, _)| key == name));
    metadata.extend(forwarded.cloned());
    metadata.extend(caller.metadata().iter().cloned());
    metadata
}

/// A duplicate key inside a single request's tool arguments, as an argument error relative
/// to the arguments; `None` when it is anywhere else.
pub(super) fn argument_duplicate(duplicate: &DuplicateKey, batch: bool) -> Option<ArgumentError> {
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

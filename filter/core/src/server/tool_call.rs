//! `tools/call`: from the tool's name and arguments to the upstream call, or to a tool error
//! that names what was wrong. Arguments reach the upstream only after every check here:
//! duplicate keys, the wrapped root, the gate (the mapping table's forms, required fields,
//! oneofs), the size limit.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::tool_result::ToolResult;
use super::{Handled, RequestContext, Server};
use crate::catalog::Tool;
use crate::grpc::frame::grpc_frame;
use crate::http::McpHeaders;
use crate::jsonrpc::{RpcError, INVALID_PARAMS};
use crate::observe::Observations;
use crate::proto_json::gate::ArgumentError;
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
        // A tool outside the caller's grants answers exactly like one that does not exist.
        let tool = self
            .catalog
            .get(name)
            .filter(|tool| context.caller.may_call(self.access.as_ref(), &tool.name));
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
        let empty = Value::Object(Map::new());
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => &empty,
            Some(arguments) => arguments,
        };
        let checked = match &context.duplicate_argument {
            Some(duplicate) => Err(duplicate.clone()),
            None => self.request_message(tool, arguments),
        };
        match checked {
            Ok(message) => Ok(Handled::Call(UpstreamCall::new(
                Arc::clone(tool),
                id.clone(),
                context.era,
                slot,
                grpc_frame(&message),
                call_metadata(tool, context.headers),
            ))),
            Err(error) => {
                observed.arguments_refused(tool, &error.path);
                let text = format!(
                    "Invalid arguments for tool {name}: {error}. The request was not sent; fix the arguments to match the tool's inputSchema."
                );
                Ok(Handled::Answer(self.tool_result(
                    context.era,
                    id,
                    &ToolResult::error(&text),
                )))
            }
        }
    }

    /// The request message, protobuf-encoded, if the arguments pass every check.
    fn request_message(&self, tool: &Tool, arguments: &Value) -> Result<Vec<u8>, ArgumentError> {
        let arguments = unwrap_arguments(tool.wrap_input, arguments)?;
        let input = tool.method.input();
        let message = self.catalog.gate().encode(&input, arguments)?;
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

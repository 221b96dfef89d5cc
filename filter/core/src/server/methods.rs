//! The method table: which MCP methods each protocol era serves, and their answers. A new
//! method is one line in [`Server::handle_request`] and, if it needs one, a function here.

use serde_json::{json, Map, Value};

use super::reply::RpcResponse;
use super::{Handled, RequestContext, Server};
use crate::eras::{
    check_modern_request, method_not_found, supported_versions, Era, LEGACY_VERSIONS, MODERN_VERSION, SERVER_INFO_META,
};
use crate::jsonrpc::{self, Incoming, Message, RpcError, INVALID_PARAMS, INVALID_REQUEST};
use crate::observe::Observations;
use crate::proto_json::json_type;
use crate::tasks::{TASKS_EXTENSION, TASKS_VERSION};

impl Server {
    pub(super) fn handle_message(
        &self,
        context: &RequestContext<'_>,
        message: Message,
        slot: usize,
        observed: &mut Observations,
    ) -> Handled {
        let era = context.era;
        let incoming = match jsonrpc::classify(message) {
            Ok(incoming) => incoming,
            Err(error) => return Handled::Response(RpcResponse::error(era, &error)),
        };
        match incoming {
            Incoming::Notification { method, params } => match cancelled_request(era, &method, params.as_ref()) {
                Some(request_id) => Handled::Cancel(request_id),
                None => Handled::Nothing,
            },
            Incoming::Response if era == Era::Modern => Handled::Response(RpcResponse::error(
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
                observed.request(&method);
                match self.handle_request(context, &id, &method, params, slot, observed) {
                    Ok(handled) => handled,
                    Err(error) => Handled::Response(RpcResponse::error(era, &error)),
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
        observed: &mut Observations,
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
        let answer = match (era, method) {
            (Era::Legacy(_), "initialize") if context.batch => {
                return Err(RpcError::new(
                    id,
                    INVALID_REQUEST,
                    "Invalid Request: initialize must not be part of a JSON-RPC batch",
                ))
            }
            (Era::Legacy(_), "initialize") => {
                // A session id of its own, which names the client's requests when it cancels one.
                let mut answer = RpcResponse::raw(id, &self.initialize(&params).to_string());
                answer.header = crate::session::new_session_id().map(|session_id| ("mcp-session-id", session_id));
                answer
            }
            (Era::Legacy(_), "ping") => RpcResponse::raw(id, "{}"),
            (Era::Modern, "server/discover") => RpcResponse::raw(id, &self.discover_result),
            (_, "tools/list") => self.tools_list(context, id, &params)?,
            (_, "tools/call") => return self.call_tool(context, id, &params, slot, observed),
            (_, method) if method.starts_with("tasks/") => {
                return self.task_request(context, id, method, &params, slot, observed)
            }
            _ => return Err(method_not_found(era, id, method)),
        };
        Ok(Handled::Response(answer))
    }

    fn initialize(&self, params: &Map<String, Value>) -> Value {
        let mut result = self.initialize_result(params);
        let speaks_tasks = result.get("protocolVersion").and_then(Value::as_str) == Some(TASKS_VERSION);
        // Tasks are the 2025-11-25 utility: declared to clients that speak that version.
        let capabilities = result.get_mut("capabilities").and_then(Value::as_object_mut);
        if let (true, Some(capabilities)) = (self.offers_tasks() && speaks_tasks, capabilities) {
            capabilities.insert("tasks".into(), super::tasks::legacy_capability());
        }
        result
    }

    fn initialize_result(&self, params: &Map<String, Value>) -> Value {
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

    fn tools_list(
        &self,
        context: &RequestContext<'_>,
        id: &Value,
        params: &Map<String, Value>,
    ) -> Result<RpcResponse, RpcError> {
        let era = context.era;
        let cursor = match params.get("cursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(cursor)) => Some(cursor.as_str()),
            Some(other) => {
                let message = format!("Invalid params: `cursor` must be a string, got {}", json_type(other));
                return Err(RpcError::new(id, INVALID_PARAMS, message));
            }
        };
        let invalid = |_| {
            RpcError::new(
                id,
                INVALID_PARAMS,
                "Invalid params: this cursor was not issued for the current tool list; list again without a cursor",
            )
        };
        if let Some((_, pages)) = &self.search {
            return Ok(RpcResponse::raw(id, pages.result(era, cursor).map_err(invalid)?));
        }
        match &self.access {
            None => Ok(RpcResponse::raw(
                id,
                self.tools_list.result(era, cursor).map_err(invalid)?,
            )),
            Some(_) => {
                // The tools this caller may call (or, when callers are challenged for scopes,
                // that some caller may); a cursor from another caller's list is refused like any
                // foreign cursor.
                let visible = self
                    .catalog
                    .tools()
                    .map(|tool| context.caller.lists(self.access.as_ref(), &tool.name))
                    .collect();
                let pages = self.private_lists.pages(&self.catalog, visible);
                Ok(RpcResponse::raw(id, pages.result(era, cursor).map_err(invalid)?))
            }
        }
    }
}

/// The `server/discover` result, rendered once per configuration.
pub(super) fn discover_result(server_info: &Value, instructions: Option<&str>, ttl_ms: u64, tasks: bool) -> String {
    let capabilities = match tasks {
        true => json!({"tools": {}, "extensions": {TASKS_EXTENSION: {}}}),
        false => json!({"tools": {}}),
    };
    let mut result = json!({
        "resultType": "complete",
        "supportedVersions": supported_versions(),
        "capabilities": capabilities,
        "ttlMs": ttl_ms,
        "cacheScope": "public",
        "_meta": { SERVER_INFO_META: server_info },
    });
    if let (Some(instructions), Value::Object(map)) = (instructions, &mut result) {
        map.insert("instructions".into(), json!(instructions));
    }
    result.to_string()
}

/// The request a `notifications/cancelled` names, in the handshake eras (in 2026-07-28 a client
/// cancels by closing the request's stream). A malformed one is ignored, as the spec asks.
fn cancelled_request(era: Era, method: &str, params: Option<&Value>) -> Option<Value> {
    if era == Era::Modern || method != "notifications/cancelled" {
        return None;
    }
    let request_id = params?.get("requestId")?;
    jsonrpc::is_valid_id(request_id).then(|| request_id.clone())
}

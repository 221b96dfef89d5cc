//! One JSON-RPC response, ready to go into a reply.

use serde_json::Value;

use crate::eras::Era;
use crate::jsonrpc::{self, RpcError};

/// One JSON-RPC response, ready to send, and the HTTP status it asks for when alone.
#[derive(Debug)]
pub(crate) struct RpcResponse {
    pub(crate) id: Value,
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
    /// The header a lone answer carries: the session id an `initialize` answer hands its
    /// client (`Mcp-Session-Id`), or a step-up's `WWW-Authenticate`.
    pub(crate) header: Option<(&'static str, String)>,
}

impl RpcResponse {
    /// A success whose result is already JSON text.
    pub(crate) fn raw(id: &Value, result_json: &str) -> RpcResponse {
        RpcResponse {
            id: id.clone(),
            status: 200,
            body: jsonrpc::success_raw(id, result_json),
            header: None,
        }
    }

    /// A success whose result `write_result` writes straight into the body (see
    /// [`jsonrpc::success_written`]).
    pub(crate) fn written(id: &Value, result_len: usize, write_result: impl FnOnce(&mut String)) -> RpcResponse {
        RpcResponse {
            id: id.clone(),
            status: 200,
            body: jsonrpc::success_written(id, result_len, write_result),
            header: None,
        }
    }

    /// A lone request's HTTP refusal with a JSON-RPC error, and the header that says why.
    pub(crate) fn refusal(status: u16, error: &RpcError, header: (&'static str, String)) -> RpcResponse {
        RpcResponse {
            id: error.id.clone(),
            status,
            body: jsonrpc::encode(&error.to_value()),
            header: Some(header),
        }
    }

    pub(crate) fn error(era: Era, error: &RpcError) -> RpcResponse {
        RpcResponse {
            id: error.id.clone(),
            status: era.error_status(error.code),
            body: jsonrpc::encode(&error.to_value()),
            header: None,
        }
    }
}

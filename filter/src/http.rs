//! The HTTP side of the MCP endpoint: which requests it takes, and the answers it writes.

use crate::jsonrpc::{self, RpcError};

/// What the filter does with a request, from its method and path alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Not the MCP path: the router handles it.
    PassThrough,
    /// A POST to the MCP path: read the body and answer.
    Mcp,
    /// The MCP path with another method: no GET stream and no sessions to delete here.
    MethodNotAllowed,
}

pub fn route(method: &str, path: &str, mcp_path: &str) -> Route {
    let path = path.split_once('?').map_or(path, |(path, _query)| path);
    if path != mcp_path {
        Route::PassThrough
    } else if method.eq_ignore_ascii_case("POST") {
        Route::Mcp
    } else {
        Route::MethodNotAllowed
    }
}

/// A complete local reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(&'static str, &'static str)>,
    pub body: Vec<u8>,
}

const JSON: (&str, &str) = ("content-type", "application/json");

impl HttpResponse {
    pub fn json(status: u16, body: Vec<u8>) -> Self {
        HttpResponse {
            status,
            headers: vec![JSON],
            body,
        }
    }

    pub fn rpc_error(status: u16, error: &RpcError) -> Self {
        Self::json(status, jsonrpc::error(error))
    }

    /// For notifications and client responses: accepted, nothing to say.
    pub fn accepted() -> Self {
        HttpResponse {
            status: 202,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    pub fn method_not_allowed() -> Self {
        let error = RpcError::new(
            &serde_json::Value::Null,
            jsonrpc::INVALID_REQUEST,
            "Method Not Allowed: this MCP endpoint takes POST only (no SSE stream, no sessions)",
        );
        HttpResponse {
            status: 405,
            headers: vec![JSON, ("allow", "POST")],
            body: jsonrpc::error(&error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_by_method_and_path() {
        assert_eq!(route("POST", "/mcp", "/mcp"), Route::Mcp);
        assert_eq!(route("POST", "/mcp?x=1", "/mcp"), Route::Mcp);
        assert_eq!(route("GET", "/mcp", "/mcp"), Route::MethodNotAllowed);
        assert_eq!(route("DELETE", "/mcp", "/mcp"), Route::MethodNotAllowed);
        assert_eq!(route("POST", "/mcp/x", "/mcp"), Route::PassThrough);
        assert_eq!(route("GET", "/", "/mcp"), Route::PassThrough);
    }

    #[test]
    fn method_not_allowed_says_what_is() {
        let response = HttpResponse::method_not_allowed();
        assert_eq!(response.status, 405);
        assert!(response.headers.contains(&("allow", "POST")));
    }
}

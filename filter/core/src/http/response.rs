//! The complete local replies the endpoint writes: JSON-RPC answers, and the HTTP refusals
//! before any JSON-RPC id is known.

use std::borrow::Cow;
use std::time::Duration;

use serde_json::{json, Value};

use crate::jsonrpc::{self, RpcError, INTERNAL_ERROR, INVALID_REQUEST, RATE_LIMITED};

/// A complete local reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    /// Fixed words, but for the few a request decides (`retry-after`).
    pub headers: Vec<(&'static str, Cow<'static, str>)>,
    pub body: Vec<u8>,
}

/// A retry time in whole milliseconds, rounded up (and at least 1): what `retryAfterMs` says.
pub fn retry_after_ms(time: Duration) -> u64 {
    let micros = time.as_micros();
    u64::try_from(micros.div_ceil(1000)).unwrap_or(u64::MAX).max(1)
}

const JSON: (&str, Cow<'static, str>) = ("content-type", Cow::Borrowed("application/json"));

impl HttpResponse {
    pub fn json(status: u16, body: Vec<u8>) -> Self {
        HttpResponse {
            status,
            headers: vec![JSON],
            body,
        }
    }

    pub fn rpc_error(status: u16, error: &RpcError) -> Self {
        Self::json(status, jsonrpc::encode(&error.to_value()))
    }

    /// The headers as a host hands them to Envoy.
    pub fn header_pairs(&self) -> Vec<(&str, &str)> {
        self.headers
            .iter()
            .map(|(name, value)| (*name, value.as_ref()))
            .collect()
    }

    /// A caller over its limit across every tool: 429, `Retry-After` in whole seconds
    /// (rounded up), and the time in milliseconds in the error's `data`.
    pub fn too_many_requests(id: &Value, message: &str, retry_after: Duration) -> Self {
        let retry_after_ms = retry_after_ms(retry_after);
        let error = RpcError::new(id, RATE_LIMITED, message).with_data(json!({ "retryAfterMs": retry_after_ms }));
        let mut response = Self::rpc_error(429, &error);
        let seconds = retry_after_ms.div_ceil(1000).max(1);
        response.headers.push(("retry-after", Cow::Owned(seconds.to_string())));
        response
    }

    /// An SSE stream of JSON-RPC messages (progress notifications, then a result).
    pub fn event_stream(body: Vec<u8>) -> Self {
        HttpResponse {
            status: 200,
            headers: vec![
                ("content-type", Cow::Borrowed("text/event-stream")),
                ("cache-control", Cow::Borrowed("no-cache")),
                // Proxies in front would otherwise hold the events back.
                ("x-accel-buffering", Cow::Borrowed("no")),
            ],
            body,
        }
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
        let mut response = Self::refused(
            405,
            "Method Not Allowed: this MCP endpoint takes POST only (no SSE stream to open, no session state to delete)",
        );
        response.headers.push(("allow", Cow::Borrowed("POST")));
        response
    }

    pub fn too_large(size: usize, limit: usize) -> Self {
        Self::refused(
            413,
            &format!("Payload Too Large: the request has {size} bytes; the limit is {limit}"),
        )
    }

    pub fn forbidden(message: &str) -> Self {
        Self::refused(403, message)
    }

    /// A request that carries the header tool calls are routed by: refused on every path, as
    /// JSON-RPC on the MCP path and as plain text elsewhere (a gRPC client reads a 403 as
    /// PERMISSION_DENIED).
    pub fn routing_header_refused(header: &str, on_mcp_path: bool) -> Self {
        let message = format!(
            "Forbidden: the {header} header is reserved: Switchblade sets it to route the tool calls it has checked, \
             and refuses a request that carries it"
        );
        let mut response = if on_mcp_path {
            Self::forbidden(&message)
        } else {
            HttpResponse {
                status: 403,
                headers: vec![("content-type", Cow::Borrowed("text/plain"))],
                body: message.into_bytes(),
            }
        };
        // Envoy answers a gRPC request's local reply as gRPC (trailers-only, the body as
        // `grpc-message`), with this status: PERMISSION_DENIED.
        response.headers.push(("grpc-status", Cow::Borrowed("7")));
        response
    }

    /// No verified token for this server where authorization needs one; `challenge` is the
    /// `WWW-Authenticate` value (RFC 6750: a bearer token is the way in).
    pub fn unauthorized(message: &str, challenge: Cow<'static, str>) -> Self {
        let mut response = Self::refused(401, message);
        response.headers.push(("www-authenticate", challenge));
        response
    }

    pub fn not_acceptable() -> Self {
        Self::refused(
            406,
            "Not Acceptable: this endpoint answers with application/json; include it in the Accept header",
        )
    }

    /// The filter failed in a way it did not foresee: a JSON-RPC internal error (a host that
    /// can catch a panic answers with this rather than leave the request hanging).
    pub fn internal_error() -> Self {
        Self::rpc_error(
            500,
            &RpcError::new(
                &Value::Null,
                INTERNAL_ERROR,
                "Internal error: the filter failed on this request",
            ),
        )
    }

    pub fn unsupported_media_type() -> Self {
        Self::refused(415, "Unsupported Media Type: Content-Type must be application/json")
    }

    /// An HTTP-level refusal, before any JSON-RPC id is known.
    fn refused(status: u16, message: &str) -> Self {
        Self::rpc_error(status, &RpcError::new(&Value::Null, INVALID_REQUEST, message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_not_allowed_says_what_is() {
        let response = HttpResponse::method_not_allowed();
        assert_eq!(response.status, 405);
        assert!(response.header_pairs().contains(&("allow", "POST")));
    }

    #[test]
    fn too_many_requests_says_when_to_retry_in_seconds_and_milliseconds() {
        let response = HttpResponse::too_many_requests(&json!(3), "Too Many Requests: x", Duration::from_millis(1200));
        assert_eq!(response.status, 429);
        assert!(response.header_pairs().contains(&("retry-after", "2")));
        let body: Value = serde_json::from_slice(&response.body).unwrap();
        assert_eq!(
            body,
            json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32029, "message": "Too Many Requests: x", "data": {"retryAfterMs": 1200}}})
        );
    }
}

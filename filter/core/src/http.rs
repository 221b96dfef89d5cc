//! The HTTP side of the MCP endpoint: which requests it takes, the headers it reads, and
//! the answers it writes.

use std::borrow::Cow;

use serde_json::Value;

use crate::config::Limits;
use crate::jsonrpc::{self, RpcError, INTERNAL_ERROR, INVALID_REQUEST};
use crate::observe::Refusal;

/// One header or trailer as a host hands it over: a lowercase name, and the value as bytes
/// (not always UTF-8).
pub type HeaderPair<'a> = (&'a str, &'a [u8]);

/// A header map as hosts hold it (owned names and values), as the pairs the core reads.
pub fn header_pairs(map: &[(String, Vec<u8>)]) -> Vec<HeaderPair<'_>> {
    map.iter()
        .map(|(name, value)| (name.as_str(), value.as_slice()))
        .collect()
}

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
    if !is_mcp_path(path, mcp_path) {
        Route::PassThrough
    } else if method.eq_ignore_ascii_case("POST") {
        Route::Mcp
    } else {
        Route::MethodNotAllowed
    }
}

/// Whether a request's path (with its query, if any) is the MCP endpoint's.
pub fn is_mcp_path(path: &str, mcp_path: &str) -> bool {
    path.split_once('?').map_or(path, |(path, _query)| path) == mcp_path
}

/// The request headers the MCP endpoint looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpHeaders {
    pub accept: Option<String>,
    pub content_type: Option<String>,
    pub protocol_version: Option<String>,
    pub mcp_method: Option<String>,
    pub mcp_name: Option<String>,
    /// A routing header sent more than once: readers of the first and the last copy would
    /// disagree, so the modern era refuses it.
    pub duplicated: Option<&'static str>,
    /// The request headers named in `forward_headers`, in request order (repeats kept).
    pub forwarded: Vec<(String, String)>,
    pub origin: Option<String>,
    /// `:authority` (HTTP/2) or `Host` (HTTP/1.1), as Envoy presents it.
    pub authority: Option<String>,
}

impl McpHeaders {
    /// Picks the relevant headers out of all of a request's (name, value) pairs, and those
    /// in `forward` (lowercase names) to send upstream.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>, forward: &[String]) -> Self {
        let mut headers = McpHeaders::default();
        for (name, value) in pairs {
            let name = name.to_ascii_lowercase();
            if forward.contains(&name) {
                headers.forwarded.push((name.clone(), value.to_owned()));
            }
            let (slot, routing_name) = match name.as_str() {
                "accept" => (&mut headers.accept, None),
                "origin" => (&mut headers.origin, None),
                ":authority" | "host" => (&mut headers.authority, None),
                "content-type" => (&mut headers.content_type, None),
                "mcp-protocol-version" => (&mut headers.protocol_version, Some("mcp-protocol-version")),
                "mcp-method" => (&mut headers.mcp_method, Some("mcp-method")),
                "mcp-name" => (&mut headers.mcp_name, Some("mcp-name")),
                _ => continue,
            };
            if slot.is_some() {
                if let Some(routing_name) = routing_name {
                    headers.duplicated.get_or_insert(routing_name);
                }
                continue;
            }
            *slot = Some(value.to_owned());
        }
        headers
    }

    /// The same, from the pairs as a host hands them over: values that are not UTF-8 are read
    /// with replacement characters (and so match no expected value) instead of being lost.
    pub fn from_header_pairs(pairs: &[HeaderPair<'_>], forward: &[String]) -> Self {
        // Borrowed when the value is valid UTF-8, as it almost always is.
        let values: Vec<Cow<'_, str>> = pairs.iter().map(|(_, value)| String::from_utf8_lossy(value)).collect();
        McpHeaders::from_pairs(
            pairs
                .iter()
                .zip(&values)
                .map(|((name, _), value)| (*name, value.as_ref())),
            forward,
        )
    }

    /// The POST must carry JSON (`application/json`, parameters allowed).
    pub fn content_type_is_json(&self) -> bool {
        self.content_type
            .as_deref()
            .and_then(|value| value.split(';').next())
            .is_some_and(|media_type| media_type.trim().eq_ignore_ascii_case("application/json"))
    }

    /// This endpoint always answers with `application/json`. A request without `Accept`
    /// accepts anything (RFC 9110 §12.5.1); otherwise JSON must be among the accepted types.
    pub fn accepts_json(&self) -> bool {
        let Some(accept) = self.accept.as_deref() else {
            return true;
        };
        accept.split(',').any(|range| {
            let media_range = range.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
            matches!(media_range.as_str(), "application/json" | "application/*" | "*/*")
        })
    }
}

/// Who may call: the browser origins and the host names this endpoint answers for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallerPolicy {
    pub allowed_origins: Vec<String>,
    pub allowed_hosts: Vec<String>,
}

impl CallerPolicy {
    /// Why a request may not be served (DNS-rebinding protection), if it may not.
    pub fn refusal(&self, headers: &McpHeaders) -> Option<(Refusal, String)> {
        if !self.allowed_hosts.is_empty() {
            let host = headers.authority.as_deref().unwrap_or_default().to_ascii_lowercase();
            if !self.allowed_hosts.contains(&host) {
                return Some((
                    Refusal::HostNotAllowed,
                    format!("Forbidden: host {host:?} is not served here"),
                ));
            }
        }
        let origin = headers.origin.as_deref()?;
        // Once an allowlist is set, it alone decides: an operator who lists origins means them.
        let allowed = match self.allowed_origins.is_empty() {
            true => is_same_loopback_origin(origin, headers.authority.as_deref().unwrap_or_default()),
            false => self
                .allowed_origins
                .iter()
                .any(|allowed| allowed == "*" || allowed.eq_ignore_ascii_case(origin)),
        };
        (!allowed).then(|| {
            (
                Refusal::OriginNotAllowed,
                format!("Forbidden: origin {origin:?} is not allowed to call this MCP endpoint"),
            )
        })
    }
}

/// The loopback host names a local client's page is served from.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// Whether `origin` is the loopback origin the request is addressed to (`Host`): a page served
/// from this very endpoint's loopback address, a local client. DNS rebinding cannot pass for
/// one: a rebinding page's `Origin` carries the attacker's host name.
fn is_same_loopback_origin(origin: &str, authority: &str) -> bool {
    let Some((scheme, origin_authority)) = origin.split_once("://") else {
        return false;
    };
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => "80",
        "https" => "443",
        _ => return false,
    };
    let host_and_port = |authority: &str| -> (String, String) {
        let authority = authority.to_ascii_lowercase();
        // The port follows the last colon, unless that colon is inside an IPv6 literal.
        match authority.rsplit_once(':') {
            Some((host, port)) if !port.contains(']') => (host.to_owned(), port.to_owned()),
            _ => (authority, default_port.to_owned()),
        }
    };
    let (origin_host, origin_port) = host_and_port(origin_authority);
    let (host, port) = host_and_port(authority);
    LOOPBACK_HOSTS.contains(&origin_host.as_str()) && origin_host == host && origin_port == port
}

/// Whether a POST to the MCP path is served at all, before its body is read as JSON: who may
/// call, content negotiation, and the size limit; the refusal says why, for the stats.
pub fn admit(
    headers: &McpHeaders,
    body_len: usize,
    callers: &CallerPolicy,
    limits: &Limits,
) -> Result<(), (Refusal, HttpResponse)> {
    if let Some((reason, refusal)) = callers.refusal(headers) {
        return Err((reason, HttpResponse::forbidden(&refusal)));
    }
    if !headers.accepts_json() {
        return Err((Refusal::NotAcceptable, HttpResponse::not_acceptable()));
    }
    if !headers.content_type_is_json() {
        return Err((Refusal::UnsupportedMediaType, HttpResponse::unsupported_media_type()));
    }
    if body_len > limits.max_request_bytes {
        return Err((
            Refusal::PayloadTooLarge,
            HttpResponse::too_large(body_len, limits.max_request_bytes),
        ));
    }
    Ok(())
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
        Self::json(status, jsonrpc::encode(&error.to_value()))
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
            "Method Not Allowed: this MCP endpoint takes POST only (no SSE stream, no sessions)",
        );
        response.headers.push(("allow", "POST"));
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
                headers: vec![("content-type", "text/plain")],
                body: message.into_bytes(),
            }
        };
        // Envoy answers a gRPC request's local reply as gRPC (trailers-only, the body as
        // `grpc-message`), with this status: PERMISSION_DENIED.
        response.headers.push(("grpc-status", "7"));
        response
    }

    /// No verified token where authorization needs one (RFC 6750: a bearer token is the
    /// way in).
    pub fn unauthorized(message: &str) -> Self {
        let mut response = Self::refused(401, message);
        response.headers.push(("www-authenticate", "Bearer"));
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

    #[test]
    fn reads_headers_case_insensitively_and_spots_duplicates() {
        let headers = McpHeaders::from_pairs(
            [
                ("Content-Type", "application/json"),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("Mcp-Name", "A"),
                ("x-other", "1"),
                ("Authorization", "Bearer t"),
                ("x-request-id", "r1"),
            ],
            &["authorization".to_owned(), "x-request-id".to_owned()],
        );
        assert_eq!(
            headers.forwarded,
            [
                ("authorization".to_owned(), "Bearer t".to_owned()),
                ("x-request-id".to_owned(), "r1".to_owned())
            ]
        );
        assert_eq!(headers.protocol_version.as_deref(), Some("2026-07-28"));
        assert_eq!(headers.mcp_name.as_deref(), Some("A"));
        assert_eq!(headers.duplicated, None);
        let twice = McpHeaders::from_pairs([("mcp-name", "A"), ("Mcp-Name", "B")], &[]);
        assert_eq!(
            (twice.mcp_name.as_deref(), twice.duplicated),
            (Some("A"), Some("mcp-name"))
        );
    }

    #[test]
    fn origins_and_hosts_are_checked_against_the_allowlists() {
        let with = |origin: Option<&str>, authority: &str| McpHeaders {
            origin: origin.map(Into::into),
            authority: Some(authority.into()),
            ..McpHeaders::default()
        };
        let default = CallerPolicy::default();
        assert_eq!(default.refusal(&with(None, "127.0.0.1:10000")), None, "not a browser");
        assert_eq!(
            default.refusal(&with(Some("http://evil.example"), "evil.example:10000")),
            Some((
                Refusal::OriginNotAllowed,
                "Forbidden: origin \"http://evil.example\" is not allowed to call this MCP endpoint".into()
            )),
            "a rebinding page's request is same-origin, and still refused"
        );
        let policy = CallerPolicy {
            allowed_origins: vec!["https://chat.example.com".into()],
            allowed_hosts: vec!["mcp.example.com".into(), "127.0.0.1:10000".into()],
        };
        assert_eq!(
            policy.refusal(&with(Some("https://chat.example.com"), "mcp.example.com")),
            None
        );
        assert_eq!(
            policy.refusal(&with(Some("HTTPS://CHAT.EXAMPLE.COM"), "MCP.example.com")),
            None
        );
        assert!(policy
            .refusal(&with(Some("https://chat.example.com.evil"), "mcp.example.com"))
            .is_some());
        assert_eq!(
            policy.refusal(&with(None, "evil.example:10000")),
            Some((
                Refusal::HostNotAllowed,
                "Forbidden: host \"evil.example:10000\" is not served here".into()
            ))
        );
        let open = CallerPolicy {
            allowed_origins: vec!["*".into()],
            ..CallerPolicy::default()
        };
        assert_eq!(open.refusal(&with(Some("http://anything"), "x")), None);
    }

    #[test]
    fn a_page_from_the_same_loopback_origin_is_a_local_client() {
        let with = |origin: &str, authority: &str| McpHeaders {
            origin: Some(origin.into()),
            authority: Some(authority.into()),
            ..McpHeaders::default()
        };
        let default = CallerPolicy::default();
        for (origin, authority) in [
            ("http://127.0.0.1:10000", "127.0.0.1:10000"),
            ("http://localhost:10000", "LOCALHOST:10000"),
            ("http://[::1]:10000", "[::1]:10000"),
            ("http://localhost", "localhost"),
            ("https://localhost", "localhost:443"),
        ] {
            assert_eq!(
                default.refusal(&with(origin, authority)),
                None,
                "{origin} to {authority}"
            );
        }
        for (origin, authority) in [
            ("http://127.0.0.1:8080", "127.0.0.1:10000"),
            ("http://localhost:10000", "127.0.0.1:10000"),
            ("http://127.0.0.1", "127.0.0.1:10000"),
            ("http://evil.example:10000", "evil.example:10000"),
            ("http://127.0.0.1.evil.example:10000", "127.0.0.1.evil.example:10000"),
            ("file://127.0.0.1:10000", "127.0.0.1:10000"),
            ("null", "127.0.0.1:10000"),
            ("http://[::1]", "[::1]:10000"),
        ] {
            let refusal = default.refusal(&with(origin, authority));
            assert_eq!(
                refusal.map(|(reason, _)| reason),
                Some(Refusal::OriginNotAllowed),
                "{origin} to {authority}"
            );
        }
        // An origin allowlist, once set, decides alone: the loopback page is not in it.
        let listed = CallerPolicy {
            allowed_origins: vec!["https://chat.example.com".into()],
            ..CallerPolicy::default()
        };
        let refusal = listed.refusal(&with("http://localhost:10000", "localhost:10000"));
        assert_eq!(refusal.map(|(reason, _)| reason), Some(Refusal::OriginNotAllowed));
        // A host allowlist still decides first.
        let hosts = CallerPolicy {
            allowed_hosts: vec!["mcp.example.com".into()],
            ..CallerPolicy::default()
        };
        let refusal = hosts.refusal(&with("http://localhost:10000", "localhost:10000"));
        assert_eq!(refusal.map(|(reason, _)| reason), Some(Refusal::HostNotAllowed));
    }

    #[test]
    fn content_negotiation() {
        let with = |accept: Option<&str>, content_type: Option<&str>| McpHeaders {
            accept: accept.map(Into::into),
            content_type: content_type.map(Into::into),
            ..McpHeaders::default()
        };
        assert!(with(None, Some("application/json")).content_type_is_json());
        assert!(with(None, Some("Application/JSON; charset=utf-8")).content_type_is_json());
        assert!(!with(None, Some("text/plain")).content_type_is_json());
        assert!(!with(None, None).content_type_is_json());
        assert!(with(None, None).accepts_json());
        assert!(with(Some("application/json, text/event-stream"), None).accepts_json());
        assert!(with(Some("*/*"), None).accepts_json());
        assert!(with(Some("application/*;q=0.5"), None).accepts_json());
        assert!(!with(Some("text/event-stream"), None).accepts_json());
        assert!(!with(Some("text/html"), None).accepts_json());
    }
}

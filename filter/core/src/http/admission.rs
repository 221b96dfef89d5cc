//! Whether a POST to the MCP path is served at all, before its body is read as JSON: who may
//! call (the browser origins and host names allowed), content negotiation, the size limit; and
//! every reason a request is refused at this door, as the stats count them.

use super::{HttpResponse, McpHeaders};
use crate::config::Limits;

/// Why a POST was refused before any JSON-RPC message was handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    MethodNotAllowed,
    PayloadTooLarge,
    HostNotAllowed,
    OriginNotAllowed,
    NotAcceptable,
    UnsupportedMediaType,
    /// Not JSON, nested too deep, or not JSON-RPC.
    InvalidJson,
    /// A key given twice outside tool arguments.
    DuplicateKey,
    /// An unsupported protocol version, or a header and body that disagree about it.
    ProtocolVersion,
    /// A batch where the protocol version has none, or an empty one.
    Batch,
    /// Authorization is configured and no verified token reached the filter.
    Unauthenticated,
    /// The request carries the header the module routes tool calls by, which only the
    /// module may set.
    RoutingHeader,
    /// The caller is over its rate limit across every tool (HTTP 429): refused after its
    /// messages were read, before any call was made.
    RateLimited,
}

impl Refusal {
    pub const ALL: [Refusal; 13] = [
        Refusal::MethodNotAllowed,
        Refusal::PayloadTooLarge,
        Refusal::HostNotAllowed,
        Refusal::OriginNotAllowed,
        Refusal::NotAcceptable,
        Refusal::UnsupportedMediaType,
        Refusal::InvalidJson,
        Refusal::DuplicateKey,
        Refusal::ProtocolVersion,
        Refusal::Batch,
        Refusal::Unauthenticated,
        Refusal::RoutingHeader,
        Refusal::RateLimited,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Refusal::MethodNotAllowed => "method_not_allowed",
            Refusal::PayloadTooLarge => "payload_too_large",
            Refusal::HostNotAllowed => "host_not_allowed",
            Refusal::OriginNotAllowed => "origin_not_allowed",
            Refusal::NotAcceptable => "not_acceptable",
            Refusal::UnsupportedMediaType => "unsupported_media_type",
            Refusal::InvalidJson => "invalid_json",
            Refusal::DuplicateKey => "duplicate_key",
            Refusal::ProtocolVersion => "protocol_version",
            Refusal::Batch => "batch",
            Refusal::Unauthenticated => "unauthenticated",
            Refusal::RoutingHeader => "routing_header",
            Refusal::RateLimited => "rate_limited",
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
}

//! The request headers the MCP endpoint reads.

use std::borrow::Cow;

use super::{header_text, HeaderPair};

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
    /// The client's credential, which tells its requests apart from others' when it cancels
    /// one ([`crate::cancel`]).
    pub authorization: Option<String>,
    /// `Mcp-Session-Id`: the session id a handshake-era client was handed at `initialize`.
    pub session_id: Option<String>,
}

impl McpHeaders {
    /// Picks the relevant headers out of all of a request's (name, value) pairs, and those
    /// in `forward` (lowercase names) to send upstream.
    pub fn from_pairs<'a, V: AsRef<str>>(pairs: impl IntoIterator<Item = (&'a str, V)>, forward: &[String]) -> Self {
        let mut headers = McpHeaders::default();
        for (name, value) in pairs {
            let value = value.as_ref();
            // Envoy hands names over in lowercase already: no copy then.
            let name = match name.bytes().any(|byte| byte.is_ascii_uppercase()) {
                true => Cow::Owned(name.to_ascii_lowercase()),
                false => Cow::Borrowed(name),
            };
            if forward.iter().any(|forwarded| *forwarded == name) {
                headers.forwarded.push((name.to_string(), value.to_owned()));
            }
            let (slot, routing_name) = match name.as_ref() {
                "accept" => (&mut headers.accept, None),
                "origin" => (&mut headers.origin, None),
                ":authority" | "host" => (&mut headers.authority, None),
                "content-type" => (&mut headers.content_type, None),
                "authorization" => (&mut headers.authorization, None),
                "mcp-session-id" => (&mut headers.session_id, None),
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
        let pairs = pairs.iter().map(|&(name, value)| (name, header_text(value)));
        McpHeaders::from_pairs(pairs, forward)
    }

    /// The POST must carry JSON (`application/json`, parameters allowed).
    pub fn content_type_is_json(&self) -> bool {
        self.content_type
            .as_deref()
            .and_then(|value| value.split(';').next())
            .is_some_and(|media_type| media_type.trim().eq_ignore_ascii_case("application/json"))
    }

    /// Every answer may be `application/json`. A request without `Accept` accepts anything
    /// (RFC 9110 §12.5.1); otherwise JSON must be among the accepted types.
    pub fn accepts_json(&self) -> bool {
        self.accepts(&["application/json", "application/*", "*/*"])
    }

    /// Whether an answer may be an SSE stream (progress notifications, then the result): only
    /// when the client names it, as MCP clients do (`*/*` alone does not say it reads SSE).
    pub fn accepts_event_stream(&self) -> bool {
        self.accept.is_some() && self.accepts(&["text/event-stream"])
    }

    fn accepts(&self, media_types: &[&str]) -> bool {
        let Some(accept) = self.accept.as_deref() else {
            return true;
        };
        accept.split(',').any(|range| {
            let media_range = range.split(';').next().unwrap_or_default().trim();
            media_types
                .iter()
                .any(|media_type| media_type.eq_ignore_ascii_case(media_range))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(with(Some("text/html, Application/JSON"), None).accepts_json());
        assert!(with(Some("TEXT/Event-Stream"), None).accepts_event_stream());
        assert!(!with(Some("application/json"), None).accepts_event_stream());
        assert!(!with(Some("text/event-stream"), None).accepts_json());
        assert!(!with(Some("text/html"), None).accepts_json());
    }
}

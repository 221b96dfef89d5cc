//! The HTTP side of the MCP endpoint: which requests it takes ([`route`]), the headers it reads
//! ([`McpHeaders`]), who may call and what it refuses before reading JSON ([`admit`],
//! [`Refusal`]), and the answers it writes ([`HttpResponse`]).

use std::borrow::Cow;

mod admission;
mod header_copy;
mod headers;
mod response;

pub use admission::{admit, CallerPolicy, Refusal};
pub use header_copy::{HeaderChanges, HeaderCopy, HeaderList};
pub use headers::McpHeaders;
pub use response::{retry_after_ms, HttpResponse};

/// One header or trailer as a host hands it over: a lowercase name, and the value as bytes
/// (not always UTF-8).
pub type HeaderPair<'a> = (&'a str, &'a [u8]);

/// A header value (or a path) as text: borrowed when it is UTF-8, as it almost always is, and
/// otherwise with replacement characters, so it matches no value the filter expects and is not
/// lost. Checked with `from_utf8` first: `from_utf8_lossy` walks the bytes one at a time even
/// when they are valid.
pub fn header_text(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
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
}

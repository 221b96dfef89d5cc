//! The header phase of a request: what is answered before a byte of its body is buffered (a
//! client's routing header, the protected resource metadata, a method other than POST, a
//! declared length over the limit), and the body's size as it grows.

use super::Server;
use crate::http::{header_text, is_mcp_path, route, HeaderPair, HttpResponse, McpHeaders, Refusal, Route};
use crate::observe::Observations;

impl Server {
    /// The refusal of a request that carries the routing header (`routing.cluster_header`),
    /// which only the module may set: a route that forwards by it must never be chosen by a
    /// client, around authentication, authorization and the gate. `carries` says whether the
    /// request has a header of that name; asked only when one is configured.
    pub fn refuse_routing_header(
        &self,
        path: &str,
        carries: impl FnOnce(&str) -> bool,
        observed: &mut Observations,
    ) -> Option<HttpResponse> {
        let header = self.routing.cluster_header.as_deref()?;
        if !carries(header) {
            return None;
        }
        observed.refused(Refusal::RoutingHeader);
        Some(HttpResponse::routing_header_refused(
            header,
            is_mcp_path(path, &self.mcp_path),
        ))
    }

    /// The header phase of a request to the MCP path: an answer now, before a byte of the body
    /// is buffered (a method other than POST, a declared length over the limit), or the headers
    /// the endpoint reads, to handle the body with.
    pub fn admit_headers(
        &self,
        path: &str,
        headers: &[HeaderPair<'_>],
        observed: &mut Observations,
    ) -> Result<McpHeaders, HttpResponse> {
        let text = |name: &str| {
            headers
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| header_text(value))
        };
        let method = text(":method").unwrap_or_default();
        if route(&method, path, &self.mcp_path) == Route::MethodNotAllowed {
            observed.refused(Refusal::MethodNotAllowed);
            return Err(HttpResponse::method_not_allowed());
        }
        let declared = text("content-length").and_then(|length| length.trim().parse::<usize>().ok());
        if let Some(refusal) = declared.and_then(|length| self.refuse_body_over_limit(length, observed)) {
            return Err(refusal);
        }
        Ok(McpHeaders::from_header_pairs(headers, &self.forward_headers))
    }

    /// The refusal of a body of `size` bytes (declared, or buffered so far), if it is over the
    /// limit: a body without `Content-Length` is refused as soon as it outgrows it, before
    /// Envoy's own buffer limit answers in plain text.
    pub fn refuse_body_over_limit(&self, size: usize, observed: &mut Observations) -> Option<HttpResponse> {
        let limit = self.limits.max_request_bytes;
        (size > limit).then(|| {
            observed.refused(Refusal::PayloadTooLarge);
            HttpResponse::too_large(size, limit)
        })
    }

    /// The answer to a request for the protected resource metadata (RFC 9728), if the
    /// configuration publishes it and `path` is where; `method` is asked only then.
    pub fn protected_resource_metadata(&self, path: &str, method: impl FnOnce() -> String) -> Option<HttpResponse> {
        let resource = self.access.as_ref()?.protected_resource()?;
        resource.serves(path).then(|| resource.answer(&method()))
    }
}

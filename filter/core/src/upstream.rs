//! The upstream call path, host-free: a `tools/call` becomes one HTTP/2 request that carries a
//! unary gRPC call (headers, the message in a gRPC frame, the deadline), and the HTTP response
//! that comes back (headers, body, trailers) becomes how the call ended.
//!
//! A host adapter sends [`UpstreamCall::http_headers`] and [`UpstreamCall::http_body`] to
//! [`UpstreamCall::cluster`] with [`UpstreamCall::timeout`], notes the host's token in the
//! request's [`Reply`](crate::server::Reply), and hands what came back to [`call_end`]; then it
//! files the result with [`Server::file`](crate::server::Server::file). Once no call is out,
//! the reply is ready to send.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::catalog::Tool;
use crate::eras::Era;
use crate::grpc_status::{INTERNAL, UNAVAILABLE};
use crate::http::{header_pairs, HeaderPair};

/// The length of a gRPC frame's prefix: a compression flag, then the message length.
const FRAME_PREFIX: usize = 5;
/// What of the original request a routed call keeps: route matching needs the scheme, logs
/// and traces the request id.
const ROUTED_KEEPS: [&str; 3] = [":scheme", "x-forwarded-proto", "x-request-id"];

/// The filter state key (a string: the tool's cluster) the module sets on each call it routes.
/// The route that forwards routed calls matches it as well as the cluster header: filter state
/// is written by filters only, so no client can choose that route, even where the module does
/// not know the header's name (a configuration without `routing`).
pub const ROUTED_CALL_FILTER_STATE: &str = "switchblade.routed_call";

/// How much later than the tool's deadline Envoy's router gives up on a routed call: the module
/// answers DEADLINE_EXCEEDED at the deadline itself (the router, once the upstream's headers
/// have come, could only reset the stream), and the router's timeout stays as a backstop.
const ROUTER_TIMEOUT_GRACE: Duration = Duration::from_secs(1);

/// What Envoy's router answers when a request outlives its timeout (as `grpc-message` of a
/// gRPC request).
const ENVOY_TIMEOUT_MESSAGE: &[u8] = b"upstream request timeout";

/// A validated `tools/call`, ready to send upstream.
#[derive(Debug)]
pub struct UpstreamCall {
    pub(crate) tool: Arc<Tool>,
    pub(crate) request_id: Value,
    pub(crate) era: Era,
    /// Where its result goes in the reply.
    pub(crate) slot: usize,
    /// The request message in one gRPC frame.
    frame: Vec<u8>,
    metadata: Vec<(String, String)>,
    /// When the host sent it, on the host's clock.
    pub(crate) sent_at: Option<Duration>,
}

impl UpstreamCall {
    pub(crate) fn new(
        tool: Arc<Tool>,
        request_id: Value,
        era: Era,
        slot: usize,
        frame: Vec<u8>,
        metadata: Vec<(String, String)>,
    ) -> Self {
        UpstreamCall {
            tool,
            request_id,
            era,
            slot,
            frame,
            metadata,
            sent_at: None,
        }
    }

    /// How long the call has been out at `now`; `None` if it was never sent.
    pub(crate) fn upstream_time(&self, now: Duration) -> Option<Duration> {
        self.sent_at.map(|sent_at| now.saturating_sub(sent_at))
    }

    /// The Envoy cluster that serves the method.
    pub fn cluster(&self) -> &str {
        &self.tool.cluster
    }

    /// How long the call may take: the host's timeout for it.
    pub fn timeout(&self) -> Duration {
        self.tool.timeout
    }

    /// The request headers: a unary gRPC call to the method, with the deadline as
    /// `grpc-timeout` (so the upstream can stop working on an answer nobody will read), then
    /// the gRPC metadata: the service's static metadata and the forwarded request headers.
    pub fn http_headers(&self) -> Vec<(&str, &str)> {
        let tool = &self.tool;
        let mut headers = Vec::with_capacity(6 + self.metadata.len());
        headers.extend([
            (":method", "POST"),
            (":path", tool.grpc_path.as_str()),
            (":authority", tool.cluster.as_str()),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("grpc-timeout", tool.grpc_timeout.as_str()),
        ]);
        headers.extend(self.metadata());
        headers
    }

    /// The request headers that make an MCP request this call, for Envoy's router to forward:
    /// the call's own, the router's timeout (a little past the deadline, see
    /// [`ROUTER_TIMEOUT_GRACE`]), the cluster for a route with `cluster_header`, and what the
    /// router and the access log need of the original request (scheme, request id).
    pub fn routed_headers<'a>(
        &'a self,
        cluster_header: &'a str,
        original: &[HeaderPair<'a>],
    ) -> Vec<(&'a str, Vec<u8>)> {
        let mut headers: Vec<(&str, Vec<u8>)> = self
            .http_headers()
            .into_iter()
            .map(|(name, value)| (name, value.as_bytes().to_vec()))
            .collect();
        let timeout = self.tool.timeout + ROUTER_TIMEOUT_GRACE;
        headers.push((
            "x-envoy-upstream-rq-timeout-ms",
            timeout.as_millis().to_string().into_bytes(),
        ));
        headers.push((cluster_header, self.tool.cluster.as_bytes().to_vec()));
        for (name, value) in original {
            if ROUTED_KEEPS.contains(name) && !headers.iter().any(|(known, _)| known == name) {
                headers.push((name, value.to_vec()));
            }
        }
        headers
    }

    /// The request body: the message in one gRPC frame.
    pub fn http_body(&self) -> &[u8] {
        &self.frame
    }

    /// The request message, protobuf-encoded.
    pub fn message(&self) -> &[u8] {
        self.frame.get(FRAME_PREFIX..).unwrap_or_default()
    }

    /// gRPC metadata: the service's static metadata, then the forwarded request headers.
    pub fn metadata(&self) -> impl Iterator<Item = (&str, &str)> {
        self.metadata
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
    }
}

/// `message` in one uncompressed gRPC frame.
pub(crate) fn grpc_frame(message: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(FRAME_PREFIX + message.len());
    frame.push(0);
    // A request message is bounded far below 4 GiB by `limits.max_request_message_bytes`.
    frame.extend_from_slice(&u32::try_from(message.len()).unwrap_or(u32::MAX).to_be_bytes());
    frame.extend_from_slice(message);
    frame
}

/// `grpc-timeout` in milliseconds (at most 8 digits, as the gRPC spec allows).
pub(crate) fn grpc_timeout(timeout: Duration) -> String {
    format!("{}m", timeout.as_millis().min(99_999_999))
}

/// What an upstream answered.
#[derive(Debug, Clone, Copy)]
pub struct GrpcReply<'a> {
    pub status: u32,
    /// `grpc-message` as it came (percent-encoded, maybe not even UTF-8; decoded when shown).
    pub message: Option<&'a [u8]>,
    /// The response message, protobuf-encoded.
    pub body: &'a [u8],
    /// The `grpc-status-details-bin` trailer, if the upstream sent one.
    pub details: Option<&'a [u8]>,
}

/// How a call ended.
#[derive(Debug, Clone, Copy)]
pub enum CallEnd<'a> {
    Replied(GrpcReply<'a>),
    /// The response was larger than `limits.max_response_bytes`; it is not read.
    TooLarge {
        size: usize,
    },
    /// The call's deadline passed without an answer.
    DeadlinePassed,
    /// The host could not even start the call (for example, no such cluster).
    NotStarted {
        reason: &'a str,
    },
    /// The connection failed or was reset before a whole response came.
    Reset,
    /// The response broke the gRPC protocol.
    Malformed {
        problem: &'static str,
    },
    /// An HTTP error instead of a gRPC answer (from a server that is not gRPC, or from Envoy
    /// itself when the router cannot make the call), with its body.
    HttpError {
        status: u32,
        body: &'a [u8],
    },
}

/// What has come back on one call so far, as a host hears it: in parts (headers, then data,
/// then trailers), or whole. Past the limit, the body's bytes are counted and dropped.
#[derive(Debug, Default)]
pub struct CallResponse {
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    /// The body's whole size, of which only what fits the limit is kept.
    size: usize,
    trailers: Vec<(String, Vec<u8>)>,
}

/// One part of a call's answer, as a host hears it.
#[derive(Debug)]
pub enum CallPart<'a> {
    Headers(Vec<(String, Vec<u8>)>),
    Data(&'a [u8]),
    Trailers(Vec<(String, Vec<u8>)>),
}

impl CallResponse {
    /// Adds a part; `limit` is `limits.max_response_bytes`.
    pub fn add(&mut self, part: CallPart<'_>, limit: usize) {
        match part {
            CallPart::Headers(headers) => self.headers = headers,
            CallPart::Data(data) => {
                self.size = self.size.saturating_add(data.len());
                if too_large(self.size, limit).is_none() {
                    self.body.extend_from_slice(data);
                }
            }
            CallPart::Trailers(trailers) => self.trailers = trailers,
        }
    }

    /// How the call ended, once the host says it has (`reset`: without a whole answer).
    pub fn end(&self, reset: bool, limit: usize) -> CallEnd<'_> {
        if reset {
            return CallEnd::Reset;
        }
        too_large(self.size, limit)
            .unwrap_or_else(|| call_end(&header_pairs(&self.headers), &self.body, &header_pairs(&self.trailers)))
    }

    /// The headers heard so far.
    pub fn headers(&self) -> &[(String, Vec<u8>)] {
        &self.headers
    }
}

/// The end to file instead of reading an answer whose body has `body_size` bytes, if its message
/// is larger than `limit` (`limits.max_response_bytes`).
pub fn too_large(body_size: usize, limit: usize) -> Option<CallEnd<'static>> {
    let size = body_size.saturating_sub(FRAME_PREFIX);
    (size > limit).then_some(CallEnd::TooLarge { size })
}

/// How a call ended, from the HTTP response that carried it. The status and message are in
/// the trailers, or in the headers of a trailers-only answer (which is also how Envoy answers
/// for an upstream it could not reach, or one that outlived the timeout). No headers at all
/// means the exchange broke before a response.
pub fn call_end<'a>(headers: &[HeaderPair<'a>], body: &'a [u8], trailers: &[HeaderPair<'a>]) -> CallEnd<'a> {
    match answer(headers, body, trailers) {
        Err(end) => end,
        Ok(reply) if reply.status != 0 => CallEnd::Replied(GrpcReply { body: &[], ..reply }),
        Ok(reply) => match unframe(body) {
            Ok(message) => CallEnd::Replied(GrpcReply { body: message, ..reply }),
            Err(problem) => CallEnd::Malformed { problem },
        },
    }
}

/// The gRPC status, message and details of an HTTP response, with its body as it came (gRPC
/// frames); or how the exchange ended without a gRPC status.
pub(crate) fn answer<'a>(
    headers: &[HeaderPair<'a>],
    body: &'a [u8],
    trailers: &[HeaderPair<'a>],
) -> Result<GrpcReply<'a>, CallEnd<'a>> {
    if headers.is_empty() {
        return Err(CallEnd::Reset);
    }
    let value = |name: &str| {
        let find = |pairs: &[HeaderPair<'a>]| pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| *value);
        find(trailers).or_else(|| find(headers))
    };
    let Some(status) = value("grpc-status") else {
        return Err(match value(":status").and_then(parse_u32) {
            Some(200) | None => CallEnd::Malformed {
                problem: "the upstream's answer has no grpc-status",
            },
            // Envoy's router, past the route's timeout (its answer to a request that was not gRPC
            // when it came in, as a routed call was not).
            Some(504) if body.starts_with(ENVOY_TIMEOUT_MESSAGE) => CallEnd::DeadlinePassed,
            Some(http) => CallEnd::HttpError { status: http, body },
        });
    };
    let Some(status) = parse_u32(status) else {
        return Err(CallEnd::Malformed {
            problem: "the upstream's grpc-status is not a number",
        });
    };
    let message = value("grpc-message");
    if status == UNAVAILABLE && message == Some(ENVOY_TIMEOUT_MESSAGE) {
        return Err(CallEnd::DeadlinePassed);
    }
    Ok(GrpcReply {
        status,
        message,
        body,
        details: value("grpc-status-details-bin"),
    })
}

/// Every message of a streamed response body, in order; an empty body has none.
pub(crate) fn unframe_all(mut body: &[u8]) -> Result<Vec<&[u8]>, &'static str> {
    let mut messages = Vec::new();
    while !body.is_empty() {
        let Some((prefix, rest)) = body.split_first_chunk::<FRAME_PREFIX>() else {
            return Err("the answer ends inside a gRPC frame");
        };
        let [compressed, length @ ..] = *prefix;
        if compressed != 0 {
            return Err("the answer is compressed, and no compression was offered");
        }
        let length = usize::try_from(u32::from_be_bytes(length)).unwrap_or(usize::MAX);
        let Some((message, after)) = rest.split_at_checked(length) else {
            return Err("the answer ends inside a gRPC frame");
        };
        messages.push(message);
        body = after;
    }
    Ok(messages)
}

/// The one message of a unary response.
fn unframe(body: &[u8]) -> Result<&[u8], &'static str> {
    let Some((prefix, rest)) = body.split_first_chunk::<FRAME_PREFIX>() else {
        return Err(if body.is_empty() {
            "the upstream's answer has no message"
        } else {
            "the upstream's answer ends inside a gRPC frame"
        });
    };
    let [compressed, length @ ..] = *prefix;
    if compressed != 0 {
        return Err("the upstream's answer is compressed, and no compression was offered");
    }
    let length = usize::try_from(u32::from_be_bytes(length)).unwrap_or(usize::MAX);
    match rest.len().cmp(&length) {
        std::cmp::Ordering::Less => Err("the upstream's answer ends inside a gRPC frame"),
        std::cmp::Ordering::Greater => Err("the upstream's answer has more than one message for a unary method"),
        std::cmp::Ordering::Equal => Ok(rest),
    }
}

fn parse_u32(bytes: &[u8]) -> Option<u32> {
    std::str::from_utf8(bytes).ok()?.trim().parse().ok()
}

/// The gRPC status of an HTTP status, as gRPC clients map them (grpc's
/// doc/http-grpc-status-mapping.md).
pub(crate) fn grpc_status_of_http(http: u32) -> u32 {
    match http {
        400 => INTERNAL,
        401 => 16,
        403 => 7,
        404 => 12,
        429 | 502..=504 => UNAVAILABLE,
        _ => 2,
    }
}

#[cfg(test)]
#[path = "upstream_tests.rs"]
mod tests;

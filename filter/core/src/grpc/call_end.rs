//! How a gRPC call over HTTP/2 ended, read from its response: headers, body and trailers as a
//! host hears them (in parts, or whole), the gRPC status in the trailers or in the headers of a
//! trailers-only answer, and the ways a call ends without one.

use super::frame::{unframe, FRAME_PREFIX};
use super::stream::StreamCollector;
use crate::grpc::status::UNAVAILABLE;
use crate::http::{HeaderCopy, HeaderList, HeaderPair};

/// What Envoy's router answers when a request outlives its timeout (as `grpc-message` of a
/// gRPC request).
const ENVOY_TIMEOUT_MESSAGE: &[u8] = b"upstream request timeout";

/// What an upstream answered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GrpcReply<'a> {
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
pub(crate) enum CallEnd<'a> {
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
    headers: HeaderCopy,
    body: Vec<u8>,
    /// The body's whole size, of which only what fits the limit is kept.
    size: usize,
    trailers: HeaderCopy,
    /// For a method that answers with a stream: its messages, gathered instead of a body.
    stream: Option<StreamCollector>,
}

/// What a host has read of an answer it heard whole: headers, body and trailers.
pub type WholeCallResponse = (HeaderCopy, Vec<u8>, HeaderCopy);

/// One part of a call's answer, as a host hears it.
#[derive(Debug)]
pub enum CallPart<'a> {
    Headers(HeaderCopy),
    Data(&'a [u8]),
    /// One whole message, from a host that reads gRPC frames itself.
    Message(&'a [u8]),
    Trailers(HeaderCopy),
}

impl CallResponse {
    /// The response of a call to a method that answers with a stream, gathered within its
    /// bounds.
    pub fn streamed(max_messages: usize, max_bytes: usize) -> Self {
        CallResponse {
            stream: Some(StreamCollector::new(max_messages, max_bytes)),
            ..CallResponse::default()
        }
    }

    /// Adds a part; `limit` is `limits.max_response_bytes`. How many stream messages it
    /// completed (none for a unary answer).
    pub fn add(&mut self, part: CallPart<'_>, limit: usize) -> usize {
        // An HTTP error's body (Envoy's own words, say) is not a stream of messages.
        let http_ok = self
            .headers
            .iter()
            .any(|(name, value)| name == ":status" && value == b"200");
        match (part, self.stream.as_mut().filter(|_| http_ok)) {
            (CallPart::Headers(headers), _) => self.headers = headers,
            (CallPart::Trailers(trailers), _) => self.trailers = trailers,
            (CallPart::Data(data), Some(stream)) => return stream.feed(data),
            (CallPart::Message(message), Some(stream)) => return usize::from(stream.push(message)),
            (CallPart::Data(data), None) => {
                self.size = self.size.saturating_add(data.len());
                if too_large(self.size, limit).is_none() {
                    self.body.extend_from_slice(data);
                }
            }
            (CallPart::Message(message), None) => {
                self.size = self.size.saturating_add(message.len() + FRAME_PREFIX);
                if too_large(self.size, limit).is_none() {
                    self.body.extend_from_slice(&super::frame::grpc_frame(message));
                }
            }
        }
        0
    }

    /// Whether a message of `size` bytes, not yet read, would be kept (see
    /// [`StreamCollector::admits`]); an answer that is not a stream takes it whole.
    pub fn admits_message(&mut self, size: usize) -> bool {
        self.stream.as_mut().is_none_or(|stream| stream.admits(size))
    }

    /// Spends `bytes` of a stream's bound on what the answer carries beside its messages (see
    /// [`StreamCollector::spend`]).
    pub fn spend(&mut self, bytes: usize) -> bool {
        self.stream.as_mut().is_none_or(|stream| stream.spend(bytes))
    }

    /// How the call ended, once the host says it has (`reset`: without a whole answer). For a
    /// stream, how it closed: its status, or the failure that ended it (the messages are in
    /// [`Self::stream`]).
    pub(crate) fn end(&self, reset: bool, limit: usize) -> CallEnd<'_> {
        if reset {
            return CallEnd::Reset;
        }
        let (headers, trailers) = (self.headers.pairs(), self.trailers.pairs());
        if self.stream.is_some() {
            return match answer(&headers, &self.body, &trailers) {
                Ok(reply) => CallEnd::Replied(GrpcReply { body: &[], ..reply }),
                Err(end) => end,
            };
        }
        too_large(self.size, limit).unwrap_or_else(|| call_end(&headers, &self.body, &trailers))
    }

    /// The messages of a stream gathered so far; `None` for a unary answer.
    pub fn stream(&self) -> Option<&StreamCollector> {
        self.stream.as_ref()
    }

    /// The headers the answer came with, without a copy.
    pub fn into_headers(self) -> HeaderCopy {
        self.headers
    }

    /// The body's whole size, kept or not.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Headers, the body kept, and trailers, for a reader of the whole answer.
    pub(crate) fn parts(&self) -> (HeaderList<HeaderPair<'_>>, &[u8], HeaderList<HeaderPair<'_>>) {
        (self.headers.pairs(), &self.body, self.trailers.pairs())
    }
}

/// The end to file instead of reading an answer whose body has `body_size` bytes, if its message
/// is larger than `limit` (`limits.max_response_bytes`).
pub(crate) fn too_large(body_size: usize, limit: usize) -> Option<CallEnd<'static>> {
    let size = body_size.saturating_sub(FRAME_PREFIX);
    (size > limit).then_some(CallEnd::TooLarge { size })
}

/// How a call ended, from the HTTP response that carried it. The status and message are in
/// the trailers, or in the headers of a trailers-only answer (which is also how Envoy answers
/// for an upstream it could not reach, or one that outlived the timeout). No headers at all
/// means the exchange broke before a response.
pub(crate) fn call_end<'a>(headers: &[HeaderPair<'a>], body: &'a [u8], trailers: &[HeaderPair<'a>]) -> CallEnd<'a> {
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

fn parse_u32(bytes: &[u8]) -> Option<u32> {
    std::str::from_utf8(bytes).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc;
    use std::time::Duration;

    use crate::grpc::frame::grpc_frame;
    use crate::grpc::status::{of_http, UNAVAILABLE};

    const OK_HEADERS: &[HeaderPair<'static>] = &[(":status", b"200"), ("content-type", b"application/grpc")];

    fn replied(end: CallEnd<'_>) -> GrpcReply<'_> {
        match end {
            CallEnd::Replied(reply) => reply,
            other => panic!("not a reply: {other:?}"),
        }
    }

    #[test]
    fn frames_and_timeouts_are_written_as_grpc_wants_them() {
        assert_eq!(grpc_frame(&[0x08, 7]), [0, 0, 0, 0, 2, 0x08, 7]);
        assert_eq!(grpc_frame(&[]), [0, 0, 0, 0, 0]);
        assert_eq!(grpc::timeout(Duration::from_millis(1500)), "1500m");
        assert_eq!(grpc::timeout(Duration::from_secs(10)), "10000m");
        assert_eq!(grpc::timeout(Duration::from_secs(1_000_000)), "99999999m");
    }

    #[test]
    fn a_success_carries_the_one_message() {
        let reply = replied(call_end(
            OK_HEADERS,
            &[0, 0, 0, 0, 2, 0x08, 7],
            &[("grpc-status", b"0")],
        ));
        assert_eq!(
            (reply.status, reply.body, reply.message, reply.details),
            (0, [0x08, 7].as_slice(), None, None)
        );
        let empty = replied(call_end(OK_HEADERS, &[0, 0, 0, 0, 0], &[("grpc-status", b"0")]));
        assert_eq!((empty.status, empty.body), (0, [].as_slice()));
    }

    #[test]
    fn failures_come_from_the_trailers_or_a_trailers_only_answer() {
        let trailers: &[HeaderPair<'_>] = &[
            ("grpc-status", b"5"),
            ("grpc-message", b"caf\xe9 %41"),
            ("grpc-status-details-bin", b"CAU"),
        ];
        let reply = replied(call_end(OK_HEADERS, &[], trailers));
        assert_eq!(
            (reply.status, reply.message, reply.details),
            (5, Some(b"caf\xe9 %41".as_slice()), Some(b"CAU".as_slice()))
        );
        let trailers_only: &[HeaderPair<'_>] = &[
            (":status", b"200"),
            ("grpc-status", b"14"),
            ("grpc-message", b"no healthy upstream"),
        ];
        let reply = replied(call_end(trailers_only, &[], &[]));
        assert_eq!(
            (reply.status, reply.message),
            (14, Some(b"no healthy upstream".as_slice()))
        );
        // The trailers win over a header of the same name.
        let reply = replied(call_end(
            &[(":status", b"200"), ("grpc-status", b"0")],
            &[],
            &[("grpc-status", b"3")],
        ));
        assert_eq!(reply.status, 3);
    }

    #[test]
    fn envoys_own_timeout_is_the_deadline() {
        let timed_out: &[HeaderPair<'_>] = &[
            (":status", b"200"),
            ("grpc-status", b"14"),
            ("grpc-message", b"upstream request timeout"),
        ];
        assert!(matches!(call_end(timed_out, &[], &[]), CallEnd::DeadlinePassed));
    }

    #[test]
    fn no_response_is_a_reset_and_an_http_error_maps_to_a_grpc_status() {
        assert!(matches!(call_end(&[], &[], &[]), CallEnd::Reset));
        assert!(matches!(
            call_end(&[(":status", b"503")], b"no healthy upstream", &[]),
            CallEnd::HttpError {
                status: 503,
                body: b"no healthy upstream"
            }
        ));
        assert_eq!(of_http(503), UNAVAILABLE);
        assert_eq!(of_http(404), 12);
        assert_eq!(of_http(418), 2);
        // Envoy's router past the route's timeout, for a request that was not gRPC when it came.
        assert!(matches!(
            call_end(&[(":status", b"504")], b"upstream request timeout", &[]),
            CallEnd::DeadlinePassed
        ));
    }

    #[test]
    fn broken_answers_are_malformed() {
        type Case<'a> = (&'a [HeaderPair<'a>], &'a [u8], &'a [HeaderPair<'a>], &'a str);
        let cases: [Case<'_>; 6] = [
            (OK_HEADERS, &[0, 0, 0, 0, 2, 0x08, 7], &[], "no grpc-status"),
            (
                OK_HEADERS,
                &[0, 0, 0, 0, 2, 0x08, 7],
                &[("grpc-status", b"OK")],
                "not a number",
            ),
            (OK_HEADERS, &[], &[("grpc-status", b"0")], "has no message"),
            (
                OK_HEADERS,
                &[0, 0, 0],
                &[("grpc-status", b"0")],
                "ends inside a gRPC frame",
            ),
            (OK_HEADERS, &[1, 0, 0, 0, 1, 9], &[("grpc-status", b"0")], "compressed"),
            (
                OK_HEADERS,
                &[0, 0, 0, 0, 1, 9, 0, 0, 0, 0, 0],
                &[("grpc-status", b"0")],
                "more than one message",
            ),
        ];
        for (headers, body, trailers, expected) in cases {
            match call_end(headers, body, trailers) {
                CallEnd::Malformed { problem } => assert!(problem.contains(expected), "{problem}"),
                other => panic!("{expected}: {other:?}"),
            }
        }
        let truncated = call_end(OK_HEADERS, &[0, 0, 0, 0, 9, 1], &[("grpc-status", b"0")]);
        assert!(matches!(truncated, CallEnd::Malformed { problem } if problem.contains("ends inside")));
    }
}

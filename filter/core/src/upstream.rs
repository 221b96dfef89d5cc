//! The upstream call path, host-free: what a host sends for a `tools/call` (the gRPC method on
//! a cluster, the request message, its metadata and deadline), how it reports what came back,
//! and the bookkeeping of the calls one request has out.
//!
//! A host adapter starts each [`UpstreamCall`] however its host calls gRPC, notes its token in
//! the request's [`Reply`](crate::server::Reply), and files how it ended (a [`CallEnd`]) with
//! [`Server::file`](crate::server::Server::file); once no call is out, the reply is ready to
//! send. [`Deadlines`] holds the deadline of every call in flight, for hosts whose calls have no
//! timeout of their own.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::catalog::Tool;
use crate::eras::Era;

/// A validated `tools/call`, ready to send upstream.
#[derive(Debug)]
pub struct UpstreamCall {
    pub(crate) tool: Arc<Tool>,
    pub(crate) request_id: Value,
    pub(crate) era: Era,
    /// Where its result goes in the reply.
    pub(crate) slot: usize,
    message: Vec<u8>,
    metadata: Vec<(String, String)>,
}

impl UpstreamCall {
    pub(crate) fn new(
        tool: Arc<Tool>,
        request_id: Value,
        era: Era,
        slot: usize,
        message: Vec<u8>,
        metadata: Vec<(String, String)>,
    ) -> Self {
        UpstreamCall {
            tool,
            request_id,
            era,
            slot,
            message,
            metadata,
        }
    }

    /// The Envoy cluster that serves the method.
    pub fn cluster(&self) -> &str {
        &self.tool.cluster
    }

    /// The fully qualified gRPC service name, as sent on the wire.
    pub fn service(&self) -> &str {
        self.tool.service_name()
    }

    pub fn method(&self) -> &str {
        self.tool.method_name()
    }

    /// The request message, protobuf-encoded.
    pub fn message(&self) -> &[u8] {
        &self.message
    }

    /// gRPC metadata: the service's static metadata, then the forwarded request headers.
    pub fn metadata(&self) -> impl Iterator<Item = (&str, &str)> {
        self.metadata
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
    }

    /// How long the call may take.
    pub fn timeout(&self) -> Duration {
        self.tool.timeout
    }

    /// The deadline as a `grpc-timeout` header value, so the upstream can stop working on an
    /// answer nobody will read.
    pub fn grpc_timeout(&self) -> String {
        grpc_timeout(self.tool.timeout)
    }
}

/// `grpc-timeout` in milliseconds (at most 8 digits, as the gRPC spec allows).
fn grpc_timeout(timeout: Duration) -> String {
    format!("{}m", timeout.as_millis().min(99_999_999))
}

/// What an upstream answered.
#[derive(Debug, Clone, Copy)]
pub struct GrpcReply<'a> {
    pub status: u32,
    /// `grpc-message` as it came (percent-encoded on the wire; decoded when it is shown).
    pub message: Option<&'a str>,
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
}

/// What has come back on a call so far, for hosts that deliver an answer in parts.
#[derive(Debug, Default)]
pub struct Received {
    pub message: Option<Vec<u8>>,
    pub details: Option<Vec<u8>>,
    pub grpc_message: Option<Vec<u8>>,
}

/// The deadlines of the calls in flight, for hosts whose calls have no timeout of their own:
/// the host looks for overdue calls on a timer and ends them.
#[derive(Debug)]
pub struct Deadlines<T> {
    entries: Vec<(SystemTime, T)>,
}

impl<T> Default for Deadlines<T> {
    fn default() -> Self {
        Deadlines { entries: Vec::new() }
    }
}

impl<T> Deadlines<T> {
    pub fn add(&mut self, at: SystemTime, call: T) {
        self.entries.push((at, call));
    }

    /// Takes out every call whose deadline is `now` or earlier.
    pub fn take_overdue(&mut self, now: SystemTime) -> Vec<T> {
        // Every tick asks; almost every time the answer is none, so that costs no allocation.
        if !self.entries.iter().any(|(at, _)| *at <= now) {
            return Vec::new();
        }
        let (overdue, pending) = std::mem::take(&mut self.entries)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        self.entries = pending;
        overdue.into_iter().map(|(_, call)| call).collect()
    }

    /// Forgets the calls `ended` picks (they ended before their deadline).
    pub fn forget(&mut self, ended: impl Fn(&T) -> bool) {
        self.entries.retain(|(_, call)| !ended(call));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_is_milliseconds_in_at_most_eight_digits() {
        assert_eq!(grpc_timeout(Duration::from_millis(1500)), "1500m");
        assert_eq!(grpc_timeout(Duration::from_secs(10)), "10000m");
        assert_eq!(grpc_timeout(Duration::from_secs(1_000_000)), "99999999m");
    }

    #[test]
    fn deadlines_give_up_only_the_overdue_calls() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let mut deadlines = Deadlines::default();
        deadlines.add(start + Duration::from_millis(100), "a");
        deadlines.add(start + Duration::from_millis(300), "b");
        deadlines.add(start + Duration::from_millis(200), "c");
        assert!(deadlines.take_overdue(start + Duration::from_millis(99)).is_empty());
        assert_eq!(deadlines.take_overdue(start + Duration::from_millis(200)), ["a", "c"]);
        deadlines.add(start + Duration::from_millis(400), "d");
        deadlines.forget(|call| *call == "b");
        assert_eq!(deadlines.take_overdue(start + Duration::from_secs(60)), ["d"]);
    }
}

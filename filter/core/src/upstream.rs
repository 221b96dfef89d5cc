//! A tool's upstream call, host-free: a `tools/call` becomes one HTTP/2 request that carries a
//! unary gRPC call (headers, the message in a gRPC frame, the deadline), or, where the module
//! routes it, the MCP request itself rewritten into that call.
//!
//! A host sends [`UpstreamCall::http_headers`] and [`UpstreamCall::http_body`] to
//! [`UpstreamCall::cluster`] with [`UpstreamCall::timeout`], through the host contract of
//! [`crate::server::calls`]; how the call ended is read by [`crate::grpc::call_end`].

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::catalog::Tool;
use crate::eras::Era;
use crate::grpc::frame::unframe_all;
use crate::http::{HeaderList, HeaderPair};
use crate::quota::counters::Lease;
use crate::streams::CallKind;
use crate::tasks::step::TaskStep;

/// What of the original request a routed call keeps: route matching needs the scheme, logs
/// and traces the request id.
const ROUTED_KEEPS: [&str; 3] = [":scheme", "x-forwarded-proto", "x-request-id"];

/// The filter state key (a string: the tool's cluster) the module sets on each call it routes.
/// The route that forwards routed calls matches it as well as the cluster header: filter state
/// is written by filters only, so no client can choose that route, even where the module does
/// not know the header's name (a configuration without `routing`).
pub const ROUTED_CALL_FILTER_STATE: &str = "switchblade.routed_call";

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
    /// The request's `_meta.progressToken`, when the answer may be an SSE stream that carries a
    /// progress notification per message gathered (a lone call of a streaming tool).
    pub(crate) progress_token: Option<Value>,
    /// The rate limit service's check this call waits for: while it is set, the host starts
    /// the check in the call's place (a unary call to the service's cluster), and the call
    /// itself once the check lets it go.
    pub(crate) check: Option<Box<RateLimitCheck>>,
    /// The call's place among its rule's calls in flight, given back when the call is dropped.
    pub(crate) lease: Option<Box<Lease>>,
    /// Where the call goes when it is not the tool's own method: a task's call to the
    /// Operations service.
    redirect: Option<Box<Redirect>>,
    /// A call in a task's life, and what its end leads to (see `server/tasks`).
    pub(crate) task: Option<Box<TaskStep>>,
}

/// A unary call to another method than the tool's (`google.longrunning.Operations`, or the
/// rate limit service's `ShouldRateLimit`), on the cluster that serves it, with a deadline of
/// its own.
#[derive(Debug)]
pub(crate) struct Redirect {
    pub(crate) cluster: String,
    pub(crate) service: &'static str,
    pub(crate) method: &'static str,
    /// `/package.Service/Method`.
    pub(crate) path: &'static str,
    pub(crate) timeout: Duration,
    pub(crate) grpc_timeout: String,
}

/// One `ShouldRateLimit` call: where it goes, and its gRPC frame.
#[derive(Debug)]
pub(crate) struct RateLimitCheck {
    pub(crate) target: Redirect,
    pub(crate) frame: Vec<u8>,
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
            progress_token: None,
            check: None,
            lease: None,
            redirect: None,
            task: None,
        }
    }

    /// A call that follows this one for the same request and slot (the next step of a task),
    /// with the same metadata: `message` to the method `redirect` names.
    pub(crate) fn follow_up(&self, message: &[u8], redirect: Redirect, task: TaskStep) -> UpstreamCall {
        UpstreamCall {
            redirect: Some(Box::new(redirect)),
            task: Some(Box::new(task)),
            ..UpstreamCall::new(
                Arc::clone(&self.tool),
                self.request_id.clone(),
                self.era,
                self.slot,
                crate::grpc::frame::grpc_frame(message),
                self.metadata.clone(),
            )
        }
    }

    /// Makes this call a redirected one (a task's first poll, planned from a task id).
    pub(crate) fn redirected(mut self, redirect: Redirect, task: TaskStep) -> UpstreamCall {
        self.redirect = Some(Box::new(redirect));
        self.task = Some(Box::new(task));
        self
    }

    /// How long the call has been out at `now`; `None` if it was never sent.
    pub(crate) fn upstream_time(&self, now: Duration) -> Option<Duration> {
        self.sent_at.map(|sent_at| now.saturating_sub(sent_at))
    }

    /// Whether the host is to start the rate limit service's check in this call's place.
    pub fn is_rate_limit_check(&self) -> bool {
        self.check.is_some()
    }

    /// Whether the call is a task's call to the Operations service (not the tool's method).
    pub(crate) fn polls_operation(&self) -> bool {
        self.redirect.is_some()
    }

    /// Whether the call is a step of a task (which a host never makes the request itself: its
    /// answer leads to more calls).
    pub fn is_task_step(&self) -> bool {
        self.task.is_some()
    }

    /// Where the call goes when it is not the tool's own method: the rate limit check first,
    /// while it is pending, then a task's call to the Operations service.
    fn redirect(&self) -> Option<&Redirect> {
        match (&self.check, &self.redirect) {
            (Some(check), _) => Some(&check.target),
            (None, redirect) => redirect.as_deref(),
        }
    }

    /// The Envoy cluster that serves the method (or the rate limit service).
    pub fn cluster(&self) -> &str {
        match self.redirect() {
            Some(redirect) => &redirect.cluster,
            None => &self.tool.cluster,
        }
    }

    /// How long the call may take: the host's timeout for it (for a stream of answers, the
    /// window in which they are gathered).
    pub fn timeout(&self) -> Duration {
        match self.redirect() {
            Some(redirect) => redirect.timeout,
            None => self.tool.timeout,
        }
    }

    /// How the method streams (a redirected call is unary).
    pub fn kind(&self) -> CallKind {
        match self.redirect() {
            Some(_) => CallKind::Unary,
            None => self.tool.kind,
        }
    }

    /// The request messages, one per frame, for a host that frames them itself (a gRPC
    /// stream): one for a unary request, the items of `messages` for a stream.
    pub fn request_messages(&self) -> Vec<&[u8]> {
        // The frames are the core's own, well formed.
        unframe_all(self.http_body()).unwrap_or_default()
    }

    /// The gRPC service and method, as a host's gRPC client names them.
    pub fn service_and_method(&self) -> (&str, &str) {
        match self.redirect() {
            Some(redirect) => (redirect.service, redirect.method),
            None => (self.tool.service_name(), self.tool.method_name()),
        }
    }

    /// The deadline as `grpc-timeout`.
    pub fn grpc_timeout(&self) -> &str {
        match self.redirect() {
            Some(redirect) => &redirect.grpc_timeout,
            None => &self.tool.grpc_timeout,
        }
    }

    /// `/package.Service/Method`.
    fn grpc_path(&self) -> &str {
        match self.redirect() {
            Some(redirect) => redirect.path,
            None => &self.tool.grpc_path,
        }
    }

    /// The request headers: a unary gRPC call to the method, with the deadline as
    /// `grpc-timeout` (so the upstream can stop working on an answer nobody will read), then
    /// the gRPC metadata: the service's static metadata and the forwarded request headers. A
    /// rate limit check carries no metadata of the client's.
    pub fn http_headers(&self) -> HeaderList<(&str, &str)> {
        let mut headers = HeaderList::new();
        headers.extend([
            (":method", "POST"),
            (":path", self.grpc_path()),
            (":authority", self.cluster()),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("grpc-timeout", self.grpc_timeout()),
        ]);
        if self.check.is_none() {
            headers.extend(self.metadata());
        }
        headers
    }

    /// The request headers that make an MCP request this call, for Envoy's router to forward:
    /// the call's own, the router's timeout (the tool's, written once), the cluster for a route
    /// with `cluster_header`, and what the router and the access log need of the original
    /// request (scheme, request id).
    pub fn routed_headers<'a>(
        &'a self,
        cluster_header: &'a str,
        original: impl IntoIterator<Item = HeaderPair<'a>>,
    ) -> HeaderList<(&'a str, &'a [u8])> {
        let mut headers: HeaderList<(&str, &[u8])> = self
            .http_headers()
            .into_iter()
            .map(|(name, value)| (name, value.as_bytes()))
            .collect();
        headers.push(("x-envoy-upstream-rq-timeout-ms", self.tool.router_timeout_ms.as_bytes()));
        headers.push((cluster_header, self.tool.cluster.as_bytes()));
        for (name, value) in original {
            if ROUTED_KEEPS.contains(&name) && !headers.iter().any(|(known, _)| *known == name) {
                headers.push((name, value));
            }
        }
        headers
    }

    /// The request body: the message in one gRPC frame.
    pub fn http_body(&self) -> &[u8] {
        match &self.check {
            Some(check) => &check.frame,
            None => &self.frame,
        }
    }

    /// The request message, protobuf-encoded.
    #[cfg(test)]
    pub(crate) fn message(&self) -> &[u8] {
        self.http_body()
            .get(crate::grpc::frame::FRAME_PREFIX..)
            .unwrap_or_default()
    }

    /// The metadata for a host's gRPC client, which keeps no deadline itself: the call's, and
    /// the deadline as `grpc-timeout` so that the upstream can stop too.
    pub fn stream_metadata(&self) -> Vec<(&str, &[u8])> {
        self.metadata()
            .chain([("grpc-timeout", self.grpc_timeout())])
            .map(|(name, value)| (name, value.as_bytes()))
            .collect()
    }

    /// gRPC metadata: the service's static metadata, then the forwarded request headers.
    pub fn metadata(&self) -> impl Iterator<Item = (&str, &str)> {
        self.metadata
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
    }
}

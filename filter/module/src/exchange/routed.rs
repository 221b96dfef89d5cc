//! A call the module routes: the request itself becomes the gRPC call, forwarded by Envoy's
//! router; its answer is read as it comes and rewritten into the tool result, or answered at
//! the deadline by the module's own clock.

use std::time::Instant;

use switchblade_core::host_api::{CallPart, HeaderList, UpstreamCall, ROUTED_CALL_FILTER_STATE};

use super::{rewrite, Exchange, HookStatus, DEADLINE_PASSED};
use crate::host::{Body, HeaderMap, StreamHost};

impl Exchange {
    /// Makes the request the gRPC call: its headers become the call's (and those Envoy needs to
    /// route and log it), its body the gRPC frame, written where Envoy holds the body; Envoy's
    /// router forwards it.
    pub(super) fn route_call(&self, host: &impl StreamHost, call: &UpstreamCall, cluster_header: &str) {
        if let Some(request_map) = &*self.request_map.borrow() {
            // What the call keeps as it came (the method, the scheme, the request id) is not
            // written again.
            let routed = call.routed_headers(cluster_header, request_map.iter());
            rewrite(host, HeaderMap::Request, request_map, &routed);
        }
        let body = call.http_body();
        let held = self.held.get();
        // The frame goes where the body is: Envoy's buffer if it kept one (and the last chunk is
        // emptied if it held the rest), else this chunk. HTTP/1.1 ends a body with an empty
        // chunk, which is left alone.
        if held.buffered {
            if held.last_chunk {
                host.drain_body(Body::ReceivedRequest);
            }
            host.replace_body(Body::BufferedRequest, body);
        } else {
            host.replace_body(Body::ReceivedRequest, body);
        }
        if !host.set_filter_state(ROUTED_CALL_FILTER_STATE, call.cluster()) {
            log::warn!("Envoy refused {ROUTED_CALL_FILTER_STATE}; a route that matches it will not forward this call");
        }
        host.clear_route_cache();
        // The deadline holds after the upstream's headers too, when Envoy's router could only
        // reset the stream: the module answers DEADLINE_EXCEEDED itself.
        *self.deadline.borrow_mut() = host.wake_at(Instant::now() + call.timeout(), DEADLINE_PASSED);
    }

    /// Whether the request was made the call (and is not in the middle of an event: a local
    /// reply sent from inside one runs the response hooks, and is not the call's answer).
    fn is_routed(&self) -> bool {
        self.core.try_borrow().is_ok_and(|core| core.is_routed())
    }

    fn routed_heard(&self, part: CallPart<'_>) {
        if let Ok(mut core) = self.core.try_borrow_mut() {
            core.routed_heard(self.server(), part);
        }
    }

    pub fn response_headers(&self, host: &impl StreamHost, end_of_stream: bool) -> HookStatus {
        if !self.is_routed() {
            return HookStatus::Continue;
        }
        self.routed_heard(CallPart::Headers(host.headers(HeaderMap::Response)));
        if end_of_stream {
            // A trailers-only answer, or Envoy's own for a call it could not make.
            return self.finish_routed(host, Body::BufferedResponse);
        }
        HookStatus::Stop
    }

    pub fn response_body(&self, host: &impl StreamHost, end_of_stream: bool) -> HookStatus {
        if !self.is_routed() {
            return HookStatus::Continue;
        }
        // Copied out and drained at once, so that Envoy's buffer limit (which would answer a
        // plain 500) never applies: `limits.max_response_bytes` does.
        let data = host.body(Body::ReceivedResponse);
        host.drain_body(Body::ReceivedResponse);
        self.routed_heard(CallPart::Data(&data));
        if end_of_stream {
            return self.finish_routed(host, Body::ReceivedResponse);
        }
        HookStatus::Drop
    }

    pub fn response_trailers(&self, host: &impl StreamHost) -> HookStatus {
        if !self.is_routed() {
            return HookStatus::Continue;
        }
        let trailers = host.headers(HeaderMap::ResponseTrailers);
        rewrite::<&[u8]>(host, HeaderMap::ResponseTrailers, &trailers, &[]);
        self.routed_heard(CallPart::Trailers(trailers));
        self.finish_routed(host, Body::BufferedResponse)
    }

    /// The routed call's answer is whole: it becomes the tool result, in place of the
    /// upstream's answer. It is written to `body`: the chunk of a body hook, or Envoy's buffer
    /// from a hook with no chunk (headers or trailers), which Envoy then sends.
    fn finish_routed(&self, host: &impl StreamHost, body: Body) -> HookStatus {
        self.deadline.replace(None);
        let answer = self.run(host, |core, server, adapter| core.routed_answer(server, adapter));
        let Some(answer) = answer.flatten() else {
            return HookStatus::Continue;
        };
        let response = answer.response;
        // The answer's headers: the tool result's, nothing of the upstream's (`:status: 200`
        // as gRPC sent it stays).
        let (mut status, mut length) = (itoa::Buffer::new(), itoa::Buffer::new());
        let wanted: HeaderList<(&str, &str)> = [(":status", status.format(response.status))]
            .into_iter()
            .chain(response.headers.iter().map(|(name, value)| (*name, value.as_ref())))
            .chain([("content-length", length.format(response.body.len()))])
            .collect();
        rewrite(host, HeaderMap::Response, &answer.upstream_headers, &wanted);
        self.answered.set(true);
        if !host.replace_body(body, &response.body) {
            log::warn!("Envoy refused the tool result's body ({body:?})");
        }
        HookStatus::Continue
    }
}

//! A call the module routes: the request itself becomes the gRPC call, forwarded by Envoy's
//! router; its answer is rewritten into the tool result, or the module answers at the deadline.

use std::time::Instant;

use switchblade_core::host_api::{CallPart, HeaderList, UpstreamCall, ROUTED_CALL_FILTER_STATE};

use super::{rewrite, Exchange, HookStatus, DEADLINE_PASSED};
use crate::host::{Body, HeaderMap, StreamHost};

impl Exchange {
    /// Makes the request the gRPC call: its headers the call's (and those Envoy needs to route
    /// and log it), its body the gRPC frame.
    pub(super) fn route_call(&self, host: &impl StreamHost, call: &UpstreamCall, cluster_header: &str) {
        if let Some(request_map) = &*self.request_map.borrow() {
            let routed = call.routed_headers(cluster_header, request_map.iter());
            rewrite(host, HeaderMap::Request, request_map, &routed);
        }
        let body = call.http_body();
        let held = self.held.get();
        // Where the body is: Envoy's buffer if it kept one (the last chunk emptied), else this
        // chunk (HTTP/1.1's empty last chunk is left alone).
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
        // After the upstream's headers Envoy's router could only reset the stream at the
        // deadline: the module answers DEADLINE_EXCEEDED itself.
        self.keep_alarm(
            DEADLINE_PASSED,
            host.wake_at(Instant::now() + call.timeout(), DEADLINE_PASSED),
        );
    }

    fn routed_heard(&self, host: &impl StreamHost, part: CallPart<'_>) {
        self.run(host, |core, server, _| core.routed_heard(server, part));
    }

    pub fn response_headers(&self, host: &impl StreamHost, end_of_stream: bool) -> HookStatus {
        if !self.core.is_routed() {
            return HookStatus::Continue;
        }
        self.routed_heard(host, CallPart::Headers(host.headers(HeaderMap::Response)));
        if end_of_stream {
            // A trailers-only answer, or Envoy's own for a call it could not make.
            return self.finish_routed(host, Body::BufferedResponse);
        }
        HookStatus::Stop
    }

    pub fn response_body(&self, host: &impl StreamHost, end_of_stream: bool) -> HookStatus {
        if !self.core.is_routed() {
            return HookStatus::Continue;
        }
        // Drained at once: `limits.max_response_bytes` applies, not Envoy's buffer limit (a 500).
        let data = host.body(Body::ReceivedResponse);
        host.drain_body(Body::ReceivedResponse);
        self.routed_heard(host, CallPart::Data(&data));
        if end_of_stream {
            return self.finish_routed(host, Body::ReceivedResponse);
        }
        HookStatus::Drop
    }

    pub fn response_trailers(&self, host: &impl StreamHost) -> HookStatus {
        if !self.core.is_routed() {
            return HookStatus::Continue;
        }
        let trailers = host.headers(HeaderMap::ResponseTrailers);
        rewrite::<&[u8]>(host, HeaderMap::ResponseTrailers, &trailers, &[]);
        self.routed_heard(host, CallPart::Trailers(trailers));
        self.finish_routed(host, Body::BufferedResponse)
    }

    /// The routed call's answer is whole: the tool result replaces it, written to `body` (a
    /// body hook's chunk, or Envoy's buffer from a hook with none).
    fn finish_routed(&self, host: &impl StreamHost, body: Body) -> HookStatus {
        self.keep_alarm(DEADLINE_PASSED, None);
        let answer = self.run(host, |core, server, adapter| core.routed_answer(server, adapter));
        let Some(answer) = answer.flatten() else {
            return HookStatus::Continue;
        };
        let response = answer.response;
        // The tool result's headers, nothing of the upstream's.
        let (mut status, mut length) = (itoa::Buffer::new(), itoa::Buffer::new());
        let wanted: HeaderList<(&str, &str)> = [(":status", status.format(response.status))]
            .into_iter()
            .chain(response.headers.iter().map(|(name, value)| (*name, value.as_ref())))
            .chain([("content-length", length.format(response.body.len()))])
            .collect();
        rewrite(host, HeaderMap::Response, &answer.upstream_headers, &wanted);
        if !host.replace_body(body, &response.body) {
            log::warn!("Envoy refused the tool result's body ({body:?})");
        }
        HookStatus::Continue
    }
}

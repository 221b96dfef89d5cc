//! A call the module routes: the request itself becomes the gRPC call, forwarded by Envoy's
//! router; its answer is read as it comes and rewritten into the tool result, or answered at
//! the deadline by the module's own clock.

use std::time::Instant;

use switchblade_core::grpc::call_end::{CallEnd, CallPart};
use switchblade_core::http::{HeaderCopy, HeaderList};
use switchblade_core::server::Reply;
use switchblade_core::upstream::{UpstreamCall, ROUTED_CALL_FILTER_STATE};

use super::{rewrite, Exchange, HeldBody, HookStatus, State, DEADLINE_PASSED, ROUTED};
use crate::clock::now;
use crate::host::{Body, HeaderMap, StreamHost};

impl Exchange {
    /// Makes the request the gRPC call (`request_map`: Envoy's request header map as it came;
    /// `held`: where Envoy holds its body): its headers become the call's (and those Envoy needs
    /// to route and log it), its body the gRPC frame; Envoy's router forwards it.
    pub(super) fn route_call(
        &self,
        host: &impl StreamHost,
        mut reply: Reply,
        call: UpstreamCall,
        cluster_header: &str,
        request_map: &HeaderCopy,
        held: HeldBody,
    ) -> HookStatus {
        // What the call keeps as it came (the method, the scheme, the request id) is not
        // written again.
        let routed = call.routed_headers(cluster_header, request_map.iter());
        rewrite(host, HeaderMap::Request, request_map, &routed);
        // It borrows the call, which is kept below.
        drop(routed);
        let body = call.http_body();
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
        reply.started(ROUTED, call, now());
        *self.state.borrow_mut() = State::Routed(reply);
        HookStatus::Continue
    }

    pub fn response_headers(&self, host: &impl StreamHost, end_of_stream: bool) -> HookStatus {
        {
            let mut state = self.state.borrow_mut();
            let State::Routed(reply) = &mut *state else {
                return HookStatus::Continue;
            };
            let headers = host.headers(HeaderMap::Response);
            self.server().heard(reply, ROUTED, CallPart::Headers(headers));
        }
        if end_of_stream {
            // A trailers-only answer, or Envoy's own for a call it could not make.
            return self.finish_routed(host, Body::BufferedResponse);
        }
        HookStatus::Stop
    }

    pub fn response_body(&self, host: &impl StreamHost, end_of_stream: bool) -> HookStatus {
        {
            let mut state = self.state.borrow_mut();
            let State::Routed(reply) = &mut *state else {
                return HookStatus::Continue;
            };
            // Copied out and drained at once, so that Envoy's buffer limit (which would answer
            // a plain 500) never applies: `limits.max_response_bytes` does.
            let data = host.body(Body::ReceivedResponse);
            host.drain_body(Body::ReceivedResponse);
            self.server().heard(reply, ROUTED, CallPart::Data(&data));
        }
        if end_of_stream {
            return self.finish_routed(host, Body::ReceivedResponse);
        }
        HookStatus::Drop
    }

    pub fn response_trailers(&self, host: &impl StreamHost) -> HookStatus {
        {
            let mut state = self.state.borrow_mut();
            let State::Routed(reply) = &mut *state else {
                return HookStatus::Continue;
            };
            let trailers = host.headers(HeaderMap::ResponseTrailers);
            rewrite::<&[u8]>(host, HeaderMap::ResponseTrailers, &trailers, &[]);
            self.server().heard(reply, ROUTED, CallPart::Trailers(trailers));
        }
        self.finish_routed(host, Body::BufferedResponse)
    }

    /// The routed call's answer is whole: it becomes the tool result, in place of the
    /// upstream's answer. It is written to `body`: the chunk of a body hook, or Envoy's buffer
    /// from a hook with no chunk (headers or trailers), which Envoy then sends.
    fn finish_routed(&self, host: &impl StreamHost, body: Body) -> HookStatus {
        let State::Routed(mut reply) = std::mem::replace(&mut *self.state.borrow_mut(), State::Answered) else {
            return HookStatus::Continue;
        };
        self.deadline.replace(None);
        let upstream_headers =
            self.server()
                .call_ended(&mut reply, ROUTED, false, now(), &mut self.observed.borrow_mut());
        self.publish(host);
        let answer = reply.into_response();
        // The answer's headers: the tool result's, nothing of the upstream's (`:status: 200`
        // as gRPC sent it stays).
        let (mut status, mut length) = (itoa::Buffer::new(), itoa::Buffer::new());
        let wanted: HeaderList<(&str, &str)> = [(":status", status.format(answer.status))]
            .into_iter()
            .chain(answer.headers.iter().map(|(name, value)| (*name, value.as_ref())))
            .chain([("content-length", length.format(answer.body.len()))])
            .collect();
        rewrite(host, HeaderMap::Response, &upstream_headers, &wanted);
        self.answered.set(true);
        if !host.replace_body(body, &answer.body) {
            log::warn!("Envoy refused the tool result's body ({body:?})");
        }
        HookStatus::Continue
    }

    /// A routed call whose deadline has passed is answered DEADLINE_EXCEEDED (Envoy's router
    /// would reset a stream whose answer has begun).
    pub(super) fn deadline_passed(&self, host: &impl StreamHost) {
        let response = {
            let mut state = self.state.borrow_mut();
            let State::Routed(reply) = &mut *state else {
                return;
            };
            if let Some((call, _)) = reply.take(ROUTED) {
                let server = self.server();
                server.file(
                    reply,
                    &call,
                    CallEnd::DeadlinePassed,
                    now(),
                    &mut self.observed.borrow_mut(),
                );
            }
            let State::Routed(reply) = std::mem::replace(&mut *state, State::Answered) else {
                return;
            };
            reply.into_response()
        };
        self.deadline.replace(None);
        self.answer(host, &response);
    }
}

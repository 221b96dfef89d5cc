//! A request made the call itself: a host with a router for calls (the module) forwards the
//! request, rewritten into the gRPC call of a lone `tools/call`, and its answer becomes the tool
//! result.

use std::fmt::Debug;

use super::{Exchange, ExchangeHost, State};
use crate::grpc::call_end::{CallEnd, CallPart};
use crate::http::{HeaderCopy, HttpResponse};
use crate::server::{Reply, Server};

/// The answer to a routed call, to write in place of its upstream's.
#[derive(Debug)]
pub struct RoutedAnswer {
    /// The tool result.
    pub response: HttpResponse,
    /// The headers the upstream's answer came with (empty if none), to rewrite.
    pub upstream_headers: HeaderCopy,
}

impl<K: Copy + PartialEq + Debug> Exchange<K> {
    /// Routes the call of a lone `tools/call` of a unary method where the host can (once it
    /// has passed the rate limits), or starts the reply's calls.
    pub(super) fn route_or_call_out(
        &mut self,
        server: &Server,
        host: &mut impl ExchangeHost<CallHandle = K>,
        mut reply: Reply,
    ) {
        let cluster_header = server.routing().cluster_header.as_deref();
        if let Some(cluster_header) = cluster_header.filter(|_| host.routes_calls()) {
            let now = host.now();
            if let Some(call) = server.take_routable_call(&mut reply, now, &mut self.observed) {
                host.route_call(&call, cluster_header);
                let id = self.next_call;
                self.next_call += 1;
                reply.started(id, call, now);
                self.state = State::Routed(reply, id);
                return;
            }
        }
        self.state = State::CallingOut(reply);
        self.advance(server, host);
    }

    /// Whether the request was made the call itself.
    pub fn is_routed(&self) -> bool {
        matches!(self.state, State::Routed(..))
    }

    /// A part of the routed call's answer (the request's response).
    pub fn routed_heard(&mut self, server: &Server, part: CallPart<'_>) {
        if let State::Routed(reply, id) = &mut self.state {
            server.heard(reply, *id, part);
        }
    }

    /// The routed call's answer is whole: the tool result to write in its place, after what
    /// the request told is published.
    pub fn routed_answer(
        &mut self,
        server: &Server,
        host: &mut impl ExchangeHost<CallHandle = K>,
    ) -> Option<RoutedAnswer> {
        let Some(State::Routed(mut reply, id)) = self.take_state(|state| matches!(state, State::Routed(..))) else {
            return None;
        };
        let upstream_headers = server.call_ended(&mut reply, id, false, host.now(), &mut self.observed);
        host.publish(&self.observed);
        self.answered = true;
        Some(RoutedAnswer {
            response: reply.into_response(),
            upstream_headers,
        })
    }

    /// The routed call's deadline has passed (the host's router would only reset a stream whose
    /// answer has begun): it is answered DEADLINE_EXCEEDED.
    pub fn routed_deadline_passed(&mut self, server: &Server, host: &mut impl ExchangeHost<CallHandle = K>) {
        let Some(State::Routed(mut reply, id)) = self.take_state(|state| matches!(state, State::Routed(..))) else {
            return;
        };
        let now = host.now();
        if let Some((call, _)) = reply.take(id) {
            server.file(&mut reply, &call, CallEnd::DeadlinePassed, now, &mut self.observed);
        }
        self.answer(host, &reply.into_response());
    }
}

//! One HTTP request through the filter, without I/O. The host hands over what it hears (the
//! request's headers, body and trailers; each call's answer, whole or in parts, and its end; a
//! wake-up; a cancellation; the request going away) as calls to an [`Exchange`], and does what
//! the exchange asks through [`ExchangeHost`] (start or reset a call, publish what the request
//! told, send the answer whole or in parts, wake it later, listen for or file a cancellation).
//!
//! Call ids are the exchange's, given as each call starts; a host knows its calls by its own
//! handles (a callout's token, a stream's), whatever their numbering, which the exchange keeps
//! beside the ids: the host tells what it heard under its handle. The states are
//! passing through (not the MCP path), reading the body, calling out (the reply waits until
//! every call has ended), routed (a host with a router for calls made the request itself the
//! gRPC call of a lone `tools/call`, and its answer becomes the tool result), and answered. A
//! host that can send an answer in parts (an SSE stream) gets each call's progress
//! notifications as they come.

use std::fmt::Debug;

use crate::cancel::CANCELLED_COMMENT;
use crate::grpc::call_end::{CallPart, WholeCallResponse};
use crate::http::{is_mcp_path, HttpResponse, McpHeaders};
use crate::observe::Observations;
use crate::server::{Outcome, Reply, Server};
use crate::upstream::UpstreamCall;

mod grpc_stream;
mod host;
mod reentrant;
mod routed;
mod timetable;
pub(crate) use host::CallId;
pub use host::{Answer, ExchangeHost, RequestHead};
pub use reentrant::{AfterPanic, ReentrantExchange};
pub use routed::RoutedAnswer;
pub use timetable::{timer_period, Ending, OpenStream, RequestHandle, Timetable, TIMETABLE_TICK};

// The fake host the tests, the fuzz targets and the benchmarks drive the exchange through.
#[cfg(any(test, feature = "fake-host"))]
pub mod fake_host;

/// Where the request stands after a hook: what the host does with the HTTP stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Not the exchange's: let it go on, untouched.
    Continue,
    /// Its body is to come to the exchange: hold it until it ends.
    ReadBody,
    /// Waiting for its calls: hold it; the answer goes when they have ended.
    Waiting,
    /// Answered (or cancelled): hold it; nothing more is to be done for it.
    Answered,
    /// Made the call itself: let it go on to the host's router.
    Routed,
}

enum State {
    PassThrough,
    ReadingBody(McpHeaders),
    CallingOut(Reply),
    /// The request is the call under this id.
    Routed(Reply, CallId),
    Answered,
}

/// One HTTP request through the filter, whose host knows its calls by handles of type `K`.
pub struct Exchange<K> {
    state: State,
    /// What this request told, published with its answer.
    observed: Observations,
    /// The id the next call starts under.
    next_call: CallId,
    /// The calls out: each one's id, and the host's handle for it.
    calls: Vec<(CallId, K)>,
    /// The answer is an SSE stream whose head has gone (progress notifications sent as they
    /// came).
    answer_begun: bool,
    /// An answer has gone, whole or in part (or was handed to the host to write).
    answered: bool,
}

impl<K> Default for Exchange<K> {
    fn default() -> Self {
        Exchange {
            state: State::PassThrough,
            observed: Observations::default(),
            next_call: 1,
            calls: Vec::new(),
            answer_begun: false,
            answered: false,
        }
    }
}

impl<K: Copy + PartialEq + Debug> Exchange<K> {
    /// The request's headers: answered now (a routing header a client may not send, the
    /// protected resource metadata, a method other than POST, a declared length over the
    /// limit), its body to be read, or not the MCP path's.
    pub fn request_headers(
        &mut self,
        server: &Server,
        host: &mut impl ExchangeHost<CallHandle = K>,
        head: &impl RequestHead,
        end_of_stream: bool,
    ) -> Step {
        let path = head.header(":path").unwrap_or_default();
        let path = String::from_utf8_lossy(&path);
        // Most requests are not for the MCP path: they are asked one header at a time. One
        // that is has its headers read once, whole, and everything below reads them there.
        let admitted = if is_mcp_path(&path, server.mcp_path()) {
            head.read_all(|pairs| {
                let value = |name: &str| pairs.iter().find(|(known, _)| *known == name).map(|(_, value)| *value);
                self.header_phase(server, &path, |name| value(name).map(<[u8]>::to_vec))
                    .and_then(|()| server.admit_headers(&path, pairs, &mut self.observed).map(Some))
            })
        } else {
            self.header_phase(server, &path, |name| head.header(name))
                .map(|()| None)
        };
        let headers = match admitted {
            Ok(Some(headers)) => headers,
            Ok(None) => return Step::Continue,
            Err(refusal) => return self.answer(host, &refusal),
        };
        if end_of_stream {
            return self.handle(server, host, &headers, &[]);
        }
        self.state = State::ReadingBody(headers);
        Step::ReadBody
    }

    /// What is answered on any path before its body: a routing header only the host may set
    /// (a route that forwards by it must never be chosen by a client), the protected resource
    /// metadata. `header` reads one request header.
    fn header_phase(
        &mut self,
        server: &Server,
        path: &str,
        header: impl Fn(&str) -> Option<Vec<u8>>,
    ) -> Result<(), HttpResponse> {
        let carries = |name: &str| header(name).is_some();
        if let Some(refusal) = server.refuse_routing_header(path, carries, &mut self.observed) {
            return Err(refusal);
        }
        let method = || String::from_utf8_lossy(&header(":method").unwrap_or_default()).into_owned();
        match server.protected_resource_metadata(path, method) {
            Some(metadata) => Err(metadata),
            None => Ok(()),
        }
    }

    /// A chunk of the request's body has come: `size` bytes so far, `read` gives them all once
    /// the last has come. A body that outgrows the limit is refused at once.
    pub fn request_body(
        &mut self,
        server: &Server,
        host: &mut impl ExchangeHost<CallHandle = K>,
        size: usize,
        end_of_stream: bool,
        read: impl FnOnce() -> Vec<u8>,
    ) -> Step {
        if !matches!(self.state, State::ReadingBody(_)) {
            return self.step();
        }
        if let Some(refusal) = server.refuse_body_over_limit(size, &mut self.observed) {
            return self.answer(host, &refusal);
        }
        if !end_of_stream {
            return Step::ReadBody;
        }
        self.body_complete(server, host, read)
    }

    /// The request's trailers have come: its body is whole (`read` gives it).
    pub fn request_trailers(
        &mut self,
        server: &Server,
        host: &mut impl ExchangeHost<CallHandle = K>,
        read: impl FnOnce() -> Vec<u8>,
    ) -> Step {
        if !matches!(self.state, State::ReadingBody(_)) {
            return self.step();
        }
        self.body_complete(server, host, read)
    }

    fn body_complete(
        &mut self,
        server: &Server,
        host: &mut impl ExchangeHost<CallHandle = K>,
        read: impl FnOnce() -> Vec<u8>,
    ) -> Step {
        let Some(State::ReadingBody(headers)) = self.take_state(|state| matches!(state, State::ReadingBody(..))) else {
            return self.step();
        };
        self.handle(server, host, &headers, &read())
    }

    /// The whole request: answered, or its calls started.
    fn handle(
        &mut self,
        server: &Server,
        host: &mut impl ExchangeHost<CallHandle = K>,
        headers: &McpHeaders,
        body: &[u8],
    ) -> Step {
        let origin = server.origin(&*host);
        let request = origin.request(headers, body, host.counters());
        match server.handle(request, &mut self.observed) {
            Outcome::Respond(response) => self.answer(host, &response),
            Outcome::Cancel { request_id, response } => {
                if let Some(key) = origin.cancel_key(headers, &request_id) {
                    host.file_cancel(&key);
                }
                self.answer(host, &response)
            }
            Outcome::Await(reply) => {
                if let Some(key) = reply.cancellable_id().and_then(|id| origin.cancel_key(headers, id)) {
                    host.listen_for_cancel(key);
                }
                self.route_or_call_out(server, host, reply);
                self.step()
            }
        }
    }

    /// The state, left answered, if `wanted` says it is the one an event acts on; any other is
    /// left as it is (an event that does not belong to it changes nothing).
    fn take_state(&mut self, wanted: impl FnOnce(&State) -> bool) -> Option<State> {
        wanted(&self.state).then(|| std::mem::replace(&mut self.state, State::Answered))
    }

    /// Where the request stands.
    pub fn step(&self) -> Step {
        match self.state {
            State::PassThrough => Step::Continue,
            State::ReadingBody(_) => Step::ReadBody,
            State::CallingOut(_) => Step::Waiting,
            State::Routed(..) => Step::Routed,
            State::Answered => Step::Answered,
        }
    }

    /// Whether the request waits for its calls.
    pub fn is_calling_out(&self) -> bool {
        matches!(self.state, State::CallingOut(_))
    }

    /// The call the host knows by `call` was answered whole, with a body of `body_size` bytes
    /// (`read` gives its parts, and is not called for a body over the limit); then the calls
    /// that may, start.
    pub fn call_answered(
        &mut self,
        server: &Server,
        host: &mut impl ExchangeHost<CallHandle = K>,
        call: K,
        body_size: usize,
        read: impl FnOnce() -> WholeCallResponse,
    ) {
        let State::CallingOut(reply) = &mut self.state else {
            return;
        };
        let Some(id) = forget_handle(&mut self.calls, call) else {
            return;
        };
        server.call_answered(reply, id, body_size, read, host.now(), &mut self.observed);
        self.advance(server, host);
    }

    /// A part of the answer of the call the host knows by `call`. A stream of answers that
    /// reaches a bound is stopped at once; progress notifications go out as they come, from a
    /// host that sends in parts.
    pub fn call_heard(
        &mut self,
        server: &Server,
        host: &mut impl ExchangeHost<CallHandle = K>,
        call: K,
        part: CallPart<'_>,
    ) {
        let State::CallingOut(reply) = &mut self.state else {
            return;
        };
        let Some(id) = id_of(&self.calls, call) else {
            return;
        };
        let stop = server.heard(reply, id, part).stop;
        if host.sends_in_parts() {
            if let Some(events) = reply.take_progress_events() {
                self.send_events(host, &events);
            }
        }
        if stop {
            self.stop_call(server, host, id);
        }
    }

    /// Resets call `id`, and files it as ended without a whole answer.
    pub(super) fn stop_call(&mut self, server: &Server, host: &mut impl ExchangeHost<CallHandle = K>, id: CallId) {
        if let Some(call) = forget_id(&mut self.calls, id) {
            host.reset_call(call);
        }
        self.file_end(server, host, id, true);
    }

    /// The call the host knows by `call` has ended (`reset`: without a whole answer): its
    /// result is filed, and the calls that may, start; the reply goes once none is out or
    /// waiting. A call ended already (or never started) is ignored.
    pub fn call_ended(&mut self, server: &Server, host: &mut impl ExchangeHost<CallHandle = K>, call: K, reset: bool) {
        if let Some(id) = forget_handle(&mut self.calls, call) {
            self.file_end(server, host, id, reset);
        }
    }

    /// Files call `id`'s end, if the request still waits for its calls; then the calls that
    /// may, start.
    fn file_end(&mut self, server: &Server, host: &mut impl ExchangeHost<CallHandle = K>, id: CallId, reset: bool) {
        let State::CallingOut(reply) = &mut self.state else {
            return;
        };
        server.call_ended(reply, id, reset, host.now(), &mut self.observed);
        self.advance(server, host);
    }

    /// The wake-up asked for has come: the calls due start.
    pub fn wake(&mut self, server: &Server, host: &mut impl ExchangeHost<CallHandle = K>) {
        self.advance(server, host);
    }

    /// The client cancelled the request: its calls are reset and counted as cancelled, and it
    /// is answered with no JSON-RPC response (an answer begun in parts just ends).
    pub fn cancelled(&mut self, server: &Server, host: &mut impl ExchangeHost<CallHandle = K>) {
        let Some(cancelled) = self.cancel_calls(server, host) else {
            return;
        };
        match cancelled {
            Some(response) => {
                self.answer(host, &response);
            }
            None => {
                host.publish(&self.observed);
                self.send(
                    host,
                    Answer::Part {
                        data: CANCELLED_COMMENT,
                        last: true,
                    },
                );
            }
        }
    }

    /// The request is gone (its client closed the connection, or the host reset it): its calls
    /// are reset and counted as cancelled, and what it told is published.
    pub fn request_gone(&mut self, server: &Server, host: &mut impl ExchangeHost<CallHandle = K>) {
        if self.cancel_calls(server, host).is_some() {
            host.publish(&self.observed);
        }
    }

    /// Resets the calls out, for a request that will not be answered with a result; `None` if
    /// it was not calling out, else the answer to send, if it has not begun.
    fn cancel_calls(
        &mut self,
        server: &Server,
        host: &mut impl ExchangeHost<CallHandle = K>,
    ) -> Option<Option<HttpResponse>> {
        let Some(State::CallingOut(reply)) = self.take_state(|state| matches!(state, State::CallingOut(..))) else {
            return None;
        };
        let cancelled = server.cancel(reply, host.now(), &mut self.observed);
        for id in cancelled.calls {
            if let Some(call) = forget_id(&mut self.calls, id) {
                host.reset_call(call);
            }
        }
        Some(cancelled.response)
    }

    /// Starts the calls that may go now; sends the reply once nothing is out or waiting, or
    /// asks to be woken when a task's next poll is due.
    fn advance(&mut self, server: &Server, host: &mut impl ExchangeHost<CallHandle = K>) {
        loop {
            let State::CallingOut(reply) = &mut self.state else {
                return;
            };
            let now = host.now();
            let (next_call, calls) = (&mut self.next_call, &mut self.calls);
            let start = |call: &UpstreamCall| {
                let handle = host.start_call(call)?;
                let id = *next_call;
                *next_call += 1;
                calls.push((id, handle));
                Ok(id)
            };
            if server.start_calls(reply, start, now, &mut self.observed) {
                return self.send_reply(host);
            }
            let Some(at) = reply.next_wake() else {
                return;
            };
            if host.wake_at(at) {
                return;
            }
            // A host that cannot wake the request ends its waits now: it is answered, not held.
            log::warn!("cannot wake a request to poll its operation later; it is answered as still running");
            server.stop_waiting(reply, &mut self.observed);
        }
    }

    fn send_reply(&mut self, host: &mut impl ExchangeHost<CallHandle = K>) {
        let Some(State::CallingOut(reply)) = self.take_state(|state| matches!(state, State::CallingOut(..))) else {
            return;
        };
        let response = reply.into_response();
        host.publish(&self.observed);
        // An answer in parts begun: the result is its last event.
        self.send(
            host,
            match self.answer_begun {
                false => Answer::Whole(&response),
                true => Answer::Part {
                    data: &response.body,
                    last: true,
                },
            },
        );
    }

    /// Progress notifications, on an answer in parts begun with the first of them.
    fn send_events(&mut self, host: &mut impl ExchangeHost<CallHandle = K>, events: &[u8]) {
        if self.answer_begun {
            self.send(
                host,
                Answer::Part {
                    data: events,
                    last: false,
                },
            );
            return;
        }
        self.answer_begun = true;
        let head = HttpResponse::event_stream(Vec::new());
        self.send(host, Answer::Begin { head: &head, events });
    }

    /// Whether an answer has gone, whole or in part.
    pub fn has_answered(&self) -> bool {
        self.answered
    }

    fn send(&mut self, host: &mut impl ExchangeHost<CallHandle = K>, answer: Answer<'_>) {
        self.answered = true;
        host.send(answer);
    }

    fn answer(&mut self, host: &mut impl ExchangeHost<CallHandle = K>, response: &HttpResponse) -> Step {
        self.state = State::Answered;
        host.publish(&self.observed);
        self.send(host, Answer::Whole(response));
        Step::Answered
    }
}

/// The id of the call the host knows by `call`.
pub(super) fn id_of<K: PartialEq>(calls: &[(CallId, K)], call: K) -> Option<CallId> {
    calls.iter().find(|(_, known)| *known == call).map(|(id, _)| *id)
}

/// The id of the call the host knows by `call`, which has ended: the handle is forgotten.
fn forget_handle<K: PartialEq>(calls: &mut Vec<(CallId, K)>, call: K) -> Option<CallId> {
    let index = calls.iter().position(|(_, known)| *known == call)?;
    Some(calls.swap_remove(index).0)
}

/// The host's handle for call `id`, which the exchange stops: it is forgotten.
fn forget_id<K>(calls: &mut Vec<(CallId, K)>, id: CallId) -> Option<K> {
    let index = calls.iter().position(|(known, _)| *known == id)?;
    Some(calls.swap_remove(index).1)
}

#[cfg(test)]
mod tests;

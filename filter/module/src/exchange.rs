//! One MCP request through the module, in safe Rust, over a [`StreamHost`]: the same core as
//! the Wasm filter, with the call path a native module has and proxy-wasm does not. A lone
//! `tools/call` becomes the request itself, rewritten into the gRPC call and forwarded by
//! Envoy's router (the route picks the cluster from a header, `routing.cluster_header`); its
//! answer is rewritten into the tool result. Batches, and configurations without the header,
//! call out instead.
//!
//! The states: passing through (not the MCP path), reading the body, routed (the request went
//! to the router as the gRPC call), calling out, answered; and poisoned, after a hook panicked
//! (the request gets one answer at most, and nothing more is done for it).

use std::cell::{Cell, RefCell};

use switchblade_core::cancel::CANCELLED_COMMENT;
use switchblade_core::grpc::call_end::CallPart;
use switchblade_core::http::{header_text, is_mcp_path, HeaderCopy, HttpResponse, McpHeaders};
use switchblade_core::observe::Observations;
use switchblade_core::server::{Outcome, Reply, Server};
use switchblade_core::upstream::UpstreamCall;

use crate::clock::now;
use crate::config::{Config, ServerRef};
use crate::deferred::Deferred;
use crate::host::{Alarm, Body, Facts, HeaderMap, StreamHost};

/// The routed call's token in its reply: it is the request itself, not a stream of its own.
const ROUTED: u64 = 0;
/// The wake-up that says a routed call's deadline has passed.
pub const DEADLINE_PASSED: u64 = 1;
/// The wake-up that says the client cancelled the request (`notifications/cancelled`, heard on
/// another stream).
pub const CANCELLED: u64 = 2;
/// The wake-up that says a task's next poll is due.
pub const POLL_DUE: u64 = 3;

/// Room for a sample's stat name at once: the longest a request usually writes is a tool's
/// call counter, `tool_calls.tool.<tool>.outcome.success.grpc_status.OK`, 49 bytes and the
/// tool's name.
const STAT_NAME_CAPACITY: usize = 128;

/// What a hook tells Envoy to do with the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookStatus {
    /// Let it go on.
    Continue,
    /// Hold it (headers: the body still comes to this filter).
    Stop,
    /// Hold it, and keep the body in Envoy's buffer.
    Buffer,
    /// Hold it; the body chunk is not kept (the request was answered, or the chunk was copied
    /// out).
    Drop,
}

enum State {
    PassThrough,
    ReadingBody(Box<AdmittedRequest>),
    /// Forwarded by Envoy's router as the gRPC call; its answer becomes the tool result.
    Routed(Reply),
    /// Calls out, the request held until every one has ended.
    CallingOut(Reply),
    Answered,
}

/// Where Envoy holds the request body the module read: a routed call's frame takes its place,
/// with no call into Envoy for a part that holds nothing.
#[derive(Debug, Clone, Copy, Default)]
struct HeldBody {
    /// In Envoy's buffer (the chunks before the last, which the module asked it to keep).
    buffered: bool,
    /// In the chunk of the hook that ended the request.
    last_chunk: bool,
}

/// An MCP request's headers, admitted: what the core read of them, and Envoy's map as it was
/// then (a routed call rewrites it; it is not copied out of Envoy a second time).
struct AdmittedRequest {
    headers: McpHeaders,
    map: HeaderCopy,
}

/// One HTTP request through the module.
pub struct Exchange {
    config: &'static Config,
    /// The configuration's server when the request came.
    server: ServerRef,
    state: RefCell<State>,
    /// What this request told, published with its answer.
    observed: RefCell<Observations>,
    deferred: RefCell<Vec<(u64, Deferred)>>,
    /// An answer has gone (a local reply, or the tool result in place of the routed call's):
    /// after a panic, a second one is never sent.
    answered: Cell<bool>,
    /// A hook panicked: nothing more is done for this request.
    poisoned: Cell<bool>,
    /// The routed call's deadline; dropping it cancels it.
    deadline: RefCell<Option<Alarm>>,
    /// Listens for the cancellation of a streaming call's request; dropping it stops listening.
    cancel_listener: RefCell<Option<Alarm>>,
    /// When a task's next poll is due; dropping it cancels it.
    poll: RefCell<Option<Alarm>>,
}

impl Exchange {
    pub fn new(config: &'static Config) -> Self {
        Exchange {
            config,
            server: config.current(),
            state: RefCell::new(State::PassThrough),
            observed: RefCell::default(),
            deferred: RefCell::default(),
            answered: Cell::new(false),
            poisoned: Cell::new(false),
            deadline: RefCell::new(None),
            cancel_listener: RefCell::new(None),
            poll: RefCell::new(None),
        }
    }

    pub fn config(&self) -> &'static Config {
        self.config
    }

    fn server(&self) -> &Server {
        self.server.get()
    }

    pub fn is_poisoned(&self) -> bool {
        self.poisoned.get()
    }

    /// A hook panicked: the request is answered with an internal error if nothing has been
    /// answered yet, or reset; from now on every hook lets the stream be.
    pub fn poison(&self, host: &impl StreamHost) {
        if self.poisoned.replace(true) {
            return;
        }
        self.deadline.replace(None);
        self.cancel_listener.replace(None);
        self.poll.replace(None);
        if self.answered.replace(true) {
            host.reset();
            return;
        }
        let response = HttpResponse::internal_error();
        host.send_response(response.status, &response.header_pairs(), &response.body);
    }

    pub fn request_headers(&self, host: &impl StreamHost, end_of_stream: bool) -> HookStatus {
        let server = self.server();
        let path = host.header(HeaderMap::Request, ":path").unwrap_or_default();
        let path = header_text(&path);
        // An MCP request's headers are copied out whole, once; another path's are only asked.
        let map = is_mcp_path(&path, server.mcp_path()).then(|| host.headers(HeaderMap::Request));
        // Envoy chose this request's route before any filter ran: a client's routing header
        // could have chosen the routed-call route already. Refused on every path.
        let carries = |header: &str| match &map {
            Some(map) => map.iter().any(|(name, _)| name == header),
            None => host.header(HeaderMap::Request, header).is_some(),
        };
        let refusal = server.refuse_routing_header(&path, carries, &mut self.observed.borrow_mut());
        if let Some(refusal) = refusal {
            return self.answer(host, &refusal);
        }
        let method = || header_text(&host.header(HeaderMap::Request, ":method").unwrap_or_default()).into_owned();
        if let Some(metadata) = server.protected_resource_metadata(&path, method) {
            return self.answer(host, &metadata);
        }
        let Some(map) = map else {
            return HookStatus::Continue;
        };
        let admitted = server.admit_headers(&path, &map.pairs(), &mut self.observed.borrow_mut());
        let headers = match admitted {
            Ok(headers) => headers,
            Err(refusal) => return self.answer(host, &refusal),
        };
        if end_of_stream {
            return self.handle(host, &headers, &map, &[], HeldBody::default());
        }
        *self.state.borrow_mut() = State::ReadingBody(Box::new(AdmittedRequest { headers, map }));
        HookStatus::Stop
    }

    pub fn request_body(&self, host: &impl StreamHost, end_of_stream: bool) -> HookStatus {
        match *self.state.borrow() {
            State::ReadingBody(_) => {}
            State::PassThrough | State::Routed(_) => return HookStatus::Continue,
            State::CallingOut(_) => return HookStatus::Buffer,
            State::Answered => return HookStatus::Drop,
        }
        let size = host.body_size(Body::BufferedRequest) + host.body_size(Body::ReceivedRequest);
        let refusal = self
            .server()
            .refuse_body_over_limit(size, &mut self.observed.borrow_mut());
        if let Some(refusal) = refusal {
            return self.answer(host, &refusal);
        }
        if !end_of_stream {
            return HookStatus::Buffer;
        }
        self.end_of_request(host)
    }

    pub fn request_trailers(&self, host: &impl StreamHost) -> HookStatus {
        match *self.state.borrow() {
            State::ReadingBody(_) => {}
            State::PassThrough => return HookStatus::Continue,
            _ => return HookStatus::Stop,
        }
        let status = self.end_of_request(host);
        if matches!(*self.state.borrow(), State::Routed(_)) {
            // The gRPC call carries nothing of the client's but what the core chose: its
            // trailers would reach the upstream as metadata.
            let trailers = host.headers(HeaderMap::RequestTrailers);
            rewrite::<&[u8]>(host, HeaderMap::RequestTrailers, &trailers, &[]);
        }
        status
    }

    /// The whole request body is in: answer, route, or call out.
    fn end_of_request(&self, host: &impl StreamHost) -> HookStatus {
        let State::ReadingBody(admitted) = std::mem::replace(&mut *self.state.borrow_mut(), State::Answered) else {
            return HookStatus::Drop;
        };
        // A body that is all in one place is used as it is: in the last chunk (Envoy buffered
        // nothing before it), or in Envoy's buffer (HTTP/1.1 ends a body with an empty chunk).
        let buffered = host.body(Body::BufferedRequest);
        let received = host.body(Body::ReceivedRequest);
        let held = HeldBody {
            buffered: !buffered.is_empty(),
            last_chunk: !received.is_empty(),
        };
        let body = match (held.buffered, held.last_chunk) {
            (false, _) => received,
            (true, false) => buffered,
            (true, true) => [buffered, received].concat(),
        };
        self.handle(host, &admitted.headers, &admitted.map, &body, held)
    }

    /// `map` is Envoy's request header map as the headers were admitted; `body` is the request
    /// body, held by Envoy where `held` says.
    fn handle(
        &self,
        host: &impl StreamHost,
        headers: &McpHeaders,
        map: &HeaderCopy,
        body: &[u8],
        held: HeldBody,
    ) -> HookStatus {
        let server = self.server();
        let origin = server.origin(&Facts(host));
        let cancel_key = |request_id| origin.cancel_key(headers, request_id);
        let request = origin.request(headers, body, Some(self.config.counters()));
        let outcome = server.handle(request, &mut self.observed.borrow_mut());
        let mut reply = match outcome {
            Outcome::Respond(response) => return self.answer(host, &response),
            Outcome::Cancel { request_id, response } => {
                if let Some(key) = cancel_key(&request_id) {
                    host.cancel_listeners(&key.text());
                }
                return self.answer(host, &response);
            }
            Outcome::Await(reply) => reply,
        };
        if let Some(cluster_header) = server.routing().cluster_header.as_deref() {
            let routable = server.take_routable_call(&mut reply, now(), &mut self.observed.borrow_mut());
            if let Some(call) = routable {
                return self.route_call(host, reply, call, cluster_header, map, held);
            }
        }
        if let Some(key) = reply.cancellable_id().and_then(cancel_key) {
            *self.cancel_listener.borrow_mut() = host.listen_for_cancel(&key.text(), CANCELLED);
        }
        *self.state.borrow_mut() = State::CallingOut(reply);
        self.advance(host);
        HookStatus::Buffer
    }

    /// A wake-up the exchange asked for.
    pub fn wake(&self, host: &impl StreamHost, event: u64) {
        match event {
            DEADLINE_PASSED => self.deadline_passed(host),
            CANCELLED => self.cancelled(host),
            POLL_DUE => self.poll_due(host),
            _ => {}
        }
    }

    /// The client cancelled the request: its calls are stopped, and it is answered with no
    /// JSON-RPC response (an SSE answer already begun just ends).
    fn cancelled(&self, host: &impl StreamHost) {
        self.cancel_listener.replace(None);
        let reply = {
            let mut state = self.state.borrow_mut();
            if !matches!(*state, State::CallingOut(_)) {
                return;
            }
            let State::CallingOut(reply) = std::mem::replace(&mut *state, State::Answered) else {
                return;
            };
            reply
        };
        let cancelled = self.server().cancel(reply, now(), &mut self.observed.borrow_mut());
        for call in cancelled.calls {
            // Its end, if Envoy tells it inline, finds the request answered.
            host.reset_call(call);
        }
        match cancelled.response {
            Some(response) => {
                self.answer(host, &response);
            }
            None => {
                self.publish(host);
                host.send_response_data(CANCELLED_COMMENT, true);
            }
        }
    }

    /// A part of a call's answer. A stream of answers that reaches a bound is cancelled at
    /// once; progress notifications go out as the messages come.
    pub fn call_heard(&self, host: &impl StreamHost, call: u64, part: CallPart<'_>) {
        let (stop, events) = {
            let Ok(mut state) = self.state.try_borrow_mut() else {
                self.defer(call, part);
                return;
            };
            let State::CallingOut(reply) = &mut *state else {
                return;
            };
            let heard = self.server().heard(reply, call, part);
            (heard.stop, reply.take_progress_events())
        };
        if let Some(events) = events {
            self.send_events(host, &events);
        }
        if stop {
            host.reset_call(call);
            self.call_ended(host, call, true);
        }
    }

    /// Progress notifications, on an SSE answer begun with the first of them.
    fn send_events(&self, host: &impl StreamHost, events: &[u8]) {
        if !self.answered.replace(true) {
            let head = HttpResponse::event_stream(Vec::new());
            let mut headers = vec![(":status", "200")];
            headers.extend(head.header_pairs());
            host.send_response_headers(&headers, false);
        }
        host.send_response_data(events, false);
    }

    /// A call has ended (`reset`: without a whole answer); the reply goes once all have.
    pub fn call_ended(&self, host: &impl StreamHost, call: u64, reset: bool) {
        if !self.file_end(call, reset) {
            return;
        }
        self.advance(host);
    }

    /// Files how a call ended; whether the state was free to (if not, it is deferred).
    fn file_end(&self, call: u64, reset: bool) -> bool {
        let Ok(mut state) = self.state.try_borrow_mut() else {
            self.deferred.borrow_mut().push((call, Deferred::Ended { reset }));
            return false;
        };
        if let State::CallingOut(reply) = &mut *state {
            let server = self.server();
            server.call_ended(reply, call, reset, now(), &mut self.observed.borrow_mut());
        }
        true
    }

    fn defer(&self, call: u64, part: CallPart<'_>) {
        self.deferred.borrow_mut().push((call, Deferred::from(part)));
    }

    /// Starts the calls that may go now, delivers what Envoy told while they started, and
    /// sends the reply once nothing is out or waiting.
    fn advance(&self, host: &impl StreamHost) {
        loop {
            let complete = {
                let mut state = self.state.borrow_mut();
                let State::CallingOut(reply) = &mut *state else {
                    return;
                };
                // Envoy may call this exchange's call hooks from inside `start_call`: they find
                // the state in use and defer what they heard.
                let start = |call: &UpstreamCall| {
                    host.start_call(call.cluster(), &call.http_headers(), call.http_body(), timeout_ms(call))
                        .map_err(|result| format!("Envoy refused the call (result {result})"))
                };
                self.server()
                    .start_calls(reply, start, now(), &mut self.observed.borrow_mut())
            };
            let deferred = std::mem::take(&mut *self.deferred.borrow_mut());
            if deferred.is_empty() {
                match complete {
                    true => self.send_reply(host),
                    false => self.wake_for_scheduled(host),
                }
                return;
            }
            for (call, event) in deferred {
                match event {
                    Deferred::Part(part) => self.call_heard(host, call, part.as_part()),
                    Deferred::Ended { reset } => {
                        self.file_end(call, reset);
                    }
                }
            }
        }
    }

    fn send_reply(&self, host: &impl StreamHost) {
        let State::CallingOut(reply) = std::mem::replace(&mut *self.state.borrow_mut(), State::Answered) else {
            return;
        };
        self.cancel_listener.replace(None);
        if reply.is_streaming_events() {
            // The SSE answer is begun: the result is its last event.
            self.publish(host);
            host.send_response_data(&reply.into_response().body, true);
            return;
        }
        self.answer(host, &reply.into_response());
    }

    fn answer(&self, host: &impl StreamHost, response: &HttpResponse) -> HookStatus {
        *self.state.borrow_mut() = State::Answered;
        self.publish(host);
        self.answered.set(true);
        host.send_response(response.status, &response.header_pairs(), &response.body);
        HookStatus::Drop
    }

    /// Adds what the request told to Envoy's stats, and to its filter state
    /// (`switchblade.<field>`) for the access log. Before the answer goes: sending it can run
    /// this stream's other hooks.
    fn publish(&self, host: &impl StreamHost) {
        let observed = self.observed.borrow();
        let mut name = String::with_capacity(STAT_NAME_CAPACITY);
        for sample in observed.samples() {
            let Some((id, labels)) = self.config.stat_of(&sample, &mut name) else {
                continue;
            };
            if !host.record_metric(sample.metric.kind(), id, labels, sample.value) {
                log::warn!("Envoy refused a value for the stat {}", sample.metric.name());
            }
        }
        for (key, value) in observed.log_entries() {
            if !host.set_filter_state(key, &value) {
                log::warn!("Envoy refused {key} for the access log");
            }
        }
    }
}

/// The callout's timeout, in milliseconds (never 0, which would mean none).
fn timeout_ms(call: &UpstreamCall) -> u64 {
    u64::try_from(call.timeout().as_millis()).unwrap_or(u64::MAX).max(1)
}

/// Makes `map`, of which `copy` is Envoy's copy, hold `wanted` and nothing else, with as few
/// calls into Envoy as [`HeaderCopy::changes_to`] finds.
fn rewrite<V: AsRef<[u8]>>(host: &impl StreamHost, map: HeaderMap, copy: &HeaderCopy, wanted: &[(&str, V)]) {
    let changes = copy.changes_to(wanted);
    for name in changes.removals {
        host.remove_header(map, name);
    }
    for index in changes.writes {
        if let Some((name, value)) = wanted.get(index) {
            host.set_header(map, name, value.as_ref());
        }
    }
    for index in changes.appends {
        if let Some((name, value)) = wanted.get(index) {
            host.add_header(map, name, value.as_ref());
        }
    }
}

mod polls;
mod routed;
#[cfg(test)]
mod tests;

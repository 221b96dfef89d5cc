//! One HTTP request through the filter: bytes into the core, the calls it asks for out, its
//! answer back. A unary call is one HTTP callout, answered whole. A streaming call is a gRPC
//! stream of Envoy's (its messages come one by one, so a bound can cancel it at once); its
//! deadline is kept by the root context's tick ([`crate::clock`]), which ends the call on this
//! request's behalf, and so is a cancellation heard on another request ([`crate::cancels`]).
//! Proxy-wasm answers a request once and whole, so the progress notifications of a streaming
//! call go out with its result, not as each message comes.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Duration;

use log::{error, warn};
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext};
use proxy_wasm::types::{Action, BufferType, MapType};
use switchblade_core::cancel::CancelKey;
use switchblade_core::grpc::call_end::CallPart;
use switchblade_core::http::{is_mcp_path, HeaderCopy, HeaderPair, HttpResponse, McpHeaders};
use switchblade_core::observe::Observations;
use switchblade_core::quota::counters::Counters;
use switchblade_core::server::{Outcome, Reply, Server};
use switchblade_core::streams::CallKind;
use switchblade_core::upstream::UpstreamCall;

use crate::cancels;
use crate::host_io::{
    buffer, call_out, call_response, header_pairs, header_value, log_fields, map_bytes, now, Facts, HeaderMapBytes,
    SharedData,
};
use crate::stats::Stats;
use crate::stream_clock::{OpenStream, StreamClock, Wake};

/// Marks a gRPC stream's token in the reply's books, apart from callouts' tokens.
pub(crate) const STREAM: u64 = 1 << 32;

pub(crate) enum State {
    PassThrough,
    ReadingBody(McpHeaders),
    AwaitingUpstream(Reply),
    Answered,
}

/// One HTTP request through the filter, as the SDK holds it.
pub(crate) struct Exchange {
    context_id: u32,
    inner: Rc<RefCell<Inner>>,
}

/// The request's state, which the root context also reaches (a stream's deadline).
pub(crate) struct Inner {
    server: Rc<Server>,
    stats: Rc<Stats>,
    /// The plugin's shared data: the rate limits' counters, and cancellations.
    shared: Arc<SharedData>,
    /// The same, as the core takes its counters.
    counters: Counters,
    clock: Rc<StreamClock<Inner>>,
    /// What this request told, published with its answer.
    observed: Observations,
    state: State,
    /// The trailing metadata of each stream, until it closes with its status.
    trailing: HashMap<u32, HeaderMapBytes>,
    /// The key a client's `notifications/cancelled` names this request by, and when it came:
    /// for a lone streaming call, whose stream the tick ends if it is cancelled.
    cancel: Option<(CancelKey, Duration)>,
}

impl Exchange {
    pub(crate) fn new(
        context_id: u32,
        server: Rc<Server>,
        stats: Rc<Stats>,
        shared: Arc<SharedData>,
        clock: Rc<StreamClock<Inner>>,
    ) -> Self {
        let counters: Counters = shared.clone();
        Exchange {
            context_id,
            inner: Rc::new(RefCell::new(Inner {
                server,
                stats,
                shared,
                counters,
                clock,
                observed: Observations::default(),
                state: State::PassThrough,
                trailing: HashMap::new(),
                cancel: None,
            })),
        }
    }

    fn handle(&self, headers: &McpHeaders, body: &[u8]) {
        let weak = Rc::downgrade(&self.inner);
        self.inner.borrow_mut().handle(headers, body, self.context_id, &weak);
    }

    /// The call under `token` has ended: it is filed, and the calls waiting start.
    fn ended(&self, token: u64, reset: bool) {
        let weak = Rc::downgrade(&self.inner);
        self.inner.borrow_mut().ended(token, reset, self.context_id, &weak);
    }
}

impl Context for Exchange {
    fn on_done(&mut self) -> bool {
        if let Ok(mut inner) = self.inner.try_borrow_mut() {
            inner.abandoned();
        }
        true
    }

    fn on_http_call_response(&mut self, token: u32, headers: usize, body_size: usize, trailers: usize) {
        {
            let mut inner = self.inner.borrow_mut();
            let Inner {
                server,
                observed,
                state,
                ..
            } = &mut *inner;
            let State::AwaitingUpstream(reply) = state else {
                return;
            };
            let read = || call_response(headers, body_size, trailers);
            server.call_answered(reply, u64::from(token), body_size, read, now(), observed);
        }
        let weak = Rc::downgrade(&self.inner);
        self.inner.borrow_mut().start_calls(self.context_id, &weak);
    }

    fn on_grpc_stream_initial_metadata(&mut self, token: u32, _count: u32) {
        let headers = HeaderCopy::from_iter([(":status", "200")]);
        self.inner.borrow_mut().heard(token, CallPart::Headers(headers));
    }

    fn on_grpc_stream_message(&mut self, token: u32, size: usize) {
        // A message past the bound stops the stream before it is copied into the VM, whose
        // memory never shrinks.
        let mut stop = self.inner.borrow_mut().refuses_message(token, size);
        if !stop {
            let message = buffer(BufferType::GrpcReceiveBuffer, size);
            stop = self.inner.borrow_mut().heard(token, CallPart::Message(&message));
        }
        if stop {
            // A bound reached: the upstream stream is cancelled now, the call ends here.
            if let Err(status) = hostcalls::cancel_grpc_stream(token) {
                warn!("cannot cancel a gRPC stream: {status:?}");
            }
            self.ended(STREAM | u64::from(token), true);
        }
    }

    fn on_grpc_stream_trailing_metadata(&mut self, token: u32, count: u32) {
        let trailers = map_bytes(MapType::GrpcReceiveTrailingMetadata, count as usize);
        self.inner.borrow_mut().trailing.insert(token, trailers);
    }

    fn on_grpc_stream_close(&mut self, token: u32, status: u32) {
        {
            let mut inner = self.inner.borrow_mut();
            // The status comes as a number; its message (raw bytes, maybe not UTF-8, which the
            // SDK's status reader would panic on) is in the trailing metadata, if it came.
            let heard = inner.trailing.remove(&token).unwrap_or_default();
            let status_text = status.to_string();
            let trailers = HeaderCopy::sized_from(
                header_pairs(&heard)
                    .filter(|&(name, _)| name != "grpc-status")
                    .chain([("grpc-status", status_text.as_bytes())]),
            );
            inner.heard(token, CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])));
            inner.heard(token, CallPart::Trailers(trailers));
        }
        self.ended(STREAM | u64::from(token), false);
    }
}

impl HttpContext for Exchange {
    fn on_http_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        let path = header_value(":path").unwrap_or_default();
        let path = String::from_utf8_lossy(&path);
        let mut inner = self.inner.borrow_mut();
        let Inner { server, observed, .. } = &mut *inner;
        let server = Rc::clone(server);
        // A header only the dynamic module may set (where it routes tool calls): refused in
        // this build too, so that one configuration means the same in both.
        let carries = |header: &str| header_value(header).is_some();
        if let Some(refusal) = server.refuse_routing_header(&path, carries, observed) {
            inner.answer(&refusal);
            return Action::Pause;
        }
        let method = || String::from_utf8_lossy(&header_value(":method").unwrap_or_default()).into_owned();
        if let Some(metadata) = server.protected_resource_metadata(&path, method) {
            inner.answer(&metadata);
            return Action::Pause;
        }
        // Most requests are not for the MCP path: one host call decides that. A request that is
        // reads the whole map once, which also has its method and length.
        if !is_mcp_path(&path, server.mcp_path()) {
            return Action::Continue;
        }
        let map = map_bytes(MapType::HttpRequestHeaders, usize::MAX);
        let pairs: Vec<HeaderPair<'_>> = header_pairs(&map).collect();
        let headers = match server.admit_headers(&path, &pairs, &mut inner.observed) {
            Ok(headers) => headers,
            Err(refusal) => {
                inner.answer(&refusal);
                return Action::Pause;
            }
        };
        if end_of_stream {
            drop(inner);
            self.handle(&headers, &[]);
            return Action::Pause;
        }
        inner.state = State::ReadingBody(headers);
        // The host turns a paused header phase into "stop everything", and then no body
        // callback would come: let the headers go on, and pause in the body phase. The `buffer`
        // filter after this one holds them back from the router (see envoy/).
        Action::Continue
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        let mut inner = self.inner.borrow_mut();
        match &inner.state {
            State::PassThrough => return Action::Continue,
            State::ReadingBody(_) => {
                let server = Rc::clone(&inner.server);
                if let Some(refusal) = server.refuse_body_over_limit(body_size, &mut inner.observed) {
                    inner.answer(&refusal);
                    return Action::Pause;
                }
                if end_of_stream {
                    drop(inner);
                    return self.body_complete(body_size);
                }
            }
            // Envoy buffers the body until it is complete (or answers 413 past its limit).
            _ => {}
        }
        Action::Pause
    }

    /// A request with trailers ends with them, not with its last body chunk.
    fn on_http_request_trailers(&mut self, _trailers: usize) -> Action {
        let reading = match &self.inner.borrow().state {
            State::PassThrough => return Action::Continue,
            State::ReadingBody(_) => true,
            _ => false,
        };
        if reading {
            return self.body_complete(usize::MAX);
        }
        Action::Pause
    }
}

impl Exchange {
    fn body_complete(&mut self, body_size: usize) -> Action {
        let state = std::mem::replace(&mut self.inner.borrow_mut().state, State::Answered);
        let State::ReadingBody(headers) = state else {
            return Action::Pause;
        };
        let body = buffer(BufferType::HttpRequestBody, body_size);
        self.handle(&headers, &body);
        Action::Pause
    }
}

impl Inner {
    fn handle(&mut self, headers: &McpHeaders, body: &[u8], context_id: u32, weak: &Weak<RefCell<Inner>>) {
        let origin = self.server.origin(&Facts);
        let cancel_key = |request_id| origin.cancel_key(headers, request_id);
        let request = origin.request(headers, body, Some(&self.counters));
        match self.server.handle(request, &mut self.observed) {
            Outcome::Respond(response) => self.answer(&response),
            Outcome::Cancel { request_id, response } => {
                if let Some(key) = cancel_key(&request_id) {
                    cancels::file(&self.shared, &key);
                }
                self.answer(&response);
            }
            Outcome::Await(reply) => {
                self.cancel = reply.cancellable_id().and_then(cancel_key).map(|key| (key, now()));
                self.state = State::AwaitingUpstream(reply);
                self.start_calls(context_id, weak);
            }
        }
    }

    /// The client cancelled the request: its streams are cancelled already; it is answered
    /// with no JSON-RPC response.
    pub(crate) fn cancelled(&mut self) {
        let State::AwaitingUpstream(reply) = std::mem::replace(&mut self.state, State::Answered) else {
            return;
        };
        let cancelled = self.server.cancel(reply, now(), &mut self.observed);
        self.stop_streams(&cancelled.calls);
        // Proxy-wasm has sent nothing yet: the whole answer is here.
        if let Some(response) = cancelled.response {
            self.send(&response);
        }
    }

    /// The request is gone (its client closed the connection, or Envoy reset it): Envoy does
    /// not cancel the gRPC streams of a Wasm context that goes, so they are cancelled here, and
    /// the calls counted as cancelled.
    fn abandoned(&mut self) {
        let State::AwaitingUpstream(reply) = std::mem::replace(&mut self.state, State::Answered) else {
            return;
        };
        let cancelled = self.server.cancel(reply, now(), &mut self.observed);
        self.stop_streams(&cancelled.calls);
        self.stats.publish(&self.observed);
    }

    /// Cancels the gRPC streams among `calls` (callouts end with their context), and forgets
    /// their deadlines.
    fn stop_streams(&self, calls: &[u64]) {
        for token in calls.iter().filter(|token| *token & STREAM != 0) {
            if let Ok(stream) = u32::try_from(token & !STREAM) {
                self.clock.remove(stream);
                // Cancelling one the tick cancelled already is refused, harmlessly.
                let _ = hostcalls::cancel_grpc_stream(stream);
            }
        }
    }

    /// Whether a stream message of `size` bytes, not read yet, would pass a bound.
    fn refuses_message(&mut self, token: u32, size: usize) -> bool {
        let Inner { server, state, .. } = self;
        let State::AwaitingUpstream(reply) = state else {
            return false;
        };
        server.admits_message(reply, STREAM | u64::from(token), size).stop
    }

    /// A part of a stream's answer; whether a bound now stops it.
    fn heard(&mut self, token: u32, part: CallPart<'_>) -> bool {
        let Inner { server, state, .. } = self;
        let State::AwaitingUpstream(reply) = state else {
            return false;
        };
        server.heard(reply, STREAM | u64::from(token), part).stop
    }

    /// The call under `token` has ended: it is filed, and the calls waiting start.
    pub(crate) fn ended(&mut self, token: u64, reset: bool, context_id: u32, weak: &Weak<RefCell<Inner>>) {
        if let Ok(stream) = u32::try_from(token & !STREAM) {
            self.clock.remove(stream);
        }
        let Inner {
            server,
            observed,
            state,
            ..
        } = self;
        let State::AwaitingUpstream(reply) = state else {
            return;
        };
        server.call_ended(reply, token, reset, now(), observed);
        self.start_calls(context_id, weak);
    }

    /// Starts the calls the reply may have out now, and sends it once none is out or waiting.
    fn start_calls(&mut self, context_id: u32, weak: &Weak<RefCell<Inner>>) {
        self.start_calls_from(context_id, weak, false);
    }

    /// The answer to a callout the root context started for this request (a task's poll),
    /// with its headers, body size and trailers; then the calls that may start next.
    pub(crate) fn adopted_call_answered(
        &mut self,
        token: u32,
        (headers, body_size, trailers): (usize, usize, usize),
        context_id: u32,
        weak: &Weak<RefCell<Inner>>,
    ) {
        if let State::AwaitingUpstream(reply) = &mut self.state {
            let read = || call_response(headers, body_size, trailers);
            let observed = &mut self.observed;
            self.server
                .call_answered(reply, u64::from(token), body_size, read, now(), observed);
        }
        self.start_calls_from(context_id, weak, true);
    }

    /// [`Self::start_calls`], from the root context (`from_root`: its tick, or a callout it
    /// was handed): each callout started is filed with the clock as this request's, for the
    /// root to hand its answer back.
    pub(crate) fn start_calls_from(&mut self, context_id: u32, weak: &Weak<RefCell<Inner>>, from_root: bool) {
        let Inner {
            server,
            observed,
            state,
            clock,
            ..
        } = self;
        let State::AwaitingUpstream(reply) = state else {
            return;
        };
        let start = |call: &UpstreamCall| match call.kind() {
            CallKind::Unary => call_out(call.cluster(), &call.http_headers(), call.http_body(), call.timeout())
                .map(|token| {
                    if from_root {
                        clock.adopt(token, context_id, weak.clone());
                    }
                    u64::from(token)
                })
                .map_err(|status| {
                    warn!("cannot call cluster {:?}: {status:?}", call.cluster());
                    format!("{status:?}")
                }),
            _ => open_stream(call, context_id, clock, weak, self.cancel).map(|token| STREAM | u64::from(token)),
        };
        if !server.start_calls(reply, start, now(), observed) {
            // A task's next poll: the root context's tick wakes the request then.
            if let Some(at) = reply.next_wake() {
                clock.wake(Wake {
                    at,
                    context_id,
                    owner: weak.clone(),
                });
            }
            return;
        }
        if let State::AwaitingUpstream(reply) = std::mem::replace(&mut self.state, State::Answered) {
            self.send(&reply.into_response());
        }
    }

    fn answer(&mut self, response: &HttpResponse) {
        self.state = State::Answered;
        self.send(response);
    }

    /// Sends the answer, after what the request told (for the stats and the access log).
    fn send(&self, response: &HttpResponse) {
        self.stats.publish(&self.observed);
        log_fields(&self.observed);
        let body = (!response.body.is_empty()).then_some(response.body.as_slice());
        if let Err(status) = hostcalls::send_http_response(u32::from(response.status), response.header_pairs(), body) {
            error!("cannot send the reply: {status:?}");
        }
        self.stats.record_memory();
    }
}

/// Opens a gRPC stream for `call`, sends its request messages and half-closes it, and gives it
/// a deadline on the VM's clock; its answer comes to the context's `on_grpc_stream_*`.
fn open_stream(
    call: &UpstreamCall,
    context_id: u32,
    clock: &StreamClock<Inner>,
    weak: &Weak<RefCell<Inner>>,
    cancel: Option<(CancelKey, Duration)>,
) -> Result<u32, String> {
    let (service, method) = call.service_and_method();
    let mut metadata: Vec<(&str, &[u8])> = call.metadata().map(|(key, value)| (key, value.as_bytes())).collect();
    // Sent so that the upstream can stop too; Envoy's gRPC client keeps no deadline itself.
    metadata.push(("grpc-timeout", call.grpc_timeout().as_bytes()));
    let token = hostcalls::open_grpc_stream(call.cluster(), service, method, metadata).map_err(|status| {
        warn!("cannot open a gRPC stream on cluster {:?}: {status:?}", call.cluster());
        format!("{status:?}")
    })?;
    let messages = call.request_messages();
    let sent = match messages.split_last() {
        None => hostcalls::send_grpc_stream_message(token, None, true),
        Some((last, first)) => first
            .iter()
            .try_for_each(|message| hostcalls::send_grpc_stream_message(token, Some(message), false))
            .and_then(|()| hostcalls::send_grpc_stream_message(token, Some(last), true)),
    };
    if let Err(status) = sent {
        let _ = hostcalls::cancel_grpc_stream(token);
        return Err(format!("cannot send on the gRPC stream: {status:?}"));
    }
    clock.add(OpenStream {
        deadline: now() + call.timeout(),
        cancel,
        context_id,
        token,
        owner: weak.clone(),
    });
    Ok(token)
}

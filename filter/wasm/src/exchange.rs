//! One HTTP request through the filter: an adapter from proxy-wasm's callbacks to the core's
//! [`Exchange`](switchblade_core::host_api::Exchange), and from what it asks to host calls. A
//! unary call is one HTTP callout, answered whole. A streaming call is a gRPC stream of Envoy's
//! (its messages come one by one, so a bound can stop it at once); its deadline is kept by the
//! root context's tick ([`crate::tick`]), which ends the call on this request's behalf, and so
//! is a cancellation heard on another request (filed in shared data, where the tick reads it).
//! Proxy-wasm answers a request once and whole, so the progress notifications of a streaming
//! call go out with its result.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Duration;

use log::{error, warn};
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext};
use proxy_wasm::types::{Action, BufferType, MapType};
use switchblade_core::host_api::{
    self, Answer, CallKind, CallPart, CancelKey, Counters, ExchangeHost, HeaderCopy, HeaderPair, Observations,
    OpenStream, RequestFacts, RequestHandle, RequestHead, Server, Step, Timetable, TokenPayloadSource, UpstreamCall,
};

use crate::host_io::{
    buffer, call_out, call_response, header_pairs, header_value, log_fields, map_bytes, now, Facts, HeaderMapBytes,
    SharedData,
};
use crate::stats::Stats;

/// The VM's open streams, wake-ups and calls started from the tick, which each request writes
/// and the root context's tick reads.
pub(crate) type Clock = Rc<RefCell<Timetable<Owner>>>;

/// A request, as the root context reaches it: its HTTP context, and its state.
#[derive(Clone)]
pub(crate) struct Owner {
    pub(crate) context_id: u32,
    pub(crate) inner: Weak<RefCell<Inner>>,
}

impl RequestHandle for Owner {
    fn id(&self) -> u32 {
        self.context_id
    }

    fn is_gone(&self) -> bool {
        self.inner.strong_count() == 0
    }
}

/// One HTTP request through the filter, as the SDK holds it.
pub(crate) struct Exchange {
    inner: Rc<RefCell<Inner>>,
}

/// The request, which the root context also reaches (a stream's deadline, a poll due).
pub(crate) struct Inner {
    server: Rc<Server>,
    exchange: host_api::Exchange<Handle>,
    host: Host,
}

/// What the core's exchange asks of the host, done with proxy-wasm's host calls.
pub(crate) struct Host {
    /// This request, for the root context to act on its behalf.
    owner: Owner,
    stats: Rc<Stats>,
    /// The plugin's shared data (`SharedData`), as the core takes it: the rate limits'
    /// counters, and cancellations.
    counters: Counters,
    clock: Clock,
    /// The trailing metadata of each stream, until it closes with its status.
    trailing: HashMap<u32, HeaderMapBytes>,
    /// The key a client's `notifications/cancelled` names this request by, and when it came:
    /// for a lone streaming call, whose stream the tick ends if it is cancelled.
    cancel: Option<(CancelKey, Duration)>,
    /// The host acts from the root context (its tick, or a callout it was handed): each callout
    /// started is filed with the clock as this request's, for the root to hand its answer back.
    from_root: bool,
    /// The request is gone (its context is done): what it told goes to the stats only.
    gone: bool,
}

/// What the host knows a call by. Callouts and gRPC streams are numbered apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handle {
    Callout(u32),
    Stream(u32),
}

impl Exchange {
    pub(crate) fn new(
        context_id: u32,
        server: Rc<Server>,
        stats: Rc<Stats>,
        shared: Arc<SharedData>,
        clock: Clock,
    ) -> Self {
        let counters: Counters = shared;
        let inner = Rc::new_cyclic(|owner| {
            RefCell::new(Inner {
                server,
                exchange: host_api::Exchange::default(),
                host: Host {
                    owner: Owner {
                        context_id,
                        inner: owner.clone(),
                    },
                    stats,
                    counters,
                    clock,
                    trailing: HashMap::new(),
                    cancel: None,
                    from_root: false,
                    gone: false,
                },
            })
        });
        Exchange { inner }
    }
}

impl Context for Exchange {
    fn on_done(&mut self) -> bool {
        if let Ok(mut inner) = self.inner.try_borrow_mut() {
            let Inner { server, exchange, host } = &mut *inner;
            host.gone = true;
            exchange.request_gone(server, host);
        }
        true
    }

    fn on_http_call_response(&mut self, token: u32, headers: usize, body_size: usize, trailers: usize) {
        self.inner
            .borrow_mut()
            .call_answered(token, (headers, body_size, trailers), false);
    }

    fn on_grpc_stream_initial_metadata(&mut self, token: u32, _count: u32) {
        let headers = HeaderCopy::from_iter([(":status", "200")]);
        self.inner.borrow_mut().stream_heard(token, CallPart::Headers(headers));
    }

    fn on_grpc_stream_message(&mut self, token: u32, size: usize) {
        let mut inner = self.inner.borrow_mut();
        let Inner { server, exchange, host } = &mut *inner;
        let stream = Handle::Stream(token);
        // A message past the bound stops the stream before it is copied into the VM, whose
        // memory never shrinks.
        if exchange.message_coming(server, host, stream, size) {
            let message = buffer(BufferType::GrpcReceiveBuffer, size);
            exchange.call_heard(server, host, stream, CallPart::Message(&message));
        }
    }

    fn on_grpc_stream_trailing_metadata(&mut self, token: u32, count: u32) {
        let trailers = map_bytes(MapType::GrpcReceiveTrailingMetadata, count as usize);
        self.inner.borrow_mut().host.trailing.insert(token, trailers);
    }

    fn on_grpc_stream_close(&mut self, token: u32, status: u32) {
        let mut inner = self.inner.borrow_mut();
        let Inner { server, exchange, host } = &mut *inner;
        // The status comes as a number; its message (raw bytes, maybe not UTF-8, which the
        // SDK's status reader would panic on) is in the trailing metadata, if it came.
        let heard = host.trailing.remove(&token).unwrap_or_default();
        host.clock.borrow_mut().close(token);
        let stream = Handle::Stream(token);
        let status_text = status.to_string();
        let trailers = HeaderCopy::sized_from(
            header_pairs(&heard)
                .filter(|&(name, _)| name != "grpc-status")
                .chain([("grpc-status", status_text.as_bytes())]),
        );
        let headers = HeaderCopy::from_iter([(":status", "200")]);
        exchange.call_heard(server, host, stream, CallPart::Headers(headers));
        exchange.call_heard(server, host, stream, CallPart::Trailers(trailers));
        exchange.call_ended(server, host, stream, false);
    }
}

impl HttpContext for Exchange {
    fn on_http_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        let mut inner = self.inner.borrow_mut();
        let Inner { server, exchange, host } = &mut *inner;
        match exchange.request_headers(server, host, &RequestHeaders, end_of_stream) {
            // The host turns a paused header phase into "stop everything", and then no body
            // callback would come: the headers go on, and the body phase pauses. The `buffer`
            // filter after this one holds them back from the router (see envoy/).
            // (Never routed: this host makes no request a call.)
            Step::Continue | Step::ReadBody | Step::Routed => Action::Continue,
            Step::Waiting | Step::Answered => Action::Pause,
        }
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        let mut inner = self.inner.borrow_mut();
        let Inner { server, exchange, host } = &mut *inner;
        let read = || buffer(BufferType::HttpRequestBody, body_size);
        // Envoy buffers the body until it is complete (or answers 413 past its limit).
        match exchange.request_body(server, host, body_size, end_of_stream, read) {
            Step::Continue => Action::Continue,
            _ => Action::Pause,
        }
    }

    /// A request with trailers ends with them, not with its last body chunk.
    fn on_http_request_trailers(&mut self, _trailers: usize) -> Action {
        let mut inner = self.inner.borrow_mut();
        let Inner { server, exchange, host } = &mut *inner;
        let read = || buffer(BufferType::HttpRequestBody, usize::MAX);
        match exchange.request_trailers(server, host, read) {
            Step::Continue => Action::Continue,
            _ => Action::Pause,
        }
    }
}

impl Inner {
    /// The answer to a callout (`from_root`: one the root context started for this request, a
    /// task's poll), with its headers, body size and trailers; then the calls that may start.
    pub(crate) fn call_answered(
        &mut self,
        token: u32,
        (headers, body_size, trailers): (usize, usize, usize),
        from_root: bool,
    ) {
        let read = || call_response(headers, body_size, trailers);
        let callout = Handle::Callout(token);
        self.event(from_root, |exchange, server, host| {
            exchange.call_answered(server, host, callout, body_size, read)
        });
    }

    fn stream_heard(&mut self, token: u32, part: CallPart<'_>) {
        self.event(false, |exchange, server, host| {
            exchange.call_heard(server, host, Handle::Stream(token), part)
        });
    }

    /// The root context's tick ended the stream under `token` at its deadline (it is
    /// cancelled already, and out of the timetable): the call ends with what came so far.
    pub(crate) fn stream_deadline_passed(&mut self, token: u32) {
        self.event(true, |exchange, server, host| {
            exchange.call_ended(server, host, Handle::Stream(token), true)
        });
    }

    /// The client cancelled the request (heard by the root context's tick).
    pub(crate) fn cancelled(&mut self) {
        self.event(true, |exchange, server, host| exchange.cancelled(server, host));
    }

    /// A task's next poll is due (the root context's tick).
    pub(crate) fn wake(&mut self) {
        self.event(true, |exchange, server, host| exchange.wake(server, host));
    }

    /// Hands an event to the core's exchange, with the host acting from the root context
    /// (`from_root`) or from the request's own.
    fn event(&mut self, from_root: bool, event: impl FnOnce(&mut host_api::Exchange<Handle>, &Server, &mut Host)) {
        let Inner { server, exchange, host } = self;
        host.from_root = from_root;
        event(exchange, server, host);
        host.from_root = false;
    }
}

impl Host {
    /// Opens a gRPC stream for `call`, sends its request messages and half-closes it, and gives
    /// it a deadline on the VM's clock; its answer comes to the context's `on_grpc_stream_*`.
    fn open_stream(&self, call: &UpstreamCall) -> Result<u32, String> {
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
        self.clock.borrow_mut().open(OpenStream {
            token,
            deadline: now() + call.timeout(),
            cancel: self.cancel,
            request: self.owner.clone(),
        });
        Ok(token)
    }
}

impl ExchangeHost for Host {
    type CallHandle = Handle;

    fn now(&self) -> Duration {
        now()
    }

    fn counters(&self) -> Option<&Counters> {
        Some(&self.counters)
    }

    fn sends_in_parts(&self) -> bool {
        false
    }

    /// Proxy-wasm cannot make the request itself a call: every call is called out.
    fn routes_calls(&self) -> bool {
        false
    }

    fn route_call(&mut self, _: &UpstreamCall, _: &str) {}

    fn start_call(&mut self, call: &UpstreamCall) -> Result<Handle, String> {
        Ok(match call.kind() {
            CallKind::Unary => {
                let token = call_out(call.cluster(), &call.http_headers(), call.http_body(), call.timeout()).map_err(
                    |status| {
                        warn!("cannot call cluster {:?}: {status:?}", call.cluster());
                        format!("{status:?}")
                    },
                )?;
                if self.from_root {
                    self.clock.borrow_mut().adopt(token, self.owner.clone());
                }
                Handle::Callout(token)
            }
            _ => Handle::Stream(self.open_stream(call)?),
        })
    }

    /// A callout cannot be cancelled; it ends with its context. A stream is cancelled (one the
    /// tick cancelled already is refused, harmlessly).
    fn reset_call(&mut self, call: Handle) {
        if let Handle::Stream(token) = call {
            self.clock.borrow_mut().close(token);
            let _ = hostcalls::cancel_grpc_stream(token);
        }
    }

    fn publish(&mut self, observed: &Observations) {
        self.stats.publish(observed);
        if !self.gone {
            log_fields(observed);
        }
    }

    fn send(&mut self, answer: Answer<'_>) {
        let Answer::Whole(response) = answer else {
            // Never asked of a host that does not send in parts.
            error!("cannot send an answer in parts");
            return;
        };
        let body = (!response.body.is_empty()).then_some(response.body.as_slice());
        if let Err(status) = hostcalls::send_http_response(u32::from(response.status), response.header_pairs(), body) {
            error!("cannot send the reply: {status:?}");
        }
        self.stats.record_memory();
    }

    fn wake_at(&mut self, at: Duration) -> bool {
        self.clock.borrow_mut().wake(at, self.owner.clone());
        true
    }

    fn listen_for_cancel(&mut self, key: CancelKey) {
        self.cancel = Some((key, now()));
    }

    fn file_cancel(&mut self, key: &CancelKey) {
        key.file_in(&*self.counters, now());
    }
}

impl RequestFacts for Host {
    fn token_payload(&self, source: &TokenPayloadSource) -> Option<Vec<u8>> {
        Facts.token_payload(source)
    }

    fn client_address(&self) -> Option<String> {
        Facts.client_address()
    }
}

/// The request's headers, read from the host. Most requests are not for the MCP path: one host
/// call decides that; a request that is reads the whole map once.
struct RequestHeaders;

impl RequestHead for RequestHeaders {
    fn header(&self, name: &str) -> Option<Vec<u8>> {
        header_value(name)
    }

    fn read_all<R>(&self, read: impl FnOnce(&[HeaderPair<'_>]) -> R) -> R {
        let map = map_bytes(MapType::HttpRequestHeaders, usize::MAX);
        let pairs: Vec<HeaderPair<'_>> = header_pairs(&map).collect();
        read(&pairs)
    }
}

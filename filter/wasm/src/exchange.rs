//! One HTTP request through the filter: an adapter from proxy-wasm's callbacks to the core's
//! [`Exchange`](switchblade_core::host_api::Exchange), and from what it asks to host calls. A
//! unary call is one HTTP callout, answered whole; a streaming call is one of Envoy's gRPC
//! streams, whose deadline and cancellation the root context's tick keeps ([`crate::tick`]).
//! Proxy-wasm answers a request once and whole: progress notifications go with the result.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Duration;

use log::error;
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext};
use proxy_wasm::types::{Action, BufferType, MapType};
use switchblade_core::host_api::{
    Answer, CallKind, CancelKey, Counters, Exchange as Core, ExchangeHost, HeaderPair, Observations, OpenStream,
    RequestFacts, RequestHandle, RequestHead, Server, Step, Timetable, TokenPayloadSource, UpstreamCall,
};

use crate::host_io::{
    buffer, call_out, call_response, header_pairs, header_value, log_fields, map_bytes, now, HeaderMapBytes,
};
use crate::stats::Stats;

/// The VM's open streams, wake-ups and calls started from the tick: requests write it, the
/// root context's tick reads it.
pub(crate) type Clock = Rc<RefCell<Timetable<Owner>>>;

/// A request, as the root context reaches it.
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

/// The request, which the root context's tick also reaches.
pub(crate) struct Inner {
    server: Arc<Server>,
    exchange: Core<Handle>,
    host: Host,
}

/// What every request of a VM shares.
#[derive(Clone)]
pub(crate) struct Vm {
    pub(crate) stats: Rc<Stats>,
    /// The plugin's shared data: the rate limits' counters, and cancellations.
    pub(crate) counters: Counters,
    pub(crate) clock: Clock,
}

/// What the core's exchange asks of the host, done with proxy-wasm's host calls.
pub(crate) struct Host {
    owner: Owner,
    vm: Vm,
    /// Each stream's trailing metadata, until it closes with its status.
    trailing: HashMap<u32, HeaderMapBytes>,
    /// The key a `notifications/cancelled` names this request by, and when it came.
    cancel: Option<(CancelKey, Duration)>,
    /// Acting from the root context: a callout started is filed with the clock, for the root
    /// to hand its answer back.
    from_root: bool,
    /// The request is gone: what it told goes to the stats only.
    gone: bool,
}

/// What the host knows a call by: callouts and gRPC streams are numbered apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handle {
    Callout(u32),
    Stream(u32),
}

impl Exchange {
    pub(crate) fn new(context_id: u32, server: Arc<Server>, vm: Vm) -> Self {
        let inner = Rc::new_cyclic(|inner| {
            let owner = Owner {
                context_id,
                inner: inner.clone(),
            };
            let (trailing, cancel, from_root, gone) = (HashMap::new(), None, false, false);
            let host = Host {
                owner,
                vm,
                trailing,
                cancel,
                from_root,
                gone,
            };
            RefCell::new(Inner {
                server,
                exchange: Core::default(),
                host,
            })
        });
        Exchange { inner }
    }

    /// Hands one of the request's own events to the core's exchange.
    fn event<R>(&self, event: impl FnOnce(&mut Core<Handle>, &Server, &mut Host) -> R) -> R {
        self.inner.borrow_mut().event(false, event)
    }
}

impl Inner {
    /// Hands an event to the core's exchange, the host acting from the root context
    /// (`from_root`) or from the request's own.
    pub(crate) fn event<R>(
        &mut self,
        from_root: bool,
        event: impl FnOnce(&mut Core<Handle>, &Server, &mut Host) -> R,
    ) -> R {
        let Inner { server, exchange, host } = self;
        host.from_root = from_root;
        let result = event(exchange, server, host);
        host.from_root = false;
        result
    }
}

impl Context for Exchange {
    fn on_done(&mut self) -> bool {
        if let Ok(mut inner) = self.inner.try_borrow_mut() {
            inner.host.gone = true;
            inner.event(false, |exchange, server, host| exchange.request_gone(server, host));
        }
        true
    }

    fn on_http_call_response(&mut self, token: u32, headers: usize, body_size: usize, trailers: usize) {
        let read = || call_response(headers, body_size, trailers);
        let call = Handle::Callout(token);
        self.event(|exchange, server, host| exchange.call_answered(server, host, call, body_size, read));
    }

    fn on_grpc_stream_initial_metadata(&mut self, token: u32, _count: u32) {
        self.event(|exchange, server, host| exchange.stream_began(server, host, Handle::Stream(token)));
    }

    fn on_grpc_stream_message(&mut self, token: u32, size: usize) {
        // Read only if the core takes it: one past a bound never enters the VM's memory.
        let read = || buffer(BufferType::GrpcReceiveBuffer, size);
        self.event(|exchange, server, host| exchange.stream_message(server, host, Handle::Stream(token), size, read));
    }

    fn on_grpc_stream_trailing_metadata(&mut self, token: u32, count: u32) {
        let trailers = map_bytes(MapType::GrpcReceiveTrailingMetadata, count as usize);
        self.inner.borrow_mut().host.trailing.insert(token, trailers);
    }

    /// The status's message is read from the trailing metadata as bytes: the SDK's status
    /// reader panics on one that is not UTF-8.
    fn on_grpc_stream_close(&mut self, token: u32, status: u32) {
        self.event(|exchange, server, host| {
            let trailing = host.trailing.remove(&token).unwrap_or_default();
            host.vm.clock.borrow_mut().close(token);
            exchange.stream_closed(server, host, Handle::Stream(token), status, header_pairs(&trailing));
        });
    }
}

impl HttpContext for Exchange {
    fn on_http_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        match self
            .event(|exchange, server, host| exchange.request_headers(server, host, &RequestHeaders, end_of_stream))
        {
            // A paused header phase would stop the body callbacks too: the headers go on, and
            // the `buffer` filter after this one holds them back from the router (see envoy/).
            Step::Continue | Step::ReadBody | Step::Routed => Action::Continue,
            Step::Waiting | Step::Answered => Action::Pause,
        }
    }

    /// Envoy buffers the body until it is complete (or answers 413 past its limit).
    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        let read = || buffer(BufferType::HttpRequestBody, body_size);
        body_action(
            self.event(|exchange, server, host| exchange.request_body(server, host, body_size, end_of_stream, read)),
        )
    }

    /// A request with trailers ends with them, not with its last body chunk.
    fn on_http_request_trailers(&mut self, _trailers: usize) -> Action {
        let read = || buffer(BufferType::HttpRequestBody, usize::MAX);
        body_action(self.event(|exchange, server, host| exchange.request_trailers(server, host, read)))
    }
}

/// A body phase goes on only for a request that is not the exchange's.
fn body_action(step: Step) -> Action {
    match step {
        Step::Continue => Action::Continue,
        _ => Action::Pause,
    }
}

impl Host {
    /// Opens a gRPC stream for `call`, sends its messages and half-closes it, and files its
    /// deadline with the clock.
    fn open_stream(&self, call: &UpstreamCall) -> Result<u32, String> {
        let (service, method) = call.service_and_method();
        let token = hostcalls::open_grpc_stream(call.cluster(), service, method, call.stream_metadata())
            .map_err(|status| format!("cannot open a gRPC stream: {status:?}"))?;
        let messages = call.request_messages();
        let last = messages.len().saturating_sub(1);
        let sent = match messages.is_empty() {
            true => hostcalls::send_grpc_stream_message(token, None, true),
            false => (messages.iter().enumerate()).try_for_each(|(index, message)| {
                hostcalls::send_grpc_stream_message(token, Some(message), index == last)
            }),
        };
        if let Err(status) = sent {
            let _ = hostcalls::cancel_grpc_stream(token);
            return Err(format!("cannot send on the gRPC stream: {status:?}"));
        }
        let deadline = now() + call.timeout();
        let request = self.owner.clone();
        self.vm.clock.borrow_mut().open(OpenStream {
            token,
            deadline,
            cancel: self.cancel,
            request,
        });
        Ok(token)
    }
}

/// Proxy-wasm neither sends an answer in parts nor makes the request itself a call.
impl ExchangeHost for Host {
    type CallHandle = Handle;

    fn now(&self) -> Duration {
        now()
    }

    fn counters(&self) -> Option<&Counters> {
        Some(&self.vm.counters)
    }

    fn start_call(&mut self, call: &UpstreamCall) -> Result<Handle, String> {
        let handle = match call.kind() {
            CallKind::Unary => {
                let token = call_out(call.cluster(), &call.http_headers(), call.http_body(), call.timeout())
                    .map_err(|status| format!("{status:?}"))?;
                if self.from_root {
                    self.vm.clock.borrow_mut().adopt(token, self.owner.clone());
                }
                Handle::Callout(token)
            }
            _ => Handle::Stream(self.open_stream(call)?),
        };
        Ok(handle)
    }

    /// A callout cannot be cancelled; it ends with its context. A stream the tick cancelled
    /// already refuses harmlessly.
    fn reset_call(&mut self, call: Handle) {
        if let Handle::Stream(token) = call {
            self.vm.clock.borrow_mut().close(token);
            let _ = hostcalls::cancel_grpc_stream(token);
        }
    }

    fn publish(&mut self, observed: &Observations) {
        observed.samples().iter().for_each(|sample| self.vm.stats.add(sample));
        if !self.gone {
            log_fields(observed);
        }
    }

    fn send(&mut self, answer: Answer<'_>) {
        let Answer::Whole(response) = answer else {
            error!("cannot send an answer in parts");
            return;
        };
        let body = (!response.body.is_empty()).then_some(response.body.as_slice());
        if let Err(status) = hostcalls::send_http_response(u32::from(response.status), response.header_pairs(), body) {
            error!("cannot send the reply: {status:?}");
        }
        self.vm.stats.record_memory();
    }

    fn wake_at(&mut self, at: Duration) -> bool {
        self.vm.clock.borrow_mut().wake(at, self.owner.clone());
        true
    }

    fn listen_for_cancel(&mut self, key: CancelKey) {
        self.cancel = Some((key, now()));
    }

    fn file_cancel(&mut self, key: &CancelKey) {
        key.file_in(&*self.vm.counters, now());
    }
}

impl RequestFacts for Host {
    /// The stream's dynamic metadata, serialized whole (the core picks the namespace and key),
    /// or a filter state object's value.
    fn token_payload(&self, source: &TokenPayloadSource) -> Option<Vec<u8>> {
        let path = match source {
            TokenPayloadSource::Metadata { .. } => vec!["metadata"],
            TokenPayloadSource::FilterState(name) => vec!["filter_state", name.as_str()],
        };
        hostcalls::get_property(path).ok().flatten()
    }

    fn client_address(&self) -> Option<String> {
        let bytes = hostcalls::get_property(vec!["source", "address"]).ok().flatten()?;
        String::from_utf8(bytes).ok()
    }
}

/// The request's headers: one host call each until the core reads them all (an MCP request's).
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

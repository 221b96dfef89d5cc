//! Switchblade as a proxy-wasm filter: moves request bytes into the core's
//! [`Server`](switchblade_core::server::Server) and its answers back to Envoy, and makes the
//! upstream calls it asks for. Host calls only; every decision is the core's.
//!
//! Host calls go through `hostcalls` directly, which return errors instead of panicking as the
//! SDK's trait helpers do: a panic would kill the VM for every later request. Header and
//! metadata values are read as bytes: the SDK's string readers panic on a value that is not
//! UTF-8, which a client (any header) or an upstream (`grpc-message`) can send.
//!
//! Upstream calls use gRPC streams, the API that hands over trailers (and with them
//! `grpc-status-details-bin`). Streams have no timeout of their own, so the root context keeps
//! the deadlines of every call in flight and ends overdue calls on its tick.

#![cfg(target_arch = "wasm32")]

use std::borrow::Cow;
use std::cell::RefCell;
use std::rc::{Rc, Weak};
use std::time::Duration;

use log::{error, info, warn};
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, BufferType, Bytes, ContextType, LogLevel, MapType, MetricType, Status};
use switchblade_core::http::{route, HttpResponse, McpHeaders, Route};
use switchblade_core::server::{McpRequest, Outcome, Reply, Server};
use switchblade_core::upstream::{CallEnd, Deadlines, GrpcReply, Received, UpstreamCall};

/// How often overdue calls are looked for: the precision of deadlines.
const DEADLINE_TICK: Duration = Duration::from_millis(25);
/// Ticks between two readings of the VM's memory (one a second).
const MEMORY_EVERY_TICKS: u32 = 40;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(Root { server: None, deadlines: Rc::default(), memory_gauge: None, ticks: 0 })
    });
}}

/// One per VM and configuration: holds the server every request shares, and the deadlines.
struct Root {
    server: Option<Rc<Server>>,
    deadlines: Rc<RefCell<Deadlines<CallInFlight>>>,
    /// `switchblade.vm_memory_bytes`: this VM's linear memory, which Envoy does not report.
    memory_gauge: Option<u32>,
    ticks: u32,
}

/// A call in flight, as its deadline knows it: the request's context and the stream.
struct CallInFlight {
    context_id: u32,
    token: u32,
    exchange: Weak<RefCell<Core>>,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _configuration_size: usize) -> bool {
        let bytes = match hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX) {
            Ok(bytes) => bytes.unwrap_or_default(),
            Err(status) => {
                error!("cannot read the plugin configuration: {status:?}");
                return false;
            }
        };
        let started = hostcalls::get_current_time().ok();
        match Server::from_config_bytes(&bytes) {
            Ok(server) => {
                let took = started
                    .zip(hostcalls::get_current_time().ok())
                    .and_then(|(start, end)| end.duration_since(start).ok())
                    .map_or_else(String::new, |took| {
                        format!(" (catalog built in {} ms)", took.as_millis())
                    });
                info!(
                    "serving {} tools at {}{took}",
                    server.catalog().tool_count(),
                    server.mcp_path()
                );
                self.server = Some(Rc::new(server));
                self.memory_gauge = hostcalls::define_metric(MetricType::Gauge, "switchblade.vm_memory_bytes").ok();
                if let Err(status) = hostcalls::set_tick_period(DEADLINE_TICK) {
                    error!("cannot start the deadline timer: {status:?}");
                    return false;
                }
                true
            }
            Err(problem) => {
                error!("invalid plugin configuration: {problem}");
                false
            }
        }
    }

    fn on_tick(&mut self) {
        self.ticks = self.ticks.wrapping_add(1);
        if let (Some(gauge), 0) = (self.memory_gauge, self.ticks % MEMORY_EVERY_TICKS) {
            let bytes = core::arch::wasm32::memory_size(0) * 65536;
            let _ = hostcalls::record_metric(gauge, u64::try_from(bytes).unwrap_or(u64::MAX));
        }
        let Ok(now) = hostcalls::get_current_time() else { return };
        let overdue = self.deadlines.borrow_mut().take_overdue(now);
        for call in overdue {
            let Some(exchange) = call.exchange.upgrade() else {
                continue;
            };
            // Host calls below act for the request's own context, not the root's.
            if hostcalls::set_effective_context(call.context_id).is_err() {
                continue;
            }
            let _ = hostcalls::cancel_grpc_stream(call.token);
            exchange.borrow_mut().end(call.token, CallEnd::DeadlinePassed);
        }
    }

    fn create_http_context(&self, context_id: u32) -> Option<Box<dyn HttpContext>> {
        let server = self.server.clone()?;
        let core = Rc::new(RefCell::new(Core {
            server,
            state: State::PassThrough,
        }));
        Some(Box::new(Exchange {
            context_id,
            core,
            deadlines: Rc::clone(&self.deadlines),
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

enum State {
    PassThrough,
    ReadingBody(McpHeaders),
    AwaitingUpstream(Reply),
    Answered,
}

/// One HTTP request through the filter. Its state is shared with the root context, which
/// ends overdue calls.
struct Exchange {
    context_id: u32,
    core: Rc<RefCell<Core>>,
    deadlines: Rc<RefCell<Deadlines<CallInFlight>>>,
}

struct Core {
    server: Rc<Server>,
    state: State,
}

impl Context for Exchange {
    fn on_grpc_stream_message(&mut self, token: u32, message_size: usize) {
        let limit = self.core.borrow().server.limits().max_response_bytes;
        if message_size > limit {
            let _ = hostcalls::cancel_grpc_stream(token);
            self.forget_deadline(token);
            self.core
                .borrow_mut()
                .end(token, CallEnd::TooLarge { size: message_size });
            return;
        }
        let message = hostcalls::get_buffer(BufferType::GrpcReceiveBuffer, 0, message_size).unwrap_or_else(|status| {
            warn!("cannot read the gRPC reply: {status:?}");
            None
        });
        if let Some(received) = self.core.borrow_mut().received(token) {
            received.message = message;
        }
    }

    fn on_grpc_stream_trailing_metadata(&mut self, token: u32, _elements: u32) {
        let details = metadata_value(MapType::GrpcReceiveTrailingMetadata, "grpc-status-details-bin");
        let grpc_message = metadata_value(MapType::GrpcReceiveTrailingMetadata, "grpc-message");
        if let Some(received) = self.core.borrow_mut().received(token) {
            received.details = details;
            received.grpc_message = grpc_message;
        }
    }

    fn on_grpc_stream_close(&mut self, token: u32, status_code: u32) {
        self.forget_deadline(token);
        // Closed by the upstream; closing this side too lets Envoy release the stream.
        let _ = hostcalls::close_grpc_stream(token);
        let Some((call, received)) = self.core.borrow_mut().take(token) else {
            return;
        };
        // The host's status message is the upstream's grpc-message as a string, which the SDK
        // cannot read when it is not UTF-8; ask the host only when the upstream said nothing
        // (then the words are Envoy's own, such as a connection failure).
        let message = match &received.grpc_message {
            Some(bytes) => Some(String::from_utf8_lossy(bytes)),
            None => hostcalls::get_grpc_status()
                .ok()
                .and_then(|(_, message)| message)
                .map(Cow::Owned),
        };
        let grpc = GrpcReply {
            status: status_code,
            message: message.as_deref(),
            body: received.message.as_deref().unwrap_or_default(),
            details: received.details.as_deref(),
        };
        self.core.borrow_mut().file(&call, CallEnd::Replied(grpc));
    }
}

impl HttpContext for Exchange {
    fn on_http_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        let method = request_header(":method").unwrap_or_default();
        let path = request_header(":path").unwrap_or_default();
        let server = Rc::clone(&self.core.borrow().server);
        match route(&method, &path, server.mcp_path()) {
            Route::PassThrough => Action::Continue,
            Route::MethodNotAllowed => {
                self.core.borrow_mut().answer(&HttpResponse::method_not_allowed());
                Action::Pause
            }
            Route::Mcp => {
                let limit = server.limits().max_request_bytes;
                let declared = request_header("content-length").and_then(|length| length.trim().parse::<usize>().ok());
                if let Some(length) = declared.filter(|length| *length > limit) {
                    // Refused before a byte of the body is buffered.
                    self.core.borrow_mut().answer(&HttpResponse::too_large(length, limit));
                    return Action::Pause;
                }
                let headers = mcp_headers(server.forward_headers());
                if end_of_stream {
                    self.handle(&headers, &[]);
                    return Action::Pause;
                }
                self.core.borrow_mut().state = State::ReadingBody(headers);
                // The host turns a paused header phase into "stop everything", and then no body
                // callback would come: let the headers go on, and pause in the body phase. The
                // `buffer` filter after this one holds them back from the router (see envoy/).
                Action::Continue
            }
        }
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        let headers = {
            let mut core = self.core.borrow_mut();
            let limit = core.server.limits().max_request_bytes;
            match &core.state {
                State::PassThrough => return Action::Continue,
                // A body without Content-Length is refused as soon as it outgrows the limit,
                // before Envoy's own buffer limit answers in plain text.
                State::ReadingBody(_) if body_size > limit => {
                    core.answer(&HttpResponse::too_large(body_size, limit));
                    return Action::Pause;
                }
                State::ReadingBody(_) if end_of_stream => {}
                // Envoy buffers the body until it is complete (or answers 413 past its limit).
                _ => return Action::Pause,
            }
            let State::ReadingBody(headers) = std::mem::replace(&mut core.state, State::Answered) else {
                return Action::Pause;
            };
            headers
        };
        let body = hostcalls::get_buffer(BufferType::HttpRequestBody, 0, body_size)
            .unwrap_or_else(|status| {
                warn!("cannot read the request body: {status:?}");
                None
            })
            .unwrap_or_default();
        self.handle(&headers, &body);
        Action::Pause
    }
}

impl Exchange {
    fn handle(&mut self, headers: &McpHeaders, body: &[u8]) {
        let server = Rc::clone(&self.core.borrow().server);
        match server.handle(McpRequest { headers, body }) {
            Outcome::Respond(response) => self.core.borrow_mut().answer(&response),
            Outcome::Await(reply) => self.dispatch(reply),
        }
    }

    fn dispatch(&mut self, mut reply: Reply) {
        let server = Rc::clone(&self.core.borrow().server);
        let now = hostcalls::get_current_time().ok();
        for call in reply.take_calls_to_start() {
            match open_call(&call) {
                Ok(token) => {
                    if let Some(now) = now {
                        let in_flight = CallInFlight {
                            context_id: self.context_id,
                            token,
                            exchange: Rc::downgrade(&self.core),
                        };
                        self.deadlines.borrow_mut().add(now + call.timeout(), in_flight);
                    }
                    reply.started(token, call);
                }
                Err(status) => {
                    warn!("cannot call cluster {:?}: {status:?}", call.cluster());
                    let reason = format!("{status:?}");
                    server.file(&mut reply, &call, CallEnd::NotStarted { reason: &reason });
                }
            }
        }
        let mut core = self.core.borrow_mut();
        core.state = State::AwaitingUpstream(reply);
        core.send_if_complete();
    }

    fn forget_deadline(&self, token: u32) {
        self.deadlines.borrow_mut().forget(|call| call.token == token);
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        // A request that ends early (the client went away) leaves no deadline behind.
        if let State::AwaitingUpstream(reply) = &self.core.borrow().state {
            let mut deadlines = self.deadlines.borrow_mut();
            for token in reply.tokens() {
                deadlines.forget(|call| call.token == token);
            }
        }
    }
}

impl Core {
    fn received(&mut self, token: u32) -> Option<&mut Received> {
        match &mut self.state {
            State::AwaitingUpstream(reply) => reply.received(token),
            _ => None,
        }
    }

    fn take(&mut self, token: u32) -> Option<(UpstreamCall, Received)> {
        match &mut self.state {
            State::AwaitingUpstream(reply) => reply.take(token),
            _ => None,
        }
    }

    /// Ends the call on `token`, if it is still out, with what the filter itself decided.
    fn end(&mut self, token: u32, end: CallEnd<'_>) {
        if let Some((call, _)) = self.take(token) {
            self.file(&call, end);
        }
    }

    /// Files how a call ended; the reply goes out once no call is left.
    fn file(&mut self, call: &UpstreamCall, end: CallEnd<'_>) {
        let Core { server, state } = self;
        if let State::AwaitingUpstream(reply) = state {
            server.file(reply, call, end);
        }
        self.send_if_complete();
    }

    /// Sends the reply once no call is out any more.
    fn send_if_complete(&mut self) {
        if matches!(&self.state, State::AwaitingUpstream(reply) if reply.is_complete()) {
            if let State::AwaitingUpstream(reply) = std::mem::replace(&mut self.state, State::Answered) {
                send(&reply.into_response());
            }
        }
    }

    fn answer(&mut self, response: &HttpResponse) {
        self.state = State::Answered;
        send(response);
    }
}

/// Opens a gRPC stream for a unary call and sends its one message, with the deadline as
/// `grpc-timeout`.
fn open_call(call: &UpstreamCall) -> Result<u32, Status> {
    let timeout = call.grpc_timeout();
    let mut metadata: Vec<(&str, &[u8])> = call.metadata().map(|(name, value)| (name, value.as_bytes())).collect();
    metadata.push(("grpc-timeout", timeout.as_bytes()));
    let token = hostcalls::open_grpc_stream(call.cluster(), call.service(), call.method(), metadata)?;
    if let Err(status) = hostcalls::send_grpc_stream_message(token, Some(call.message()), true) {
        let _ = hostcalls::cancel_grpc_stream(token);
        return Err(status);
    }
    Ok(token)
}

/// All the headers the MCP endpoint reads, from one host call (duplicates stay visible). A
/// value that is not UTF-8 is read with U+FFFD in place of the bad bytes: it then matches no
/// version, media type or origin, and is refused as such.
fn mcp_headers(forward: &[String]) -> McpHeaders {
    match hostcalls::get_map_bytes(MapType::HttpRequestHeaders) {
        Ok(pairs) => {
            // Borrowed when the value is valid UTF-8, as it almost always is.
            let values: Vec<Cow<'_, str>> = pairs.iter().map(|(_, value)| String::from_utf8_lossy(value)).collect();
            McpHeaders::from_pairs(
                pairs
                    .iter()
                    .zip(&values)
                    .map(|((name, _), value)| (name.as_str(), value.as_ref())),
                forward,
            )
        }
        Err(status) => {
            warn!("cannot read the request headers: {status:?}");
            McpHeaders::default()
        }
    }
}

fn request_header(name: &str) -> Option<String> {
    metadata_value(MapType::HttpRequestHeaders, name).map(|value| String::from_utf8_lossy(&value).into_owned())
}

/// One header or gRPC metadata value, as bytes.
fn metadata_value(map: MapType, name: &str) -> Option<Bytes> {
    hostcalls::get_map_value_bytes(map, name).ok().flatten()
}

fn send(response: &HttpResponse) {
    let body = (!response.body.is_empty()).then_some(response.body.as_slice());
    if let Err(status) = hostcalls::send_http_response(u32::from(response.status), response.headers.clone(), body) {
        error!("cannot send the reply: {status:?}");
    }
}

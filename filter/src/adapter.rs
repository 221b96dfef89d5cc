//! The proxy-wasm glue: moves request bytes into [`Server`] and its answers back to Envoy.
//!
//! Host calls go through `hostcalls` directly, which return errors instead of panicking
//! as the SDK's trait helpers do: a panic would kill the VM for every later request. Header
//! and metadata values are read as bytes: the SDK's string readers panic on a value that is
//! not UTF-8, which a client (any header) or an upstream (`grpc-message`) can send.
//!
//! Upstream calls use gRPC streams, the API that hands over trailers (and with them
//! `grpc-status-details-bin`). Streams have no timeout of their own, so the root context
//! keeps the deadlines of every call in flight and ends overdue calls on its tick.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};
use std::time::{Duration, SystemTime};

use log::{error, info, warn};
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, BufferType, Bytes, ContextType, LogLevel, MapType, MetricType, Status};

use crate::http::{route, HttpResponse, McpHeaders, Route};
use crate::server::{GrpcReply, McpRequest, Outcome, Reply, Server, UpstreamCall};

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
    deadlines: Rc<RefCell<Deadlines>>,
    /// `switchblade.vm_memory_bytes`: this VM's linear memory, which Envoy does not report.
    memory_gauge: Option<u32>,
    ticks: u32,
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
                    server.catalog().len(),
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
        for deadline in overdue {
            let Some(exchange) = deadline.exchange.upgrade() else {
                continue;
            };
            // Host calls below act for the request's own context, not the root's.
            if hostcalls::set_effective_context(deadline.context_id).is_err() {
                continue;
            }
            let _ = hostcalls::cancel_grpc_stream(deadline.token);
            exchange.borrow_mut().deadline_passed(deadline.token);
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

/// The deadlines of the calls in flight on this VM.
#[derive(Default)]
struct Deadlines {
    entries: Vec<Deadline>,
}

struct Deadline {
    at: SystemTime,
    context_id: u32,
    token: u32,
    exchange: Weak<RefCell<Core>>,
}

impl Deadlines {
    fn take_overdue(&mut self, now: SystemTime) -> Vec<Deadline> {
        // Every tick asks; almost every time the answer is none, so that costs no allocation.
        if !self.entries.iter().any(|d| d.at <= now) {
            return Vec::new();
        }
        let (overdue, pending) = std::mem::take(&mut self.entries).into_iter().partition(|d| d.at <= now);
        self.entries = pending;
        overdue
    }

    fn remove(&mut self, token: u32) {
        self.entries.retain(|deadline| deadline.token != token);
    }
}

enum State {
    PassThrough,
    ReadingBody(McpHeaders),
    AwaitingUpstream {
        reply: Reply,
        calls: HashMap<u32, InFlight>,
    },
    Answered,
}

/// A call on a gRPC stream, and what has come back on it so far.
struct InFlight {
    call: UpstreamCall,
    message: Option<Bytes>,
    details: Option<Bytes>,
    /// The upstream's `grpc-message`, from its trailers (Envoy hands over the headers of a
    /// trailers-only answer as trailers too; `test_faults.py` checks both).
    grpc_message: Option<Bytes>,
}

/// One HTTP request through the filter. Its state is shared with the root context, which
/// ends overdue calls.
struct Exchange {
    context_id: u32,
    core: Rc<RefCell<Core>>,
    deadlines: Rc<RefCell<Deadlines>>,
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
            self.deadlines.borrow_mut().remove(token);
            self.core.borrow_mut().too_large(token, message_size);
            return;
        }
        let message = hostcalls::get_buffer(BufferType::GrpcReceiveBuffer, 0, message_size).unwrap_or_else(|status| {
            warn!("cannot read the gRPC reply: {status:?}");
            None
        });
        if let Some(in_flight) = self.core.borrow_mut().in_flight(token) {
            in_flight.message = message;
        }
    }

    fn on_grpc_stream_trailing_metadata(&mut self, token: u32, _elements: u32) {
        let details = metadata_value(MapType::GrpcReceiveTrailingMetadata, "grpc-status-details-bin");
        let grpc_message = metadata_value(MapType::GrpcReceiveTrailingMetadata, "grpc-message");
        if let Some(in_flight) = self.core.borrow_mut().in_flight(token) {
            in_flight.details = details;
            in_flight.grpc_message = grpc_message;
        }
    }

    fn on_grpc_stream_close(&mut self, token: u32, status_code: u32) {
        self.deadlines.borrow_mut().remove(token);
        // Closed by the upstream; closing this side too lets Envoy release the stream.
        let _ = hostcalls::close_grpc_stream(token);
        let upstream_said = self
            .core
            .borrow_mut()
            .in_flight(token)
            .and_then(|in_flight| in_flight.grpc_message.take());
        // The host's status message is the upstream's grpc-message as a string, which the SDK
        // cannot read when it is not UTF-8; ask the host only when the upstream said nothing
        // (then the words are Envoy's own, such as a connection failure).
        let message = match upstream_said {
            Some(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
            None => hostcalls::get_grpc_status().ok().and_then(|(_, message)| message),
        };
        self.core.borrow_mut().closed(token, status_code, message.as_deref());
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
            Outcome::Await(reply, calls) => self.dispatch(reply, calls),
        }
    }

    fn dispatch(&mut self, mut reply: Reply, calls: Vec<UpstreamCall>) {
        let server = Rc::clone(&self.core.borrow().server);
        let now = hostcalls::get_current_time().ok();
        let mut in_flight = HashMap::with_capacity(calls.len());
        for call in calls {
            match open_call(&call) {
                Ok(token) => {
                    if let Some(now) = now {
                        self.deadlines.borrow_mut().entries.push(Deadline {
                            at: now + call.tool.timeout,
                            context_id: self.context_id,
                            token,
                            exchange: Rc::downgrade(&self.core),
                        });
                    }
                    in_flight.insert(
                        token,
                        InFlight {
                            call,
                            message: None,
                            details: None,
                            grpc_message: None,
                        },
                    );
                }
                Err(status) => {
                    warn!("cannot call cluster {:?}: {status:?}", call.tool.cluster);
                    server.dispatch_failed(&mut reply, &call, &format!("{status:?}"));
                }
            }
        }
        let mut core = self.core.borrow_mut();
        core.state = State::AwaitingUpstream {
            reply,
            calls: in_flight,
        };
        core.send_if_complete();
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        // A request that ends early (the client went away) leaves no deadline behind.
        if let State::AwaitingUpstream { calls, .. } = &self.core.borrow().state {
            let mut deadlines = self.deadlines.borrow_mut();
            for token in calls.keys() {
                deadlines.remove(*token);
            }
        }
    }
}

impl Core {
    fn in_flight(&mut self, token: u32) -> Option<&mut InFlight> {
        match &mut self.state {
            State::AwaitingUpstream { calls, .. } => calls.get_mut(&token),
            _ => None,
        }
    }

    fn closed(&mut self, token: u32, status_code: u32, message: Option<&str>) {
        self.finish(token, |server, reply, in_flight| {
            let grpc = GrpcReply {
                status: status_code,
                message,
                body: in_flight.message.as_deref().unwrap_or_default(),
                details: in_flight.details.as_deref(),
            };
            server.complete(reply, &in_flight.call, grpc);
        });
    }

    fn too_large(&mut self, token: u32, size: usize) {
        self.finish(token, |server, reply, in_flight| {
            server.response_too_large(reply, &in_flight.call, size)
        });
    }

    fn deadline_passed(&mut self, token: u32) {
        self.finish(token, |server, reply, in_flight| {
            server.deadline_passed(reply, &in_flight.call)
        });
    }

    /// Ends the call on `token`: the server files its result, and the reply goes out once no
    /// call is left.
    fn finish(&mut self, token: u32, file: impl FnOnce(&Server, &mut Reply, InFlight)) {
        let State::AwaitingUpstream { reply, calls } = &mut self.state else {
            return;
        };
        let Some(in_flight) = calls.remove(&token) else { return };
        file(&self.server, reply, in_flight);
        self.send_if_complete();
    }

    /// Sends the reply once no call is out any more.
    fn send_if_complete(&mut self) {
        let done = matches!(&self.state, State::AwaitingUpstream { calls, .. } if calls.is_empty());
        if !done {
            return;
        }
        if let State::AwaitingUpstream { reply, .. } = std::mem::replace(&mut self.state, State::Answered) {
            send(&reply.into_response());
        }
    }

    fn answer(&mut self, response: &HttpResponse) {
        self.state = State::Answered;
        send(response);
    }
}

/// Opens a gRPC stream for a unary call and sends its one message. The deadline also travels
/// as `grpc-timeout`, so the upstream can stop working on an answer nobody will read.
fn open_call(call: &UpstreamCall) -> Result<u32, Status> {
    let tool = &call.tool;
    let timeout = grpc_timeout(tool.timeout);
    let mut metadata: Vec<(&str, &[u8])> = call
        .metadata
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_bytes()))
        .collect();
    metadata.push(("grpc-timeout", timeout.as_bytes()));
    let token = hostcalls::open_grpc_stream(&tool.cluster, tool.service_name(), tool.method_name(), metadata)?;
    if let Err(status) = hostcalls::send_grpc_stream_message(token, Some(&call.message), true) {
        let _ = hostcalls::cancel_grpc_stream(token);
        return Err(status);
    }
    Ok(token)
}

/// `grpc-timeout` in milliseconds (at most 8 digits, as the gRPC spec allows).
fn grpc_timeout(timeout: Duration) -> String {
    format!("{}m", timeout.as_millis().min(99_999_999))
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

//! The proxy-wasm glue: moves request bytes into [`Server`] and its answers back to Envoy.
//!
//! Host calls go through `hostcalls` directly, which return errors instead of panicking
//! as the SDK's trait helpers do: a panic would kill the VM for every later request.

use std::collections::HashMap;
use std::rc::Rc;

use log::{error, info, warn};
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, BufferType, Bytes, ContextType, LogLevel, MapType, Status};

use crate::http::{route, HttpResponse, McpHeaders, Route};
use crate::server::{GrpcReply, McpRequest, Outcome, Reply, Server, UpstreamCall};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root { server: None }) });
}}

/// One per VM and configuration: holds the server every request shares.
struct Root {
    server: Option<Rc<Server>>,
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
                true
            }
            Err(problem) => {
                error!("invalid plugin configuration: {problem}");
                false
            }
        }
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        let server = self.server.clone()?;
        Some(Box::new(Exchange {
            server,
            state: State::PassThrough,
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
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

/// A call on a gRPC stream: the stream API is the one that hands over trailers, and with
/// them `grpc-status-details-bin`.
struct InFlight {
    call: UpstreamCall,
    message: Option<Bytes>,
    details: Option<Bytes>,
}

/// One HTTP request through the filter.
struct Exchange {
    server: Rc<Server>,
    state: State,
}

impl Exchange {
    fn in_flight(&mut self, token: u32) -> Option<&mut InFlight> {
        match &mut self.state {
            State::AwaitingUpstream { calls, .. } => calls.get_mut(&token),
            _ => None,
        }
    }
}

impl Context for Exchange {
    fn on_grpc_stream_message(&mut self, token: u32, message_size: usize) {
        let message = hostcalls::get_buffer(BufferType::GrpcReceiveBuffer, 0, message_size).unwrap_or_else(|status| {
            warn!("cannot read the gRPC reply: {status:?}");
            None
        });
        if let Some(in_flight) = self.in_flight(token) {
            in_flight.message = message;
        }
    }

    fn on_grpc_stream_trailing_metadata(&mut self, token: u32, _elements: u32) {
        let details = hostcalls::get_map_value_bytes(MapType::GrpcReceiveTrailingMetadata, "grpc-status-details-bin")
            .ok()
            .flatten();
        if let Some(in_flight) = self.in_flight(token) {
            in_flight.details = details;
        }
    }

    fn on_grpc_stream_close(&mut self, token: u32, status_code: u32) {
        let State::AwaitingUpstream { reply, calls } = &mut self.state else {
            warn!("gRPC stream closed for a request that is not waiting for one");
            return;
        };
        let Some(in_flight) = calls.remove(&token) else {
            warn!("gRPC stream closed with an unknown token {token}");
            return;
        };
        let message = match hostcalls::get_grpc_status() {
            Ok((_, message)) => message,
            Err(_) => None,
        };
        let grpc = GrpcReply {
            status: status_code,
            message: message.as_deref(),
            body: in_flight.message.as_deref().unwrap_or_default(),
            details: in_flight.details.as_deref(),
        };
        self.server.complete(reply, &in_flight.call, grpc);
        self.send_if_complete();
    }
}

impl HttpContext for Exchange {
    fn on_http_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        let method = request_header(":method").unwrap_or_default();
        let path = request_header(":path").unwrap_or_default();
        match route(&method, &path, self.server.mcp_path()) {
            Route::PassThrough => Action::Continue,
            Route::MethodNotAllowed => {
                self.answer(&HttpResponse::method_not_allowed());
                Action::Pause
            }
            Route::Mcp => {
                let headers = mcp_headers(self.server.forward_headers());
                if end_of_stream {
                    self.handle(&headers, &[]);
                    return Action::Pause;
                }
                self.state = State::ReadingBody(headers);
                // The host turns a paused header phase into "stop everything", and then no body
                // callback would come: let the headers go on, and pause in the body phase. The
                // `buffer` filter after this one holds them back from the router (see envoy/).
                Action::Continue
            }
        }
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        match &self.state {
            State::PassThrough => return Action::Continue,
            State::ReadingBody(_) if end_of_stream => {}
            // Envoy buffers the body until it is complete (or answers 413 past its limit).
            _ => return Action::Pause,
        }
        let State::ReadingBody(headers) = std::mem::replace(&mut self.state, State::Answered) else {
            return Action::Pause;
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
        match self.server.handle(McpRequest { headers, body }) {
            Outcome::Respond(response) => self.answer(&response),
            Outcome::Await(reply, calls) => self.dispatch(reply, calls),
        }
    }

    fn dispatch(&mut self, mut reply: Reply, calls: Vec<UpstreamCall>) {
        let mut in_flight = HashMap::with_capacity(calls.len());
        for call in calls {
            match open_call(&call) {
                Ok(token) => {
                    in_flight.insert(
                        token,
                        InFlight {
                            call,
                            message: None,
                            details: None,
                        },
                    );
                }
                Err(status) => {
                    warn!("cannot call cluster {:?}: {status:?}", call.tool.cluster);
                    self.server.dispatch_failed(&mut reply, &call, &format!("{status:?}"));
                }
            }
        }
        self.state = State::AwaitingUpstream {
            reply,
            calls: in_flight,
        };
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

/// Opens a gRPC stream for a unary call and sends its one message. The deadline travels as
/// `grpc-timeout`, for the upstream to enforce.
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
fn grpc_timeout(timeout: std::time::Duration) -> String {
    format!("{}m", timeout.as_millis().min(99_999_999))
}

/// All the headers the MCP endpoint reads, from one host call (duplicates stay visible).
fn mcp_headers(forward: &[String]) -> McpHeaders {
    match hostcalls::get_map(MapType::HttpRequestHeaders) {
        Ok(pairs) => McpHeaders::from_pairs(
            pairs.iter().map(|(name, value)| (name.as_str(), value.as_str())),
            forward,
        ),
        Err(status) => {
            warn!("cannot read the request headers: {status:?}");
            McpHeaders::default()
        }
    }
}

fn request_header(name: &str) -> Option<String> {
    hostcalls::get_map_value(MapType::HttpRequestHeaders, name)
        .ok()
        .flatten()
}

fn send(response: &HttpResponse) {
    let body = (!response.body.is_empty()).then_some(response.body.as_slice());
    if let Err(status) = hostcalls::send_http_response(u32::from(response.status), response.headers.clone(), body) {
        error!("cannot send the reply: {status:?}");
    }
}

//! The proxy-wasm glue: moves request bytes into [`Server`] and its answers back to Envoy.
//!
//! Host calls go through `hostcalls` directly, which return errors instead of panicking
//! as the SDK's trait helpers do: a panic would kill the VM for every later request.

use std::rc::Rc;

use log::{error, info, warn};
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, BufferType, ContextType, LogLevel, MapType};

use crate::http::{route, HttpResponse, Route};
use crate::server::{GrpcReply, McpRequest, Outcome, Server, UpstreamCall};

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
        match Server::from_config_bytes(&bytes) {
            Ok(server) => {
                info!(
                    "serving {} tools at {}",
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
    ReadingBody { protocol_version: Option<String> },
    AwaitingUpstream(UpstreamCall),
    Answered,
}

/// One HTTP request through the filter.
struct Exchange {
    server: Rc<Server>,
    state: State,
}

impl Context for Exchange {
    fn on_grpc_call_response(&mut self, _token_id: u32, status_code: u32, response_size: usize) {
        let State::AwaitingUpstream(call) = std::mem::replace(&mut self.state, State::Answered)
        else {
            warn!("gRPC reply for a request that is not waiting for one");
            return;
        };
        let body = if response_size == 0 {
            None
        } else {
            hostcalls::get_buffer(BufferType::GrpcReceiveBuffer, 0, response_size).unwrap_or_else(
                |status| {
                    warn!("cannot read the gRPC reply: {status:?}");
                    None
                },
            )
        };
        let message = match hostcalls::get_grpc_status() {
            Ok((_, message)) => message,
            Err(_) => None,
        };
        let reply = GrpcReply {
            status: status_code,
            message: message.as_deref(),
            body: body.as_deref().unwrap_or_default(),
        };
        send(&self.server.complete(&call, reply));
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
                let protocol_version = request_header("mcp-protocol-version");
                if end_of_stream {
                    self.handle(protocol_version.as_deref(), &[]);
                    return Action::Pause;
                }
                self.state = State::ReadingBody { protocol_version };
                // The host turns a paused header phase into "stop everything", and then no body
                // callback would come: let the headers go on, and pause in the body phase. The
                // `buffer` filter after this one holds them back from the router (see envoy/).
                Action::Continue
            }
        }
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        let State::ReadingBody { protocol_version } = &self.state else {
            return match self.state {
                State::PassThrough => Action::Continue,
                _ => Action::Pause,
            };
        };
        if !end_of_stream {
            // Envoy buffers the body until it is complete (or answers 413 past its buffer limit).
            return Action::Pause;
        }
        let protocol_version = protocol_version.clone();
        let body = hostcalls::get_buffer(BufferType::HttpRequestBody, 0, body_size)
            .unwrap_or_else(|status| {
                warn!("cannot read the request body: {status:?}");
                None
            })
            .unwrap_or_default();
        self.handle(protocol_version.as_deref(), &body);
        Action::Pause
    }
}

impl Exchange {
    fn handle(&mut self, protocol_version: Option<&str>, body: &[u8]) {
        match self.server.handle(McpRequest {
            protocol_version,
            body,
        }) {
            Outcome::Respond(response) => self.answer(&response),
            Outcome::Call(call) => self.dispatch(call),
        }
    }

    fn dispatch(&mut self, call: UpstreamCall) {
        let tool = &call.tool;
        let dispatched = hostcalls::dispatch_grpc_call(
            &tool.cluster,
            tool.service_name(),
            tool.method_name(),
            Vec::new(),
            Some(&call.message),
            tool.timeout,
        );
        match dispatched {
            Ok(_token) => self.state = State::AwaitingUpstream(call),
            Err(status) => {
                warn!("cannot call cluster {:?}: {status:?}", tool.cluster);
                let response = self.server.dispatch_failed(&call, &format!("{status:?}"));
                self.answer(&response);
            }
        }
    }

    fn answer(&mut self, response: &HttpResponse) {
        self.state = State::Answered;
        send(response);
    }
}

fn request_header(name: &str) -> Option<String> {
    hostcalls::get_map_value(MapType::HttpRequestHeaders, name)
        .ok()
        .flatten()
}

fn send(response: &HttpResponse) {
    let body = (!response.body.is_empty()).then_some(response.body.as_slice());
    if let Err(status) =
        hostcalls::send_http_response(u32::from(response.status), response.headers.clone(), body)
    {
        error!("cannot send the reply: {status:?}");
    }
}

//! Switchblade as a proxy-wasm filter: moves request bytes into the core's
//! [`Server`](switchblade_core::server::Server) and its answers back to Envoy, and makes the
//! upstream calls it asks for. Host calls only; every decision is the core's.
//!
//! Host calls go through `hostcalls` directly, which return errors instead of panicking as the
//! SDK's trait helpers do: a panic would kill the VM for every later request. Header values are
//! read as bytes: the SDK's string readers panic on a value that is not UTF-8, which a client
//! (any header) or an upstream (`grpc-message`) can send. Maps are read only when the host says
//! they are there: the SDK panics on the status it gets for a missing one.
//!
//! Each upstream call is one HTTP callout on the service's cluster: Envoy enforces its timeout
//! and hands back headers, body and trailers in one callback.

#![cfg(target_arch = "wasm32")]

mod stats;

use std::rc::Rc;
use std::time::{Duration, UNIX_EPOCH};

use log::{error, info, warn};
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, BufferType, Bytes, ContextType, LogLevel, MapType, Status};
use switchblade_core::access::Caller;
use switchblade_core::config::TokenPayloadSource;
use switchblade_core::configure::{configure, Configured};
use switchblade_core::http::{header_pairs, is_mcp_path, HttpResponse, McpHeaders};
use switchblade_core::observe::Observations;
use switchblade_core::reflection::{ReflectionCall, Refreshed, Refresher};
use switchblade_core::server::{McpRequest, Outcome, Reply, Server};
use switchblade_core::upstream::UpstreamCall;

use crate::stats::Stats;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(Root { server: None, stats: Rc::default(), refresher: None })
    });
}}

/// How often the root context looks whether a reflection refresh is due.
const TICK: Duration = Duration::from_millis(500);

/// One per VM and configuration: holds the server every request shares.
struct Root {
    server: Option<Rc<Server>>,
    stats: Rc<Stats>,
    /// Reads the services with `from_reflection`, if there are any.
    refresher: Option<Refresher>,
}

impl Context for Root {
    fn on_http_call_response(&mut self, token: u32, headers: usize, body_size: usize, trailers: usize) {
        let Some(refresher) = self.refresher.as_mut() else {
            return;
        };
        let read = || call_response(headers, body_size, trailers);
        let refreshed = refresher.answered(u64::from(token), body_size, read, now(), start_reflection_call);
        self.refreshed(refreshed);
    }
}

impl Root {
    /// Starts a reflection refresh if one is due.
    fn refresh_if_due(&mut self) {
        let refreshed = self
            .refresher
            .as_mut()
            .and_then(|refresher| refresher.tick(now(), start_reflection_call));
        self.refreshed(refreshed);
    }

    /// A refresh ended: count it, log it, and serve its server if the API changed.
    fn refreshed(&mut self, refreshed: Option<Refreshed>) {
        let Some(refreshed) = refreshed else {
            return;
        };
        self.stats.add(&refreshed.sample());
        refreshed.log(self.server.as_ref().map_or(0, |server| server.catalog().tool_count()));
        if let Refreshed::Changed { server, .. } = refreshed {
            // Requests already in flight keep the server they started with.
            self.server = Some(Rc::from(server));
        }
    }
}

/// Starts a reflection call as a callout; its answer comes to the root context.
fn start_reflection_call(call: &ReflectionCall) -> Result<u64, String> {
    call_out(call.cluster(), call.http_headers(), call.http_body(), call.timeout())
        .map(u64::from)
        .map_err(|status| format!("{status:?}"))
}

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
        match configure(&bytes) {
            Ok(Configured { server, refresher }) => {
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
                self.stats = Rc::new(Stats::define());
                self.stats.record_memory();
                self.refresher = refresher;
                if self.refresher.is_some() {
                    if let Err(status) = hostcalls::set_tick_period(TICK) {
                        warn!("cannot set the tick period, so reflection is read once: {status:?}");
                    }
                    self.refresh_if_due();
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
        self.refresh_if_due();
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Exchange {
            server: self.server.clone()?,
            stats: Rc::clone(&self.stats),
            observed: Observations::default(),
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
    AwaitingUpstream(Reply),
    Answered,
}

/// One HTTP request through the filter.
struct Exchange {
    server: Rc<Server>,
    stats: Rc<Stats>,
    /// What this request told, published with its answer.
    observed: Observations,
    state: State,
}

impl Context for Exchange {
    fn on_http_call_response(&mut self, token: u32, headers: usize, body_size: usize, trailers: usize) {
        let State::AwaitingUpstream(reply) = &mut self.state else {
            return;
        };
        let read = || call_response(headers, body_size, trailers);
        (self.server).call_answered(reply, u64::from(token), body_size, read, now(), &mut self.observed);
        self.start_calls();
    }
}

impl HttpContext for Exchange {
    fn on_http_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        let path = header_value(":path").unwrap_or_default();
        let path = String::from_utf8_lossy(&path);
        // A header only the dynamic module may set (where it routes tool calls): refused in
        // this build too, so that one configuration means the same in both.
        let carries = |header: &str| header_value(header).is_some();
        if let Some(refusal) = self.server.refuse_routing_header(&path, carries, &mut self.observed) {
            self.answer(&refusal);
            return Action::Pause;
        }
        // Most requests are not for the MCP path: one host call decides that. A request that is
        // reads the whole map once, which also has its method and length.
        if !is_mcp_path(&path, self.server.mcp_path()) {
            return Action::Continue;
        }
        let map = map_bytes(MapType::HttpRequestHeaders, usize::MAX);
        let headers = match self
            .server
            .admit_headers(&path, &header_pairs(&map), &mut self.observed)
        {
            Ok(headers) => headers,
            Err(refusal) => {
                self.answer(&refusal);
                return Action::Pause;
            }
        };
        if end_of_stream {
            self.handle(&headers, &[]);
            return Action::Pause;
        }
        self.state = State::ReadingBody(headers);
        // The host turns a paused header phase into "stop everything", and then no body
        // callback would come: let the headers go on, and pause in the body phase. The `buffer`
        // filter after this one holds them back from the router (see envoy/).
        Action::Continue
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        match &self.state {
            State::PassThrough => return Action::Continue,
            State::ReadingBody(_) => {
                if let Some(refusal) = self.server.refuse_body_over_limit(body_size, &mut self.observed) {
                    self.answer(&refusal);
                    return Action::Pause;
                }
                if end_of_stream {
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
        match &self.state {
            State::PassThrough => Action::Continue,
            State::ReadingBody(_) => self.body_complete(usize::MAX),
            _ => Action::Pause,
        }
    }
}

impl Exchange {
    fn body_complete(&mut self, body_size: usize) -> Action {
        let State::ReadingBody(headers) = std::mem::replace(&mut self.state, State::Answered) else {
            return Action::Pause;
        };
        let body = buffer(BufferType::HttpRequestBody, body_size);
        self.handle(&headers, &body);
        Action::Pause
    }

    fn handle(&mut self, headers: &McpHeaders, body: &[u8]) {
        let caller = match self.server.access() {
            None => Caller::Anyone,
            Some(policy) => self.server.caller(token_payload(policy.source()).as_deref()),
        };
        let request = McpRequest {
            headers,
            body,
            caller: &caller,
        };
        match self.server.handle(request, &mut self.observed) {
            Outcome::Respond(response) => self.answer(&response),
            Outcome::Await(reply) => {
                self.state = State::AwaitingUpstream(reply);
                self.start_calls();
            }
        }
    }

    /// Starts the calls the reply may have out now, and sends it once none is out or waiting.
    fn start_calls(&mut self) {
        let State::AwaitingUpstream(reply) = &mut self.state else {
            return;
        };
        let start = |call: &UpstreamCall| {
            call_out(call.cluster(), call.http_headers(), call.http_body(), call.timeout())
                .map(u64::from)
                .map_err(|status| {
                    warn!("cannot call cluster {:?}: {status:?}", call.cluster());
                    format!("{status:?}")
                })
        };
        if !self.server.start_calls(reply, start, now(), &mut self.observed) {
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
        if let Err(status) = hostcalls::send_http_response(u32::from(response.status), response.headers.clone(), body) {
            error!("cannot send the reply: {status:?}");
        }
        self.stats.record_memory();
    }
}

/// The request's MCP facts as filter state `wasm.switchblade.<field>`, for the access log.
fn log_fields(observed: &Observations) {
    for (key, value) in observed.log_entries() {
        if let Err(status) = hostcalls::set_property(vec![&key], Some(value.as_bytes())) {
            warn!("cannot set {key} for the access log: {status:?}");
        }
    }
}

/// The host's clock, for the time a call is out.
fn now() -> Duration {
    hostcalls::get_current_time()
        .ok()
        .and_then(|now| now.duration_since(UNIX_EPOCH).ok())
        .unwrap_or_default()
}

/// One HTTP callout: a request sent whole to `cluster`, answered in `on_http_call_response`
/// under the token returned.
fn call_out(cluster: &str, headers: Vec<(&str, &str)>, body: &[u8], timeout: Duration) -> Result<u32, Status> {
    hostcalls::dispatch_http_call(cluster, headers, Some(body), Vec::new(), timeout)
}

/// A header map read from the host: names, and values as bytes.
type HeaderMapBytes = Vec<(String, Bytes)>;

/// The headers, body and trailers of a callout's answer, in its `on_http_call_response`.
fn call_response(headers: usize, body_size: usize, trailers: usize) -> (HeaderMapBytes, Bytes, HeaderMapBytes) {
    (
        map_bytes(MapType::HttpCallResponseHeaders, headers),
        buffer(BufferType::HttpCallResponseBody, body_size),
        map_bytes(MapType::HttpCallResponseTrailers, trailers),
    )
}

/// All of a header map that has `count` entries (unknown: `usize::MAX`), as bytes. An empty
/// map is not asked for: the SDK panics on the status the host answers for a missing one.
fn map_bytes(map: MapType, count: usize) -> HeaderMapBytes {
    if count == 0 {
        return Vec::new();
    }
    hostcalls::get_map_bytes(map).unwrap_or_else(|status| {
        warn!("cannot read {map:?}: {status:?}");
        Vec::new()
    })
}

/// One request header, as bytes.
fn header_value(name: &str) -> Option<Bytes> {
    hostcalls::get_map_value_bytes(MapType::HttpRequestHeaders, name)
        .ok()
        .flatten()
}

fn buffer(buffer: BufferType, size: usize) -> Bytes {
    hostcalls::get_buffer(buffer, 0, size)
        .unwrap_or_else(|status| {
            warn!("cannot read {buffer:?}: {status:?}");
            None
        })
        .unwrap_or_default()
}

/// The bytes where the verified token payload should be: the stream's dynamic metadata,
/// serialized whole (`envoy.config.core.v3.Metadata`; the core picks the namespace and key),
/// or a filter state object's value.
fn token_payload(source: &TokenPayloadSource) -> Option<Vec<u8>> {
    let path = match source {
        TokenPayloadSource::Metadata { .. } => vec!["metadata"],
        TokenPayloadSource::FilterState(name) => vec!["filter_state", name.as_str()],
    };
    hostcalls::get_property(path).ok().flatten()
}

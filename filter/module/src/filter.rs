//! One MCP request through the module, in safe Rust: the same core as the Wasm filter, with
//! the call path a native module has and proxy-wasm does not. A lone `tools/call` becomes the
//! request itself, rewritten into the gRPC call and forwarded by Envoy's router (the route
//! picks the cluster from a header, `routing.cluster_header`); its answer is rewritten into the
//! tool result. Batches, and configurations without the header, call out instead.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};
use std::time::{Duration, Instant};

use switchblade_core::access::Caller;
use switchblade_core::config::ConfigError;
use switchblade_core::config::TokenPayloadSource;
use switchblade_core::http::{header_pairs, is_mcp_path, HttpResponse, McpHeaders};
use switchblade_core::observe::{predefined_samples, Metric, Observations, Sample, LOG_NAMESPACE};
use switchblade_core::reflection::Refreshed;
use switchblade_core::server::{McpRequest, Outcome, Reply, Server};
use switchblade_core::upstream::{call_end, too_large, CallEnd, UpstreamCall, ROUTED_CALL_FILTER_STATE};

use crate::abi::{Body, ConfigHost, ConfigStats, HeaderMap, Stream, Ticker};
use crate::discovery::LiveCatalog;

/// How often the configuration looks whether a reflection refresh is due.
const TICK: Duration = Duration::from_millis(500);

/// One filter configuration, shared by every worker thread.
pub struct Config {
    /// The server new requests get.
    server: ServerSlot,
    /// Reads the services with `from_reflection`, if there are any.
    live: Option<LiveCatalog>,
    /// Runs the refreshes' clock; stopped (its thread joined) when the configuration goes.
    ticker: Option<Ticker>,
    /// The id of each of [`Metric::ALL`] with Envoy's labels, in order; `None` where Envoy
    /// refused it.
    metric_ids: Vec<Option<usize>>,
    /// Ids of the label sets most requests use, defined without labels (their names carry
    /// them, and Envoy gives a labeled stat the same name): using a labeled stat costs Envoy a
    /// name lookup each time, one of these an add.
    predefined_ids: HashMap<String, usize>,
}

impl Config {
    /// Builds the server, and defines its stats (Envoy allows that only now, while the
    /// configuration is made).
    pub fn from_bytes(bytes: &[u8], stats: &ConfigStats) -> Result<Self, ConfigError> {
        let (server, discovery) = Server::configure(bytes)?;
        if let Some(TokenPayloadSource::Metadata { namespace, key }) = server.access().map(|policy| policy.source()) {
            return Err(ConfigError(format!(
                "at `authorization.token_payload`: the dynamic module cannot read dynamic metadata `{namespace}` key `{key}`: \
                 Envoy 1.40's module ABI reads only top-level metadata strings, numbers and lists, and jwt_authn writes the payload as an object. \
                 Copy it into filter state with envoy.filters.http.set_filter_state before this filter \
                 (object_key \"switchblade.token_payload\", factory_key \"envoy.string\", format %DYNAMIC_METADATA({namespace}:{key})%) \
                 and set `token_payload` to {{\"filter_state\": \"switchblade.token_payload\"}}; see the README's Authorization"
            )));
        }
        let metric_ids = Metric::ALL
            .iter()
            .map(|metric| {
                let id = stats.define(metric.kind(), metric.name(), metric.label_names());
                if id.is_none() {
                    log::warn!("Envoy refused the stat {}; it is not recorded", metric.name());
                }
                id
            })
            .collect();
        let tools: Vec<&str> = server.catalog().tools().map(|tool| tool.name.as_str()).collect();
        let predefined_ids = predefined_samples(&tools)
            .iter()
            .filter_map(|sample| {
                let name = sample.name_in_namespace();
                let id = stats.define(sample.metric.kind(), &name, &[])?;
                Some((name, id))
            })
            .collect();
        log::info!(
            "serving {} tools at {} ({})",
            server.catalog().tool_count(),
            server.mcp_path(),
            match server.routing().cluster_header.as_deref() {
                Some(header) => format!("tool calls through Envoy's router, cluster in header {header}"),
                None => "tool calls as HTTP callouts".to_owned(),
            }
        );
        Ok(Config {
            server: match discovery {
                Some(_) => ServerSlot::Live(RwLock::new(Arc::new(server))),
                None => ServerSlot::Fixed(Box::new(server)),
            },
            live: discovery.map(LiveCatalog::new),
            ticker: None,
            metric_ids,
            predefined_ids,
        })
    }

    /// The server for a new request.
    fn current(&'static self) -> ServerRef {
        match &self.server {
            ServerSlot::Fixed(server) => ServerRef::Fixed(server),
            ServerSlot::Live(slot) => ServerRef::Live(Arc::clone(&slot.read().unwrap_or_else(PoisonError::into_inner))),
        }
    }

    /// How often the configuration needs its scheduled hook: only if it reads reflection.
    pub fn tick_period(&self) -> Option<Duration> {
        self.live.as_ref().map(|_| TICK)
    }

    pub fn keep_ticker(&mut self, ticker: Option<Ticker>) {
        if ticker.is_none() {
            log::warn!("cannot start the reflection clock; reflection is read once");
        }
        self.ticker = ticker;
    }

    /// The scheduled hook: starts a reflection refresh if one is due.
    pub fn tick(&self, host: &ConfigHost) {
        if let Some(refreshed) = self.live.as_ref().and_then(|live| live.tick(host)) {
            self.refreshed(host, refreshed);
        }
    }

    pub fn call_headers(&self, call: u64, headers: Vec<(String, Vec<u8>)>) {
        if let Some(live) = &self.live {
            live.headers(call, headers);
        }
    }

    pub fn call_data(&self, call: u64, data: &[u8]) {
        if let Some(live) = &self.live {
            live.data(call, data);
        }
    }

    pub fn call_trailers(&self, call: u64, trailers: Vec<(String, Vec<u8>)>) {
        if let Some(live) = &self.live {
            live.trailers(call, trailers);
        }
    }

    pub fn call_ended(&self, host: &ConfigHost, call: u64, reset: bool) {
        if let Some(refreshed) = self.live.as_ref().and_then(|live| live.ended(host, call, reset)) {
            self.refreshed(host, refreshed);
        }
    }

    /// A refresh ended: count it, and serve its server if the API changed.
    fn refreshed(&self, host: &ConfigHost, refreshed: Refreshed) {
        let sample = refreshed.sample();
        if let Some((id, labels)) = self.stat_of(&sample) {
            host.increment(id, labels, sample.value);
        }
        let ServerSlot::Live(slot) = &self.server else {
            return;
        };
        refreshed.log(
            slot.read()
                .unwrap_or_else(PoisonError::into_inner)
                .catalog()
                .tool_count(),
        );
        if let Refreshed::Changed { server, .. } = refreshed {
            *slot.write().unwrap_or_else(PoisonError::into_inner) = Arc::from(server);
        }
    }

    /// Where a sample goes: its label set's own stat if it has one, or its metric with labels.
    fn stat_of<'a>(&self, sample: &'a Sample<'_>) -> Option<(usize, &'a [&'a str])> {
        if let Some(id) = self.predefined_ids.get(&sample.name_in_namespace()) {
            return Some((*id, &[]));
        }
        let index = Metric::ALL.iter().position(|known| *known == sample.metric)?;
        let id = self.metric_ids.get(index).copied().flatten()?;
        Some((id, &sample.labels))
    }
}

/// Where a configuration keeps its server: fixed for its life, or swapped by reflection
/// (requests in flight keep the one they started with).
enum ServerSlot {
    Fixed(Box<Server>),
    Live(RwLock<Arc<Server>>),
}

/// A request's server: borrowed from a fixed slot (no count to keep on the hot path), or a
/// share of the live one.
enum ServerRef {
    Fixed(&'static Server),
    Live(Arc<Server>),
}

/// What a hook tells Envoy to do with the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Let it go on.
    Continue,
    /// Hold it (headers: the body still comes to this filter).
    Stop,
    /// Hold it, and keep the body in Envoy's buffer.
    Buffer,
    /// Hold it; the body chunk is not kept (the request was answered, or the answer replaced).
    Drop,
}

enum State {
    PassThrough,
    ReadingBody(Box<McpHeaders>),
    /// Forwarded by Envoy's router as the gRPC call; its answer becomes the tool result.
    Routed {
        reply: Reply,
        response: Response,
    },
    /// Calls out, the request held until every one has ended.
    CallingOut {
        reply: Reply,
        answers: Vec<(u64, Answer)>,
    },
    Answered,
}

/// What has come back on a call so far.
#[derive(Default)]
struct Answer {
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    /// The body's whole size, of which only what fits the limit is kept.
    size: usize,
    trailers: Vec<(String, Vec<u8>)>,
}

/// What has come of a routed call's answer so far.
#[derive(Default)]
struct Response {
    headers: Vec<(String, Vec<u8>)>,
    /// The answer outgrew `limits.max_response_bytes`: its bytes are dropped as they come.
    too_large: Option<usize>,
}

/// One HTTP request through the module.
pub struct Exchange {
    config: &'static Config,
    /// The configuration's server when the request came.
    server: ServerRef,
    state: RefCell<State>,
    /// What this request told, published with its answer.
    observed: RefCell<Observations>,
}

impl Exchange {
    pub fn new(config: &'static Config) -> Self {
        Exchange {
            config,
            server: config.current(),
            state: RefCell::new(State::PassThrough),
            observed: RefCell::default(),
        }
    }

    fn server(&self) -> &Server {
        match &self.server {
            ServerRef::Fixed(server) => server,
            ServerRef::Live(server) => server,
        }
    }

    pub fn request_headers(&self, stream: &Stream, end_of_stream: bool) -> Verdict {
        let server = self.server();
        let path = stream.header(HeaderMap::Request, ":path").unwrap_or_default();
        let path = String::from_utf8_lossy(&path);
        // Envoy chose this request's route before any filter ran: a client's routing header
        // could have chosen the routed-call route already. Refused on every path.
        let carries = |header: &str| stream.header(HeaderMap::Request, header).is_some();
        let refusal = server.refuse_routing_header(&path, carries, &mut self.observed.borrow_mut());
        if let Some(refusal) = refusal {
            return self.answer(stream, &refusal);
        }
        if !is_mcp_path(&path, server.mcp_path()) {
            return Verdict::Continue;
        }
        let map = stream.headers(HeaderMap::Request);
        let admitted = server.admit_headers(&path, &header_pairs(&map), &mut self.observed.borrow_mut());
        let headers = match admitted {
            Ok(headers) => headers,
            Err(refusal) => return self.answer(stream, &refusal),
        };
        if end_of_stream {
            return self.handle(stream, &headers, &[]);
        }
        *self.state.borrow_mut() = State::ReadingBody(Box::new(headers));
        Verdict::Stop
    }

    pub fn request_body(&self, stream: &Stream, end_of_stream: bool) -> Verdict {
        if !matches!(*self.state.borrow(), State::ReadingBody(_)) {
            return match *self.state.borrow() {
                State::PassThrough | State::Routed { .. } => Verdict::Continue,
                State::CallingOut { .. } => Verdict::Buffer,
                _ => Verdict::Drop,
            };
        }
        let size = stream.body_size(Body::BufferedRequest) + stream.body_size(Body::ReceivedRequest);
        let refusal = self
            .server()
            .refuse_body_over_limit(size, &mut self.observed.borrow_mut());
        if let Some(refusal) = refusal {
            return self.answer(stream, &refusal);
        }
        if !end_of_stream {
            return Verdict::Buffer;
        }
        self.end_of_request(stream)
    }

    pub fn request_trailers(&self, stream: &Stream) -> Verdict {
        match *self.state.borrow() {
            State::ReadingBody(_) => {}
            State::PassThrough | State::Routed { .. } => return Verdict::Continue,
            _ => return Verdict::Stop,
        }
        self.end_of_request(stream)
    }

    /// The whole request body is in: answer, route, or call out.
    fn end_of_request(&self, stream: &Stream) -> Verdict {
        let State::ReadingBody(headers) = std::mem::replace(&mut *self.state.borrow_mut(), State::Answered) else {
            return Verdict::Drop;
        };
        let mut body = stream.body(Body::BufferedRequest);
        body.extend_from_slice(&stream.body(Body::ReceivedRequest));
        self.handle(stream, &headers, &body)
    }

    fn handle(&self, stream: &Stream, headers: &McpHeaders, body: &[u8]) -> Verdict {
        let server = self.server();
        // Envoy 1.40's module ABI reads only top-level metadata values, so the token payload
        // comes through filter state (the configuration check refuses a metadata source).
        let caller = match server.access().map(|policy| policy.source()) {
            None => Caller::Anyone,
            Some(TokenPayloadSource::FilterState(key)) => server.caller(stream.filter_state(key).as_deref()),
            Some(TokenPayloadSource::Metadata { .. }) => server.caller(None),
        };
        let request = McpRequest {
            headers,
            body,
            caller: &caller,
        };
        let outcome = server.handle(request, &mut self.observed.borrow_mut());
        let mut reply = match outcome {
            Outcome::Respond(response) => return self.answer(stream, &response),
            Outcome::Await(reply) => reply,
        };
        let mut calls = reply.take_calls_to_start();
        if let (Some(cluster_header), false, 1) = (
            server.routing().cluster_header.as_deref(),
            reply.is_batch(),
            calls.len(),
        ) {
            if let Some(call) = calls.pop() {
                return self.route_call(stream, reply, call, cluster_header);
            }
        }
        let mut answers = Vec::with_capacity(calls.len());
        for call in calls {
            let headers = call.http_headers();
            match stream.start_call(call.cluster(), &headers, call.http_body(), timeout_ms(&call)) {
                Ok(id) => {
                    reply.started(id, call, now());
                    answers.push((id, Answer::default()));
                }
                Err(result) => {
                    let reason = format!("Envoy refused the call (result {result})");
                    let end = CallEnd::NotStarted { reason: &reason };
                    server.file(&mut reply, &call, end, now(), &mut self.observed.borrow_mut());
                }
            }
        }
        if reply.is_complete() {
            return self.answer(stream, &reply.into_response());
        }
        *self.state.borrow_mut() = State::CallingOut { reply, answers };
        Verdict::Buffer
    }

    /// Makes the request the gRPC call: its headers become the call's (and those Envoy needs
    /// to route and log it), its body the gRPC frame; Envoy's router forwards it.
    fn route_call(&self, stream: &Stream, mut reply: Reply, call: UpstreamCall, cluster_header: &str) -> Verdict {
        let original = stream.headers(HeaderMap::Request);
        let routed = call.routed_headers(cluster_header, &header_pairs(&original));
        for (name, _) in &original {
            if !routed.iter().any(|(kept, _)| kept == name) {
                stream.remove_header(HeaderMap::Request, name);
            }
        }
        for (name, value) in &routed {
            stream.set_header(HeaderMap::Request, name, value);
        }
        let body = call.http_body();
        // The frame goes where the body is: Envoy's buffer if it kept one, else this chunk.
        if stream.body_size(Body::BufferedRequest) > 0 {
            stream.drain_body(Body::ReceivedRequest);
            stream.replace_body(Body::BufferedRequest, body);
        } else {
            stream.replace_body(Body::ReceivedRequest, body);
        }
        if !stream.set_filter_state(ROUTED_CALL_FILTER_STATE, call.cluster()) {
            log::warn!("Envoy refused {ROUTED_CALL_FILTER_STATE}; a route that matches it will not forward this call");
        }
        stream.clear_route_cache();
        reply.started(0, call, now());
        *self.state.borrow_mut() = State::Routed {
            reply,
            response: Response::default(),
        };
        Verdict::Continue
    }

    pub fn response_headers(&self, stream: &Stream, end_of_stream: bool) -> Verdict {
        let mut state = self.state.borrow_mut();
        let State::Routed { response, .. } = &mut *state else {
            return Verdict::Continue;
        };
        response.headers = stream.headers(HeaderMap::Response);
        drop(state);
        if end_of_stream {
            // A trailers-only answer, or Envoy's own for a call it could not make.
            return self.finish_routed(stream, &[]);
        }
        Verdict::Stop
    }

    pub fn response_body(&self, stream: &Stream, end_of_stream: bool) -> Verdict {
        let mut state = self.state.borrow_mut();
        let State::Routed { response, .. } = &mut *state else {
            return Verdict::Continue;
        };
        let size = stream.body_size(Body::BufferedResponse) + stream.body_size(Body::ReceivedResponse);
        let limit = self.server().limits().max_response_bytes;
        if response.too_large.is_some() || too_large(size, limit).is_some() {
            // Not read, and not kept: only its size is told.
            response.too_large = Some(response.too_large.unwrap_or(0).max(size));
            stream.drain_body(Body::BufferedResponse);
            stream.drain_body(Body::ReceivedResponse);
            drop(state);
            return if end_of_stream {
                self.finish_routed(stream, &[])
            } else {
                Verdict::Drop
            };
        }
        drop(state);
        if end_of_stream {
            return self.finish_routed(stream, &[]);
        }
        Verdict::Buffer
    }

    pub fn response_trailers(&self, stream: &Stream) -> Verdict {
        if !matches!(*self.state.borrow(), State::Routed { .. }) {
            return Verdict::Continue;
        }
        let trailers = stream.headers(HeaderMap::ResponseTrailers);
        for (name, _) in &trailers {
            stream.remove_header(HeaderMap::ResponseTrailers, name);
        }
        self.finish_routed(stream, &trailers)
    }

    /// The routed call's answer is whole: it becomes the tool result, in place of the answer.
    fn finish_routed(&self, stream: &Stream, trailers: &[(String, Vec<u8>)]) -> Verdict {
        let State::Routed { mut reply, response } = std::mem::replace(&mut *self.state.borrow_mut(), State::Answered)
        else {
            return Verdict::Continue;
        };
        let mut body = stream.body(Body::BufferedResponse);
        body.extend_from_slice(&stream.body(Body::ReceivedResponse));
        let server = self.server();
        if let Some(call) = reply.take(0) {
            let end = match response.too_large {
                Some(size) => too_large(size, server.limits().max_response_bytes).unwrap_or(CallEnd::TooLarge { size }),
                None => call_end(&header_pairs(&response.headers), &body, &header_pairs(trailers)),
            };
            server.file(&mut reply, &call, end, now(), &mut self.observed.borrow_mut());
        }
        self.publish(stream);
        let answer = reply.into_response();
        // The answer's headers: the tool result's, nothing of the upstream's.
        for (name, _) in &response.headers {
            if name != ":status" {
                stream.remove_header(HeaderMap::Response, name);
            }
        }
        stream.set_header(HeaderMap::Response, ":status", answer.status.to_string().as_bytes());
        for (name, value) in &answer.headers {
            stream.set_header(HeaderMap::Response, name, value.as_bytes());
        }
        stream.set_header(
            HeaderMap::Response,
            "content-length",
            answer.body.len().to_string().as_bytes(),
        );
        if stream.body_size(Body::BufferedResponse) > 0 {
            stream.drain_body(Body::ReceivedResponse);
            stream.replace_body(Body::BufferedResponse, &answer.body);
        } else if !stream.replace_body(Body::ReceivedResponse, &answer.body) {
            // No body came at all (an answer that ended with its headers): Envoy makes one.
            stream.replace_body(Body::BufferedResponse, &answer.body);
        }
        Verdict::Continue
    }

    /// The parts of a call's answer as they come.
    fn answer_of(&self, call: u64, add: impl FnOnce(&mut Answer)) {
        if let State::CallingOut { answers, .. } = &mut *self.state.borrow_mut() {
            if let Some((_, answer)) = answers.iter_mut().find(|(id, _)| *id == call) {
                add(answer);
            }
        }
    }

    pub fn call_headers(&self, call: u64, headers: Vec<(String, Vec<u8>)>) {
        self.answer_of(call, |answer| answer.headers = headers);
    }

    pub fn call_data(&self, call: u64, data: &[u8]) {
        let limit = self.server().limits().max_response_bytes;
        self.answer_of(call, |answer| {
            answer.size += data.len();
            // Past the limit, only the size is kept: the answer is refused as too large.
            if too_large(answer.size, limit).is_none() {
                answer.body.extend_from_slice(data);
            }
        });
    }

    pub fn call_trailers(&self, call: u64, trailers: Vec<(String, Vec<u8>)>) {
        self.answer_of(call, |answer| answer.trailers = trailers);
    }

    /// A call has ended (`reset`: without a whole answer); the reply goes once all have.
    pub fn call_ended(&self, stream: &Stream, call: u64, reset: bool) {
        let server = self.server();
        let response = {
            let mut state = self.state.borrow_mut();
            let State::CallingOut { reply, answers } = &mut *state else {
                return;
            };
            let Some(position) = answers.iter().position(|(id, _)| *id == call) else {
                return;
            };
            let (_, answer) = answers.swap_remove(position);
            let Some(upstream_call) = reply.take(call) else {
                return;
            };
            let end = match (reset, too_large(answer.size, server.limits().max_response_bytes)) {
                (true, _) => CallEnd::Reset,
                (false, Some(too_large)) => too_large,
                (false, None) => call_end(
                    &header_pairs(&answer.headers),
                    &answer.body,
                    &header_pairs(&answer.trailers),
                ),
            };
            server.file(reply, &upstream_call, end, now(), &mut self.observed.borrow_mut());
            if !reply.is_complete() {
                return;
            }
            let State::CallingOut { reply, .. } = std::mem::replace(&mut *state, State::Answered) else {
                return;
            };
            reply.into_response()
        };
        self.publish(stream);
        send(stream, &response);
    }

    fn answer(&self, stream: &Stream, response: &HttpResponse) -> Verdict {
        *self.state.borrow_mut() = State::Answered;
        self.publish(stream);
        send(stream, response);
        Verdict::Drop
    }

    /// Adds what the request told to Envoy's stats, and to its filter state
    /// (`switchblade.<field>`) for the access log. Before the answer goes: sending it can run this
    /// stream's other hooks.
    fn publish(&self, stream: &Stream) {
        let observed = self.observed.borrow();
        for sample in observed.samples() {
            let Some((id, labels)) = self.config.stat_of(&sample) else {
                continue;
            };
            if !stream.record_metric(sample.metric.kind(), id, labels, sample.value) {
                log::warn!("Envoy refused a value for the stat {}", sample.metric.name());
            }
        }
        for (field, value) in observed.log_fields() {
            let key = format!("{LOG_NAMESPACE}.{field}");
            if !stream.set_filter_state(&key, &value) {
                log::warn!("Envoy refused {key} for the access log");
            }
        }
    }
}

/// The module's clock, for the time a call is out: monotonic, from the first reading.
pub(crate) fn now() -> Duration {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

fn send(stream: &Stream, response: &HttpResponse) {
    stream.send_response(response.status, &response.headers, &response.body);
}

/// The callout's timeout, in milliseconds (never 0, which would mean none).
fn timeout_ms(call: &UpstreamCall) -> u64 {
    u64::try_from(call.timeout().as_millis()).unwrap_or(u64::MAX).max(1)
}

//! The exchange's states against a fake stream: what it reads, rewrites, starts and sends in
//! each, with no Envoy. (The same paths run through a real Envoy in `test-harness/tests`.)

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::Instant;

use serde_json::Value;
use switchblade_core::host_api::{HeaderCopy, MetricKind, ROUTED_CALL_FILTER_STATE};

use super::*;
use crate::host::{Alarm, Body, HeaderMap, StatsHost, StreamHost};

const USERS: &str = r#""demo.users.v1.UserService": {"cluster": "users", "timeout_ms": 5000}"#;
const GET_USER: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"UserService_GetUser","arguments":{"user_id":1}}}"#;
/// demo.users.v1.User{user_id: 1, username: "ada"}, in one gRPC frame.
const USER_FRAME: &[u8] = &[0, 0, 0, 0, 7, 0x08, 1, 0x12, 3, b'a', b'd', b'a'];

/// Numbers every stat Envoy is asked to define.
struct Stats(Cell<usize>);

impl StatsHost for Stats {
    fn define(&self, _: MetricKind, _: &str, _: &[&str]) -> Option<usize> {
        self.0.set(self.0.get() + 1);
        Some(self.0.get())
    }
}

fn config(json: &str) -> &'static Config {
    let config = Config::from_bytes(json.as_bytes(), &Stats(Cell::new(0))).unwrap();
    Box::leak(Box::new(config))
}

fn routed() -> &'static Config {
    config(&format!(
        r#"{{"services": {{{USERS}}}, "routing": {{"cluster_header": "x-switchblade-cluster"}}}}"#
    ))
}

fn calling_out(limits: &str) -> &'static Config {
    config(&format!(r#"{{"services": {{{USERS}}}, "limits": {{{limits}}}}}"#))
}

type Headers = Vec<(String, Vec<u8>)>;
type TextHeaders = Vec<(String, String)>;

/// What Envoy would do for inline events: the test's closure, run inside `start_call`.
type Inline = Box<dyn Fn(&FakeStream, u64)>;

/// One stream, as a map of header maps and bodies, with everything the exchange asked of it.
#[derive(Default)]
struct FakeStream {
    maps: RefCell<HashMap<HeaderMapKey, Headers>>,
    bodies: RefCell<HashMap<BodyKey, Vec<u8>>>,
    sent: RefCell<Vec<(u16, TextHeaders, Vec<u8>)>>,
    resets: Cell<usize>,
    filter_state: RefCell<HashMap<String, String>>,
    route_cleared: Cell<usize>,
    started: RefCell<Vec<(String, TextHeaders)>>,
    /// Refuse calls with this result instead of starting them.
    refuse: Cell<Option<u32>>,
    inline: RefCell<Option<Inline>>,
    alarms: RefCell<Vec<u64>>,
    metrics: Cell<usize>,
    /// An answer sent in parts: its headers, its data so far, whether it has ended.
    streamed_headers: RefCell<Option<TextHeaders>>,
    streamed: RefCell<Vec<u8>>,
    stream_ended: Cell<bool>,
    /// Calls cancelled.
    calls_reset: RefCell<Vec<u64>>,
    /// Cancel keys listened for, with their event; and cancel keys woken.
    listening: RefCell<Vec<(String, u64)>>,
    cancelled_keys: RefCell<Vec<String>>,
    /// The names of the headers written with a value, in order.
    header_writes: RefCell<Vec<String>>,
    /// How often each header map was copied out whole.
    map_copies: RefCell<HashMap<HeaderMapKey, usize>>,
    /// The names of the headers removed, in order.
    header_removes: RefCell<Vec<(HeaderMapKey, String)>>,
    /// The bodies drained and replaced, in order (a replacement is a drain and an append in
    /// Envoy; one that fails is listed too).
    body_writes: RefCell<Vec<(&'static str, Body)>>,
}

#[derive(PartialEq, Eq, Hash)]
struct HeaderMapKey(u8);
#[derive(PartialEq, Eq, Hash)]
struct BodyKey(u8);

fn map_key(map: HeaderMap) -> HeaderMapKey {
    HeaderMapKey(map as u8)
}

fn body_key(body: Body) -> BodyKey {
    BodyKey(body as u8)
}

impl FakeStream {
    fn request(method: &str, path: &str, extra: &[(&str, &str)]) -> Self {
        let stream = FakeStream::default();
        let mut headers: Headers = vec![
            (":method".into(), method.as_bytes().to_vec()),
            (":path".into(), path.as_bytes().to_vec()),
            (":scheme".into(), b"http".to_vec()),
            ("content-type".into(), b"application/json".to_vec()),
            ("accept".into(), b"application/json, text/event-stream".to_vec()),
        ];
        headers.extend(
            extra
                .iter()
                .map(|(name, value)| ((*name).to_owned(), value.as_bytes().to_vec())),
        );
        stream.maps.borrow_mut().insert(map_key(HeaderMap::Request), headers);
        stream
    }

    fn set_map(&self, map: HeaderMap, headers: &[(&str, &[u8])]) {
        let headers = headers
            .iter()
            .map(|(name, value)| ((*name).to_owned(), value.to_vec()))
            .collect();
        self.maps.borrow_mut().insert(map_key(map), headers);
    }

    fn set_body(&self, body: Body, bytes: &[u8]) {
        self.bodies.borrow_mut().insert(body_key(body), bytes.to_vec());
    }

    fn value(&self, map: HeaderMap, name: &str) -> Option<String> {
        self.header(map, name).map(|value| String::from_utf8(value).unwrap())
    }

    /// The one answer sent, as (status, JSON).
    fn only_answer(&self) -> (u16, Value) {
        let sent = self.sent.borrow();
        assert_eq!(sent.len(), 1, "answers sent: {sent:?}");
        (sent[0].0, serde_json::from_slice(&sent[0].2).unwrap_or(Value::Null))
    }
}

impl StreamHost for FakeStream {
    fn header(&self, map: HeaderMap, name: &str) -> Option<Vec<u8>> {
        let maps = self.maps.borrow();
        let headers = maps.get(&map_key(map))?;
        headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
    }

    fn headers(&self, map: HeaderMap) -> HeaderCopy {
        *self.map_copies.borrow_mut().entry(map_key(map)).or_default() += 1;
        self.maps
            .borrow()
            .get(&map_key(map))
            .map(|headers| headers.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn set_header(&self, map: HeaderMap, name: &str, value: &[u8]) -> bool {
        let mut maps = self.maps.borrow_mut();
        let headers = maps.entry(map_key(map)).or_default();
        headers.retain(|(key, _)| key != name);
        headers.push((name.to_owned(), value.to_vec()));
        self.header_writes.borrow_mut().push(name.to_owned());
        true
    }

    fn add_header(&self, map: HeaderMap, name: &str, value: &[u8]) -> bool {
        let mut maps = self.maps.borrow_mut();
        maps.entry(map_key(map))
            .or_default()
            .push((name.to_owned(), value.to_vec()));
        self.header_writes.borrow_mut().push(name.to_owned());
        true
    }

    fn remove_header(&self, map: HeaderMap, name: &str) {
        let mut maps = self.maps.borrow_mut();
        maps.entry(map_key(map)).or_default().retain(|(key, _)| key != name);
        self.header_removes.borrow_mut().push((map_key(map), name.to_owned()));
    }

    fn body(&self, body: Body) -> Vec<u8> {
        self.bodies.borrow().get(&body_key(body)).cloned().unwrap_or_default()
    }

    fn body_size(&self, body: Body) -> usize {
        self.body(body).len()
    }

    fn replace_body(&self, body: Body, bytes: &[u8]) -> bool {
        self.body_writes.borrow_mut().push(("replace", body));
        // Like Envoy: there is a chunk to replace only inside a body hook.
        let mut bodies = self.bodies.borrow_mut();
        if matches!(body, Body::ReceivedRequest | Body::ReceivedResponse) && !bodies.contains_key(&body_key(body)) {
            return false;
        }
        bodies.insert(body_key(body), bytes.to_vec());
        true
    }

    fn drain_body(&self, body: Body) {
        self.body_writes.borrow_mut().push(("drain", body));
        if let Some(bytes) = self.bodies.borrow_mut().get_mut(&body_key(body)) {
            bytes.clear();
        }
    }

    fn send_response(&self, status: u16, headers: &[(&str, &str)], body: &[u8]) {
        let headers = headers
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        self.sent.borrow_mut().push((status, headers, body.to_vec()));
    }

    fn reset(&self) {
        self.resets.set(self.resets.get() + 1);
    }

    fn send_response_headers(&self, headers: &[(&str, &str)], end_stream: bool) {
        let headers = headers
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        assert!(
            self.streamed_headers.replace(Some(headers)).is_none(),
            "headers sent twice"
        );
        self.stream_ended.set(end_stream);
    }

    fn send_response_data(&self, data: &[u8], end_stream: bool) {
        assert!(self.streamed_headers.borrow().is_some() && !self.stream_ended.get());
        self.streamed.borrow_mut().extend_from_slice(data);
        self.stream_ended.set(end_stream);
    }

    fn reset_call(&self, call: u64) {
        self.calls_reset.borrow_mut().push(call);
    }

    fn record_metric(&self, _: MetricKind, _: usize, _: &[&str], _: u64) -> bool {
        self.metrics.set(self.metrics.get() + 1);
        true
    }

    fn set_filter_state(&self, key: &str, value: &str) -> bool {
        // Like Envoy: read-only, once per key.
        let mut state = self.filter_state.borrow_mut();
        if state.contains_key(key) {
            return false;
        }
        state.insert(key.to_owned(), value.to_owned());
        true
    }

    fn filter_state(&self, key: &str) -> Option<Vec<u8>> {
        self.filter_state
            .borrow()
            .get(key)
            .map(|value| value.as_bytes().to_vec())
    }

    fn client_address(&self) -> Option<String> {
        Some("127.0.0.1:40000".into())
    }

    fn clear_route_cache(&self) {
        self.route_cleared.set(self.route_cleared.get() + 1);
    }

    fn start_call(&self, cluster: &str, headers: &[(&str, &str)], _: &[u8], _: u64) -> Result<u64, u32> {
        if let Some(result) = self.refuse.get() {
            return Err(result);
        }
        let headers = headers
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        let id = {
            let mut started = self.started.borrow_mut();
            started.push((cluster.to_owned(), headers));
            started.len() as u64
        };
        if let Some(inline) = self.inline.borrow().as_ref() {
            inline(self, id);
        }
        Ok(id)
    }

    fn wake_at(&self, _: Instant, event: u64) -> Option<Alarm> {
        self.alarms.borrow_mut().push(event);
        Some(Alarm(Box::new(())))
    }

    fn listen_for_cancel(&self, cancel_key: &str, event: u64) -> Option<Alarm> {
        self.listening.borrow_mut().push((cancel_key.to_owned(), event));
        Some(Alarm(Box::new(())))
    }

    fn cancel_listeners(&self, cancel_key: &str) -> usize {
        self.cancelled_keys.borrow_mut().push(cancel_key.to_owned());
        1
    }
}

fn exchange(config: &'static Config) -> &'static Exchange {
    Box::leak(Box::new(Exchange::new(config)))
}

/// Sends `body` to the MCP path in one request: its headers, then its body.
fn post(exchange: &Exchange, stream: &FakeStream, body: &str) -> HookStatus {
    assert_eq!(exchange.request_headers(stream, false), HookStatus::Stop);
    stream.set_body(Body::ReceivedRequest, body.as_bytes());
    exchange.request_body(stream, true)
}

/// A successful gRPC answer to `call`, in parts.
fn answer_call(exchange: &Exchange, stream: &FakeStream, call: u64) {
    exchange.call_heard(
        stream,
        call,
        CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])),
    );
    exchange.call_heard(stream, call, CallPart::Data(USER_FRAME));
    exchange.call_heard(
        stream,
        call,
        CallPart::Trailers(HeaderCopy::from_iter([("grpc-status", "0")])),
    );
    exchange.call_ended(stream, call, false);
}

fn tool_result(answer: &Value) -> &Value {
    &answer["result"]
}

#[test]
fn other_paths_pass_through_untouched() {
    let exchange = exchange(routed());
    let stream = FakeStream::request("GET", "/healthz", &[]);
    assert_eq!(exchange.request_headers(&stream, true), HookStatus::Continue);
    assert_eq!(exchange.response_headers(&stream, false), HookStatus::Continue);
    assert!(stream.sent.borrow().is_empty());
}

#[test]
fn the_routing_header_is_refused_on_every_path() {
    for path in ["/demo.users.v1.UserService/GetUser", "/mcp"] {
        let exchange = exchange(routed());
        let stream = FakeStream::request("POST", path, &[("x-switchblade-cluster", "users")]);
        assert_eq!(exchange.request_headers(&stream, false), HookStatus::Drop);
        assert_eq!(stream.sent.borrow()[0].0, 403);
        assert_eq!(
            stream.value(HeaderMap::Request, ":path").as_deref(),
            Some(path),
            "nothing rewritten"
        );
        assert_eq!(
            stream
                .filter_state
                .borrow()
                .get("switchblade.refusal")
                .map(String::as_str),
            Some("routing_header")
        );
    }
}

#[test]
fn a_local_answer_is_sent_once() {
    let exchange = exchange(routed());
    let stream = FakeStream::request("POST", "/mcp", &[]);
    assert_eq!(
        post(exchange, &stream, r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
        HookStatus::Drop
    );
    let (status, answer) = stream.only_answer();
    assert_eq!(status, 200);
    assert_eq!(answer["result"]["tools"][0]["name"], "UserService_GetUser");
    assert!(stream.metrics.get() > 0, "stats published");
}

#[test]
fn a_routed_call_writes_only_the_headers_that_change() {
    let exchange = exchange(routed());
    let stream = FakeStream::request(
        "POST",
        "/mcp",
        &[
            ("x-request-id", "r1"),
            ("x-forwarded-proto", "http"),
            ("x-forwarded-proto", "https"),
        ],
    );
    assert_eq!(post(exchange, &stream, GET_USER), HookStatus::Continue);
    // The copy taken at admission is the one rewritten: the map is not copied out again.
    assert_eq!(stream.map_copies.borrow().get(&map_key(HeaderMap::Request)), Some(&1));
    let writes = stream.header_writes.borrow();
    for kept in [":method", ":scheme", "x-request-id"] {
        assert!(!writes.iter().any(|name| name == kept), "{kept} rewritten: {writes:?}");
    }
    for changed in [":path", "content-type", "te", "grpc-timeout", "x-switchblade-cluster"] {
        assert!(
            writes.iter().any(|name| name == changed),
            "{changed} not written: {writes:?}"
        );
    }
    // Sent twice, it is removed, then written, so that it is left once whether Envoy's write
    // replaces one value or all of them.
    let request = map_key(HeaderMap::Request);
    assert!(stream
        .header_removes
        .borrow()
        .contains(&(request, "x-forwarded-proto".to_owned())));
    assert_eq!(
        stream
            .headers(HeaderMap::Request)
            .iter()
            .filter(|&(name, _)| name == "x-forwarded-proto")
            .count(),
        1
    );
    assert_eq!(stream.value(HeaderMap::Request, ":method").as_deref(), Some("POST"));
    assert_eq!(stream.value(HeaderMap::Request, "x-request-id").as_deref(), Some("r1"));
}

#[test]
fn a_forwarded_header_sent_twice_reaches_the_routed_call_with_both_values() {
    let exchange = exchange(config(&format!(
        r#"{{"services": {{{USERS}}}, "routing": {{"cluster_header": "x-switchblade-cluster"}},
            "forward_headers": ["x-tenant"]}}"#
    )));
    let stream = FakeStream::request(
        "POST",
        "/mcp",
        &[("x-tenant", "a"), ("x-other", "1"), ("x-tenant", "b")],
    );
    assert_eq!(post(exchange, &stream, GET_USER), HookStatus::Continue);
    let tenants: Vec<Vec<u8>> = stream
        .headers(HeaderMap::Request)
        .iter()
        .filter(|&(name, _)| name == "x-tenant")
        .map(|(_, value)| value.to_vec())
        .collect();
    assert_eq!(tenants, [b"a".to_vec(), b"b".to_vec()]);
    assert_eq!(stream.value(HeaderMap::Request, "x-other"), None);
}

#[test]
fn a_routed_call_rewrites_the_request_and_then_the_answer() {
    let exchange = exchange(routed());
    let stream = FakeStream::request("POST", "/mcp", &[("x-request-id", "r1"), ("authorization", "Bearer t")]);
    assert_eq!(post(exchange, &stream, GET_USER), HookStatus::Continue);
    // The request is now the gRPC call, for the route that matches the header and filter state.
    let value = |name| stream.value(HeaderMap::Request, name);
    assert_eq!(value(":path").as_deref(), Some("/demo.users.v1.UserService/GetUser"));
    assert_eq!(value("content-type").as_deref(), Some("application/grpc"));
    assert_eq!(value("x-switchblade-cluster").as_deref(), Some("users"));
    assert_eq!(
        value("x-envoy-upstream-rq-timeout-ms").as_deref(),
        Some("6000"),
        "the deadline and a grace second"
    );
    assert_eq!(value("x-request-id").as_deref(), Some("r1"));
    assert_eq!(value("authorization"), None, "not forwarded unless configured");
    assert_eq!(stream.body(Body::ReceivedRequest), [0, 0, 0, 0, 2, 0x08, 1]);
    assert_eq!(
        stream
            .filter_state
            .borrow()
            .get(ROUTED_CALL_FILTER_STATE)
            .map(String::as_str),
        Some("users")
    );
    assert_eq!(stream.route_cleared.get(), 1);
    assert_eq!(*stream.alarms.borrow(), [DEADLINE_PASSED]);
    // The answer comes in parts; its body is copied out and drained as it comes.
    stream.set_map(
        HeaderMap::Response,
        &[
            (":status", b"200"),
            ("content-type", b"application/grpc"),
            ("x-upstream", b"1"),
        ],
    );
    assert_eq!(exchange.response_headers(&stream, false), HookStatus::Stop);
    stream.set_body(Body::ReceivedResponse, USER_FRAME);
    assert_eq!(exchange.response_body(&stream, false), HookStatus::Drop);
    assert!(stream.body(Body::ReceivedResponse).is_empty(), "drained");
    stream.bodies.borrow_mut().remove(&body_key(Body::ReceivedResponse));
    stream.set_map(HeaderMap::ResponseTrailers, &[("grpc-status", b"0")]);
    assert_eq!(exchange.response_trailers(&stream), HookStatus::Continue);
    // In its place: the tool result, with the answer's own headers only.
    assert!(stream.headers(HeaderMap::ResponseTrailers).is_empty());
    assert_eq!(stream.value(HeaderMap::Response, ":status").as_deref(), Some("200"));
    assert_eq!(
        stream.value(HeaderMap::Response, "content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(stream.value(HeaderMap::Response, "x-upstream"), None);
    let body = stream.body(Body::BufferedResponse);
    assert_eq!(
        stream.value(HeaderMap::Response, "content-length"),
        Some(body.len().to_string())
    );
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(tool_result(&answer)["structuredContent"]["username"], "ada");
    assert!(stream.sent.borrow().is_empty(), "no local reply");
    // The deadline no longer matters.
    exchange.wake(&stream, DEADLINE_PASSED);
    assert!(stream.sent.borrow().is_empty());
}

#[test]
fn the_answer_writes_its_status_over_envoys_own() {
    let exchange = exchange(routed());
    let stream = FakeStream::request("POST", "/mcp", &[]);
    assert_eq!(post(exchange, &stream, GET_USER), HookStatus::Continue);
    // Envoy's router answers a call it could not make itself: 503, no gRPC status.
    stream.set_map(
        HeaderMap::Response,
        &[(":status", b"503"), ("content-type", b"text/plain")],
    );
    assert_eq!(exchange.response_headers(&stream, true), HookStatus::Continue);
    assert_eq!(stream.value(HeaderMap::Response, ":status").as_deref(), Some("200"));
    let answer: Value = serde_json::from_slice(&stream.body(Body::BufferedResponse)).unwrap();
    assert_eq!(tool_result(&answer)["isError"], true);
}

#[test]
fn the_answer_replaces_the_upstreams_headers_with_a_write_less_for_those_it_sets() {
    for (content_types, removed) in [(1, vec!["x-upstream"]), (2, vec!["x-upstream", "content-type"])] {
        let exchange = exchange(routed());
        let stream = FakeStream::request("POST", "/mcp", &[]);
        assert_eq!(post(exchange, &stream, GET_USER), HookStatus::Continue);
        let mut upstream: Vec<(&str, &[u8])> = vec![(":status", b"200"), ("x-upstream", b"1")];
        upstream.extend(std::iter::repeat_n(
            ("content-type", b"application/grpc".as_slice()),
            content_types,
        ));
        stream.set_map(HeaderMap::Response, &upstream);
        assert_eq!(exchange.response_headers(&stream, false), HookStatus::Stop);
        stream.set_body(Body::ReceivedResponse, USER_FRAME);
        assert_eq!(exchange.response_body(&stream, false), HookStatus::Drop);
        stream.bodies.borrow_mut().remove(&body_key(Body::ReceivedResponse));
        stream.header_removes.borrow_mut().clear();
        stream.header_writes.borrow_mut().clear();
        stream.set_map(HeaderMap::ResponseTrailers, &[("grpc-status", b"0")]);
        assert_eq!(exchange.response_trailers(&stream), HookStatus::Continue);
        // `:status: 200` stays as the upstream sent it: not written again.
        assert_eq!(*stream.header_writes.borrow(), ["content-type", "content-length"]);
        assert_eq!(stream.value(HeaderMap::Response, ":status").as_deref(), Some("200"));
        let response = map_key(HeaderMap::Response);
        let removed_names = stream.header_removes.borrow();
        let removes: Vec<&str> = removed_names
            .iter()
            .filter(|(map, _)| *map == response)
            .map(|(_, name)| name.as_str())
            .collect();
        // Sent once, `content-type` is replaced by the answer's; sent twice, it is removed
        // first, so that none of the upstream's is left beside it.
        assert_eq!(removes, removed, "{content_types} content-type headers");
        assert_eq!(
            stream.value(HeaderMap::Response, "content-type").as_deref(),
            Some("application/json")
        );
        assert_eq!(stream.value(HeaderMap::Response, "x-upstream"), None);
    }
}

#[test]
fn a_routed_call_past_its_deadline_after_the_headers_is_deadline_exceeded() {
    let exchange = exchange(routed());
    let stream = FakeStream::request("POST", "/mcp", &[]);
    post(exchange, &stream, GET_USER);
    stream.set_map(HeaderMap::Response, &[(":status", b"200")]);
    assert_eq!(exchange.response_headers(&stream, false), HookStatus::Stop);
    exchange.wake(&stream, DEADLINE_PASSED);
    let (status, answer) = stream.only_answer();
    assert_eq!(status, 200);
    let text = tool_result(&answer)["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        text,
        "demo.users.v1.UserService/GetUser failed with gRPC status DEADLINE_EXCEEDED (4): no answer within the 5000 ms deadline"
    );
    // What the upstream sends later is not this exchange's any more.
    stream.set_body(Body::ReceivedResponse, USER_FRAME);
    assert_eq!(exchange.response_body(&stream, true), HookStatus::Continue);
    assert_eq!(stream.sent.borrow().len(), 1);
}

/// The request's headers, then `buffered` in a chunk the exchange has Envoy keep; `last` is
/// the chunk of the hook that ends the request, which the test then calls.
fn buffer_all_but_the_last_chunk(exchange: &Exchange, stream: &FakeStream, buffered: &str, last: &str) {
    assert_eq!(exchange.request_headers(stream, false), HookStatus::Stop);
    stream.set_body(Body::ReceivedRequest, buffered.as_bytes());
    assert_eq!(exchange.request_body(stream, false), HookStatus::Buffer);
    stream.set_body(Body::BufferedRequest, buffered.as_bytes());
    stream.set_body(Body::ReceivedRequest, last.as_bytes());
}

/// The request's body comes as `buffered` (held by Envoy after an earlier chunk) and `last`
/// (the chunk that ends the stream): the routed call must carry all of it.
fn routes_a_body_in_two_parts(buffered: &str, last: &str) {
    let exchange = exchange(routed());
    let stream = FakeStream::request("POST", "/mcp", &[]);
    buffer_all_but_the_last_chunk(exchange, &stream, buffered, last);
    assert_eq!(exchange.request_body(&stream, true), HookStatus::Continue);
    assert_eq!(
        stream.value(HeaderMap::Request, ":path").as_deref(),
        Some("/demo.users.v1.UserService/GetUser")
    );
    assert_eq!(stream.body(Body::BufferedRequest), [0, 0, 0, 0, 2, 0x08, 1]);
}

#[test]
fn a_body_split_between_envoys_buffer_and_the_last_chunk_is_read_whole() {
    let (first, last) = GET_USER.split_at(GET_USER.len() / 2);
    routes_a_body_in_two_parts(first, last);
    // HTTP/1.1: the body's bytes, buffered, then the end of the stream with no data.
    routes_a_body_in_two_parts(GET_USER, "");
}

#[test]
fn a_routed_call_writes_each_body_once_where_envoy_holds_it() {
    let exchange = exchange(routed());
    let stream = FakeStream::request("POST", "/mcp", &[]);
    // HTTP/1.1: the body buffered, then the end of the stream in an empty chunk.
    buffer_all_but_the_last_chunk(exchange, &stream, GET_USER, "");
    assert_eq!(exchange.request_body(&stream, true), HookStatus::Continue);
    // The frame replaces Envoy's buffer; the empty chunk is not drained.
    assert_eq!(
        std::mem::take(&mut *stream.body_writes.borrow_mut()),
        [("replace", Body::BufferedRequest)]
    );
    stream.set_map(
        HeaderMap::Response,
        &[(":status", b"200"), ("content-type", b"application/grpc")],
    );
    assert_eq!(exchange.response_headers(&stream, false), HookStatus::Stop);
    stream.set_body(Body::ReceivedResponse, USER_FRAME);
    assert_eq!(exchange.response_body(&stream, false), HookStatus::Drop);
    stream.bodies.borrow_mut().remove(&body_key(Body::ReceivedResponse));
    stream.set_map(HeaderMap::ResponseTrailers, &[("grpc-status", b"0")]);
    assert_eq!(exchange.response_trailers(&stream), HookStatus::Continue);
    // The answer's chunk is drained as it comes; the tool result goes to Envoy's buffer from
    // the trailers, with no attempt at a chunk that hook does not have.
    assert_eq!(
        *stream.body_writes.borrow(),
        [("drain", Body::ReceivedResponse), ("replace", Body::BufferedResponse)]
    );
    let answer: Value = serde_json::from_slice(&stream.body(Body::BufferedResponse)).unwrap();
    assert_eq!(tool_result(&answer)["structuredContent"]["username"], "ada");
}

#[test]
fn request_trailers_of_a_routed_call_are_scrubbed() {
    let exchange = exchange(routed());
    let stream = FakeStream::request("POST", "/mcp", &[]);
    buffer_all_but_the_last_chunk(exchange, &stream, GET_USER, "");
    stream.set_map(HeaderMap::RequestTrailers, &[("grpc-timeout", b"1S"), ("x-evil", b"1")]);
    assert_eq!(exchange.request_trailers(&stream), HookStatus::Continue);
    assert!(stream.headers(HeaderMap::RequestTrailers).is_empty());
    assert_eq!(stream.body(Body::BufferedRequest), [0, 0, 0, 0, 2, 0x08, 1]);
}

#[test]
fn calls_out_are_answered_when_they_end() {
    let exchange = exchange(calling_out(""));
    let stream = FakeStream::request("POST", "/mcp", &[]);
    assert_eq!(post(exchange, &stream, GET_USER), HookStatus::Buffer);
    assert_eq!(stream.started.borrow()[0].0, "users");
    assert!(stream.sent.borrow().is_empty());
    answer_call(exchange, &stream, 1);
    let (_, answer) = stream.only_answer();
    assert_eq!(tool_result(&answer)["structuredContent"]["user_id"], 1);
}

#[test]
fn a_call_answered_while_it_starts_is_not_lost() {
    // Envoy may deliver a call's whole answer (its own 503, say) from inside start_call.
    let exchange = exchange(calling_out(""));
    let stream = FakeStream::request("POST", "/mcp", &[]);
    let inline: Inline = Box::new(|stream: &FakeStream, call| {
        exchange.call_heard(
            stream,
            call,
            CallPart::Headers(HeaderCopy::from_iter([(":status", "503")])),
        );
        exchange.call_heard(stream, call, CallPart::Data(b"no healthy upstream"));
        exchange.call_ended(stream, call, false);
    });
    *stream.inline.borrow_mut() = Some(inline);
    post(exchange, &stream, GET_USER);
    let (_, answer) = stream.only_answer();
    let text = tool_result(&answer)["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("UNAVAILABLE (14): the upstream answered HTTP 503 instead of a gRPC status: no healthy upstream"),
        "{text}"
    );
}

#[test]
fn a_call_envoy_refuses_is_answered_at_once() {
    let exchange = exchange(calling_out(""));
    let stream = FakeStream::request("POST", "/mcp", &[]);
    stream.refuse.set(Some(2));
    post(exchange, &stream, GET_USER);
    let (_, answer) = stream.only_answer();
    let text = tool_result(&answer)["content"][0]["text"].as_str().unwrap();
    assert!(
        text.ends_with("could not be started: Envoy refused the call (result 2)"),
        "{text}"
    );
}

#[test]
fn a_batch_keeps_at_most_its_calls_in_flight() {
    let exchange = exchange(calling_out(r#""max_calls_in_flight": 2"#));
    let stream = FakeStream::request("POST", "/mcp", &[]);
    let batch = format!(
        "[{GET_USER},{},{}]",
        GET_USER.replace("\"id\":7", "\"id\":8"),
        GET_USER.replace("\"id\":7", "\"id\":9")
    );
    assert_eq!(post(exchange, &stream, &batch), HookStatus::Buffer);
    assert_eq!(stream.started.borrow().len(), 2);
    answer_call(exchange, &stream, 2);
    assert_eq!(stream.started.borrow().len(), 3, "the third starts when one ends");
    answer_call(exchange, &stream, 1);
    assert!(stream.sent.borrow().is_empty());
    answer_call(exchange, &stream, 3);
    let (_, answer) = stream.only_answer();
    let ids: Vec<&Value> = answer.as_array().unwrap().iter().map(|entry| &entry["id"]).collect();
    assert_eq!(ids, [7, 8, 9]);
}

#[test]
fn a_poisoned_exchange_answers_once_then_resets() {
    let exchange = exchange(routed());
    let stream = FakeStream::request("POST", "/mcp", &[]);
    exchange.poison(&stream);
    exchange.poison(&stream);
    let (status, answer) = stream.only_answer();
    assert_eq!((status, answer["error"]["code"].as_i64()), (500, Some(-32603)));
    assert!(exchange.is_poisoned());
    assert_eq!(stream.resets.get(), 0);

    // Once an answer has gone, a panic can only reset the stream.
    let exchange = super::tests::exchange(routed());
    let stream = FakeStream::request("POST", "/mcp", &[]);
    post(exchange, &stream, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    exchange.poison(&stream);
    assert_eq!(stream.sent.borrow().len(), 1);
    assert_eq!(stream.resets.get(), 1);
}

const WATCH: &str = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"CatalogService_WatchItems","arguments":{},"_meta":{"progressToken":"p1"}}}"#;

/// demo.catalog.v1.ItemEvent{item: {id: n}}, in one gRPC frame.
fn event_frame(id: u8) -> Vec<u8> {
    vec![0, 0, 0, 0, 4, 0x0a, 2, 0x08, id]
}

fn streaming(max_messages: usize) -> &'static Config {
    config(&format!(
        r#"{{"services": {{"demo.catalog.v1.CatalogService": {{"cluster": "catalog", "streaming": true, "max_messages": {max_messages}}}}},
            "routing": {{"cluster_header": "x-switchblade-cluster"}}}}"#
    ))
}

#[test]
fn a_stream_of_answers_is_called_out_with_progress_as_it_comes_and_stopped_at_its_bound() {
    let exchange = exchange(streaming(2));
    let stream = FakeStream::request("POST", "/mcp", &[]);
    // A stream is called out even where calls are routed: the exchange reads and stops it.
    assert_eq!(post(exchange, &stream, WATCH), HookStatus::Buffer);
    assert_eq!(
        stream.started.borrow()[0].1[1],
        (
            ":path".to_owned(),
            "/demo.catalog.v1.CatalogService/WatchItems".to_owned()
        )
    );
    assert_eq!(stream.route_cleared.get(), 0);
    exchange.call_heard(
        &stream,
        1,
        CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])),
    );
    assert!(stream.streamed_headers.borrow().is_none(), "no event yet");
    // The first message, split across two chunks.
    let first = event_frame(1);
    exchange.call_heard(&stream, 1, CallPart::Data(&first[..3]));
    exchange.call_heard(&stream, 1, CallPart::Data(&first[3..]));
    let headers = stream.streamed_headers.borrow().clone().unwrap();
    assert!(headers.contains(&(":status".to_owned(), "200".to_owned())));
    assert!(headers.contains(&("content-type".to_owned(), "text/event-stream".to_owned())));
    let events = String::from_utf8(stream.streamed.borrow().clone()).unwrap();
    assert!(events.starts_with("event: message\ndata: "), "{events}");
    assert!(events.contains(r#""method":"notifications/progress","params":{"progressToken":"p1","progress":1,"message":"1 message received"}"#), "{events}");
    // The second reaches max_messages: the call is cancelled, the result ends the answer.
    exchange.call_heard(&stream, 1, CallPart::Data(&event_frame(2)));
    assert_eq!(*stream.calls_reset.borrow(), [1]);
    assert!(stream.stream_ended.get());
    let events = String::from_utf8(stream.streamed.borrow().clone()).unwrap();
    let last = events.trim_end().rsplit("data: ").next().unwrap();
    let answer: Value = serde_json::from_str(last).unwrap();
    assert_eq!(answer["id"], 5);
    let result = &answer["result"];
    assert_eq!(result["isError"], false);
    assert_eq!(
        result["structuredContent"]["end"],
        serde_json::json!({"reason": "max_messages", "count": 2})
    );
    assert_eq!(result["structuredContent"]["messages"][1]["item"]["id"], "2");
    assert!(stream.sent.borrow().is_empty(), "no local reply");
    // Envoy's reset of the cancelled call changes nothing.
    exchange.call_ended(&stream, 1, true);
    assert!(stream.sent.borrow().is_empty());
}

#[test]
fn a_stream_without_a_progress_token_is_one_json_answer() {
    let exchange = exchange(streaming(10));
    let stream = FakeStream::request("POST", "/mcp", &[]);
    post(
        exchange,
        &stream,
        &WATCH.replace(r#","_meta":{"progressToken":"p1"}"#, ""),
    );
    exchange.call_heard(
        &stream,
        1,
        CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])),
    );
    exchange.call_heard(&stream, 1, CallPart::Data(&event_frame(1)));
    exchange.call_heard(
        &stream,
        1,
        CallPart::Trailers(HeaderCopy::from_iter([("grpc-status", "0")])),
    );
    exchange.call_ended(&stream, 1, false);
    assert!(stream.streamed_headers.borrow().is_none());
    let (_, answer) = stream.only_answer();
    assert_eq!(
        answer["result"]["structuredContent"]["end"],
        serde_json::json!({"reason": "complete", "count": 1})
    );
}

#[test]
fn a_cancelled_stream_is_stopped_and_ends_with_no_response() {
    let config = streaming(10);
    let watching = exchange(config);
    let stream = FakeStream::request("POST", "/mcp", &[SESSION]);
    post(watching, &stream, WATCH);
    let listening = stream.listening.borrow().clone();
    assert_eq!(listening.len(), 1);
    assert_eq!(listening[0].1, CANCELLED);
    exchange_messages(watching, &stream);
    // The same client (its session) cancels request 5 on another stream: the key it wakes is
    // the one listened for.
    let cancelling = exchange(config);
    let other = FakeStream::request("POST", "/mcp", &[SESSION]);
    post(
        cancelling,
        &other,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}"#,
    );
    assert_eq!(other.only_answer().0, 202);
    assert_eq!(*other.cancelled_keys.borrow(), [listening[0].0.clone()]);
    // Envoy runs the wake-up on the watching stream's worker.
    watching.wake(&stream, CANCELLED);
    assert_eq!(*stream.calls_reset.borrow(), [1]);
    assert!(stream.stream_ended.get(), "the SSE answer ends");
    let events = String::from_utf8(stream.streamed.borrow().clone()).unwrap();
    assert!(
        !events.contains(r#""result""#),
        "no response for a cancelled request: {events}"
    );
    assert_eq!(
        stream
            .filter_state
            .borrow()
            .get("switchblade.outcome")
            .map(String::as_str),
        Some("cancelled")
    );
    // Envoy's reset of the cancelled call, and a second wake-up, change nothing.
    watching.call_ended(&stream, 1, true);
    watching.wake(&stream, CANCELLED);
    assert!(stream.sent.borrow().is_empty());
}

#[test]
fn another_request_id_or_a_unary_call_is_not_listened_for() {
    let config = streaming(10);
    let watching = exchange(config);
    let stream = FakeStream::request("POST", "/mcp", &[SESSION]);
    post(watching, &stream, &WATCH.replace(r#""id":5"#, r#""id":6"#));
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}"#;
    let other = FakeStream::request("POST", "/mcp", &[SESSION]);
    post(exchange(config), &other, cancel);
    assert_ne!(other.cancelled_keys.borrow()[0], stream.listening.borrow()[0].0);
    // Another client (another session) naming the same id wakes another key.
    let watching_five = FakeStream::request("POST", "/mcp", &[SESSION]);
    post(exchange(config), &watching_five, WATCH);
    let stranger = FakeStream::request("POST", "/mcp", &[("mcp-session-id", "s2")]);
    post(exchange(config), &stranger, cancel);
    assert_ne!(
        stranger.cancelled_keys.borrow()[0],
        watching_five.listening.borrow()[0].0
    );
    // A client with nothing only it holds (no session, no credential) is not listened for,
    // and its cancel wakes nothing.
    let anonymous = FakeStream::request("POST", "/mcp", &[]);
    post(exchange(config), &anonymous, WATCH);
    assert!(anonymous.listening.borrow().is_empty());
    let anyone = FakeStream::request("POST", "/mcp", &[]);
    post(exchange(config), &anyone, cancel);
    assert!(anyone.cancelled_keys.borrow().is_empty());
    let unary = exchange(calling_out(""));
    let plain = FakeStream::request("POST", "/mcp", &[]);
    post(unary, &plain, GET_USER);
    assert!(plain.listening.borrow().is_empty());
}

/// The session id a handshake-era client was handed, which names its requests.
const SESSION: (&str, &str) = ("mcp-session-id", "s1");

/// The first message of a watch, heard.
fn exchange_messages(exchange: &Exchange, stream: &FakeStream) {
    exchange.call_heard(
        stream,
        1,
        CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])),
    );
    exchange.call_heard(stream, 1, CallPart::Data(&event_frame(1)));
}

/// A task tool's call from a caller without tasks: the Operation it starts is polled when the
/// exchange is woken, and the result goes once it is done. Task calls are never routed.
#[test]
fn a_task_tools_call_waits_for_its_operation_between_wake_ups() {
    use prost::Message;
    use switchblade_core::tasks::operation::{Any, Operation};

    let config = config(
        r#"{"services": {"demo.exports.v1.ExportService": {"cluster": "exports", "operations_cluster": "ops"}},
            "routing": {"cluster_header": "x-switchblade-cluster"},
            "tasks": {"keys": ["BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="], "wait_poll_interval_ms": 50}}"#,
    );
    let exchange = exchange(config);
    let stream = FakeStream::request("POST", "/mcp", &[("mcp-protocol-version", "2025-06-18")]);
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ExportService_ExportCatalog","arguments":{}}}"#;
    assert_eq!(
        post(exchange, &stream, body),
        HookStatus::Buffer,
        "called out, not routed"
    );
    let answer = |call: u64, operation: Operation| {
        let message = operation.encode_to_vec();
        let mut frame = vec![0];
        frame.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
        frame.extend_from_slice(&message);
        exchange.call_heard(
            &stream,
            call,
            CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])),
        );
        exchange.call_heard(&stream, call, CallPart::Data(&frame));
        exchange.call_heard(
            &stream,
            call,
            CallPart::Trailers(HeaderCopy::from_iter([("grpc-status", "0")])),
        );
        exchange.call_ended(&stream, call, false);
    };
    let path = |index: usize| {
        let started = stream.started.borrow();
        let (cluster, headers) = &started[index];
        let path = headers
            .iter()
            .find(|(name, _)| name == ":path")
            .map(|(_, value)| value.clone());
        (cluster.clone(), path.unwrap_or_default())
    };
    assert_eq!(
        path(0),
        ("exports".into(), "/demo.exports.v1.ExportService/ExportCatalog".into())
    );
    let running = Operation {
        name: "operations/export-1".into(),
        ..Operation::default()
    };
    answer(1, running.clone());
    assert!(stream.sent.borrow().is_empty(), "waiting");
    assert_eq!(*stream.alarms.borrow(), [POLL_DUE]);
    // Woken early (before the poll interval), it asks again; Envoy wakes it when asked.
    exchange.wake(&stream, POLL_DUE);
    assert_eq!(stream.started.borrow().len(), 1);
    assert_eq!(*stream.alarms.borrow(), [POLL_DUE, POLL_DUE]);
    std::thread::sleep(std::time::Duration::from_millis(60));
    exchange.wake(&stream, POLL_DUE);
    assert_eq!(
        path(1),
        ("ops".into(), "/google.longrunning.Operations/GetOperation".into())
    );
    let done = Operation {
        done: true,
        response: Some(Any {
            type_url: "type.googleapis.com/demo.exports.v1.ExportCatalogResponse".into(),
            value: vec![0x10, 0x02],
        }),
        ..running
    };
    answer(2, done);
    let sent = stream.sent.borrow();
    let answer: Value = serde_json::from_slice(&sent[0].2).unwrap();
    assert_eq!(tool_result(&answer)["structuredContent"]["item_count"], 2);
}

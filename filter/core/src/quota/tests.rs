//! The limits through the server, as a host drives it: which calls start, what a refused one
//! answers, what is counted; config errors that name the key.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use serde_json::{json, Value};

use super::counters::{Counters, MemoryCounters};
use super::rls::{self, RateLimitRequest, RateLimitResponse};
use crate::access::Caller;
use crate::grpc::call_end::CallPart;
use crate::grpc::frame::grpc_frame;
use crate::http::{HeaderCopy, McpHeaders};
use crate::observe::{CallOutcome, Observations};
use crate::server::{McpRequest, Outcome, Reply, Server};
use crate::upstream::UpstreamCall;

const SERVICES: &str = r#""services": {
    "demo.catalog.v1.CatalogService": {"cluster": "catalog"},
    "demo.users.v1.UserService": {"cluster": "users"}
}"#;

fn server(limits: &str) -> Server {
    Server::from_config_bytes(format!(r#"{{{SERVICES}, "limits": {limits}}}"#).as_bytes()).unwrap()
}

fn refusal(limits: &str) -> String {
    Server::from_config_bytes(format!(r#"{{{SERVICES}, "limits": {limits}}}"#).as_bytes())
        .unwrap_err()
        .0
}

fn headers(version: &str) -> McpHeaders {
    McpHeaders {
        content_type: Some("application/json".into()),
        accept: Some("application/json, text/event-stream".into()),
        protocol_version: Some(version.into()),
        ..McpHeaders::default()
    }
}

fn call(id: u32, tool: &str) -> String {
    let arguments = match tool {
        "UserService_GetUser" => r#"{"user_id": 1}"#,
        _ => r#"{"query": "knife"}"#,
    };
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#
    )
}

/// A host: its counters, the calls it started (cluster, body) under their tokens.
struct Host {
    counters: Counters,
    started: RefCell<Vec<(u64, String, Vec<u8>)>>,
    /// Each started call's timeout and its `grpc-timeout` header.
    deadlines: RefCell<Vec<(Duration, String)>>,
}

impl Host {
    fn new() -> Self {
        Host {
            counters: Arc::new(MemoryCounters::default()),
            started: RefCell::default(),
            deadlines: RefCell::default(),
        }
    }

    fn post(&self, server: &Server, body: &str, address: &str, observed: &mut Observations) -> Outcome {
        let headers = headers(if body.starts_with('[') {
            "2025-03-26"
        } else {
            "2025-11-25"
        });
        let request = McpRequest {
            headers: &headers,
            body: body.as_bytes(),
            caller: &Caller::Anyone,
            client_address: Some(address),
            counters: Some(&self.counters),
        };
        server.handle(request, observed)
    }

    /// Starts what may go at `now`; whether the reply is complete.
    fn start(&self, server: &Server, reply: &mut Reply, now: Duration, observed: &mut Observations) -> bool {
        let start = |call: &UpstreamCall| {
            let mut started = self.started.borrow_mut();
            let token = started.len() as u64 + 1;
            started.push((token, call.cluster().to_owned(), call.http_body().to_vec()));
            let grpc_timeout = call
                .http_headers()
                .into_iter()
                .find(|(name, _)| *name == "grpc-timeout");
            let grpc_timeout = grpc_timeout.map(|(_, value)| value.to_owned()).unwrap_or_default();
            self.deadlines.borrow_mut().push((call.timeout(), grpc_timeout));
            Ok(token)
        };
        server.start_calls(reply, start, now, observed)
    }

    fn started(&self) -> Vec<(u64, String)> {
        self.started
            .borrow()
            .iter()
            .map(|(token, cluster, _)| (*token, cluster.clone()))
            .collect()
    }
}

/// Answers the call under `token` with a gRPC OK carrying `message`.
fn answer(server: &Server, reply: &mut Reply, token: u64, message: &[u8], observed: &mut Observations) {
    server.heard(
        reply,
        token,
        CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])),
    );
    server.heard(reply, token, CallPart::Data(&grpc_frame(message)));
    server.heard(
        reply,
        token,
        CallPart::Trailers(HeaderCopy::from_iter([("grpc-status", "0")])),
    );
    server.call_ended(reply, token, false, Duration::ZERO, observed);
}

fn reply_of(outcome: Outcome) -> Reply {
    match outcome {
        Outcome::Await(reply) => reply,
        Outcome::Respond(response) | Outcome::Cancel { response, .. } => {
            panic!("expected calls, got {}", String::from_utf8_lossy(&response.body))
        }
    }
}

fn body(reply: Reply) -> (u16, Vec<(&'static str, String)>, Value) {
    assert!(reply.is_complete());
    let response = reply.into_response();
    let headers = response
        .headers
        .iter()
        .map(|(name, value)| (*name, value.to_string()))
        .collect();
    (
        response.status,
        headers,
        serde_json::from_slice(&response.body).unwrap(),
    )
}

fn outcomes(observed: &Observations) -> Vec<&'static str> {
    observed.tool_calls().iter().map(|call| call.outcome.label()).collect()
}

const USER: &[u8] = &[0x08, 1];

#[test]
fn a_tools_rate_holds_per_caller_and_a_refusal_names_the_limit_and_when_to_retry() {
    let server =
        server(r#"{"rules": [{"match": "demo.users.v1.UserService/GetUser", "requests_per_second": 2, "burst": 2}]}"#);
    let host = Host::new();
    let mut results = Vec::new();
    for _ in 0..3 {
        let mut observed = Observations::default();
        let mut reply = reply_of(host.post(&server, &call(1, "UserService_GetUser"), "10.0.0.1:4000", &mut observed));
        let complete = host.start(&server, &mut reply, Duration::from_millis(100), &mut observed);
        if !complete {
            let token = host.started().last().unwrap().0;
            answer(&server, &mut reply, token, USER, &mut observed);
        }
        results.push((body(reply).2["result"].clone(), outcomes(&observed)));
    }
    assert_eq!(host.started().len(), 2, "the third call never reached the upstream");
    assert_eq!(results[0].0["isError"], false);
    assert_eq!(
        results[2].0,
        json!({
            "content": [{"type": "text", "text": "Rate limited: UserService_GetUser allows each caller 2 calls per second, 2 at once (limits.rules[0], match \"demo.users.v1.UserService/GetUser\"); retry after 500 ms. The call was not sent."}],
            "isError": true,
            "_meta": {"io.switchblade/retryAfterMs": 500}
        })
    );
    assert_eq!(results[2].1, ["rate_limited"]);
    // Another caller has a bucket of its own; the other tool has no rule.
    let mut observed = Observations::default();
    let mut reply = reply_of(host.post(&server, &call(1, "UserService_GetUser"), "10.0.0.2:4000", &mut observed));
    assert!(!host.start(&server, &mut reply, Duration::from_millis(100), &mut observed));
    let mut reply = reply_of(host.post(
        &server,
        &call(1, "CatalogService_Search"),
        "10.0.0.1:4000",
        &mut observed,
    ));
    assert!(!host.start(&server, &mut reply, Duration::from_millis(100), &mut observed));
    assert_eq!(host.started().len(), 4);
    // Half a second later, the first caller has a token again.
    let mut reply = reply_of(host.post(&server, &call(1, "UserService_GetUser"), "10.0.0.1:5000", &mut observed));
    assert!(!host.start(&server, &mut reply, Duration::from_millis(600), &mut observed));
}

#[test]
fn a_batch_counts_each_call_and_a_modern_refusal_keeps_the_servers_identity() {
    let server = server(r#"{"rules": [{"match": "demo.users.v1.UserService", "requests_per_second": 1, "burst": 2}]}"#);
    let host = Host::new();
    let calls: Vec<String> = (0..4).map(|id| call(id, "UserService_GetUser")).collect();
    let mut observed = Observations::default();
    let mut reply = reply_of(host.post(&server, &format!("[{}]", calls.join(",")), "a", &mut observed));
    assert!(!host.start(&server, &mut reply, Duration::ZERO, &mut observed));
    assert_eq!(host.started().len(), 2);
    for (token, _) in host.started() {
        answer(&server, &mut reply, token, USER, &mut observed);
    }
    assert!(host.start(&server, &mut reply, Duration::ZERO, &mut observed));
    let (status, _, answers) = body(reply);
    assert_eq!(status, 200);
    let errors: Vec<bool> = answers
        .as_array()
        .unwrap()
        .iter()
        .map(|answer| answer["result"]["isError"].as_bool().unwrap())
        .collect();
    assert_eq!(errors, [false, false, true, true]);
    assert_eq!(
        outcomes(&observed),
        ["rate_limited", "rate_limited", "success", "success"]
    );
    // In the modern era the retry time sits beside the server's identity.
    let server_modern = server;
    let modern_headers = McpHeaders {
        protocol_version: Some("2026-07-28".into()),
        mcp_method: Some("tools/call".into()),
        mcp_name: Some("UserService_GetUser".into()),
        ..headers("2026-07-28")
    };
    let body_modern = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"UserService_GetUser","arguments":{"user_id":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let request = McpRequest {
        headers: &modern_headers,
        body: body_modern.as_bytes(),
        caller: &Caller::Anyone,
        client_address: Some("a"),
        counters: Some(&host.counters),
    };
    let mut reply = reply_of(server_modern.handle(request, &mut observed));
    assert!(host.start(&server_modern, &mut reply, Duration::ZERO, &mut observed));
    let (_, _, answer) = body(reply);
    let meta = &answer["result"]["_meta"];
    assert_eq!(meta["io.switchblade/retryAfterMs"], 1000);
    assert_eq!(meta["io.modelcontextprotocol/serverInfo"]["name"], "switchblade");
    assert_eq!(answer["result"]["resultType"], "complete");
}

#[test]
fn a_caller_over_its_rate_across_every_tool_gets_429_for_the_whole_request() {
    let server = server(r#"{"rules": [{"match": "*", "requests_per_second": 1, "burst": 3}]}"#);
    let host = Host::new();
    let batch = |ids: std::ops::Range<u32>| {
        let calls: Vec<String> = ids.map(|id| call(id, "CatalogService_Search")).collect();
        format!("[{}]", calls.join(","))
    };
    let mut observed = Observations::default();
    let mut reply = reply_of(host.post(&server, &batch(0..2), "a", &mut observed));
    assert!(!host.start(&server, &mut reply, Duration::ZERO, &mut observed));
    // Two left of three: a batch of two is refused whole, nothing sent.
    let mut observed = Observations::default();
    let mut reply = reply_of(host.post(&server, &batch(0..2), "a", &mut observed));
    assert!(host.start(&server, &mut reply, Duration::ZERO, &mut observed));
    let (status, headers, answer) = body(reply);
    assert_eq!(status, 429);
    assert!(headers.contains(&("retry-after", "1".to_owned())), "{headers:?}");
    assert_eq!(
        answer,
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32029,
            "message": "Too Many Requests: this caller may make 1 tool calls per second across every tool, 3 at once (limits.rules[0], match \"*\"); this request has 2 calls; retry after 1000 ms",
            "data": {"retryAfterMs": 1000}}})
    );
    assert_eq!(outcomes(&observed), ["rate_limited", "rate_limited"]);
    assert_eq!(observed.refusal().map(|refusal| refusal.label()), Some("rate_limited"));
    assert_eq!(host.started().len(), 2);
    // A lone call is answered with its id; one token is left.
    let mut reply = reply_of(host.post(&server, &call(5, "CatalogService_Search"), "a", &mut observed));
    assert!(!host.start(&server, &mut reply, Duration::ZERO, &mut observed));
    let mut reply = reply_of(host.post(&server, &call(6, "CatalogService_Search"), "a", &mut observed));
    assert!(host.start(&server, &mut reply, Duration::ZERO, &mut observed));
    assert_eq!(body(reply).2["id"], 6);
    // A batch larger than the burst can never pass, and says so.
    let mut reply = reply_of(host.post(&server, &batch(0..4), "b", &mut observed));
    assert!(host.start(&server, &mut reply, Duration::ZERO, &mut observed));
    let message = body(reply).2["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("this request has 4 calls, more than it may ever make at once: send at most 3 per request"),
        "{message}"
    );
}

#[test]
fn calls_in_flight_are_capped_and_each_place_comes_back_however_the_call_ends() {
    let server = server(r#"{"rules": [{"match": "demo.catalog.v1.CatalogService", "max_in_flight": 2}]}"#);
    let host = Host::new();
    let mut observed = Observations::default();
    let mut first = reply_of(host.post(&server, &call(1, "CatalogService_Search"), "a", &mut observed));
    let mut second = reply_of(host.post(&server, &call(2, "CatalogService_Search"), "b", &mut observed));
    assert!(!host.start(&server, &mut first, Duration::ZERO, &mut observed));
    assert!(!host.start(&server, &mut second, Duration::ZERO, &mut observed));
    let mut third = reply_of(host.post(&server, &call(3, "CatalogService_Search"), "c", &mut observed));
    assert!(host.start(&server, &mut third, Duration::ZERO, &mut observed));
    let text = body(third).2["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        text,
        "Rate limited: CatalogService_Search allows 2 calls in flight at once, and 2 are out (limits.rules[0], match \"demo.catalog.v1.CatalogService\"); retry after 1000 ms. The call was not sent."
    );
    // A reset gives a place back; so does a request that is gone (its reply dropped).
    server.call_ended(&mut first, 1, true, Duration::ZERO, &mut observed);
    let mut fourth = reply_of(host.post(&server, &call(4, "CatalogService_Search"), "d", &mut observed));
    assert!(!host.start(&server, &mut fourth, Duration::ZERO, &mut observed));
    drop(second);
    let mut fifth = reply_of(host.post(&server, &call(5, "CatalogService_Search"), "e", &mut observed));
    assert!(!host.start(&server, &mut fifth, Duration::ZERO, &mut observed));
    let mut sixth = reply_of(host.post(&server, &call(6, "CatalogService_Search"), "f", &mut observed));
    assert!(host.start(&server, &mut sixth, Duration::ZERO, &mut observed));
    // A place nobody gives back lapses after the deadline (10 s) and its grace.
    std::mem::forget(fourth);
    drop(fifth);
    let mut late = reply_of(host.post(&server, &call(7, "CatalogService_Search"), "g", &mut observed));
    assert!(!host.start(&server, &mut late, Duration::from_secs(1), &mut observed));
    let mut full = reply_of(host.post(&server, &call(8, "CatalogService_Search"), "h", &mut observed));
    assert!(host.start(&server, &mut full, Duration::from_secs(1), &mut observed));
    let mut lapsed = reply_of(host.post(&server, &call(9, "CatalogService_Search"), "i", &mut observed));
    assert!(!host.start(&server, &mut lapsed, Duration::from_secs(16), &mut observed));
}

#[test]
fn a_routable_call_passes_the_limits_before_it_is_routed() {
    let server = server(
        r#"{"rules": [{"match": "demo.users.v1.UserService/GetUser", "requests_per_second": 1, "burst": 1, "max_in_flight": 1}]}"#,
    );
    let host = Host::new();
    let mut observed = Observations::default();
    let mut first = reply_of(host.post(&server, &call(1, "UserService_GetUser"), "a", &mut observed));
    let routed = server
        .take_routable_call(&mut first, Duration::ZERO, &mut observed)
        .unwrap();
    assert!(routed.lease.is_some());
    let mut second = reply_of(host.post(&server, &call(2, "UserService_GetUser"), "a", &mut observed));
    assert!(server
        .take_routable_call(&mut second, Duration::ZERO, &mut observed)
        .is_none());
    assert!(
        host.start(&server, &mut second, Duration::ZERO, &mut observed),
        "refused, and complete"
    );
    assert_eq!(body(second).2["result"]["isError"], true);
}

/// The rate limit service's answer to the check under `token`.
fn rls_answer(
    server: &Server,
    reply: &mut Reply,
    token: u64,
    response: &RateLimitResponse,
    observed: &mut Observations,
) {
    answer(server, reply, token, &response.encode_to_vec(), observed);
}

fn over(statuses: &[i32], reset_ms: i32) -> RateLimitResponse {
    RateLimitResponse {
        overall_code: rls::CODE_OVER_LIMIT,
        statuses: statuses
            .iter()
            .map(|code| rls::DescriptorStatus {
                code: *code,
                current_limit: None,
                limit_remaining: 0,
                duration_until_reset: Some(prost_types::Duration {
                    seconds: 0,
                    nanos: reset_ms * 1_000_000,
                }),
            })
            .collect(),
    }
}

const RLS: &str = r#""rate_limit_service": {"cluster": "ratelimit", "domain": "switchblade", "timeout_ms": 50}"#;

#[test]
fn the_rate_limit_service_is_asked_first_as_one_more_call() {
    let server = server(&format!(
        r#"{{"rules": [{{"match": "demo.users.v1.UserService", "max_in_flight": 5}}], {RLS}}}"#
    ));
    let host = Host::new();
    let mut observed = Observations::default();
    let mut reply = reply_of(host.post(&server, &call(1, "UserService_GetUser"), "10.1.2.3:999", &mut observed));
    assert!(
        server
            .take_routable_call(&mut reply, Duration::ZERO, &mut observed)
            .is_none(),
        "the check goes first"
    );
    assert!(!host.start(&server, &mut reply, Duration::ZERO, &mut observed));
    assert_eq!(host.started(), [(1, "ratelimit".to_owned())]);
    // The service is told it has a little longer than the host waits: an answer it gives at its
    // own deadline must not beat the host's timer.
    assert_eq!(
        host.deadlines.borrow()[0],
        (Duration::from_millis(50), "300m".to_owned())
    );
    let sent = host.started.borrow()[0].2.clone();
    let request = RateLimitRequest::decode(&sent[5..]).unwrap();
    assert_eq!(request.domain, "switchblade");
    let entries: Vec<Vec<(String, String)>> = request
        .descriptors
        .iter()
        .map(|d| d.entries.iter().map(|e| (e.key.clone(), e.value.clone())).collect())
        .collect();
    assert_eq!(
        entries[1],
        [
            ("tool".into(), "UserService_GetUser".into()),
            ("caller".into(), "10.1.2.3".into())
        ]
    );
    assert_eq!(entries[2][0], ("rule".into(), "demo.users.v1.UserService".into()));
    rls_answer(
        &server,
        &mut reply,
        1,
        &RateLimitResponse {
            overall_code: rls::CODE_OK,
            statuses: vec![],
        },
        &mut observed,
    );
    assert!(!host.start(&server, &mut reply, Duration::ZERO, &mut observed));
    assert_eq!(host.started()[1], (2, "users".to_owned()), "then the call itself");
    answer(&server, &mut reply, 2, USER, &mut observed);
    assert!(host.start(&server, &mut reply, Duration::ZERO, &mut observed));
    assert_eq!(body(reply).2["result"]["isError"], false);
    assert_eq!(outcomes(&observed), ["success"], "a check is not a tool call");
}

#[test]
fn the_services_refusals_are_a_tool_error_or_429() {
    let server = server(&format!("{{{RLS}}}"));
    let host = Host::new();
    let mut observed = Observations::default();
    let mut reply = reply_of(host.post(&server, &call(1, "UserService_GetUser"), "a", &mut observed));
    host.start(&server, &mut reply, Duration::ZERO, &mut observed);
    rls_answer(
        &server,
        &mut reply,
        1,
        &over(&[rls::CODE_OK, rls::CODE_OVER_LIMIT], 250),
        &mut observed,
    );
    assert!(host.start(&server, &mut reply, Duration::ZERO, &mut observed));
    let result = body(reply).2["result"].clone();
    assert_eq!(
        result["content"][0]["text"],
        "Rate limited: the rate limit service says UserService_GetUser is over its limit for this caller; retry after 250 ms. The call was not sent."
    );
    assert_eq!(result["_meta"]["io.switchblade/retryAfterMs"], 250);
    // Over the caller's descriptor, in a batch: every check is heard, then 429, nothing sent.
    let mut observed = Observations::default();
    let batch = format!(
        "[{},{}]",
        call(1, "UserService_GetUser"),
        call(2, "CatalogService_Search")
    );
    let mut reply = reply_of(host.post(&server, &batch, "a", &mut observed));
    assert!(!host.start(&server, &mut reply, Duration::ZERO, &mut observed));
    assert_eq!(host.started().len(), 3);
    rls_answer(
        &server,
        &mut reply,
        2,
        &over(&[rls::CODE_OVER_LIMIT], 1500),
        &mut observed,
    );
    assert!(
        !host.start(&server, &mut reply, Duration::ZERO, &mut observed),
        "the other check is out"
    );
    rls_answer(
        &server,
        &mut reply,
        3,
        &RateLimitResponse {
            overall_code: rls::CODE_OK,
            statuses: vec![],
        },
        &mut observed,
    );
    assert!(host.start(&server, &mut reply, Duration::ZERO, &mut observed));
    assert_eq!(host.started().len(), 3, "no tool call went");
    let (status, headers, answer) = body(reply);
    assert_eq!(status, 429);
    assert!(headers.contains(&("retry-after", "2".to_owned())));
    assert_eq!(answer["error"]["data"]["retryAfterMs"], 1500);
    assert_eq!(observed.refusal().map(|refusal| refusal.label()), Some("rate_limited"));
}

#[test]
fn a_service_that_fails_lets_calls_go_or_refuses_them_as_configured() {
    for (mode, refused) in [("allow", false), ("deny", true)] {
        let rls = RLS.replace(
            "\"timeout_ms\": 50",
            &format!("\"timeout_ms\": 50, \"failure_mode\": \"{mode}\""),
        );
        let server = server(&format!("{{{rls}}}"));
        let host = Host::new();
        let mut observed = Observations::default();
        let mut reply = reply_of(host.post(&server, &call(1, "UserService_GetUser"), "a", &mut observed));
        host.start(&server, &mut reply, Duration::ZERO, &mut observed);
        // Timed out: Envoy resets the callout past the check's deadline.
        server.call_ended(&mut reply, 1, true, Duration::from_millis(60), &mut observed);
        let complete = host.start(&server, &mut reply, Duration::from_millis(60), &mut observed);
        assert_eq!(complete, refused, "{mode}");
        if refused {
            let text = body(reply).2["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned();
            assert_eq!(
                text,
                "Rate limited: the rate limit service (cluster \"ratelimit\") did not answer (no answer within its timeout), and limits.rate_limit_service.failure_mode is \"deny\"; retry after 1000 ms. The call was not sent."
            );
            assert_eq!(observed.tool_calls()[0].outcome, CallOutcome::RateLimited);
        } else {
            assert_eq!(host.started()[1].1, "users");
        }
    }
    // A service that is no cluster at all: the start fails, and the mode decides the same.
    let server = server(&format!(
        "{{{}}}",
        RLS.replace("50}", "50, \"failure_mode\": \"deny\"}")
    ));
    let host_counters: Counters = Arc::new(MemoryCounters::default());
    let headers = headers("2025-11-25");
    let body_text = call(1, "UserService_GetUser");
    let request = McpRequest {
        headers: &headers,
        body: body_text.as_bytes(),
        caller: &Caller::Anyone,
        client_address: None,
        counters: Some(&host_counters),
    };
    let mut observed = Observations::default();
    let mut reply = reply_of(server.handle(request, &mut observed));
    assert!(server.start_calls(
        &mut reply,
        |_| Err("no such cluster".into()),
        Duration::ZERO,
        &mut observed
    ));
    assert_eq!(body(reply).2["result"]["isError"], true);
}

#[test]
fn callers_are_keyed_by_address_without_the_port_or_by_the_tokens_claim() {
    let quota_server = server(r#"{"rules": [{"match": "*", "requests_per_second": 1}]}"#);
    let quota = quota_server.quota().unwrap();
    assert!(quota.reads_client_address());
    let key = |address| quota.caller_key(&Caller::Anyone, address).text;
    assert_eq!(key(Some("127.0.0.2:53211")), "127.0.0.2");
    assert_eq!(key(Some("[::1]:53211")), "::/64");
    assert_eq!(key(Some("[2001:db8:1:2:a:b:c:d]:443")), "2001:db8:1:2::/64");
    assert_eq!(key(Some("[::ffff:10.1.2.3]:443")), "10.1.2.3", "IPv4-mapped is IPv4");
    assert_eq!(key(Some("10.0.0.1")), "10.0.0.1");
    assert_eq!(key(Some("/run/envoy.sock")), "/run/envoy.sock");
    assert_eq!(key(None), super::UNKNOWN_CALLER);
    let authorized = Server::from_config_bytes(
        format!(
            r#"{{{SERVICES}, "authorization": {{"rules": {{"demo.users.v1.UserService": ["users:read"]}}, "unlisted": "allow"}},
                "limits": {{"rules": [{{"match": "*", "requests_per_second": 1}}]}}}}"#
        )
        .as_bytes(),
    )
    .unwrap();
    let quota = authorized.quota().unwrap();
    assert!(!quota.reads_client_address());
    let payload = json!({"sub": "agent-7", "scope": "users:read"}).to_string();
    let source_is_metadata = authorized.caller(Some(payload.as_bytes()));
    // The default source is jwt_authn's metadata: JSON text there is not a payload.
    assert!(matches!(source_is_metadata, Caller::Unverified(_)));
    let verified = Caller::Verified {
        grants: Default::default(),
        key: Some("agent-7".into()),
        identity: String::new(),
        metadata: Vec::new(),
    };
    assert_eq!(quota.caller_key(&verified, Some("1.2.3.4:5")).text, "agent-7");
    assert_eq!(
        quota.caller_key(&Caller::verified(Default::default(), ""), None).text,
        super::UNKNOWN_CALLER
    );
}

#[test]
fn addresses_are_counted_by_the_configured_prefixes() {
    let quota_server = server(
        r#"{"rules": [{"match": "*", "requests_per_second": 1}], "client_address_prefix": {"ipv4": 24, "ipv6": 48}}"#,
    );
    let quota = quota_server.quota().unwrap();
    let key = |address| quota.caller_key(&Caller::Anyone, Some(address)).text;
    assert_eq!(key("192.0.2.77:1"), "192.0.2.0/24");
    assert_eq!(key("[2001:db8:1:2::9]:1"), "2001:db8:1::/48");
    assert_eq!(key("[2001:db8:1:ffff::9]:1"), "2001:db8:1::/48");
    let exact =
        server(r#"{"rules": [{"match": "*", "requests_per_second": 1}], "client_address_prefix": {"ipv6": 128}}"#);
    let quota = exact.quota().unwrap();
    assert_eq!(
        quota.caller_key(&Caller::Anyone, Some("[2001:db8::9]:1")).text,
        "2001:db8::9"
    );
    assert!(quota.describe_callers().contains("IPv4 by /32 and IPv6 by /128"));
    assert!(quota.describe_callers().contains("use_remote_address: true"));
}

#[test]
fn the_claim_callers_are_counted_by_is_read_from_the_token() {
    let server = Server::from_config_bytes(
        format!(
            r#"{{{SERVICES}, "authorization": {{"token_payload": {{"filter_state": "p"}}, "rules": {{}}, "unlisted": "allow"}},
                "limits": {{"caller": {{"claim": ["client", "id"]}}, "rules": [{{"match": "*", "requests_per_second": 1}}]}}}}"#
        )
        .as_bytes(),
    )
    .unwrap();
    let payload = json!({"sub": "s", "client": {"id": 42}}).to_string();
    match server.caller(Some(payload.as_bytes())) {
        Caller::Verified { key, .. } => assert_eq!(key.as_deref(), Some("42")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_limits_are_refused_with_the_key_at_fault() {
    let cases = [
        (r#"{"rules": [{"match": "demo.users.v1.UserService/Nope", "requests_per_second": 1}]}"#,
         "at `limits.rules[0].match`: \"demo.users.v1.UserService/Nope\" names no configured service and no exposed tool's method; write a service from `services` (demo.catalog.v1.CatalogService, demo.users.v1.UserService), `package.Service/Method` of a tool, or \"*\" for every tool"),
        (r#"{"rules": [{"match": "*", "requests_per_second": 1}, {"match": "demo.nope.v1.X", "max_in_flight": 1}]}"#,
         "at `limits.rules[1].match`: \"demo.nope.v1.X\" names no configured service"),
        (r#"{"rules": [{"match": "*", "requests_per_second": 0}]}"#,
         "at `limits.rules[0].requests_per_second`: 0 is not a rate; write a number of calls per second greater than 0 and at most 1000000, like 2 or 0.5"),
        (r#"{"rules": [{"match": "*", "requests_per_second": -2}]}"#, "at `limits.rules[0].requests_per_second`: -2 is not a rate"),
        (r#"{"rules": [{"match": "*", "requests_per_second": 1, "burst": 0}]}"#, "at `limits.rules[0].burst`: must be at least 1"),
        (r#"{"rules": [{"match": "*", "burst": 3}]}"#, "at `limits.rules[0].burst`: a burst is the size of a rate's bucket; set `requests_per_second` too"),
        (r#"{"rules": [{"match": "demo.users.v1.UserService"}]}"#,
         "at `limits.rules[0]`: the rule limits nothing; give it `requests_per_second` (and a `burst`), `max_in_flight`, or both"),
        (r#"{"rules": [{"match": "demo.users.v1.UserService", "max_in_flight": 0}]}"#, "at `limits.rules[0].max_in_flight`: must be greater than 0"),
        (r#"{"rules": [{"match": "*", "max_in_flight": 3}]}"#, "at `limits.rules[0].max_in_flight`: the \"*\" rule is each caller's rate across every tool"),
        (r#"{"rules": [{"match": "", "max_in_flight": 3}]}"#, "at `limits.rules[0].match`: empty"),
        (r#"{"rules": [{"match": "*", "requests_per_second": 1}, {"match": "*", "requests_per_second": 2}]}"#,
         "at `limits.rules[1].match`: \"*\" is matched by `limits.rules[0]` already; write one rule per match"),
        (r#"{"rules": [{"match": "*", "requests_per_second": 1, "per_minute": 3}]}"#, "at `limits.rules[0].per_minute`: unknown field `per_minute`"),
        (r#"{"caller": {"claim": "sub"}}"#,
         "at `limits.caller`: the claim \"sub\" is read from the verified token, and `authorization` (which reads the token) is not configured; configure `authorization`, or count callers by \"client_address\""),
        (r#"{"caller": "client_ip"}"#, "at `limits.caller`: unknown variant `client_ip`, expected `client_address` or `claim`"),
        (r#"{"rate_limit_service": {"cluster": "", "domain": "d"}}"#, "at `limits.rate_limit_service.cluster`: empty"),
        (r#"{"rate_limit_service": {"cluster": "r", "domain": " "}}"#, "at `limits.rate_limit_service.domain`: empty"),
        (r#"{"rate_limit_service": {"cluster": "r", "domain": "d", "timeout_ms": 0}}"#, "at `limits.rate_limit_service.timeout_ms`: must be greater than 0"),
        (r#"{"max_callers": 0}"#, "at `limits.max_callers`: 0 is not between 1 and 1000000"),
        (r#"{"max_callers": 2000000}"#, "at `limits.max_callers`: 2000000 is not between 1 and 1000000"),
        (r#"{"client_address_prefix": {"ipv4": 0}}"#,
         "at `limits.client_address_prefix.ipv4`: 0 is not a prefix length between 1 and 32"),
        (r#"{"client_address_prefix": {"ipv6": 129}}"#,
         "at `limits.client_address_prefix.ipv6`: 129 is not a prefix length between 1 and 128"),
        (r#"{"client_address_prefix": {"v6": 64}}"#, "at `limits.client_address_prefix.v6`: unknown field `v6`"),
        (r#"{"rate_limit_service": {"cluster": "r", "domain": "d", "failure_mode": "open"}}"#,
         "at `limits.rate_limit_service.failure_mode`: unknown variant `open`, expected `allow` or `deny`"),
    ];
    for (limits, expected) in cases {
        let error = refusal(limits);
        assert!(error.starts_with(expected), "{limits}:\n{error}\nexpected: {expected}");
    }
}

#[test]
fn a_configuration_without_rules_or_service_has_no_quota() {
    assert!(server(r#"{"max_batch_size": 3}"#).quota().is_none());
    assert!(server(&format!("{{{RLS}}}")).quota().is_some());
    let defaults = server(r#"{"rules": [{"match": "*", "requests_per_second": 2.5}]}"#);
    assert!(defaults.quota().is_some());
}

/// A store whose writes always conflict, as if other workers wrote every key between each read
/// and write.
#[derive(Debug)]
struct AlwaysContended;

impl super::counters::SharedCounters for AlwaysContended {
    fn get(&self, _key: &str) -> Option<(Vec<u8>, u32)> {
        Some((Vec::new(), 1))
    }

    fn set(
        &self,
        _key: &str,
        _value: &[u8],
        _expect: super::counters::Expect,
    ) -> Result<(), super::counters::Conflict> {
        Err(super::counters::Conflict)
    }
}

/// A limit whose counters cannot be updated is not let through: the call is refused, to be
/// retried shortly.
#[test]
fn a_limit_that_cannot_be_counted_refuses() {
    let server = server(
        r#"{"rules": [{"match": "*", "requests_per_second": 5}, {"match": "demo.users.v1.UserService", "requests_per_second": 5, "max_in_flight": 2}]}"#,
    );
    let quota = server.quota().unwrap();
    let counters: Counters = Arc::new(AlwaysContended);
    let caller = quota.caller_key(&Caller::Anyone, Some("10.0.0.1:1"));
    let limited = quota
        .take_every_tool(&counters, &caller, 1, Duration::ZERO)
        .unwrap_err();
    assert_eq!(
        limited.message,
        "Too Many Requests: this caller's calls across every tool came faster than their limit could be counted (limits.rules[0], match \"*\"); retry after 1000 ms."
    );
    let tool = server.catalog().get("UserService_GetUser").unwrap();
    let limited = quota.take_tool(&counters, &caller, tool, Duration::ZERO).unwrap_err();
    assert_eq!(
        limited.message,
        "Rate limited: UserService_GetUser's calls came faster than their limit could be counted (limits.rules[1], match \"demo.users.v1.UserService\"); retry after 1000 ms. The call was not sent."
    );
    let limited = quota.lease(&counters, tool, Duration::ZERO).unwrap_err();
    assert_eq!(limited.retry_after, Duration::from_secs(1));
    assert!(limited
        .message
        .starts_with("Rate limited: UserService_GetUser's calls in flight came faster"));
}

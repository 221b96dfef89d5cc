//! JSON-RPC batches (2025-03-26) of any mix of messages through the whole request path, with
//! the calls they make answered, refused or reset in any order, in parts or whole. Checks the
//! bounds: never more calls out than `limits.max_calls_in_flight`, a batch over
//! `limits.max_batch_size` refused whole, a reply that keeps to `limits.max_batch_reply_bytes`
//! and answers every request, in order, once every call has ended.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use switchblade_core::access::Caller;
use switchblade_core::http::{HeaderCopy, McpHeaders};
use switchblade_core::observe::Observations;
use switchblade_core::server::{McpRequest, Outcome, Server};
use switchblade_core::grpc::call_end::CallPart;

/// The bounds each server runs with: calls in flight, the batch's reply, the batch's size.
const BOUNDS: [(usize, usize, usize); 4] = [(1, 300, 4), (2, 2_000, 16), (4, 1 << 20, 64), (8, 1 << 20, 64)];

thread_local! {
    static SERVERS: Vec<Server> = BOUNDS
        .iter()
        .map(|(in_flight, reply, size)| {
            let config = format!(
                r#"{{"limits":{{"max_calls_in_flight":{in_flight},"max_batch_reply_bytes":{reply},"max_batch_size":{size}}},
                    "services":{{"demo.catalog.v1.CatalogService":{{"cluster":"c"}},"demo.users.v1.UserService":{{"cluster":"c"}}}}}}"#
            );
            Server::from_config_bytes(config.as_bytes()).expect("the fuzz configuration is valid")
        })
        .collect();
}

/// The messages a batch is made of.
const MESSAGES: [&str; 8] = [
    r#"{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"UserService_GetUser","arguments":{"user_id":7}}}"#,
    r#"{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"CatalogService_Search","arguments":{"query":"q"}}}"#,
    r#"{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"UserService_GetUser","arguments":{"user_id":"x"}}}"#,
    r#"{"jsonrpc":"2.0","id":ID,"method":"tools/list"}"#,
    r#"{"jsonrpc":"2.0","id":ID,"method":"ping"}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    r#"{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"Nope"}}"#,
    r#"{"id":ID}"#,
];

/// A GetUser answer (user 7), framed.
const FRAME: &[u8] = &[0, 0, 0, 0, 2, 0x08, 7];

fuzz_target!(|data: &[u8]| {
    let [choice, count, schedule @ ..] = data else { return };
    let bounds = usize::from(*choice) % BOUNDS.len();
    let count = usize::from(*count) % 80;
    let mut picks = schedule.iter().copied().cycle();
    let messages: Vec<String> = (0..count)
        .map(|id| {
            let pick = usize::from(picks.next().unwrap_or(0)) % MESSAGES.len();
            MESSAGES[pick].replace("ID", &id.to_string())
        })
        .collect();
    let body = format!("[{}]", messages.join(","));
    SERVERS.with(|servers| run(&servers[bounds], BOUNDS[bounds], &body, schedule));
});

fn run(server: &Server, (in_flight, reply_bytes, batch_size): (usize, usize, usize), body: &str, schedule: &[u8]) {
    let headers = McpHeaders {
        content_type: Some("application/json".into()),
        protocol_version: Some("2025-03-26".into()),
        ..McpHeaders::default()
    };
    let mut observed = Observations::default();
    let request = McpRequest { headers: &headers, body: body.as_bytes(), caller: &Caller::Anyone, client_address: None, counters: None };
    let count = serde_json::from_str::<Vec<Value>>(body).map_or(0, |messages| messages.len());
    let mut reply = match server.handle(request, &mut observed) {
        Outcome::Respond(response) => {
            if count > batch_size {
                assert_eq!(response.status, 400, "a batch over its size is refused whole");
            }
            return;
        }
        // A cancellation makes no calls.
        Outcome::Cancel { .. } => return,
        Outcome::Await(reply) => reply,
    };
    assert!(count <= batch_size, "a batch over its size made calls");
    let mut events = schedule.iter().copied().cycle();
    let mut next_token = 1u64;
    let mut out: Vec<u64> = Vec::new();
    let mut now = Duration::ZERO;
    let mut steps = 0;
    loop {
        // Start what may go; some starts fail.
        let complete = server.start_calls(
            &mut reply,
            |_| {
                if events.next().unwrap_or(0) % 7 == 0 {
                    return Err("refused".to_owned());
                }
                next_token += 1;
                out.push(next_token);
                Ok(next_token)
            },
            now,
            &mut observed,
        );
        assert!(out.len() <= in_flight, "{} calls out, the bound is {in_flight}", out.len());
        if complete {
            break;
        }
        steps += 1;
        assert!(!out.is_empty() && steps < 10_000, "a reply waits with no call out");
        // End one of the calls out, in whatever order the schedule says.
        let event = events.next().unwrap_or(0);
        let token = out.swap_remove(usize::from(event) % out.len());
        now += Duration::from_millis(u64::from(event));
        match event % 4 {
            0 => {
                server.call_ended(&mut reply, token, true, now, &mut observed);
            }
            1 => {
                let read = || (HeaderCopy::from_iter([(":status", "200")]), FRAME.to_vec(), HeaderCopy::from_iter([("grpc-status", "0")]));
                server.call_answered(&mut reply, token, FRAME.len(), read, now, &mut observed);
            }
            _ => {
                server.heard(&mut reply, token, CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])));
                server.heard(&mut reply, token, CallPart::Data(&FRAME[..usize::from(event) % FRAME.len()]));
                server.heard(&mut reply, token, CallPart::Data(&FRAME[usize::from(event) % FRAME.len()..]));
                server.heard(&mut reply, token, CallPart::Trailers(HeaderCopy::from_iter([("grpc-status", "0")])));
                server.call_ended(&mut reply, token, false, now, &mut observed);
            }
        }
    }
    let response = reply.into_response();
    if response.body.is_empty() {
        return;
    }
    let answers: Vec<Value> = serde_json::from_slice(&response.body).expect("the reply is a JSON array");
    let ids: Vec<u64> = answers.iter().filter_map(|answer| answer["id"].as_u64()).collect();
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "answers in request order: {ids:?}");
    let kept: usize = answers
        .iter()
        .filter(|answer| !answer["error"]["message"].as_str().is_some_and(|m| m.contains("limits.max_batch_reply_bytes")))
        .map(|answer| serde_json::to_string(answer).map_or(0, |text| text.len()))
        .sum();
    assert!(kept <= reply_bytes, "{kept} bytes of answers kept, the bound is {reply_bytes}");
    let _ = (observed.samples(), observed.log_fields());
}

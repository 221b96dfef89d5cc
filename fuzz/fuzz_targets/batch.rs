//! JSON-RPC batches (2025-03-26) of any mix of messages through the whole request path, with
//! the calls they make answered, refused or reset in any order, in parts or whole, by the
//! exchange over the fake host. Checks the
//! bounds: never more calls out than `limits.max_calls_in_flight`, a batch over
//! `limits.max_batch_size` refused whole, a reply that keeps to `limits.max_batch_reply_bytes`
//! and answers every request, in order, once every call has ended.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use switchblade_core::exchange::fake_host::{post, FakeHead, FakeHost, Sent};
use switchblade_core::exchange::Step;
use switchblade_core::grpc::call_end::CallPart;
use switchblade_core::http::HeaderCopy;
use switchblade_core::server::Server;

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
    let mut events = schedule.iter().copied().cycle();
    let mut host = FakeHost {
        max_out: Some(in_flight),
        refuses_every: events.next().unwrap_or(0) % 8,
        ..FakeHost::default()
    };
    let head = FakeHead::post("/mcp").with("mcp-protocol-version", "2025-03-26");
    let count = serde_json::from_str::<Vec<Value>>(body).map_or(0, |messages| messages.len());
    let (mut exchange, step) = post(server, &mut host, &head, body.as_bytes());
    if step == Step::Waiting {
        assert!(count <= batch_size, "a batch over its size made calls");
    }
    let mut steps = 0;
    while exchange.step() == Step::Waiting {
        steps += 1;
        assert!(!host.out.is_empty() && steps < 10_000, "a reply waits with no call out");
        // End one of the calls out, in whatever order the schedule says.
        let event = events.next().unwrap_or(0);
        let id = host.out[usize::from(event) % host.out.len()];
        host.call_gone(id);
        host.clock += Duration::from_millis(u64::from(event));
        match event % 4 {
            0 => exchange.call_ended(server, &mut host, id, true),
            1 => {
                let read = || {
                    (
                        HeaderCopy::from_iter([(":status", "200")]),
                        FRAME.to_vec(),
                        HeaderCopy::from_iter([("grpc-status", "0")]),
                    )
                };
                exchange.call_answered(server, &mut host, id, FRAME.len(), read);
            }
            _ => {
                let cut = usize::from(event) % FRAME.len();
                exchange.call_heard(
                    server,
                    &mut host,
                    id,
                    CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])),
                );
                exchange.call_heard(server, &mut host, id, CallPart::Data(&FRAME[..cut]));
                exchange.call_heard(server, &mut host, id, CallPart::Data(&FRAME[cut..]));
                exchange.call_heard(
                    server,
                    &mut host,
                    id,
                    CallPart::Trailers(HeaderCopy::from_iter([("grpc-status", "0")])),
                );
                exchange.call_ended(server, &mut host, id, false);
            }
        }
    }
    assert!(host.has_answered(), "the exchange ended unanswered");
    let Some(Sent::Whole(status, body)) = host.sent.last() else {
        panic!("a batch answered in parts: {:?}", host.sent);
    };
    if count > batch_size {
        assert_eq!(*status, 400, "a batch over its size is refused whole");
    }
    if *status != 200 || body.is_empty() {
        return;
    }
    let answers: Vec<Value> = serde_json::from_str(body).expect("the reply is a JSON array");
    let ids: Vec<u64> = answers.iter().filter_map(|answer| answer["id"].as_u64()).collect();
    assert!(
        ids.windows(2).all(|pair| pair[0] < pair[1]),
        "answers in request order: {ids:?}"
    );
    let kept: usize = answers
        .iter()
        .filter(|answer| {
            !answer["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("limits.max_batch_reply_bytes"))
        })
        .map(|answer| serde_json::to_string(answer).map_or(0, |text| text.len()))
        .sum();
    assert!(
        kept <= reply_bytes,
        "{kept} bytes of answers kept, the bound is {reply_bytes}"
    );
}

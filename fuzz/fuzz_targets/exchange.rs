//! One request's whole exchange, as a host drives it: any mix of messages (lone or in a batch,
//! unary or streaming calls, lists, cancellations), its body in any chunks, then the calls'
//! answers, parts, ends, resets, cancellations, wake-ups and the request going away, in any
//! order, over a host that may or may not send in parts, route calls, or start them. Checks
//! that nothing panics and the exchange keeps its promises to the host: never more calls out
//! than `limits.max_calls_in_flight`, every call id given once, nothing sent after the answer
//! has ended, and an answer once no call is left out or waiting.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use switchblade_core::exchange::fake_host::{FakeExchange, FakeHead, FakeHost};
use switchblade_core::exchange::Step;
use switchblade_core::grpc::call_end::CallPart;
use switchblade_core::http::HeaderCopy;
use switchblade_core::server::Server;

/// The calls each server may have in flight.
const IN_FLIGHT: [usize; 3] = [1, 2, 8];

thread_local! {
    static SERVERS: Vec<Server> = IN_FLIGHT
        .iter()
        .flat_map(|in_flight| {
            [false, true].map(|routing| {
                let routing = if routing { r#""routing":{"cluster_header":"x-cluster"},"# } else { "" };
                let config = format!(
                    r#"{{{routing}"limits":{{"max_calls_in_flight":{in_flight},"max_response_bytes":512}},
                        "services":{{"demo.catalog.v1.CatalogService":{{"cluster":"c","streaming":true,"max_messages":4}},
                                     "demo.users.v1.UserService":{{"cluster":"c"}}}}}}"#
                );
                Server::from_config_bytes(config.as_bytes()).expect("the fuzz configuration is valid")
            })
        })
        .collect();
}

/// The messages a body is made of.
const MESSAGES: [&str; 6] = [
    r#"{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"UserService_GetUser","arguments":{"user_id":7}}}"#,
    r#"{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"CatalogService_WatchItems","arguments":{},"_meta":{"progressToken":ID}}}"#,
    r#"{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"CatalogService_WatchItems","arguments":{}}}"#,
    r#"{"jsonrpc":"2.0","id":ID,"method":"tools/list"}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":ID}}"#,
    r#"{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"UserService_GetUser","arguments":{"user_id":"x"}}}"#,
];

/// A GetUser answer (user 7) and a WatchItems event, framed.
const FRAME: &[u8] = &[0, 0, 0, 0, 2, 0x08, 7];

fuzz_target!(|data: &[u8]| {
    let [setup, count, schedule @ ..] = data else { return };
    let mut bytes = schedule.iter().copied().cycle();
    let mut next = || bytes.next().unwrap_or(0);
    let messages: Vec<String> = (0..usize::from(*count) % 6 + 1)
        .map(|id| MESSAGES[usize::from(next()) % MESSAGES.len()].replace("ID", &id.to_string()))
        .collect();
    let (version, body) = match messages.len() {
        1 => ("2025-11-25", messages[0].clone()),
        _ => ("2025-03-26", format!("[{}]", messages.join(","))),
    };
    let server_index = usize::from(*setup) % (IN_FLIGHT.len() * 2);
    let mut host = FakeHost {
        in_parts: setup & 0x10 != 0,
        routes: setup & 0x20 != 0,
        refuses_every: (setup >> 6) * 2,
        max_out: Some(IN_FLIGHT[server_index / 2]),
        ..FakeHost::default()
    };
    SERVERS.with(|servers| {
        let server = &servers[server_index];
        let mut exchange = FakeExchange::default();
        let head = FakeHead::post("/mcp")
            .with("mcp-protocol-version", version)
            .with("mcp-session-id", "s");
        assert_eq!(
            exchange.request_headers(server, &mut host, &head, false),
            Step::ReadBody
        );
        // The body in chunks of any size.
        let mut size = 0;
        while size < body.len() {
            size = (size + usize::from(next()) + 1).min(body.len());
            let end = size == body.len();
            let step = exchange.request_body(server, &mut host, size, end, || body.as_bytes().to_vec());
            assert!(end || step == Step::ReadBody, "{step:?} before the body ended");
        }
        for _ in 0..200 {
            if exchange.step() != Step::Waiting && exchange.step() != Step::Routed {
                break;
            }
            let event = next();
            host.clock += Duration::from_millis(u64::from(event));
            let id = match host.out.len() {
                0 => 0,
                len => host.out[usize::from(next()) % len],
            };
            let ends = |host: &mut FakeHost| host.call_gone(id);
            match event % 12 {
                0 => {
                    ends(&mut host);
                    exchange.call_ended(server, &mut host, id, true);
                }
                1 => {
                    ends(&mut host);
                    let read = || {
                        (
                            HeaderCopy::from_iter([(":status", "200")]),
                            FRAME.to_vec(),
                            HeaderCopy::from_iter([("grpc-status", "0")]),
                        )
                    };
                    exchange.call_answered(server, &mut host, id, FRAME.len(), read);
                }
                2 => exchange.call_heard(
                    server,
                    &mut host,
                    id,
                    CallPart::Headers(HeaderCopy::from_iter([(":status", "200")])),
                ),
                3 => exchange.call_heard(
                    server,
                    &mut host,
                    id,
                    CallPart::Data(&FRAME[..usize::from(next()) % FRAME.len()]),
                ),
                4 => {
                    if exchange.message_coming(server, &mut host, id, usize::from(next()) * 4) {
                        exchange.call_heard(server, &mut host, id, CallPart::Message(&FRAME[5..]));
                    }
                }
                5 => exchange.call_heard(
                    server,
                    &mut host,
                    id,
                    CallPart::Trailers(HeaderCopy::from_iter([("grpc-status", "0")])),
                ),
                6 | 7 => {
                    ends(&mut host);
                    exchange.call_ended(server, &mut host, id, false);
                }
                8 => exchange.wake(server, &mut host),
                9 if event > 200 => exchange.cancelled(server, &mut host),
                10 if event > 240 => {
                    exchange.request_gone(server, &mut host);
                    return;
                }
                11 => {
                    exchange.routed_heard(server, CallPart::Data(FRAME));
                    if event > 128 {
                        let _ = exchange.routed_answer(server, &mut host);
                    } else if event > 64 {
                        exchange.routed_deadline_passed(server, &mut host);
                    }
                }
                _ => {}
            }
        }
        match exchange.step() {
            Step::Answered => assert!(
                host.has_answered() || !host.routed.is_empty(),
                "answered, and nothing sent"
            ),
            Step::Waiting => assert!(!host.out.is_empty(), "waits with no call out"),
            _ => {}
        }
    });
});

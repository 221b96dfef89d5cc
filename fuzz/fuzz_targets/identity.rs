//! Who a request is from, out of any bytes: a client address (any text, as Envoy's
//! `source.address` could be) counted by a rate limit whose table has 16 places; the session
//! id, `Authorization` and token payload a cancel key is made of; an `Mcp-Name` header on a
//! 2026-07-28 `tools/call`. Checked, beyond not panicking: the table never holds more than its
//! places, and no caller gets past its burst; a cancel key is the same for the same inputs,
//! and there is none without something only the client holds; a call goes out only when its
//! `Mcp-Name` is the tool's name spelled the one way it may be (plain).
#![no_main]

use std::sync::Arc;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use switchblade_core::cancel::CancelKey;
use switchblade_core::exchange::fake_host::{post, FakeHead, FakeHost};
use switchblade_core::exchange::Step;
use switchblade_core::http::McpHeaders;
use switchblade_core::quota::counters::MemoryCounters;
use switchblade_core::server::Server;

const PLACES: usize = 16;

thread_local! {
    static SERVER: Server = {
        let config = br#"{"services":{"demo.users.v1.UserService":{"cluster":"c"}},
            "limits":{"max_callers":16,"client_address_prefix":{"ipv4":24,"ipv6":48},
                      "rules":[{"match":"*","requests_per_second":0.001,"burst":1}]}}"#;
        Server::from_config_bytes(config).expect("the fuzz configuration is valid")
    };
}

const TOOL: &str = "UserService_GetUser";
const GET_USER: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"UserService_GetUser","arguments":{"user_id":1}}}"#;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\u{1f}');
    let mut part = || parts.next().map(str::to_owned);
    let (address, session_id, authorization, payload, name) = (part(), part(), part(), part(), part());
    SERVER.with(|server| {
        callers_are_bounded(server, address.as_deref().unwrap_or(""));
        cancel_keys_need_a_secret(session_id, authorization, payload.as_deref());
        names_have_one_spelling(server, name.unwrap_or_default());
    });
});

/// Callers made of the address and variations of it (20, more than the table's 16 places), two
/// calls each, as clients at that address would make them.
fn callers_are_bounded(server: &Server, address: &str) {
    let store = Arc::new(MemoryCounters::default());
    let mut host = FakeHost {
        counters: Some(store.clone()),
        ..FakeHost::default()
    };
    for round in 0..24u64 {
        let address = format!("{address}{}", round % 20);
        host.client_address = Some(address.clone());
        host.clock = Duration::from_millis(round);
        let served = (0..2)
            .filter(|_| {
                host.next_exchange();
                let (mut exchange, step) = post(server, &mut host, &FakeHead::post("/mcp"), GET_USER.as_bytes());
                exchange.request_gone(server, &mut host);
                step == Step::Waiting
            })
            .count();
        assert!(
            served <= 1,
            "{address:?} was served {served} calls at once past a burst of 1"
        );
    }
    assert!(store.len() <= PLACES, "{} places held", store.len());
}

fn cancel_keys_need_a_secret(session_id: Option<String>, authorization: Option<String>, payload: Option<&str>) {
    let headers = McpHeaders {
        session_id,
        authorization,
        ..McpHeaders::default()
    };
    let payload = payload.map(str::as_bytes);
    let key = CancelKey::new(&headers, payload, &json!(7));
    assert_eq!(key, CancelKey::new(&headers, payload, &json!(7)));
    let held = [headers.session_id.as_deref(), headers.authorization.as_deref()]
        .iter()
        .any(|part| part.is_some_and(|part| !part.is_empty()))
        || payload.is_some_and(|payload| !payload.is_empty());
    assert_eq!(
        key.is_some(),
        held,
        "a cancel key exactly when the client holds something"
    );
    if let Some(key) = key {
        assert_ne!(
            Some(key),
            CancelKey::new(&headers, payload, &json!(8)),
            "another id, another key"
        );
    }
}

fn names_have_one_spelling(server: &Server, name: String) {
    let head = FakeHead::post("/mcp")
        .without("mcp-session-id")
        .with("mcp-protocol-version", "2026-07-28")
        .with("mcp-method", "tools/call")
        .with("mcp-name", &name);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": TOOL, "arguments": {"user_id": 1},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
    let mut host = FakeHost {
        client_address: Some("10.0.0.1:1".into()),
        ..FakeHost::default()
    };
    if post(server, &mut host, &head, body.to_string().as_bytes()).1 == Step::Waiting {
        assert_eq!(name, TOOL, "a call went out under the header {name:?}");
    }
}

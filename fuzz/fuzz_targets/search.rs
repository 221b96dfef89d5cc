//! Any text as a request in words to `search_tools`, through the request path in search mode:
//! never a panic; a query the tool accepts is answered with tools of the catalog, best first,
//! at most as many as asked; one it refuses, with an argument error. The words' own rules
//! hold too: split words are lowercase and never empty, a request's job is some of its words
//! in order, a request with a word that says something is searched by one, and a query's
//! weights are the word's (1) or its kindred's.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use switchblade_core::exchange::fake_host::{post, FakeHead, FakeHost, Sent};
use switchblade_core::search::words::{job_words, split, Words, KINDRED_WEIGHT};
use switchblade_core::search::MAX_QUERY_BYTES;
use switchblade_core::server::Server;

thread_local! {
    static SERVER: Server = Server::from_config_bytes(
        br#"{"services":{"demo.catalog.v1.CatalogService":{"cluster":"c","streaming":true},
                         "demo.users.v1.UserService":{"cluster":"c"}},
             "discovery":"search"}"#,
    )
    .expect("the fuzz configuration is valid");
    static WORDS: Words = Words::default();
}

/// The catalog's tools: every method of both services (UserService's Chat is not streaming-enabled).
const TOOLS: [&str; 5] = [
    "CatalogService_Search",
    "CatalogService_GetItem",
    "CatalogService_WatchItems",
    "CatalogService_ImportItems",
    "UserService_GetUser",
];

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for word in split(&text) {
        assert!(!word.is_empty());
        assert_eq!(word, word.to_lowercase(), "{text:?}");
    }
    // A request's job is some of its words, in their order.
    let (job, every) = (job_words(&text), split(&text));
    let mut rest = every.iter();
    assert!(job.iter().all(|word| rest.any(|other| other == word)), "{text:?}");
    WORDS.with(|words| {
        let weights = words.query(&text);
        for (_, weight) in &weights {
            assert!(*weight == 1.0 || *weight == KINDRED_WEIGHT, "{text:?}");
        }
        // A request with a word that says something is searched by one, values or not.
        assert!(words.stems(&text).is_empty() || !weights.is_empty(), "{text:?}");
    });
    let limit = data.first().map_or(5, |byte| u64::from(byte % 24));
    SERVER.with(|server| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "search_tools", "arguments": {"query": text, "limit": limit}}})
        .to_string();
        let mut host = FakeHost::default();
        post(server, &mut host, &FakeHead::post("/mcp"), body.as_bytes());
        let [Sent::Whole(_, answer)] = &host.sent[..] else {
            panic!("a search is answered at once: {:?}", host.sent);
        };
        let answer: Value = serde_json::from_str(answer).expect("a JSON-RPC answer");
        let result = &answer["result"];
        let accepted = !text.trim().is_empty() && text.len() <= MAX_QUERY_BYTES && (1..=20).contains(&limit);
        assert_eq!(result["isError"], Value::Bool(!accepted), "{answer}");
        if accepted {
            let found = result["structuredContent"]["tools"]
                .as_array()
                .expect("the tools found");
            assert!(found.len() as u64 <= limit, "{answer}");
            for tool in found {
                let name = tool["name"].as_str().unwrap_or_default();
                assert!(TOOLS.contains(&name), "{name} is not a tool of the catalog");
            }
        }
    });
});

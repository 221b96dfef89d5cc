//! Any text as a task id: read (never a panic), checked against a key ring, and sent as the
//! task of tasks/get, tasks/result and tasks/cancel in both eras; an id that checks is one this
//! ring writes, byte for byte. Any fields signed read back as they were.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchblade_core::exchange::fake_host::{post, FakeHead, FakeHost, Sent};
use switchblade_core::exchange::Step;
use switchblade_core::server::Server;
use switchblade_core::tasks::task_id::{caller_digest, parse, KeyRing, TaskId};

const KEY: [u8; 32] = [7; 32];

thread_local! {
    static SERVER: Server = Server::from_config_bytes(
        br#"{"services":{"demo.exports.v1.ExportService":{"cluster":"c"}},
             "tasks":{"keys":["BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="]}}"#,
    )
    .expect("the fuzz configuration is valid");
}

fuzz_target!(|data: &[u8]| {
    let ring = KeyRing::new(vec![KEY.to_vec()]).expect("a key");
    let text = String::from_utf8_lossy(data);
    let parsed = parse(&text);
    if let Ok(task) = ring.verify(&text, b"") {
        assert_eq!(parsed.as_ref().ok(), Some(&task));
        assert_eq!(ring.sign(&task).as_deref(), Ok(text.as_ref()), "one spelling per id");
    }
    // The bytes as the fields of an id: what is signed reads back.
    let split = data.len() / 2;
    let task = TaskId {
        created_ms: data
            .iter()
            .fold(0u64, |acc, byte| acc.wrapping_mul(31).wrapping_add(u64::from(*byte))),
        tool: String::from_utf8_lossy(&data[..split]).into_owned(),
        operation: String::from_utf8_lossy(&data[split..]).into_owned(),
        caller: caller_digest(data),
    };
    if let Ok(id) = ring.sign(&task) {
        assert_eq!(ring.verify(&id, data), Ok(task));
    }
    SERVER.with(|server| {
        let id = serde_json::Value::String(text.into_owned());
        for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
            let body =
                serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"taskId": id}}).to_string();
            let mut host = FakeHost::default();
            match post(server, &mut host, &FakeHead::post("/mcp"), body.as_bytes()).1 {
                // A call is planned only for an id this ring made (and none is, by chance).
                Step::Waiting => assert!(ring.verify(id.as_str().unwrap_or_default(), b"").is_ok()),
                _ => assert!(
                    matches!(&host.sent[..], [Sent::Whole(_, answer)] if !answer.is_empty()),
                    "{method}: {:?}",
                    host.sent
                ),
            }
        }
    });
});

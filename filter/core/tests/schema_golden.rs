//! The schemas of ordinary APIs stay as they were: every message of the embedded protos (the
//! demo services, the kitchen sink, the buf.validate rules, google.protobuf's descriptors)
//! gives, in both directions, exactly the JSON the inline layout wrote before schemas could be
//! laid out shared. `schema_digests.txt` holds a digest of each, taken from that code.

// The digests are of the default build: with the `cel` feature a CEL rule's words say that the
// gateway checks it, and the schema differs on purpose.
#![cfg(not(feature = "cel"))]
// Test code: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use switchblade_core::descriptors::embedded_pool;
use switchblade_core::docs::Docs;
use switchblade_core::proto_json::gate::Gate;
use switchblade_core::proto_json::schema::message_schema;
use switchblade_core::proto_json::Direction;

const DIGESTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/schema_digests.txt");

/// FNV-1a, 64 bits: stable, and enough to tell two schemas apart.
fn digest(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

#[test]
fn every_embedded_message_has_the_schema_it_had() {
    let pool = embedded_pool().unwrap();
    let docs = Docs::from_pool(&pool);
    let gate = Gate::build(&pool).unwrap();
    let mut lines: Vec<String> = pool
        .all_messages()
        .map(|message| {
            let [input, output] = [Direction::Input, Direction::Output].map(|direction| {
                let schema = message_schema(&message, direction, &docs, &gate).unwrap();
                digest(&serde_json::to_string(&schema).unwrap())
            });
            format!("{} {input} {output}", message.full_name())
        })
        .collect();
    lines.sort();
    let text = std::fs::read_to_string(DIGESTS).unwrap();
    let (comments, expected): (Vec<&str>, Vec<&str>) = text.lines().partition(|line| line.starts_with('#'));
    if std::env::var_os("SWITCHBLADE_WRITE_SCHEMA_DIGESTS").is_some() {
        let kept = comments.iter().map(|line| format!("{line}\n")).collect::<String>();
        std::fs::write(DIGESTS, kept + &lines.join("\n") + "\n").unwrap();
        return;
    }
    let changed: Vec<&String> = lines.iter().filter(|line| !expected.contains(&line.as_str())).collect();
    assert!(
        changed.is_empty() && lines.len() == expected.len(),
        "schemas changed (name, input, output): {changed:#?}"
    );
}

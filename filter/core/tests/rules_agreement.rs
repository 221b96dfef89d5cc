//! The input schema and the gate agree on buf.validate rules: for random values around every
//! rule's limits, where the schema states a field's rules whole (keywords, no words), the
//! schema allows exactly what the gate accepts, so a value built to break such a rule is
//! refused by both; where a format keyword stands for a rule, what the schema allows (formats
//! checked) the gate accepts.

// Test code: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::Rng;
use proptest::prelude::*;
use serde_json::{json, Value};
use switchblade_core::descriptors::embedded_pool;
use switchblade_core::docs::Docs;
use switchblade_core::proto_json::gate::Gate;
use switchblade_core::proto_json::schema::message_schema;
use switchblade_core::proto_json::Direction;

/// Fields of `test.rules.v1.Order` whose rules the schema states whole.
const STATED_WHOLE: [&str; 17] = [
    "name",
    "tier",
    "quantity",
    "account",
    "discount",
    "port",
    "weight",
    "offset",
    "batch",
    "terms_accepted",
    "color",
    "shade",
    "tags",
    "limits",
    "priority",
    "nickname",
    "phone",
];
/// Fields whose rule is a JSON Schema `format` that means the same or less.
const FORMAT_KEYWORDS: [&str; 3] = ["email", "website", "request_id"];
/// Fields whose rules are partly or wholly in words (prefixes, byte lengths, durations,
/// formats JSON Schema lacks): the schema allows more than the gate, by design.
const IN_WORDS: [&str; 11] = [
    "host",
    "client_ip",
    "sku",
    "endpoint",
    "subnet",
    "token",
    "raw_ip",
    "magic",
    "timeout",
    "not_before",
    "update_mask",
];

/// A string of `length` characters from an alphabet that meets and breaks patterns.
fn text(rng: &mut Rng, length: usize) -> String {
    let alphabet = [
        'a', 'b', 'z', '0', '9', '_', 'A', 'Z', '-', '+', ' ', 'é', '✓', '.', ':', '@',
    ];
    (0..length).map(|_| rng.pick(&alphabet)).collect()
}

fn short_text(rng: &mut Rng) -> String {
    let length = rng.below(24) as usize;
    text(rng, length)
}

/// A random value for `field`, mostly near its rules' limits.
fn candidate(field: &str, rng: &mut Rng) -> Value {
    let near = |rng: &mut Rng, points: &[i64]| -> i64 { rng.pick(points) + rng.below(3) as i64 - 1 };
    match field {
        "name" | "tier" | "nickname" | "phone" => {
            let options = vec![
                json!(short_text(rng)),
                json!(rng.pick(&["free", "pro", "gold", "", "ada", "a_1", "+15551234", "+1"])),
            ];
            rng.pick(&options)
        }
        "quantity" => json!(near(rng, &[0, 1, 100, 101, -5])),
        "account" => json!(near(rng, &[0, 13, 14, -1])),
        "offset" => json!(near(rng, &[-1, 0])),
        "port" => json!(near(rng, &[0, 1023, 1024, 49151, 49152, 65535]).max(0)),
        "batch" => json!(rng.pick(&[10, 20, 50, 30, 0, 11])),
        "priority" => json!(near(rng, &[1, 5, 0])),
        "discount" => json!(rng.pick(&[0.0, -0.0, 0.5, 0.999, 1.0, -0.001, 2.5])),
        "weight" => {
            let options = [
                json!(1.5),
                json!("NaN"),
                json!("Infinity"),
                json!("-Infinity"),
                json!(-3),
            ];
            rng.pick(&options)
        }
        "terms_accepted" => json!(rng.below(2) == 0),
        "color" | "shade" => json!(rng.pick(&["COLOR_UNSPECIFIED", "COLOR_RED", "COLOR_GREEN", "COLOR_BLUE"])),
        "tags" => {
            let count = rng.below(6) as usize;
            let pool = ["a", "b", "", "abcdefghijk", "c"];
            json!((0..count).map(|_| rng.pick(&pool)).collect::<Vec<_>>())
        }
        "limits" => {
            let count = rng.below(4) as usize;
            let mut map = serde_json::Map::new();
            for _ in 0..count {
                let key = rng.pick(&["a", "b", "Q", "xy", "x1"]).to_owned();
                map.insert(key, json!(near(rng, &[0, 5])));
            }
            Value::Object(map)
        }
        "email" => json!(rng.pick(&[
            "ada@example.com",
            "ada@",
            "@x.com",
            "a b@x.com",
            "ada@-x.com",
            "a.b@x.y"
        ])),
        "website" => json!(rng.pick(&[
            "https://x.com/a?b#c",
            "x.com",
            "http://[::1]:80/",
            "https://x.com/%zz",
            ""
        ])),
        "request_id" => json!(rng.pick(&[
            "8a9c1e0e-7b1f-4c1e-9f5e-0d2b6a3c4e5f",
            "8a9c1e0e",
            "",
            "8A9C1E0E-7B1F-4C1E-9F5E-0D2B6A3C4E5F"
        ])),
        "host" => json!(rng.pick(&["example.com", "-x.com", "a..b", "x.com.", "123"])),
        "client_ip" => json!(rng.pick(&["::1", "1.2.3.4", "1.2.3", "01.2.3.4", "fe80::1%eth0"])),
        "sku" => json!(rng.pick(&["SKU-1234", "SKU-12", "ABC-1234", "SKU-12345"])),
        "endpoint" => json!(rng.pick(&["x.com:443", "x.com", "[::1]:80", "1.2.3.4:65536"])),
        "subnet" => json!(rng.pick(&["10.0.0.0/8", "10.0.0.1/8", "10.0.0.0/33"])),
        "token" => json!(rng.pick(&["AAECAw==", "AAE=", "AAECAwQFBgcI", ""])),
        "raw_ip" => json!(rng.pick(&["fwAAAQ==", "AAECAwQ="])),
        "magic" => json!(rng.pick(&["iVBORw==", "AAAA"])),
        "timeout" => json!(rng.pick(&["0s", "30s", "30.000000001s", "1.5s", "-1s"])),
        "not_before" => json!(rng.pick(&["1999-12-31T23:59:59Z", "2000-01-01T00:00:00Z", "2000-01-01T00:00:01Z"])),
        "update_mask" => json!(rng.pick(&["name", "name,tags", "color", "name.first", ""])),
        _ => Value::Null,
    }
}

struct Setup {
    gate: Gate,
    message: prost_reflect::MessageDescriptor,
    schema: jsonschema::Validator,
}

fn setup() -> Setup {
    let pool = embedded_pool().unwrap();
    let message = pool.get_message_by_name("test.rules.v1.Order").unwrap();
    let gate = Gate::build(&pool).unwrap();
    let schema = message_schema(&message, Direction::Input, &Docs::from_pool(&pool), &gate).unwrap();
    Setup {
        gate,
        message,
        schema: jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .build(&schema)
            .unwrap(),
    }
}

fn check(setup: &Setup, field: &str, seed: u64) {
    let mut rng = Rng(seed);
    for _ in 0..32 {
        let value = candidate(field, &mut rng);
        let mut arguments = json!({"name": "ada", "phone": "+15551234"});
        arguments[field] = value.clone();
        let schema_allows = setup.schema.is_valid(&arguments);
        let gate = setup.gate.encode(&setup.message, &arguments);
        if schema_allows {
            assert!(
                gate.is_ok(),
                "{field} = {value}: the schema allows it, the gate refuses: {:?}",
                gate.err()
            );
        }
        if STATED_WHOLE.contains(&field) && gate.is_ok() {
            assert!(
                schema_allows,
                "{field} = {value}: the gate accepts it, the schema refuses it"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn what_the_schema_allows_the_gate_accepts(seed in any::<u64>()) {
        let setup = setup();
        for field in STATED_WHOLE.iter().chain(&FORMAT_KEYWORDS) {
            check(&setup, field, seed);
        }
    }
}

/// Each generator reaches both sides of its rules, so the property above is not vacuous.
#[test]
fn the_candidates_meet_and_break_every_rule() {
    let setup = setup();
    for field in STATED_WHOLE.iter().chain(&FORMAT_KEYWORDS).chain(&IN_WORDS) {
        let mut rng = Rng(7);
        let (mut accepted, mut refused) = (0, 0);
        for _ in 0..400 {
            let mut arguments = json!({"name": "ada", "phone": "+15551234"});
            arguments[*field] = candidate(field, &mut rng);
            if setup.gate.encode(&setup.message, &arguments).is_ok() {
                accepted += 1;
            } else {
                refused += 1;
            }
        }
        assert!(
            accepted > 0 && refused > 0,
            "{field}: {accepted} accepted, {refused} refused"
        );
    }
}

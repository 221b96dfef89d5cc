//! The two directions agree: for random messages of every kitchen-sink type, the JSON the
//! filter renders validates against the tool's output schema and input schema, every schema
//! is valid JSON Schema 2020-12, and JSON → protobuf gives back the identical message. The
//! codec is also held to prost-reflect's own proto3 JSON, as an oracle: the same JSON out of
//! the same bytes, and the same message out of the same JSON.

// Test code: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::Rng;
use proptest::prelude::*;
use prost::Message;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, Value};
use serde_json::Value as Json;
use switchblade_core::descriptors::embedded_pool;
use switchblade_core::docs::Docs;
use switchblade_core::proto_json::gate::Gate;
use switchblade_core::proto_json::render::{render as render_response, RenderPlan};
use switchblade_core::proto_json::schema::message_schema;
use switchblade_core::proto_json::Direction;

const MESSAGES: [&str; 5] = [
    "test.kitchensink.v1.Everything",
    "test.kitchensink.v1.Scalars",
    "test.kitchensink.v1.Tree",
    "test.kitchensink.v1.Legacy",
    "demo.catalog.v1.SearchResponse",
];

fn random_message(descriptor: &MessageDescriptor, rng: &mut Rng, depth: u32) -> DynamicMessage {
    if let Some(message) = well_known(descriptor, rng) {
        return message;
    }
    let mut message = DynamicMessage::new(descriptor.clone());
    for field in descriptor.fields() {
        let required = field.cardinality() == prost_reflect::Cardinality::Required || field.name() == "must";
        if !required && (!rng.chance(60) || (depth > 2 && matches!(field.kind(), Kind::Message(_)))) {
            continue;
        }
        if let Some(oneof) = field.containing_oneof() {
            if oneof.fields().any(|member| message.has_field(&member)) {
                continue;
            }
        }
        let value = random_field(&field, rng, depth);
        message.set_field(&field, value);
    }
    message
}

fn random_field(field: &FieldDescriptor, rng: &mut Rng, depth: u32) -> Value {
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else {
            unreachable!()
        };
        let (key, value) = (entry.map_entry_key_field(), entry.map_entry_value_field());
        let map = (0..rng.below(3))
            .filter_map(|_| {
                let key = match random_value(&key.kind(), rng, depth) {
                    Value::Bool(b) => MapKey::Bool(b),
                    Value::I32(n) => MapKey::I32(n),
                    Value::I64(n) => MapKey::I64(n),
                    Value::U32(n) => MapKey::U32(n),
                    Value::U64(n) => MapKey::U64(n),
                    Value::String(s) => MapKey::String(s),
                    _ => return None,
                };
                Some((key, random_value(&value.kind(), rng, depth + 1)))
            })
            .collect();
        Value::Map(map)
    } else if field.is_list() {
        Value::List(
            (0..rng.below(3))
                .map(|_| random_value(&field.kind(), rng, depth + 1))
                .collect(),
        )
    } else {
        random_value(&field.kind(), rng, depth + 1)
    }
}

fn random_value(kind: &Kind, rng: &mut Rng, depth: u32) -> Value {
    match kind {
        Kind::Double => Value::F64(rng.pick(&[0.0, -1.5, 1e300, 2.5e-8, 123456.789])),
        Kind::Float => Value::F32(rng.pick(&[0.0, 0.5, -3.25, 1e30])),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(rng.pick(&[0, -1, i32::MIN, i32::MAX, 7])),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
            Value::I64(rng.pick(&[0, -1, i64::MIN, i64::MAX, 9_007_199_254_740_993]))
        }
        Kind::Uint32 | Kind::Fixed32 => Value::U32(rng.pick(&[0, 1, u32::MAX])),
        Kind::Uint64 | Kind::Fixed64 => Value::U64(rng.pick(&[0, 1, u64::MAX])),
        Kind::Bool => Value::Bool(rng.chance(50)),
        Kind::String => Value::String(
            rng.pick(&["", "plain", "ünïcødé ✓", "quote \" and \\ backslash", "line\nbreak"])
                .to_owned(),
        ),
        Kind::Bytes => Value::Bytes(rng.pick(&[vec![], vec![0, 1, 2, 255], b"text".to_vec()]).into()),
        Kind::Enum(descriptor) => {
            let numbers: Vec<i32> = descriptor.values().map(|value| value.number()).collect();
            Value::EnumNumber(rng.pick(&numbers))
        }
        Kind::Message(message) => Value::Message(random_message(message, rng, depth)),
    }
}

/// Valid samples of the well-known types (their JSON forms have rules of their own).
fn well_known(descriptor: &MessageDescriptor, rng: &mut Rng) -> Option<DynamicMessage> {
    let json = match descriptor.full_name() {
        "google.protobuf.Timestamp" => rng.pick(&[
            r#""1970-01-01T00:00:00Z""#,
            r#""2026-01-31T12:00:00.250Z""#,
            r#""9999-12-31T23:59:59.999999999Z""#,
        ]),
        "google.protobuf.Duration" => rng.pick(&[r#""0s""#, r#""-1.500s""#, r#""315576000000s""#]),
        "google.protobuf.FieldMask" => rng.pick(&[r#""""#, r#""name,price.amount""#]),
        "google.protobuf.Struct" => rng.pick(&[r#"{}"#, r#"{"a":[1,"b",null,true,{"c":{}}]}"#]),
        "google.protobuf.Value" => rng.pick(&["null", "1.5", r#""s""#, "[1,[2]]", r#"{"k":false}"#]),
        "google.protobuf.ListValue" => rng.pick(&["[]", r#"[1,"a",null]"#]),
        "google.protobuf.Empty" => "{}",
        "google.protobuf.Any" => {
            r#"{"@type":"type.googleapis.com/test.kitchensink.v1.Tree","label":"x","children":[]}"#
        }
        _ => return None,
    };
    let mut deserializer = serde_json::Deserializer::from_str(json);
    Some(DynamicMessage::deserialize(descriptor.clone(), &mut deserializer).expect("valid sample"))
}

fn validator(schema: &Json) -> jsonschema::Validator {
    assert!(jsonschema::meta::is_valid(schema), "not a valid JSON Schema: {schema}");
    jsonschema::draft202012::new(schema).expect("schema compiles")
}

fn render(descriptor: &MessageDescriptor, bytes: &[u8]) -> Json {
    serde_json::from_str(&render_response(&RenderPlan::new(descriptor), bytes, usize::MAX).unwrap()).unwrap()
}

/// prost-reflect's rendering of the same bytes as JSON text, with the same options.
fn oracle(descriptor: &MessageDescriptor, bytes: &[u8]) -> Json {
    let message = DynamicMessage::decode(descriptor.clone(), bytes).unwrap();
    let options = prost_reflect::SerializeOptions::new()
        .use_proto_field_name(true)
        .skip_default_fields(false);
    let mut text = Vec::new();
    message
        .serialize_with_options(&mut serde_json::Serializer::new(&mut text), &options)
        .unwrap();
    serde_json::from_slice(&text).unwrap()
}

/// Where two JSON values differ, for a readable failure.
fn difference(path: &str, left: &Json, right: &Json) -> Option<String> {
    match (left, right) {
        (Json::Object(a), Json::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter().find_map(|key| {
                let (x, y) = (a.get(key).unwrap_or(&Json::Null), b.get(key).unwrap_or(&Json::Null));
                match (a.get(key), b.get(key)) {
                    (Some(_), Some(_)) => difference(&format!("{path}.{key}"), x, y),
                    _ => Some(format!("{path}.{key}: {:?} against {:?}", a.get(key), b.get(key))),
                }
            })
        }
        (Json::Array(a), Json::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(index, (x, y))| difference(&format!("{path}[{index}]"), x, y)),
        _ => (left != right).then(|| format!("{path}: {left} against {right}")),
    }
}

fn check_agreement(name: &str, seed: u64) {
    let pool = embedded_pool().unwrap();
    let docs = Docs::from_pool(&pool);
    let gate = Gate::build(&pool).unwrap();
    let descriptor = pool.get_message_by_name(name).unwrap();
    let input = validator(&message_schema(&descriptor, Direction::Input, &docs, &gate).unwrap());
    let output = validator(&message_schema(&descriptor, Direction::Output, &docs, &gate).unwrap());

    let message = random_message(&descriptor, &mut Rng(seed), 0);
    let bytes = message.encode_to_vec();
    let rendered = render(&descriptor, &bytes);
    if let Some(difference) = difference("", &rendered, &oracle(&descriptor, &bytes)) {
        panic!("{name}: rendered otherwise than prost-reflect renders: {difference}");
    }
    if let Err(error) = output.validate(&rendered) {
        panic!("{name}: output does not match outputSchema: {error}\n{rendered}");
    }
    if let Err(error) = input.validate(&rendered) {
        panic!("{name}: output is not valid input: {error}\n{rendered}");
    }
    let reencoded = gate
        .encode(&descriptor, &rendered)
        .unwrap_or_else(|error| panic!("{name}: {error}\n{rendered}"));
    // The same message as prost-reflect reads from the same JSON (compared as JSON: a default
    // value set explicitly and one left out are the same message).
    let parsed_by_oracle = DynamicMessage::deserialize(descriptor.clone(), &rendered).unwrap();
    assert_eq!(
        oracle(&descriptor, &reencoded),
        oracle(&descriptor, &parsed_by_oracle.encode_to_vec()),
        "{name}: the gate read another message than prost-reflect reads\n{rendered}"
    );
    let again = render(&descriptor, &reencoded);
    assert_eq!(again, rendered, "{name}: JSON → protobuf → JSON changed the message");
    // The same message, field for field. (Not always the same bytes: map entries are encoded
    // in hash order.)
    let original = DynamicMessage::decode(descriptor.clone(), bytes.as_slice()).unwrap();
    let decoded = DynamicMessage::decode(descriptor.clone(), reencoded.as_slice()).unwrap();
    assert_eq!(
        decoded, original,
        "{name}: JSON → protobuf gave another message\n{rendered}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn rendered_json_matches_both_schemas_and_round_trips(seed in any::<u64>(), which in 0..MESSAGES.len()) {
        check_agreement(MESSAGES[which], seed);
    }
}

#[test]
fn every_message_in_the_embedded_set_has_valid_schemas() {
    let pool = embedded_pool().unwrap();
    let docs = Docs::from_pool(&pool);
    let gate = Gate::build(&pool).unwrap();
    for message in pool.all_messages().filter(|message| !message.is_map_entry()) {
        for direction in [Direction::Input, Direction::Output] {
            let schema = message_schema(&message, direction, &docs, &gate).unwrap();
            assert!(
                jsonschema::meta::is_valid(&schema),
                "{} {direction:?}: {schema}",
                message.full_name()
            );
        }
    }
}

#[test]
fn unknown_enum_numbers_from_the_upstream_still_match_the_output_schema() {
    let pool = embedded_pool().unwrap();
    let docs = Docs::from_pool(&pool);
    let gate = Gate::build(&pool).unwrap();
    let descriptor = pool.get_message_by_name("test.kitchensink.v1.Everything").unwrap();
    // color = 99: a value a newer upstream knows and this descriptor does not.
    let rendered = render(&descriptor, &[0x10, 99, 0x6a, 1, b'm']);
    assert_eq!(rendered["color"], 99);
    let output = validator(&message_schema(&descriptor, Direction::Output, &docs, &gate).unwrap());
    assert!(output.is_valid(&rendered), "{rendered}");
}

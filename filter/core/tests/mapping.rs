//! The mapping table agrees with itself: for every field kind and well-known type, what the
//! wording promises, what the input schema allows and what the gate accepts are the same set.
//!
//! Each example below is a value for one field of the kitchen-sink message and whether the
//! table's words promise it (docs/json-mapping.md says the same). The test holds the
//! input schema (validated with formats, as a strict client would) and the gate to that
//! answer, and every refusal to the field's words.
//! `SCHEMA_GAPS` lists what the gate refuses and no JSON Schema can say, so each stays known.

// Test code: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use prost_reflect::{DescriptorPool, FieldDescriptor, Kind, MessageDescriptor};
use serde_json::Value;
use switchblade_core::descriptors::embedded_pool;
use switchblade_core::docs::Docs;
use switchblade_core::proto_json::gate::Gate;
use switchblade_core::proto_json::schema::message_schema;
use switchblade_core::proto_json::{expected_in_field, Direction, WellKnown};

const EVERYTHING: &str = "test.kitchensink.v1.Everything";

/// (field path, value as JSON text, promised by the words?). `scalars.x` is field `x` of the
/// `Scalars` message in field `scalars`.
const EXAMPLES: &[(&str, &str, bool)] = &[
    // double: a number, or exactly one of the three non-finite names.
    ("scalars.a_double", "1.5", true),
    ("scalars.a_double", "-1e300", true),
    ("scalars.a_double", r#""NaN""#, true),
    ("scalars.a_double", r#""Infinity""#, true),
    ("scalars.a_double", r#""-Infinity""#, true),
    ("scalars.a_double", r#""1.5""#, false),
    ("scalars.a_double", r#""nan""#, false),
    ("scalars.a_double", r#""fast""#, false),
    ("scalars.a_double", "true", false),
    ("scalars.a_double", "null", false),
    // float: the same, within float's range.
    ("scalars.a_float", "0.5", true),
    ("scalars.a_float", "3.0e38", true),
    ("scalars.a_float", "-3.0e38", true),
    ("scalars.a_float", "1e39", false),
    ("scalars.a_float", r#""Infinity""#, true),
    ("scalars.a_float", r#""1e300""#, false),
    // 32-bit integers: JSON integers in range (a number with no fraction is an integer).
    ("scalars.an_int32", "7", true),
    ("scalars.an_int32", "-2147483648", true),
    ("scalars.an_int32", "2147483647", true),
    ("scalars.an_int32", "2147483648", false),
    ("scalars.an_int32", "2.0", true),
    ("scalars.an_int32", "1e2", true),
    ("scalars.an_int32", "1.5", false),
    ("scalars.an_int32", r#""7""#, false),
    ("scalars.an_int32", r#"{"$ne":null}"#, false),
    ("scalars.an_int32", "null", false),
    ("scalars.a_sint32", "-5", true),
    ("scalars.a_sint32", "-2147483649", false),
    ("scalars.an_sfixed32", "-9", true),
    ("scalars.an_sfixed32", r#""-9""#, false),
    ("scalars.a_uint32", "4294967295", true),
    ("scalars.a_uint32", "-1", false),
    ("scalars.a_uint32", "4294967296", false),
    ("scalars.a_fixed32", "7", true),
    ("scalars.a_fixed32", "-7", false),
    // 64-bit integers: a canonical decimal string in range, or a JSON integer in range.
    ("scalars.an_int64", r#""-42""#, true),
    ("scalars.an_int64", "42", true),
    ("scalars.an_int64", "1e3", true),
    ("scalars.an_int64", r#""9223372036854775807""#, true),
    ("scalars.an_int64", r#""-9223372036854775808""#, true),
    ("scalars.an_int64", "-9223372036854775808", true),
    ("scalars.an_int64", "9223372036854775808", false),
    ("scalars.an_int64", r#""007""#, false),
    ("scalars.an_int64", r#""+7""#, false),
    ("scalars.an_int64", r#""-0""#, false),
    ("scalars.an_int64", r#""1e3""#, false),
    ("scalars.an_int64", r#""12abc""#, false),
    ("scalars.an_int64", "1.5", false),
    ("scalars.a_sint64", r#""-9223372036854775808""#, true),
    ("scalars.a_sint64", r#""-92233720368547758080""#, false),
    ("scalars.a_sint64", r#""-07""#, false),
    ("scalars.an_sfixed64", "-10", true),
    ("scalars.an_sfixed64", r#""x""#, false),
    ("scalars.a_uint64", r#""18446744073709551615""#, true),
    ("scalars.a_uint64", "18446744073709551615", true),
    ("scalars.a_uint64", r#""-1""#, false),
    ("scalars.a_uint64", "-7", false),
    ("scalars.a_fixed64", r#""8""#, true),
    ("scalars.a_fixed64", r#""08""#, false),
    // bool, string, bytes.
    ("scalars.a_bool", "true", true),
    ("scalars.a_bool", r#""true""#, false),
    ("scalars.a_bool", "1", false),
    ("scalars.a_string", r#""héllo ✓""#, true),
    ("scalars.a_string", "7", false),
    ("scalars.some_bytes", r#""AAEC/w==""#, true),
    ("scalars.some_bytes", r#""AQ""#, true),
    ("scalars.some_bytes", r#""-_8=""#, true),
    ("scalars.some_bytes", r#""""#, true),
    ("scalars.some_bytes", r#""not base64!""#, false),
    ("scalars.some_bytes", r#""A""#, false),
    ("scalars.some_bytes", "7", false),
    // enums: a value name.
    ("color", r#""COLOR_RED""#, true),
    ("color", r#""COLOR_CRIMSON""#, true),
    ("color", r#""COLOR_BLUE""#, false),
    ("color", "2", false),
    ("color", "7", false),
    ("color", "null", false),
    // lists and maps: each element in its own form; keys spelled canonically.
    ("numbers", "[1, -2]", true),
    ("numbers", "[]", true),
    ("numbers", "[1, null]", false),
    ("numbers", r#"[1, "2"]"#, false),
    ("numbers", r#""1,2,3""#, false),
    ("numbers", "null", false),
    ("many", r#"[{"an_int32": 1}]"#, true),
    ("many", r#"[{"an_int32": "1"}]"#, false),
    ("by_name", r#"{"x": {"a_bool": true}}"#, true),
    ("by_name", r#"{"x": null}"#, false),
    ("by_id", r#"{"-5": "a", "9007199254740993": "b"}"#, true),
    ("by_id", r#"{"007": "a"}"#, false),
    ("by_id", r#"{"one": "a"}"#, false),
    ("by_id", r#"{"1": 2}"#, false),
    ("flags", r#"{"true": 1, "false": 0}"#, true),
    ("flags", r#"{"TRUE": 1}"#, false),
    ("flags", r#"{"true": "1"}"#, false),
    ("colors", r#"{"4294967295": "COLOR_GREEN"}"#, true),
    ("colors", r#"{"1": 1}"#, false),
    ("colors", r#"{"-1": "COLOR_RED"}"#, false),
    // oneof members and proto3 optional: ordinary values; left out when unset.
    ("text", r#""a""#, true),
    ("number", r#""-1""#, true),
    ("nested", r#"{"a_fixed32": 1}"#, true),
    ("maybe", "0", true),
    ("maybe", "null", false),
    ("old", "1", true),
    // well-known types.
    ("at", r#""2026-01-31T12:00:00Z""#, true),
    ("at", r#""2026-01-31T12:00:00.250+01:00""#, true),
    ("at", r#""0001-01-01T00:00:00Z""#, true),
    ("at", r#""0000-01-01T00:00:00Z""#, false),
    ("at", r#""2026-01-31t12:00:00z""#, false),
    ("at", r#""2026-13-01T00:00:00Z""#, false),
    ("at", r#""2026-01-31T12:00:00.1234567891Z""#, false),
    ("at", r#""yesterday""#, false),
    ("at", "1769860800", false),
    ("took", r#""1.5s""#, true),
    ("took", r#""-1.500s""#, true),
    ("took", r#""-0.5s""#, true),
    ("took", r#""315576000000.999999999s""#, true),
    ("took", r#""01s""#, false),
    ("took", r#""1.5""#, false),
    ("took", r#""1.1234567891s""#, false),
    ("took", r#""5 minutes""#, false),
    ("mask", r#""name,price.amount""#, true),
    ("mask", r#""""#, true),
    ("mask", r#""price_amount""#, false),
    ("mask", r#""a..b""#, false),
    ("mask", "5", false),
    ("w_double", "0.25", true),
    ("w_double", r#""0.25""#, false),
    ("w_float", r#""NaN""#, true),
    ("w_float", "1e39", false),
    ("w_int64", r#""-7""#, true),
    ("w_int64", "-7", true),
    ("w_int64", r#""-07""#, false),
    ("w_uint64", r#""7""#, true),
    ("w_uint64", r#""-7""#, false),
    ("w_int32", "-3", true),
    ("w_int32", r#""3""#, false),
    ("w_uint32", "3", true),
    ("w_uint32", "-3", false),
    ("w_bool", "false", true),
    ("w_bool", r#""false""#, false),
    ("w_string", r#""""#, true),
    ("w_string", "1", false),
    ("w_bytes", r#""AQI=""#, true),
    ("w_bytes", r#""!""#, false),
    ("a_struct", r#"{"k": [1, "two", null, true, {"n": 1.5}]}"#, true),
    ("a_struct", "[1]", false),
    ("a_value", "42.5", true),
    ("a_value", "null", true),
    ("a_value", r#"{"a": [null]}"#, true),
    ("a_list", r#"[1, "a", null]"#, true),
    ("a_list", r#"{"a": 1}"#, false),
    ("nothing", "{}", true),
    ("nothing", r#"{"a": 1}"#, false),
    (
        "anything",
        r#"{"@type": "type.googleapis.com/test.kitchensink.v1.Tree", "label": "x"}"#,
        true,
    ),
    (
        "anything",
        r#"{"@type": "type.googleapis.com/google.protobuf.Int32Value", "value": 7}"#,
        true,
    ),
    ("anything", r#"{"label": "x"}"#, false),
    // messages: their fields, each in its form; required fields present.
    ("tree", r#"{"label": "a", "children": [{"label": "b"}]}"#, true),
    ("tree", r#"{"children": [{"label": 5}]}"#, false),
    ("tree", r#"{"label": "a", "nope": 1}"#, false),
    ("legacy", r#"{"id": "a", "level": "LEVEL_HIGH"}"#, true),
    ("legacy", r#"{"count": 1}"#, false),
    ("legacy", r#"{"id": "a", "level": 1}"#, false),
];

/// Arguments the gate refuses and the input schema cannot say, and why.
const SCHEMA_GAPS: &[(&str, &str)] = &[
    // Decimal strings: the pattern says the spelling and the number of digits, the gate the
    // exact range (a pattern for exactly the 64-bit range is 800 characters per field, carried
    // by every tools/list and every model's context).
    (
        r#"{"must": "x", "scalars": {"an_int64": "9223372036854775808"}}"#,
        "an int64 string with 19 digits, above the range",
    ),
    (
        r#"{"must": "x", "scalars": {"a_sint64": "-9223372036854775809"}}"#,
        "a sint64 string with 19 digits, below the range",
    ),
    (
        r#"{"must": "x", "scalars": {"a_uint64": "18446744073709551616"}}"#,
        "a uint64 string with 20 digits, above the range",
    ),
    (
        r#"{"must": "x", "by_id": {"9223372036854775808": "a"}}"#,
        "an int64 map key with 19 digits, above the range",
    ),
    (
        r#"{"must": "x", "took": "315576000001s"}"#,
        "a Duration of 12-digit seconds beyond 10,000 years",
    ),
    (
        r#"{"must": "x", "anything": {"@type": "type.googleapis.com/acme.Unknown"}}"#,
        "an Any's type is known only at run time",
    ),
    (
        r#"{"must": "x", "anything": {"@type": "type.googleapis.com/google.protobuf.Int32Value", "value": "7"}}"#,
        "an Any's contents follow its type, known only at run time",
    ),
    (
        r#"{"must": "x", "text": "a", "number": "1"}"#,
        "at most one member of a oneof: said in the description, since anyOf/oneOf are refused by major model APIs",
    ),
    (
        r#"{"must": "x", "alias": "a", "renamed": "b"}"#,
        "a field given under both of its names (proto and JSON names are both accepted; the schema lists proto names)",
    ),
];

struct Contract {
    pool: DescriptorPool,
    message: MessageDescriptor,
    gate: Gate,
    schema: jsonschema::Validator,
}

impl Contract {
    fn new() -> Contract {
        let pool = embedded_pool().unwrap();
        let message = pool.get_message_by_name(EVERYTHING).unwrap();
        let gate = Gate::build(&pool).unwrap();
        let schema = message_schema(&message, Direction::Input, &Docs::from_pool(&pool), &gate).unwrap();
        assert!(jsonschema::meta::is_valid(&schema));
        let schema = jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&schema)
            .unwrap();
        Contract {
            gate,
            pool,
            message,
            schema,
        }
    }

    /// The arguments with `value` at `path` (and the required `must`).
    fn arguments(path: &str, value: &str) -> Value {
        let (outer, inner) = path
            .split_once('.')
            .map_or((path, None), |(outer, inner)| (outer, Some(inner)));
        let value = match inner {
            Some(inner) => format!(r#"{{"{inner}": {value}}}"#),
            None => value.to_owned(),
        };
        serde_json::from_str(&format!(r#"{{"must": "x", "{outer}": {value}}}"#)).unwrap()
    }

    /// The gate's answer, as a tool call gets it.
    fn admits(&self, arguments: &Value) -> Result<(), String> {
        self.gate
            .encode(&self.message, arguments)
            .map(drop)
            .map_err(|error| error.to_string())
    }

    fn field(&self, path: &str) -> FieldDescriptor {
        let mut message = self.message.clone();
        let mut parts = path.split('.').peekable();
        loop {
            let field = message.get_field_by_name(parts.next().unwrap()).unwrap();
            if parts.peek().is_none() {
                return field;
            }
            let Kind::Message(inner) = field.kind() else {
                panic!("{path}")
            };
            message = inner;
        }
    }
}

#[test]
fn wording_schema_and_gate_accept_the_same_values() {
    let contract = Contract::new();
    let mut disagreements = Vec::new();
    for &(path, value, promised) in EXAMPLES {
        let arguments = Contract::arguments(path, value);
        let schema_allows = contract.schema.is_valid(&arguments);
        let gate_admits = contract.admits(&arguments);
        if schema_allows != promised || gate_admits.is_ok() != promised {
            disagreements.push(format!(
                "{path} = {value}: words {promised}, schema {schema_allows}, gate {gate_admits:?}"
            ));
            continue;
        }
        // A refusal says what the field takes, in the table's words, unless it is about a
        // message's own fields (unknown or missing ones, or a field inside).
        if let Err(refusal) = gate_admits {
            let field = contract.field(path);
            let words = [expected_in_field(&field, false), expected_in_field(&field, true)];
            let about_the_field = words
                .iter()
                .any(|words| refusal.contains(&format!("expected {words}, got")));
            let about_inner_fields = matches!(field.kind(), Kind::Message(_))
                && (refusal.contains("unknown field")
                    || refusal.contains("missing required field")
                    || refusal.contains(&format!("at `{path}."))
                    || refusal.contains(&format!("at `{path}[")));
            if !about_the_field && !about_inner_fields {
                disagreements.push(format!("{path} = {value}: refused in other words: {refusal}"));
            }
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
}

#[test]
fn the_schema_gaps_are_refused_at_the_gate() {
    let contract = Contract::new();
    for &(arguments, why) in SCHEMA_GAPS {
        let arguments: Value = serde_json::from_str(arguments).unwrap();
        assert!(contract.admits(&arguments).is_err(), "{arguments} passes the gate");
        assert!(
            contract.schema.is_valid(&arguments) || arguments.get("alias").is_some(),
            "{arguments} is no longer a gap ({why})"
        );
    }
}

/// Every field kind, and every well-known type, has examples of both answers.
#[test]
fn the_examples_cover_every_kind_and_well_known_type() {
    let contract = Contract::new();
    let kind_of = |field: &FieldDescriptor| -> String {
        match field.kind() {
            Kind::Message(message) if WellKnown::of(&message).is_some() => message.full_name().to_owned(),
            Kind::Message(_) if field.is_map() => "map".to_owned(),
            Kind::Message(_) => "message".to_owned(),
            Kind::Enum(_) => "enum".to_owned(),
            kind => format!("{kind:?}"),
        }
    };
    let mut covered = [BTreeSet::new(), BTreeSet::new()];
    for &(path, _, promised) in EXAMPLES {
        let field = contract.field(path);
        covered[usize::from(promised)].insert(kind_of(&field));
        if field.is_list() {
            covered[usize::from(promised)].insert("list".to_owned());
        }
    }
    let well_known: Vec<String> = contract
        .pool
        .all_messages()
        .filter(|message| WellKnown::of(message).is_some())
        .map(|message| message.full_name().to_owned())
        .collect();
    assert_eq!(well_known.len(), 17);
    let scalar_kinds = [
        "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64", "sfixed32",
        "sfixed64", "bool", "string", "bytes",
    ];
    let every: BTreeSet<String> = scalar_kinds
        .iter()
        .map(|kind| (*kind).to_owned())
        .chain(["enum", "message", "map", "list"].map(str::to_owned))
        .chain(well_known)
        .collect();
    // google.protobuf.Value takes any JSON value: nothing to refuse.
    let refusable: BTreeSet<String> = every
        .iter()
        .filter(|kind| *kind != "google.protobuf.Value")
        .cloned()
        .collect();
    let missing_accepted: Vec<&String> = every.difference(&covered[1]).collect();
    let missing_refused: Vec<&String> = refusable.difference(&covered[0]).collect();
    assert!(
        missing_accepted.is_empty(),
        "no accepted example for {missing_accepted:?}"
    );
    assert!(missing_refused.is_empty(), "no refused example for {missing_refused:?}");
    // And the kitchen sink has a field of every kind, so the table covers the whole mapping.
    let mut in_kitchen_sink = BTreeSet::new();
    for message in ["test.kitchensink.v1.Everything", "test.kitchensink.v1.Scalars"] {
        for field in contract.pool.get_message_by_name(message).unwrap().fields() {
            in_kitchen_sink.insert(kind_of(&field));
        }
    }
    in_kitchen_sink.insert("list".to_owned());
    assert_eq!(in_kitchen_sink, every);
}

//! The well-known types whose JSON is not an object of their fields: which they are, their
//! schemas and words, and the shape their strings must have.

use prost_reflect::{Kind, MessageDescriptor};
use serde_json::{json, Value};

use super::decimal::IntRange;
use super::time::MAX_DURATION_SECONDS;
use super::{Direction, Form};

/// The whole seconds of a `Duration`: at most 10,000 years either way.
const DURATION_SECONDS: IntRange = IntRange {
    below_zero: 0,
    above_zero: MAX_DURATION_SECONDS,
};
/// A `Timestamp`: years 0001 to 9999, upper-case `T` and `Z`, at most nanoseconds.
const TIMESTAMP_PATTERN: &str = "^(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})$";
const FIELD_MASK_PATTERN: &str =
    "^([a-z][A-Za-z0-9]*(\\.[a-z][A-Za-z0-9]*)*(,[a-z][A-Za-z0-9]*(\\.[a-z][A-Za-z0-9]*)*)*)?$";

/// The well-known types whose JSON is not an object of their fields.
#[derive(Debug, Clone)]
pub enum WellKnown {
    Timestamp,
    Duration,
    FieldMask,
    Struct,
    ListValue,
    Value,
    Empty,
    Any,
    /// `DoubleValue` … `BytesValue`: the wrapped scalar, written as that scalar.
    Wrapper(Kind),
}

impl WellKnown {
    /// The well-known type `message` is, if it is one.
    pub fn of(message: &MessageDescriptor) -> Option<WellKnown> {
        Some(match message.full_name() {
            "google.protobuf.Timestamp" => WellKnown::Timestamp,
            "google.protobuf.Duration" => WellKnown::Duration,
            "google.protobuf.FieldMask" => WellKnown::FieldMask,
            "google.protobuf.Struct" => WellKnown::Struct,
            "google.protobuf.ListValue" => WellKnown::ListValue,
            "google.protobuf.Value" => WellKnown::Value,
            "google.protobuf.Empty" => WellKnown::Empty,
            "google.protobuf.Any" => WellKnown::Any,
            "google.protobuf.DoubleValue"
            | "google.protobuf.FloatValue"
            | "google.protobuf.Int64Value"
            | "google.protobuf.UInt64Value"
            | "google.protobuf.Int32Value"
            | "google.protobuf.UInt32Value"
            | "google.protobuf.BoolValue"
            | "google.protobuf.StringValue"
            | "google.protobuf.BytesValue" => WellKnown::Wrapper(message.get_field_by_name("value")?.kind()),
            _ => return None,
        })
    }

    pub(super) fn schema(&self, direction: Direction) -> Value {
        match self {
            WellKnown::Timestamp => {
                json!({"type": "string", "format": "date-time", "pattern": TIMESTAMP_PATTERN})
            }
            WellKnown::Duration => json!({
                "type": "string",
                "pattern": format!("^-?({})(\\.[0-9]{{1,9}})?s$", DURATION_SECONDS.alternatives()),
            }),
            WellKnown::FieldMask => json!({"type": "string", "pattern": FIELD_MASK_PATTERN}),
            WellKnown::Struct => json!({"type": "object"}),
            WellKnown::ListValue => json!({"type": "array"}),
            WellKnown::Value => json!({}),
            WellKnown::Empty => json!({"type": "object", "additionalProperties": false}),
            WellKnown::Any => json!({
                "type": "object",
                "description": "A message of any type: \"@type\" names it (type.googleapis.com/package.Message), the other properties are its fields. The type must be one this server knows.",
                "properties": {"@type": {"type": "string"}},
                "required": ["@type"],
            }),
            WellKnown::Wrapper(kind) => Form::of(kind).scalar_schema(direction),
        }
    }

    pub(super) fn expected(&self) -> String {
        match self {
            WellKnown::Timestamp => "an RFC 3339 timestamp such as \"2026-01-31T12:00:00Z\"".into(),
            WellKnown::Duration => "a duration in seconds such as \"1.5s\"".into(),
            WellKnown::FieldMask => "comma-separated field paths such as \"name,price.amount\"".into(),
            WellKnown::Struct => "a JSON object".into(),
            WellKnown::ListValue => "a JSON array".into(),
            WellKnown::Value => "any JSON value".into(),
            WellKnown::Empty => "an empty object".into(),
            WellKnown::Any => "an object with \"@type\" naming a known message".into(),
            WellKnown::Wrapper(kind) => Form::of(kind).expected(),
        }
    }
}

/// Comma-separated paths of dot-separated lowerCamelCase names (the JSON form of a mask).
pub(crate) fn is_field_mask_shape(text: &str) -> bool {
    text.is_empty()
        || text.split(',').all(|path| {
            path.split('.').all(|name| {
                let mut bytes = name.bytes();
                bytes.next().is_some_and(|first| first.is_ascii_lowercase()) && bytes.all(|b| b.is_ascii_alphanumeric())
            })
        })
}

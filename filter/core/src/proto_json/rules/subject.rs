//! The value a rule looks at, read from arguments the gate has already accepted (so every
//! reading here succeeds for well-formed input), or the default a field without presence holds
//! when it is left out.

use std::borrow::Cow;

use prost_reflect::Kind;
use serde_json::Value;

use crate::proto_json::form::base64_bytes;
use crate::proto_json::snake_case;
use crate::proto_json::time::{parse_duration, parse_timestamp};
use crate::proto_json::{Form, WellKnown};

/// A number a rule compares with: integers of every width as `i128`, floats as `f64`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    Int(i128),
    Float(f64),
}

impl std::fmt::Display for Number {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Number::Int(value) => write!(f, "{value}"),
            Number::Float(value) => write!(f, "{value}"),
        }
    }
}

/// A value as rules compare it.
#[derive(Debug, Clone, PartialEq)]
pub enum Subject<'a> {
    Number(Number),
    Bool(bool),
    Text(Cow<'a, str>),
    Bytes(Cow<'a, [u8]>),
    /// An enum value's number.
    Enum(i32),
    /// A Duration, or a Timestamp since the Unix epoch, in nanoseconds.
    Nanos(i128),
    /// A FieldMask's paths, as protobuf names them (snake_case).
    Paths(Vec<String>),
    /// An Any, by its `@type`.
    TypeUrl(Cow<'a, str>),
    /// Anything else: a message, Struct, Value…: only `required` applies.
    Other,
}

impl<'a> Subject<'a> {
    /// `value` of `kind`, as the gate read it.
    pub fn of(kind: &Kind, value: &'a Value) -> Subject<'a> {
        match Form::of(kind) {
            Form::WellKnown(well_known) => match (well_known, value) {
                (WellKnown::Wrapper(inner), value) => Subject::of(&inner, value),
                (WellKnown::Duration, Value::String(text)) => {
                    parse_duration(text).map_or(Subject::Other, |(s, n)| Subject::Nanos(nanos(s, n)))
                }
                (WellKnown::Timestamp, Value::String(text)) => {
                    parse_timestamp(text).map_or(Subject::Other, |(s, n)| Subject::Nanos(nanos(s, n)))
                }
                (WellKnown::FieldMask, Value::String(text)) => Subject::Paths(
                    text.split(',')
                        .filter(|path| !path.is_empty())
                        .map(snake_case)
                        .collect(),
                ),
                (WellKnown::Any, Value::Object(object)) => match object.get("@type") {
                    Some(Value::String(url)) => Subject::TypeUrl(Cow::Borrowed(url)),
                    _ => Subject::Other,
                },
                _ => Subject::Other,
            },
            _ => scalar(kind, value),
        }
    }

    /// What a field without presence holds when it is left out.
    pub fn default_of(kind: &Kind) -> Subject<'static> {
        match kind {
            Kind::Double | Kind::Float => Subject::Number(Number::Float(0.0)),
            Kind::Bool => Subject::Bool(false),
            Kind::String => Subject::Text(Cow::Borrowed("")),
            Kind::Bytes => Subject::Bytes(Cow::Borrowed(&[])),
            Kind::Enum(_) => Subject::Enum(0),
            Kind::Message(_) => Subject::Other,
            _ => Subject::Number(Number::Int(0)),
        }
    }

    /// The zero value of its type, which `IGNORE_IF_ZERO_VALUE` skips.
    pub fn is_zero(&self) -> bool {
        match self {
            Subject::Number(Number::Int(value)) => *value == 0,
            Subject::Number(Number::Float(value)) => *value == 0.0,
            Subject::Bool(value) => !value,
            Subject::Text(text) | Subject::TypeUrl(text) => text.is_empty(),
            Subject::Bytes(bytes) => bytes.is_empty(),
            Subject::Enum(number) => *number == 0,
            Subject::Nanos(nanos) => *nanos == 0,
            Subject::Paths(paths) => paths.is_empty(),
            Subject::Other => false,
        }
    }
}

/// A map key, spelled as JSON spells every key, as the JSON value its key type takes.
pub fn key_value(kind: &Kind, key: &str) -> Value {
    match kind {
        Kind::Bool => Value::Bool(key == "true"),
        _ => Value::String(key.to_owned()),
    }
}

pub fn nanos(seconds: i64, nanos: i32) -> i128 {
    i128::from(seconds) * 1_000_000_000 + i128::from(nanos)
}

/// The gate has read `value` into `kind` before a rule looks at it, so the defaults below are
/// never taken: serde_json has an `f64` for every number, the base64 decodes, the decimal
/// parses. An integer written as `2.0` or `1e2` is read through its `f64`, as the gate read it.
fn scalar<'a>(kind: &Kind, value: &'a Value) -> Subject<'a> {
    match (kind, value) {
        (Kind::Double | Kind::Float, Value::Number(number)) => {
            Subject::Number(Number::Float(number.as_f64().unwrap_or(f64::NAN)))
        }
        (Kind::Double | Kind::Float, Value::String(text)) => Subject::Number(Number::Float(match text.as_str() {
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            _ => f64::NAN,
        })),
        (Kind::Bool, Value::Bool(flag)) => Subject::Bool(*flag),
        (Kind::String, Value::String(text)) => Subject::Text(Cow::Borrowed(text)),
        (Kind::Bytes, Value::String(text)) => Subject::Bytes(Cow::Owned(base64_bytes(text).unwrap_or_default())),
        (Kind::Enum(descriptor), Value::String(name)) => {
            Subject::Enum(descriptor.get_value_by_name(name).map_or(0, |value| value.number()))
        }
        (Kind::Message(_) | Kind::Enum(_), _) => Subject::Other,
        (_, Value::Number(number)) => Subject::Number(Number::Int(
            number
                .as_i64()
                .map(i128::from)
                .or_else(|| number.as_u64().map(i128::from))
                .unwrap_or_else(|| number.as_f64().map_or(0, |float| float as i128)),
        )),
        (_, Value::String(text)) => Subject::Number(Number::Int(text.parse().unwrap_or(0))),
        _ => Subject::Other,
    }
}

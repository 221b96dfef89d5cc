//! CEL rules (`cel`, `cel_expression`, and a message's `cel`), with the `cel` cargo feature:
//! compiled when the configuration loads, and evaluated with `this` bound to the field's value
//! or to the message, as protovalidate binds it. A rule holds when it gives `true` or an empty
//! string; `false` breaks it with its message, another string is the message itself.
//!
//! `this` is built from the arguments the gate has accepted, by their descriptors: messages as
//! maps by proto field name (a field without presence always there, with its default; a field
//! with presence only when given, so `has()` works), 64-bit integers as numbers, enums as
//! their numbers, bytes decoded, Timestamp and Duration as CEL's own.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cel::extractors::{Arguments, This};
use cel::objects::Key;
use cel::{Context, Env, Program, Value as Cel};
use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{Map, Value};

use super::{formats, subject::nanos, CelRule};
use crate::proto_json::form::base64_bytes;
use crate::proto_json::time::{parse_duration, parse_timestamp};
use crate::proto_json::{field_by_key, Form, WellKnown};

/// The environment every rule compiles in: CEL's standard library and its strings extension
/// (`upperAscii()`, `trim()` …), which protovalidate's rules use.
fn env() -> Option<&'static Arc<Env>> {
    static ENV: OnceLock<Option<Arc<Env>>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        env.add_extension(cel::extensions::strings).ok()?;
        Some(Arc::new(env))
    })
    .as_ref()
}

/// A compiled rule.
#[derive(Clone)]
pub struct Compiled(Arc<Program>);

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Compiled")
    }
}

/// `expression`, compiled; or why it does not compile.
pub fn compile(expression: &str) -> Result<Compiled, String> {
    let env = env().ok_or("the CEL environment does not build")?;
    env.compile(expression)
        .map(|program| Compiled(Arc::new(program)))
        .map_err(|error| format!("the CEL rule `{expression}` does not compile: {error}"))
}

thread_local! {
    /// protovalidate's functions on top of the environment: one root per thread, each
    /// evaluation in a scope of its own below it.
    static ROOT: Option<Context<'static, 'static>> = root();
}

fn root() -> Option<Context<'static, 'static>> {
    let mut context = Context::with_env(Arc::clone(env()?));
    context
        .add_function("isEmail", |This(text): This<Arc<String>>| formats::email(&text))
        .ok()?;
    context
        .add_function("isHostname", |This(text): This<Arc<String>>| formats::hostname(&text))
        .ok()?;
    context
        .add_function("isUri", |This(text): This<Arc<String>>| formats::uri(&text))
        .ok()?;
    context
        .add_function("isUriRef", |This(text): This<Arc<String>>| formats::uri_ref(&text))
        .ok()?;
    context
        .add_function("isIp", |This(text): This<Arc<String>>, Arguments(args): Arguments| {
            formats::ip(&text, version(&args))
        })
        .ok()?;
    context
        .add_function(
            "isIpPrefix",
            |This(text): This<Arc<String>>, Arguments(args): Arguments| {
                let strict = args.iter().any(|arg| matches!(arg, Cel::Bool(true)));
                let version = version(&args);
                if strict {
                    formats::ip_prefix(&text, version)
                } else {
                    formats::ip_with_prefixlen(&text, version)
                }
            },
        )
        .ok()?;
    context
        .add_function(
            "isHostAndPort",
            |This(text): This<Arc<String>>, Arguments(args): Arguments| {
                let port_required = args.iter().any(|arg| matches!(arg, Cel::Bool(true)));
                formats::host_and_port(&text) || (!port_required && formats::address(&text))
            },
        )
        .ok()?;
    context
        .add_function("isNan", |This(number): This<f64>| number.is_nan())
        .ok()?;
    context
        .add_function("isInf", |This(number): This<f64>, Arguments(args): Arguments| {
            let sign = args.iter().find_map(|arg| match arg {
                Cel::Int(sign) => Some(*sign),
                _ => None,
            });
            match sign {
                Some(sign) if sign > 0 => number == f64::INFINITY,
                Some(sign) if sign < 0 => number == f64::NEG_INFINITY,
                _ => number.is_infinite(),
            }
        })
        .ok()?;
    context
        .add_function("unique", |This(items): This<Arc<Vec<Cel>>>| {
            items
                .iter()
                .enumerate()
                .all(|(index, item)| !items.iter().skip(index + 1).any(|other| other == item))
        })
        .ok()?;
    Some(context)
}

/// The IP version among a call's arguments (0: either).
fn version(args: &[Cel]) -> u8 {
    args.iter()
        .find_map(|arg| match arg {
            Cel::Int(version @ (4 | 6)) => Some(*version as u8),
            _ => None,
        })
        .unwrap_or(0)
}

/// Whether `rule` holds for `this`; or the words of its violation.
pub fn holds(rule: &CelRule, compiled: &Compiled, this: Cel) -> Result<(), String> {
    let outcome = ROOT.with(|root| {
        let root = root
            .as_ref()
            .ok_or_else(|| "the CEL environment does not build".to_owned())?;
        let mut scope = root.new_inner_scope();
        scope.add_variable_from_value("this", this);
        compiled.0.execute(&scope).map_err(|error| error.to_string())
    });
    let label = rule.label_for_errors();
    match outcome {
        Ok(Cel::Bool(true)) => Ok(()),
        Ok(Cel::String(text)) if text.is_empty() => Ok(()),
        Ok(Cel::String(text)) => Err(format!("{text} ({label})")),
        Ok(Cel::Bool(false)) if rule.message.is_empty() => Err(format!("does not hold ({label})")),
        Ok(Cel::Bool(false)) => Err(format!("{} ({label})", rule.message)),
        Ok(other) => Err(format!("gives {other:?}, not a bool or a string ({label})")),
        Err(error) => Err(format!("could not be evaluated: {error} ({label})")),
    }
}

/// One item of a list, or a map's key (spelled as JSON spells it) or value, as `this`.
pub fn element_value(kind: &Kind, value: &Value) -> Cel {
    of(kind, value)
}

/// `value` of a field (or one element of it, with `element`), as `this`.
pub fn field_value(field: &FieldDescriptor, value: &Value, element: bool) -> Cel {
    match (field.kind(), value) {
        (Kind::Message(entry), Value::Object(entries)) if field.is_map() && !element => {
            let (key_kind, value_kind) = (entry.map_entry_key_field().kind(), entry.map_entry_value_field().kind());
            let map: HashMap<Key, Cel> = entries
                .iter()
                .map(|(key, item)| (key_of(&key_kind, key), of(&value_kind, item)))
                .collect();
            Cel::Map(map.into())
        }
        (kind, Value::Array(items)) if field.is_list() && !element => {
            Cel::List(Arc::new(items.iter().map(|item| of(&kind, item)).collect()))
        }
        (Kind::Message(entry), item) if field.is_map() => of(&entry.map_entry_value_field().kind(), item),
        (kind, item) => of(&kind, item),
    }
}

/// A field's default, as `this` for a field without presence that was left out.
pub fn default_value(field: &FieldDescriptor) -> Cel {
    if field.is_list() {
        return Cel::List(Arc::new(Vec::new()));
    }
    if field.is_map() {
        return Cel::Map(HashMap::<Key, Cel>::new().into());
    }
    default_of(&field.kind())
}

/// A message given as `object`, as `this`.
pub fn message_value(message: &MessageDescriptor, object: &Map<String, Value>) -> Cel {
    let mut fields: HashMap<Key, Cel> = HashMap::new();
    for (key, value) in object {
        if let (Some(field), false) = (field_by_key(message, key), value.is_null()) {
            fields.insert(Key::from(field.name().to_owned()), field_value(&field, value, false));
        }
    }
    for field in message.fields() {
        let name = Key::from(field.name().to_owned());
        if !fields.contains_key(&name) && !field.supports_presence() {
            fields.insert(name, default_value(&field));
        }
    }
    Cel::Map(fields.into())
}

fn of(kind: &Kind, value: &Value) -> Cel {
    match (Form::of(kind), value) {
        (Form::Message(message), Value::Object(object)) => message_value(&message, object),
        (Form::WellKnown(well_known), value) => well_known_value(&well_known, value),
        (Form::Int32 { unsigned: true } | Form::Int64 { unsigned: true }, value) => {
            Cel::UInt(integer(value).and_then(|n| u64::try_from(n).ok()).unwrap_or(0))
        }
        (Form::Int32 { .. } | Form::Int64 { .. }, value) => {
            Cel::Int(integer(value).and_then(|n| i64::try_from(n).ok()).unwrap_or(0))
        }
        (Form::Float { .. }, Value::Number(number)) => Cel::Float(number.as_f64().unwrap_or(f64::NAN)),
        (Form::Float { .. }, Value::String(text)) => Cel::Float(match text.as_str() {
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            _ => f64::NAN,
        }),
        (Form::Bool, Value::Bool(flag)) => Cel::Bool(*flag),
        (Form::String, Value::String(text)) => Cel::String(Arc::new(text.clone())),
        (Form::Bytes, Value::String(text)) => Cel::Bytes(Arc::new(base64_bytes(text).unwrap_or_default())),
        (Form::Enum(descriptor), Value::String(name)) => Cel::Int(
            descriptor
                .get_value_by_name(name)
                .map_or(0, |value| i64::from(value.number())),
        ),
        _ => json(value),
    }
}

fn well_known_value(well_known: &WellKnown, value: &Value) -> Cel {
    match (well_known, value) {
        (WellKnown::Wrapper(inner), value) => of(inner, value),
        (WellKnown::Timestamp, Value::String(text)) => match parse_timestamp(text) {
            Ok((seconds, nanos_part)) => chrono::DateTime::from_timestamp(seconds, nanos_part.unsigned_abs())
                .map_or(Cel::Null, |at| Cel::Timestamp(at.fixed_offset())),
            Err(_) => Cel::Null,
        },
        (WellKnown::Duration, Value::String(text)) => match parse_duration(text) {
            Ok((seconds, nanos_part)) => i64::try_from(nanos(seconds, nanos_part))
                .map_or(Cel::Null, |total| Cel::Duration(chrono::Duration::nanoseconds(total))),
            Err(_) => Cel::Null,
        },
        (WellKnown::FieldMask, Value::String(text)) => {
            let paths: Vec<Cel> = text
                .split(',')
                .filter(|path| !path.is_empty())
                .map(|path| Cel::String(Arc::new(crate::proto_json::gate::snake_case(path))))
                .collect();
            let mut mask: HashMap<Key, Cel> = HashMap::new();
            mask.insert(Key::from("paths".to_owned()), Cel::List(Arc::new(paths)));
            Cel::Map(mask.into())
        }
        (WellKnown::Any, Value::Object(object)) => {
            let mut any: HashMap<Key, Cel> = HashMap::new();
            if let Some(Value::String(url)) = object.get("@type") {
                any.insert(Key::from("type_url".to_owned()), Cel::String(Arc::new(url.clone())));
            }
            Cel::Map(any.into())
        }
        (_, value) => json(value),
    }
}

/// A map key, spelled as JSON spells it, as its key type.
fn key_of(kind: &Kind, key: &str) -> Key {
    match Form::of(kind) {
        Form::Bool => Key::from(key == "true"),
        Form::Int32 { unsigned: true } | Form::Int64 { unsigned: true } => Key::from(key.parse::<u64>().unwrap_or(0)),
        Form::Int32 { .. } | Form::Int64 { .. } => Key::from(key.parse::<i64>().unwrap_or(0)),
        _ => Key::from(key.to_owned()),
    }
}

fn integer(value: &Value) -> Option<i128> {
    match value {
        Value::Number(number) => number
            .as_i64()
            .map(i128::from)
            .or_else(|| number.as_u64().map(i128::from))
            .or_else(|| number.as_f64().map(|float| float as i128)),
        Value::String(text) => text.parse().ok(),
        _ => None,
    }
}

fn default_of(kind: &Kind) -> Cel {
    match Form::of(kind) {
        Form::Int32 { unsigned: true } | Form::Int64 { unsigned: true } => Cel::UInt(0),
        Form::Int32 { .. } | Form::Int64 { .. } | Form::Enum(_) => Cel::Int(0),
        Form::Float { .. } => Cel::Float(0.0),
        Form::Bool => Cel::Bool(false),
        Form::String => Cel::String(Arc::new(String::new())),
        Form::Bytes => Cel::Bytes(Arc::new(Vec::new())),
        _ => Cel::Null,
    }
}

/// Struct, Value and ListValue: the JSON they hold.
fn json(value: &Value) -> Cel {
    match value {
        Value::Null => Cel::Null,
        Value::Bool(flag) => Cel::Bool(*flag),
        Value::Number(number) => Cel::Float(number.as_f64().unwrap_or(f64::NAN)),
        Value::String(text) => Cel::String(Arc::new(text.clone())),
        Value::Array(items) => Cel::List(Arc::new(items.iter().map(json).collect())),
        Value::Object(object) => {
            let map: HashMap<Key, Cel> = object
                .iter()
                .map(|(key, item)| (Key::from(key.clone()), json(item)))
                .collect();
            Cel::Map(map.into())
        }
    }
}

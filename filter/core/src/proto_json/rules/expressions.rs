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

use super::subject::key_value;
use super::{formats, CelRule, Number, Subject};
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

/// One value (a singular field's, an item, or a map's value) as `this`, read as the standard
/// rules read it ([`Subject`]).
pub fn element_value(kind: &Kind, value: &Value) -> Cel {
    match (Form::of(kind), value) {
        (Form::Message(message), Value::Object(object)) => message_value(&message, object),
        (form, value) => from_subject(&form, Subject::of(kind, value), value),
    }
}

/// `value` of a field (a whole list or map, or a singular value), as `this`.
pub fn field_value(field: &FieldDescriptor, value: &Value) -> Cel {
    match (field.kind(), value) {
        (Kind::Message(entry), Value::Object(entries)) if field.is_map() => {
            let (key_kind, value_kind) = (entry.map_entry_key_field().kind(), entry.map_entry_value_field().kind());
            let map: HashMap<Key, Cel> = entries
                .iter()
                .map(|(key, item)| (key_of(&key_kind, key), element_value(&value_kind, item)))
                .collect();
            Cel::Map(map.into())
        }
        (kind, Value::Array(items)) if field.is_list() => {
            Cel::List(Arc::new(items.iter().map(|item| element_value(&kind, item)).collect()))
        }
        (kind, item) => element_value(&kind, item),
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
    let kind = field.kind();
    from_subject(&Form::of(&kind), Subject::default_of(&kind), &Value::Null)
}

/// A message given as `object`, as `this`.
pub fn message_value(message: &MessageDescriptor, object: &Map<String, Value>) -> Cel {
    let mut fields: HashMap<Key, Cel> = HashMap::new();
    for (key, value) in object {
        if let (Some(field), false) = (field_by_key(message, key), value.is_null()) {
            fields.insert(Key::from(field.name().to_owned()), field_value(&field, value));
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

/// A value as the standard rules read it, in CEL's types: unsigned integers as `uint`, enums
/// as their numbers, Timestamp and Duration as CEL's own, a FieldMask and an Any as the
/// messages they are; what rules do not read (Struct, Value …) as the JSON it holds.
fn from_subject(form: &Form, subject: Subject<'_>, value: &Value) -> Cel {
    let form = match form {
        Form::WellKnown(WellKnown::Wrapper(inner)) => Form::of(inner),
        form => form.clone(),
    };
    match (subject, form) {
        (Subject::Number(Number::Int(number)), Form::Int32 { unsigned: true } | Form::Int64 { unsigned: true }) => {
            Cel::UInt(u64::try_from(number).unwrap_or(0))
        }
        (Subject::Number(Number::Int(number)), _) => Cel::Int(i64::try_from(number).unwrap_or(0)),
        (Subject::Number(Number::Float(number)), _) => Cel::Float(number),
        (Subject::Bool(flag), _) => Cel::Bool(flag),
        (Subject::Text(text), _) => Cel::String(Arc::new(text.into_owned())),
        (Subject::Bytes(bytes), _) => Cel::Bytes(Arc::new(bytes.into_owned())),
        (Subject::Enum(number), _) => Cel::Int(i64::from(number)),
        (Subject::Nanos(at), Form::WellKnown(WellKnown::Timestamp)) => {
            let (seconds, nanos) = (at.div_euclid(1_000_000_000), at.rem_euclid(1_000_000_000));
            i64::try_from(seconds)
                .ok()
                .and_then(|seconds| chrono::DateTime::from_timestamp(seconds, u32::try_from(nanos).unwrap_or(0)))
                .map_or(Cel::Null, |at| Cel::Timestamp(at.fixed_offset()))
        }
        (Subject::Nanos(span), _) => {
            i64::try_from(span).map_or(Cel::Null, |span| Cel::Duration(chrono::Duration::nanoseconds(span)))
        }
        (Subject::Paths(paths), _) => {
            let paths: Vec<Cel> = paths.into_iter().map(|path| Cel::String(Arc::new(path))).collect();
            single_field_map("paths", Cel::List(Arc::new(paths)))
        }
        (Subject::TypeUrl(url), _) => single_field_map("type_url", Cel::String(Arc::new(url.into_owned()))),
        (Subject::Other, _) => json(value),
    }
}

fn single_field_map(name: &str, value: Cel) -> Cel {
    let mut map: HashMap<Key, Cel> = HashMap::new();
    map.insert(Key::from(name.to_owned()), value);
    Cel::Map(map.into())
}

/// A map key, spelled as JSON spells it, as its key type.
fn key_of(kind: &Kind, key: &str) -> Key {
    match Subject::of(kind, &key_value(kind, key)) {
        Subject::Bool(flag) => Key::from(flag),
        Subject::Number(Number::Int(number))
            if matches!(
                Form::of(kind),
                Form::Int32 { unsigned: true } | Form::Int64 { unsigned: true }
            ) =>
        {
            Key::from(u64::try_from(number).unwrap_or(0))
        }
        Subject::Number(Number::Int(number)) => Key::from(i64::try_from(number).unwrap_or(0)),
        _ => Key::from(key.to_owned()),
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

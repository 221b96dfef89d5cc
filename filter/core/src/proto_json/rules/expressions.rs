//! CEL rules (`cel`, `cel_expression`, and a message's `cel`), with the `cel` cargo feature:
//! compiled when the configuration loads, and evaluated with `this` bound to the field's value
//! or to the message, as protovalidate binds it. What an outcome means for a rule is said
//! beside the rule ([`super::cel`]).
//!
//! `this` is built from the arguments the gate has accepted, by their descriptors: messages as
//! maps by proto field name (a field without presence always there, with its default; a field
//! with presence only when given, so `has()` works), 64-bit integers as numbers, enums as
//! their numbers, bytes decoded, Timestamp and Duration as CEL's own.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cel::extractors::{Arguments, This};
use cel::objects::Key;
use cel::{Context, DeclarationError, Env, Program, Value as Cel};
use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{Map, Value};

use super::formats::syntax;
use super::subject::{key_value, Number, Subject};
use crate::proto_json::{field_by_key, Form, WellKnown};

/// The environment every rule compiles in: CEL's standard library and its strings extension
/// (`upperAscii()`, `trim()` …), which protovalidate's rules use; or why it does not build.
fn env() -> Result<&'static Arc<Env>, String> {
    static ENV: OnceLock<Result<Arc<Env>, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        env.add_extension(cel::extensions::strings).map_err(not_built)?;
        Ok(Arc::new(env))
    })
    .as_ref()
    .map_err(Clone::clone)
}

fn not_built(error: DeclarationError) -> String {
    format!("the CEL environment does not build: {error}")
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
    env()?
        .compile(expression)
        .map(|program| Compiled(Arc::new(program)))
        .map_err(|error| format!("the CEL rule `{expression}` does not compile: {error}"))
}

thread_local! {
    /// protovalidate's functions on top of the environment: one root per thread, each
    /// evaluation in a scope of its own below it.
    static ROOT: Result<Context<'static, 'static>, String> = root();
}

fn root() -> Result<Context<'static, 'static>, String> {
    let mut context = Context::with_env(Arc::clone(env()?));
    context
        .add_function("isEmail", |This(text): This<Arc<String>>| syntax::email(&text))
        .map_err(not_built)?;
    context
        .add_function("isHostname", |This(text): This<Arc<String>>| syntax::hostname(&text))
        .map_err(not_built)?;
    context
        .add_function("isUri", |This(text): This<Arc<String>>| syntax::uri(&text))
        .map_err(not_built)?;
    context
        .add_function("isUriRef", |This(text): This<Arc<String>>| syntax::uri_ref(&text))
        .map_err(not_built)?;
    context
        .add_function("isIp", |This(text): This<Arc<String>>, Arguments(args): Arguments| {
            syntax::ip(&text, version(&args))
        })
        .map_err(not_built)?;
    context
        .add_function(
            "isIpPrefix",
            |This(text): This<Arc<String>>, Arguments(args): Arguments| {
                let strict = args.iter().any(|arg| matches!(arg, Cel::Bool(true)));
                let version = version(&args);
                if strict {
                    syntax::ip_prefix(&text, version)
                } else {
                    syntax::ip_with_prefixlen(&text, version)
                }
            },
        )
        .map_err(not_built)?;
    context
        .add_function(
            "isHostAndPort",
            |This(text): This<Arc<String>>, Arguments(args): Arguments| {
                let port_required = args.iter().any(|arg| matches!(arg, Cel::Bool(true)));
                syntax::host_and_port(&text) || (!port_required && syntax::address(&text))
            },
        )
        .map_err(not_built)?;
    context
        .add_function("isNan", |This(number): This<f64>| number.is_nan())
        .map_err(not_built)?;
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
        .map_err(not_built)?;
    context
        .add_function("unique", |This(items): This<Arc<Vec<Cel>>>| {
            items
                .iter()
                .enumerate()
                .all(|(index, item)| !items.iter().skip(index + 1).any(|other| other == item))
        })
        .map_err(not_built)?;
    Ok(context)
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

/// What evaluating a rule gave.
pub enum Outcome {
    /// `true`, or an empty string.
    Holds,
    /// `false`.
    Fails,
    /// A string that is not empty: the violation's own words.
    Says(String),
    /// Neither a bool nor a string: this, as CEL shows it.
    Gives(String),
    /// Not evaluated: why.
    Error(String),
}

/// `compiled` evaluated with `this`.
pub fn evaluate(compiled: &Compiled, this: Cel) -> Outcome {
    let outcome = ROOT.with(|root| {
        let root = root.as_ref().map_err(Clone::clone)?;
        let mut scope = root.new_inner_scope();
        scope.add_variable_from_value("this", this);
        compiled.0.execute(&scope).map_err(|error| error.to_string())
    });
    match outcome {
        Ok(Cel::Bool(true)) => Outcome::Holds,
        Ok(Cel::Bool(false)) => Outcome::Fails,
        Ok(Cel::String(text)) if text.is_empty() => Outcome::Holds,
        Ok(Cel::String(text)) => Outcome::Says(text.to_string()),
        Ok(other) => Outcome::Gives(format!("{other:?}")),
        Err(error) => Outcome::Error(error),
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
/// messages they are; what rules do not read (Struct, Value …) as the JSON it holds. The gate
/// has held every integer to its type's range, so the conversions below fit; a Duration
/// longer than CEL's (some 292 years either way) is `null`, which no comparison holds for.
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

/// A map key, spelled as JSON spells it, as its key type (the gate has held it to its range).
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

/// Struct, Value and ListValue: the JSON they hold (serde_json has an `f64` for every number).
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

//! JSON Schema keywords that several rules write: a bound that only tightens, a number rule's
//! JSON numbers, and a rule's value as the JSON a schema compares with.

use serde_json::{json, Map, Value};

use super::subject::{Number, Subject};
use crate::proto_json::Form;

/// Sets `key` to `value`, or keeps what is there if it is already tighter.
pub fn tighten(map: &mut Map<String, Value>, key: &str, value: Value, is_lower: bool) {
    let tighter = match (map.get(key).and_then(Value::as_f64), value.as_f64()) {
        (Some(old), Some(new)) => {
            if is_lower {
                new > old
            } else {
                new < old
            }
        }
        _ => true,
    };
    if tighter {
        map.insert(key.to_owned(), value);
    }
}

/// A number rule on a 64-bit integer or a float: the schema offers JSON numbers only, since
/// JSON Schema cannot compare decimal strings or "NaN" (the gate still reads them).
pub fn numbers_only(form: &Form, base: &mut Map<String, Value>) {
    match form {
        Form::Int64 { .. } => {
            base.insert("type".into(), json!("integer"));
            base.remove("pattern");
        }
        Form::Float { .. } => {
            base.insert("type".into(), json!("number"));
            base.remove("pattern");
        }
        _ => {}
    }
}

/// A rule value as the JSON the schema compares with, where exactly one spelling exists.
pub fn json_of(subject: &Subject<'_>, form: &Form) -> Option<Value> {
    match (subject, form) {
        (Subject::Number(number), Form::Int32 { .. } | Form::Int64 { .. } | Form::Float { .. }) => {
            Some(number_json(*number))
        }
        (Subject::Bool(value), Form::Bool) => Some(json!(value)),
        (Subject::Text(text), Form::String) => Some(json!(text)),
        (Subject::Enum(number), Form::Enum(descriptor)) => {
            descriptor.get_value(*number).map(|value| json!(value.name()))
        }
        _ => None,
    }
}

/// A rule's number as JSON: integers come from 64-bit fields, so they fit; a float JSON cannot
/// write (NaN, an infinity) is `null`.
pub fn number_json(number: Number) -> Value {
    match number {
        Number::Int(value) => i64::try_from(value)
            .map(Value::from)
            .or_else(|_| u64::try_from(value).map(Value::from))
            .unwrap_or(Value::Null),
        Number::Float(value) => serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number),
    }
}

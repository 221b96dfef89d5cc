//! What the mapping table refuses and the JSON parser lets through. prost-reflect reads proto3
//! JSON as tolerantly as the spec allows (numbers as strings, `"nan"`, enum numbers, `null`
//! anywhere, a field under both of its names); the table ([`super::Form`]) is stricter, so that
//! the schema a model reads is the whole truth. Also checked here: required fields (proto2
//! `required`, `google.api.field_behavior = REQUIRED`). Runs after the parser has accepted the
//! arguments, so every value already has its JSON type; one walk.

use std::collections::HashMap;

use prost_reflect::{Cardinality, DescriptorPool, FieldDescriptor, Kind, MessageDescriptor, Value as ProtoValue};
use serde_json::{Map, Value};

use super::explain::{refusal, refusal_of};
use super::transcode::ArgumentError;
use super::{field_by_key, Form, KeyForm, WellKnown};

const FIELD_BEHAVIOR_EXTENSION: &str = "google.api.field_behavior";
const FIELD_BEHAVIOR_REQUIRED: i32 = 2;
const ANY_TYPE_KEY: &str = "@type";

/// The required fields of every message in a pool, by message full name.
#[derive(Debug, Default)]
pub struct InputRules {
    required: HashMap<String, Vec<FieldDescriptor>>,
    /// Where the message inside an `Any` is found.
    pool: DescriptorPool,
}

impl InputRules {
    pub fn build(pool: &DescriptorPool) -> Self {
        let required = pool
            .all_messages()
            .filter_map(|message| {
                let fields: Vec<FieldDescriptor> = message.fields().filter(|field| is_required(pool, field)).collect();
                (!fields.is_empty()).then(|| (message.full_name().to_owned(), fields))
            })
            .collect();
        InputRules {
            required,
            pool: pool.clone(),
        }
    }

    /// Checks `arguments`, which the parser has accepted as a `message`.
    pub fn check(&self, message: &MessageDescriptor, arguments: &Value) -> Result<(), ArgumentError> {
        let form = Form::of(&Kind::Message(message.clone()));
        let mut path = Vec::new();
        if !form.fits(arguments) {
            return Err(error(&path, refusal_of(&form, arguments)));
        }
        self.check_value(&form, arguments, &mut path)
    }

    fn check_message(
        &self,
        message: &MessageDescriptor,
        object: &Map<String, Value>,
        path: &mut Vec<String>,
    ) -> Result<(), ArgumentError> {
        for field in self.required.get(message.full_name()).into_iter().flatten() {
            let present = [field.name(), field.json_name()]
                .iter()
                .any(|key| object.get(*key).is_some_and(|value| !value.is_null()));
            if !present {
                return Err(error(path, format!("missing required field `{}`", field.name())));
            }
        }
        let mut seen: Vec<(u32, &str)> = Vec::with_capacity(object.len());
        for (key, value) in object {
            let Some(field) = field_by_key(message, key) else {
                continue; // The parser refuses unknown fields.
            };
            if let Some((_, other)) = seen.iter().find(|(number, _)| *number == field.number()) {
                return Err(error(
                    path,
                    format!(
                        "`{other}` and `{key}` are the same field ({}); give it once",
                        field.name()
                    ),
                ));
            }
            seen.push((field.number(), key));
            path.push(key.clone());
            self.check_field(&field, value, path)?;
            path.pop();
        }
        Ok(())
    }

    fn check_field(&self, field: &FieldDescriptor, value: &Value, path: &mut Vec<String>) -> Result<(), ArgumentError> {
        if field.is_map() {
            // The parser holds a map to an object (and a list to an array), but takes `null`.
            let (Kind::Message(entry), Value::Object(map)) = (field.kind(), value) else {
                return Err(error(path, refusal(field, false, value)));
            };
            let keys = KeyForm::of(&entry.map_entry_key_field().kind());
            let values = Form::of(&entry.map_entry_value_field().kind());
            for (key, item) in map {
                if !keys.fits(key) {
                    return Err(error(path, refusal(field, false, value)));
                }
                path.push(key.clone());
                self.check_element(field, &values, item, path)?;
                path.pop();
            }
            Ok(())
        } else if field.is_list() {
            let Value::Array(items) = value else {
                return Err(error(path, refusal(field, false, value)));
            };
            let form = Form::of(&field.kind());
            for (index, item) in items.iter().enumerate() {
                path.push(format!("[{index}]"));
                self.check_element(field, &form, item, path)?;
                path.pop();
            }
            Ok(())
        } else {
            self.check_element(field, &Form::of(&field.kind()), value, path)
        }
    }

    /// One value of a field: the whole value of a singular field, or an element of a list or map.
    fn check_element(
        &self,
        field: &FieldDescriptor,
        form: &Form,
        value: &Value,
        path: &mut Vec<String>,
    ) -> Result<(), ArgumentError> {
        if !form.fits(value) {
            let element = field.is_list() || field.is_map();
            return Err(error(path, refusal(field, element, value)));
        }
        self.check_value(form, value, path)
    }

    /// Walks into what a value holds: a message's fields, a wrapper's scalar, an `Any`'s message.
    fn check_value(&self, form: &Form, value: &Value, path: &mut Vec<String>) -> Result<(), ArgumentError> {
        match (form, value) {
            (Form::Message(message), Value::Object(object)) => self.check_message(message, object, path),
            (Form::WellKnown(WellKnown::Any), Value::Object(object)) => self.check_any(object, path),
            _ => Ok(()),
        }
    }

    /// The message inside an `Any`, by its `@type` (the parser has found it in the pool).
    fn check_any(&self, object: &Map<String, Value>, path: &mut Vec<String>) -> Result<(), ArgumentError> {
        let Some(name) = object.get(ANY_TYPE_KEY).and_then(Value::as_str) else {
            return Ok(());
        };
        let name = name.rsplit('/').next().unwrap_or(name);
        let Some(message) = self.pool.get_message_by_name(name) else {
            return Ok(());
        };
        let form = Form::of(&Kind::Message(message.clone()));
        match form {
            // A well-known type in an Any is written as `{"@type": …, "value": <its JSON>}`.
            Form::WellKnown(_) => {
                let value = object.get("value").unwrap_or(&Value::Null);
                if form.fits(value) {
                    return self.check_value(&form, value, path);
                }
                path.push("value".into());
                Err(error(path, refusal_of(&form, value)))
            }
            _ => {
                let mut fields = object.clone();
                fields.remove(ANY_TYPE_KEY);
                self.check_message(&message, &fields, path)
            }
        }
    }
}

/// proto2 `required`, or `google.api.field_behavior = REQUIRED` (when the pool declares it).
pub fn is_required(pool: &DescriptorPool, field: &FieldDescriptor) -> bool {
    if field.cardinality() == Cardinality::Required {
        return true;
    }
    let Some(extension) = pool.get_extension_by_name(FIELD_BEHAVIOR_EXTENSION) else {
        return false;
    };
    let options = field.options();
    if !options.has_extension(&extension) {
        return false;
    }
    match options.get_extension(&extension).as_ref() {
        ProtoValue::List(behaviors) => behaviors
            .iter()
            .any(|behavior| matches!(behavior, ProtoValue::EnumNumber(FIELD_BEHAVIOR_REQUIRED))),
        _ => false,
    }
}

fn error(path: &[String], problem: String) -> ArgumentError {
    let mut joined = String::new();
    for segment in path {
        if !joined.is_empty() && !segment.starts_with('[') {
            joined.push('.');
        }
        joined.push_str(segment);
    }
    ArgumentError {
        path: if joined.is_empty() { ".".into() } else { joined },
        problem,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptors::embedded_pool;
    use serde_json::json;

    fn check(value: Value) -> Result<(), String> {
        let pool = embedded_pool().unwrap();
        let rules = InputRules::build(&pool);
        let message = pool.get_message_by_name("test.kitchensink.v1.Everything").unwrap();
        rules.check(&message, &value).map_err(|e| e.to_string())
    }

    #[test]
    fn required_fields_come_from_field_behavior_and_proto2() {
        let pool = embedded_pool().unwrap();
        let everything = pool.get_message_by_name("test.kitchensink.v1.Everything").unwrap();
        let must = everything.get_field_by_name("must").unwrap();
        let maybe = everything.get_field_by_name("maybe").unwrap();
        let id = pool
            .get_message_by_name("test.kitchensink.v1.Legacy")
            .unwrap()
            .get_field_by_name("id")
            .unwrap();
        assert!(is_required(&pool, &must) && is_required(&pool, &id) && !is_required(&pool, &maybe));
    }

    #[test]
    fn accepts_complete_arguments() {
        check(json!({"must": "x", "color": "COLOR_GREEN", "colors": {"1": "COLOR_RED", "2": "COLOR_CRIMSON"}, "legacy": {"id": "a"}})).unwrap();
        check(json!({"must": "x", "many": [{"an_int32": 1}], "tree": {"children": [{"label": "a"}]}})).unwrap();
    }

    #[test]
    fn refuses_missing_required_fields_at_any_depth() {
        assert_eq!(check(json!({})), Err("missing required field `must`".into()));
        assert_eq!(
            check(json!({"must": null})),
            Err("missing required field `must`".into())
        );
        assert_eq!(
            check(json!({"must": "x", "legacy": {"count": 1}})),
            Err("at `legacy`: missing required field `id`".into())
        );
    }

    #[test]
    fn refuses_enum_numbers_with_the_path() {
        let names = "one of COLOR_UNSPECIFIED, COLOR_CRIMSON, COLOR_RED, COLOR_GREEN";
        assert_eq!(
            check(json!({"must": "x", "color": 7})),
            Err(format!(
                "at `color`: expected {names}, got 7 (give the value's name, not its number)"
            ))
        );
        assert_eq!(
            check(json!({"must": "x", "color": 2})),
            Err(format!(
                "at `color`: expected {names}, got 2 (give the value's name, not its number)"
            ))
        );
        assert!(check(json!({"must": "x", "colors": {"3": 9}}))
            .unwrap_err()
            .starts_with(&format!("at `colors.3`: expected {names}, got 9")));
        assert!(check(json!({"must": "x", "legacy": {"id": "a", "level": 0}}))
            .unwrap_err()
            .starts_with("at `legacy.level`: expected one of LEVEL_LOW, LEVEL_HIGH, got 0"));
    }

    #[test]
    fn refuses_what_the_parser_is_lenient_about() {
        let cases = [
            (json!({"scalars": {"an_int32": "7"}}), "at `scalars.an_int32`: expected a 32-bit integer from -2147483648 to 2147483647, got \"7\""),
            (json!({"scalars": {"an_int64": "007"}}), "at `scalars.an_int64`: expected a 64-bit integer, as a decimal string such as \"-42\" (or a JSON integer), got \"007\""),
            (json!({"scalars": {"a_double": "1.5"}}), "at `scalars.a_double`: expected a number (or \"NaN\", \"Infinity\", \"-Infinity\"), got \"1.5\""),
            (json!({"scalars": {"a_double": "nan"}}), "at `scalars.a_double`: expected a number"),
            (json!({"scalars": null}), "at `scalars`: expected an object (test.kitchensink.v1.Scalars), got null (leave a field out to leave it unset)"),
            (json!({"numbers": null}), "at `numbers`: expected a list, each element a 32-bit integer"),
            (json!({"by_id": {"007": "x"}}), "at `by_id`: expected an object whose keys are a 64-bit integer"),
            (json!({"w_int32": "7"}), "at `w_int32`: expected a 32-bit integer from -2147483648 to 2147483647, got \"7\""),
            (json!({"mask": "a..b"}), "at `mask`: expected comma-separated field paths"),
            (json!({"took": "1.1234567891s"}), "at `took`: expected a duration in seconds"),
            (json!({"alias": "a", "renamed": "b"}), "`alias` and `renamed` are the same field (renamed); give it once"),
            (
                json!({"anything": {"@type": "type.googleapis.com/google.protobuf.Int32Value", "value": "7"}}),
                "at `anything.value`: expected a 32-bit integer",
            ),
            (
                json!({"anything": {"@type": "type.googleapis.com/test.kitchensink.v1.Scalars", "an_int32": "1"}}),
                "at `anything.an_int32`: expected a 32-bit integer",
            ),
        ];
        for (arguments, expected) in cases {
            let mut arguments = arguments;
            arguments["must"] = json!("x");
            let refusal = check(arguments.clone()).unwrap_err();
            assert!(refusal.starts_with(expected), "{arguments}: {refusal}");
        }
    }
}

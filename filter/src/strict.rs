//! What proto3 JSON forbids but the JSON parser lets through: enum numbers the enum does not
//! define, and required fields left out (proto2 `required`, `google.api.field_behavior =
//! REQUIRED`). The rules are computed once per configuration; checking is one walk.

use std::collections::HashMap;

use prost_reflect::{Cardinality, DescriptorPool, FieldDescriptor, Kind, MessageDescriptor, Value as ProtoValue};
use serde_json::Value;

use crate::transcode::ArgumentError;

const FIELD_BEHAVIOR_EXTENSION: &str = "google.api.field_behavior";
const FIELD_BEHAVIOR_REQUIRED: i32 = 2;

/// The required fields of every message in a pool, by message full name.
#[derive(Debug, Default)]
pub struct InputRules {
    required: HashMap<String, Vec<FieldDescriptor>>,
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
        InputRules { required }
    }

    /// Checks `arguments` (already known to be an object) against `message`.
    pub fn check(&self, message: &MessageDescriptor, arguments: &Value) -> Result<(), ArgumentError> {
        self.check_message(message, arguments, &mut Vec::new())
    }

    fn check_message(
        &self,
        message: &MessageDescriptor,
        value: &Value,
        path: &mut Vec<String>,
    ) -> Result<(), ArgumentError> {
        let Value::Object(object) = value else {
            return Ok(()); // The parser reports a wrong type with its own words.
        };
        if is_well_known(message) {
            return Ok(());
        }
        for field in self.required.get(message.full_name()).into_iter().flatten() {
            let present = [field.name(), field.json_name()]
                .iter()
                .any(|key| object.get(*key).is_some_and(|value| !value.is_null()));
            if !present {
                return Err(error(path, format!("missing required field `{}`", field.name())));
            }
        }
        for (key, value) in object {
            let Some(field) = message
                .get_field_by_name(key)
                .or_else(|| message.get_field_by_json_name(key))
            else {
                continue; // The parser refuses unknown fields.
            };
            path.push(key.clone());
            self.check_field(&field, value, path)?;
            path.pop();
        }
        Ok(())
    }

    fn check_field(&self, field: &FieldDescriptor, value: &Value, path: &mut Vec<String>) -> Result<(), ArgumentError> {
        if field.is_map() {
            let Kind::Message(entry) = field.kind() else {
                return Ok(());
            };
            let value_kind = entry.map_entry_value_field().kind();
            for (key, item) in value.as_object().into_iter().flatten() {
                path.push(key.clone());
                self.check_kind(&value_kind, item, path)?;
                path.pop();
            }
            Ok(())
        } else if field.is_list() {
            for (index, item) in value.as_array().into_iter().flatten().enumerate() {
                path.push(format!("[{index}]"));
                self.check_kind(&field.kind(), item, path)?;
                path.pop();
            }
            Ok(())
        } else {
            self.check_kind(&field.kind(), value, path)
        }
    }

    fn check_kind(&self, kind: &Kind, value: &Value, path: &mut Vec<String>) -> Result<(), ArgumentError> {
        match (kind, value) {
            (Kind::Enum(descriptor), Value::Number(number)) => {
                let defined = number
                    .as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .is_some_and(|n| descriptor.get_value(n).is_some());
                if defined {
                    return Ok(());
                }
                let names: Vec<String> = descriptor.values().map(|v| v.name().to_owned()).collect();
                Err(error(
                    path,
                    format!(
                        "{number} is not a value of enum {}; use one of {}",
                        descriptor.full_name(),
                        names.join(", ")
                    ),
                ))
            }
            (Kind::Message(message), value) => self.check_message(message, value, path),
            _ => Ok(()),
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

fn is_well_known(message: &MessageDescriptor) -> bool {
    message.package_name() == "google.protobuf"
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
        check(json!({"must": "x", "color": 2, "colors": {"1": "COLOR_RED", "2": 1}, "legacy": {"id": "a"}})).unwrap();
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
    fn refuses_undefined_enum_numbers_with_the_path() {
        assert_eq!(
            check(json!({"must": "x", "color": 7})),
            Err("at `color`: 7 is not a value of enum test.kitchensink.v1.Color; use one of COLOR_UNSPECIFIED, COLOR_CRIMSON, COLOR_RED, COLOR_GREEN".into())
        );
        assert!(check(json!({"must": "x", "colors": {"3": 9}}))
            .unwrap_err()
            .starts_with("at `colors.3`: 9 is not a value"));
        assert!(check(json!({"must": "x", "legacy": {"id": "a", "level": 0}}))
            .unwrap_err()
            .starts_with("at `legacy.level`: 0 is not a value of enum test.kitchensink.v1.Level"));
        assert!(check(json!({"must": "x", "color": -1})).is_err());
        assert!(check(json!({"must": "x", "color": 4294967297_u64})).is_err());
    }
}

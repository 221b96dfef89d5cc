//! proto3 JSON as this filter speaks it: for every protobuf field kind and well-known type, the
//! JSON a tool call may give, the JSON Schema that promises it, and the words that explain it.
//!
//! This is the one table. The schema builder ([`schema`]), the gate that reads arguments into
//! protobuf ([`gate`]) and the wording of its refusals all read it, so what a schema allows,
//! what the gate accepts and what an error says are the same set of values (`tests/mapping.rs`
//! walks every kind to hold that). [`render`] writes upstream answers in the same forms.
//!
//! Policy, where proto3 JSON leaves a choice (docs/json-mapping.md says the same):
//! - 64-bit integers: a canonical decimal string in range (what outputs carry) or a JSON
//!   integer in range. 32-bit integers: a JSON integer in range only.
//! - `float`, `double`: a JSON number in range, or exactly `"NaN"`, `"Infinity"`, `"-Infinity"`
//!   (what outputs carry for those values); no numbers as strings.
//! - enums: a value name only. `null`: only where it is the value (`Value`, `NullValue`); a
//!   field to leave unset is left out.

pub mod gate;
pub mod render;
pub mod rules;
pub mod schema;

mod decimal;
mod form;
pub(crate) mod time;
mod well_known;
pub(crate) mod wire;

pub use form::{Form, KeyForm};
pub use well_known::WellKnown;

use prost_reflect::{EnumDescriptor, FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{Map, Value};

/// Which side of a call a schema describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Tool arguments, checked strictly at the gate.
    Input,
    /// Structured content, as upstream responses are rendered.
    Output,
}

/// The non-finite `float` and `double` values, which proto3 JSON writes as strings.
/// What a field holds, in words: a map or list as a whole, or one element (`element`).
pub fn expected_in_field(field: &FieldDescriptor, element: bool) -> String {
    if let (true, Kind::Message(entry)) = (field.is_map(), field.kind()) {
        return if element {
            Form::of(&entry.map_entry_value_field().kind()).expected()
        } else {
            let keys = Form::of(&entry.map_entry_key_field().kind()).expected();
            format!("an object whose keys are {keys}")
        };
    }
    let each = Form::of(&field.kind()).expected();
    if field.is_list() && !element {
        format!("a list, each element {each}")
    } else {
        each
    }
}

/// The field an argument key names: its proto name, or its JSON name (lowerCamelCase or
/// `json_name`), both of which proto3 JSON accepts on input.
pub fn field_by_key(message: &MessageDescriptor, key: &str) -> Option<FieldDescriptor> {
    message
        .get_field_by_name(key)
        .or_else(|| message.get_field_by_json_name(key))
}

/// The value of `field` in `object`, under either of its names, unless it is null.
pub(crate) fn given_value<'a>(object: &'a Map<String, Value>, field: &FieldDescriptor) -> Option<&'a Value> {
    [field.name(), field.json_name()]
        .iter()
        .find_map(|key| object.get(*key).filter(|value| !value.is_null()))
}

/// A value given in the arguments, short enough for one line of a refusal.
pub(crate) fn shown(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 40 {
        return text;
    }
    let cut: String = text.chars().take(37).collect();
    format!("{cut}...")
}

/// The names of an enum's values, in declaration order.
pub fn enum_names(descriptor: &EnumDescriptor) -> Vec<String> {
    descriptor.values().map(|value| value.name().to_owned()).collect()
}

/// What kind of JSON value this is, for sentences like "got an array".
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A FieldMask path's JSON spelling (`price.amountMinor`) as proto names (`price.amount_minor`).
pub(crate) fn snake_case(path: &str) -> String {
    let mut name = String::with_capacity(path.len() + 4);
    for character in path.chars() {
        if character.is_ascii_uppercase() {
            name.push('_');
            name.push(character.to_ascii_lowercase());
        } else {
            name.push(character);
        }
    }
    name
}

#[cfg(test)]
mod tests;

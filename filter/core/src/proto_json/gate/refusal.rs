//! Why arguments were refused, in words a model can act on: where, what the field takes (the
//! mapping table's words), and what was given.

use prost_reflect::{FieldDescriptor, Kind};
use serde_json::Value;

use crate::proto_json::{expected_in_field, shown, Form};

/// Why arguments were refused: where in the arguments, and what was wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentError {
    /// JSON path of the offending value, `.` for the arguments object itself.
    pub path: String,
    pub problem: String,
}

impl std::fmt::Display for ArgumentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path == "." {
            write!(f, "{}", self.problem)
        } else {
            write!(f, "at `{}`: {}", self.path, self.problem)
        }
    }
}

/// "expected <what the field holds>, got <value>", with a hint where one helps.
pub(super) fn refusal(field: &FieldDescriptor, element: bool, value: &Value, why: Option<&'static str>) -> String {
    let singular = !(field.is_list() || field.is_map());
    let element_kind = match field.kind() {
        Kind::Message(entry) if field.is_map() => entry.map_entry_value_field().kind(),
        kind => kind,
    };
    let hint = match (value, Form::of(&element_kind)) {
        (Value::Null, _) if singular => Some("leave a field out to leave it unset"),
        (Value::Number(_), Form::Enum(_)) if element || singular => Some("give the value's name, not its number"),
        _ => why,
    };
    refusal_with(expected_in_field(field, element), value, hint)
}

pub(super) fn refusal_with(expected: String, value: &Value, detail: Option<&str>) -> String {
    match detail {
        Some(detail) => format!("expected {expected}, got {} ({detail})", shown(value)),
        None => format!("expected {expected}, got {}", shown(value)),
    }
}

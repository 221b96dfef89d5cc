//! proto3 JSON as this filter speaks it: for every protobuf field kind and well-known type, the
//! JSON a tool call may give, the JSON Schema that promises it, and the words that explain it.
//!
//! This is the one table. The schema builder ([`schema`]), the gate that reads arguments into
//! protobuf ([`gate`]) and the wording of its refusals all read it, so what a schema allows,
//! what the gate accepts and what an error says are the same set of values (`tests/mapping.rs`
//! walks every kind to hold that). [`render`] writes upstream answers in the same forms.
//!
//! Policy, where proto3 JSON leaves a choice (the README's "JSON mapping" says the same):
//! - 64-bit integers: a canonical decimal string in range (what outputs carry) or a JSON
//!   integer in range. 32-bit integers: a JSON integer in range only.
//! - `float`, `double`: a JSON number in range, or exactly `"NaN"`, `"Infinity"`, `"-Infinity"`
//!   (what outputs carry for those values); no numbers as strings.
//! - enums: a value name only. `null`: only where it is the value (`Value`, `NullValue`); a
//!   field to leave unset is left out.

pub mod gate;
pub mod render;
pub mod schema;

mod decimal;
mod scalar;
mod time;
mod well_known;
pub(crate) mod wire;

pub use well_known::WellKnown;

use prost_reflect::{EnumDescriptor, FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{json, Value};

use decimal::IntRange;

/// Which side of a call a schema describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Tool arguments, checked strictly at the gate.
    Input,
    /// Structured content, as upstream responses are rendered.
    Output,
}

/// The non-finite `float` and `double` values, which proto3 JSON writes as strings.
const NON_FINITE_PATTERN: &str = "^(NaN|-?Infinity)$";
/// Standard or URL-safe alphabet, whole groups of four, padding optional.
const BASE64_PATTERN: &str = "^([A-Za-z0-9+/_-]{4})*([A-Za-z0-9+/_-]{2}(==)?|[A-Za-z0-9+/_-]{3}=?)?$";
/// How one value of a field kind is written in JSON.
#[derive(Debug, Clone)]
pub enum Form {
    /// A JSON integer in the 32-bit range.
    Int32 {
        unsigned: bool,
    },
    /// A canonical decimal string, or a JSON integer, in the 64-bit range.
    Int64 {
        unsigned: bool,
    },
    /// A JSON number (within `float`'s range for `single`), or a non-finite value's name.
    Float {
        single: bool,
    },
    Bool,
    String,
    /// Base64, standard or URL-safe, padded or not.
    Bytes,
    /// A value name.
    Enum(EnumDescriptor),
    /// `google.protobuf.NullValue`: `null`.
    Null,
    WellKnown(WellKnown),
    Message(MessageDescriptor),
}

impl Form {
    pub fn of(kind: &Kind) -> Form {
        match kind {
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Form::Int32 { unsigned: false },
            Kind::Uint32 | Kind::Fixed32 => Form::Int32 { unsigned: true },
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Form::Int64 { unsigned: false },
            Kind::Uint64 | Kind::Fixed64 => Form::Int64 { unsigned: true },
            Kind::Double => Form::Float { single: false },
            Kind::Float => Form::Float { single: true },
            Kind::Bool => Form::Bool,
            Kind::String => Form::String,
            Kind::Bytes => Form::Bytes,
            Kind::Enum(descriptor) if descriptor.full_name() == "google.protobuf.NullValue" => Form::Null,
            Kind::Enum(descriptor) => Form::Enum(descriptor.clone()),
            Kind::Message(message) => match WellKnown::of(message) {
                Some(well_known) => Form::WellKnown(well_known),
                None => Form::Message(message.clone()),
            },
        }
    }

    /// The JSON Schema of a value; for a plain message, only its type (the schema builder
    /// writes its properties, sharing definitions across the tool).
    pub fn scalar_schema(&self, direction: Direction) -> Value {
        match self {
            Form::Int32 { unsigned: false } => json!({"type": "integer", "minimum": i32::MIN, "maximum": i32::MAX}),
            Form::Int32 { unsigned: true } => json!({"type": "integer", "minimum": 0, "maximum": u32::MAX}),
            Form::Int64 { unsigned } => {
                let pattern = int_range(self).pattern();
                let (minimum, maximum) = if *unsigned {
                    (json!(0), json!(u64::MAX))
                } else {
                    (json!(i64::MIN), json!(i64::MAX))
                };
                match direction {
                    // Outputs are always strings; inputs may also be JSON integers.
                    Direction::Output => json!({"type": "string", "pattern": pattern}),
                    Direction::Input => json!({
                        "type": ["string", "integer"],
                        "pattern": pattern,
                        "minimum": minimum,
                        "maximum": maximum,
                    }),
                }
            }
            Form::Float { single } => {
                let mut schema = json!({"type": ["number", "string"], "pattern": NON_FINITE_PATTERN});
                if let (true, Value::Object(map)) = (*single, &mut schema) {
                    map.insert("minimum".into(), json!(-f64::from(f32::MAX)));
                    map.insert("maximum".into(), json!(f64::from(f32::MAX)));
                }
                schema
            }
            Form::Bool => json!({"type": "boolean"}),
            Form::String => json!({"type": "string"}),
            Form::Bytes => json!({"type": "string", "contentEncoding": "base64", "pattern": BASE64_PATTERN}),
            Form::Enum(descriptor) => {
                let by_name = json!({"type": "string", "enum": enum_names(descriptor)});
                match direction {
                    Direction::Input => by_name,
                    // Values the upstream knows and this descriptor does not come out as numbers.
                    Direction::Output => json!({"anyOf": [by_name, {"type": "integer"}]}),
                }
            }
            Form::Null => json!({"type": "null"}),
            Form::WellKnown(well_known) => well_known.schema(direction),
            Form::Message(_) => json!({"type": "object"}),
        }
    }

    /// What a value of this form is, in words.
    pub fn expected(&self) -> String {
        match self {
            Form::Int32 { unsigned: false } => "a 32-bit integer from -2147483648 to 2147483647".into(),
            Form::Int32 { unsigned: true } => "an unsigned 32-bit integer from 0 to 4294967295".into(),
            Form::Int64 { unsigned: false } => {
                "a 64-bit integer, as a decimal string such as \"-42\" (or a JSON integer)".into()
            }
            Form::Int64 { unsigned: true } => {
                "an unsigned 64-bit integer, as a decimal string such as \"42\" (or a JSON integer)".into()
            }
            Form::Float { single: false } => "a number (or \"NaN\", \"Infinity\", \"-Infinity\")".into(),
            Form::Float { single: true } => {
                "a 32-bit float, a number up to 3.4028235e38 in size (or \"NaN\", \"Infinity\", \"-Infinity\")".into()
            }
            Form::Bool => "true or false".into(),
            Form::String => "a string".into(),
            Form::Bytes => "base64-encoded bytes".into(),
            Form::Enum(descriptor) => format!("one of {}", enum_names(descriptor).join(", ")),
            Form::Null => "null".into(),
            Form::WellKnown(well_known) => well_known.expected(),
            Form::Message(message) => format!("an object ({})", message.full_name()),
        }
    }
}

/// How a map key is written: JSON object keys are strings, so other key types are spelled.
#[derive(Debug, Clone, Copy)]
pub enum KeyForm {
    String,
    Bool,
    /// A canonical decimal in the key type's range.
    Integer(IntRange),
}

impl KeyForm {
    pub fn of(kind: &Kind) -> KeyForm {
        match Form::of(kind) {
            Form::Bool => KeyForm::Bool,
            form @ (Form::Int32 { .. } | Form::Int64 { .. }) => KeyForm::Integer(int_range(&form)),
            _ => KeyForm::String,
        }
    }

    /// `propertyNames` of the map's schema, if keys are constrained.
    pub fn schema(self) -> Option<Value> {
        match self {
            KeyForm::String => None,
            KeyForm::Bool => Some(json!({"enum": ["true", "false"]})),
            KeyForm::Integer(range) => Some(json!({"pattern": range.pattern()})),
        }
    }

    pub fn fits(self, key: &str) -> bool {
        match self {
            KeyForm::String => true,
            KeyForm::Bool => key == "true" || key == "false",
            KeyForm::Integer(range) => range.is_canonical_decimal(key),
        }
    }
}

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

/// The range of an integer form (any other form has none: an empty range).
pub(crate) fn int_range(form: &Form) -> IntRange {
    match form {
        Form::Int32 { unsigned: false } => IntRange::INT32,
        Form::Int32 { unsigned: true } => IntRange::UINT32,
        Form::Int64 { unsigned: false } => IntRange::INT64,
        Form::Int64 { unsigned: true } => IntRange::UINT64,
        _ => IntRange {
            below_zero: 0,
            above_zero: 0,
        },
    }
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;

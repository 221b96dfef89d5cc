//! The table's rows for values: how each field kind (`Form`) and map key (`KeyForm`) is
//! written in JSON. For each, in this one file: the JSON Schema that promises it, the words
//! that explain it, and the gate's rule that reads it (`scalar`, `encode_key`) into protobuf.
//! (The well-known types' rows are in `well_known.rs`; answers are written by `render/`.)

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::{alphabet, Engine};
use prost_reflect::{EnumDescriptor, Kind, MessageDescriptor};
use serde_json::{json, Number, Value};

use super::decimal::{is_canonical_spelling, IntRange};
use super::wire::{put_len, put_tag, put_varint, zigzag32, zigzag64, WireType};
use super::{enum_names, Direction, WellKnown};

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

/// The range of an integer form (any other form has none: an empty range).
fn int_range(form: &Form) -> IntRange {
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

/// A scalar's wire encoding.
#[derive(Debug)]
pub enum Encoded<'v> {
    Varint(u64),
    Fixed32(u32),
    Fixed64(u64),
    Bytes(std::borrow::Cow<'v, [u8]>),
}

impl Encoded<'_> {
    /// Writes the value as field `number`.
    pub fn put(&self, out: &mut Vec<u8>, number: u32) {
        match self {
            Encoded::Bytes(bytes) => put_len(out, number, bytes),
            Encoded::Varint(_) => put_tag(out, number, WireType::Varint),
            Encoded::Fixed32(_) => put_tag(out, number, WireType::Fixed32),
            Encoded::Fixed64(_) => put_tag(out, number, WireType::Fixed64),
        }
        self.put_bare(out);
    }

    /// Writes the value without a tag, as an element of a packed list.
    pub fn put_bare(&self, out: &mut Vec<u8>) {
        match self {
            Encoded::Varint(value) => put_varint(out, *value),
            Encoded::Fixed32(value) => out.extend_from_slice(&value.to_le_bytes()),
            Encoded::Fixed64(value) => out.extend_from_slice(&value.to_le_bytes()),
            // Only numbers are packed; a length-delimited value is written whole by `put`.
            Encoded::Bytes(_) => {}
        }
    }
}

/// Base64 as the bytes form takes it: standard or URL-safe (even mixed), padded or not.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// `value` as a scalar of `kind`, and whether it is the kind's default; or, if the value does
/// not have the form the table gives the kind, why beyond that (if a detail helps).
pub fn scalar<'v>(kind: &Kind, value: &'v Value) -> Result<(Encoded<'v>, bool), Option<&'static str>> {
    let encoded = match (kind, value) {
        (Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 | Kind::Uint32 | Kind::Fixed32, Value::Number(number)) => {
            let (negative, magnitude) = integer(number, int_range(&Form::of(kind)))?;
            encode_integer(kind, negative, magnitude)
        }
        (Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 | Kind::Uint64 | Kind::Fixed64, value) => {
            let range = int_range(&Form::of(kind));
            let (negative, magnitude) = match value {
                Value::Number(number) => integer(number, range)?,
                Value::String(text) if range.is_canonical_decimal(text) => decimal(text).ok_or(None)?,
                // Spelled right, but too large for the type.
                Value::String(text) if is_canonical_spelling(text) => return Err(Some("out of range")),
                _ => return Err(None),
            };
            encode_integer(kind, negative, magnitude)
        }
        (Kind::Double | Kind::Float, value) => {
            let number = match value {
                Value::Number(number) => number.as_f64().ok_or(None)?,
                Value::String(text) => match text.as_str() {
                    "NaN" => f64::NAN,
                    "Infinity" => f64::INFINITY,
                    "-Infinity" => f64::NEG_INFINITY,
                    _ => return Err(None),
                },
                _ => return Err(None),
            };
            if matches!(kind, Kind::Double) {
                Encoded::Fixed64(number.to_bits())
            } else if number.is_finite() && number.abs() > f64::from(f32::MAX) {
                return Err(Some("out of range"));
            } else {
                Encoded::Fixed32((number as f32).to_bits())
            }
        }
        (Kind::Bool, Value::Bool(flag)) => Encoded::Varint(u64::from(*flag)),
        (Kind::String, Value::String(text)) => Encoded::Bytes(text.as_bytes().into()),
        (Kind::Bytes, Value::String(text)) => Encoded::Bytes(base64_bytes(text).ok_or(None)?.into()),
        (Kind::Enum(descriptor), Value::String(name)) => {
            let value = descriptor.get_value_by_name(name).ok_or(None)?;
            Encoded::Varint(i64::from(value.number()) as u64)
        }
        (Kind::Enum(descriptor), Value::Null) if descriptor.full_name() == "google.protobuf.NullValue" => {
            Encoded::Varint(0)
        }
        _ => return Err(None),
    };
    let is_default = match &encoded {
        Encoded::Varint(value) => *value == 0,
        Encoded::Fixed32(value) => *value == 0,
        Encoded::Fixed64(value) => *value == 0,
        Encoded::Bytes(bytes) => bytes.is_empty(),
    };
    Ok((encoded, is_default))
}

/// A map key, already spelled as its [`KeyForm`](super::KeyForm) says, as field 1 of the
/// entry.
pub fn encode_key(kind: &Kind, key: &str, out: &mut Vec<u8>) {
    let encoded = match kind {
        Kind::Bool => Encoded::Varint(u64::from(key == "true")),
        Kind::String => Encoded::Bytes(key.as_bytes().into()),
        kind => match decimal(key) {
            Some((negative, magnitude)) => encode_integer(kind, negative, magnitude),
            None => return,
        },
    };
    encoded.put(out, 1);
}

/// An integer of `kind`, from its sign and magnitude (already in the kind's range).
fn encode_integer(kind: &Kind, negative: bool, magnitude: u64) -> Encoded<'static> {
    // Two's complement: the bits of the signed value, which each encoding then takes.
    let bits = if negative { magnitude.wrapping_neg() } else { magnitude };
    match kind {
        Kind::Sint32 => Encoded::Varint(zigzag32(bits as i32)),
        Kind::Sint64 => Encoded::Varint(zigzag64(bits as i64)),
        Kind::Sfixed32 | Kind::Fixed32 => Encoded::Fixed32(bits as u32),
        Kind::Sfixed64 | Kind::Fixed64 => Encoded::Fixed64(bits),
        // int32 is written sign-extended to 64 bits, as int64 is.
        _ => Encoded::Varint(bits),
    }
}

/// A canonical decimal as a sign and a magnitude.
fn decimal(text: &str) -> Option<(bool, u64)> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    Some((digits.len() != text.len(), digits.parse().ok()?))
}

/// A JSON number with no fraction, in range, as a sign and a magnitude. A number too large for
/// serde_json's integers arrives as a float: 2^64 and beyond are out of every range here, and
/// below that a float with no fraction converts exactly (`as` saturates, so the bound comes
/// first).
pub fn integer(number: &Number, range: IntRange) -> Result<(bool, u64), Option<&'static str>> {
    let (negative, magnitude) = if let Some(value) = number.as_i64() {
        (value < 0, value.unsigned_abs())
    } else if let Some(value) = number.as_u64() {
        (false, value)
    } else {
        let value = number.as_f64().ok_or(None)?;
        if value.fract() != 0.0 {
            return Err(Some("not an integer"));
        }
        if value.abs() >= 18_446_744_073_709_551_616.0 {
            return Err(Some("out of range"));
        }
        (value < 0.0, value.abs() as u64)
    };
    let limit = if negative { range.below_zero } else { range.above_zero };
    if magnitude > limit {
        return Err(Some("out of range"));
    }
    Ok((negative, magnitude))
}

/// Base64 in either alphabet, padded or not; `None` if it is not base64.
pub(super) fn base64_bytes(text: &str) -> Option<Vec<u8>> {
    if !text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_' | b'='))
    {
        return None;
    }
    let standard: String = text
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    BASE64.decode(standard).ok()
}

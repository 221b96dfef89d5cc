//! Scalars of an answer in their JSON forms: numbers (64-bit ones as strings, non-finite
//! floats by name), strings, bytes as base64, enums by name, and defaults of fields left out.

use base64::Engine;
use prost_reflect::{FieldDescriptor, Kind, Value as ProtoValue};
use serde::Serializer as _;

use super::{wrong_wire_type, Why};
use crate::proto_json::wire::{unzigzag32, unzigzag64, WireValue};

/// A scalar value of `kind` (a field's, or a list element's) as its JSON form.
pub(super) fn write_scalar(
    out: &mut String,
    field: &FieldDescriptor,
    kind: &Kind,
    value: WireValue<'_>,
) -> Result<(), Why> {
    match (kind, value) {
        (Kind::Int32, WireValue::Varint(v)) => push_display(out, v as i32),
        (Kind::Sint32, WireValue::Varint(v)) => push_display(out, unzigzag32(v)),
        (Kind::Uint32, WireValue::Varint(v)) => push_display(out, v as u32),
        (Kind::Sfixed32, WireValue::Fixed32(v)) => push_display(out, v as i32),
        (Kind::Fixed32, WireValue::Fixed32(v)) => push_display(out, v),
        (Kind::Int64, WireValue::Varint(v)) => push_quoted(out, v as i64),
        (Kind::Sint64, WireValue::Varint(v)) => push_quoted(out, unzigzag64(v)),
        (Kind::Uint64, WireValue::Varint(v)) => push_quoted(out, v),
        (Kind::Sfixed64, WireValue::Fixed64(v)) => push_quoted(out, v as i64),
        (Kind::Fixed64, WireValue::Fixed64(v)) => push_quoted(out, v),
        (Kind::Bool, WireValue::Varint(v)) => out.push_str(if v != 0 { "true" } else { "false" }),
        (Kind::Double, WireValue::Fixed64(v)) => write_float(out, f64::from_bits(v), false),
        (Kind::Float, WireValue::Fixed32(v)) => write_float(out, f64::from(f32::from_bits(v)), true),
        (Kind::String, WireValue::Len(bytes)) => {
            let text = std::str::from_utf8(bytes).map_err(|_| format!("field {} is not UTF-8", field.name()))?;
            write_string(out, text);
        }
        (Kind::Bytes, WireValue::Len(bytes)) => {
            out.push('"');
            base64::engine::general_purpose::STANDARD.encode_string(bytes, out);
            out.push('"');
        }
        (Kind::Enum(descriptor), WireValue::Varint(v)) => {
            let number = v as i32;
            match descriptor.get_value(number) {
                _ if descriptor.full_name() == "google.protobuf.NullValue" => out.push_str("null"),
                Some(value) => write_string(out, value.name()),
                // A value the upstream knows and this descriptor does not.
                None => push_display(out, number),
            }
        }
        _ => return Err(wrong_wire_type(field)),
    }
    Ok(())
}

/// The value of a field with no presence that the answer left out.
pub(super) fn write_default(out: &mut String, field: &FieldDescriptor) {
    match (field.kind(), field.default_value()) {
        (Kind::Enum(descriptor), ProtoValue::EnumNumber(number)) => match descriptor.get_value(number) {
            _ if descriptor.full_name() == "google.protobuf.NullValue" => out.push_str("null"),
            Some(value) => write_string(out, value.name()),
            None => push_display(out, number),
        },
        (_, ProtoValue::Bool(flag)) => out.push_str(if flag { "true" } else { "false" }),
        (_, ProtoValue::I32(number)) => push_display(out, number),
        (_, ProtoValue::U32(number)) => push_display(out, number),
        (_, ProtoValue::I64(number)) => push_quoted(out, number),
        (_, ProtoValue::U64(number)) => push_quoted(out, number),
        (_, ProtoValue::F32(number)) => write_float(out, f64::from(number), true),
        (_, ProtoValue::F64(number)) => write_float(out, number, false),
        (_, ProtoValue::String(text)) => write_string(out, &text),
        (_, ProtoValue::Bytes(bytes)) => {
            out.push('"');
            base64::engine::general_purpose::STANDARD.encode_string(&bytes, out);
            out.push('"');
        }
        _ => out.push_str("null"),
    }
}

/// A number as proto3 JSON writes it: the shortest text that reads back the same, or the name
/// of a non-finite value.
pub(super) fn write_float(out: &mut String, number: f64, single: bool) {
    if number.is_nan() {
        out.push_str("\"NaN\"");
    } else if number.is_infinite() {
        out.push_str(if number > 0.0 { "\"Infinity\"" } else { "\"-Infinity\"" });
    } else {
        // Serializing a finite number to a String cannot fail.
        let mut bytes = Vec::with_capacity(24);
        let mut serializer = serde_json::Serializer::new(&mut bytes);
        let _ = if single {
            serializer.serialize_f32(number as f32)
        } else {
            serializer.serialize_f64(number)
        };
        out.push_str(std::str::from_utf8(&bytes).unwrap_or("0"));
    }
}

/// A string, quoted and escaped as JSON (as serde_json escapes: quotes, backslashes and
/// control characters; everything else as it is).
pub(crate) fn write_string(out: &mut String, text: &str) {
    out.reserve(text.len() + 2);
    out.push('"');
    let mut start = 0;
    for (index, byte) in text.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&text[start..index]);
        if escape.is_empty() {
            use std::fmt::Write;
            let _ = write!(out, "\\u{byte:04x}");
        } else {
            out.push_str(escape);
        }
        start = index + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

fn push_display(out: &mut String, value: impl std::fmt::Display) {
    use std::fmt::Write;
    let _ = write!(out, "{value}");
}

/// A 64-bit integer, as proto3 JSON writes it: a decimal string.
fn push_quoted(out: &mut String, value: impl std::fmt::Display) {
    use std::fmt::Write;
    let _ = write!(out, "\"{value}\"");
}

//! Scalars of an answer in their JSON forms: numbers (64-bit ones as strings, non-finite
//! floats by name), strings, bytes as base64, enums by name, and defaults of fields left out.

use base64::Engine;
use prost_reflect::{FieldDescriptor, Kind, Value as ProtoValue};

use super::{wrong_wire_type, RenderError};
use crate::proto_json::wire::{unzigzag32, unzigzag64, WireValue};

/// A scalar value of `kind` (a field's, or a list element's) as its JSON form.
pub(super) fn write_scalar(
    out: &mut String,
    field: &FieldDescriptor,
    kind: &Kind,
    value: WireValue<'_>,
) -> Result<(), RenderError> {
    match (kind, value) {
        (Kind::Int32, WireValue::Varint(v)) => push_integer(out, v as i32),
        (Kind::Sint32, WireValue::Varint(v)) => push_integer(out, unzigzag32(v)),
        (Kind::Uint32, WireValue::Varint(v)) => push_integer(out, v as u32),
        (Kind::Sfixed32, WireValue::Fixed32(v)) => push_integer(out, v as i32),
        (Kind::Fixed32, WireValue::Fixed32(v)) => push_integer(out, v),
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
                None => push_integer(out, number),
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
            None => push_integer(out, number),
        },
        (_, ProtoValue::Bool(flag)) => out.push_str(if flag { "true" } else { "false" }),
        (_, ProtoValue::I32(number)) => push_integer(out, number),
        (_, ProtoValue::U32(number)) => push_integer(out, number),
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
    } else if single {
        // As serde_json writes a finite number, with the same crate.
        out.push_str(zmij::Buffer::new().format_finite(number as f32));
    } else {
        out.push_str(zmij::Buffer::new().format_finite(number));
    }
}

/// A string, quoted and escaped as JSON (as serde_json escapes: quotes, backslashes and
/// control characters; everything else as it is).
pub(crate) fn write_string(out: &mut String, text: &str) {
    out.reserve(text.len() + 2);
    out.push('"');
    let mut start = 0;
    for (index, &byte) in text.as_bytes().iter().enumerate() {
        let escape = ESCAPES[usize::from(byte)];
        if escape == 0 {
            continue;
        }
        // Every escaped byte is ASCII, so both ends are character boundaries.
        out.push_str(&text[start..index]);
        match escape {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            _ => {
                out.push('\\');
                out.push(char::from(escape));
                if escape == b'u' {
                    out.push_str("00");
                    out.push(char::from(HEX_DIGITS[usize::from(byte >> 4)]));
                    out.push(char::from(HEX_DIGITS[usize::from(byte & 0xf)]));
                }
            }
        }
        start = index + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

/// For each byte, what follows the backslash of its escape in a JSON string (`u` for
/// `\u00XX`), or 0 where it stands as it is: one lookup per byte of every string an answer
/// holds, and of the text copy of each structured result.
static ESCAPES: [u8; 256] = {
    let mut escapes = [0; 256];
    let mut control = 0;
    while control < 0x20 {
        escapes[control] = b'u';
        control += 1;
    }
    escapes[0x08] = b'b';
    escapes[0x0c] = b'f';
    escapes[b'\n' as usize] = b'n';
    escapes[b'\r' as usize] = b'r';
    escapes[b'\t' as usize] = b't';
    escapes[b'"' as usize] = b'"';
    escapes[b'\\' as usize] = b'\\';
    escapes
};

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

fn push_integer(out: &mut String, value: impl itoa::Integer) {
    out.push_str(itoa::Buffer::new().format(value));
}

/// A 64-bit integer, as proto3 JSON writes it: a decimal string.
fn push_quoted(out: &mut String, value: impl itoa::Integer) {
    out.push('"');
    push_integer(out, value);
    out.push('"');
}

//! Upstream answers (protobuf bytes) straight to JSON text, in the forms of the mapping table,
//! with proto field names, and with every field that has no presence (at its default when
//! unset) so a model always sees the whole shape. No message is built in between: the bytes
//! are indexed by field number, then written in the order the descriptor declares.
//!
//! Protobuf's own rules apply: the last value of a singular field wins, a message given more
//! than once is merged, the last member set of a oneof is the one, the last entry of a map key
//! wins, and fields the descriptor does not know are skipped.

use std::collections::HashMap;

use base64::Engine;
use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor, OneofDescriptor, Value as ProtoValue};
use serde::Serializer as _;

use super::time::{format_duration, format_timestamp};
use super::wire::{unzigzag32, unzigzag64, Reader, WireValue};
use super::{Form, WellKnown};

/// How deep messages may nest in an answer: protobuf's own limit, which also keeps the stack
/// shallow whatever an upstream sends.
const MAX_DEPTH: usize = 100;

/// Why an upstream answer could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseError(pub String);

/// The answer `bytes`, a `message`, as JSON text.
pub fn render(message: &MessageDescriptor, bytes: &[u8]) -> Result<String, ResponseError> {
    let mut out = String::with_capacity(bytes.len() * 2 + 64);
    write_message(&mut out, message, bytes, 0)
        .map_err(|why| ResponseError(format!("not a valid {}: {why}", message.full_name())))?;
    Ok(out)
}

type Why = String;

/// One field occurrence on the wire.
#[derive(Clone, Copy)]
struct Occurrence<'a> {
    number: u32,
    value: WireValue<'a>,
}

fn write_message(out: &mut String, message: &MessageDescriptor, bytes: &[u8], depth: usize) -> Result<(), Why> {
    if depth > MAX_DEPTH {
        return Err(format!("messages are nested more than {MAX_DEPTH} deep"));
    }
    if let Form::WellKnown(well_known) = Form::of(&Kind::Message(message.clone())) {
        return write_well_known(out, &well_known, message, bytes, depth);
    }
    let mut fields = index(bytes)?;
    let winners = oneof_winners(message, &fields);
    // Stable: occurrences of one field stay in wire order.
    fields.sort_by_key(|occurrence| occurrence.number);
    out.push('{');
    let mut first = true;
    for field in message.fields() {
        let start = fields.partition_point(|occurrence| occurrence.number < field.number());
        let end = fields.partition_point(|occurrence| occurrence.number <= field.number());
        let occurrences = &fields[start..end];
        let present = !occurrences.is_empty();
        let in_oneof = field.containing_oneof().filter(|oneof| !oneof.is_synthetic());
        let lost = in_oneof.is_some_and(|oneof| !winners.contains(&(oneof, field.number())));
        if field.supports_presence() && !field.is_list() && !field.is_map() && (!present || lost) {
            continue;
        }
        if !first {
            out.push(',');
        }
        first = false;
        write_string(out, field.name());
        out.push(':');
        if field.is_map() {
            write_map(out, &field, occurrences, depth)?;
        } else if field.is_list() {
            write_list(out, &field, occurrences, depth)?;
        } else if let Some(last) = occurrences.last() {
            write_singular(out, &field, occurrences, last, depth)?;
        } else {
            write_default(out, &field);
        }
    }
    out.push('}');
    Ok(())
}

/// Every field occurrence of a message, in wire order.
fn index(bytes: &[u8]) -> Result<Vec<Occurrence<'_>>, Why> {
    let mut reader = Reader::new(bytes);
    let mut fields = Vec::new();
    while let Some(field) = reader.field().map_err(str::to_owned)? {
        fields.push(Occurrence {
            number: field.number,
            value: field.value,
        });
    }
    Ok(fields)
}

/// For each oneof, the member set last on the wire: the only one written.
fn oneof_winners(message: &MessageDescriptor, fields: &[Occurrence<'_>]) -> Vec<(OneofDescriptor, u32)> {
    let mut winners: Vec<(OneofDescriptor, u32)> = Vec::new();
    if message.oneofs().all(|oneof| oneof.is_synthetic()) {
        return winners;
    }
    for occurrence in fields {
        let Some(oneof) = message
            .get_field(occurrence.number)
            .and_then(|field| field.containing_oneof())
            .filter(|oneof| !oneof.is_synthetic())
        else {
            continue;
        };
        match winners.iter_mut().find(|(known, _)| *known == oneof) {
            Some(winner) => winner.1 = occurrence.number,
            None => winners.push((oneof, occurrence.number)),
        }
    }
    winners
}

fn write_singular(
    out: &mut String,
    field: &FieldDescriptor,
    occurrences: &[Occurrence<'_>],
    last: &Occurrence<'_>,
    depth: usize,
) -> Result<(), Why> {
    let Kind::Message(message) = field.kind() else {
        return write_scalar(out, field, &field.kind(), last.value);
    };
    // A message given more than once is their merge, which is what their bytes concatenated
    // decode to.
    if let [only] = occurrences {
        return write_message(out, &message, message_bytes(field, only.value)?, depth + 1);
    }
    let mut merged = Vec::new();
    for occurrence in occurrences {
        merged.extend_from_slice(message_bytes(field, occurrence.value)?);
    }
    write_message(out, &message, &merged, depth + 1)
}

fn message_bytes<'a>(field: &FieldDescriptor, value: WireValue<'a>) -> Result<&'a [u8], Why> {
    match value {
        WireValue::Len(bytes) | WireValue::Group(bytes) => Ok(bytes),
        _ => Err(wrong_wire_type(field)),
    }
}

fn write_list(
    out: &mut String,
    field: &FieldDescriptor,
    occurrences: &[Occurrence<'_>],
    depth: usize,
) -> Result<(), Why> {
    let kind = field.kind();
    out.push('[');
    let mut first = true;
    let mut separate = |out: &mut String| {
        if !first {
            out.push(',');
        }
        first = false;
    };
    for occurrence in occurrences {
        match (&kind, occurrence.value) {
            (Kind::Message(message), value) => {
                separate(out);
                write_message(out, message, message_bytes(field, value)?, depth + 1)?;
            }
            // Numbers may come packed, whatever the descriptor says.
            (kind, WireValue::Len(packed)) if is_packable(kind) => {
                let mut reader = Reader::new(packed);
                while !reader.is_empty() {
                    separate(out);
                    let value = match fixed_width(kind) {
                        Some(4) => WireValue::Fixed32(u32::from_le_bytes(take::<4>(&mut reader)?)),
                        Some(_) => WireValue::Fixed64(u64::from_le_bytes(take::<8>(&mut reader)?)),
                        None => WireValue::Varint(reader.varint().map_err(str::to_owned)?),
                    };
                    write_scalar(out, field, kind, value)?;
                }
            }
            (kind, value) => {
                separate(out);
                write_scalar(out, field, kind, value)?;
            }
        }
    }
    out.push(']');
    Ok(())
}

fn take<const N: usize>(reader: &mut Reader<'_>) -> Result<[u8; N], Why> {
    reader.fixed::<N>().map_err(str::to_owned)
}

fn write_map(
    out: &mut String,
    field: &FieldDescriptor,
    occurrences: &[Occurrence<'_>],
    depth: usize,
) -> Result<(), Why> {
    let Kind::Message(entry) = field.kind() else {
        return Err(wrong_wire_type(field));
    };
    let (key_field, value_field) = (entry.map_entry_key_field(), entry.map_entry_value_field());
    // Each key once, at its first place, with its last value.
    let mut entries: Vec<(String, Option<WireValue<'_>>)> = Vec::with_capacity(occurrences.len());
    let mut places: HashMap<String, usize> = HashMap::new();
    for occurrence in occurrences {
        let mut key = None;
        let mut value = None;
        let mut reader = Reader::new(message_bytes(field, occurrence.value)?);
        while let Some(part) = reader.field().map_err(str::to_owned)? {
            match part.number {
                1 => key = Some(part.value),
                2 => value = Some(part.value),
                _ => {}
            }
        }
        let mut key_text = String::new();
        match key {
            Some(key) => write_scalar(&mut key_text, &key_field, &key_field.kind(), key)?,
            None => write_default(&mut key_text, &key_field),
        }
        // JSON keys are strings: a number or boolean key is written in quotes.
        if !key_text.starts_with('"') {
            key_text = format!("\"{key_text}\"");
        }
        match places.get(&key_text) {
            Some(&place) => entries[place].1 = value,
            None => {
                places.insert(key_text.clone(), entries.len());
                entries.push((key_text, value));
            }
        }
    }
    out.push('{');
    for (index, (key, value)) in entries.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(key);
        out.push(':');
        match (value, value_field.kind()) {
            (Some(value), Kind::Message(message)) => {
                write_message(out, &message, message_bytes(&value_field, *value)?, depth + 1)?
            }
            (Some(value), kind) => write_scalar(out, &value_field, &kind, *value)?,
            (None, Kind::Message(message)) => write_message(out, &message, &[], depth + 1)?,
            (None, _) => write_default(out, &value_field),
        }
    }
    out.push('}');
    Ok(())
}

/// A scalar value of `kind` (a field's, or a list element's) as its JSON form.
fn write_scalar(out: &mut String, field: &FieldDescriptor, kind: &Kind, value: WireValue<'_>) -> Result<(), Why> {
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
fn write_default(out: &mut String, field: &FieldDescriptor) {
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

fn write_well_known(
    out: &mut String,
    well_known: &WellKnown,
    message: &MessageDescriptor,
    bytes: &[u8],
    depth: usize,
) -> Result<(), Why> {
    let fields = index(bytes)?;
    let last = |number: u32| {
        fields
            .iter()
            .rev()
            .find(|occurrence| occurrence.number == number)
            .map(|o| o.value)
    };
    let varint = |number: u32| match last(number) {
        None => Ok(0),
        Some(WireValue::Varint(value)) => Ok(value),
        Some(_) => Err(format!(
            "field {number} of {} has the wrong wire type",
            message.full_name()
        )),
    };
    match well_known {
        WellKnown::Timestamp | WellKnown::Duration => {
            let (seconds, nanos) = (varint(1)? as i64, varint(2)? as i32);
            let text = match well_known {
                WellKnown::Timestamp => format_timestamp(seconds, nanos),
                _ => format_duration(seconds, nanos),
            };
            let text = text.ok_or_else(|| format!("{} is out of range", message.full_name()))?;
            write_string(out, &text);
        }
        WellKnown::FieldMask => {
            let mut paths = Vec::new();
            for occurrence in fields.iter().filter(|occurrence| occurrence.number == 1) {
                let WireValue::Len(path) = occurrence.value else {
                    return Err("a FieldMask path has the wrong wire type".into());
                };
                let path = std::str::from_utf8(path).map_err(|_| "a FieldMask path is not UTF-8".to_owned())?;
                paths.push(camel_case(path));
            }
            write_string(out, &paths.join(","));
        }
        WellKnown::Empty => out.push_str("{}"),
        WellKnown::Wrapper(kind) => {
            let value_field = message.get_field_by_name("value").ok_or("a wrapper without `value`")?;
            match last(1) {
                Some(value) => write_scalar(out, &value_field, kind, value)?,
                None => write_default(out, &value_field),
            }
        }
        WellKnown::Struct | WellKnown::ListValue | WellKnown::Value => write_json(out, well_known, bytes, depth)?,
        WellKnown::Any => write_any(out, message, &fields, depth)?,
    }
    Ok(())
}

/// `Struct`, `ListValue` and `Value`: the JSON they hold.
fn write_json(out: &mut String, well_known: &WellKnown, bytes: &[u8], depth: usize) -> Result<(), Why> {
    if depth > MAX_DEPTH {
        return Err(format!("values are nested more than {MAX_DEPTH} deep"));
    }
    let fields = index(bytes)?;
    match well_known {
        WellKnown::Struct => {
            let mut entries: Vec<(&str, &[u8])> = Vec::new();
            let mut places: HashMap<&str, usize> = HashMap::new();
            for occurrence in fields.iter().filter(|occurrence| occurrence.number == 1) {
                let (mut key, mut value) = ("", &[][..]);
                let mut reader = Reader::new(len(occurrence.value)?);
                while let Some(part) = reader.field().map_err(str::to_owned)? {
                    match part.number {
                        1 => key = std::str::from_utf8(len(part.value)?).map_err(|_| "a Struct key is not UTF-8")?,
                        2 => value = len(part.value)?,
                        _ => {}
                    }
                }
                match places.get(key) {
                    Some(&place) => entries[place].1 = value,
                    None => {
                        places.insert(key, entries.len());
                        entries.push((key, value));
                    }
                }
            }
            out.push('{');
            for (index, (key, value)) in entries.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_json(out, &WellKnown::Value, value, depth + 1)?;
            }
            out.push('}');
        }
        WellKnown::ListValue => {
            out.push('[');
            for (index, occurrence) in fields.iter().filter(|occurrence| occurrence.number == 1).enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_json(out, &WellKnown::Value, len(occurrence.value)?, depth + 1)?;
            }
            out.push(']');
        }
        _ => match fields
            .iter()
            .rev()
            .find(|occurrence| (1..=6).contains(&occurrence.number))
        {
            None => out.push_str("null"),
            Some(occurrence) => match (occurrence.number, occurrence.value) {
                (1, WireValue::Varint(_)) => out.push_str("null"),
                (2, WireValue::Fixed64(bits)) => {
                    let number = f64::from_bits(bits);
                    if !number.is_finite() {
                        return Err("a Value holds a number that is not finite".into());
                    }
                    write_float(out, number, false);
                }
                (3, WireValue::Len(text)) => write_string(
                    out,
                    std::str::from_utf8(text).map_err(|_| "a Value string is not UTF-8")?,
                ),
                (4, WireValue::Varint(flag)) => out.push_str(if flag != 0 { "true" } else { "false" }),
                (5, WireValue::Len(bytes)) => write_json(out, &WellKnown::Struct, bytes, depth + 1)?,
                (6, WireValue::Len(bytes)) => write_json(out, &WellKnown::ListValue, bytes, depth + 1)?,
                _ => return Err("a Value has the wrong wire type".into()),
            },
        },
    }
    Ok(())
}

fn len(value: WireValue<'_>) -> Result<&[u8], Why> {
    match value {
        WireValue::Len(bytes) => Ok(bytes),
        _ => Err("a Struct, ListValue or Value has the wrong wire type".to_owned()),
    }
}

/// `Any`: `@type`, then the message's fields (or `value`, for a well-known type).
fn write_any(out: &mut String, any: &MessageDescriptor, fields: &[Occurrence<'_>], depth: usize) -> Result<(), Why> {
    let part = |number: u32| {
        fields
            .iter()
            .rev()
            .find(|occurrence| occurrence.number == number)
            .map(|occurrence| occurrence.value)
    };
    let type_url = match part(1) {
        Some(WireValue::Len(bytes)) => std::str::from_utf8(bytes).map_err(|_| "an Any's type_url is not UTF-8")?,
        _ => return Err("an Any has no type_url".into()),
    };
    let value = match part(2) {
        Some(WireValue::Len(bytes)) => bytes,
        None => &[],
        Some(_) => return Err("an Any's value has the wrong wire type".into()),
    };
    let name = type_url.rsplit('/').next().unwrap_or(type_url);
    let message = any
        .parent_pool()
        .get_message_by_name(name)
        .ok_or_else(|| format!("an Any holds a {name}, which is not in the descriptor set"))?;
    let mut inner = String::new();
    write_message(&mut inner, &message, value, depth + 1)?;
    out.push_str("{\"@type\":");
    write_string(out, type_url);
    if WellKnown::of(&message).is_some() {
        out.push_str(",\"value\":");
        out.push_str(&inner);
    } else if inner.len() > 2 {
        out.push(',');
        out.push_str(&inner[1..inner.len() - 1]);
    }
    out.push('}');
    Ok(())
}

/// A FieldMask path's proto names (`price.amount_minor`) in JSON spelling (`price.amountMinor`).
fn camel_case(path: &str) -> String {
    let mut name = String::with_capacity(path.len());
    let mut upper = false;
    for character in path.chars() {
        if character == '_' {
            upper = true;
        } else if upper {
            name.push(character.to_ascii_uppercase());
            upper = false;
        } else {
            name.push(character);
        }
    }
    name
}

/// A number as proto3 JSON writes it: the shortest text that reads back the same, or the name
/// of a non-finite value.
fn write_float(out: &mut String, number: f64, single: bool) {
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

fn wrong_wire_type(field: &FieldDescriptor) -> Why {
    format!("field {} has the wrong wire type", field.name())
}

fn is_packable(kind: &Kind) -> bool {
    !matches!(kind, Kind::String | Kind::Bytes | Kind::Message(_))
}

/// The width of a fixed-size kind on the wire, if it is one.
fn fixed_width(kind: &Kind) -> Option<usize> {
    match kind {
        Kind::Fixed32 | Kind::Sfixed32 | Kind::Float => Some(4),
        Kind::Fixed64 | Kind::Sfixed64 | Kind::Double => Some(8),
        _ => None,
    }
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;

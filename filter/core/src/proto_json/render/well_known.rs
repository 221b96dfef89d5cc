//! Well-known types in an answer: Timestamp, Duration and FieldMask as strings, Struct, Value
//! and ListValue as the JSON they hold, wrappers as their scalar, Any with `@type`.

use std::collections::HashMap;

use prost_reflect::MessageDescriptor;

use super::scalar::{write_default, write_float, write_scalar, write_string};
use super::{index, write_message, Level, Occurrence, RenderError, RenderPlan, MAX_DEPTH};
use crate::proto_json::time::{write_duration, write_timestamp};
use crate::proto_json::wire::{Reader, WireValue};
use crate::proto_json::WellKnown;

pub(super) fn write_well_known(
    out: &mut String,
    well_known: &WellKnown,
    message: &MessageDescriptor,
    bytes: &[u8],
    level: Level,
) -> Result<(), RenderError> {
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
        Some(_) => Err(RenderError::from(format!(
            "field {number} of {} has the wrong wire type",
            message.full_name()
        ))),
    };
    match well_known {
        WellKnown::Timestamp | WellKnown::Duration => {
            let (seconds, nanos) = (varint(1)? as i64, varint(2)? as i32);
            // Neither form has a character JSON escapes.
            out.push('"');
            let written = match well_known {
                WellKnown::Timestamp => write_timestamp(out, seconds, nanos),
                _ => write_duration(out, seconds, nanos),
            };
            if !written {
                return Err(format!("{} is out of range", message.full_name()).into());
            }
            out.push('"');
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
        WellKnown::Struct | WellKnown::ListValue | WellKnown::Value => write_json(out, well_known, bytes, level)?,
        WellKnown::Any => write_any(out, message, &fields, level)?,
    }
    Ok(())
}

/// `Struct`, `ListValue` and `Value`: the JSON they hold.
fn write_json(out: &mut String, well_known: &WellKnown, bytes: &[u8], level: Level) -> Result<(), RenderError> {
    if level.depth() > MAX_DEPTH {
        return Err(format!("values are nested more than {MAX_DEPTH} deep").into());
    }
    level.check(out)?;
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
                write_json(out, &WellKnown::Value, value, level.deeper())?;
            }
            out.push('}');
        }
        WellKnown::ListValue => {
            out.push('[');
            for (index, occurrence) in fields.iter().filter(|occurrence| occurrence.number == 1).enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_json(out, &WellKnown::Value, len(occurrence.value)?, level.deeper())?;
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
                (5, WireValue::Len(bytes)) => write_json(out, &WellKnown::Struct, bytes, level.deeper())?,
                (6, WireValue::Len(bytes)) => write_json(out, &WellKnown::ListValue, bytes, level.deeper())?,
                _ => return Err("a Value has the wrong wire type".into()),
            },
        },
    }
    Ok(())
}

fn len(value: WireValue<'_>) -> Result<&[u8], RenderError> {
    match value {
        WireValue::Len(bytes) => Ok(bytes),
        _ => Err("a Struct, ListValue or Value has the wrong wire type".into()),
    }
}

/// `Any`: `@type`, then the message's fields (or `value`, for a well-known type).
fn write_any(
    out: &mut String,
    any: &MessageDescriptor,
    fields: &[Occurrence<'_>],
    level: Level,
) -> Result<(), RenderError> {
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
    let plan = RenderPlan::new(&message);
    write_message(&mut inner, &plan, plan.root()?, value, level.apart(out))?;
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

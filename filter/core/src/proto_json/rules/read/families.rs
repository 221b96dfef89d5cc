//! Which rules each family has, read by their names in the .proto, and how each family's values
//! are read and shown (as the .proto writes them: strings quoted, bytes in base64, enum values
//! by name, durations and timestamps in their JSON form).

use std::borrow::Cow;

use base64::Engine;
use prost_reflect::{DynamicMessage, Kind, Value as ProtoValue};

use crate::proto_json::rules::collections::Unique;
use crate::proto_json::rules::declared::Declared;
use crate::proto_json::rules::equal::{in_or_not, Equal};
use crate::proto_json::rules::family::Family;
use crate::proto_json::rules::formats::{ByteFormat, Format, KnownRegex};
use crate::proto_json::rules::length::{Length, Unit};
use crate::proto_json::rules::now::Now;
use crate::proto_json::rules::ordered::{Bound, Finite, Range, Side};
use crate::proto_json::rules::rule::Rule;
use crate::proto_json::rules::subject::{nanos, Number, Subject};
use crate::proto_json::rules::text::{Affix, Text};
use crate::proto_json::rules::well_known::{MaskPaths, TypeUrls};
use crate::proto_json::time::{format_duration, format_timestamp};

/// The rules `declared` (the family's rules message, `StringRules` …) sets, in the order they
/// are checked; `kind` is the kind of value they apply to (an enum's, for its names).
pub fn rules_of(family: Family, declared: &DynamicMessage, kind: &Kind) -> Result<Vec<Rule>, String> {
    let mut rules = Vec::new();
    let out = &mut rules;
    match family {
        Family::Float | Family::Double => {
            ordered(declared, &NUMBERS, out)?;
            if declared.flag("finite")? {
                out.push(Rule::Finite(Finite));
            }
        }
        Family::Int32
        | Family::Int64
        | Family::UInt32
        | Family::UInt64
        | Family::SInt32
        | Family::SInt64
        | Family::Fixed32
        | Family::Fixed64
        | Family::SFixed32
        | Family::SFixed64 => ordered(declared, &NUMBERS, out)?,
        Family::Bool => {
            let read = |value: &ProtoValue| value.as_bool().map(|flag| (Subject::Bool(flag), flag.to_string()));
            const_rule(declared, "a bool", &read, out)?;
        }
        Family::String => string(declared, out)?,
        Family::Bytes => bytes(declared, out)?,
        Family::Enum => enumeration(declared, kind, out)?,
        Family::Repeated => {
            lengths(declared, Unit::Items, None, "min_items", "max_items", out)?;
            if declared.flag("unique")? {
                out.push(Rule::Unique(Unique));
            }
        }
        Family::Map => lengths(declared, Unit::Pairs, None, "min_pairs", "max_pairs", out)?,
        Family::Any => {
            for inside in [true, false] {
                let urls = declared.strings(in_or_not(inside))?;
                if !urls.is_empty() {
                    out.push(Rule::TypeUrls(TypeUrls { urls, inside }));
                }
            }
        }
        Family::Duration => ordered(declared, &DURATIONS, out)?,
        Family::Timestamp => {
            ordered(declared, &TIMESTAMPS, out)?;
            if declared.flag("lt_now")? {
                out.push(Rule::Now(Now::Past));
            }
            if declared.flag("gt_now")? {
                out.push(Rule::Now(Now::Future));
            }
            if let Some((seconds, nanos_part)) = declared.one("within", DURATIONS.expected, seconds_and_nanos)? {
                let shown = time_shown(seconds, nanos_part, false);
                out.push(Rule::Now(Now::Within {
                    span: nanos(seconds, nanos_part),
                    shown,
                }));
            }
        }
        Family::FieldMask => {
            if let Some(mask) = declared.message("const")? {
                let paths = mask.strings("paths")?;
                let shown = format!("\"{}\"", paths.join(","));
                out.push(Rule::Equal(Equal::Const {
                    value: Subject::Paths(paths),
                    shown,
                }));
            }
            for inside in [true, false] {
                let paths = declared.strings(in_or_not(inside))?;
                if !paths.is_empty() {
                    out.push(Rule::MaskPaths(MaskPaths { paths, inside }));
                }
            }
        }
    }
    Ok(rules)
}

/// A value a rule holds, as a [`Subject`] and as written.
type Read<'a> = &'a dyn Fn(&ProtoValue) -> Option<(Subject<'static>, String)>;

/// `const`, with values read by `read` (declared as `expected`).
fn const_rule(declared: &DynamicMessage, expected: &str, read: Read<'_>, out: &mut Vec<Rule>) -> Result<(), String> {
    if let Some((value, shown)) = declared.one("const", expected, read)? {
        out.push(Rule::Equal(Equal::Const { value, shown }));
    }
    Ok(())
}

/// `in` and `not_in`.
fn in_rules(declared: &DynamicMessage, expected: &str, read: Read<'_>, out: &mut Vec<Rule>) -> Result<(), String> {
    for inside in [true, false] {
        let listed = declared.many(in_or_not(inside), expected, read)?;
        if !listed.is_empty() {
            let (values, shown) = listed.into_iter().unzip();
            out.push(Rule::Equal(Equal::In { values, shown, inside }));
        }
    }
    Ok(())
}

/// The values of a family whose values are ordered.
struct Ordered {
    expected: &'static str,
    read: fn(&ProtoValue) -> Option<(Number, String)>,
    subject: fn(Number) -> Subject<'static>,
}

const NUMBERS: Ordered = Ordered {
    expected: "a number",
    read: number,
    subject: Subject::Number,
};
const DURATIONS: Ordered = Ordered {
    expected: "a google.protobuf.Duration",
    read: |value| time(value, false),
    subject: nanos_subject,
};
const TIMESTAMPS: Ordered = Ordered {
    expected: "a google.protobuf.Timestamp",
    read: |value| time(value, true),
    subject: nanos_subject,
};

/// `const`, the range and `in`/`not_in` of a family whose values are ordered: numbers, or
/// durations and timestamps.
fn ordered(declared: &DynamicMessage, values: &Ordered, out: &mut Vec<Rule>) -> Result<(), String> {
    let read = |value: &ProtoValue| (values.read)(value).map(|(number, shown)| ((values.subject)(number), shown));
    const_rule(declared, values.expected, &read, out)?;
    let bound = |name: &str, side: Side| -> Result<Option<Bound>, String> {
        let read = declared.one(name, values.expected, values.read)?;
        Ok(read.map(|(value, shown)| Bound { value, side, shown }))
    };
    let lower = match bound("gt", Side::Exclusive)? {
        Some(bound) => Some(bound),
        None => bound("gte", Side::Inclusive)?,
    };
    let upper = match bound("lt", Side::Exclusive)? {
        Some(bound) => Some(bound),
        None => bound("lte", Side::Inclusive)?,
    };
    if lower.is_some() || upper.is_some() {
        out.push(Rule::Range(Range { lower, upper }));
    }
    in_rules(declared, values.expected, &read, out)
}

fn number(value: &ProtoValue) -> Option<(Number, String)> {
    Some(match value {
        ProtoValue::I32(value) => (Number::Int(i128::from(*value)), value.to_string()),
        ProtoValue::I64(value) => (Number::Int(i128::from(*value)), value.to_string()),
        ProtoValue::U32(value) => (Number::Int(i128::from(*value)), value.to_string()),
        ProtoValue::U64(value) => (Number::Int(i128::from(*value)), value.to_string()),
        // A float rule compares as the float it is, and is shown as written.
        ProtoValue::F32(value) => (Number::Float(f64::from(*value)), value.to_string()),
        ProtoValue::F64(value) => (Number::Float(*value), value.to_string()),
        _ => return None,
    })
}

/// A Duration or Timestamp, in nanoseconds (since the epoch), shown as JSON writes it.
fn time(value: &ProtoValue, timestamp: bool) -> Option<(Number, String)> {
    let (seconds, nanos_part) = seconds_and_nanos(value)?;
    let shown = time_shown(seconds, nanos_part, timestamp);
    Some((Number::Int(nanos(seconds, nanos_part)), format!("\"{shown}\"")))
}

fn nanos_subject(value: Number) -> Subject<'static> {
    match value {
        Number::Int(at) => Subject::Nanos(at),
        Number::Float(_) => Subject::Other,
    }
}

/// A Duration's or Timestamp's two fields.
fn seconds_and_nanos(value: &ProtoValue) -> Option<(i64, i32)> {
    let value = value.as_message()?;
    let seconds = value.get_field_by_name("seconds")?.as_i64()?;
    let nanos = value.get_field_by_name("nanos")?.as_i32()?;
    Some((seconds, nanos))
}

/// A bound JSON cannot write (past the year 9999, or a Duration whose parts differ in sign) is
/// still compared exactly; it is shown in whole seconds.
fn time_shown(seconds: i64, nanos_part: i32, timestamp: bool) -> String {
    let written = if timestamp {
        format_timestamp(seconds, nanos_part)
    } else {
        format_duration(seconds, nanos_part)
    };
    written.unwrap_or_else(|| format!("{seconds}s"))
}

/// A minimum and a maximum length, and (`exact`) both at once.
fn lengths(
    declared: &DynamicMessage,
    unit: Unit,
    exact: Option<&'static str>,
    min: &'static str,
    max: &'static str,
    out: &mut Vec<Rule>,
) -> Result<(), String> {
    if let Some(rule) = exact {
        if let Some(length) = declared.uint64(rule)? {
            let (min, max) = (Some(length), Some(length));
            out.push(Rule::Length(Length { unit, min, max, rule }));
        }
    }
    if let Some(length) = declared.uint64(min)? {
        let (min, max, rule) = (Some(length), None, min);
        out.push(Rule::Length(Length { unit, min, max, rule }));
    }
    if let Some(length) = declared.uint64(max)? {
        let (min, max, rule) = (None, Some(length), max);
        out.push(Rule::Length(Length { unit, min, max, rule }));
    }
    Ok(())
}

fn pattern(declared: &DynamicMessage, out: &mut Vec<Rule>) -> Result<(), String> {
    if let Some(pattern) = declared.text("pattern")? {
        let regex = regex_lite::Regex::new(&pattern)
            .map_err(|error| format!("the pattern `{pattern}` does not compile: {error}"))?;
        out.push(Rule::Text(Text::Pattern(regex)));
    }
    Ok(())
}

fn affixes(
    declared: &DynamicMessage,
    which: &[Affix],
    expected: &str,
    read: Read<'_>,
    out: &mut Vec<Rule>,
) -> Result<(), String> {
    for &affix in which {
        if let Some((value, shown)) = declared.one(affix.rule(), expected, read)? {
            out.push(Rule::Text(Text::Affix { affix, value, shown }));
        }
    }
    Ok(())
}

fn string(declared: &DynamicMessage, out: &mut Vec<Rule>) -> Result<(), String> {
    let quoted = |text: &str| serde_json::Value::String(text.to_owned()).to_string();
    let read = |value: &ProtoValue| {
        value
            .as_str()
            .map(|text| (Subject::Text(Cow::Owned(text.to_owned())), quoted(text)))
    };
    const_rule(declared, "a string", &read, out)?;
    lengths(declared, Unit::Characters, Some("len"), "min_len", "max_len", out)?;
    lengths(declared, Unit::Bytes, Some("len_bytes"), "min_bytes", "max_bytes", out)?;
    pattern(declared, out)?;
    affixes(declared, &Affix::STRING, "a string", &read, out)?;
    in_rules(declared, "a string", &read, out)?;
    // Header rules are strict unless `strict` is set false.
    let strict = declared.one("strict", "a bool", ProtoValue::as_bool)?.unwrap_or(true);
    for format in Format::FLAGS {
        if declared.flag(format.rule())? {
            out.push(Rule::Format(format));
        }
    }
    if let Some(number) = declared.enum_number("well_known_regex")? {
        let known = KnownRegex::from_number(number).ok_or_else(|| {
            format!(
                "`well_known_regex` is {number}, which is none of protovalidate's `buf.validate.KnownRegex` \
                 values (KNOWN_REGEX_HTTP_HEADER_NAME = 1, KNOWN_REGEX_HTTP_HEADER_VALUE = 2)"
            )
        })?;
        out.extend(known.format(strict).map(Rule::Format));
    }
    Ok(())
}

fn bytes(declared: &DynamicMessage, out: &mut Vec<Rule>) -> Result<(), String> {
    let shown = |bytes: &[u8]| format!("\"{}\"", base64::engine::general_purpose::STANDARD.encode(bytes));
    let read = |value: &ProtoValue| {
        value
            .as_bytes()
            .map(|bytes| (Subject::Bytes(Cow::Owned(bytes.to_vec())), shown(bytes)))
    };
    const_rule(declared, "bytes", &read, out)?;
    lengths(declared, Unit::Bytes, Some("len"), "min_len", "max_len", out)?;
    pattern(declared, out)?;
    affixes(declared, &Affix::BYTES, "bytes", &read, out)?;
    in_rules(declared, "bytes", &read, out)?;
    for format in ByteFormat::ALL {
        if declared.flag(format.rule())? {
            out.push(Rule::ByteFormat(format));
        }
    }
    Ok(())
}

/// By number, shown by name where the enum has one. `defined_only` always holds: the gate
/// takes only names the enum defines.
fn enumeration(declared: &DynamicMessage, kind: &Kind, out: &mut Vec<Rule>) -> Result<(), String> {
    let name_of = |number: i32| match kind {
        Kind::Enum(descriptor) => descriptor
            .get_value(number)
            .map_or_else(|| number.to_string(), |value| format!("\"{}\"", value.name())),
        _ => number.to_string(),
    };
    let read = |value: &ProtoValue| value.as_i32().map(|number| (Subject::Enum(number), name_of(number)));
    const_rule(declared, "an int32", &read, out)?;
    in_rules(declared, "an int32", &read, out)
}

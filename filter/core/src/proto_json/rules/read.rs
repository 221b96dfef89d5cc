//! Reading `buf.validate` options into [`FieldRules`] and [`MessageRules`]. Options are read by
//! name, so protovalidate's published `validate.proto` and Switchblade's shorter one
//! (`proto/buf/validate/validate.proto`) read the same. A rule that cannot be enforced as
//! written is refused here, at load, naming the field.

use std::borrow::Cow;

use prost_reflect::{
    DescriptorPool, DynamicMessage, ExtensionDescriptor, FieldDescriptor, Kind, MessageDescriptor, Value as ProtoValue,
};

use super::subject::nanos;
use super::{Bound, CelRule, Exclusive, FieldRules, Format, Ignore, MessageRules, Number, Rule, Side, Subject, Unit};
use crate::proto_json::time::{format_duration, format_timestamp};
use crate::proto_json::{Form, WellKnown};

/// The three `buf.validate` extensions, when the pool declares them.
pub struct Options {
    field: ExtensionDescriptor,
    oneof: Option<ExtensionDescriptor>,
    message: Option<ExtensionDescriptor>,
}

impl Options {
    pub fn of(pool: &DescriptorPool) -> Option<Options> {
        Some(Options {
            field: pool.get_extension_by_name("buf.validate.field")?,
            oneof: pool.get_extension_by_name("buf.validate.oneof"),
            message: pool.get_extension_by_name("buf.validate.message"),
        })
    }
}

/// The rules of a field that declares any; or why they cannot be enforced as written.
fn declared_rules(options: &Options, field: &FieldDescriptor) -> Option<Result<FieldRules, String>> {
    let field_options = field.options();
    if !field_options.has_extension(&options.field) {
        return None;
    }
    match field_options.get_extension(&options.field).as_ref() {
        ProtoValue::Message(declared) => Some(
            field_rules(declared, field, Target::Field)
                .map_err(|problem| format!("the buf.validate rules of field {}: {problem}", field.full_name())),
        ),
        _ => None,
    }
}

/// The rules `message`, its oneofs and its fields declare.
pub fn read_message_rules(options: &Options, message: &MessageDescriptor) -> Result<MessageRules, String> {
    let mut rules = MessageRules::default();
    for field in message.fields() {
        if let Some(read) = declared_rules(options, &field).transpose()? {
            if read.is_enforced() || !read.cel.is_empty() {
                rules.fields.push((field, read));
            }
        }
    }
    if let Some(oneof_extension) = &options.oneof {
        for oneof in message.oneofs().filter(|oneof| !oneof.is_synthetic()) {
            let oneof_options = oneof.options();
            if !oneof_options.has_extension(oneof_extension) {
                continue;
            }
            if let ProtoValue::Message(declared) = oneof_options.get_extension(oneof_extension).as_ref() {
                if flag(declared, "required") {
                    rules.exclusive.push(Exclusive {
                        fields: oneof.fields().collect(),
                        required: true,
                        oneof: Some(oneof.name().to_owned()),
                    });
                }
            }
        }
    }
    if let Some(message_extension) = &options.message {
        let message_options = message.options();
        if message_options.has_extension(message_extension) {
            if let ProtoValue::Message(declared) = message_options.get_extension(message_extension).as_ref() {
                read_message_level(declared, message, &mut rules)?;
            }
        }
    }
    Ok(rules)
}

fn read_message_level(
    declared: &DynamicMessage,
    message: &MessageDescriptor,
    rules: &mut MessageRules,
) -> Result<(), String> {
    for group in messages(declared, "oneof") {
        let mut fields = Vec::new();
        for name in strings(&group, "fields") {
            let field = message.get_field_by_name(&name).ok_or_else(|| {
                format!(
                    "the buf.validate oneof rule of message {} names `{name}`, which is not one of its fields",
                    message.full_name()
                )
            })?;
            fields.push(field);
        }
        if fields.is_empty() {
            return Err(format!(
                "a buf.validate oneof rule of message {} names no fields",
                message.full_name()
            ));
        }
        rules.exclusive.push(Exclusive {
            fields,
            required: flag(&group, "required"),
            oneof: None,
        });
    }
    rules.cel = cel_rules(declared)
        .map_err(|problem| format!("the buf.validate rules of message {}: {problem}", message.full_name()))?;
    Ok(())
}

/// What a `FieldRules` applies to: a whole field (a list or map as a whole), or one element of
/// a list, a map's key or a map's value.
#[derive(Clone, Copy)]
enum Target {
    Field,
    Element,
    Key,
}

fn field_rules(declared: &DynamicMessage, field: &FieldDescriptor, target: Target) -> Result<FieldRules, String> {
    let mut rules = FieldRules {
        required: flag(declared, "required"),
        ignore: match enum_number(declared, "ignore") {
            Some(1) => Ignore::IfZero,
            Some(3) => Ignore::Always,
            _ => Ignore::Never,
        },
        cel: cel_rules(declared)?,
        ..FieldRules::default()
    };
    let Some((family, family_rules)) = declared
        .fields()
        .find(|(member, _)| member.containing_oneof().is_some_and(|oneof| oneof.name() == "type"))
        .and_then(|(member, value)| match value {
            ProtoValue::Message(family_rules) => Some((member, family_rules.clone())),
            _ => None,
        })
    else {
        return Ok(rules);
    };
    let kind = target_kind(field, target);
    let expected = expected_family(field, target, &kind);
    if expected == "message" {
        return Err(format!(
            "`{}` rules on a message field, which takes only `required`, `ignore` and `cel`",
            family.name()
        ));
    }
    if expected != family.name() {
        return Err(format!(
            "`{}` rules on a field that takes `{expected}` rules",
            family.name()
        ));
    }
    rules.family = expected;
    for (extension, _) in family_rules.extensions() {
        rules.cel.push(CelRule::new(
            extension.full_name().to_owned(),
            "a predefined rule".to_owned(),
            String::new(),
        )?);
    }
    let rules_of = &family_rules;
    match expected {
        "repeated" => {
            lengths(
                rules_of,
                Unit::Items,
                [("min_items", true), ("max_items", false)],
                &mut rules.rules,
            );
            if flag(rules_of, "unique") {
                rules.rules.push(Rule::Unique);
            }
            if let Some(items) = message(rules_of, "items") {
                rules.items = Some(Box::new(
                    field_rules(&items, field, Target::Element).map_err(|p| format!("items: {p}"))?,
                ));
            }
        }
        "map" => {
            lengths(
                rules_of,
                Unit::Pairs,
                [("min_pairs", true), ("max_pairs", false)],
                &mut rules.rules,
            );
            if let Some(keys) = message(rules_of, "keys") {
                rules.keys = Some(Box::new(
                    field_rules(&keys, field, Target::Key).map_err(|p| format!("keys: {p}"))?,
                ));
            }
            if let Some(values) = message(rules_of, "values") {
                rules.items = Some(Box::new(
                    field_rules(&values, field, Target::Element).map_err(|p| format!("values: {p}"))?,
                ));
            }
        }
        "string" => string_rules(rules_of, &mut rules.rules)?,
        "bytes" => bytes_rules(rules_of, &mut rules.rules)?,
        "bool" => {
            if let Some(ProtoValue::Bool(value)) = get(rules_of, "const") {
                rules.rules.push(Rule::Const(Subject::Bool(value), value.to_string()));
            }
        }
        "enum" => enum_rules(rules_of, &kind, &mut rules.rules),
        "any" => {
            for (name, inside) in [("in", true), ("not_in", false)] {
                let urls = strings(rules_of, name);
                if !urls.is_empty() {
                    rules.rules.push(Rule::TypeUrls { urls, inside });
                }
            }
        }
        "duration" | "timestamp" => time_rules(rules_of, expected == "timestamp", &mut rules.rules),
        "field_mask" => {
            if let Some(mask) = message(rules_of, "const") {
                let paths = strings(&mask, "paths");
                let shown = format!("\"{}\"", paths.join(","));
                rules.rules.push(Rule::Const(Subject::Paths(paths), shown));
            }
            for (name, inside) in [("in", true), ("not_in", false)] {
                let paths = strings(rules_of, name);
                if !paths.is_empty() {
                    rules.rules.push(Rule::MaskPaths { paths, inside });
                }
            }
        }
        _ => number_rules(rules_of, &mut rules.rules),
    }
    Ok(rules)
}

/// The kind of one value the rules apply to.
fn target_kind(field: &FieldDescriptor, target: Target) -> Kind {
    match (field.kind(), target) {
        (Kind::Message(entry), Target::Element) if field.is_map() => entry.map_entry_value_field().kind(),
        (Kind::Message(entry), Target::Key) if field.is_map() => entry.map_entry_key_field().kind(),
        (kind, _) => kind,
    }
}

/// The rule family a target takes (`FieldRules.type`'s member name).
fn expected_family(field: &FieldDescriptor, target: Target, kind: &Kind) -> &'static str {
    if matches!(target, Target::Field) && field.is_map() {
        return "map";
    }
    if matches!(target, Target::Field) && field.is_list() {
        return "repeated";
    }
    let kind = match Form::of(kind) {
        Form::WellKnown(WellKnown::Wrapper(inner)) => inner,
        Form::WellKnown(WellKnown::Any) => return "any",
        Form::WellKnown(WellKnown::Duration) => return "duration",
        Form::WellKnown(WellKnown::Timestamp) => return "timestamp",
        Form::WellKnown(WellKnown::FieldMask) => return "field_mask",
        _ => kind.clone(),
    };
    match kind {
        Kind::Double => "double",
        Kind::Float => "float",
        Kind::Int32 => "int32",
        Kind::Int64 => "int64",
        Kind::Uint32 => "uint32",
        Kind::Uint64 => "uint64",
        Kind::Sint32 => "sint32",
        Kind::Sint64 => "sint64",
        Kind::Fixed32 => "fixed32",
        Kind::Fixed64 => "fixed64",
        Kind::Sfixed32 => "sfixed32",
        Kind::Sfixed64 => "sfixed64",
        Kind::Bool => "bool",
        Kind::String => "string",
        Kind::Bytes => "bytes",
        Kind::Enum(_) => "enum",
        Kind::Message(_) => "message",
    }
}

fn number_rules(declared: &DynamicMessage, out: &mut Vec<Rule>) {
    ordered_rules(declared, number, Subject::Number, out);
    if flag(declared, "finite") {
        out.push(Rule::Finite);
    }
}

/// `const`, the range and `in`/`not_in` of a family whose values are ordered: numbers, or
/// durations and timestamps (`value_of` reads one, with how it is written).
fn ordered_rules(
    declared: &DynamicMessage,
    value_of: impl Fn(&ProtoValue) -> Option<(Number, String)>,
    subject: fn(Number) -> Subject<'static>,
    out: &mut Vec<Rule>,
) {
    if let Some((value, shown)) = get(declared, "const").and_then(|value| value_of(&value)) {
        out.push(Rule::Const(subject(value), shown));
    }
    let bound = |name: &str, side: Side| {
        get(declared, name)
            .and_then(|value| value_of(&value))
            .map(|(value, shown)| Bound { value, side, shown })
    };
    let lower = bound("gt", Side::Exclusive).or_else(|| bound("gte", Side::Inclusive));
    let upper = bound("lt", Side::Exclusive).or_else(|| bound("lte", Side::Inclusive));
    if lower.is_some() || upper.is_some() {
        out.push(Rule::Range { lower, upper });
    }
    for (name, inside) in [("in", true), ("not_in", false)] {
        let listed: Vec<(Number, String)> = list(declared, name).iter().filter_map(&value_of).collect();
        if !listed.is_empty() {
            out.push(Rule::In {
                values: listed.iter().map(|(value, _)| subject(*value)).collect(),
                shown: listed.into_iter().map(|(_, shown)| shown).collect(),
                inside,
            });
        }
    }
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

fn string_rules(declared: &DynamicMessage, out: &mut Vec<Rule>) -> Result<(), String> {
    let quoted = |text: &str| serde_json::Value::String(text.to_owned()).to_string();
    if let Some(ProtoValue::String(text)) = get(declared, "const") {
        out.push(Rule::Const(Subject::Text(Cow::Owned(text.clone())), quoted(&text)));
    }
    lengths(declared, Unit::Characters, [("len", true), ("min_len", true)], out);
    lengths(declared, Unit::Characters, [("len", false), ("max_len", false)], out);
    lengths(declared, Unit::Bytes, [("len_bytes", true), ("min_bytes", true)], out);
    lengths(declared, Unit::Bytes, [("len_bytes", false), ("max_bytes", false)], out);
    dedupe_exact_lengths(out);
    pattern(declared, out)?;
    for name in ["prefix", "suffix", "contains", "not_contains"] {
        if let Some(ProtoValue::String(text)) = get(declared, name) {
            let shown = quoted(&text);
            let subject = Subject::Text(Cow::Owned(text));
            out.push(affix(name, subject, shown));
        }
    }
    for (name, inside) in [("in", true), ("not_in", false)] {
        let texts: Vec<String> = list(declared, name)
            .into_iter()
            .filter_map(|value| match value {
                ProtoValue::String(text) => Some(text),
                _ => None,
            })
            .collect();
        if !texts.is_empty() {
            out.push(Rule::In {
                shown: texts.iter().map(|text| quoted(text)).collect(),
                values: texts.into_iter().map(|text| Subject::Text(Cow::Owned(text))).collect(),
                inside,
            });
        }
    }
    let strict = !matches!(get(declared, "strict"), Some(ProtoValue::Bool(false)));
    let formats = [
        ("email", Format::Email),
        ("hostname", Format::Hostname),
        ("ip", Format::Ip(0)),
        ("ipv4", Format::Ip(4)),
        ("ipv6", Format::Ip(6)),
        ("uri", Format::Uri),
        ("uri_ref", Format::UriRef),
        ("address", Format::Address),
        ("uuid", Format::Uuid),
        ("tuuid", Format::Tuuid),
        ("ip_with_prefixlen", Format::IpWithPrefixLen(0)),
        ("ipv4_with_prefixlen", Format::IpWithPrefixLen(4)),
        ("ipv6_with_prefixlen", Format::IpWithPrefixLen(6)),
        ("ip_prefix", Format::IpPrefix(0)),
        ("ipv4_prefix", Format::IpPrefix(4)),
        ("ipv6_prefix", Format::IpPrefix(6)),
        ("host_and_port", Format::HostAndPort),
        ("ulid", Format::Ulid),
        ("protobuf_fqn", Format::ProtobufFqn),
        ("protobuf_dot_fqn", Format::ProtobufDotFqn),
    ];
    for (name, format) in formats {
        if flag(declared, name) {
            out.push(Rule::Format(format, name));
        }
    }
    match enum_number(declared, "well_known_regex") {
        Some(1) => out.push(Rule::Format(Format::HeaderName { strict }, "well_known_regex")),
        Some(2) => out.push(Rule::Format(Format::HeaderValue { strict }, "well_known_regex")),
        _ => {}
    }
    Ok(())
}

fn bytes_rules(declared: &DynamicMessage, out: &mut Vec<Rule>) -> Result<(), String> {
    let shown = |bytes: &[u8]| {
        use base64::Engine;
        format!("\"{}\"", base64::engine::general_purpose::STANDARD.encode(bytes))
    };
    if let Some(ProtoValue::Bytes(bytes)) = get(declared, "const") {
        out.push(Rule::Const(Subject::Bytes(Cow::Owned(bytes.to_vec())), shown(&bytes)));
    }
    lengths(declared, Unit::Bytes, [("len", true), ("min_len", true)], out);
    lengths(declared, Unit::Bytes, [("len", false), ("max_len", false)], out);
    dedupe_exact_lengths(out);
    pattern(declared, out)?;
    for name in ["prefix", "suffix", "contains"] {
        if let Some(ProtoValue::Bytes(bytes)) = get(declared, name) {
            let text = shown(&bytes);
            out.push(affix(name, Subject::Bytes(Cow::Owned(bytes.to_vec())), text));
        }
    }
    for (name, inside) in [("in", true), ("not_in", false)] {
        let listed: Vec<Vec<u8>> = list(declared, name)
            .into_iter()
            .filter_map(|value| match value {
                ProtoValue::Bytes(bytes) => Some(bytes.to_vec()),
                _ => None,
            })
            .collect();
        if !listed.is_empty() {
            out.push(Rule::In {
                shown: listed.iter().map(|bytes| shown(bytes)).collect(),
                values: listed
                    .into_iter()
                    .map(|bytes| Subject::Bytes(Cow::Owned(bytes)))
                    .collect(),
                inside,
            });
        }
    }
    for name in ["ip", "ipv4", "ipv6", "uuid"] {
        if flag(declared, name) {
            out.push(Rule::ByteFormat(name));
        }
    }
    Ok(())
}

fn affix(name: &str, subject: Subject<'static>, shown: String) -> Rule {
    match name {
        "prefix" => Rule::Prefix(subject, shown),
        "suffix" => Rule::Suffix(subject, shown),
        "contains" => Rule::Contains(subject, shown),
        _ => Rule::NotContains(subject, shown),
    }
}

fn pattern(declared: &DynamicMessage, out: &mut Vec<Rule>) -> Result<(), String> {
    if let Some(ProtoValue::String(pattern)) = get(declared, "pattern") {
        let regex = regex_lite::Regex::new(&pattern)
            .map_err(|error| format!("the pattern `{pattern}` does not compile: {error}"))?;
        out.push(Rule::Pattern(regex));
    }
    Ok(())
}

/// A minimum (`first` of each pair true) or maximum length from the first of `names` set.
fn lengths(declared: &DynamicMessage, unit: Unit, names: [(&'static str, bool); 2], out: &mut Vec<Rule>) {
    for (name, is_min) in names {
        if let Some(ProtoValue::U64(limit)) = get(declared, name) {
            let (min, max) = if is_min {
                (Some(limit), None)
            } else {
                (None, Some(limit))
            };
            out.push(Rule::Length {
                unit,
                min,
                max,
                rule: name,
            });
        }
    }
}

/// `len` read as a minimum and a maximum: one rule, `exactly N`.
fn dedupe_exact_lengths(out: &mut Vec<Rule>) {
    let mut merged: Vec<Rule> = Vec::with_capacity(out.len());
    for rule in out.drain(..) {
        if let Rule::Length {
            unit,
            max: Some(max),
            rule: name @ ("len" | "len_bytes"),
            ..
        } = &rule
        {
            if let Some(Rule::Length {
                min, max: merged_max, ..
            }) = merged
                .iter_mut()
                .find(|earlier| matches!(earlier, Rule::Length { unit: u, rule: n, .. } if u == unit && n == name))
            {
                let _ = min;
                *merged_max = Some(*max);
                continue;
            }
        }
        merged.push(rule);
    }
    *out = merged;
}

fn enum_rules(declared: &DynamicMessage, kind: &Kind, out: &mut Vec<Rule>) {
    let name_of = |number: i32| match kind {
        Kind::Enum(descriptor) => descriptor
            .get_value(number)
            .map_or_else(|| number.to_string(), |value| format!("\"{}\"", value.name())),
        _ => number.to_string(),
    };
    if let Some(ProtoValue::I32(number)) = get(declared, "const") {
        out.push(Rule::Const(Subject::Enum(number), name_of(number)));
    }
    for (name, inside) in [("in", true), ("not_in", false)] {
        let numbers: Vec<i32> = list(declared, name)
            .into_iter()
            .filter_map(|value| match value {
                ProtoValue::I32(number) => Some(number),
                _ => None,
            })
            .collect();
        if !numbers.is_empty() {
            out.push(Rule::In {
                shown: numbers.iter().map(|number| name_of(*number)).collect(),
                values: numbers.into_iter().map(Subject::Enum).collect(),
                inside,
            });
        }
    }
}

fn time_rules(declared: &DynamicMessage, timestamp: bool, out: &mut Vec<Rule>) {
    let value_of = |value: &ProtoValue| {
        let ProtoValue::Message(value) = value else {
            return None;
        };
        let (seconds, nanos_part) = seconds_and_nanos(value);
        let shown = if timestamp {
            format_timestamp(seconds, nanos_part)
        } else {
            format_duration(seconds, nanos_part)
        }
        .unwrap_or_else(|| format!("{seconds}s"));
        Some((Number::Int(nanos(seconds, nanos_part)), format!("\"{shown}\"")))
    };
    let subject = |value: Number| match value {
        Number::Int(at) => Subject::Nanos(at),
        Number::Float(_) => Subject::Other,
    };
    ordered_rules(declared, value_of, subject, out);
    if timestamp {
        for (name, before) in [("lt_now", true), ("gt_now", false)] {
            if flag(declared, name) {
                out.push(Rule::Now { before });
            }
        }
        if let Some(within) = message(declared, "within") {
            let (seconds, nanos_part) = seconds_and_nanos(&within);
            let shown = format_duration(seconds, nanos_part).unwrap_or_else(|| format!("{seconds}s"));
            out.push(Rule::Within(nanos(seconds, nanos_part), shown));
        }
    }
}

/// A Duration's or Timestamp's two fields.
fn seconds_and_nanos(value: &DynamicMessage) -> (i64, i32) {
    let seconds = match value.get_field_by_name("seconds").as_deref() {
        Some(ProtoValue::I64(seconds)) => *seconds,
        _ => 0,
    };
    let nanos = match value.get_field_by_name("nanos").as_deref() {
        Some(ProtoValue::I32(nanos)) => *nanos,
        _ => 0,
    };
    (seconds, nanos)
}

fn cel_rules(declared: &DynamicMessage) -> Result<Vec<CelRule>, String> {
    let declared_rules = messages(declared, "cel")
        .iter()
        .map(|rule| CelRule::new(text(rule, "id"), text(rule, "message"), text(rule, "expression")))
        .collect::<Result<Vec<_>, _>>()?;
    let bare = strings(declared, "cel_expression")
        .into_iter()
        .map(|expression| CelRule::new(String::new(), String::new(), expression))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(declared_rules.into_iter().chain(bare).collect())
}

/// A field's value if it is set.
fn get(message: &DynamicMessage, name: &str) -> Option<ProtoValue> {
    message
        .has_field_by_name(name)
        .then(|| message.get_field_by_name(name).map(Cow::into_owned))
        .flatten()
}

fn flag(message: &DynamicMessage, name: &str) -> bool {
    matches!(get(message, name), Some(ProtoValue::Bool(true)))
}

fn enum_number(message: &DynamicMessage, name: &str) -> Option<i32> {
    match get(message, name) {
        Some(ProtoValue::EnumNumber(number)) => Some(number),
        _ => None,
    }
}

fn text(message: &DynamicMessage, name: &str) -> String {
    match get(message, name) {
        Some(ProtoValue::String(text)) => text,
        _ => String::new(),
    }
}

fn message(message: &DynamicMessage, name: &str) -> Option<DynamicMessage> {
    match get(message, name) {
        Some(ProtoValue::Message(inner)) => Some(inner),
        _ => None,
    }
}

fn list(message: &DynamicMessage, name: &str) -> Vec<ProtoValue> {
    match get(message, name) {
        Some(ProtoValue::List(items)) => items,
        _ => Vec::new(),
    }
}

fn messages(declared: &DynamicMessage, name: &str) -> Vec<DynamicMessage> {
    list(declared, name)
        .into_iter()
        .filter_map(|value| match value {
            ProtoValue::Message(inner) => Some(inner),
            _ => None,
        })
        .collect()
}

fn strings(declared: &DynamicMessage, name: &str) -> Vec<String> {
    list(declared, name)
        .into_iter()
        .filter_map(|value| match value {
            ProtoValue::String(text) => Some(text),
            _ => None,
        })
        .collect()
}

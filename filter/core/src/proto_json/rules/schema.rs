//! `buf.validate` rules in an input schema: as JSON Schema keywords where JSON Schema has one
//! that means the same or less (so what a schema allows, the gate accepts), and in words in
//! the field's description otherwise (CEL, prefixes, durations, formats JSON Schema lacks).

use prost_reflect::{FieldDescriptor, Kind};
use serde_json::{json, Map, Value};

use super::{is_outside_range, Bound, FieldRules, Format, Ignore, MessageRules, Number, Rule, Side, Subject, Unit};
use crate::proto_json::{Form, WellKnown};

/// Writes `rules` of `field` into the field's `schema`; returns what only words can say.
pub fn annotate(field: &FieldDescriptor, rules: &FieldRules, schema: &mut Value) -> Vec<String> {
    let mut words = Vec::new();
    if rules.ignore == Ignore::Always {
        return words;
    }
    let Value::Object(map) = schema else {
        return words;
    };
    if field.is_list() || field.is_map() {
        let unit = if field.is_list() { Unit::Items } else { Unit::Pairs };
        let (min_key, max_key) = if field.is_list() {
            ("minItems", "maxItems")
        } else {
            ("minProperties", "maxProperties")
        };
        let mut extra = Map::new();
        if rules.required {
            extra.insert(min_key.into(), json!(1));
        }
        for rule in &rules.rules {
            match rule {
                Rule::Length {
                    unit: rule_unit,
                    min,
                    max,
                    ..
                } if *rule_unit == unit => {
                    if let Some(min) = min {
                        tighten(&mut extra, min_key, json!(min), true);
                    }
                    if let Some(max) = max {
                        tighten(&mut extra, max_key, json!(max), false);
                    }
                }
                // JSON equality, which `uniqueItems` compares by, is the gate's own only where a
                // value has one spelling: not for base64 (padded or not), nor for 64-bit integers
                // as strings, which the items' schema then leaves out.
                Rule::Unique if matches!(Form::of(&field.kind()), Form::Bytes) => {
                    words.push(said(rule, rules.family));
                }
                Rule::Unique => {
                    extra.insert("uniqueItems".into(), json!(true));
                    if let (Form::Int64 { .. }, Some(Value::Object(items))) =
                        (Form::of(&field.kind()), map.get_mut("items"))
                    {
                        numbers_only(&Form::of(&field.kind()), items);
                    }
                }
                rule => words.push(said(rule, rules.family)),
            }
        }
        merge(
            map,
            extra,
            rules.ignore == Ignore::IfZero,
            json!(if field.is_list() { json!([]) } else { json!({}) }),
        );
        let (item_kind, key_kind) = match field.kind() {
            Kind::Message(entry) if field.is_map() => (
                entry.map_entry_value_field().kind(),
                Some(entry.map_entry_key_field().kind()),
            ),
            kind => (kind, None),
        };
        if let Some(item_rules) = &rules.items {
            let slot = if field.is_list() {
                "items"
            } else {
                "additionalProperties"
            };
            if let Some(item_schema) = map.get_mut(slot) {
                let said = element(&item_kind, item_rules, item_schema);
                let each = if field.is_list() { "Each item" } else { "Each value" };
                words.extend(said.into_iter().map(|text| format!("{each}: {text}")));
            }
        }
        if let (Some(key_rules), Some(key_kind)) = (&rules.keys, key_kind) {
            let names = map.entry("propertyNames").or_insert_with(|| json!({}));
            let said = element(&key_kind, key_rules, names);
            words.extend(said.into_iter().map(|text| format!("Each key: {text}")));
        }
    } else {
        words.extend(element(&field.kind(), rules, schema));
        if rules.required && !field.supports_presence() {
            words.push("Must not be left at its default value (required).".to_owned());
        }
    }
    words.extend(rules.cel.iter().map(|cel| cel.words()));
    words
}

/// The words of a message's own rules: oneof and message `oneof` rules, CEL.
pub fn message_words(rules: &MessageRules) -> Vec<String> {
    let mut words: Vec<String> = rules
        .exclusive
        .iter()
        .map(|exclusive| {
            let names: Vec<String> = exclusive
                .fields
                .iter()
                .map(|field| format!("`{}`", field.name()))
                .collect();
            let how = if exclusive.required {
                "exactly one"
            } else {
                "at most one"
            };
            format!("Set {how} of {} ({}).", names.join(", "), exclusive.rule())
        })
        .collect();
    words.extend(rules.cel.iter().map(|cel| cel.words()));
    words
}

/// Rules of one value (a singular field, an item, a key or a map value) into its schema.
fn element(kind: &Kind, rules: &FieldRules, schema: &mut Value) -> Vec<String> {
    let mut words = Vec::new();
    let Value::Object(map) = schema else {
        return words;
    };
    let form = match Form::of(kind) {
        Form::WellKnown(WellKnown::Wrapper(inner)) => Form::of(&inner),
        form => form,
    };
    let mut extra = Map::new();
    for rule in &rules.rules {
        if !keyword(&form, rule, map, &mut extra) {
            words.push(said(rule, rules.family));
        }
    }
    if rules.required {
        require_non_default(&form, map, &mut extra);
    }
    let zero = zero_of(&form);
    merge(map, extra, rules.ignore == Ignore::IfZero, zero);
    words
}

/// The rule as a keyword, if one means the same or less; false if only words can say it.
fn keyword(form: &Form, rule: &Rule, base: &mut Map<String, Value>, extra: &mut Map<String, Value>) -> bool {
    match (rule, form) {
        (
            Rule::Length {
                unit: Unit::Characters,
                min,
                max,
                ..
            },
            Form::String,
        ) => {
            if let Some(min) = min {
                tighten(extra, "minLength", json!(min), true);
            }
            if let Some(max) = max {
                tighten(extra, "maxLength", json!(max), false);
            }
            true
        }
        (Rule::Pattern(regex), Form::String) if !regex.as_str().contains("(?") => {
            extra.insert("pattern".into(), json!(regex.as_str()));
            true
        }
        (Rule::Format(format, _), Form::String) => match schema_format(*format) {
            Some(name) => {
                extra.insert("format".into(), json!(name));
                true
            }
            None => false,
        },
        (Rule::Const(subject, _), form) => match json_of(subject, form) {
            Some(value) => {
                numbers_only(form, base);
                extra.insert("const".into(), value);
                true
            }
            None => false,
        },
        (Rule::In { values, inside, .. }, Form::Enum(descriptor)) => {
            let names: Vec<String> = values
                .iter()
                .filter_map(|value| match value {
                    Subject::Enum(number) => descriptor.get_value(*number).map(|value| value.name().to_owned()),
                    _ => None,
                })
                .collect();
            if let Some(Value::Array(allowed)) = base.get_mut("enum") {
                allowed.retain(|name| {
                    name.as_str()
                        .is_some_and(|name| names.iter().any(|n| n == name) == *inside)
                });
            }
            true
        }
        (Rule::In { values, inside, .. }, form) => {
            let listed: Option<Vec<Value>> = values.iter().map(|value| json_of(value, form)).collect();
            match listed {
                Some(listed) => {
                    numbers_only(form, base);
                    if *inside {
                        extra.insert("enum".into(), Value::Array(listed));
                    } else {
                        extra.insert("not".into(), json!({"enum": listed}));
                    }
                    true
                }
                None => false,
            }
        }
        (Rule::Range { lower, upper }, Form::Int32 { .. } | Form::Int64 { .. } | Form::Float { .. }) => {
            numbers_only(form, base);
            match (lower, upper) {
                (Some(low), Some(high)) if is_outside_range(low, high) => {
                    // Between the bounds fails: not (from `high` up to `low`).
                    let mut between = Map::new();
                    between.insert(bound_keyword(high, true, true).into(), number_json(high.value));
                    between.insert(bound_keyword(low, false, true).into(), number_json(low.value));
                    extra.insert("not".into(), Value::Object(between));
                }
                _ => {
                    for (bound, is_upper) in [(lower, false), (upper, true)] {
                        if let Some(bound) = bound {
                            extra.insert(bound_keyword(bound, is_upper, false).into(), number_json(bound.value));
                        }
                    }
                }
            }
            true
        }
        (Rule::Finite, Form::Float { .. }) => {
            numbers_only(form, base);
            true
        }
        _ => false,
    }
}

/// The keyword of a bound: `gt: 5` is `exclusiveMinimum: 5`, `lte: 5` is `maximum: 5`. Turned
/// (`band`), it bounds the failing band between an outside range's ends: `lt: 5` fails from 5
/// up (`minimum: 5`), `gte: 9` below 9 (`exclusiveMaximum: 9`).
fn bound_keyword(bound: &Bound, is_upper: bool, band: bool) -> &'static str {
    let exclusive = (bound.side == Side::Exclusive) != band;
    match (is_upper != band, exclusive) {
        (false, true) => "exclusiveMinimum",
        (false, false) => "minimum",
        (true, true) => "exclusiveMaximum",
        (true, false) => "maximum",
    }
}

/// A number rule on a 64-bit integer or a float: the schema offers JSON numbers only, since
/// JSON Schema cannot compare decimal strings or "NaN" (the gate still reads them).
fn numbers_only(form: &Form, base: &mut Map<String, Value>) {
    match form {
        Form::Int64 { .. } => {
            base.insert("type".into(), json!("integer"));
            base.remove("pattern");
        }
        Form::Float { .. } => {
            base.insert("type".into(), json!("number"));
            base.remove("pattern");
        }
        _ => {}
    }
}

fn require_non_default(form: &Form, base: &mut Map<String, Value>, extra: &mut Map<String, Value>) {
    match form {
        Form::String => tighten(extra, "minLength", json!(1), true),
        Form::Bool => {
            extra.insert("const".into(), json!(true));
        }
        Form::Enum(descriptor) => {
            if let (Some(zero), Some(Value::Array(allowed))) = (descriptor.get_value(0), base.get_mut("enum")) {
                allowed.retain(|name| name.as_str() != Some(zero.name()));
            }
        }
        Form::Int32 { .. } | Form::Int64 { .. } | Form::Float { .. } => {
            numbers_only(form, base);
            extra.insert("not".into(), json!({"const": 0}));
        }
        _ => {}
    }
}

/// A keyword set that only applies when the value is not its zero (`IGNORE_IF_ZERO_VALUE`)
/// becomes `anyOf: [zero, keywords]`.
fn merge(base: &mut Map<String, Value>, extra: Map<String, Value>, unless_zero: bool, zero: Value) {
    if extra.is_empty() {
        return;
    }
    if unless_zero && !zero.is_null() {
        base.insert("anyOf".into(), json!([{"const": zero}, Value::Object(extra)]));
        return;
    }
    for (key, value) in extra {
        match key.as_str() {
            "minimum" | "minLength" | "minItems" | "minProperties" => tighten(base, &key, value, true),
            "maximum" | "maxLength" | "maxItems" | "maxProperties" => tighten(base, &key, value, false),
            _ => {
                base.insert(key, value);
            }
        }
    }
}

/// Sets `key` to `value`, or keeps what is there if it is already tighter.
fn tighten(map: &mut Map<String, Value>, key: &str, value: Value, is_lower: bool) {
    let tighter = match (map.get(key).and_then(Value::as_f64), value.as_f64()) {
        (Some(old), Some(new)) => {
            if is_lower {
                new > old
            } else {
                new < old
            }
        }
        _ => true,
    };
    if tighter {
        map.insert(key.to_owned(), value);
    }
}

fn zero_of(form: &Form) -> Value {
    match form {
        Form::String => json!(""),
        Form::Int32 { .. } | Form::Int64 { .. } | Form::Float { .. } => json!(0),
        Form::Bool => json!(false),
        Form::Enum(descriptor) => descriptor.get_value(0).map_or(Value::Null, |zero| json!(zero.name())),
        _ => Value::Null,
    }
}

/// A rule value as the JSON the schema compares with, where exactly one spelling exists.
fn json_of(subject: &Subject<'_>, form: &Form) -> Option<Value> {
    match (subject, form) {
        (Subject::Number(number), Form::Int32 { .. } | Form::Int64 { .. } | Form::Float { .. }) => {
            Some(number_json(*number))
        }
        (Subject::Bool(value), Form::Bool) => Some(json!(value)),
        (Subject::Text(text), Form::String) => Some(json!(text)),
        (Subject::Enum(number), Form::Enum(descriptor)) => {
            descriptor.get_value(*number).map(|value| json!(value.name()))
        }
        _ => None,
    }
}

fn number_json(number: Number) -> Value {
    match number {
        Number::Int(value) => i64::try_from(value)
            .map(Value::from)
            .or_else(|_| u64::try_from(value).map(Value::from))
            .unwrap_or(Value::Null),
        Number::Float(value) => serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number),
    }
}

/// JSON Schema's own name of a format that means the same or less (draft 2020-12). Not
/// `hostname`: JSON Schema's allows an all-digit last label, which protovalidate's does not.
fn schema_format(format: Format) -> Option<&'static str> {
    match format {
        Format::Email => Some("email"),
        Format::Ip(4) => Some("ipv4"),
        Format::Ip(6) => Some("ipv6"),
        Format::Uri => Some("uri"),
        Format::UriRef => Some("uri-reference"),
        Format::Uuid => Some("uuid"),
        _ => None,
    }
}

fn said(rule: &Rule, family: &str) -> String {
    format!("{} ({}).", capitalized(&rule.words()), rule.name(family))
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

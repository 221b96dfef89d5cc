//! Holding values to their rules. The gate calls in with each field of a message as given (or
//! left out) after it has read the value into protobuf, so every value here has its type's
//! form already; a violation names the rule and its limit and shows the value.

use std::cmp::Ordering;
use std::collections::HashSet;

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{Map, Value};

#[cfg(feature = "cel")]
use super::expressions;
use super::subject::{key_value, nanos};
use super::{
    formats, is_outside_range, Bound, Exclusive, FieldRules, Format, Ignore, MessageRules, Number, Rule, Side, Subject,
    Unit,
};
use crate::proto_json::{given_value, shown};

/// A broken rule: where below the field (an item or a map entry), and what is wrong.
#[derive(Debug)]
pub struct Violation<'a> {
    pub place: Option<Place<'a>>,
    pub problem: String,
}

#[derive(Debug, Clone, Copy)]
pub enum Place<'a> {
    Index(usize),
    Key(&'a str),
}

impl<'a> Violation<'a> {
    fn here(problem: String) -> Self {
        Violation { place: None, problem }
    }
}

impl FieldRules {
    /// `value`, given for `field` (a whole list or map, or a singular value).
    pub fn check_given<'a>(&self, field: &FieldDescriptor, value: &'a Value) -> Result<(), Violation<'a>> {
        if self.ignore == Ignore::Always {
            return Ok(());
        }
        match value {
            Value::Array(items) if field.is_list() => self.check_list(field, items, value)?,
            Value::Object(entries) if field.is_map() => self.check_map(field, entries, value)?,
            _ => {
                let subject = Subject::of(&field.kind(), value);
                if self.ignore == Ignore::IfZero && subject.is_zero() {
                    return Ok(());
                }
                if self.required && !field.supports_presence() && subject.is_zero() {
                    return Err(Violation::here(format!(
                        "must be set to a value other than the default (required), got {}",
                        shown(value)
                    )));
                }
                self.check_subject(&subject)
                    .map_err(|rule| Violation::here(broken(self, rule, value)))?;
            }
        }
        self.cel_holds(|| this_field(field, value))
            .map_err(|problem| Violation::here(format!("{problem}, got {}", shown(value))))
    }

    /// `field` left out: a list or map is empty, a field without presence holds its default,
    /// a field with presence is unset (and only `required` applies).
    pub fn check_absent(&self, field: &FieldDescriptor) -> Result<(), Violation<'static>> {
        if self.ignore != Ignore::Never {
            return Ok(());
        }
        if self.required {
            return Err(Violation::here(format!("missing required field `{}`", field.name())));
        }
        if field.is_list() || field.is_map() {
            let unit = if field.is_list() { Unit::Items } else { Unit::Pairs };
            if let Some(rule) = self.rules.iter().find(|rule| !length_fits(rule, unit, 0)) {
                return Err(Violation::here(format!(
                    "{} ({}), got nothing: a field left out is empty",
                    rule.words(),
                    rule.name(self.family)
                )));
            }
            return self
                .cel_holds(|| this_default(field))
                .map_err(|problem| Violation::here(format!("{problem}, got nothing: a field left out is empty")));
        }
        if field.supports_presence() {
            return Ok(());
        }
        let default = Subject::default_of(&field.kind());
        let left_out = || {
            format!(
                "got nothing: a field left out holds its default, {}",
                shown_default(&field.kind())
            )
        };
        self.check_subject(&default).map_err(|rule| {
            Violation::here(format!("{} ({}), {}", rule.words(), rule.name(self.family), left_out()))
        })?;
        self.cel_holds(|| this_default(field))
            .map_err(|problem| Violation::here(format!("{problem}, {}", left_out())))
    }

    fn check_list<'a>(
        &self,
        field: &FieldDescriptor,
        items: &'a [Value],
        whole: &'a Value,
    ) -> Result<(), Violation<'a>> {
        if items.is_empty() && self.ignore == Ignore::IfZero {
            return Ok(());
        }
        if self.required && items.is_empty() {
            return Err(Violation::here("must not be empty (required), got []".to_owned()));
        }
        for rule in &self.rules {
            let fits = match rule {
                Rule::Unique => are_unique(&field.kind(), items),
                rule => length_fits(rule, Unit::Items, items.len()),
            };
            if !fits {
                return Err(Violation::here(broken(self, rule, whole)));
            }
        }
        if let Some(item_rules) = &self.items {
            for (index, item) in items.iter().enumerate() {
                item_rules
                    .check_element(&field.kind(), item)
                    .map_err(|problem| Violation {
                        place: Some(Place::Index(index)),
                        problem,
                    })?;
            }
        }
        Ok(())
    }

    fn check_map<'a>(
        &self,
        field: &FieldDescriptor,
        entries: &'a Map<String, Value>,
        whole: &'a Value,
    ) -> Result<(), Violation<'a>> {
        if entries.is_empty() && self.ignore == Ignore::IfZero {
            return Ok(());
        }
        if self.required && entries.is_empty() {
            return Err(Violation::here("must not be empty (required), got {}".to_owned()));
        }
        if let Some(rule) = self
            .rules
            .iter()
            .find(|rule| !length_fits(rule, Unit::Pairs, entries.len()))
        {
            return Err(Violation::here(broken(self, rule, whole)));
        }
        let Kind::Message(entry) = field.kind() else {
            return Ok(());
        };
        let (key_kind, value_kind) = (entry.map_entry_key_field().kind(), entry.map_entry_value_field().kind());
        for (key, value) in entries {
            if let Some(key_rules) = &self.keys {
                let key_value = key_value(&key_kind, key);
                key_rules
                    .check_element(&key_kind, &key_value)
                    .map_err(|problem| Violation {
                        place: Some(Place::Key(key)),
                        problem: format!("key: {problem}"),
                    })?;
            }
            if let Some(value_rules) = &self.items {
                value_rules
                    .check_element(&value_kind, value)
                    .map_err(|problem| Violation {
                        place: Some(Place::Key(key)),
                        problem,
                    })?;
            }
        }
        Ok(())
    }

    /// One item of a list, or a map's key or value.
    fn check_element(&self, kind: &Kind, value: &Value) -> Result<(), String> {
        if self.ignore == Ignore::Always {
            return Ok(());
        }
        let subject = Subject::of(kind, value);
        if self.ignore == Ignore::IfZero && subject.is_zero() {
            return Ok(());
        }
        self.check_subject(&subject).map_err(|rule| broken(self, rule, value))?;
        self.cel_holds(|| this_element(kind, value))
            .map_err(|problem| format!("{problem}, got {}", shown(value)))
    }

    /// The field's CEL rules, for `this` (with the `cel` feature; without it they are only
    /// shown, and this holds).
    #[cfg(feature = "cel")]
    fn cel_holds(&self, this: impl Fn() -> ::cel::Value) -> Result<(), String> {
        for rule in &self.cel {
            if let Some(compiled) = &rule.compiled {
                expressions::holds(rule, compiled, this())?;
            }
        }
        Ok(())
    }

    #[cfg(not(feature = "cel"))]
    fn cel_holds(&self, _this: impl Fn()) -> Result<(), String> {
        Ok(())
    }

    /// The first rule `subject` breaks.
    fn check_subject(&self, subject: &Subject<'_>) -> Result<(), &Rule> {
        match self.rules.iter().find(|rule| !fits(rule, subject)) {
            Some(rule) => Err(rule),
            None => Ok(()),
        }
    }
}

impl MessageRules {
    /// The message's own CEL rules, for the message given as `object`.
    #[cfg(feature = "cel")]
    pub fn check_message(&self, message: &MessageDescriptor, object: &Map<String, Value>) -> Result<(), String> {
        for rule in &self.cel {
            if let Some(compiled) = &rule.compiled {
                expressions::holds(rule, compiled, expressions::message_value(message, object))?;
            }
        }
        Ok(())
    }

    #[cfg(not(feature = "cel"))]
    pub fn check_message(&self, _message: &MessageDescriptor, _object: &Map<String, Value>) -> Result<(), String> {
        Ok(())
    }
}

#[cfg(feature = "cel")]
fn this_field(field: &FieldDescriptor, value: &Value) -> ::cel::Value {
    expressions::field_value(field, value)
}

#[cfg(feature = "cel")]
fn this_default(field: &FieldDescriptor) -> ::cel::Value {
    expressions::default_value(field)
}

#[cfg(feature = "cel")]
fn this_element(kind: &Kind, value: &Value) -> ::cel::Value {
    expressions::element_value(kind, value)
}

// Without the `cel` feature nothing is built for CEL to read.
#[cfg(not(feature = "cel"))]
fn this_field(_field: &FieldDescriptor, _value: &Value) {}

#[cfg(not(feature = "cel"))]
fn this_default(_field: &FieldDescriptor) {}

#[cfg(not(feature = "cel"))]
fn this_element(_kind: &Kind, _value: &Value) {}

/// At most one of the set's fields in `object`; exactly one if required. A field without
/// presence given its default counts as not set, as protovalidate counts it.
pub fn check_exclusive(exclusive: &Exclusive, object: &Map<String, Value>) -> Result<(), String> {
    let set: Vec<String> = exclusive
        .fields
        .iter()
        .filter(|field| {
            given_value(object, field).is_some_and(|value| {
                field.supports_presence()
                    || field.is_list()
                    || field.is_map()
                    || !Subject::of(&field.kind(), value).is_zero()
            })
        })
        .map(|field| format!("`{}`", field.name()))
        .collect();
    let members: Vec<String> = exclusive
        .fields
        .iter()
        .map(|field| format!("`{}`", field.name()))
        .collect();
    let which = match &exclusive.oneof {
        Some(oneof) => format!("oneof `{oneof}`"),
        None => format!("the fields {}", members.join(", ")),
    };
    if set.len() > 1 {
        return Err(format!(
            "{} are all set; set at most one of {which} ({})",
            set.join(", "),
            exclusive.rule()
        ));
    }
    if set.is_empty() && exclusive.required {
        return Err(format!(
            "one of {} is required ({}), got none",
            members.join(", "),
            exclusive.rule()
        ));
    }
    Ok(())
}

fn broken(rules: &FieldRules, rule: &Rule, value: &Value) -> String {
    // An Any's type is what its rules look at, and would be cut from the object shown.
    let given = match (rule, value.get("@type")) {
        (Rule::TypeUrls { .. }, Some(url)) => format!("\"@type\": {url}"),
        _ => shown(value),
    };
    format!("{} ({}), got {given}", rule.words(), rule.name(rules.family))
}

fn shown_default(kind: &Kind) -> String {
    match kind {
        Kind::String | Kind::Bytes => "\"\"".to_owned(),
        Kind::Bool => "false".to_owned(),
        Kind::Enum(descriptor) => descriptor
            .get_value(0)
            .map_or_else(|| "0".to_owned(), |value| format!("\"{}\"", value.name())),
        _ => "0".to_owned(),
    }
}

/// Lengths of lists and maps; any other rule fits.
fn length_fits(rule: &Rule, unit: Unit, length: usize) -> bool {
    match rule {
        Rule::Length {
            unit: rule_unit,
            min,
            max,
            ..
        } if *rule_unit == unit => within(length as u64, *min, *max),
        _ => true,
    }
}

fn within(length: u64, min: Option<u64>, max: Option<u64>) -> bool {
    min.is_none_or(|min| length >= min) && max.is_none_or(|max| length <= max)
}

fn are_unique(kind: &Kind, items: &[Value]) -> bool {
    let mut seen = HashSet::with_capacity(items.len());
    items
        .iter()
        .all(|item| seen.insert(format!("{:?}", Subject::of(kind, item))))
}

fn fits(rule: &Rule, subject: &Subject<'_>) -> bool {
    match (rule, subject) {
        (Rule::Const(expected, _), subject) => expected == subject,
        (Rule::Range { lower, upper }, subject) => {
            let value = match subject {
                Subject::Number(number) => *number,
                Subject::Nanos(nanos) => Number::Int(*nanos),
                _ => return true,
            };
            let above = lower.as_ref().map(|bound| passes(value, bound, false));
            let below = upper.as_ref().map(|bound| passes(value, bound, true));
            match (lower, upper, above, below) {
                (Some(low), Some(high), Some(above), Some(below)) if is_outside_range(low, high) => above || below,
                (_, _, above, below) => above.unwrap_or(true) && below.unwrap_or(true),
            }
        }
        (Rule::In { values, inside, .. }, subject) => values.contains(subject) == *inside,
        (Rule::Finite, Subject::Number(Number::Float(value))) => value.is_finite(),
        (
            Rule::Length {
                unit: Unit::Characters,
                min,
                max,
                ..
            },
            Subject::Text(text),
        ) => within(text.chars().count() as u64, *min, *max),
        (
            Rule::Length {
                unit: Unit::Bytes,
                min,
                max,
                ..
            },
            Subject::Text(text),
        ) => within(text.len() as u64, *min, *max),
        (
            Rule::Length {
                unit: Unit::Bytes,
                min,
                max,
                ..
            },
            Subject::Bytes(bytes),
        ) => within(bytes.len() as u64, *min, *max),
        (Rule::Pattern(regex), Subject::Text(text)) => regex.is_match(text),
        (Rule::Pattern(regex), Subject::Bytes(bytes)) => {
            std::str::from_utf8(bytes).is_ok_and(|text| regex.is_match(text))
        }
        (Rule::Prefix(Subject::Text(affix), _), Subject::Text(text)) => text.starts_with(affix.as_ref()),
        (Rule::Suffix(Subject::Text(affix), _), Subject::Text(text)) => text.ends_with(affix.as_ref()),
        (Rule::Contains(Subject::Text(affix), _), Subject::Text(text)) => text.contains(affix.as_ref()),
        (Rule::NotContains(Subject::Text(affix), _), Subject::Text(text)) => !text.contains(affix.as_ref()),
        (Rule::Prefix(Subject::Bytes(affix), _), Subject::Bytes(bytes)) => bytes.starts_with(affix),
        (Rule::Suffix(Subject::Bytes(affix), _), Subject::Bytes(bytes)) => bytes.ends_with(affix),
        (Rule::Contains(Subject::Bytes(affix), _), Subject::Bytes(bytes)) => {
            affix.is_empty() || bytes.windows(affix.len()).any(|window| window == affix.as_ref())
        }
        (Rule::Format(format, _), Subject::Text(text)) => format_fits(*format, text),
        (Rule::ByteFormat(name), Subject::Bytes(bytes)) => match *name {
            "ipv4" => bytes.len() == 4,
            "ipv6" | "uuid" => bytes.len() == 16,
            _ => bytes.len() == 4 || bytes.len() == 16,
        },
        (Rule::Now { before }, Subject::Nanos(at)) => {
            let now = now_nanos();
            if *before {
                *at < now
            } else {
                *at > now
            }
        }
        (Rule::Within(span, _), Subject::Nanos(at)) => (now_nanos() - at).abs() <= *span,
        (Rule::TypeUrls { urls, inside }, Subject::TypeUrl(url)) => urls.iter().any(|listed| listed == url) == *inside,
        (Rule::MaskPaths { paths, inside: true }, Subject::Paths(given)) => {
            given.iter().all(|path| paths.iter().any(|listed| covers(listed, path)))
        }
        (Rule::MaskPaths { paths, inside: false }, Subject::Paths(given)) => {
            !given.iter().any(|path| paths.iter().any(|listed| covers(listed, path)))
        }
        _ => true,
    }
}

/// `listed` is `path`, or a path above it.
fn covers(listed: &str, path: &str) -> bool {
    path == listed || path.strip_prefix(listed).is_some_and(|rest| rest.starts_with('.'))
}

/// `value` is beyond `bound`: above it for a lower bound, below it for an upper one (or at it,
/// when inclusive). NaN is beyond nothing.
fn passes(value: Number, bound: &Bound, is_upper: bool) -> bool {
    let ordering = match (value, bound.value) {
        (Number::Int(value), Number::Int(limit)) => Some(value.cmp(&limit)),
        (Number::Float(value), Number::Float(limit)) => value.partial_cmp(&limit),
        _ => return true,
    };
    let beyond = if is_upper { Ordering::Less } else { Ordering::Greater };
    ordering
        .is_some_and(|ordering| ordering == beyond || (bound.side == Side::Inclusive && ordering == Ordering::Equal))
}

fn format_fits(format: Format, text: &str) -> bool {
    match format {
        Format::Email => formats::email(text),
        Format::Hostname => formats::hostname(text),
        Format::Ip(version) => formats::ip(text, version),
        Format::IpWithPrefixLen(version) => formats::ip_with_prefixlen(text, version),
        Format::IpPrefix(version) => formats::ip_prefix(text, version),
        Format::Uri => formats::uri(text),
        Format::UriRef => formats::uri_ref(text),
        Format::Address => formats::address(text),
        Format::Uuid => formats::uuid(text),
        Format::Tuuid => formats::tuuid(text),
        Format::HostAndPort => formats::host_and_port(text),
        Format::Ulid => formats::ulid(text),
        Format::ProtobufFqn => formats::protobuf_fqn(text),
        Format::ProtobufDotFqn => formats::protobuf_dot_fqn(text),
        Format::HeaderName { strict } => formats::http_header_name(text, strict),
        Format::HeaderValue { strict } => formats::http_header_value(text, strict),
    }
}

/// Now, for `lt_now`, `gt_now` and `within`: the host's clock (WASI's in the Wasm filter).
fn now_nanos() -> i128 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    nanos(
        i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX),
        i32::try_from(since_epoch.subsec_nanos()).unwrap_or(0),
    )
}

//! `buf.validate` (protovalidate) rules: read once from the descriptor pool's field, oneof and
//! message options ([`read`]), enforced on tool arguments by the gate ([`check`]), and written
//! into input schemas as JSON Schema keywords or, where JSON Schema has none, in words
//! ([`schema`]). Each rule's wording lives beside it here ([`Rule::words`]), so an error, a
//! schema's description and the README say the same thing.
//!
//! Enforced: every standard rule of every family (numbers, bool, string with its well-known
//! formats, bytes, enum, repeated, map, Any, Duration, Timestamp, FieldMask), `required`,
//! `ignore`, oneof `required` and message `oneof` rules. CEL expressions (`cel`,
//! `cel_expression`) are enforced with the `cel` cargo feature ([`expressions`]); without it,
//! and always for predefined rule extensions, they are shown in the schema in words and logged
//! at load as unenforced.

mod check;
#[cfg(feature = "cel")]
mod expressions;
mod formats;
mod read;
pub mod schema;
mod subject;

use prost_reflect::{FieldDescriptor, MessageDescriptor};

pub use check::{check_exclusive, Place, Violation};
pub use read::read_message_rules;
pub use subject::Subject;

/// The rules of one message: its fields', its oneofs' and its own.
#[derive(Debug, Default)]
pub struct MessageRules {
    pub fields: Vec<(FieldDescriptor, FieldRules)>,
    /// Sets of fields of which at most one may be set (exactly one when `required`): oneof
    /// `required` and message `oneof` rules.
    pub exclusive: Vec<Exclusive>,
    /// Message-level CEL rules, not enforced.
    pub cel: Vec<CelRule>,
}

impl MessageRules {
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.exclusive.is_empty() && self.cel.is_empty()
    }

    pub fn field(&self, field: &FieldDescriptor) -> Option<&FieldRules> {
        self.fields
            .iter()
            .find(|(candidate, _)| candidate.number() == field.number())
            .map(|(_, rules)| rules)
    }
}

/// At most one of `fields`, or exactly one when `required`.
#[derive(Debug, Clone)]
pub struct Exclusive {
    pub fields: Vec<FieldDescriptor>,
    pub required: bool,
    /// `(buf.validate.oneof).required` on a oneof of this name, or a message `oneof` rule.
    pub oneof: Option<String>,
}

impl Exclusive {
    /// The rule's name in errors, as protovalidate names it.
    pub fn rule(&self) -> &'static str {
        if self.oneof.is_some() {
            "oneof.required"
        } else {
            "message.oneof"
        }
    }
}

/// A CEL rule: enforced with the `cel` feature (when it has an expression), shown in any case.
#[derive(Debug, Clone)]
pub struct CelRule {
    pub id: String,
    pub message: String,
    pub expression: String,
    #[cfg(feature = "cel")]
    compiled: Option<expressions::Compiled>,
}

impl CelRule {
    /// A rule as declared; with the `cel` feature, compiled (or why it does not compile). A
    /// predefined rule has no expression here.
    pub fn new(id: String, message: String, expression: String) -> Result<CelRule, String> {
        #[cfg(feature = "cel")]
        let compiled = if expression.is_empty() {
            None
        } else {
            Some(expressions::compile(&expression)?)
        };
        Ok(CelRule {
            id,
            message,
            expression,
            #[cfg(feature = "cel")]
            compiled,
        })
    }

    /// Whether the gate checks this rule.
    pub fn is_enforced(&self) -> bool {
        cfg!(feature = "cel") && !self.expression.is_empty()
    }

    pub fn words(&self) -> String {
        let said = if self.message.is_empty() {
            String::new()
        } else {
            format!(": {}", self.message)
        };
        let id = if self.id.is_empty() {
            String::new()
        } else {
            format!(" `{}`", self.id)
        };
        match (self.expression.is_empty(), self.is_enforced()) {
            (true, _) => format!("Rule{id}{said} (not checked by the gateway)."),
            (false, true) => format!("Rule{id}{said} (CEL `{}`).", self.expression),
            (false, false) => format!(
                "Rule{id}{said} (CEL `{}`, not checked by the gateway).",
                self.expression
            ),
        }
    }

    /// The rule in a log line: its expression, or its name when it has none here.
    pub fn label(&self) -> &str {
        if self.expression.is_empty() {
            &self.id
        } else {
            &self.expression
        }
    }

    /// The rule in an error, as `string.min_len = 3` names a standard one.
    pub fn label_for_errors(&self) -> String {
        if self.id.is_empty() {
            format!("cel `{}`", self.expression)
        } else {
            format!("cel {}: `{}`", self.id, self.expression)
        }
    }
}

/// When a field's rules are skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ignore {
    #[default]
    Never,
    IfZero,
    Always,
}

/// The rules of one field (or of the items, keys or values of a list or map).
#[derive(Debug, Clone, Default)]
pub struct FieldRules {
    pub required: bool,
    pub ignore: Ignore,
    /// The rule family's name (`string`, `int32`, …) and its rules.
    pub family: &'static str,
    pub rules: Vec<Rule>,
    pub cel: Vec<CelRule>,
    /// `repeated.items`, `map.values`.
    pub items: Option<Box<FieldRules>>,
    /// `map.keys`.
    pub keys: Option<Box<FieldRules>>,
}

impl FieldRules {
    /// Whether the gate has anything to check.
    pub fn is_enforced(&self) -> bool {
        self.required
            || !self.rules.is_empty()
            || self.items.is_some()
            || self.keys.is_some()
            || self.cel.iter().any(CelRule::is_enforced)
    }
}

/// A number a rule compares with: integers of every width as `i128`, floats as `f64`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    Int(i128),
    Float(f64),
}

impl std::fmt::Display for Number {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Number::Int(value) => write!(f, "{value}"),
            Number::Float(value) => write!(f, "{value}"),
        }
    }
}

/// Which side of a bound passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `gt`, `lt`: the bound itself fails.
    Exclusive,
    /// `gte`, `lte`: the bound itself passes.
    Inclusive,
}

/// One bound of a range: the value, as a number (or nanoseconds for durations and
/// timestamps), and as written in the rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    pub value: Number,
    pub side: Side,
    pub shown: String,
}

/// A string format (`string.email` …), by its rule name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Email,
    Hostname,
    Ip(u8),
    IpWithPrefixLen(u8),
    IpPrefix(u8),
    Uri,
    UriRef,
    Address,
    Uuid,
    Tuuid,
    HostAndPort,
    Ulid,
    ProtobufFqn,
    ProtobufDotFqn,
    HeaderName { strict: bool },
    HeaderValue { strict: bool },
}

/// One rule, with what it needs to be checked and said.
#[derive(Debug, Clone)]
pub enum Rule {
    /// `const`, for any family: the value, compared as a [`Subject`], and as written.
    Const(Subject<'static>, String),
    /// `gt`/`gte` and `lt`/`lte`. When the lower bound is above the upper one, the range is
    /// exclusive: values outside it pass, as protovalidate reads it.
    Range {
        lower: Option<Bound>,
        upper: Option<Bound>,
    },
    /// `in` (`inside`) or `not_in`.
    In {
        values: Vec<Subject<'static>>,
        shown: Vec<String>,
        inside: bool,
    },
    Finite,
    /// Lengths: in characters (`len`, `min_len`, `max_len` of strings), bytes, items or pairs.
    Length {
        unit: Unit,
        min: Option<u64>,
        max: Option<u64>,
        rule: &'static str,
    },
    Pattern(regex_lite::Regex),
    Prefix(Subject<'static>, String),
    Suffix(Subject<'static>, String),
    Contains(Subject<'static>, String),
    NotContains(Subject<'static>, String),
    Format(Format, &'static str),
    /// `bytes.ip`, `bytes.ipv4`, `bytes.ipv6`, `bytes.uuid`: by length.
    ByteFormat(&'static str),
    Unique,
    /// `timestamp.lt_now`, `timestamp.gt_now`.
    Now {
        before: bool,
    },
    /// `timestamp.within`, in nanoseconds.
    Within(i128, String),
    /// `any.in`, `any.not_in`: type URLs.
    TypeUrls {
        urls: Vec<String>,
        inside: bool,
    },
    /// `field_mask.in`, `field_mask.not_in`: paths (each covering the paths under it).
    MaskPaths {
        paths: Vec<String>,
        inside: bool,
    },
}

/// What a length counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Characters,
    Bytes,
    Items,
    Pairs,
}

impl Unit {
    /// The unit's name for `count` of it.
    fn name(self, count: u64) -> &'static str {
        match (self, count == 1) {
            (Unit::Characters, true) => "character",
            (Unit::Characters, false) => "characters",
            (Unit::Bytes, true) => "byte",
            (Unit::Bytes, false) => "bytes",
            (Unit::Items, true) => "item",
            (Unit::Items, false) => "items",
            (Unit::Pairs, true) => "pair",
            (Unit::Pairs, false) => "pairs",
        }
    }
}

impl Rule {
    /// The rule's name and limit, as an error names it: `string.min_len = 3`.
    pub fn name(&self, family: &str) -> String {
        let limit = |name: &str, value: &dyn std::fmt::Display| format!("{family}.{name} = {value}");
        match self {
            Rule::Const(_, shown) => limit("const", shown),
            Rule::Range { lower, upper } => {
                let part = |bound: &Bound, exclusive: &str, inclusive: &str| {
                    let name = if bound.side == Side::Exclusive {
                        exclusive
                    } else {
                        inclusive
                    };
                    limit(name, &bound.shown)
                };
                let parts: Vec<String> = [
                    lower.as_ref().map(|bound| part(bound, "gt", "gte")),
                    upper.as_ref().map(|bound| part(bound, "lt", "lte")),
                ]
                .into_iter()
                .flatten()
                .collect();
                parts.join(", ")
            }
            Rule::In { shown, inside, .. } => limit(if *inside { "in" } else { "not_in" }, &list(shown)),
            Rule::Finite => format!("{family}.finite"),
            Rule::Length { min, max, rule, .. } => match (min, max, *rule) {
                (Some(min), Some(max), rule) if min == max => limit(rule, min),
                (Some(min), None, rule) | (None, Some(min), rule) => limit(rule, min),
                (_, _, rule) => format!("{family}.{rule}"),
            },
            Rule::Pattern(regex) => limit("pattern", &format!("\"{}\"", regex.as_str())),
            Rule::Prefix(_, shown) => limit("prefix", shown),
            Rule::Suffix(_, shown) => limit("suffix", shown),
            Rule::Contains(_, shown) => limit("contains", shown),
            Rule::NotContains(_, shown) => limit("not_contains", shown),
            Rule::Format(_, name) | Rule::ByteFormat(name) => format!("{family}.{name}"),
            Rule::Unique => format!("{family}.unique"),
            Rule::Now { before: true } => format!("{family}.lt_now"),
            Rule::Now { before: false } => format!("{family}.gt_now"),
            Rule::Within(_, shown) => limit("within", &format!("\"{shown}\"")),
            Rule::TypeUrls { urls, inside } => {
                let shown: Vec<String> = urls.iter().map(|url| format!("\"{url}\"")).collect();
                limit(if *inside { "in" } else { "not_in" }, &list(&shown))
            }
            Rule::MaskPaths { paths, inside } => {
                let shown: Vec<String> = paths.iter().map(|path| format!("\"{path}\"")).collect();
                limit(if *inside { "in" } else { "not_in" }, &list(&shown))
            }
        }
    }

    /// What the rule asks of a value, in words: "must be at least 3 characters long".
    pub fn words(&self) -> String {
        match self {
            Rule::Const(_, shown) => format!("must be {shown}"),
            Rule::Range { lower, upper } => range_words(lower.as_ref(), upper.as_ref()),
            Rule::In {
                shown, inside: true, ..
            } => format!("must be one of {}", shown.join(", ")),
            Rule::In {
                shown, inside: false, ..
            } => format!("must not be any of {}", shown.join(", ")),
            Rule::Finite => "must be a finite number (not NaN or an infinity)".to_owned(),
            Rule::Length { unit, min, max, .. } => {
                let count = |n: u64| format!("{n} {}", unit.name(n));
                let (verb, tail) = match unit {
                    Unit::Characters | Unit::Bytes => ("be", " long"),
                    Unit::Items | Unit::Pairs => ("have", ""),
                };
                match (min, max) {
                    (Some(min), Some(max)) if min == max => format!("must {verb} exactly {}{tail}", count(*min)),
                    (Some(min), Some(max)) => format!("must {verb} {min} to {}{tail}", count(*max)),
                    (Some(min), None) => format!("must {verb} at least {}{tail}", count(*min)),
                    (None, Some(max)) => format!("must {verb} at most {}{tail}", count(*max)),
                    (None, None) => String::new(),
                }
            }
            Rule::Pattern(regex) => format!("must match the regular expression `{}`", regex.as_str()),
            Rule::Prefix(_, shown) => format!("must start with {shown}"),
            Rule::Suffix(_, shown) => format!("must end with {shown}"),
            Rule::Contains(_, shown) => format!("must contain {shown}"),
            Rule::NotContains(_, shown) => format!("must not contain {shown}"),
            Rule::Format(format, _) => format!("must be {}", format_words(*format)),
            Rule::ByteFormat(name) => format!("must be {}", byte_format_words(name)),
            Rule::Unique => "items must be unique".to_owned(),
            Rule::Now { before: true } => "must be in the past".to_owned(),
            Rule::Now { before: false } => "must be in the future".to_owned(),
            Rule::Within(_, shown) => format!("must be within {shown} of now"),
            Rule::TypeUrls { urls, inside: true } => format!("must be a message of type {}", urls.join(", ")),
            Rule::TypeUrls { urls, inside: false } => format!("must not be a message of type {}", urls.join(", ")),
            Rule::MaskPaths { paths, inside: true } => {
                format!("may only hold the paths {} (or paths under them)", paths.join(", "))
            }
            Rule::MaskPaths { paths, inside: false } => {
                format!("must not hold the paths {} (or paths under them)", paths.join(", "))
            }
        }
    }
}

fn list(shown: &[String]) -> String {
    format!("[{}]", shown.join(", "))
}

fn range_words(lower: Option<&Bound>, upper: Option<&Bound>) -> String {
    let above = |bound: &Bound| match bound.side {
        Side::Exclusive => format!("greater than {}", bound.shown),
        Side::Inclusive => format!("greater than or equal to {}", bound.shown),
    };
    let below = |bound: &Bound| match bound.side {
        Side::Exclusive => format!("less than {}", bound.shown),
        Side::Inclusive => format!("less than or equal to {}", bound.shown),
    };
    match (lower, upper) {
        (Some(lower), Some(upper)) if is_outside_range(lower, upper) => {
            format!("must be {} or {}", above(lower), below(upper))
        }
        (Some(lower), Some(upper)) => format!("must be {} and {}", above(lower), below(upper)),
        (Some(lower), None) => format!("must be {}", above(lower)),
        (None, Some(upper)) => format!("must be {}", below(upper)),
        (None, None) => String::new(),
    }
}

/// gt/gte above lt/lte: the values between fail, those outside pass.
pub fn is_outside_range(lower: &Bound, upper: &Bound) -> bool {
    match (lower.value, upper.value) {
        (Number::Int(low), Number::Int(high)) => low >= high,
        (Number::Float(low), Number::Float(high)) => low >= high,
        _ => false,
    }
}

fn format_words(format: Format) -> String {
    let version = |version: u8, what: &str| match version {
        4 => format!("an IPv4 {what}"),
        6 => format!("an IPv6 {what}"),
        _ => format!("an IP {what}"),
    };
    match format {
        Format::Email => "an email address".into(),
        Format::Hostname => "a hostname".into(),
        Format::Ip(v) => version(v, "address"),
        Format::IpWithPrefixLen(v) => version(v, "address with a prefix length, such as 192.168.1.5/24"),
        Format::IpPrefix(v) => version(v, "prefix with no host bits set, such as 192.168.1.0/24"),
        Format::Uri => "an absolute URI".into(),
        Format::UriRef => "a URI or relative reference".into(),
        Format::Address => "a hostname or an IP address".into(),
        Format::Uuid => "a UUID such as 8a9c1e0e-7b1f-4c1e-9f5e-0d2b6a3c4e5f".into(),
        Format::Tuuid => "a UUID of 32 hex digits without dashes".into(),
        Format::HostAndPort => "a host (hostname or IP address) and port, such as example.com:443".into(),
        Format::Ulid => "a ULID".into(),
        Format::ProtobufFqn => "a fully-qualified protobuf name, such as pkg.Message".into(),
        Format::ProtobufDotFqn => "a fully-qualified protobuf name with a leading dot, such as .pkg.Message".into(),
        Format::HeaderName { .. } => "an HTTP header name".into(),
        Format::HeaderValue { .. } => "an HTTP header value".into(),
    }
}

fn byte_format_words(name: &str) -> &'static str {
    match name {
        "ipv4" => "the 4 bytes of an IPv4 address",
        "ipv6" => "the 16 bytes of an IPv6 address",
        "uuid" => "the 16 bytes of a UUID",
        _ => "the 4 or 16 bytes of an IP address",
    }
}

/// The rules of every message of a pool that has any, by full name; or the first rule that
/// cannot be enforced as written (a pattern that does not compile, `string` rules on an
/// `int32` field), named with its field.
pub fn pool_rules(
    pool: &prost_reflect::DescriptorPool,
) -> Result<std::collections::HashMap<String, MessageRules>, String> {
    let mut all = std::collections::HashMap::new();
    let Some(options) = read::Options::of(pool) else {
        return Ok(all);
    };
    for message in pool.all_messages() {
        let rules = read_message_rules(&options, &message)?;
        if !rules.is_empty() {
            all.insert(message.full_name().to_owned(), rules);
        }
    }
    Ok(all)
}

/// The CEL rules that messages reachable from `inputs` carry, which the gate does not
/// enforce: for the load-time log line.
pub fn unenforced_rules<'a>(
    rules: impl Fn(&str) -> Option<&'a MessageRules>,
    inputs: impl Iterator<Item = MessageDescriptor>,
) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut stack: Vec<MessageDescriptor> = inputs.collect();
    let mut found = Vec::new();
    while let Some(message) = stack.pop() {
        if !seen.insert(message.full_name().to_owned()) {
            continue;
        }
        if let Some(message_rules) = rules(message.full_name()) {
            let unchecked = |cel: &&CelRule| !cel.is_enforced();
            found.extend(
                message_rules
                    .cel
                    .iter()
                    .filter(unchecked)
                    .map(|cel| format!("{} ({})", message.full_name(), cel.label())),
            );
            for (field, field_rules) in &message_rules.fields {
                found.extend(
                    field_rules
                        .cel
                        .iter()
                        .filter(unchecked)
                        .map(|cel| format!("{} ({})", field.full_name(), cel.label())),
                );
            }
        }
        stack.extend(message.fields().filter_map(|field| match field.kind() {
            prost_reflect::Kind::Message(inner) => Some(inner),
            _ => None,
        }));
    }
    found
}

#[cfg(test)]
mod tests;

//! The rules of one field, and of each item, key or value of a list or map: `required`,
//! `ignore`, its family's rules and its CEL rules. The gate calls in with each field of a
//! message as given (or left out) after it has read the value into protobuf, so every value
//! here has its type's form already; a violation names the rule and its limit and shows the
//! value. `required` and `ignore` are said and written into schemas here too, beside their
//! checks.

use prost_reflect::{FieldDescriptor, Kind};
use serde_json::{json, Map, Value};

use super::cel::{all_hold, this_default, this_element, this_field, CelRule};
use super::family::Family;
use super::keywords::{numbers_only, tighten};
use super::rule::Rule;
use super::standard::Whole;
use super::subject::{key_value, Subject};
use crate::proto_json::{shown, Form};

/// The rules of one field (or of the items, keys or values of a list or map).
#[derive(Debug, Clone, Default)]
pub struct FieldRules {
    pub required: bool,
    pub ignore: Ignore,
    /// Its family's rules (`string.min_len` …), when it declares a family's.
    pub family: Option<FamilyRules>,
    pub cel: Vec<CelRule>,
    /// `repeated.items`, `map.values`.
    pub items: Option<Box<FieldRules>>,
    /// `map.keys`.
    pub keys: Option<Box<FieldRules>>,
}

/// A family's rules, as one field declares them.
#[derive(Debug, Clone)]
pub struct FamilyRules {
    pub family: Family,
    pub rules: Vec<Rule>,
}

/// When a field's rules are skipped: `buf.validate.Ignore`, by its numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ignore {
    /// `IGNORE_UNSPECIFIED`.
    #[default]
    Never = 0,
    /// `IGNORE_IF_ZERO_VALUE`: when the field holds its zero value (or is unset).
    IfZero = 1,
    /// `IGNORE_ALWAYS`.
    Always = 3,
}

impl Ignore {
    pub fn from_number(number: i32) -> Option<Ignore> {
        [Ignore::Never, Ignore::IfZero, Ignore::Always]
            .into_iter()
            .find(|ignore| *ignore as i32 == number)
    }
}

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

impl Violation<'_> {
    fn here(problem: String) -> Self {
        Violation { place: None, problem }
    }
}

impl FieldRules {
    /// Its family's rules, each with the family that names it.
    pub fn standard(&self) -> impl Iterator<Item = (Family, &Rule)> {
        self.family
            .iter()
            .flat_map(|declared| declared.rules.iter().map(move |rule| (declared.family, rule)))
    }

    /// Whether the gate has anything to check.
    pub fn is_enforced(&self) -> bool {
        self.required
            || self.standard().next().is_some()
            || self.items.is_some()
            || self.keys.is_some()
            || self.cel.iter().any(CelRule::is_enforced)
    }

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
                if let Some((family, rule)) = self.first_broken(&subject) {
                    return Err(Violation::here(rule.broken_by(family, value)));
                }
            }
        }
        all_hold(&self.cel, || this_field(field, value))
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
            let kind = field.kind();
            let empty = if field.is_list() {
                Whole::List {
                    kind: &kind,
                    items: &[],
                }
            } else {
                Whole::Map { pairs: 0 }
            };
            if let Some((family, rule)) = self.standard().find(|(_, rule)| !rule.holds_whole(empty)) {
                return Err(Violation::here(format!(
                    "{}, got nothing: a field left out is empty",
                    rule.broken(family)
                )));
            }
            return all_hold(&self.cel, || this_default(field))
                .map_err(|problem| Violation::here(format!("{problem}, got nothing: a field left out is empty")));
        }
        if field.supports_presence() {
            return Ok(());
        }
        let left_out = || {
            format!(
                "got nothing: a field left out holds its default, {}",
                shown_default(&field.kind())
            )
        };
        if let Some((family, rule)) = self.first_broken(&Subject::default_of(&field.kind())) {
            return Err(Violation::here(format!("{}, {}", rule.broken(family), left_out())));
        }
        all_hold(&self.cel, || this_default(field))
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
        let kind = field.kind();
        let list = Whole::List { kind: &kind, items };
        if let Some((family, rule)) = self.standard().find(|(_, rule)| !rule.holds_whole(list)) {
            return Err(Violation::here(rule.broken_by(family, whole)));
        }
        if let Some(item_rules) = &self.items {
            for (index, item) in items.iter().enumerate() {
                item_rules.check_element(&kind, item).map_err(|problem| Violation {
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
        let map = Whole::Map { pairs: entries.len() };
        if let Some((family, rule)) = self.standard().find(|(_, rule)| !rule.holds_whole(map)) {
            return Err(Violation::here(rule.broken_by(family, whole)));
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
        if let Some((family, rule)) = self.first_broken(&subject) {
            return Err(rule.broken_by(family, value));
        }
        all_hold(&self.cel, || this_element(kind, value)).map_err(|problem| format!("{problem}, got {}", shown(value)))
    }

    /// The first of its family's rules `subject` breaks.
    fn first_broken(&self, subject: &Subject<'_>) -> Option<(Family, &Rule)> {
        self.standard().find(|(_, rule)| !rule.holds(subject))
    }
}

/// The default a field without presence holds, as a refusal shows it.
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

/// `required` on a field without presence, in a schema's description.
pub const REQUIRED_NOT_DEFAULT: &str = "Must not be left at its default value (required).";

/// `required` on one value without presence, as keywords: anything but its default.
pub fn require_non_default(form: &Form, base: &mut Map<String, Value>, extra: &mut Map<String, Value>) {
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

/// The zero value `IGNORE_IF_ZERO_VALUE` lets through, as the schema writes it; `null` when
/// there is none to write.
pub fn zero_of(form: &Form) -> Value {
    match form {
        Form::String => json!(""),
        Form::Int32 { .. } | Form::Int64 { .. } | Form::Float { .. } => json!(0),
        Form::Bool => json!(false),
        Form::Enum(descriptor) => descriptor.get_value(0).map_or(Value::Null, |zero| json!(zero.name())),
        _ => Value::Null,
    }
}

/// A keyword set that only applies when the value is not its zero (`IGNORE_IF_ZERO_VALUE`)
/// becomes `anyOf: [zero, keywords]`; otherwise the keywords join the schema, bounds only
/// tightening it.
pub fn merge(base: &mut Map<String, Value>, extra: Map<String, Value>, unless_zero: bool, zero: Value) {
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

//! Lengths: of a string in characters (`len`, `min_len`, `max_len`) or in bytes (`len_bytes`,
//! `min_bytes`, `max_bytes`), of bytes (`len`, `min_len`, `max_len`), of a list in items
//! (`min_items`, `max_items`) and of a map in pairs (`min_pairs`, `max_pairs`).

use serde_json::{json, Map, Value};

use super::family::Family;
use super::keywords::tighten;
use super::standard::{SchemaFor, StandardRule, Whole};
use super::subject::Subject;
use crate::proto_json::Form;

/// A minimum, a maximum, or both (`len`: both the same), and the rule's name in the .proto.
#[derive(Debug, Clone)]
pub struct Length {
    pub unit: Unit,
    pub min: Option<u64>,
    pub max: Option<u64>,
    pub rule: &'static str,
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

    /// The JSON Schema keywords of a length in this unit, if JSON Schema counts it the same.
    /// Not bytes: `minLength` counts characters.
    pub fn keywords(self) -> Option<(&'static str, &'static str)> {
        match self {
            Unit::Characters => Some(("minLength", "maxLength")),
            Unit::Items => Some(("minItems", "maxItems")),
            Unit::Pairs => Some(("minProperties", "maxProperties")),
            Unit::Bytes => None,
        }
    }
}

impl Length {
    fn fits(&self, length: usize) -> bool {
        let length = length as u64;
        self.min.is_none_or(|min| length >= min) && self.max.is_none_or(|max| length <= max)
    }
}

impl StandardRule for Length {
    fn name(&self, family: Family) -> String {
        match (self.min, self.max) {
            (Some(min), Some(max)) if min == max => format!("{family}.{} = {min}", self.rule),
            (Some(limit), None) | (None, Some(limit)) => format!("{family}.{} = {limit}", self.rule),
            _ => format!("{family}.{}", self.rule),
        }
    }

    fn words(&self) -> String {
        let count = |n: u64| format!("{n} {}", self.unit.name(n));
        let (verb, tail) = match self.unit {
            Unit::Characters | Unit::Bytes => ("be", " long"),
            Unit::Items | Unit::Pairs => ("have", ""),
        };
        match (self.min, self.max) {
            (Some(min), Some(max)) if min == max => format!("must {verb} exactly {}{tail}", count(min)),
            (Some(min), Some(max)) => format!("must {verb} {min} to {}{tail}", count(max)),
            (Some(min), None) => format!("must {verb} at least {}{tail}", count(min)),
            (None, Some(max)) => format!("must {verb} at most {}{tail}", count(max)),
            (None, None) => String::new(),
        }
    }

    fn holds(&self, subject: &Subject<'_>) -> bool {
        match (self.unit, subject) {
            (Unit::Characters, Subject::Text(text)) => self.fits(text.chars().count()),
            (Unit::Bytes, Subject::Text(text)) => self.fits(text.len()),
            (Unit::Bytes, Subject::Bytes(bytes)) => self.fits(bytes.len()),
            _ => true,
        }
    }

    fn holds_whole(&self, whole: Whole<'_>) -> bool {
        match (self.unit, whole) {
            (Unit::Items, Whole::List { items, .. }) => self.fits(items.len()),
            (Unit::Pairs, Whole::Map { pairs }) => self.fits(pairs),
            _ => true,
        }
    }

    fn keyword(&self, schema: SchemaFor<'_>, _base: &mut Map<String, Value>, extra: &mut Map<String, Value>) -> bool {
        let counted_alike = matches!(
            (self.unit, schema),
            (Unit::Characters, SchemaFor::Value(Form::String))
                | (Unit::Items, SchemaFor::List(_))
                | (Unit::Pairs, SchemaFor::Map)
        );
        let Some((min_key, max_key)) = self.unit.keywords().filter(|_| counted_alike) else {
            return false;
        };
        if let Some(min) = self.min {
            tighten(extra, min_key, json!(min), true);
        }
        if let Some(max) = self.max {
            tighten(extra, max_key, json!(max), false);
        }
        true
    }
}

//! Every standard rule, one variant per kind of rule; each kind keeps its name, its words, its
//! check and its schema together in its own file ([`StandardRule`]).

use serde_json::{Map, Value};

use super::collections::Unique;
use super::equal::Equal;
use super::family::Family;
use super::formats::{ByteFormat, Format};
use super::length::Length;
use super::now::Now;
use super::ordered::{Finite, Range};
use super::standard::{SchemaFor, StandardRule, Whole};
use super::subject::Subject;
use super::text::Text;
use super::well_known::{MaskPaths, TypeUrls};

#[derive(Debug, Clone)]
pub enum Rule {
    /// `const`, `in`, `not_in`.
    Equal(Equal),
    /// `gt`, `gte`, `lt`, `lte`.
    Range(Range),
    Finite(Finite),
    /// Characters, bytes, items, pairs.
    Length(Length),
    /// `pattern`, `prefix`, `suffix`, `contains`, `not_contains`.
    Text(Text),
    /// `string.email` …, `string.well_known_regex`.
    Format(Format),
    /// `bytes.ip` …: by length.
    ByteFormat(ByteFormat),
    Unique(Unique),
    /// `lt_now`, `gt_now`, `within`.
    Now(Now),
    /// `any.in`, `any.not_in`.
    TypeUrls(TypeUrls),
    /// `field_mask.in`, `field_mask.not_in`.
    MaskPaths(MaskPaths),
}

impl Rule {
    fn standard(&self) -> &dyn StandardRule {
        match self {
            Rule::Equal(rule) => rule,
            Rule::Range(rule) => rule,
            Rule::Finite(rule) => rule,
            Rule::Length(rule) => rule,
            Rule::Text(rule) => rule,
            Rule::Format(rule) => rule,
            Rule::ByteFormat(rule) => rule,
            Rule::Unique(rule) => rule,
            Rule::Now(rule) => rule,
            Rule::TypeUrls(rule) => rule,
            Rule::MaskPaths(rule) => rule,
        }
    }

    /// `string.min_len = 3`.
    pub fn name(&self, family: Family) -> String {
        self.standard().name(family)
    }

    /// "must be at least 3 characters long".
    pub fn words(&self) -> String {
        self.standard().words()
    }

    pub fn holds(&self, subject: &Subject<'_>) -> bool {
        self.standard().holds(subject)
    }

    pub fn holds_whole(&self, whole: Whole<'_>) -> bool {
        self.standard().holds_whole(whole)
    }

    pub fn keyword(
        &self,
        schema: SchemaFor<'_>,
        base: &mut Map<String, Value>,
        extra: &mut Map<String, Value>,
    ) -> bool {
        self.standard().keyword(schema, base, extra)
    }

    /// The rule broken, in a refusal: "must be at least 3 characters long (string.min_len = 3)".
    pub fn broken(&self, family: Family) -> String {
        format!("{} ({})", self.words(), self.name(family))
    }

    /// The rule broken by `value`: "… (string.min_len = 3), got \"ab\"".
    pub fn broken_by(&self, family: Family, value: &Value) -> String {
        format!("{}, got {}", self.broken(family), self.standard().given(value))
    }

    /// The rule in a schema's description: "Must be at least 3 characters long
    /// (string.min_len = 3)."
    pub fn said(&self, family: Family) -> String {
        format!("{}.", capitalized(&self.broken(family)))
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

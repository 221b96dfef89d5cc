//! What every standard rule (each rule but CEL's) has, written side by side in the file that
//! defines it, so that what the gate checks, what a refusal says and what the schema promises
//! cannot drift apart: its name as the .proto writes it, its words, its check, and its JSON
//! Schema keywords.

use prost_reflect::Kind;
use serde_json::{Map, Value};

use super::family::Family;
use super::subject::Subject;
use crate::proto_json::{shown, Form};

pub trait StandardRule {
    /// The rule's name and limit, as an error names it: `string.min_len = 3`.
    fn name(&self, family: Family) -> String;

    /// What the rule asks of a value: "must be at least 3 characters long".
    fn words(&self) -> String;

    /// Whether one value keeps the rule. A rule about something else (a list's length, say)
    /// is kept.
    fn holds(&self, subject: &Subject<'_>) -> bool;

    /// Whether a whole list or map keeps the rule. A rule about single values is kept.
    fn holds_whole(&self, _whole: Whole<'_>) -> bool {
        true
    }

    /// What a refusal shows of the value that broke the rule.
    fn given(&self, value: &Value) -> String {
        shown(value)
    }

    /// Writes the rule as JSON Schema keywords that mean the same or less: into `extra`
    /// (which `IGNORE_IF_ZERO_VALUE` may set apart), or by narrowing `base`, the schema as the
    /// mapping table writes it. False when only words can say it.
    fn keyword(&self, schema: SchemaFor<'_>, base: &mut Map<String, Value>, extra: &mut Map<String, Value>) -> bool;
}

/// A whole list or map, as its length rules and `unique` see it.
#[derive(Clone, Copy)]
pub enum Whole<'a> {
    List { kind: &'a Kind, items: &'a [Value] },
    Map { pairs: usize },
}

/// What a schema is written for.
#[derive(Clone, Copy)]
pub enum SchemaFor<'a> {
    /// One value of this form (a wrapper's, its scalar's).
    Value(&'a Form),
    /// A whole list, whose items have this form.
    List(&'a Form),
    /// A whole map.
    Map,
}

//! JSON Schema (2020-12) for protobuf messages: objects with their fields as properties,
//! each field's value as the mapping table ([`super::Form`]) writes it.
//!
//! Input and output schemas differ only where the table says outputs carry other forms than
//! inputs should offer (64-bit integers as strings only, unknown enum numbers).
//!
//! How a schema is laid out is decided here, in [`message_schema`], and only here:
//!
//! - **Inline**, what ordinary APIs get: every message is written out where it is used, but a
//!   recursive message, and a message nested deeper than [`MAX_INLINE_DEPTH`], go behind a
//!   `$ref` into `$defs`. Chosen when the inline tree writes at most [`INLINE_FIELD_BUDGET`]
//!   fields (each counted once per place it appears; `Shape` counts them from the
//!   descriptors, without building anything) and its JSON is at most [`MAX_SCHEMA_BYTES`].
//! - **Shared**, otherwise: inline, a message used in several places is written in each, so a
//!   few messages that each hold several fields of the next make a tree exponential in their
//!   number (16 messages of 4 fields each: 4^15 copies of the last). Shared, every message
//!   used more than once in the tree is written once under `$defs` and referenced, so the
//!   schema grows with the number of messages, not with the number of paths to them.
//! - **Refused**: a shared schema whose JSON is still larger than [`MAX_SCHEMA_BYTES`] (an
//!   enum of thousands of values in thousands of fields, say) is [`SchemaTooLarge`], which the
//!   catalog refuses the configuration for. The builder stops as soon as it has written more,
//!   so no descriptor makes it take more time or memory than that much JSON does.

use std::collections::BTreeMap;

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{json, Map, Value};

use super::{Direction, Form, KeyForm};
use crate::docs::Docs;
use crate::proto_json::gate::{is_required, Gate};
use crate::proto_json::rules::{annotate, message_words, FieldRules, MessageRules};
use shape::Shape;

/// How deep messages nest inline before the rest goes behind `$ref`s: enough for real APIs
/// to read as one tree, small enough that no descriptor can exhaust the Wasm stack.
pub const MAX_INLINE_DEPTH: usize = 16;

/// The most fields an inline schema may write, each counted once per place it appears:
/// more than ten times what the largest tree of Switchblade's own protos writes
/// (`buf.validate.FieldRules`, 426 fields, 70 kB of JSON), and few enough to build in
/// milliseconds.
pub const INLINE_FIELD_BUDGET: u64 = 5_000;

/// The most JSON a schema may be, in bytes (1 MiB, some 300,000 tokens): more than most
/// models' context holds, so no schema a client can use is refused, and little enough for
/// every Wasm VM to keep.
pub const MAX_SCHEMA_BYTES: usize = 1024 * 1024;

/// A message whose schema would be larger than [`MAX_SCHEMA_BYTES`], even shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaTooLarge;

/// How a schema writes messages that occur more than once (see the module's comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Inline,
    Shared,
}

/// The schema of `message` as a tool's `inputSchema` or `outputSchema`, laid out as the
/// module's comment says; or [`SchemaTooLarge`]. An input schema states the `buf.validate`
/// rules `gate` holds arguments to, as it read them.
pub fn message_schema(
    message: &MessageDescriptor,
    direction: Direction,
    docs: &Docs,
    gate: &Gate,
) -> Result<Value, SchemaTooLarge> {
    laid_out(message, direction, docs, gate).map(|(schema, _)| schema)
}

/// The schema, and the layout chosen for it: the one place that chooses.
fn laid_out(
    message: &MessageDescriptor,
    direction: Direction,
    docs: &Docs,
    gate: &Gate,
) -> Result<(Value, Layout), SchemaTooLarge> {
    let shape = Shape::of(message);
    if shape.inline_fields <= INLINE_FIELD_BUDGET {
        // Past the byte bound inline, the shared layout may still fit.
        if let Ok(schema) = build(message, direction, docs, gate, &shape, Layout::Inline) {
            return Ok((schema, Layout::Inline));
        }
    }
    let schema = build(message, direction, docs, gate, &shape, Layout::Shared)?;
    Ok((schema, Layout::Shared))
}

fn build(
    message: &MessageDescriptor,
    direction: Direction,
    docs: &Docs,
    gate: &Gate,
    shape: &Shape,
    layout: Layout,
) -> Result<Value, SchemaTooLarge> {
    let mut builder = Builder {
        direction,
        docs,
        gate,
        shape,
        layout,
        depth: 0,
        defs: BTreeMap::new(),
        pending: Vec::new(),
        written: 0,
    };
    // The root follows the same mapping as a field (a Timestamp is a string, wherever it is),
    // but is always written out, even when it is recursive.
    let mut root = match Form::of(&Kind::Message(message.clone())) {
        Form::Message(message) => builder.object(&message)?,
        form => form.scalar_schema(direction),
    };
    // Messages behind a `$ref` are built here, one at a time, so the stack stays shallow.
    while let Some(pending) = builder.pending.pop() {
        builder.depth = 0;
        let schema = builder.object(&pending)?;
        builder.defs.insert(pending.full_name().to_owned(), schema);
    }
    if !builder.defs.is_empty() {
        if let Value::Object(map) = &mut root {
            map.insert("$defs".into(), Value::Object(builder.defs.into_iter().collect()));
        }
    }
    // What the builder counted is less than the whole; this is the bound itself.
    if json_len(&root) > MAX_SCHEMA_BYTES {
        return Err(SchemaTooLarge);
    }
    Ok(root)
}

/// The skeleton of every message's schema, which the builder counts as it writes one.
const OBJECT_SKELETON: &str = r#"{"type":"object","properties":{},"additionalProperties":false}"#;
/// What a description adds to a schema, besides its text.
const DESCRIPTION_KEY: &str = r#","description":"""#;

struct Builder<'a> {
    direction: Direction,
    docs: &'a Docs,
    /// Holds the `buf.validate` rules that input schemas state.
    gate: &'a Gate,
    shape: &'a Shape,
    layout: Layout,
    /// Messages inlined around the one being built.
    depth: usize,
    /// Schemas referenced by `$ref`: messages in a cycle, nested deeper than
    /// `MAX_INLINE_DEPTH`, or (shared) used more than once. `Null` until built.
    defs: BTreeMap<String, Value>,
    /// Referenced messages still to build.
    pending: Vec<MessageDescriptor>,
    /// Bytes of JSON written so far, counted as objects and properties are made. Only what
    /// the final text holds is counted, so passing the bound here means the schema passes
    /// it, and the build stops there; what is not counted is a few bytes a field.
    written: usize,
}

impl<'a> Builder<'a> {
    fn object(&mut self, message: &MessageDescriptor) -> Result<Value, SchemaTooLarge> {
        self.count(OBJECT_SKELETON.len())?;
        let mut properties = Map::new();
        let mut required = Vec::new();
        // buf.validate rules constrain what goes in; answers are rendered as they come.
        let rules = match self.direction {
            Direction::Input => self.rules_of(message),
            Direction::Output => None,
        };
        for field in message.fields() {
            let mut schema = self.field(&field)?;
            let field_rules = rules.and_then(|rules| rules.field(&field));
            let rule_words = match field_rules {
                Some(field_rules) => annotate(&field, field_rules, &mut schema),
                None => Vec::new(),
            };
            let description = join_words(self.field_description(&field), &rule_words);
            let mut described = None;
            if let Some(description) = description {
                if let Value::Object(map) = &mut schema {
                    let length = description.len();
                    let replaced = map.insert("description".into(), Value::String(description));
                    described = Some((length, replaced));
                }
            }
            self.count_property(&field, &schema, described)?;
            properties.insert(field.name().to_owned(), schema);
            // A field whose default breaks its rules must be given, whatever it is marked.
            let default_fails = field_rules.is_some_and(|rules| rules.check_absent(&field).is_err());
            if self.is_required(&field, field_rules) || default_fails {
                required.push(Value::String(field.name().to_owned()));
            }
        }
        let mut schema = Map::new();
        schema.insert("type".into(), json!("object"));
        let message_words = rules.map_or_else(Vec::new, message_words);
        if let Some(description) = join_words(self.docs.message(message).map(str::to_owned), &message_words) {
            self.count(DESCRIPTION_KEY.len() + description.len())?;
            schema.insert("description".into(), json!(description));
        }
        schema.insert("properties".into(), Value::Object(properties));
        if !required.is_empty() {
            schema.insert("required".into(), Value::Array(required));
        }
        schema.insert("additionalProperties".into(), json!(false));
        Ok(Value::Object(schema))
    }

    /// Counts a finished property, `"name":` and its schema, less what the objects and `$ref`s
    /// inside it counted as they were built. `described`: the length of the description put
    /// in, and the one it replaced (a message's own, on an inlined message).
    fn count_property(
        &mut self,
        field: &FieldDescriptor,
        schema: &Value,
        described: Option<(usize, Option<Value>)>,
    ) -> Result<(), SchemaTooLarge> {
        let key = field.name().len() + r#""":"#.len();
        if written_message(field).is_none() {
            return self.count(key + json_len(schema));
        }
        // Around the message: its description (counted again only if it stays), and a map's
        // key names, which rules may list at length. The rest is a few bytes a field.
        let mut around = key + schema.get("propertyNames").map_or(0, json_len);
        if let Some((length, replaced)) = described {
            around += DESCRIPTION_KEY.len() + length;
            if let Some(Value::String(replaced)) = replaced {
                self.written = self.written.saturating_sub(DESCRIPTION_KEY.len() + replaced.len());
            }
        }
        self.count(around)
    }

    /// Counts `bytes` more of the schema's JSON; past the bound, the build stops.
    fn count(&mut self, bytes: usize) -> Result<(), SchemaTooLarge> {
        self.written = self.written.saturating_add(bytes);
        if self.written > MAX_SCHEMA_BYTES {
            return Err(SchemaTooLarge);
        }
        Ok(())
    }

    /// The rules the gate holds `message` to, if it has any.
    fn rules_of(&self, message: &MessageDescriptor) -> Option<&'a MessageRules> {
        let gate: &'a Gate = self.gate;
        gate.rules(message.full_name())
    }

    /// Input: fields a request must carry. Output: fields every response carries, which
    /// are those without presence, since responses are rendered with their defaults.
    fn is_required(&self, field: &FieldDescriptor, rules: Option<&FieldRules>) -> bool {
        match self.direction {
            Direction::Input => is_required(field.parent_pool(), field, rules),
            Direction::Output => {
                !field.supports_presence() || field.cardinality() == prost_reflect::Cardinality::Required
            }
        }
    }

    fn field_description(&self, field: &FieldDescriptor) -> Option<String> {
        let comment = self.docs.field(field);
        let oneof = field
            .containing_oneof()
            .filter(|oneof| !oneof.is_synthetic())
            .map(|oneof| {
                let members: Vec<String> = oneof.fields().map(|f| f.name().to_owned()).collect();
                format!(
                    "Part of oneof `{}`: set at most one of {}.",
                    oneof.name(),
                    members.join(", ")
                )
            });
        match (comment, oneof) {
            (Some(comment), Some(oneof)) => Some(format!("{comment} {oneof}")),
            (Some(comment), None) => Some(comment.to_owned()),
            (None, oneof) => oneof,
        }
    }

    /// A field's schema. Which message it writes as an object is [`written_message`]'s rule.
    fn field(&mut self, field: &FieldDescriptor) -> Result<Value, SchemaTooLarge> {
        Ok(if field.is_map() {
            let Kind::Message(entry) = field.kind() else {
                return Ok(json!({"type": "object"}));
            };
            let mut schema = json!({
                "type": "object",
                "additionalProperties": self.kind(&entry.map_entry_value_field().kind())?,
            });
            let keys = KeyForm::of(&entry.map_entry_key_field().kind());
            if let (Some(names), Value::Object(map)) = (keys.schema(), &mut schema) {
                map.insert("propertyNames".into(), names);
            }
            schema
        } else if field.is_list() {
            json!({"type": "array", "items": self.kind(&field.kind())?})
        } else {
            self.kind(&field.kind())?
        })
    }

    fn kind(&mut self, kind: &Kind) -> Result<Value, SchemaTooLarge> {
        match Form::of(kind) {
            Form::Message(message) => self.message(&message),
            // Counted with its property, once rules have shaped it.
            form => Ok(form.scalar_schema(self.direction)),
        }
    }

    fn message(&mut self, message: &MessageDescriptor) -> Result<Value, SchemaTooLarge> {
        if self.depth < MAX_INLINE_DEPTH && self.shape.may_inline(message, self.layout) {
            self.depth += 1;
            let schema = self.object(message);
            self.depth -= 1;
            return schema;
        }
        let name = message.full_name().to_owned();
        if !self.defs.contains_key(&name) {
            self.defs.insert(name.clone(), Value::Null);
            self.pending.push(message.clone());
        }
        let reference = json!({"$ref": format!("#/$defs/{name}")});
        self.count(json_len(&reference))?;
        Ok(reference)
    }
}

/// The message a field's schema writes as an object, as [`Builder::field`] builds it: the
/// field's own message, a list's items' or a map's values'; none for other kinds and for
/// well-known types, which the table writes as values.
fn written_message(field: &FieldDescriptor) -> Option<MessageDescriptor> {
    let kind = match field.kind() {
        Kind::Message(entry) if field.is_map() => entry.map_entry_value_field().kind(),
        kind => kind,
    };
    match Form::of(&kind) {
        Form::Message(message) => Some(message),
        _ => None,
    }
}

/// A description, then the words of its rules.
fn join_words(description: Option<String>, words: &[String]) -> Option<String> {
    if words.is_empty() {
        return description;
    }
    let rules = words.join(" ");
    Some(match description {
        Some(description) => format!("{description} {rules}"),
        None => rules,
    })
}

/// The length of `value` as JSON text, without writing it anywhere.
fn json_len(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Counting cannot fail; if it did, the value would count as too large.
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => usize::MAX,
    }
}

mod shape;

#[cfg(test)]
pub(crate) mod tests;

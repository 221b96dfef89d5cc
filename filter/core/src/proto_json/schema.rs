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

use std::collections::{BTreeMap, HashMap};

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{json, Map, Value};

use super::{Direction, Form, KeyForm};
use crate::docs::Docs;
use crate::proto_json::gate::{is_required, Gate};
use crate::proto_json::rules::{annotate, message_words, FieldRules, MessageRules};

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

/// The tree of messages under a schema's root, read from the descriptors without building
/// anything: which messages are recursive, how often each is used, and how many fields the
/// inline layout writes. Linear in the messages and fields reachable from the root, times
/// the inline depth at most.
struct Shape {
    /// Every message reachable from the root (index 0), by full name.
    index: HashMap<String, usize>,
    /// Per message: whether it reaches itself through its fields.
    recursive: Vec<bool>,
    /// Per message: how many places in the tree write it (each written message's fields
    /// counted once; the root's twice when it is recursive, since it is then also a `$def`).
    uses: Vec<usize>,
    /// How many fields the inline layout writes, saturating.
    inline_fields: u64,
}

impl Shape {
    fn of(root: &MessageDescriptor) -> Shape {
        // A well-known root (a Timestamp, say) is written as a value, with no objects.
        if !matches!(Form::of(&Kind::Message(root.clone())), Form::Message(_)) {
            return Shape {
                index: HashMap::new(),
                recursive: Vec::new(),
                uses: Vec::new(),
                inline_fields: 0,
            };
        }
        let mut index = HashMap::from([(root.full_name().to_owned(), 0)]);
        let mut messages = vec![root.clone()];
        let mut children = Vec::new();
        let mut field_counts = Vec::new();
        // Breadth first: `messages` grows as new ones are found.
        while let Some(message) = messages.get(children.len()).cloned() {
            let mut written = Vec::new();
            let mut fields = 0u64;
            for field in message.fields() {
                fields += 1;
                if let Some(child) = written_message(&field) {
                    let id = match index.get(child.full_name()) {
                        Some(&known) => known,
                        None => {
                            let id = messages.len();
                            index.insert(child.full_name().to_owned(), id);
                            messages.push(child);
                            id
                        }
                    };
                    written.push(id);
                }
            }
            children.push(written);
            field_counts.push(fields);
        }
        let recursive = in_cycles(&children);
        let mut uses = vec![0usize; children.len()];
        let root_writes = usize::from(recursive.first().copied().unwrap_or(false));
        for (parent, written) in children.iter().enumerate() {
            for &child in written {
                if let Some(count) = uses.get_mut(child) {
                    *count += if parent == 0 { 1 + root_writes } else { 1 };
                }
            }
        }
        let inline_fields = inline_fields_of(&children, &recursive, &field_counts);
        Shape {
            index,
            recursive,
            uses,
            inline_fields,
        }
    }

    /// Whether `message` may be written where it is used (within the depth, which the builder
    /// keeps): not when it is recursive, nor, shared, when it is used more than once.
    fn may_inline(&self, message: &MessageDescriptor, layout: Layout) -> bool {
        // Every message the builder meets is in the tree; one that were not goes behind a `$ref`.
        let Some(&id) = self.index.get(message.full_name()) else {
            return false;
        };
        let recursive = self.recursive.get(id).copied().unwrap_or(true);
        let uses = self.uses.get(id).copied().unwrap_or(usize::MAX);
        !recursive && (layout == Layout::Inline || uses <= 1)
    }
}

/// Which messages reach themselves through their fields: those with a field of their own type,
/// or in a strongly connected component of more than one (Tarjan's algorithm, iteratively, so
/// a long chain of messages does not deepen the stack).
fn in_cycles(children: &[Vec<usize>]) -> Vec<bool> {
    const UNSEEN: usize = usize::MAX;
    let count = children.len();
    let mut order = vec![UNSEEN; count];
    let mut low = vec![0; count];
    let mut on_stack = vec![false; count];
    let mut stack = Vec::new();
    let mut recursive = vec![false; count];
    let mut next_order = 0;
    for start in 0..count {
        if order[start] != UNSEEN {
            continue;
        }
        // (message, how many of its children have been looked at)
        let mut walk = vec![(start, 0usize)];
        order[start] = next_order;
        low[start] = next_order;
        next_order += 1;
        stack.push(start);
        on_stack[start] = true;
        while let Some((node, position)) = walk.last_mut() {
            let node = *node;
            if let Some(&child) = children[node].get(*position) {
                *position += 1;
                if child == node {
                    recursive[node] = true;
                } else if order[child] == UNSEEN {
                    order[child] = next_order;
                    low[child] = next_order;
                    next_order += 1;
                    stack.push(child);
                    on_stack[child] = true;
                    walk.push((child, 0));
                } else if on_stack[child] {
                    low[node] = low[node].min(order[child]);
                }
                continue;
            }
            walk.pop();
            if let Some(&(parent, _)) = walk.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if low[node] == order[node] {
                let mut component = Vec::new();
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    for member in component {
                        recursive[member] = true;
                    }
                }
            }
        }
    }
    recursive
}

/// How many fields the inline layout writes: the root's tree, and the tree of each message
/// behind a `$ref` (recursive, or deeper than [`MAX_INLINE_DEPTH`]), which is built once
/// from depth 0. Memoized per message and depth, so it is linear in the tree's messages and
/// fields however many paths lead to each; saturating.
fn inline_fields_of(children: &[Vec<usize>], recursive: &[bool], field_counts: &[u64]) -> u64 {
    let levels = MAX_INLINE_DEPTH + 1;
    let inlined = |child: usize, depth: usize| depth < MAX_INLINE_DEPTH && !recursive[child];
    // Which messages the builder puts behind a `$ref`: walk (message, depth) once each.
    let mut seen = vec![false; children.len() * levels];
    let mut referenced = vec![false; children.len()];
    let mut walk = vec![(0usize, 0usize)];
    seen[0] = true;
    while let Some((node, depth)) = walk.pop() {
        for &child in &children[node] {
            let next = if inlined(child, depth) {
                (child, depth + 1)
            } else if !referenced[child] {
                referenced[child] = true;
                (child, 0)
            } else {
                continue;
            };
            let slot = next.0 * levels + next.1;
            if !seen[slot] {
                seen[slot] = true;
                walk.push(next);
            }
        }
    }
    let mut memo: Vec<Option<u64>> = vec![None; children.len() * levels];
    let mut total = tree_fields(0, 0, children, &inlined, field_counts, &mut memo);
    for (message, _) in referenced.iter().enumerate().filter(|(_, referenced)| **referenced) {
        total = total.saturating_add(tree_fields(message, 0, children, &inlined, field_counts, &mut memo));
    }
    total
}

/// The fields of `message`'s object written at `depth`, with those of the objects inlined in
/// it. Recurses at most [`MAX_INLINE_DEPTH`] deep.
fn tree_fields(
    message: usize,
    depth: usize,
    children: &[Vec<usize>],
    inlined: &impl Fn(usize, usize) -> bool,
    field_counts: &[u64],
    memo: &mut [Option<u64>],
) -> u64 {
    let slot = message * (MAX_INLINE_DEPTH + 1) + depth;
    if let Some(known) = memo[slot] {
        return known;
    }
    let mut total = field_counts[message];
    for &child in &children[message] {
        if inlined(child, depth) {
            total = total.saturating_add(tree_fields(child, depth + 1, children, inlined, field_counts, memo));
        }
    }
    memo[slot] = Some(total);
    total
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::descriptors::embedded_pool;
    use prost_reflect::DescriptorPool;
    use prost_types::field_descriptor_proto::{Label, Type};
    use prost_types::source_code_info::Location;
    use prost_types::{
        DescriptorProto, EnumDescriptorProto, EnumValueDescriptorProto, FieldDescriptorProto, FileDescriptorProto,
        MethodDescriptorProto, ServiceDescriptorProto, SourceCodeInfo,
    };

    fn schema(name: &str, direction: Direction) -> Value {
        let pool = embedded_pool().unwrap();
        let docs = Docs::from_pool(&pool);
        let gate = Gate::build(&pool).unwrap();
        message_schema(&pool.get_message_by_name(name).unwrap(), direction, &docs, &gate).unwrap()
    }

    #[test]
    fn int32_field_is_a_bounded_integer() {
        let schema = schema("demo.users.v1.GetUserRequest", Direction::Input);
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        let user_id = &schema["properties"]["user_id"];
        assert_eq!(user_id["type"], "integer");
        assert_eq!(user_id["minimum"], i32::MIN);
        assert_eq!(user_id["maximum"], i32::MAX);
        assert!(user_id["description"].as_str().unwrap().contains("32-bit integer"));
        assert!(schema.get("required").is_none());
    }

    #[test]
    fn nested_messages_enums_maps_and_well_known_types() {
        let schema = schema("demo.catalog.v1.Item", Direction::Input);
        let properties = &schema["properties"];
        assert_eq!(properties["id"]["type"], json!(["string", "integer"]));
        assert_eq!(properties["id"]["minimum"], i64::MIN);
        assert_eq!(properties["category"]["enum"][1], "CATEGORY_HARDWARE");
        assert_eq!(properties["price"]["properties"]["currency_code"]["type"], "string");
        assert_eq!(properties["price"]["additionalProperties"], false);
        assert_eq!(properties["tags"]["items"]["type"], "string");
        assert_eq!(properties["attributes"]["additionalProperties"]["type"], "string");
        assert_eq!(properties["updated_at"]["format"], "date-time");
        assert_eq!(schema["description"], "A product in the catalog.");
    }

    #[test]
    fn output_requires_fields_without_presence_and_tolerates_unknown_enum_numbers() {
        let schema = schema("demo.catalog.v1.Item", Direction::Output);
        let required: Vec<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            required,
            ["id", "name", "description", "category", "stock", "tags", "attributes"]
        );
        assert_eq!(schema["properties"]["category"]["anyOf"][1]["type"], "integer");
    }

    #[test]
    fn proto3_optional_is_not_required_on_output() {
        let schema = schema("demo.catalog.v1.SearchFilters", Direction::Output);
        let required = schema["required"].as_array().unwrap();
        assert!(!required.contains(&json!("max_price_minor")));
        assert!(required.contains(&json!("category")));
    }

    /// The package of the pools these tests build.
    pub(crate) const PACKAGE: &str = "shape.v1";
    /// Their service, with one method per message in [`pool`]'s `methods`.
    pub(crate) const SERVICE: &str = "shape.v1.Shapes";

    fn field(name: &str, number: usize, kind: Type, type_name: Option<&str>) -> FieldDescriptorProto {
        FieldDescriptorProto {
            name: Some(name.into()),
            number: Some(i32::try_from(number).unwrap()),
            label: Some(Label::Optional as i32),
            r#type: Some(kind as i32),
            type_name: type_name.map(|name| format!(".{PACKAGE}.{name}")),
            json_name: Some(name.into()),
            ..FieldDescriptorProto::default()
        }
    }

    fn message_of(name: &str, field: Vec<FieldDescriptorProto>) -> DescriptorProto {
        DescriptorProto {
            name: Some(name.into()),
            field,
            ..DescriptorProto::default()
        }
    }

    /// One file of `messages`, `enums`, comments (by descriptor path) and a service whose
    /// methods take and return the messages named in `methods`.
    fn pool(
        messages: Vec<DescriptorProto>,
        enums: Vec<EnumDescriptorProto>,
        comments: Vec<(Vec<i32>, String)>,
        methods: &[&str],
    ) -> DescriptorPool {
        let method = |name: &&str| MethodDescriptorProto {
            name: Some(name.to_string()),
            input_type: Some(format!(".{PACKAGE}.{name}")),
            output_type: Some(format!(".{PACKAGE}.{name}")),
            ..MethodDescriptorProto::default()
        };
        let location = |(path, text): (Vec<i32>, String)| Location {
            path,
            leading_comments: Some(text),
            ..Location::default()
        };
        let file = FileDescriptorProto {
            name: Some("shape/v1/shape.proto".into()),
            package: Some(PACKAGE.into()),
            message_type: messages,
            enum_type: enums,
            service: vec![ServiceDescriptorProto {
                name: Some("Shapes".into()),
                method: methods.iter().map(method).collect(),
                ..ServiceDescriptorProto::default()
            }],
            source_code_info: Some(SourceCodeInfo {
                location: comments.into_iter().map(location).collect(),
            }),
            syntax: Some("proto3".into()),
            ..FileDescriptorProto::default()
        };
        let mut pool = DescriptorPool::new();
        pool.add_file_descriptor_proto(file).unwrap();
        pool
    }

    /// `Level0` … `Level{levels - 1}`, each with `fan` fields of the next (`a`, `b`, …); the
    /// last holds a string. Inline, the tree has `fan^(levels - 1)` copies of the last.
    /// Method `Level0` takes and returns the first.
    pub(crate) fn fanned(levels: usize, fan: usize) -> DescriptorPool {
        let messages = (0..levels)
            .map(|level| {
                let fields = if level + 1 < levels {
                    let next = format!("Level{}", level + 1);
                    (0..fan)
                        .map(|index| {
                            let name = match u8::try_from(index) {
                                Ok(small) if small < 26 => char::from(b'a' + small).to_string(),
                                _ => format!("f{index}"),
                            };
                            field(&name, index + 1, Type::Message, Some(&next))
                        })
                        .collect()
                } else {
                    vec![field("value", 1, Type::String, None)]
                };
                message_of(&format!("Level{level}"), fields)
            })
            .collect();
        pool(messages, Vec::new(), Vec::new(), &["Level0"])
    }

    /// `Chain0` … `Chain{length - 1}`, each with a string and the next.
    fn chain(length: usize) -> DescriptorPool {
        let messages = (0..length)
            .map(|link| {
                let mut fields = vec![field("value", 1, Type::String, None)];
                if link + 1 < length {
                    fields.push(field("next", 2, Type::Message, Some(&format!("Chain{}", link + 1))));
                }
                message_of(&format!("Chain{link}"), fields)
            })
            .collect();
        pool(messages, Vec::new(), Vec::new(), &[])
    }

    /// `Huge`: `fields` fields of an enum of `values` values, whose schema lists every name
    /// (about 15 bytes a value).
    pub(crate) fn enum_heavy(fields: usize, values: usize) -> DescriptorPool {
        let value = |number: usize| EnumValueDescriptorProto {
            name: Some(format!("MANY_VALUE_{number:05}")),
            number: Some(i32::try_from(number).unwrap()),
            ..EnumValueDescriptorProto::default()
        };
        let many = EnumDescriptorProto {
            name: Some("Many".into()),
            value: (0..values).map(value).collect(),
            ..EnumDescriptorProto::default()
        };
        let huge = message_of(
            "Huge",
            (0..fields)
                .map(|index| field(&format!("f{index}"), index + 1, Type::Enum, Some("Many")))
                .collect(),
        );
        pool(vec![huge], vec![many], Vec::new(), &["Huge"])
    }

    fn message(pool: &DescriptorPool, name: &str) -> MessageDescriptor {
        pool.get_message_by_name(&format!("{PACKAGE}.{name}")).unwrap()
    }

    fn laid_out_in(pool: &DescriptorPool, name: &str, direction: Direction) -> Result<(Value, Layout), SchemaTooLarge> {
        laid_out(
            &message(pool, name),
            direction,
            &Docs::from_pool(pool),
            &Gate::build(pool).unwrap(),
        )
    }

    fn def_names(schema: &Value) -> Vec<&str> {
        schema["$defs"]
            .as_object()
            .map(|defs| defs.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// The fields written in a schema: the properties of every message's object in it.
    fn written_fields(schema: &Value) -> u64 {
        match schema {
            Value::Object(map) => {
                let own = match (map.get("properties"), map.get("additionalProperties")) {
                    (Some(Value::Object(properties)), Some(Value::Bool(false))) => properties.len() as u64,
                    _ => 0,
                };
                own + map.values().map(written_fields).sum::<u64>()
            }
            Value::Array(items) => items.iter().map(written_fields).sum(),
            _ => 0,
        }
    }

    #[test]
    fn an_exponential_tree_is_written_shared_each_message_once() {
        // 16 messages of 4 fields each: inline, 4^15 copies of the last, which never finished.
        let pool = fanned(16, 4);
        let root = message(&pool, "Level0");
        let expected: u64 = (0..15).map(|level| 4 * 4u64.pow(level)).sum::<u64>() + 4u64.pow(15);
        assert_eq!(Shape::of(&root).inline_fields, expected);
        assert!(expected > INLINE_FIELD_BUDGET);
        for direction in [Direction::Input, Direction::Output] {
            let (schema, layout) = laid_out_in(&pool, "Level0", direction).unwrap();
            assert_eq!(layout, Layout::Shared);
            let levels: Vec<String> = (1..16).map(|level| format!("{PACKAGE}.Level{level}")).collect();
            let mut defined = def_names(&schema);
            defined.sort_by_key(|name| name.trim_start_matches("shape.v1.Level").parse::<usize>().unwrap());
            assert_eq!(defined, levels);
            for name in ["a", "b", "c", "d"] {
                assert_eq!(schema["properties"][name], json!({"$ref": "#/$defs/shape.v1.Level1"}));
                assert_eq!(
                    schema["$defs"]["shape.v1.Level14"]["properties"][name],
                    json!({"$ref": "#/$defs/shape.v1.Level15"})
                );
            }
            assert_eq!(
                schema["$defs"]["shape.v1.Level15"]["properties"]["value"]["type"],
                "string"
            );
            // Each message once: 61 fields, a few kilobytes.
            assert_eq!(written_fields(&schema), 61);
            assert!(json_len(&schema) < 8_000, "{} bytes", json_len(&schema));
            assert!(jsonschema::meta::is_valid(&schema));
            let validator = jsonschema::draft202012::new(&schema).unwrap();
            // Level14, whose fields are Level15s (which, as output, always carry `value`).
            let mut deep = json!({"a": {"value": "leaf"}, "d": {"value": ""}});
            for _ in 2..16 {
                deep = json!({"a": deep, "d": {}});
            }
            assert!(validator.is_valid(&deep));
            deep["a"]["a"]["d"]["unknown"] = json!(1);
            assert!(!validator.is_valid(&deep));
        }
    }

    #[test]
    fn forty_levels_and_a_saturated_count_build_as_fast() {
        let pool = fanned(40, 4);
        assert!(Shape::of(&message(&pool, "Level0")).inline_fields > INLINE_FIELD_BUDGET);
        let (schema, layout) = laid_out_in(&pool, "Level0", Direction::Input).unwrap();
        assert_eq!(layout, Layout::Shared);
        assert_eq!(def_names(&schema).len(), 39);
        assert_eq!(written_fields(&schema), 4 * 39 + 1);
        // 200^16 copies inline: more than 64 bits count.
        let pool = fanned(17, 200);
        assert_eq!(Shape::of(&message(&pool, "Level0")).inline_fields, u64::MAX);
        let (schema, layout) = laid_out_in(&pool, "Level0", Direction::Output).unwrap();
        assert_eq!(layout, Layout::Shared);
        assert_eq!(written_fields(&schema), 200 * 16 + 1);
    }

    #[test]
    fn the_count_is_what_the_inline_layout_writes() {
        // Recursive messages, maps, lists, well-known types (the embedded protos), a chain
        // cut at MAX_INLINE_DEPTH, and a tree with many paths to each message.
        let embedded = embedded_pool().unwrap();
        let mut cases: Vec<(DescriptorPool, MessageDescriptor)> = embedded
            .all_messages()
            .map(|message| (embedded.clone(), message))
            .collect();
        for (pool, name) in [(chain(40), "Chain0"), (fanned(5, 3), "Level0")] {
            let root = message(&pool, name);
            cases.push((pool, root));
        }
        for (pool, root) in cases {
            let shape = Shape::of(&root);
            let docs = Docs::from_pool(&pool);
            let gate = Gate::build(&pool).unwrap();
            let schema = build(&root, Direction::Input, &docs, &gate, &shape, Layout::Inline).unwrap();
            assert_eq!(shape.inline_fields, written_fields(&schema), "{}", root.full_name());
        }
        // The chain goes on behind a `$ref` every 16 messages, inline.
        let pool = chain(40);
        let (schema, layout) = laid_out_in(&pool, "Chain0", Direction::Input).unwrap();
        assert_eq!(layout, Layout::Inline);
        assert_eq!(def_names(&schema), ["shape.v1.Chain17", "shape.v1.Chain34"]);
    }

    /// `Root`: `BUDGET / 2` fields of `Leaf` (one field each) and the rest as strings, plus
    /// `extra` more strings.
    fn at_budget(extra: usize) -> DescriptorPool {
        let leaves = usize::try_from(INLINE_FIELD_BUDGET / 2).unwrap();
        let strings = usize::try_from(INLINE_FIELD_BUDGET % 2).unwrap() + extra;
        let mut fields: Vec<FieldDescriptorProto> = (0..leaves)
            .map(|index| field(&format!("leaf{index}"), index + 1, Type::Message, Some("Leaf")))
            .collect();
        fields.extend((0..strings).map(|index| field(&format!("text{index}"), leaves + index + 1, Type::String, None)));
        let leaf = message_of("Leaf", vec![field("on", 1, Type::Bool, None)]);
        pool(vec![message_of("Root", fields), leaf], Vec::new(), Vec::new(), &[])
    }

    #[test]
    fn the_budget_is_the_last_count_written_inline() {
        let pool = at_budget(0);
        assert_eq!(Shape::of(&message(&pool, "Root")).inline_fields, INLINE_FIELD_BUDGET);
        let (schema, layout) = laid_out_in(&pool, "Root", Direction::Input).unwrap();
        assert_eq!(layout, Layout::Inline);
        assert!(schema.get("$defs").is_none());
        assert_eq!(schema["properties"]["leaf0"]["properties"]["on"]["type"], "boolean");

        let pool = at_budget(1);
        assert_eq!(
            Shape::of(&message(&pool, "Root")).inline_fields,
            INLINE_FIELD_BUDGET + 1
        );
        let (schema, layout) = laid_out_in(&pool, "Root", Direction::Input).unwrap();
        assert_eq!(layout, Layout::Shared);
        assert_eq!(def_names(&schema), ["shape.v1.Leaf"]);
        assert_eq!(schema["properties"]["leaf0"], json!({"$ref": "#/$defs/shape.v1.Leaf"}));
        // A message used once stays where it is, shared or not.
        assert_eq!(schema["properties"]["text0"]["type"], "string");
    }

    #[test]
    fn a_shared_message_used_once_stays_inline_and_a_recursive_root_shares_its_children() {
        // Root { Once once; Twice x; Twice y; Root again; } with the tree past the budget.
        let mut root_fields = vec![
            field("once", 1, Type::Message, Some("Once")),
            field("x", 2, Type::Message, Some("Twice")),
            field("y", 3, Type::Message, Some("Twice")),
            field("big", 4, Type::Message, Some("Level0")),
        ];
        let fanned = fanned(16, 4);
        let mut messages: Vec<DescriptorProto> = fanned
            .get_file_by_name("shape/v1/shape.proto")
            .unwrap()
            .file_descriptor_proto()
            .message_type
            .clone();
        messages.push(message_of("Once", vec![field("text", 1, Type::String, None)]));
        messages.push(message_of("Twice", vec![field("number", 1, Type::Int32, None)]));
        messages.push(message_of("Root", root_fields.clone()));
        let plain = pool(messages.clone(), Vec::new(), Vec::new(), &[]);
        let (schema, layout) = laid_out_in(&plain, "Root", Direction::Input).unwrap();
        assert_eq!(layout, Layout::Shared);
        assert_eq!(schema["properties"]["once"]["properties"]["text"]["type"], "string");
        assert_eq!(schema["properties"]["x"], json!({"$ref": "#/$defs/shape.v1.Twice"}));
        assert_eq!(
            schema["properties"]["big"]["properties"]["a"],
            json!({"$ref": "#/$defs/shape.v1.Level1"})
        );
        assert!(!def_names(&schema).contains(&"shape.v1.Once"));

        // A recursive root is written twice (as the root and under `$defs`): what it holds
        // once is shared, so that nothing is written twice.
        root_fields.push(field("again", 5, Type::Message, Some("Root")));
        let last = messages.len() - 1;
        messages[last] = message_of("Root", root_fields);
        let recursive = pool(messages, Vec::new(), Vec::new(), &[]);
        let (schema, layout) = laid_out_in(&recursive, "Root", Direction::Input).unwrap();
        assert_eq!(layout, Layout::Shared);
        assert_eq!(schema["properties"]["again"], json!({"$ref": "#/$defs/shape.v1.Root"}));
        assert_eq!(schema["properties"]["once"], json!({"$ref": "#/$defs/shape.v1.Once"}));
        assert_eq!(
            schema["$defs"]["shape.v1.Root"]["properties"]["once"],
            json!({"$ref": "#/$defs/shape.v1.Once"})
        );
    }

    #[test]
    fn an_inline_schema_past_the_byte_bound_is_written_shared() {
        // 8 fields of a message with a 200 kB comment: few fields, 1.6 MB inline.
        let fields = (0..8)
            .map(|index| field(&format!("f{index}"), index + 1, Type::Message, Some("Wordy")))
            .collect();
        let comment = "word ".repeat(40_000);
        let pool = pool(
            vec![
                message_of("Root", fields),
                message_of("Wordy", vec![field("on", 1, Type::Bool, None)]),
            ],
            Vec::new(),
            vec![(vec![4, 1], comment)],
            &[],
        );
        assert_eq!(Shape::of(&message(&pool, "Root")).inline_fields, 16);
        let (schema, layout) = laid_out_in(&pool, "Root", Direction::Input).unwrap();
        assert_eq!(layout, Layout::Shared);
        assert_eq!(def_names(&schema), ["shape.v1.Wordy"]);
        let length = json_len(&schema);
        assert!((200_000..MAX_SCHEMA_BYTES).contains(&length), "{length}");
    }

    #[test]
    fn a_schema_too_large_even_shared_is_refused() {
        // 100 fields of an enum of 2,000 values: about 3 MB of names, shared or not.
        let pool = enum_heavy(100, 2_000);
        for direction in [Direction::Input, Direction::Output] {
            assert_eq!(laid_out_in(&pool, "Huge", direction), Err(SchemaTooLarge));
        }
        // Just under the bound it is served.
        let pool = enum_heavy(20, 2_000);
        let schema = laid_out_in(&pool, "Huge", Direction::Input).unwrap().0;
        assert!(json_len(&schema) > MAX_SCHEMA_BYTES / 2);
    }

    #[test]
    fn the_count_while_building_never_passes_the_final_length() {
        // Descriptions on inlined messages (replaced by the field's), rules that shrink an
        // enum's list, maps and lists: what was counted is at most the text.
        let embedded = embedded_pool().unwrap();
        let docs = Docs::from_pool(&embedded);
        let gate = Gate::build(&embedded).unwrap();
        for message in embedded.all_messages() {
            let shape = Shape::of(&message);
            for direction in [Direction::Input, Direction::Output] {
                let mut builder = Builder {
                    direction,
                    docs: &docs,
                    gate: &gate,
                    shape: &shape,
                    layout: Layout::Inline,
                    depth: 0,
                    defs: BTreeMap::new(),
                    pending: Vec::new(),
                    written: 0,
                };
                let schema = builder.object(&message).unwrap();
                let length = json_len(&schema);
                assert!(builder.written <= length, "{} {direction:?}", message.full_name());
                assert!(
                    builder.written * 3 >= length,
                    "{} {direction:?}: {} of {length}",
                    message.full_name(),
                    builder.written
                );
            }
        }
    }
}

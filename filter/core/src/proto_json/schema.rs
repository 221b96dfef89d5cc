//! JSON Schema (2020-12) for protobuf messages: objects with their fields as properties,
//! each field's value as the mapping table ([`super::Form`]) writes it.
//!
//! Input and output schemas differ only where the table says outputs carry other forms than
//! inputs should offer (64-bit integers as strings only, unknown enum numbers).

use std::collections::{BTreeMap, HashMap, HashSet};

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{json, Map, Value};

use super::{Direction, Form, KeyForm};
use crate::docs::Docs;
use crate::proto_json::gate::is_required;
use crate::proto_json::rules::schema::{annotate, message_words};
use crate::proto_json::rules::{rules_of, FieldRules, MessageRules};

/// The schema of `message` as a tool's `inputSchema` or `outputSchema`.
pub fn message_schema(message: &MessageDescriptor, direction: Direction, docs: &Docs) -> Value {
    let mut builder = Builder {
        direction,
        docs,
        depth: 0,
        defs: BTreeMap::new(),
        pending: Vec::new(),
        recursive: HashMap::new(),
    };
    // The root follows the same mapping as a field (a Timestamp is a string, wherever it is),
    // but is always written out, even when it is recursive.
    let mut root = match Form::of(&Kind::Message(message.clone())) {
        Form::Message(message) => builder.object(&message),
        form => form.scalar_schema(direction),
    };
    // Messages behind a `$ref` are built here, one at a time, so the stack stays shallow.
    while let Some(pending) = builder.pending.pop() {
        builder.depth = 0;
        let schema = builder.object(&pending);
        builder.defs.insert(pending.full_name().to_owned(), schema);
    }
    if !builder.defs.is_empty() {
        if let Value::Object(map) = &mut root {
            map.insert("$defs".into(), Value::Object(builder.defs.into_iter().collect()));
        }
    }
    root
}

/// How deep messages nest inline before the rest goes behind `$ref`s: enough for real APIs
/// to read as one tree, small enough that no descriptor can exhaust the Wasm stack.
pub const MAX_INLINE_DEPTH: usize = 16;

struct Builder<'a> {
    direction: Direction,
    docs: &'a Docs,
    /// Messages inlined around the one being built.
    depth: usize,
    /// Schemas referenced by `$ref`: messages in a cycle, or nested deeper than
    /// `MAX_INLINE_DEPTH`. `Null` until built.
    defs: BTreeMap<String, Value>,
    /// Referenced messages still to build.
    pending: Vec<MessageDescriptor>,
    recursive: HashMap<String, bool>,
}

impl Builder<'_> {
    fn object(&mut self, message: &MessageDescriptor) -> Value {
        let mut properties = Map::new();
        let mut required = Vec::new();
        // buf.validate rules constrain what goes in; answers are rendered as they come.
        let rules = match self.direction {
            Direction::Input => rules_of(message),
            Direction::Output => MessageRules::default(),
        };
        for field in message.fields() {
            let mut schema = self.field(&field);
            let rule_words = match rules.field(&field) {
                Some(field_rules) => annotate(&field, field_rules, &mut schema),
                None => Vec::new(),
            };
            let description = join_words(self.field_description(&field), &rule_words);
            if let Some(description) = description {
                if let Value::Object(map) = &mut schema {
                    map.insert("description".into(), Value::String(description));
                }
            }
            properties.insert(field.name().to_owned(), schema);
            // A field whose default breaks its rules must be given, whatever it is marked.
            let field_rules = rules.field(&field);
            let default_fails = field_rules.is_some_and(|rules| rules.check_absent(&field).is_err());
            if self.is_required(&field, field_rules) || default_fails {
                required.push(Value::String(field.name().to_owned()));
            }
        }
        let mut schema = Map::new();
        schema.insert("type".into(), json!("object"));
        let message_words = message_words(&rules);
        if let Some(description) = join_words(self.docs.message(message).map(str::to_owned), &message_words) {
            schema.insert("description".into(), json!(description));
        }
        schema.insert("properties".into(), Value::Object(properties));
        if !required.is_empty() {
            schema.insert("required".into(), Value::Array(required));
        }
        schema.insert("additionalProperties".into(), json!(false));
        Value::Object(schema)
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

    fn field(&mut self, field: &FieldDescriptor) -> Value {
        if field.is_map() {
            let Kind::Message(entry) = field.kind() else {
                return json!({"type": "object"});
            };
            let mut schema = json!({
                "type": "object",
                "additionalProperties": self.kind(&entry.map_entry_value_field().kind()),
            });
            let keys = KeyForm::of(&entry.map_entry_key_field().kind());
            if let (Some(names), Value::Object(map)) = (keys.schema(), &mut schema) {
                map.insert("propertyNames".into(), names);
            }
            schema
        } else if field.is_list() {
            json!({"type": "array", "items": self.kind(&field.kind())})
        } else {
            self.kind(&field.kind())
        }
    }

    fn kind(&mut self, kind: &Kind) -> Value {
        match Form::of(kind) {
            Form::Message(message) => self.message(&message),
            form => form.scalar_schema(self.direction),
        }
    }

    fn message(&mut self, message: &MessageDescriptor) -> Value {
        if self.depth < MAX_INLINE_DEPTH && !self.is_recursive(message) {
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
        json!({"$ref": format!("#/$defs/{name}")})
    }

    /// Whether `message` can reach itself through its fields.
    fn is_recursive(&mut self, message: &MessageDescriptor) -> bool {
        if let Some(&known) = self.recursive.get(message.full_name()) {
            return known;
        }
        let target = message.full_name();
        let mut seen = HashSet::new();
        let mut stack: Vec<MessageDescriptor> = field_messages(message).collect();
        let mut found = false;
        while let Some(next) = stack.pop() {
            if next.full_name() == target {
                found = true;
                break;
            }
            if seen.insert(next.full_name().to_owned()) {
                stack.extend(field_messages(&next));
            }
        }
        self.recursive.insert(target.to_owned(), found);
        found
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

fn field_messages(message: &MessageDescriptor) -> impl Iterator<Item = MessageDescriptor> + '_ {
    message.fields().filter_map(|field| match field.kind() {
        Kind::Message(inner) => Some(inner),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptors::embedded_pool;

    fn schema(name: &str, direction: Direction) -> Value {
        let pool = embedded_pool().unwrap();
        let docs = Docs::from_pool(&pool);
        message_schema(&pool.get_message_by_name(name).unwrap(), direction, &docs)
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
}

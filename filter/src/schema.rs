//! JSON Schema (2020-12) for protobuf messages, in the proto3 JSON mapping the transcoder
//! speaks: property names are proto field names, 64-bit integers are decimal strings,
//! bytes are base64, enums are value names.
//!
//! Input and output schemas differ only where proto3 JSON output can carry more than
//! input should offer: unknown enum numbers and non-finite floats.

use std::collections::{BTreeMap, HashMap, HashSet};

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{json, Map, Value};

use crate::docs::Docs;

/// Which side of a call a schema describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Tool arguments, checked strictly by the transcoder.
    Input,
    /// Structured content, as the transcoder renders upstream responses.
    Output,
}

const INT64_PATTERN: &str = "^-?[0-9]+$";
const UINT64_PATTERN: &str = "^[0-9]+$";
const DURATION_PATTERN: &str = "^-?[0-9]+(\\.[0-9]{1,9})?s$";

/// The schema of `message` as a tool's `inputSchema` or `outputSchema` (root is an object).
pub fn message_schema(message: &MessageDescriptor, direction: Direction, docs: &Docs) -> Value {
    let mut builder = Builder {
        direction,
        docs,
        depth: 0,
        defs: BTreeMap::new(),
        pending: Vec::new(),
        recursive: HashMap::new(),
    };
    // The root follows the same mapping as a field: a Timestamp is a string, wherever it is.
    let mut root = builder.well_known(message).unwrap_or_else(|| builder.object(message));
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
        for field in message.fields() {
            let mut schema = self.field(&field);
            if let Some(description) = self.field_description(&field) {
                if let Value::Object(map) = &mut schema {
                    map.insert("description".into(), Value::String(description));
                }
            }
            properties.insert(field.name().to_owned(), schema);
            if self.is_required(&field) {
                required.push(Value::String(field.name().to_owned()));
            }
        }
        let mut schema = Map::new();
        schema.insert("type".into(), json!("object"));
        if let Some(description) = self.docs.message(message) {
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
    /// are those without presence, since the transcoder emits their defaults.
    fn is_required(&self, field: &FieldDescriptor) -> bool {
        match self.direction {
            Direction::Input => crate::strict::is_required(field.parent_pool(), field),
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
            let key = entry.map_entry_key_field();
            let value = entry.map_entry_value_field();
            let mut schema = json!({
                "type": "object",
                "additionalProperties": self.kind(&value.kind()),
            });
            if let (Some(names), Value::Object(map)) = (map_key_names(&key.kind()), &mut schema) {
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
        match kind {
            Kind::Double | Kind::Float => match self.direction {
                Direction::Input => json!({"type": "number"}),
                Direction::Output => json!({"anyOf": [
                    {"type": "number"},
                    {"type": "string", "enum": ["NaN", "Infinity", "-Infinity"]},
                ]}),
            },
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
                json!({"type": "integer", "minimum": i32::MIN, "maximum": i32::MAX})
            }
            Kind::Uint32 | Kind::Fixed32 => {
                json!({"type": "integer", "minimum": 0, "maximum": u32::MAX})
            }
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
                json!({"type": "string", "pattern": INT64_PATTERN})
            }
            Kind::Uint64 | Kind::Fixed64 => json!({"type": "string", "pattern": UINT64_PATTERN}),
            Kind::Bool => json!({"type": "boolean"}),
            Kind::String => json!({"type": "string"}),
            Kind::Bytes => json!({"type": "string", "contentEncoding": "base64"}),
            Kind::Enum(descriptor) => {
                if descriptor.full_name() == "google.protobuf.NullValue" {
                    return json!({"type": "null"});
                }
                let names: Vec<String> = descriptor.values().map(|v| v.name().to_owned()).collect();
                let by_name = json!({"type": "string", "enum": names});
                match self.direction {
                    Direction::Input => by_name,
                    // Values the upstream knows and this descriptor does not come out as numbers.
                    Direction::Output => json!({"anyOf": [by_name, {"type": "integer"}]}),
                }
            }
            Kind::Message(message) => self.message(message),
        }
    }

    fn message(&mut self, message: &MessageDescriptor) -> Value {
        if let Some(schema) = self.well_known(message) {
            return schema;
        }
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

    fn well_known(&mut self, message: &MessageDescriptor) -> Option<Value> {
        let schema = match message.full_name() {
            "google.protobuf.Timestamp" => json!({"type": "string", "format": "date-time"}),
            "google.protobuf.Duration" => json!({"type": "string", "pattern": DURATION_PATTERN}),
            "google.protobuf.FieldMask" => json!({"type": "string"}),
            "google.protobuf.Struct" => json!({"type": "object"}),
            "google.protobuf.ListValue" => json!({"type": "array"}),
            "google.protobuf.Value" => json!({}),
            "google.protobuf.Empty" => json!({"type": "object", "additionalProperties": false}),
            "google.protobuf.Any" => json!({
                "type": "object",
                "properties": {"@type": {"type": "string"}},
                "required": ["@type"],
            }),
            "google.protobuf.DoubleValue"
            | "google.protobuf.FloatValue"
            | "google.protobuf.Int64Value"
            | "google.protobuf.UInt64Value"
            | "google.protobuf.Int32Value"
            | "google.protobuf.UInt32Value"
            | "google.protobuf.BoolValue"
            | "google.protobuf.StringValue"
            | "google.protobuf.BytesValue" => {
                let value = message.get_field_by_name("value")?;
                self.kind(&value.kind())
            }
            _ => return None,
        };
        Some(schema)
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

fn field_messages(message: &MessageDescriptor) -> impl Iterator<Item = MessageDescriptor> + '_ {
    message.fields().filter_map(|field| match field.kind() {
        Kind::Message(inner) => Some(inner),
        _ => None,
    })
}

/// Map keys are JSON object keys, so non-string key types constrain their spelling.
fn map_key_names(kind: &Kind) -> Option<Value> {
    match kind {
        Kind::String => None,
        Kind::Bool => Some(json!({"enum": ["true", "false"]})),
        Kind::Uint32 | Kind::Fixed32 | Kind::Uint64 | Kind::Fixed64 => Some(json!({"pattern": UINT64_PATTERN})),
        _ => Some(json!({"pattern": INT64_PATTERN})),
    }
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
        assert_eq!(properties["id"]["type"], "string");
        assert_eq!(properties["id"]["pattern"], INT64_PATTERN);
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

//! The JSON Schema (2020-12) of the plugin configuration, generated from the types that parse
//! it, so that it says what the filter reads: the keys, their types and defaults, and that no
//! other key is taken. Checks that need more than one key or the descriptors (a method that
//! exists, a tool name used once) are the filter's alone; `switchblade check` runs them.

use serde_json::{Map, Value};

use super::PluginConfig;

pub fn json_schema() -> Value {
    let generated = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<PluginConfig>()
        .to_value();
    // What the schema is, first, as people read it; then what schemars wrote. No `$id`: the
    // project publishes the schema at no URL of its own yet, and an `$id` must be fetchable.
    let mut schema = Map::new();
    schema.insert("$schema".into(), generated["$schema"].clone());
    schema.insert("title".into(), Value::String("Switchblade plugin configuration".into()));
    if let Value::Object(rest) = generated {
        for (key, value) in rest {
            if !schema.contains_key(&key) {
                schema.insert(key, value);
            }
        }
    }
    Value::Object(schema)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_is_2020_12_and_closed() {
        let schema = json_schema();
        assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
        assert!(schema.get("$id").is_none());
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["required"], serde_json::json!(["services"]));
        assert_eq!(schema["properties"]["mcp_path"]["default"], "/mcp");
        assert_eq!(
            schema["$defs"]["ServiceConfig"]["properties"]["timeout_ms"]["default"],
            10_000
        );
    }
}

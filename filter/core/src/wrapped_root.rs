//! MCP tool schemas and structured content are JSON objects, but a request or response message
//! may have JSON of another type (a method that returns a `Timestamp`, say). Such a root is
//! wrapped as `{"value": …}`: in the schema, in the arguments a call takes, and in the content
//! it returns. This module is that rule, whole.

use serde_json::{json, Value};

use crate::proto_json::gate::ArgumentError;
use crate::proto_json::json_type;

/// The property that carries a message whose JSON is not an object.
pub const WRAPPED_VALUE: &str = "value";

/// The schema of a tool's root, and whether it had to be wrapped to describe an object.
pub fn object_root(schema: Value) -> (Value, bool) {
    if schema.get("type") == Some(&json!("object")) {
        return (schema, false);
    }
    let mut schema = schema;
    let defs = schema.as_object_mut().and_then(|map| map.remove("$defs"));
    let mut wrapper = json!({
        "type": "object",
        "properties": { WRAPPED_VALUE: schema },
        "required": [WRAPPED_VALUE],
        "additionalProperties": false,
    });
    if let (Some(defs), Value::Object(map)) = (defs, &mut wrapper) {
        map.insert("$defs".into(), defs);
    }
    (wrapper, true)
}

/// The JSON the request message is read from: the arguments, or `arguments.value` for a
/// wrapped root.
pub fn unwrap_arguments(wrapped: bool, arguments: &Value) -> Result<&Value, ArgumentError> {
    if !wrapped {
        return Ok(arguments);
    }
    let refuse = |problem: String| ArgumentError {
        path: ".".into(),
        problem,
    };
    let Value::Object(map) = arguments else {
        return Err(refuse(format!(
            "arguments must be a JSON object, got {}",
            json_type(arguments)
        )));
    };
    if let Some(unknown) = map.keys().find(|key| *key != WRAPPED_VALUE) {
        return Err(refuse(format!(
            "unknown field `{unknown}`; this tool takes only `{WRAPPED_VALUE}`"
        )));
    }
    map.get(WRAPPED_VALUE)
        .ok_or_else(|| refuse(format!("missing required field `{WRAPPED_VALUE}`")))
}

/// The structured content of a response rendered as `content_json`.
pub fn wrap_content(wrapped: bool, content_json: String) -> String {
    if wrapped {
        format!("{{\"{WRAPPED_VALUE}\":{content_json}}}")
    } else {
        content_json
    }
}

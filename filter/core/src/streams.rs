//! Streaming gRPC methods as tools. A method that takes a stream reads its messages from the
//! arguments' `messages` array; a method that answers with one gathers its messages into
//! `{"messages": [...], "end": {"reason", "count"}}`, until the stream ends or a bound stops it:
//! `max_messages`, `limits.max_response_bytes` over all messages, or the tool's deadline (its
//! collection window). A stream stopped by a bound is not a failure; the host cancels the
//! upstream stream at once.

use serde_json::{json, Map, Value};

use crate::grpc::stream::EndReason;

/// The property that holds a stream's messages, in arguments and in structured content.
pub const MESSAGES: &str = "messages";
/// The property that says how an answered stream ended.
pub const END: &str = "end";
/// Messages a streaming tool gathers (or takes) at most, unless configured.
pub const DEFAULT_MAX_MESSAGES: usize = 100;

/// How a gRPC method streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    Unary,
    ServerStreaming,
    ClientStreaming,
    Bidirectional,
}

impl CallKind {
    pub fn of(method: &prost_reflect::MethodDescriptor) -> Self {
        match (method.is_client_streaming(), method.is_server_streaming()) {
            (false, false) => CallKind::Unary,
            (false, true) => CallKind::ServerStreaming,
            (true, false) => CallKind::ClientStreaming,
            (true, true) => CallKind::Bidirectional,
        }
    }

    /// As a user reads it (`switchblade tools`, log lines, errors).
    pub fn label(self) -> &'static str {
        match self {
            CallKind::Unary => "unary",
            CallKind::ServerStreaming => "server-streaming",
            CallKind::ClientStreaming => "client-streaming",
            CallKind::Bidirectional => "bidirectional-streaming",
        }
    }

    /// Whether the tool's arguments are a stream of request messages.
    pub fn sends_many(self) -> bool {
        matches!(self, CallKind::ClientStreaming | CallKind::Bidirectional)
    }

    /// Whether the tool's result gathers a stream of response messages.
    pub fn receives_many(self) -> bool {
        matches!(self, CallKind::ServerStreaming | CallKind::Bidirectional)
    }
}

/// Takes a schema's `$defs` up to `root`, so that the `$ref`s inside it still resolve once it is
/// nested in `root`.
fn hoist_defs(mut schema: Value, root: &mut Map<String, Value>) -> Value {
    if let Some(defs) = schema.as_object_mut().and_then(|map| map.remove("$defs")) {
        root.insert("$defs".into(), defs);
    }
    schema
}

/// The input schema of a tool whose method takes a stream: `{"messages": [item, ...]}`, with
/// at most `max_messages` items.
pub fn messages_input_schema(item: Value, max_messages: usize) -> Value {
    let mut root = Map::new();
    let item = hoist_defs(item, &mut root);
    root.insert("type".into(), json!("object"));
    root.insert(
        "properties".into(),
        json!({ MESSAGES: {
            "type": "array",
            "items": item,
            "maxItems": max_messages,
            "description": format!("The request messages, sent in order on one stream (at most {max_messages})."),
        }}),
    );
    root.insert("required".into(), json!([MESSAGES]));
    root.insert("additionalProperties".into(), json!(false));
    Value::Object(root)
}

/// The output schema of a tool whose method answers with a stream.
pub fn stream_output_schema(item: Value) -> Value {
    let mut root = Map::new();
    let item = hoist_defs(item, &mut root);
    let reasons: Vec<&str> = EndReason::ALL.iter().map(|reason| reason.label()).collect();
    root.insert("type".into(), json!("object"));
    root.insert(
        "properties".into(),
        json!({
            MESSAGES: {"type": "array", "items": item, "description": "The messages the method sent, in order."},
            END: {
                "type": "object",
                "description": "How the stream ended: the upstream ended it (complete), or a bound stopped it and it was cancelled.",
                "properties": {
                    "reason": {"type": "string", "enum": reasons},
                    "count": {"type": "integer", "minimum": 0, "description": "How many messages came."},
                },
                "required": ["reason", "count"],
                "additionalProperties": false,
            },
        }),
    );
    root.insert("required".into(), json!([MESSAGES, END]));
    root.insert("additionalProperties".into(), json!(false));
    Value::Object(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_schemas() {
        assert!(CallKind::Bidirectional.sends_many() && CallKind::Bidirectional.receives_many());
        assert!(!CallKind::ServerStreaming.sends_many() && CallKind::ServerStreaming.receives_many());
        let item =
            json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/T"}}, "$defs": {"T": {"type": "string"}}});
        let input = messages_input_schema(item.clone(), 5);
        assert_eq!(input["properties"]["messages"]["maxItems"], 5);
        assert_eq!(
            input["$defs"]["T"]["type"], "string",
            "the item's $defs move to the root"
        );
        assert!(input["properties"]["messages"]["items"].get("$defs").is_none());
        let output = stream_output_schema(item);
        assert_eq!(
            output["properties"]["end"]["properties"]["reason"]["enum"],
            json!(["complete", "max_messages", "max_bytes", "deadline"])
        );
        assert_eq!(output["required"], json!(["messages", "end"]));
    }
}

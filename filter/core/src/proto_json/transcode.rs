//! Tool arguments (JSON) to protobuf bytes, and protobuf bytes back to JSON, in the proto3
//! JSON mapping with proto field names.

use prost::Message;
use prost_reflect::{DeserializeOptions, DynamicMessage, MessageDescriptor, SerializeOptions};
use serde_json::Value;

use super::json_type;

/// Why arguments were refused: where in the arguments, and what was wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentError {
    /// JSON path of the offending value, `.` for the arguments object itself.
    pub path: String,
    pub problem: String,
}

impl std::fmt::Display for ArgumentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path == "." {
            write!(f, "{}", self.problem)
        } else {
            write!(f, "at `{}`: {}", self.path, self.problem)
        }
    }
}

/// Encodes `arguments` as a `message`, refusing anything proto3 JSON does not allow.
pub fn encode_arguments(message: &MessageDescriptor, arguments: &Value) -> Result<Vec<u8>, ArgumentError> {
    if !arguments.is_object() {
        return Err(ArgumentError {
            path: ".".into(),
            problem: format!("arguments must be a JSON object, got {}", json_type(arguments)),
        });
    }
    let options = DeserializeOptions::new().deny_unknown_fields(true);
    let mut track = serde_path_to_error::Track::new();
    let tracked = serde_path_to_error::Deserializer::new(arguments, &mut track);
    match DynamicMessage::deserialize_with_options(message.clone(), tracked, &options) {
        Ok(decoded) => Ok(decoded.encode_to_vec()),
        Err(error) => Err(ArgumentError {
            path: track.path().to_string(),
            problem: error.to_string(),
        }),
    }
}

/// Why an upstream response could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseError(pub String);

/// Decodes an upstream response and renders it as proto3 JSON text with every field present.
/// Straight to text: a `Value` tree in between would cost as much again (see BENCHMARKS.md).
pub fn render_response(message: &MessageDescriptor, bytes: &[u8]) -> Result<String, ResponseError> {
    let decoded = DynamicMessage::decode(message.clone(), bytes)
        .map_err(|error| ResponseError(format!("not a valid {}: {error}", message.full_name())))?;
    let options = SerializeOptions::new()
        .use_proto_field_name(true)
        .skip_default_fields(false);
    let mut json = Vec::with_capacity(bytes.len() * 2 + 64);
    decoded
        .serialize_with_options(&mut serde_json::Serializer::new(&mut json), &options)
        .map_err(|error| ResponseError(format!("cannot render {} as JSON: {error}", message.full_name())))?;
    // serde_json writes only valid UTF-8.
    String::from_utf8(json)
        .map_err(|error| ResponseError(format!("cannot render {} as JSON: {error}", message.full_name())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptors::embedded_pool;
    use serde_json::json;

    fn descriptor(name: &str) -> MessageDescriptor {
        embedded_pool().unwrap().get_message_by_name(name).unwrap()
    }

    #[test]
    fn encodes_valid_arguments() {
        let get_user = descriptor("demo.users.v1.GetUserRequest");
        assert_eq!(encode_arguments(&get_user, &json!({"user_id": 7})).unwrap(), [0x08, 7]);
        assert_eq!(encode_arguments(&get_user, &json!({})).unwrap(), Vec::<u8>::new());
        // proto3 JSON accepts the lowerCamelCase JSON name too.
        assert_eq!(encode_arguments(&get_user, &json!({"userId": 7})).unwrap(), [0x08, 7]);
    }

    #[test]
    fn int64_accepts_strings_and_numbers() {
        let get_item = descriptor("demo.catalog.v1.GetItemRequest");
        assert_eq!(encode_arguments(&get_item, &json!({"id": "42"})).unwrap(), [0x08, 42]);
        assert_eq!(encode_arguments(&get_item, &json!({"id": 42})).unwrap(), [0x08, 42]);
    }

    #[test]
    fn refuses_query_objects_where_an_integer_is_expected() {
        let get_user = descriptor("demo.users.v1.GetUserRequest");
        let error = encode_arguments(&get_user, &json!({"user_id": {"$ne": null}})).unwrap_err();
        assert_eq!(error.path, "user_id");
        assert!(error.problem.contains("invalid type: map"), "{error}");
    }

    #[test]
    fn refuses_unknown_fields_and_wrong_types_with_the_path() {
        let search = descriptor("demo.catalog.v1.SearchRequest");
        let error = encode_arguments(&search, &json!({"query": "x", "where": "1=1"})).unwrap_err();
        assert_eq!(error.to_string(), "unrecognized field name 'where'");
        let error = encode_arguments(&search, &json!({"filters": {"category": "CATEGORY_NOPE"}})).unwrap_err();
        assert_eq!(error.path, "filters.category");
        let error = encode_arguments(&search, &json!({"filters": {"max_price_minor": true}})).unwrap_err();
        assert_eq!(error.path, "filters.max_price_minor");
        let error = encode_arguments(&search, &json!({"page_size": 1.5})).unwrap_err();
        assert_eq!(error.to_string(), "at `page_size`: expected integer value");
        let error = encode_arguments(&search, &json!({"query": 7})).unwrap_err();
        assert_eq!(
            error.to_string(),
            "at `query`: invalid type: integer `7`, expected a string"
        );
        let error = encode_arguments(&search, &json!({"page_size": 4_294_967_296_u64})).unwrap_err();
        assert_eq!(error.path, "page_size");
    }

    #[test]
    fn refuses_non_object_arguments() {
        let search = descriptor("demo.catalog.v1.SearchRequest");
        let error = encode_arguments(&search, &json!(["query"])).unwrap_err();
        assert_eq!(error.to_string(), "arguments must be a JSON object, got an array");
    }

    #[test]
    fn renders_responses_with_proto_names_and_defaults() {
        let user = descriptor("demo.users.v1.User");
        let json = render_response(&user, &[0x08, 7, 0x12, 3, b'a', b'd', b'a']).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&json).unwrap(),
            json!({"user_id": 7, "username": "ada", "display_name": "", "email": "", "state": "ACCOUNT_STATE_UNSPECIFIED"})
        );
    }

    #[test]
    fn refuses_garbage_responses() {
        let user = descriptor("demo.users.v1.User");
        let error = render_response(&user, &[0xff, 0xff, 0xff]).unwrap_err();
        assert!(error.0.starts_with("not a valid demo.users.v1.User"), "{}", error.0);
    }
}

//! Well-known types read from their JSON: `Struct`, `ListValue` and `Value` (any JSON), and a
//! FieldMask's paths. (Timestamps and durations are read in `time.rs`; `Any` by the gate.)

use serde_json::{Map, Value};

use crate::proto_json::wire::{put_len, put_tag, put_varint, WireType};

/// `google.protobuf.Struct`: its `fields` map, entry by entry.
pub(super) fn struct_fields(object: &Map<String, Value>, out: &mut Vec<u8>) {
    let mut entry = Vec::new();
    for (key, value) in object {
        entry.clear();
        put_len(&mut entry, 1, key.as_bytes());
        let mut bytes = Vec::new();
        json_value(value, &mut bytes);
        put_len(&mut entry, 2, &bytes);
        put_len(out, 1, &entry);
    }
}

/// `google.protobuf.ListValue`: its `values`.
pub(super) fn list_values(items: &[Value], out: &mut Vec<u8>) {
    let mut bytes = Vec::new();
    for item in items {
        bytes.clear();
        json_value(item, &mut bytes);
        put_len(out, 1, &bytes);
    }
}

/// `google.protobuf.Value`: any JSON value, as the member of its `kind` oneof.
pub(super) fn json_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => {
            put_tag(out, 1, WireType::Varint);
            put_varint(out, 0);
        }
        Value::Number(number) => {
            put_tag(out, 2, WireType::Fixed64);
            out.extend_from_slice(&number.as_f64().unwrap_or_default().to_bits().to_le_bytes());
        }
        Value::String(text) => put_len(out, 3, text.as_bytes()),
        Value::Bool(flag) => {
            put_tag(out, 4, WireType::Varint);
            put_varint(out, u64::from(*flag));
        }
        Value::Object(object) => {
            let mut bytes = Vec::new();
            struct_fields(object, &mut bytes);
            put_len(out, 5, &bytes);
        }
        Value::Array(items) => {
            let mut bytes = Vec::new();
            list_values(items, &mut bytes);
            put_len(out, 6, &bytes);
        }
    }
}

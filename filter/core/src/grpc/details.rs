//! `grpc-status-details-bin`: the `google.rpc.Status` a service attaches to an error, rendered
//! as lines a model can act on (which field was wrong, when to retry, what to fix).

use base64::Engine;
use prost_reflect::DescriptorPool;
use serde_json::Value;

use crate::proto_json::render::{render, RenderError, RenderPlan};
use crate::proto_json::wire::{Reader, WireValue};

/// Decodes status details with the `google.rpc` messages of the embedded descriptor set, so
/// details render whatever descriptor set a configuration brings.
#[derive(Debug)]
pub struct StatusDetails {
    pool: DescriptorPool,
}

impl StatusDetails {
    pub fn new(pool: DescriptorPool) -> Option<Self> {
        pool.get_message_by_name("google.rpc.Status")?;
        Some(StatusDetails { pool })
    }

    /// One line per detail, in at most about `limit` bytes of text (what does not fit is
    /// counted, not shown). The trailer may arrive as raw bytes or base64 text.
    pub fn render(&self, trailer: &[u8], limit: usize) -> Vec<String> {
        // gRPC sends -bin metadata base64-encoded on the wire; hosts may or may not decode it.
        let Some(details) = base64_text(trailer)
            .and_then(|bytes| status_details(&bytes))
            .or_else(|| status_details(trailer))
        else {
            return vec!["(grpc-status-details-bin could not be decoded as google.rpc.Status)".into()];
        };
        let mut lines = Vec::with_capacity(details.len());
        let mut left = limit;
        for (index, (type_url, value)) in details.iter().enumerate() {
            let Some((line, cost)) = self.render_detail(type_url, value, left) else {
                lines.push(format!(
                    "({} more details not shown: their JSON would be over {limit} bytes)",
                    details.len() - index
                ));
                break;
            };
            left = left.saturating_sub(cost);
            lines.push(line);
        }
        lines
    }

    /// Each `Any` on its own, so one detail of an unknown type does not hide the others: its
    /// line, and what it cost of the limit (its JSON, or the line); `None` if its JSON would be
    /// over `limit`.
    fn render_detail(&self, type_url: &str, bytes: &[u8], limit: usize) -> Option<(String, usize)> {
        let name = type_url.rsplit('/').next().unwrap_or(type_url);
        let descriptor = self.pool.get_message_by_name(name);
        let rendered = descriptor.map(|descriptor| render(&RenderPlan::new(&descriptor), bytes, limit));
        if let Some(Err(RenderError::TooLarge { .. })) = rendered {
            return None;
        }
        let json = rendered.and_then(Result::ok);
        let cost = json.as_ref().map_or(0, String::len);
        let detail = json.and_then(|json| serde_json::from_str::<Value>(&json).ok());
        let line = match detail {
            None => format!("detail of type {type_url} (not decoded)"),
            Some(detail) => {
                let short = name.rsplit('.').next().unwrap_or(name);
                format!("{short}: {}", describe(name, &detail).trim())
            }
        };
        let cost = cost.max(line.len());
        Some((line, cost))
    }
}

/// The details of a `google.rpc.Status` (field 3, `Any`s): each one's type URL and bytes; or
/// `None` if the bytes are not a Status.
fn status_details(bytes: &[u8]) -> Option<Vec<(String, Vec<u8>)>> {
    let mut details = Vec::new();
    let mut status = Reader::new(bytes);
    while let Some(field) = status.field().ok()? {
        match (field.number, field.value) {
            (1, WireValue::Varint(_)) | (2, WireValue::Len(_)) => {}
            (3, WireValue::Len(any)) => {
                let (mut type_url, mut value) = (String::new(), Vec::new());
                let mut reader = Reader::new(any);
                while let Some(part) = reader.field().ok()? {
                    match (part.number, part.value) {
                        (1, WireValue::Len(text)) => type_url = String::from_utf8(text.to_vec()).ok()?,
                        (2, WireValue::Len(bytes)) => value = bytes.to_vec(),
                        _ => {}
                    }
                }
                details.push((type_url, value));
            }
            // Status has no other fields; anything else means these bytes are something else.
            _ => return None,
        }
    }
    Some(details)
}

/// The words for one detail message, given as JSON.
fn describe(name: &str, detail: &Value) -> String {
    match name {
        "google.rpc.BadRequest" => each(detail, "field_violations", |v| {
            let reason = text(v, "reason").map(|r| format!(" [{r}]")).unwrap_or_default();
            format!("field `{}`: {}{reason}", str(v, "field"), str(v, "description"))
        }),
        "google.rpc.ErrorInfo" => {
            let metadata: Vec<String> = detail["metadata"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(key, value)| format!("{key}={}", value.as_str().unwrap_or_default()))
                .collect();
            let metadata = if metadata.is_empty() {
                String::new()
            } else {
                format!(" ({})", metadata.join(", "))
            };
            format!(
                "reason {} in domain {}{metadata}",
                str(detail, "reason"),
                str(detail, "domain")
            )
        }
        "google.rpc.RetryInfo" => format!("retry after {}", str(detail, "retry_delay")),
        "google.rpc.PreconditionFailure" => each(detail, "violations", |v| {
            format!("{} {}: {}", str(v, "type"), str(v, "subject"), str(v, "description"))
        }),
        "google.rpc.QuotaFailure" => each(detail, "violations", |v| {
            format!("{}: {}", str(v, "subject"), str(v, "description"))
        }),
        "google.rpc.ResourceInfo" => format!(
            "{} {} (owner {}): {}",
            str(detail, "resource_type"),
            str(detail, "resource_name"),
            str(detail, "owner"),
            str(detail, "description")
        ),
        "google.rpc.RequestInfo" => format!("request {} {}", str(detail, "request_id"), str(detail, "serving_data")),
        "google.rpc.Help" => each(detail, "links", |v| {
            format!("{}: {}", str(v, "description"), str(v, "url"))
        }),
        "google.rpc.LocalizedMessage" => format!("[{}] {}", str(detail, "locale"), str(detail, "message")),
        "google.rpc.DebugInfo" => {
            let stack: Vec<&str> = detail["stack_entries"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            format!("{} {}", str(detail, "detail"), stack.join(" / "))
        }
        // A type the pool knows but this list does not: its fields, as JSON.
        _ => detail.to_string(),
    }
}

fn each(detail: &Value, key: &str, line: impl Fn(&Value) -> String) -> String {
    let items: Vec<String> = detail[key].as_array().into_iter().flatten().map(line).collect();
    items.join("; ")
}

fn text<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str).filter(|text| !text.is_empty())
}

fn str<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn base64_text(bytes: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(bytes).ok()?.trim();
    let engine = base64::engine::general_purpose::STANDARD_NO_PAD;
    engine.decode(text.trim_end_matches('=')).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptors::embedded_pool;
    use prost::Message;
    use prost_reflect::{DynamicMessage, Value as ProtoValue};

    /// One detail, given as (type, JSON), encoded.
    fn status_detail((name, json): (&str, &str)) -> Vec<u8> {
        let descriptor = embedded_pool().unwrap().get_message_by_name(name).unwrap();
        let mut deserializer = serde_json::Deserializer::from_str(json);
        DynamicMessage::deserialize(descriptor, &mut deserializer)
            .unwrap()
            .encode_to_vec()
    }

    /// A google.rpc.Status with the given details, each given as (type, JSON).
    fn status(details: &[(&str, &str)]) -> Vec<u8> {
        let pool = embedded_pool().unwrap();
        let any = pool.get_message_by_name("google.protobuf.Any").unwrap();
        let mut status = DynamicMessage::new(pool.get_message_by_name("google.rpc.Status").unwrap());
        status.set_field_by_name("code", ProtoValue::I32(3));
        let packed: Vec<ProtoValue> = details
            .iter()
            .map(|&(name, json)| {
                let mut wrapper = DynamicMessage::new(any.clone());
                wrapper.set_field_by_name("type_url", ProtoValue::String(format!("type.googleapis.com/{name}")));
                wrapper.set_field_by_name("value", ProtoValue::Bytes(status_detail((name, json)).into()));
                ProtoValue::Message(wrapper)
            })
            .collect();
        status.set_field_by_name("details", ProtoValue::List(packed));
        status.encode_to_vec()
    }

    fn render(bytes: &[u8]) -> Vec<String> {
        StatusDetails::new(embedded_pool().unwrap())
            .unwrap()
            .render(bytes, usize::MAX)
    }

    #[test]
    fn details_past_the_limit_are_counted_not_shown() {
        let violation = (
            "google.rpc.BadRequest",
            r#"{"field_violations":[{"field":"page_size","description":"must be at most 50"}]}"#,
        );
        let bytes = status(&[violation, violation, violation]);
        let details = StatusDetails::new(embedded_pool().unwrap()).unwrap();
        let (_, one) = details
            .render_detail(
                "type.googleapis.com/google.rpc.BadRequest",
                &status_detail(violation),
                usize::MAX,
            )
            .unwrap();
        assert_eq!(details.render(&bytes, 3 * one).len(), 3);
        let cut = details.render(&bytes, 3 * one - 1);
        assert_eq!(cut.len(), 3, "{cut:?}");
        assert_eq!(
            cut[2],
            format!(
                "(1 more details not shown: their JSON would be over {} bytes)",
                3 * one - 1
            )
        );
        assert_eq!(
            details.render(&bytes, 10),
            ["(3 more details not shown: their JSON would be over 10 bytes)"]
        );
    }

    #[test]
    fn standard_details_become_readable_lines() {
        let bytes = status(&[
            (
                "google.rpc.BadRequest",
                r#"{"field_violations":[{"field":"page_size","description":"must be at most 50","reason":"TOO_BIG"},{"field":"query","description":"empty"}]}"#,
            ),
            (
                "google.rpc.ErrorInfo",
                r#"{"reason":"PAGE_SIZE","domain":"catalog.demo","metadata":{"max":"50"}}"#,
            ),
            ("google.rpc.RetryInfo", r#"{"retry_delay":"1.500s"}"#),
            (
                "google.rpc.PreconditionFailure",
                r#"{"violations":[{"type":"STOCK","subject":"SKU-1","description":"sold out"}]}"#,
            ),
            (
                "google.rpc.QuotaFailure",
                r#"{"violations":[{"subject":"project:7","description":"daily limit"}]}"#,
            ),
            (
                "google.rpc.ResourceInfo",
                r#"{"resource_type":"item","resource_name":"99","owner":"catalog","description":"not found"}"#,
            ),
            (
                "google.rpc.Help",
                r#"{"links":[{"description":"API docs","url":"https://example.com/docs"}]}"#,
            ),
            (
                "google.rpc.LocalizedMessage",
                r#"{"locale":"en-US","message":"Page too large"}"#,
            ),
            (
                "google.rpc.DebugInfo",
                r#"{"detail":"stack","stack_entries":["a.rs:1","b.rs:2"]}"#,
            ),
            (
                "google.rpc.RequestInfo",
                r#"{"request_id":"r-1","serving_data":"node-3"}"#,
            ),
        ]);
        assert_eq!(
            render(&bytes),
            [
                "BadRequest: field `page_size`: must be at most 50 [TOO_BIG]; field `query`: empty",
                "ErrorInfo: reason PAGE_SIZE in domain catalog.demo (max=50)",
                "RetryInfo: retry after 1.500s",
                "PreconditionFailure: STOCK SKU-1: sold out",
                "QuotaFailure: project:7: daily limit",
                "ResourceInfo: item 99 (owner catalog): not found",
                "Help: API docs: https://example.com/docs",
                "LocalizedMessage: [en-US] Page too large",
                "DebugInfo: stack a.rs:1 / b.rs:2",
                "RequestInfo: request r-1 node-3",
            ]
        );
    }

    #[test]
    fn base64_trailers_unknown_types_and_garbage() {
        let bytes = status(&[("google.rpc.RetryInfo", r#"{"retry_delay":"2s"}"#)]);
        let text = base64::engine::general_purpose::STANDARD.encode(&bytes);
        assert_eq!(render(text.as_bytes()), ["RetryInfo: retry after 2s"]);
        let no_pad = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&bytes);
        assert_eq!(render(no_pad.as_bytes()), ["RetryInfo: retry after 2s"]);
        assert_eq!(
            render(&[0xff, 0xff]),
            ["(grpc-status-details-bin could not be decoded as google.rpc.Status)"]
        );
        // An Any whose type is not in the pool: Status with details[0] = {type_url: x.Custom}.
        let custom = [
            0x1a, 0x0f, 0x0a, 0x0d, b't', b'y', b'p', b'e', b'.', b'x', b'/', b'x', b'.', b'C', b'u', b's', b't',
        ];
        assert_eq!(render(&custom), ["detail of type type.x/x.Cust (not decoded)"]);
    }
}

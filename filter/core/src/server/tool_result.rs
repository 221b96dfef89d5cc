//! Tool results: how a call ended, in the words and structured content an MCP client reads.
//! Success carries the response as JSON twice (text and `structuredContent`); any failure (a
//! gRPC status, a response too large or undecodable, a deadline, a call never started) is a
//! tool error worded like a gRPC status, with the upstream's error details line by line.

use std::time::Duration;

use serde_json::Value;

use super::reply::{Reply, RpcResponse};
use super::Server;
use crate::catalog::Tool;
use crate::eras::Era;
use crate::grpc::call_end::{CallEnd, GrpcReply};
use crate::grpc::status;
use crate::grpc::status::{
    readable_message, status_name, DEADLINE_EXCEEDED, INTERNAL, OK, RESOURCE_EXHAUSTED, UNAVAILABLE,
};
use crate::observe::Observations;
use crate::proto_json::render::{render, write_string, RenderError};
use crate::upstream::UpstreamCall;
use crate::wrapped_root::wrap_content;

impl Server {
    /// Files the tool result of a call that has ended into its reply, and notes its gRPC
    /// status and upstream time in `observed`. `now` is the host's clock, as for
    /// [`Reply::started`].
    pub(crate) fn file(
        &self,
        reply: &mut Reply,
        call: &UpstreamCall,
        end: CallEnd<'_>,
        now: Duration,
        observed: &mut Observations,
    ) {
        if call.task.is_some() {
            return self.file_task_step(reply, call, end, now, observed);
        }
        let (status, outcome) = self.outcome(&call.tool, end);
        observed.call_ended(&call.tool, status, call.upstream_time(now));
        let result = match &outcome {
            Ok(content) => ToolResult::success(content),
            Err(text) => ToolResult::error(text),
        };
        reply.fill(call.slot, self.tool_result(call.era, &call.request_id, &result));
    }

    /// How a call that ended as `end` went: its gRPC status, and its structured content as
    /// JSON text, or the words of its failure.
    pub(super) fn outcome(&self, tool: &Tool, end: CallEnd<'_>) -> (u32, Result<String, String>) {
        match end {
            CallEnd::Replied(grpc) => self.content_or_failure(tool, grpc),
            CallEnd::TooLarge { size } => {
                let limit = self.limits.max_response_bytes;
                let message =
                    format!("the response has {size} bytes; the limit is {limit} (limits.max_response_bytes)");
                failure(tool, RESOURCE_EXHAUSTED, &message)
            }
            CallEnd::DeadlinePassed => {
                let message = format!("no answer within the {} ms deadline", tool.timeout.as_millis());
                failure(tool, DEADLINE_EXCEEDED, &message)
            }
            CallEnd::NotStarted { reason } => {
                let message = format!("the call to cluster {:?} could not be started: {reason}", tool.cluster);
                failure(tool, UNAVAILABLE, &message)
            }
            CallEnd::Reset => {
                let message = "the connection to the upstream failed or was reset before a whole answer came";
                failure(tool, UNAVAILABLE, message)
            }
            CallEnd::Malformed { problem } => failure(tool, INTERNAL, problem),
            CallEnd::HttpError { status, body } => {
                let mut message = format!("the upstream answered HTTP {status} instead of a gRPC status");
                // What the answer said, if it is a line of text (Envoy's own words, say).
                let said = String::from_utf8_lossy(body);
                let said = said.lines().next().unwrap_or_default().trim();
                if !said.is_empty() && said.len() <= 200 && !said.chars().any(char::is_control) {
                    message.push_str(": ");
                    message.push_str(said);
                }
                failure(tool, status::of_http(status), &message)
            }
        }
    }

    /// The structured content of a successful call, as JSON text; or the words for a failure.
    /// With the call's gRPC status (INTERNAL for a response that cannot be decoded).
    fn content_or_failure(&self, tool: &Tool, grpc: GrpcReply<'_>) -> (u32, Result<String, String>) {
        if grpc.status == OK {
            return match render(tool.response_plan(), grpc.body, self.limits.rendered_bytes()) {
                Ok(content) => (OK, Ok(wrap_content(tool.wrap_output, content))),
                Err(RenderError::Invalid(why)) => (
                    INTERNAL,
                    Err(format!(
                        "{} answered with a response that could not be decoded: {why}",
                        rpc_name(tool)
                    )),
                ),
                Err(RenderError::TooLarge { limit }) => {
                    let message = format!(
                        "the response's JSON would be over {limit} bytes (limits.max_rendered_bytes): \
                         fields left out are written at their defaults; ask for less"
                    );
                    failure(tool, RESOURCE_EXHAUSTED, &message)
                }
            };
        }
        let message = grpc
            .message
            .map(|bytes| readable_message(&String::from_utf8_lossy(bytes)))
            .unwrap_or_default();
        let mut text = grpc_failure_text(tool, grpc.status, &message);
        if let (Some(details), Some(renderer)) = (grpc.details, &self.status_details) {
            for line in renderer.render(details, self.limits.rendered_bytes()) {
                text.push_str("\n- ");
                text.push_str(&line);
            }
        }
        (grpc.status, Err(text))
    }

    /// A `tools/call` answer; modern results carry `resultType` and the server's identity.
    /// Written as text: every successful call comes through here, and the structured
    /// content is already JSON text.
    pub(super) fn tool_result(&self, era: Era, id: &Value, result: &ToolResult<'_>) -> RpcResponse {
        RpcResponse::written(id, result.json_len(), |body| {
            self.write_tool_result(body, result, era == Era::Modern, None);
        })
    }

    /// A `CallToolResult` as JSON text: see [`Self::write_tool_result`].
    pub(super) fn tool_result_json(&self, result: &ToolResult<'_>, modern: bool, legacy_meta: Option<&str>) -> String {
        let mut json = String::with_capacity(result.json_len());
        self.write_tool_result(&mut json, result, modern, legacy_meta);
        json
    }

    /// Writes a `CallToolResult` as JSON text: modern results carry `resultType` and the
    /// server's identity; a legacy one may carry `_meta` (`legacy_meta`, an object's JSON: the
    /// task a 2025-11-25 `tasks/result` belongs to).
    fn write_tool_result(&self, json: &mut String, result: &ToolResult<'_>, modern: bool, legacy_meta: Option<&str>) {
        json.push_str(r#"{"content":[{"type":"text","text":"#);
        write_string(json, result.text);
        json.push_str("}]");
        if let Some(structured) = result.structured {
            json.push_str(r#","structuredContent":"#);
            json.push_str(structured);
        }
        json.push_str(if result.is_error {
            r#","isError":true"#
        } else {
            r#","isError":false"#
        });
        if modern {
            json.push_str(r#","resultType":"complete""#);
        }
        match (result.retry_after_ms, modern, legacy_meta) {
            (None, true, _) => {
                json.push_str(r#","_meta":"#);
                json.push_str(&self.result_meta);
            }
            (None, false, Some(meta)) => {
                json.push_str(r#","_meta":"#);
                json.push_str(meta);
            }
            (None, false, None) => {}
            (Some(ms), modern, _) => {
                json.push_str(r#","_meta":{""#);
                json.push_str(RETRY_AFTER_META);
                json.push_str(r#"":"#);
                json.push_str(itoa::Buffer::new().format(ms));
                // The server's identity after it, in the modern era: `{"io…/serverInfo": …}`
                // without its opening brace.
                match modern {
                    true => {
                        json.push(',');
                        json.push_str(self.result_meta.get(1..).unwrap_or("}"));
                    }
                    false => json.push('}'),
                }
            }
        }
        json.push('}');
    }
}

pub(super) fn rpc_name(tool: &Tool) -> String {
    format!("{}/{}", tool.service_name(), tool.method_name())
}

/// A call that failed with `status`, and its words.
pub(super) fn failure(tool: &Tool, status: u32, message: &str) -> (u32, Result<String, String>) {
    (status, Err(grpc_failure_text(tool, status, message)))
}

/// `Service/Method failed with gRPC status NAME (code): message`, with a readable message
/// (a wire `grpc-message` is decoded by the caller).
pub(super) fn grpc_failure_text(tool: &Tool, status: u32, message: &str) -> String {
    let mut text = format!(
        "{} failed with gRPC status {} ({status})",
        rpc_name(tool),
        status_name(status)
    );
    if !message.is_empty() {
        text.push_str(": ");
        text.push_str(message);
    }
    text
}

/// The `_meta` key of a rate-limited call's result: the milliseconds after which a retry may
/// pass.
pub const RETRY_AFTER_META: &str = "io.switchblade/retryAfterMs";

/// A tool result: a success carries its content as JSON text, twice (as text, and as
/// `structuredContent`); an error carries only words.
pub(super) struct ToolResult<'a> {
    text: &'a str,
    structured: Option<&'a str>,
    is_error: bool,
    /// A call refused over a rate limit: when to retry, in `_meta`.
    retry_after_ms: Option<u64>,
}

impl<'a> ToolResult<'a> {
    pub(super) fn success(content_json: &'a str) -> Self {
        ToolResult {
            text: content_json,
            structured: Some(content_json),
            is_error: false,
            retry_after_ms: None,
        }
    }

    pub(super) fn error(text: &'a str) -> Self {
        ToolResult {
            text,
            structured: None,
            is_error: true,
            retry_after_ms: None,
        }
    }

    /// About how long its JSON is: the text escaped (a quote or two per key of a structured
    /// result's copy), the structured content, and room for the rest.
    fn json_len(&self) -> usize {
        2 * self.text.len() + self.structured.map_or(0, str::len) + 160
    }

    /// With the time after which a retry may pass, in `_meta`.
    pub(super) fn retry_after(self, ms: u64) -> Self {
        ToolResult {
            retry_after_ms: Some(ms),
            ..self
        }
    }

    /// A failure that still carries what came before it (a stream's messages).
    pub(super) fn error_with_content(text: &'a str, content_json: &'a str) -> Self {
        ToolResult {
            text,
            structured: Some(content_json),
            is_error: true,
            retry_after_ms: None,
        }
    }
}

//! The tool result of a call whose method answers with a stream: its messages, gathered, and how
//! the stream ended. A bound or the deadline that stops it is not a failure; a stream the
//! upstream ends with a non-OK status, or that breaks, is a tool error that says how many
//! messages came first, and still carries them.

use std::time::Duration;

use super::reply::Reply;
use super::tool_result::{failure, rpc_name, ToolResult};
use super::Server;
use crate::catalog::Tool;
use crate::grpc::call_end::CallEnd;
use crate::grpc::status::{INTERNAL, OK, RESOURCE_EXHAUSTED};
use crate::grpc::stream::{EndReason, StreamCollector};
use crate::observe::Observations;
use crate::proto_json::render::{render, RenderError};
use crate::streams::{END, MESSAGES};
use crate::upstream::UpstreamCall;

impl Server {
    /// Files the tool result of a stream of answers that has ended as `end` (its close: a
    /// status, or how it failed), with the messages `stream` gathered.
    pub(super) fn file_stream(
        &self,
        reply: &mut Reply,
        call: &UpstreamCall,
        end: CallEnd<'_>,
        stream: &StreamCollector,
        now: Duration,
        observed: &mut Observations,
    ) {
        let tool = &call.tool;
        let count = stream.messages().len();
        let deadline_passed = matches!(end, CallEnd::DeadlinePassed);
        // How it ended: a reason (a success), or a failure's status and words.
        let ending = match stream.end(deadline_passed) {
            Err(problem) => Err(failure(tool, INTERNAL, problem)),
            Ok(EndReason::Complete) => match end {
                CallEnd::Replied(grpc) if grpc.status == OK => Ok(EndReason::Complete),
                other => Err(self.outcome(tool, other)),
            },
            Ok(reason) => Ok(reason),
        };
        let reason = ending.as_ref().map_or(EndReason::Complete, |reason| *reason);
        let content = match self.stream_content(tool, stream, reason) {
            Ok(content) => content,
            Err((status, text)) => {
                observed.call_ended(tool, status, call.upstream_time(now));
                let result = ToolResult::error(&text);
                return reply.fill(call.slot, self.tool_result(call.era, &call.request_id, &result));
            }
        };
        let (status, result_text) = match &ending {
            Ok(_) => (OK, None),
            Err((status, outcome)) => {
                let words = outcome.as_ref().err().cloned().unwrap_or_default();
                let plural = if count == 1 { "" } else { "s" };
                (
                    *status,
                    Some(format!("{words} (after {count} message{plural}, in structuredContent)")),
                )
            }
        };
        observed.call_ended(tool, status, call.upstream_time(now));
        let result = match &result_text {
            None => ToolResult::success(&content),
            Some(text) => ToolResult::error_with_content(text, &content),
        };
        reply.fill(call.slot, self.tool_result(call.era, &call.request_id, &result));
    }

    /// `{"messages": [...], "end": {"reason", "count"}}` as JSON text, every message rendered
    /// within the render bound (`limits.max_rendered_bytes`, over all of them); or the failure
    /// that stopped it.
    fn stream_content(
        &self,
        tool: &Tool,
        stream: &StreamCollector,
        reason: EndReason,
    ) -> Result<String, (u32, String)> {
        let plan = tool.response_plan();
        let limit = self.limits.rendered_bytes();
        let mut json = String::with_capacity(64);
        json.push_str(&format!(r#"{{"{MESSAGES}":["#));
        for (index, message) in stream.messages().iter().enumerate() {
            let left = limit.saturating_sub(json.len());
            let rendered = render(plan, message, left).map_err(|error| match error {
                RenderError::Invalid(why) => {
                    let words = format!(
                        "{} answered with a message that could not be decoded: {why}",
                        rpc_name(tool)
                    );
                    (INTERNAL, words)
                }
                RenderError::TooLarge { .. } => {
                    let message = format!(
                        "the stream's JSON would be over {limit} bytes (limits.max_rendered_bytes) by message {index}: \
                         fields left out are written at their defaults; ask for fewer or smaller messages"
                    );
                    let (status, text) = failure(tool, RESOURCE_EXHAUSTED, &message);
                    (status, text.err().unwrap_or_default())
                }
            })?;
            if index > 0 {
                json.push(',');
            }
            json.push_str(&rendered);
        }
        json.push_str(&format!(
            r#"],"{END}":{{"reason":"{}","count":{}}}}}"#,
            reason.label(),
            stream.messages().len()
        ));
        Ok(json)
    }
}

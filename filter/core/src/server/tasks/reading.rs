//! What an Operation says, as the gateway tells it: a done operation as a tool result (its
//! response unpacked with the descriptor pool, or its error as a tool error), a running one's
//! status words and task view, and a failed `google.longrunning.Operations` call.

use super::TaskStep;
use crate::catalog::Tool;
use crate::grpc::call_end::CallEnd;
use crate::grpc::status::{readable_message, CANCELLED, INTERNAL, OK, RESOURCE_EXHAUSTED};
use crate::observe::TaskOutcome;
use crate::proto_json::render::{render, RenderError, RenderPlan};
use crate::server::tool_result::{grpc_failure_text, rpc_name, ToolResult};
use crate::server::Server;
use crate::tasks::operation::{Operation, State};
use crate::tasks::{wall_clock_ms, TaskStatus, TaskView};
use crate::upstream::UpstreamCall;
use crate::wrapped_root::wrap_content;

/// A done operation as a tool result: its structured content, or the words of its failure.
pub(super) struct Finished {
    pub(super) outcome: TaskOutcome,
    pub(super) content: Result<String, String>,
}

impl Finished {
    pub(super) fn status(&self) -> TaskStatus {
        match self.outcome {
            TaskOutcome::Cancelled => TaskStatus::Cancelled,
            _ => TaskStatus::Completed,
        }
    }

    pub(super) fn tool_result(&self) -> ToolResult<'_> {
        match &self.content {
            Ok(content) => ToolResult::success(content),
            Err(text) => ToolResult::error(text),
        }
    }
}

impl Server {
    /// The Operation a `GetOperation` answered, or its failure: a status and words.
    pub(super) fn read_operation(&self, call: &UpstreamCall, end: CallEnd<'_>) -> Result<Operation, (u32, String)> {
        match end {
            CallEnd::Replied(grpc) if grpc.status == OK => Operation::decode_bytes(grpc.body).map_err(|why| {
                (
                    INTERNAL,
                    format!("google.longrunning.Operations/GetOperation answered with a response that could not be decoded: {why}"),
                )
            }),
            other => Err(self.operations_failure(&call.tool, "GetOperation", other)),
        }
    }

    /// How a call to the Operations service failed, in the words of a tool's failure, naming
    /// that method (`outcome` words every failure after the tool's own method).
    pub(super) fn operations_failure(&self, tool: &Tool, method: &str, end: CallEnd<'_>) -> (u32, String) {
        let (status, outcome) = self.outcome(tool, end);
        let text = outcome.err().unwrap_or_default();
        let text = text.replacen(&rpc_name(tool), &format!("google.longrunning.Operations/{method}"), 1);
        (status, text)
    }

    /// The result of a done operation.
    pub(super) fn finished(&self, tool: &Tool, operation: &Operation) -> Finished {
        let Some(task) = &tool.task else {
            return Finished {
                outcome: TaskOutcome::UpstreamError,
                content: Err(format!("{} is not a task tool", tool.name)),
            };
        };
        match operation.state() {
            State::Running { .. } => Finished {
                outcome: TaskOutcome::Working,
                content: Err(format!("operation {} is still running", operation.name)),
            },
            State::Succeeded(response) => {
                let expected = task.operation.response.full_name();
                let bytes = match response {
                    Some(any) if any.type_name() == expected => any.value.as_slice(),
                    Some(any) => {
                        let text = format!(
                            "{} finished operation {} with a response of type {}, not {expected}, which the tool's outputSchema describes",
                            rpc_name(tool),
                            operation.name,
                            any.type_url
                        );
                        return Finished {
                            outcome: TaskOutcome::UpstreamError,
                            content: Err(grpc_failure_text(tool, INTERNAL, &text)),
                        };
                    }
                    // A service that gives no result: the response type with every field unset.
                    None => &[],
                };
                let content = match render(task.response_plan(), bytes, self.limits.rendered_bytes()) {
                    Ok(content) => Ok(wrap_content(tool.wrap_output, content)),
                    Err(RenderError::Invalid(why)) => Err(format!(
                        "{} finished operation {} with a response that could not be decoded: {why}",
                        rpc_name(tool),
                        operation.name
                    )),
                    Err(RenderError::TooLarge { limit }) => Err(grpc_failure_text(
                        tool,
                        RESOURCE_EXHAUSTED,
                        &format!(
                            "the operation's response would be over {limit} bytes of JSON (limits.max_rendered_bytes)"
                        ),
                    )),
                };
                let outcome = match content {
                    Ok(_) => TaskOutcome::Completed,
                    Err(_) => TaskOutcome::UpstreamError,
                };
                Finished { outcome, content }
            }
            State::Failed { code, message, status } => {
                let mut text = grpc_failure_text(tool, code, &readable_message(&message));
                if let Some(renderer) = &self.status_details {
                    for line in renderer.render(status, self.limits.rendered_bytes()) {
                        // A status without details says so in the renderer's words: skip those.
                        if line.starts_with('(') {
                            continue;
                        }
                        text.push_str("\n- ");
                        text.push_str(&line);
                    }
                }
                text.push_str(&format!("\n(operation {})", operation.name));
                Finished {
                    outcome: match code {
                        CANCELLED => TaskOutcome::Cancelled,
                        _ => TaskOutcome::OperationError,
                    },
                    content: Err(text),
                }
            }
        }
    }

    /// The task as a `tasks/get` shows it.
    pub(super) fn view<'a>(
        &self,
        step: &'a TaskStep,
        operation: &Operation,
        tool: &Tool,
        finished: Option<&Finished>,
    ) -> TaskView<'a> {
        let now = wall_clock_ms();
        let (task_id, created_ms) = step
            .task
            .as_ref()
            .map_or(("", now), |(id, created)| (id.as_str(), *created));
        let (status, status_message) = match finished {
            None => (TaskStatus::Working, self.running_words(tool, operation)),
            Some(done) => (
                done.status(),
                match &done.content {
                    Ok(_) => format!("Operation {} is done.", operation.name),
                    Err(text) => text.lines().next().unwrap_or_default().to_owned(),
                },
            ),
        };
        TaskView {
            task_id,
            status,
            status_message: Some(status_message),
            created_ms,
            updated_ms: now,
            ttl_ms: self.tasks.ttl_ms,
            poll_interval_ms: self.tasks.poll_interval_ms,
        }
    }

    /// A running operation's status message: its metadata as JSON, when its type is known.
    pub(super) fn running_words(&self, tool: &Tool, operation: &Operation) -> String {
        let State::Running { metadata } = operation.state() else {
            return format!("Operation {} is done.", operation.name);
        };
        let pool = tool.method.parent_pool();
        let rendered = metadata.and_then(|any| {
            let descriptor = pool.get_message_by_name(any.type_name())?;
            render(&RenderPlan::new(&descriptor), &any.value, self.limits.rendered_bytes()).ok()
        });
        match (metadata, rendered) {
            (_, Some(json)) => format!("Operation {} is running: {json}", operation.name),
            (Some(any), None) => format!(
                "Operation {} is running (its metadata, of type {}, is not in the descriptor set).",
                operation.name, any.type_url
            ),
            (None, None) => format!("Operation {} is running.", operation.name),
        }
    }
}

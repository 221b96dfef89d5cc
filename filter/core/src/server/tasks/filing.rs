//! What each call in a task's life answers, by the step it was and the request it serves: the
//! task at once, the task's status, the tool result of a done operation, or the next call (a
//! poll after the interval, or `CancelOperation` after a 2025-11-25 check).
//!
//! An operation done with an error is `completed` with a tool error (`isError`, the status and
//! its details as for unary calls), never `failed`: that status is for JSON-RPC errors, and
//! the 2026-07-28 extension says so outright. One done with CANCELLED is `cancelled`.

use std::time::Duration;

use serde_json::{json, Map, Value};

use super::{operations_redirect, Purpose, Stage, TaskStep};
use crate::catalog::Tool;
use crate::eras::{Era, SERVER_INFO_META};
use crate::grpc::call_end::CallEnd;
use crate::grpc::status::{readable_message, CANCELLED, INTERNAL, NOT_FOUND, OK, RESOURCE_EXHAUSTED};
use crate::jsonrpc::{RpcError, INTERNAL_ERROR, INVALID_PARAMS};
use crate::observe::{Observations, TaskOutcome};
use crate::proto_json::render::{render, RenderError};
use crate::server::reply::{Answer, Reply};
use crate::server::tool_result::{grpc_failure_text, rpc_name, ToolResult};
use crate::server::Server;
use crate::tasks::operation::{name_request, Operation, State};
use crate::tasks::task_id::{caller_digest, TaskId};
use crate::tasks::{wall_clock_ms, TaskStatus, TaskView, IMMEDIATE_RESPONSE_META, RELATED_TASK_META};
use crate::upstream::UpstreamCall;
use crate::wrapped_root::wrap_content;

/// A done operation as a tool result: its structured content, or the words of its failure.
struct Finished {
    outcome: TaskOutcome,
    content: Result<String, String>,
}

impl Finished {
    fn status(&self) -> TaskStatus {
        match self.outcome {
            TaskOutcome::Cancelled => TaskStatus::Cancelled,
            _ => TaskStatus::Completed,
        }
    }

    fn tool_result(&self) -> ToolResult<'_> {
        match &self.content {
            Ok(content) => ToolResult::success(content),
            Err(text) => ToolResult::error(text),
        }
    }
}

impl Server {
    /// Files the end of a call in a task's life into its reply: an answer, or the next call.
    pub(crate) fn file_task_step(
        &self,
        reply: &mut Reply,
        call: &UpstreamCall,
        end: CallEnd<'_>,
        now: Duration,
        observed: &mut Observations,
    ) {
        let Some(step) = call.task.as_deref() else {
            return;
        };
        match step.stage {
            Stage::Start => self.operation_started(reply, call, step, end, now, observed),
            Stage::GetOperation => self.operation_read(reply, call, step, end, now, observed),
            Stage::CancelOperation => self.cancel_sent(reply, call, step, end, observed),
        }
    }

    /// The task tool's method answered: the Operation it started, or a failure (a tool error,
    /// as for any call).
    fn operation_started(
        &self,
        reply: &mut Reply,
        call: &UpstreamCall,
        step: &TaskStep,
        end: CallEnd<'_>,
        now: Duration,
        observed: &mut Observations,
    ) {
        let tool = &call.tool;
        let operation = match end {
            CallEnd::Replied(grpc) if grpc.status == OK => Operation::decode_bytes(grpc.body).map_err(|why| {
                (
                    INTERNAL,
                    format!(
                        "{} answered with a response that could not be decoded: {why}",
                        rpc_name(tool)
                    ),
                )
            }),
            other => {
                let (status, outcome) = self.outcome(tool, other);
                Err((status, outcome.err().unwrap_or_default()))
            }
        };
        let operation = operation.and_then(|operation| {
            if operation.name.is_empty() && !operation.done {
                return Err((
                    INTERNAL,
                    format!(
                        "{} answered with a running operation that has no name, which cannot be followed",
                        rpc_name(tool)
                    ),
                ));
            }
            Ok(operation)
        });
        let operation = match operation {
            Ok(operation) => operation,
            Err((status, text)) => {
                observed.call_ended(tool, status, call.upstream_time(now));
                return self.answer_result(reply, call, &ToolResult::error(&text), None);
            }
        };
        observed.call_ended(tool, OK, call.upstream_time(now));
        if !operation.name.is_empty() {
            observed.operation(&operation.name);
        }
        let method = step.purpose.method();
        let running = matches!(operation.state(), State::Running { .. });
        match step.purpose {
            Purpose::Create { modern } if running || !modern => {
                // 2025-11-25 starts every task `working`, even one whose operation is done.
                let created_ms = wall_clock_ms();
                let task = TaskId {
                    created_ms,
                    tool: tool.name.clone(),
                    operation: operation.name.clone(),
                    caller: caller_digest(&step.identity),
                };
                let signed = self
                    .tasks
                    .keys
                    .as_ref()
                    .ok_or_else(|| "this configuration has no key to sign task ids with (tasks.keys)".to_owned())
                    .and_then(|keys| keys.sign(&task));
                let task_id = match signed {
                    Ok(task_id) => task_id,
                    Err(why) => {
                        let text = format!(
                            "{} started operation {}, but it cannot be a task: {why}",
                            rpc_name(tool),
                            operation.name
                        );
                        observed.task_step(tool, method, TaskOutcome::UpstreamError);
                        return self.answer_result(reply, call, &ToolResult::error(&text), None);
                    }
                };
                observed.task_step(tool, method, TaskOutcome::Created);
                let view = TaskView {
                    task_id: &task_id,
                    status: TaskStatus::Working,
                    status_message: Some(self.running_words(tool, &operation)),
                    created_ms,
                    updated_ms: created_ms,
                    ttl_ms: self.tasks.ttl_ms,
                    poll_interval_ms: self.tasks.poll_interval_ms,
                };
                let result = match modern {
                    true => {
                        let mut result = Map::new();
                        result.insert("resultType".into(), json!("task"));
                        result.extend(view.fields(true));
                        result.insert("_meta".into(), json!({SERVER_INFO_META: self.server_info}));
                        Value::Object(result)
                    }
                    false => json!({
                        "task": view.fields(false),
                        "_meta": {IMMEDIATE_RESPONSE_META: format!(
                            "{} runs as task {task_id} (operation {}); its result comes when the task is completed.",
                            tool.name, operation.name
                        )},
                    }),
                };
                reply.fill(call.slot, Answer::raw(&call.request_id, &result.to_string()));
            }
            Purpose::Create { .. } | Purpose::Wait if !running => {
                let finished = self.finished(tool, &operation);
                observed.task_step(tool, method, finished.outcome);
                self.answer_result(reply, call, &finished.tool_result(), None);
            }
            _ => {
                let until = call.sent_at.unwrap_or(now) + tool.timeout;
                observed.task_step(tool, method, TaskOutcome::Working);
                if !self.poll_again(reply, call, step, &operation.name, until, now) {
                    self.still_running(reply, call, step, &operation.name, observed);
                }
            }
        }
    }

    /// For a host that cannot wake a request later (no timer): every wait of the reply ends
    /// now, as if its deadline had passed, so that the reply is not held for ever.
    pub fn stop_waiting(&self, reply: &mut Reply, observed: &mut Observations) {
        for call in reply.take_scheduled() {
            if let Some(step) = call.task.as_deref() {
                let name = step.operation.clone().unwrap_or_default();
                self.still_running(reply, &call, step, &name, observed);
            }
        }
    }

    /// `GetOperation` answered.
    fn operation_read(
        &self,
        reply: &mut Reply,
        call: &UpstreamCall,
        step: &TaskStep,
        end: CallEnd<'_>,
        now: Duration,
        observed: &mut Observations,
    ) {
        let tool = &call.tool;
        let method = step.purpose.method();
        let name = step.operation.clone().unwrap_or_default();
        let operation = match self.read_operation(call, end) {
            Ok(operation) => operation,
            Err((status, text)) => {
                let outcome = match status {
                    NOT_FOUND => TaskOutcome::NotFound,
                    _ => TaskOutcome::UpstreamError,
                };
                observed.task_step(tool, method, outcome);
                return match step.purpose {
                    Purpose::Wait => self.answer_result(reply, call, &ToolResult::error(&text), None),
                    _ => self.answer_error(reply, call, status, &name, &text),
                };
            }
        };
        let running = matches!(operation.state(), State::Running { .. });
        let finished = (!running).then(|| self.finished(tool, &operation));
        observed.task_step(
            tool,
            method,
            finished.as_ref().map_or(TaskOutcome::Working, |done| done.outcome),
        );
        let related = step.task.as_ref().map(|(task_id, _)| task_id.as_str());
        match (step.purpose, finished) {
            (Purpose::Get { modern }, finished) => {
                let view = self.view(step, &operation, tool, finished.as_ref());
                let mut result = Map::new();
                if modern {
                    result.insert("resultType".into(), json!("complete"));
                }
                result.extend(view.fields(modern));
                if let (true, Some(done)) = (modern, &finished) {
                    if done.status() == TaskStatus::Completed {
                        let inline = self.tool_result_json(&done.tool_result(), true, None);
                        let inline: Value = serde_json::from_str(&inline).unwrap_or(Value::Null);
                        result.insert("result".into(), inline);
                    }
                }
                if modern {
                    result.insert("_meta".into(), json!({SERVER_INFO_META: self.server_info}));
                }
                reply.fill(
                    call.slot,
                    Answer::raw(&call.request_id, &Value::Object(result).to_string()),
                );
            }
            (Purpose::Wait | Purpose::Result, Some(done)) => {
                self.answer_result(reply, call, &done.tool_result(), related);
            }
            (Purpose::Wait | Purpose::Result, None) => {
                let until = step.until.unwrap_or(call.sent_at.unwrap_or(now) + tool.timeout);
                if !self.poll_again(reply, call, step, &name, until, now) {
                    self.still_running(reply, call, step, &name, observed);
                }
            }
            (Purpose::Cancel { .. }, Some(done)) => {
                let error = RpcError::new(
                    &call.request_id,
                    INVALID_PARAMS,
                    format!(
                        "Invalid params: cannot cancel the task: it is already in terminal status '{}'",
                        done.status().word()
                    ),
                );
                reply.fill(call.slot, Answer::error(call.era, &error));
            }
            (Purpose::Cancel { .. }, None) => {
                let next = TaskStep {
                    stage: Stage::CancelOperation,
                    operation: Some(name.clone()),
                    task: step.task.clone(),
                    identity: Vec::new(),
                    ..*step
                };
                let redirect = operations_redirect(tool, Stage::CancelOperation, tool.timeout);
                reply.schedule(call.follow_up(&name_request(&name), redirect, next), now);
            }
            (Purpose::Create { .. }, _) => {}
        }
    }

    /// `CancelOperation` answered: the service took the request (cancellation is cooperative:
    /// the operation may still finish).
    fn cancel_sent(
        &self,
        reply: &mut Reply,
        call: &UpstreamCall,
        step: &TaskStep,
        end: CallEnd<'_>,
        observed: &mut Observations,
    ) {
        let tool = &call.tool;
        let name = step.operation.clone().unwrap_or_default();
        let accepted = match end {
            CallEnd::Replied(grpc) if grpc.status == OK => Ok(()),
            other => Err(self.operations_failure(tool, "CancelOperation", other)),
        };
        if let Err((status, text)) = accepted {
            let outcome = match status {
                NOT_FOUND => TaskOutcome::NotFound,
                _ => TaskOutcome::UpstreamError,
            };
            observed.task_step(tool, step.purpose.method(), outcome);
            return self.answer_error(reply, call, status, &name, &text);
        }
        observed.task_step(tool, step.purpose.method(), TaskOutcome::Cancelled);
        let result = match step.purpose {
            Purpose::Cancel { modern: false } => {
                let now = wall_clock_ms();
                let view = TaskView {
                    task_id: step.task.as_ref().map_or("", |(task_id, _)| task_id),
                    status: TaskStatus::Cancelled,
                    status_message: Some(format!(
                        "Cancellation of operation {name} was requested; the service stops it as it can."
                    )),
                    created_ms: step.task.as_ref().map_or(now, |(_, created)| *created),
                    updated_ms: now,
                    ttl_ms: self.tasks.ttl_ms,
                    poll_interval_ms: self.tasks.poll_interval_ms,
                };
                Value::Object(view.fields(false)).to_string()
            }
            _ => self.modern_ack(),
        };
        reply.fill(call.slot, Answer::raw(&call.request_id, &result));
    }

    /// The Operation a `GetOperation` answered, or its failure: a status and words.
    fn read_operation(&self, call: &UpstreamCall, end: CallEnd<'_>) -> Result<Operation, (u32, String)> {
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
    fn operations_failure(&self, tool: &Tool, method: &str, end: CallEnd<'_>) -> (u32, String) {
        let (status, outcome) = self.outcome(tool, end);
        let text = outcome.err().unwrap_or_default();
        let text = text.replacen(&rpc_name(tool), &format!("google.longrunning.Operations/{method}"), 1);
        (status, text)
    }

    /// The result of a done operation.
    fn finished(&self, tool: &Tool, operation: &Operation) -> Finished {
        let Some(spec) = tool.task.as_ref().map(|task| &task.operation) else {
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
                let expected = spec.response.full_name();
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
                let content = match render(&spec.response, bytes, self.limits.rendered_bytes()) {
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
    fn view<'a>(
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
    fn running_words(&self, tool: &Tool, operation: &Operation) -> String {
        let State::Running { metadata } = operation.state() else {
            return format!("Operation {} is done.", operation.name);
        };
        let pool = tool.method.parent_pool();
        let rendered = metadata.and_then(|any| {
            let descriptor = pool.get_message_by_name(any.type_name())?;
            render(&descriptor, &any.value, self.limits.rendered_bytes()).ok()
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

    /// Schedules the next `GetOperation` after the wait interval, if it falls before `until`;
    /// whether it did.
    fn poll_again(
        &self,
        reply: &mut Reply,
        call: &UpstreamCall,
        step: &TaskStep,
        name: &str,
        until: Duration,
        now: Duration,
    ) -> bool {
        let at = now + self.tasks.wait_poll_interval;
        if at >= until {
            return false;
        }
        let tool = &call.tool;
        let next = TaskStep {
            stage: Stage::GetOperation,
            operation: Some(name.to_owned()),
            task: step.task.clone(),
            until: Some(until),
            identity: Vec::new(),
            ..*step
        };
        let timeout = (until - at).min(tool.timeout);
        let redirect = operations_redirect(tool, Stage::GetOperation, timeout);
        reply.schedule(call.follow_up(&name_request(name), redirect, next), at);
        true
    }

    /// The wait ended with the operation still running: for a `tools/call`, a tool error that
    /// names it; for `tasks/result`, a JSON-RPC error (the task goes on).
    fn still_running(
        &self,
        reply: &mut Reply,
        call: &UpstreamCall,
        step: &TaskStep,
        name: &str,
        observed: &mut Observations,
    ) {
        let tool = &call.tool;
        observed.task_step(tool, step.purpose.method(), TaskOutcome::StillRunning);
        let waited = tool.timeout.as_millis();
        if step.purpose == Purpose::Result {
            let error = RpcError::new(
                &call.request_id,
                INTERNAL_ERROR,
                format!(
                    "Internal error: the task is still working after {waited} ms (the tool's timeout_ms); \
                     call tasks/result again, or poll tasks/get until it is completed"
                ),
            );
            return reply.fill(call.slot, Answer::error(call.era, &error));
        }
        let text = format!(
            "{} is still running after {waited} ms, the tool's deadline: its long-running operation is {name}, \
             and it goes on without this call. A client that declares tasks gets the task at once and can follow it.",
            rpc_name(tool)
        );
        self.answer_result(reply, call, &ToolResult::error(&text), None);
    }

    /// A tool result, as the request's answer (with the task it belongs to, for
    /// `tasks/result`).
    fn answer_result(&self, reply: &mut Reply, call: &UpstreamCall, result: &ToolResult<'_>, related: Option<&str>) {
        let meta = related.map(|task_id| json!({RELATED_TASK_META: {"taskId": task_id}}).to_string());
        let json = self.tool_result_json(result, call.era == Era::Modern, meta.as_deref());
        reply.fill(call.slot, Answer::raw(&call.request_id, &json));
    }

    /// A JSON-RPC error for a task request whose Operations call failed: an operation the
    /// service does not know is an unknown task (`-32602`), anything else an internal error.
    fn answer_error(&self, reply: &mut Reply, call: &UpstreamCall, status: u32, name: &str, text: &str) {
        let error = match status {
            NOT_FOUND => RpcError::new(
                &call.request_id,
                INVALID_PARAMS,
                format!("Invalid params: task not found: the service does not know operation {name} (it may have been deleted): {text}"),
            ),
            _ => RpcError::new(
                &call.request_id,
                INTERNAL_ERROR,
                format!("Internal error: the task's operation {name} could not be read: {text}"),
            ),
        };
        reply.fill(call.slot, Answer::error(call.era, &error));
    }
}

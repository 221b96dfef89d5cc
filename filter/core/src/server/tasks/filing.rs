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
use crate::eras::{Era, SERVER_INFO_META};
use crate::grpc::call_end::CallEnd;
use crate::grpc::status::{INTERNAL, NOT_FOUND, OK};
use crate::jsonrpc::{RpcError, INTERNAL_ERROR, INVALID_PARAMS};
use crate::observe::{Observations, TaskOutcome};
use crate::server::reply::{Reply, RpcResponse};
use crate::server::tool_result::{rpc_name, ToolResult};
use crate::server::Server;
use crate::tasks::operation::{name_request, Operation, State};
use crate::tasks::task_id::{caller_digest, TaskId};
use crate::tasks::{wall_clock_ms, TaskStatus, TaskView, IMMEDIATE_RESPONSE_META, RELATED_TASK_META};
use crate::upstream::UpstreamCall;

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
                reply.fill(call.slot, RpcResponse::raw(&call.request_id, &result.to_string()));
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
                    RpcResponse::raw(&call.request_id, &Value::Object(result).to_string()),
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
                reply.fill(call.slot, RpcResponse::error(call.era, &error));
            }
            (Purpose::Cancel { .. }, None) => {
                let next = TaskStep {
                    stage: Stage::CancelOperation,
                    operation: Some(name.clone()),
                    task: step.task.clone(),
                    identity: step.identity.clone(),
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
        reply.fill(call.slot, RpcResponse::raw(&call.request_id, &result));
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
            identity: step.identity.clone(),
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
            return reply.fill(call.slot, RpcResponse::error(call.era, &error));
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
        reply.fill(call.slot, RpcResponse::raw(&call.request_id, &json));
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
        reply.fill(call.slot, RpcResponse::error(call.era, &error));
    }
}

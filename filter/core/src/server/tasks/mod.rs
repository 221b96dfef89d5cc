//! Long-running operations as MCP tasks, the server's side: what a task tool's `tools/call`
//! is for (a task at once, or the result after waiting), the `tasks/*` methods of each era
//! (here), and what each call in a task's life answers ([`filing`]).
//!
//! Every request about a task is planned from its id alone: the id is checked (made here,
//! for this caller, not expired, for a task tool the caller may call), then one call goes to
//! the Operations service. Nothing is remembered between requests.

mod filing;
mod reading;

pub(crate) use crate::tasks::step::{Purpose, Stage, TaskStep};

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::reply::RpcResponse;
use super::tool_call::call_metadata;
use super::{Handled, RequestContext, Server};
use crate::catalog::{Catalog, Tool};
use crate::config::TasksConfig;
use crate::eras::method_not_found;
use crate::eras::{Era, CLIENT_CAPABILITIES_META, SERVER_INFO_META};
use crate::grpc;
use crate::jsonrpc::{RpcError, INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY};
use crate::observe::Observations;
use crate::proto_json::json_type;
use crate::quota::bucket::Bucket;
use crate::quota::callers::Places;
use crate::tasks::operation::name_request;
use crate::tasks::task_id::{KeyRing, TaskId, TaskRefusal};
use crate::tasks::{iso_time, wall_clock_ms, OPERATIONS_SERVICE, TASKS_EXTENSION, TASKS_VERSION};
use crate::upstream::{Redirect, UpstreamCall};

/// A configuration's tasks: its keys and timings.
#[derive(Debug)]
pub(crate) struct TaskSettings {
    /// `None`: no key to sign with (a configuration checked, not served, without `tasks.keys`).
    keys: Option<KeyRing>,
    poll_interval_ms: u64,
    ttl_ms: u64,
    wait_poll_interval: Duration,
    /// The bound on each task's polls, per caller.
    pub(super) polls: PollLimit,
    /// Whether any tool runs as a task: without one, no `tasks/*` method is served.
    pub(crate) offered: bool,
}

/// `tasks.max_polls_per_second` and `tasks.poll_burst`: a token bucket per task and caller, in
/// a bounded table (as the rate limits keep theirs).
#[derive(Debug)]
pub(super) struct PollLimit {
    pub(super) bucket: Bucket,
    pub(super) per_second: u32,
    pub(super) burst: u32,
    pub(super) places: Places,
}

/// The selector the polls' table is kept under, beside the rate limits' rules.
pub(super) const POLLS: &str = "task-polls";

impl TaskSettings {
    pub(crate) fn new(config: &TasksConfig, max_callers: u32, catalog: &Catalog) -> Self {
        let configured = config.decoded_keys();
        let keys = match (configured.is_empty(), &config.process_key) {
            (false, _) => KeyRing::new(configured),
            (true, Some(key)) => KeyRing::new(vec![key.0.to_vec()]),
            (true, None) => None,
        };
        TaskSettings {
            keys,
            poll_interval_ms: config.poll_interval_ms,
            ttl_ms: config.ttl_ms,
            wait_poll_interval: Duration::from_millis(config.wait_poll_interval_ms),
            polls: PollLimit {
                bucket: Bucket::new(f64::from(config.polls_per_second()), config.poll_burst_size()),
                per_second: config.polls_per_second(),
                burst: config.poll_burst_size(),
                places: Places::new(config.process_key.as_ref().map(|key| &key.0), max_callers),
            },
            offered: catalog.tools().any(|tool| tool.task.is_some()),
        }
    }
}

/// A call to the Operations service for a task tool, with `timeout`.
pub(crate) fn operations_redirect(tool: &Tool, stage: Stage, timeout: Duration) -> Redirect {
    let cluster = tool
        .task
        .as_ref()
        .map_or_else(|| tool.cluster.clone(), |task| task.operations_cluster.clone());
    Redirect {
        cluster,
        service: OPERATIONS_SERVICE,
        method: stage.method(),
        path: stage.path(),
        timeout,
        grpc_timeout: grpc::timeout(timeout),
    }
}

impl Server {
    /// What a `tools/call` of `tool` is for, if it is a task tool: a task, or the result after
    /// waiting. A 2025-11-25 `params.task` on a tool that is not a task tool is refused, as
    /// that spec asks (`-32601`).
    pub(super) fn call_purpose(
        &self,
        context: &RequestContext<'_>,
        id: &Value,
        tool: &Tool,
        params: &Map<String, Value>,
    ) -> Result<Option<TaskStep>, RpcError> {
        let declared = match context.era {
            Era::Modern => declares_extension(params),
            Era::Legacy(TASKS_VERSION) => match params.get("task") {
                None | Some(Value::Null) => false,
                Some(Value::Object(_)) => true,
                Some(other) => {
                    let message = format!("Invalid params: `task` must be an object, got {}", json_type(other));
                    return Err(RpcError::new(id, INVALID_PARAMS, message));
                }
            },
            Era::Legacy(_) => false,
        };
        if tool.task.is_none() {
            if declared && context.era == Era::Legacy(TASKS_VERSION) {
                return Err(RpcError::new(
                    id,
                    METHOD_NOT_FOUND,
                    format!(
                        "Method not found: tool {:?} does not run as a task (its execution.taskSupport is forbidden); call it without `task`",
                        tool.name
                    ),
                ));
            }
            return Ok(None);
        }
        let purpose = match declared {
            true => Purpose::Create {
                modern: context.era == Era::Modern,
            },
            false => Purpose::Wait,
        };
        Ok(Some(TaskStep {
            purpose,
            stage: Stage::Start,
            operation: None,
            task: None,
            until: None,
            identity: context.caller.identity().to_vec(),
        }))
    }

    /// `tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/list` and `tasks/update`, as each era
    /// has them.
    pub(super) fn task_request(
        &self,
        context: &RequestContext<'_>,
        id: &Value,
        method: &str,
        params: &Map<String, Value>,
        slot: usize,
        observed: &mut Observations,
    ) -> Result<Handled, RpcError> {
        let era = context.era;
        let served = self.tasks.offered
            && match era {
                Era::Modern => matches!(method, "tasks/get" | "tasks/cancel" | "tasks/update"),
                Era::Legacy(version) => {
                    version == TASKS_VERSION && matches!(method, "tasks/get" | "tasks/result" | "tasks/cancel")
                }
            };
        if method == "tasks/list" && self.tasks.offered && era == Era::Legacy(TASKS_VERSION) {
            return Err(RpcError::new(
                id,
                METHOD_NOT_FOUND,
                "Method not found: tasks/list is not served (capabilities.tasks has no `list`): this gateway keeps no tasks, \
                 each is its id alone, so it has no list to give; keep the taskId each tools/call returned",
            ));
        }
        if !served {
            return Err(method_not_found(era, id, method));
        }
        if era == Era::Modern && !declares_extension(params) {
            observed.task_refused(TaskRefusal::Undeclared);
            return Err(RpcError::new(
                id,
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                format!(
                    "Missing required client capability: {method} needs the {TASKS_EXTENSION} extension, declared in params._meta[\"{CLIENT_CAPABILITIES_META}\"].extensions"
                ),
            )
            .with_data(json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})));
        }
        let Some(task_id) = params.get("taskId").and_then(Value::as_str) else {
            return Err(RpcError::new(
                id,
                INVALID_PARAMS,
                format!("Invalid params: {method} needs `taskId`, a string"),
            ));
        };
        let (task, tool) = self.check_task_id(context, id, task_id, observed)?;
        observed.operation(&task.operation);
        if method == "tasks/update" {
            // A gateway task never asks for input: there is nothing to take.
            return Ok(Handled::Response(RpcResponse::raw(id, &self.modern_ack())));
        }
        let modern = era == Era::Modern;
        let (purpose, stage) = match method {
            "tasks/get" => (Purpose::Get { modern }, Stage::GetOperation),
            "tasks/result" => (Purpose::Result, Stage::GetOperation),
            _ if modern => (Purpose::Cancel { modern }, Stage::CancelOperation),
            _ => (Purpose::Cancel { modern }, Stage::GetOperation),
        };
        let step = TaskStep {
            purpose,
            stage,
            operation: Some(task.operation.clone()),
            task: Some((task_id.to_owned(), task.created_ms)),
            until: None,
            identity: context.caller.identity().to_vec(),
        };
        let call = UpstreamCall::new(
            Arc::clone(&tool),
            id.clone(),
            era,
            slot,
            grpc::frame::grpc_frame(&name_request(&task.operation)),
            // The Operations service's calls carry the tool's fixed metadata: they have no
            // arguments of the tool's to read.
            call_metadata(&tool, None, context.headers, context.caller),
        )
        .redirected(operations_redirect(&tool, stage, tool.timeout), step);
        Ok(Handled::Call(call))
    }

    /// The task a task id names, and its tool, if the id is one this configuration made, for
    /// this caller, not expired, for a task tool the caller may call; `-32602` otherwise.
    fn check_task_id(
        &self,
        context: &RequestContext<'_>,
        id: &Value,
        text: &str,
        observed: &mut Observations,
    ) -> Result<(TaskId, Arc<Tool>), RpcError> {
        let Some(keys) = &self.tasks.keys else {
            return Err(RpcError::new(
                id,
                INTERNAL_ERROR,
                "Internal error: this configuration has no key to check task ids with (tasks.keys)",
            ));
        };
        let mut refuse = |refusal: TaskRefusal, words: String| {
            observed.task_refused(refusal);
            RpcError::new(id, INVALID_PARAMS, format!("Invalid params: {words}"))
        };
        let task = keys.verify(text, context.caller.identity()).map_err(|refusal| {
            let words = match refusal {
                TaskRefusal::OtherCaller => {
                    "this task was created by another caller; poll it with the credentials that created it".to_owned()
                }
                _ => "unknown task id: this server did not issue it, or it was altered".to_owned(),
            };
            refuse(refusal, words)
        })?;
        let expires = task.created_ms.saturating_add(self.tasks.ttl_ms);
        if expires < wall_clock_ms() {
            return Err(refuse(
                TaskRefusal::Expired,
                format!(
                    "the task has expired: it was created at {} and lived {} ms (ttlMs)",
                    iso_time(task.created_ms),
                    self.tasks.ttl_ms
                ),
            ));
        }
        let tool = self
            .catalog
            .get(&task.tool)
            .filter(|tool| tool.task.is_some() && context.caller.may_call(self.access.as_ref(), &tool.name));
        match tool {
            Some(tool) => Ok((task, Arc::clone(tool))),
            None => Err(refuse(
                TaskRefusal::NotATaskTool,
                format!(
                    "the task belongs to tool {:?}, which is not a task tool this server offers you",
                    task.tool
                ),
            )),
        }
    }

    /// A 2026-07-28 result with nothing to say.
    fn modern_ack(&self) -> String {
        json!({"resultType": "complete", "_meta": {SERVER_INFO_META: self.server_info}}).to_string()
    }

    /// Whether tasks are offered, for the capabilities `initialize` and `server/discover`
    /// declare.
    pub(super) fn offers_tasks(&self) -> bool {
        self.tasks.offered
    }
}

/// Whether a 2026-07-28 request declares the tasks extension in its per-request capabilities.
fn declares_extension(params: &Map<String, Value>) -> bool {
    params
        .get("_meta")
        .and_then(|meta| meta.get(CLIENT_CAPABILITIES_META))
        .and_then(|capabilities| capabilities.get("extensions"))
        .and_then(|extensions| extensions.get(TASKS_EXTENSION))
        .is_some_and(Value::is_object)
}

/// The capabilities a server with task tools declares in 2025-11-25: task-augmented
/// `tools/call` and `tasks/cancel`, and no `tasks/list` (it keeps no list).
pub(super) fn legacy_capability() -> Value {
    json!({"cancel": {}, "requests": {"tools": {"call": {}}}})
}

#[cfg(test)]
mod tests;

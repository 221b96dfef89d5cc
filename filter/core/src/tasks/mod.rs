//! Long-running operations as MCP tasks, the host-free parts: which methods are task tools
//! ([`operation_types`]), the task id that carries an operation to its polls and back
//! ([`task_id`]), the Operation on the wire ([`operation`]), and the task as each protocol era
//! writes it ([`TaskView`]). The server's side (the `tasks/*` methods, and what each call to
//! the Operations service answers) is in `server/tasks`.
//!
//! The gateway keeps no task state: a task is its id, which names the operation, the tool, the
//! caller and the creation time under an HMAC, and its status is whatever `GetOperation` says
//! when a client asks. Any Envoy, any worker, answers any poll.

pub mod operation;
pub(crate) mod step;
pub mod task_id;

use prost_reflect::{MessageDescriptor, MethodDescriptor, Value as ProtoValue};
use serde_json::{json, Map, Value};

use crate::config::{ConfigError, OperationTypes};

/// The 2026-07-28 extension a client declares (per request) to be answered with tasks.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// Where a 2025-11-25 `tasks/result` says which task its result belongs to.
pub const RELATED_TASK_META: &str = "io.modelcontextprotocol/related-task";
/// What a 2025-11-25 host may hand the model while the task runs.
pub const IMMEDIATE_RESPONSE_META: &str = "io.modelcontextprotocol/model-immediate-response";
/// The one handshake-era version with tasks.
pub const TASKS_VERSION: &str = "2025-11-25";
pub const OPERATION_MESSAGE: &str = "google.longrunning.Operation";
pub const OPERATIONS_SERVICE: &str = "google.longrunning.Operations";
const OPERATION_INFO: &str = "google.longrunning.operation_info";
/// Milliseconds since the Unix epoch.
pub type EpochMs = u64;

/// The message types of the operation a task tool's method starts.
#[derive(Debug, Clone)]
pub struct OperationSpec {
    /// What `response` holds once the operation is done: the tool's output.
    pub response: MessageDescriptor,
    /// What `metadata` holds while it runs, if declared.
    pub metadata: Option<MessageDescriptor>,
}

/// Whether `method` is a task tool, and its operation's types: a method that returns
/// `google.longrunning.Operation` with types from the configuration (`tools.M.operation`) or
/// from its `google.longrunning.operation_info` option. `selector` names it in errors.
pub fn operation_types(
    method: &MethodDescriptor,
    configured: Option<&OperationTypes>,
    selector: &str,
) -> Result<Option<OperationSpec>, ConfigError> {
    let returns_operation = method.output().full_name() == OPERATION_MESSAGE;
    let streams = method.is_client_streaming() || method.is_server_streaming();
    let at = |key: &str| format!("at `tools.{selector}.operation{key}`");
    if let Some(configured) = configured {
        if !returns_operation || streams {
            return Err(ConfigError(format!(
                "{}: {selector} does not return a google.longrunning.Operation (it returns {}{}), so it cannot run as a task; remove `operation`",
                at(""),
                if method.is_server_streaming() { "a stream of " } else { "" },
                method.output().full_name(),
            )));
        }
        let response = resolve(method, &configured.response_type).ok_or_else(|| {
            ConfigError(format!(
                "{}: {}",
                at(".response_type"),
                unknown_type(&configured.response_type)
            ))
        })?;
        let metadata = match configured.metadata_type.as_deref() {
            None | Some("") => None,
            Some(name) => Some(
                resolve(method, name)
                    .ok_or_else(|| ConfigError(format!("{}: {}", at(".metadata_type"), unknown_type(name))))?,
            ),
        };
        return Ok(Some(OperationSpec { response, metadata }));
    }
    if !returns_operation || streams {
        return Ok(None);
    }
    let Some((response_type, metadata_type)) = operation_info(method) else {
        return Ok(None);
    };
    let option = format!("{selector}'s option (google.longrunning.operation_info)");
    let response = resolve(method, &response_type).ok_or_else(|| {
        ConfigError(format!(
            "{option}: response_type {}; or give the types under `tools.{selector}.operation`",
            unknown_type(&response_type)
        ))
    })?;
    // A metadata type the descriptors lack only costs the words of a running task's status.
    let metadata = resolve(method, &metadata_type);
    Ok(Some(OperationSpec { response, metadata }))
}

/// The `response_type` and `metadata_type` of a method's `operation_info`, if it has one with
/// a response type.
fn operation_info(method: &MethodDescriptor) -> Option<(String, String)> {
    let extension = method.parent_pool().get_extension_by_name(OPERATION_INFO)?;
    let options = method.options();
    if !options.has_extension(&extension) {
        return None;
    }
    let info = options.get_extension(&extension);
    let ProtoValue::Message(info) = info.as_ref() else {
        return None;
    };
    let text = |name: &str| match info.get_field_by_name(name).as_deref() {
        Some(ProtoValue::String(text)) => text.clone(),
        _ => String::new(),
    };
    let response_type = text("response_type");
    (!response_type.is_empty()).then(|| (response_type, text("metadata_type")))
}

/// A message named as `OperationInfo` names one: relative to the method's package, or fully
/// qualified.
fn resolve(method: &MethodDescriptor, name: &str) -> Option<MessageDescriptor> {
    let pool = method.parent_pool();
    let name = name.trim_start_matches('.');
    let package = method.parent_file().package_name().to_owned();
    let relative = (!package.is_empty()).then(|| format!("{package}.{name}"));
    relative
        .and_then(|full| pool.get_message_by_name(&full))
        .or_else(|| pool.get_message_by_name(name))
}

fn unknown_type(name: &str) -> String {
    format!("{name:?} is not a message in the descriptor set (write it fully qualified, like demo.exports.v1.ExportCatalogResponse, or relative to the method's package)")
}

/// A task's status, as both eras spell it. A gateway task is never `failed` (that is for
/// JSON-RPC errors; an operation that fails is `completed` with a tool error) and never
/// `input_required`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    Working,
    Completed,
    /// The operation ended with the status CANCELLED (after `tasks/cancel`, or on its own).
    Cancelled,
}

impl TaskStatus {
    pub fn word(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::Completed => "completed",
            TaskStatus::Cancelled => "cancelled",
        }
    }
}

/// A task as a result shows it.
#[derive(Debug, Clone)]
pub struct TaskView<'a> {
    pub task_id: &'a str,
    pub status: TaskStatus,
    pub status_message: Option<String>,
    pub created_ms: EpochMs,
    /// The gateway keeps no history: the time it last saw the operation, which is now.
    pub updated_ms: EpochMs,
    pub ttl_ms: u64,
    pub poll_interval_ms: u64,
}

impl TaskView<'_> {
    /// The task's fields: 2025-11-25 writes `ttl` and `pollInterval`, the 2026-07-28 extension
    /// `ttlMs` and `pollIntervalMs`.
    pub fn fields(&self, modern: bool) -> Map<String, Value> {
        let (ttl, poll) = match modern {
            true => ("ttlMs", "pollIntervalMs"),
            false => ("ttl", "pollInterval"),
        };
        let mut task = Map::new();
        task.insert("taskId".into(), json!(self.task_id));
        task.insert("status".into(), json!(self.status.word()));
        if let Some(message) = &self.status_message {
            task.insert("statusMessage".into(), json!(message));
        }
        task.insert("createdAt".into(), json!(iso_time(self.created_ms)));
        task.insert("lastUpdatedAt".into(), json!(iso_time(self.updated_ms)));
        task.insert(ttl.into(), json!(self.ttl_ms));
        task.insert(poll.into(), json!(self.poll_interval_ms));
        task
    }
}

/// ISO 8601 (RFC 3339, UTC, milliseconds) for a time in milliseconds since the epoch.
pub fn iso_time(ms: EpochMs) -> String {
    let seconds = i64::try_from(ms / 1000).unwrap_or(i64::MAX);
    let nanos = i32::try_from((ms % 1000) * 1_000_000).unwrap_or(0);
    crate::proto_json::time::format_timestamp(seconds, nanos).unwrap_or_else(|| "9999-12-31T23:59:59Z".to_owned())
}

/// The wall clock, for the creation time a task id carries and its expiry: both are compared
/// across Envoys, so the host's monotonic clock will not do.
pub fn wall_clock_ms() -> EpochMs {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc_3339_in_utc() {
        assert_eq!(iso_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso_time(1_767_225_600_123), "2026-01-01T00:00:00.123Z");
    }

    #[test]
    fn each_era_names_the_timings_its_own_way() {
        let view = TaskView {
            task_id: "t",
            status: TaskStatus::Working,
            status_message: None,
            created_ms: 0,
            updated_ms: 1000,
            ttl_ms: 60_000,
            poll_interval_ms: 500,
        };
        assert_eq!(
            Value::Object(view.fields(true)),
            json!({"taskId": "t", "status": "working", "createdAt": "1970-01-01T00:00:00Z",
                   "lastUpdatedAt": "1970-01-01T00:00:01Z", "ttlMs": 60000, "pollIntervalMs": 500})
        );
        assert_eq!(view.fields(false)["ttl"], 60000);
        assert_eq!(view.fields(false)["pollInterval"], 500);
    }
}

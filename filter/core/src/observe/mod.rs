//! What one request tells an operator, recorded as the server handles it: the protocol
//! version, each JSON-RPC method, each tool call's outcome and upstream time, a refusal at the
//! HTTP boundary. Hosts publish it as Envoy stats ([`Observations::samples`]) and as
//! access-log fields ([`Observations::log_fields`]).
//!
//! Every label value comes from the catalog or from a fixed list here, so a client cannot
//! create a series: an unknown method is `other`, an unknown tool is no tool. How they become
//! Envoy stats: [`stats`]; where each goes among a host's stat ids: [`StatIds`].

mod stat_ids;
mod stats;

pub use stat_ids::{StatIds, STAT_NAME_BYTES};
pub use stats::{
    label_names, predefined_samples, tag_extraction_rules, Labels, Metric, MetricKind, Sample, STAT_PREFIX,
};

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use smallvec::{smallvec, SmallVec};

use crate::catalog::Tool;
use crate::eras::{Era, MODERN_VERSION};
use crate::grpc::status::{
    status_name, CANCELLED, DEADLINE_EXCEEDED, INVALID_ARGUMENT, OK, RESOURCE_EXHAUSTED, UNAVAILABLE,
};
use crate::http::Refusal;
use crate::tasks::task_id::TaskRefusal;

/// Where hosts put the access-log fields: the Wasm filter's filter state
/// `wasm.switchblade.<field>` (proxy-wasm prefixes the key), the module's `switchblade.<field>`.
pub const LOG_NAMESPACE: &str = "switchblade";

/// The JSON-RPC methods counted by name; any other is counted as `other`.
const COUNTED_METHODS: [&str; 8] = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "server/discover",
    "tasks/get",
    "tasks/result",
    "tasks/cancel",
];

/// Access-log values longer than this are cut (an argument path comes from the client).
const MAX_LOG_VALUE_CHARS: usize = 256;

/// How a tool call ended, for an operator: success, or which kind of failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    Success,
    /// The upstream (or the response) failed with a gRPC status other than the two below.
    ToolError,
    /// Refused at the gate; never sent.
    InvalidArguments,
    Unavailable,
    DeadlineExceeded,
    /// The client cancelled the request while the call was out.
    Cancelled,
    /// Over a rate limit or a cap on calls in flight; never sent.
    RateLimited,
}

impl CallOutcome {
    /// The outcome of a call that ended with gRPC `status`.
    pub fn of_status(status: u32) -> Self {
        match status {
            OK => CallOutcome::Success,
            UNAVAILABLE => CallOutcome::Unavailable,
            DEADLINE_EXCEEDED => CallOutcome::DeadlineExceeded,
            _ => CallOutcome::ToolError,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            CallOutcome::Success => "success",
            CallOutcome::ToolError => "tool_error",
            CallOutcome::InvalidArguments => "invalid_arguments",
            CallOutcome::Unavailable => "unavailable",
            CallOutcome::DeadlineExceeded => "deadline_exceeded",
            CallOutcome::Cancelled => "cancelled",
            CallOutcome::RateLimited => "rate_limited",
        }
    }
}

/// What one call in a task's life found: the method that starts the operation, or a call to
/// the Operations service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskOutcome {
    /// A task was made and answered at once.
    Created,
    /// The operation runs.
    Working,
    /// The operation is done with its response.
    Completed,
    /// The operation is done with an error (the task is `completed`, its result a tool error).
    OperationError,
    /// The operation is done, cancelled.
    Cancelled,
    /// The gateway waited for a caller without tasks, and the tool's deadline passed.
    StillRunning,
    /// The Operations service does not know the operation.
    NotFound,
    /// The call failed (unavailable, a deadline, an answer that is not an Operation...).
    UpstreamError,
}

impl TaskOutcome {
    pub fn label(self) -> &'static str {
        match self {
            TaskOutcome::Created => "task_created",
            TaskOutcome::Working => "working",
            TaskOutcome::Completed => "completed",
            TaskOutcome::OperationError => "operation_error",
            TaskOutcome::Cancelled => "cancelled",
            TaskOutcome::StillRunning => "still_running",
            TaskOutcome::NotFound => "not_found",
            TaskOutcome::UpstreamError => "upstream_error",
        }
    }
}

/// One call in a task's life: the tool, the MCP method it served, what it found.
#[derive(Debug, Clone)]
pub struct TaskStepRecord {
    tool: Arc<Tool>,
    pub method: &'static str,
    pub outcome: TaskOutcome,
}

/// One tool call: which tool, how it ended, how long the upstream took.
#[derive(Debug, Clone)]
pub struct ToolCallRecord {
    tool: Arc<Tool>,
    pub outcome: CallOutcome,
    pub grpc_status: u32,
    /// The argument the gate refused (`.` for the arguments as a whole).
    pub refused_path: Option<String>,
    /// From sending the call to its end; `None` if it was never sent.
    pub upstream_time: Option<Duration>,
}

impl ToolCallRecord {
    pub fn tool(&self) -> &str {
        &self.tool.name
    }
}

/// A request's samples, held in place for a request with one call (its method's, the call's
/// and its upstream time).
pub type Samples<'a> = SmallVec<[Sample<'a>; 4]>;

/// What one POST told: filled in by the server, read by the host when the response is sent.
#[derive(Debug, Clone, Default)]
pub struct Observations {
    refusal: Option<Refusal>,
    protocol_version: Option<&'static str>,
    methods: Vec<&'static str>,
    tool_calls: Vec<ToolCallRecord>,
    task_steps: Vec<TaskStepRecord>,
    task_refusals: Vec<TaskRefusal>,
    /// The long-running operations the request started or asked about, by name.
    operations: Vec<String>,
}

impl Observations {
    pub(crate) fn refused(&mut self, refusal: Refusal) {
        self.refusal = Some(refusal);
    }

    pub(crate) fn era(&mut self, era: Era) {
        self.protocol_version = Some(match era {
            Era::Legacy(version) => version,
            Era::Modern => MODERN_VERSION,
        });
    }

    pub(crate) fn request(&mut self, method: &str) {
        let counted = COUNTED_METHODS.iter().find(|known| **known == method);
        self.methods.push(counted.copied().unwrap_or("other"));
    }

    pub(crate) fn arguments_refused(&mut self, tool: &Arc<Tool>, path: &str) {
        self.tool_calls.push(ToolCallRecord {
            tool: Arc::clone(tool),
            outcome: CallOutcome::InvalidArguments,
            grpc_status: INVALID_ARGUMENT,
            refused_path: Some(path.to_owned()),
            upstream_time: None,
        });
    }

    /// A call out when its client cancelled the request (recorded with gRPC `CANCELLED`).
    pub(crate) fn call_cancelled(&mut self, tool: &Arc<Tool>, upstream_time: Option<Duration>) {
        self.tool_calls.push(ToolCallRecord {
            tool: Arc::clone(tool),
            outcome: CallOutcome::Cancelled,
            grpc_status: CANCELLED,
            refused_path: None,
            upstream_time,
        });
    }

    /// A call refused over a rate limit, before it was sent: counted as RESOURCE_EXHAUSTED,
    /// the status gRPC gives a quota.
    pub(crate) fn rate_limited(&mut self, tool: &Arc<Tool>) {
        self.tool_calls.push(ToolCallRecord {
            tool: Arc::clone(tool),
            outcome: CallOutcome::RateLimited,
            grpc_status: RESOURCE_EXHAUSTED,
            refused_path: None,
            upstream_time: None,
        });
    }

    pub(crate) fn call_ended(&mut self, tool: &Arc<Tool>, grpc_status: u32, upstream_time: Option<Duration>) {
        self.tool_calls.push(ToolCallRecord {
            tool: Arc::clone(tool),
            outcome: CallOutcome::of_status(grpc_status),
            grpc_status,
            refused_path: None,
            upstream_time,
        });
    }

    pub(crate) fn task_step(&mut self, tool: &Arc<Tool>, method: &'static str, outcome: TaskOutcome) {
        self.task_steps.push(TaskStepRecord {
            tool: Arc::clone(tool),
            method,
            outcome,
        });
    }

    pub(crate) fn task_refused(&mut self, refusal: TaskRefusal) {
        self.task_refusals.push(refusal);
    }

    /// An operation the request started or asked about (once per request and name).
    pub(crate) fn operation(&mut self, name: &str) {
        if !self.operations.iter().any(|known| known == name) {
            self.operations.push(name.to_owned());
        }
    }

    pub fn task_steps(&self) -> &[TaskStepRecord] {
        &self.task_steps
    }

    pub fn task_refusals(&self) -> &[TaskRefusal] {
        &self.task_refusals
    }

    pub fn refusal(&self) -> Option<Refusal> {
        self.refusal
    }

    pub fn tool_calls(&self) -> &[ToolCallRecord] {
        &self.tool_calls
    }

    /// What to add to the stats: one sample per request, per tool call (and its upstream
    /// time), and per refusal.
    pub fn samples(&self) -> Samples<'_> {
        let mut samples = Samples::new();
        if let Some(refusal) = self.refusal {
            samples.push(Sample {
                metric: Metric::HttpRefusals,
                labels: smallvec![refusal.label()],
                value: 1,
            });
        }
        let version = self.protocol_version.unwrap_or_default();
        for method in &self.methods {
            samples.push(Sample {
                metric: Metric::Requests,
                labels: smallvec![*method, version],
                value: 1,
            });
        }
        for call in &self.tool_calls {
            samples.push(Sample {
                metric: Metric::ToolCalls,
                labels: smallvec![call.tool(), call.outcome.label(), status_name(call.grpc_status)],
                value: 1,
            });
            if let Some(time) = call.upstream_time {
                samples.push(Sample {
                    metric: Metric::ToolUpstreamMs,
                    labels: smallvec![call.tool()],
                    value: u64::try_from(time.as_millis()).unwrap_or(u64::MAX),
                });
            }
        }
        for step in &self.task_steps {
            samples.push(Sample {
                metric: Metric::TaskSteps,
                labels: smallvec![step.tool.name.as_str(), step.method, step.outcome.label()],
                value: 1,
            });
        }
        for refusal in &self.task_refusals {
            samples.push(Sample {
                metric: Metric::TaskRefusals,
                labels: smallvec![refusal.label()],
                value: 1,
            });
        }
        samples
    }

    /// The access-log fields as hosts set them in filter state: each under its key in
    /// [`LOG_NAMESPACE`] (`switchblade.<field>`).
    pub fn log_entries(&self) -> impl Iterator<Item = (&'static str, Cow<'_, str>)> {
        LOG_FIELDS
            .iter()
            .zip(self.log_values())
            .filter_map(|(field, value)| Some((field.key, value?)))
    }

    /// The access-log fields, by name; a batch's values are joined with commas, in order.
    /// Only fields with a value are listed.
    pub fn log_fields(&self) -> Vec<(&'static str, String)> {
        LOG_FIELDS
            .iter()
            .zip(self.log_values())
            .filter_map(|(field, value)| Some((field.name, value?.into_owned())))
            .collect()
    }

    /// Each of [`LOG_FIELDS`]' values, in its order.
    fn log_values(&self) -> [Option<Cow<'_, str>>; LOG_FIELDS.len()] {
        let calls = &self.tool_calls;
        [
            log_value(self.refusal.map(Refusal::label)),
            log_value(self.protocol_version),
            log_value(self.methods.iter().copied()),
            log_value(calls.iter().map(ToolCallRecord::tool)),
            log_value(calls.iter().map(|call| call.outcome.label())),
            log_value(calls.iter().map(|call| status_name(call.grpc_status))),
            log_value(calls.iter().filter_map(|call| call.refused_path.as_deref())),
            log_value(self.operations.iter().map(String::as_str)),
        ]
    }
}

/// An access-log field: its name, and its filter state key (in [`LOG_NAMESPACE`]), written
/// out once here so that no request formats it.
pub struct LogField {
    pub name: &'static str,
    pub key: &'static str,
}

macro_rules! log_fields {
    ($($name:literal),* $(,)?) => {
        [$(LogField { name: $name, key: concat!("switchblade.", $name) }),*]
    };
}

/// Every access-log field, in the order hosts write them.
pub const LOG_FIELDS: [LogField; 8] = log_fields!(
    "refusal",
    "protocol_version",
    "method",
    "tool",
    "outcome",
    "grpc_status",
    "refused_path",
    "operation",
);

/// The values joined with commas, cut for the log; none if there is nothing to log. A lone
/// value that needs no cut (a request's one tool, label or version) is lent, not copied.
fn log_value<'v>(values: impl IntoIterator<Item = &'v str>) -> Option<Cow<'v, str>> {
    let mut values = values.into_iter();
    let first = values.next()?;
    let Some(second) = values.next() else {
        return (!first.is_empty()).then(|| cut(Cow::Borrowed(first)));
    };
    let mut joined = [first, second].join(",");
    for value in values {
        joined.push(',');
        joined.push_str(value);
    }
    Some(cut(Cow::Owned(joined)))
}

/// One line of printable text of at most [`MAX_LOG_VALUE_CHARS`] characters, marked with `…`
/// where cut. Quotes, backslashes and control characters are escaped as Rust escapes them
/// (`\n`, `\"`, `\u{1b}`): an argument path comes from the client, and must not break or
/// forge a line of an access log, whatever its format. Plain short text (every tool name,
/// label and version) is kept as it is, without a copy.
fn cut(value: Cow<'_, str>) -> Cow<'_, str> {
    let plain = |byte: &u8| (b' '..=b'~').contains(byte) && !matches!(byte, b'"' | b'\'' | b'\\');
    if value.len() <= MAX_LOG_VALUE_CHARS && value.bytes().all(|byte| plain(&byte)) {
        return value;
    }
    let escaped = value.escape_debug().to_string();
    if escaped.chars().count() <= MAX_LOG_VALUE_CHARS {
        return Cow::Owned(escaped);
    }
    let mut kept: String = escaped.chars().take(MAX_LOG_VALUE_CHARS).collect();
    kept.push('…');
    Cow::Owned(kept)
}

#[cfg(test)]
mod tests;

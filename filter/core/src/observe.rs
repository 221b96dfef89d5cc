//! What one request tells an operator, recorded as the server handles it: the protocol
//! version, each JSON-RPC method, each tool call's outcome and upstream time, a refusal at the
//! HTTP boundary. Hosts publish it as Envoy stats ([`Observations::samples`]) and as
//! access-log fields ([`Observations::log_fields`]).
//!
//! Every label value comes from the catalog or from a fixed list here, so a client cannot
//! create a series: an unknown method is `other`, an unknown tool is no tool.

use std::sync::Arc;
use std::time::Duration;

use crate::catalog::Tool;
use crate::eras::{Era, LEGACY_VERSIONS, MODERN_VERSION};
use crate::grpc_status::{status_name, DEADLINE_EXCEEDED, INVALID_ARGUMENT, OK, UNAVAILABLE};

/// The first segment of every stat name: Envoy shows it as the metric name's prefix.
pub const STAT_PREFIX: &str = "switchblade";

/// Where hosts put the access-log fields: the Wasm filter's filter state
/// `wasm.switchblade.<field>` (proxy-wasm prefixes the key), the module's `switchblade.<field>`.
pub const LOG_NAMESPACE: &str = "switchblade";

/// The JSON-RPC methods counted by name; any other is counted as `other`.
const COUNTED_METHODS: [&str; 5] = ["initialize", "ping", "tools/list", "tools/call", "server/discover"];

/// Access-log values longer than this are cut (an argument path comes from the client).
const MAX_LOG_VALUE_CHARS: usize = 256;

/// The stats Switchblade publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Tool calls by tool, outcome and gRPC status.
    ToolCalls,
    /// Milliseconds from sending a tool's call upstream to its end, by tool.
    ToolUpstreamMs,
    /// JSON-RPC requests by method and protocol version.
    Requests,
    /// POSTs refused before any JSON-RPC message was handled, by reason.
    HttpRefusals,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Histogram,
}

impl Metric {
    pub const ALL: [Metric; 4] = [
        Metric::ToolCalls,
        Metric::ToolUpstreamMs,
        Metric::Requests,
        Metric::HttpRefusals,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::ToolCalls => "tool_calls",
            Metric::ToolUpstreamMs => "tool_upstream_ms",
            Metric::Requests => "requests",
            Metric::HttpRefusals => "http_refusals",
        }
    }

    pub fn kind(self) -> MetricKind {
        match self {
            Metric::ToolUpstreamMs => MetricKind::Histogram,
            _ => MetricKind::Counter,
        }
    }

    pub fn label_names(self) -> &'static [&'static str] {
        match self {
            Metric::ToolCalls => &["tool", "outcome", "grpc_status"],
            Metric::ToolUpstreamMs => &["tool"],
            Metric::Requests => &["method", "protocol_version"],
            Metric::HttpRefusals => &["reason"],
        }
    }
}

/// Every label name of every metric, once each.
pub fn label_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for name in Metric::ALL.iter().flat_map(|metric| metric.label_names()) {
        if !names.contains(name) {
            names.push(name);
        }
    }
    names
}

/// One value to add to a counter or record in a histogram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample<'a> {
    pub metric: Metric,
    /// One value per [`Metric::label_names`], in that order.
    pub labels: Vec<&'a str>,
    pub value: u64,
}

impl Sample<'_> {
    /// The stat name for a host whose stats have no labels (proxy-wasm): the labels written
    /// into the name as `.label.value` pairs, which the tag extraction of
    /// [`tag_extraction_rules`] turns back into labels.
    pub fn tagged_name(&self) -> String {
        format!("{STAT_PREFIX}.{}", self.name_in_namespace())
    }

    /// [`Self::tagged_name`] without its first segment, for a host that adds it (the module's
    /// metrics namespace). It is also the name Envoy gives a labeled stat with these labels.
    pub fn name_in_namespace(&self) -> String {
        let mut name = self.metric.name().to_owned();
        for (label, value) in self.metric.label_names().iter().zip(&self.labels) {
            name.push('.');
            name.push_str(label);
            name.push('.');
            // Label values never hold a dot (tool names are [A-Za-z0-9_-], the rest are fixed);
            // one never splits a name all the same.
            name.push_str(&value.replace('.', "_"));
        }
        name
    }
}

/// Envoy `stats_config.stats_tags` rules (tag name, regex) that turn the labels of
/// [`Sample::tagged_name`] into tags: for the Wasm filter's stats (which Envoy prefixes with
/// `wasmcustom.`) and the module's unlabeled ones (see [`predefined_samples`]). The regex skips
/// whole `.label.value` pairs, so a value that spells a label name is read as a value. Its
/// first group is cut from the name, its second is the tag's value.
pub fn tag_extraction_rules() -> Vec<(&'static str, String)> {
    label_names()
        .into_iter()
        .map(|label| {
            let regex = format!(r"^(?:wasmcustom\.)?{STAT_PREFIX}\.[a-z_]+(?:\.[a-z_]+\.[^.]+)*?(\.{label}\.([^.]+))");
            (label, regex)
        })
        .collect()
}

/// The label sets every configuration has, for a host that can define stats only when the
/// configuration loads and whose labeled stats cost more per use (the module): each counted
/// method in each protocol version, each refusal, and each tool's success and upstream time.
/// Bounded by the catalog; values are 0.
pub fn predefined_samples<'a>(tool_names: &[&'a str]) -> Vec<Sample<'a>> {
    let mut samples = Vec::new();
    for method in COUNTED_METHODS.iter().chain(["other"].iter()) {
        for version in LEGACY_VERSIONS.iter().chain([MODERN_VERSION].iter()) {
            samples.push(Sample {
                metric: Metric::Requests,
                labels: vec![*method, *version],
                value: 0,
            });
        }
    }
    for refusal in Refusal::ALL {
        samples.push(Sample {
            metric: Metric::HttpRefusals,
            labels: vec![refusal.label()],
            value: 0,
        });
    }
    for tool in tool_names {
        samples.push(Sample {
            metric: Metric::ToolCalls,
            labels: vec![tool, CallOutcome::Success.label(), status_name(OK)],
            value: 0,
        });
        samples.push(Sample {
            metric: Metric::ToolUpstreamMs,
            labels: vec![tool],
            value: 0,
        });
    }
    samples
}

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
        }
    }
}

/// Why a POST was refused before any JSON-RPC message was handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    MethodNotAllowed,
    PayloadTooLarge,
    HostNotAllowed,
    OriginNotAllowed,
    NotAcceptable,
    UnsupportedMediaType,
    /// Not JSON, nested too deep, or not JSON-RPC.
    InvalidJson,
    /// A key given twice outside tool arguments.
    DuplicateKey,
    /// An unsupported protocol version, or a header and body that disagree about it.
    ProtocolVersion,
    /// A batch where the protocol version has none, or an empty one.
    Batch,
}

impl Refusal {
    pub const ALL: [Refusal; 10] = [
        Refusal::MethodNotAllowed,
        Refusal::PayloadTooLarge,
        Refusal::HostNotAllowed,
        Refusal::OriginNotAllowed,
        Refusal::NotAcceptable,
        Refusal::UnsupportedMediaType,
        Refusal::InvalidJson,
        Refusal::DuplicateKey,
        Refusal::ProtocolVersion,
        Refusal::Batch,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Refusal::MethodNotAllowed => "method_not_allowed",
            Refusal::PayloadTooLarge => "payload_too_large",
            Refusal::HostNotAllowed => "host_not_allowed",
            Refusal::OriginNotAllowed => "origin_not_allowed",
            Refusal::NotAcceptable => "not_acceptable",
            Refusal::UnsupportedMediaType => "unsupported_media_type",
            Refusal::InvalidJson => "invalid_json",
            Refusal::DuplicateKey => "duplicate_key",
            Refusal::ProtocolVersion => "protocol_version",
            Refusal::Batch => "batch",
        }
    }
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

/// What one POST told: filled in by the server, read by the host when the response is sent.
#[derive(Debug, Clone, Default)]
pub struct Observations {
    refusal: Option<Refusal>,
    protocol_version: Option<&'static str>,
    methods: Vec<&'static str>,
    tool_calls: Vec<ToolCallRecord>,
}

impl Observations {
    pub fn refused(&mut self, refusal: Refusal) {
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

    pub(crate) fn call_ended(&mut self, tool: &Arc<Tool>, grpc_status: u32, upstream_time: Option<Duration>) {
        self.tool_calls.push(ToolCallRecord {
            tool: Arc::clone(tool),
            outcome: CallOutcome::of_status(grpc_status),
            grpc_status,
            refused_path: None,
            upstream_time,
        });
    }

    pub fn refusal(&self) -> Option<Refusal> {
        self.refusal
    }

    pub fn tool_calls(&self) -> &[ToolCallRecord] {
        &self.tool_calls
    }

    /// What to add to the stats: one sample per request, per tool call (and its upstream
    /// time), and per refusal.
    pub fn samples(&self) -> Vec<Sample<'_>> {
        let mut samples = Vec::with_capacity(self.methods.len() + 2 * self.tool_calls.len() + 1);
        if let Some(refusal) = self.refusal {
            samples.push(Sample {
                metric: Metric::HttpRefusals,
                labels: vec![refusal.label()],
                value: 1,
            });
        }
        let version = self.protocol_version.unwrap_or_default();
        for method in &self.methods {
            samples.push(Sample {
                metric: Metric::Requests,
                labels: vec![method, version],
                value: 1,
            });
        }
        for call in &self.tool_calls {
            samples.push(Sample {
                metric: Metric::ToolCalls,
                labels: vec![call.tool(), call.outcome.label(), status_name(call.grpc_status)],
                value: 1,
            });
            if let Some(time) = call.upstream_time {
                samples.push(Sample {
                    metric: Metric::ToolUpstreamMs,
                    labels: vec![call.tool()],
                    value: u64::try_from(time.as_millis()).unwrap_or(u64::MAX),
                });
            }
        }
        samples
    }

    /// The access-log fields, by name; a batch's values are joined with commas, in order.
    /// Only fields with a value are listed.
    pub fn log_fields(&self) -> Vec<(&'static str, String)> {
        let calls = &self.tool_calls;
        let joined = |values: Vec<&str>| cut(&values.join(","));
        let mut fields = Vec::with_capacity(7);
        let mut push = |name: &'static str, value: String| {
            if !value.is_empty() {
                fields.push((name, value));
            }
        };
        push(
            "refusal",
            self.refusal.map(Refusal::label).unwrap_or_default().to_owned(),
        );
        push("protocol_version", self.protocol_version.unwrap_or_default().to_owned());
        push("method", joined(self.methods.clone()));
        push("tool", joined(calls.iter().map(ToolCallRecord::tool).collect()));
        push(
            "outcome",
            joined(calls.iter().map(|call| call.outcome.label()).collect()),
        );
        push(
            "grpc_status",
            joined(calls.iter().map(|call| status_name(call.grpc_status)).collect()),
        );
        push(
            "refused_path",
            joined(calls.iter().filter_map(|call| call.refused_path.as_deref()).collect()),
        );
        fields
    }
}

/// At most [`MAX_LOG_VALUE_CHARS`] characters, marked with `…` where cut.
fn cut(value: &str) -> String {
    if value.chars().count() <= MAX_LOG_VALUE_CHARS {
        return value.to_owned();
    }
    let mut kept: String = value.chars().take(MAX_LOG_VALUE_CHARS).collect();
    kept.push('…');
    kept
}

#[cfg(test)]
#[path = "observe_tests.rs"]
mod tests;

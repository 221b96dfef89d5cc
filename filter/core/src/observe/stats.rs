//! The stats, as Envoy sees them: each metric's name, kind and labels, a sample's stat name
//! with its labels written in (for hosts whose stats have none), the tag-extraction rules that
//! read them back, and the label sets a host can define when the configuration loads.

use smallvec::{smallvec, SmallVec};

use super::{CallOutcome, COUNTED_METHODS};
use crate::eras::{LEGACY_VERSIONS, MODERN_VERSION};
use crate::grpc::status::{status_name, OK};
use crate::http::Refusal;

/// The first segment of every stat name: Envoy shows it as the metric name's prefix.
pub const STAT_PREFIX: &str = "switchblade";

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
    /// Refreshes of the services read through gRPC server reflection, by outcome (`changed`,
    /// `unchanged`, `failed`).
    ReflectionRefreshes,
    /// Calls in tasks' lives (a task tool's method, `GetOperation`, `CancelOperation`), by
    /// tool, the MCP method they served and what they found.
    TaskSteps,
    /// Task requests refused with no upstream call, by reason.
    TaskRefusals,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Histogram,
}

impl Metric {
    pub const ALL: [Metric; 7] = [
        Metric::ToolCalls,
        Metric::ToolUpstreamMs,
        Metric::Requests,
        Metric::HttpRefusals,
        Metric::ReflectionRefreshes,
        Metric::TaskSteps,
        Metric::TaskRefusals,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::ToolCalls => "tool_calls",
            Metric::ToolUpstreamMs => "tool_upstream_ms",
            Metric::Requests => "requests",
            Metric::HttpRefusals => "http_refusals",
            Metric::ReflectionRefreshes => "reflection_refreshes",
            Metric::TaskSteps => "task_steps",
            Metric::TaskRefusals => "task_refusals",
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
            Metric::ReflectionRefreshes => &["outcome"],
            Metric::TaskSteps => &["tool", "method", "outcome"],
            Metric::TaskRefusals => &["reason"],
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

/// The most labels a metric has ([`Metric::label_names`]).
const MAX_LABELS: usize = 3;

/// A sample's label values, held in place: a request publishes a few samples, and a vector
/// each would be an allocation each.
pub type Labels<'a> = SmallVec<[&'a str; MAX_LABELS]>;

/// One value to add to a counter or record in a histogram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample<'a> {
    pub metric: Metric,
    /// One value per [`Metric::label_names`], in that order.
    pub labels: Labels<'a>,
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
        let mut name = String::new();
        self.write_name_in_namespace(&mut name);
        name
    }

    /// [`Self::name_in_namespace`], written over `name`: a host that looks a name up for each
    /// sample of each request reuses one buffer.
    pub fn write_name_in_namespace(&self, name: &mut String) {
        name.clear();
        name.push_str(self.metric.name());
        for (label, value) in self.metric.label_names().iter().zip(&self.labels) {
            name.push('.');
            name.push_str(label);
            name.push('.');
            // Label values never hold a dot (tool names are [A-Za-z0-9_-], the rest are fixed);
            // one never splits a name all the same.
            match value.contains('.') {
                false => name.push_str(value),
                true => name.push_str(&value.replace('.', "_")),
            }
        }
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
                labels: smallvec![*method, *version],
                value: 0,
            });
        }
    }
    for refusal in Refusal::ALL {
        samples.push(Sample {
            metric: Metric::HttpRefusals,
            labels: smallvec![refusal.label()],
            value: 0,
        });
    }
    for &tool in tool_names {
        samples.push(Sample {
            metric: Metric::ToolCalls,
            labels: smallvec![tool, CallOutcome::Success.label(), status_name(OK)],
            value: 0,
        });
        samples.push(Sample {
            metric: Metric::ToolUpstreamMs,
            labels: smallvec![tool],
            value: 0,
        });
    }
    samples
}

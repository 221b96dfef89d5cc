//! The plugin configuration: the JSON in the Wasm filter's `configuration` field.
//!
//! Parsing is strict (unknown keys are refused) and every error names the offending key,
//! because the only place a user sees it is one line in Envoy's log. Checks that need the
//! descriptors (services, methods, tool names) happen when the catalog is built.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde_json::{Map, Value};

pub const DEFAULT_MCP_PATH: &str = "/mcp";
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
pub const DEFAULT_REFLECTION_INTERVAL_MS: u64 = 30_000;
/// Reading reflection more often than this would load the upstream for nothing.
pub const MIN_REFLECTION_INTERVAL_MS: u64 = 1_000;

/// The whole plugin configuration.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PluginConfig {
    /// Path of the MCP endpoint; requests to any other path pass through untouched.
    #[serde(default = "default_mcp_path")]
    pub mcp_path: String,
    /// How the server introduces itself.
    #[serde(default)]
    pub server: ServerIdentity,
    /// A base64 `FileDescriptorSet` with the services to expose; the embedded demo set if absent.
    #[serde(default)]
    pub descriptor_set: Option<String>,
    /// Fully qualified service name → how to expose it. Tools keep this order.
    pub services: OrderedMap<ServiceConfig>,
    /// Per-tool overrides, keyed by method selector (`package.Service/Method`).
    #[serde(default)]
    pub tools: BTreeMap<String, ToolOverride>,
    /// Request headers forwarded to the upstream as gRPC metadata (lowercase names).
    #[serde(default)]
    pub forward_headers: Vec<String>,
    /// Whether the W3C trace context of the MCP request (`traceparent`, `tracestate`) goes
    /// upstream with each call, so that a trace spans the agent, Envoy and the service.
    #[serde(default = "default_true")]
    pub forward_trace_context: bool,
    /// Whether `forward_headers` may list `authorization`, handing the client's token to the
    /// upstream. The MCP specification forbids it (a token is for this server alone); hand the
    /// upstream the verified caller with `authorization.caller_metadata` instead.
    #[serde(default)]
    pub allow_token_passthrough: bool,
    /// Browser origins allowed to call (`scheme://host[:port]`, or `*`). A request with any
    /// other `Origin` is refused; one without `Origin` (not a browser) is not.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// If set, the only `Host` (`:authority`) values served: DNS rebinding points a foreign
    /// name at this address, and its requests carry that name.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// How `tools/list` pages and how long clients may cache it.
    #[serde(default)]
    pub tools_list: ToolsListConfig,
    /// What `tools/list` shows: every tool the caller may call (`list`), or two tools whatever
    /// the catalog's size, one that searches the catalog and one that calls a tool it found
    /// (`search`).
    #[serde(default)]
    pub discovery: Discovery,
    /// The names of the two tools of `discovery: search`.
    #[serde(default)]
    pub discovery_tools: DiscoveryTools,
    /// Sizes and depths past which input and output are refused.
    #[serde(default)]
    pub limits: Limits,
    /// How tool calls reach the upstream, where the host can choose (the dynamic module).
    #[serde(default)]
    pub routing: Routing,
    /// Per-tool authorization from the caller's verified token; absent, every caller may
    /// call every tool.
    #[serde(default)]
    pub authorization: Option<Authorization>,
    /// How services with `from_reflection` are read.
    #[serde(default)]
    pub reflection: ReflectionConfig,
    /// Methods that return a `google.longrunning.Operation`, served as MCP tasks.
    #[serde(default)]
    pub tasks: TasksConfig,
}

/// How often, and how patiently, services with `from_reflection` are read again.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReflectionConfig {
    /// Time between reads of a service's reflection; an API changed upstream shows in
    /// `tools/list` within it.
    #[cfg_attr(feature = "schema", schemars(range(min = MIN_REFLECTION_INTERVAL_MS)))]
    pub interval_ms: u64,
    /// Deadline of each reflection call.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub timeout_ms: u64,
}

impl Default for ReflectionConfig {
    fn default() -> Self {
        ReflectionConfig {
            interval_ms: DEFAULT_REFLECTION_INTERVAL_MS,
            timeout_ms: DEFAULT_TIMEOUT_MS,
        }
    }
}

impl PluginConfig {
    /// The services read through gRPC server reflection, with their clusters.
    pub fn reflected_services(&self) -> impl Iterator<Item = (&str, &str)> {
        self.services
            .iter()
            .filter(|(_, service)| service.from_reflection)
            .map(|(name, service)| (name, service.cluster.as_str()))
    }
}

/// How tool calls reach the upstream. The Wasm filter always calls out (proxy-wasm cannot
/// change a request's headers once its body is read). The dynamic module does too, unless a
/// cluster header is set: then a lone `tools/call` is the request itself, rewritten into the
/// gRPC call and forwarded by Envoy's router, with the route's retries, timeouts and stats.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Routing {
    /// The request header the module sets to the tool's cluster, for a route that matches it
    /// and forwards with `cluster_header`. The module removes it from every other request.
    pub cluster_header: Option<String>,
}

/// Bounds on what one request may cost, and the rate limits and concurrency caps per tool and
/// caller.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Limits {
    /// Largest MCP request body, in bytes (HTTP 413 past it). Keep it below Envoy's buffer
    /// limit for the listener (`per_connection_buffer_limit_bytes`, 1 MiB by default), or
    /// Envoy answers first, in plain text.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_request_bytes: usize,
    /// Deepest JSON nesting accepted in a request body (at most 100).
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = MAX_JSON_DEPTH)))]
    pub max_json_depth: usize,
    /// Largest request message sent upstream (the encoded tool arguments), in bytes.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_request_message_bytes: usize,
    /// Largest response message accepted from upstream, in bytes.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_response_bytes: usize,
    /// Largest JSON rendering of one response message, in bytes; unset: four times
    /// `max_response_bytes`. Fields without presence are written at their defaults, so a few
    /// bytes of empty messages can render to far more.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_rendered_bytes: Option<usize>,
    /// Most messages in one JSON-RPC batch (2025-03-26).
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_batch_size: usize,
    /// Most upstream calls one request has out at once; a batch's other calls wait their turn.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_calls_in_flight: usize,
    /// Largest answer to a batch, in bytes; unset: twice the bound on one response's JSON
    /// rendering. Answers that would take it past are replaced by an error that names it.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_batch_reply_bytes: Option<usize>,
    /// Who the rate limits count: a claim of the verified token, or the client's address.
    /// Unset: the token's `sub` under `authorization`, the client's address without it.
    pub caller: Option<CallerSource>,
    /// How many addresses one caller is when callers are counted by address: the length of
    /// the prefix each IP version is counted by (an IPv6 host is given a /64 to rotate through).
    pub client_address_prefix: AddressPrefix,
    /// The callers whose rates are held at once, per rate rule: a table of this many places,
    /// so that no number of distinct callers grows memory past it.
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = quota::MAX_MAX_CALLERS)))]
    pub max_callers: u32,
    /// Rate limits and concurrency caps: each matches a method, a service, or `*` (a caller's
    /// calls to every tool); a call passes its most specific method or service rule, and the
    /// `*` rule.
    pub rules: Vec<LimitRule>,
    /// The rate limit service every call is checked with too, so that a fleet of Envoys
    /// shares one budget.
    pub rate_limit_service: Option<RateLimitService>,
}

impl Limits {
    /// The bound on one response's JSON rendering.
    pub fn rendered_bytes(&self) -> usize {
        self.max_rendered_bytes
            .unwrap_or_else(|| self.max_response_bytes.saturating_mul(RENDERED_PER_RESPONSE_BYTE))
    }

    /// The bound on a batch's answer.
    pub fn batch_reply_bytes(&self) -> usize {
        self.max_batch_reply_bytes
            .unwrap_or_else(|| self.rendered_bytes().saturating_mul(2))
    }
}

/// How much larger than a response message its JSON may be, by default: room for field names
/// and the defaults of fields left out of ordinary answers, not for a hostile multiplication.
const RENDERED_PER_RESPONSE_BYTE: usize = 4;
pub const DEFAULT_MAX_BATCH_SIZE: usize = 64;
pub const DEFAULT_MAX_CALLS_IN_FLIGHT: usize = 8;

/// Below serde_json's own recursion limit (128), so that this limit is the one that answers.
pub const MAX_JSON_DEPTH: usize = 100;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_bytes: 256 * 1024,
            max_json_depth: MAX_JSON_DEPTH,
            max_request_message_bytes: 1024 * 1024,
            max_response_bytes: 4 * 1024 * 1024,
            max_rendered_bytes: None,
            max_batch_size: DEFAULT_MAX_BATCH_SIZE,
            max_calls_in_flight: DEFAULT_MAX_CALLS_IN_FLIGHT,
            max_batch_reply_bytes: None,
            caller: None,
            client_address_prefix: AddressPrefix::default(),
            max_callers: DEFAULT_MAX_CALLERS,
            rules: Vec::new(),
            rate_limit_service: None,
        }
    }
}

pub mod authorization;
mod checks;
#[cfg(feature = "schema")]
mod json_schema;
mod listing;
mod ordered_map;
pub mod quota;
mod tasks;

pub use authorization::{
    Authorization, ClaimPath, InsufficientScope, ResourceMetadata, TokenPayloadSource, Unlisted, DEFAULT_CLAIM,
};
pub use quota::{AddressPrefix, CallerSource, FailureMode, LimitRule, RateLimitService, DEFAULT_MAX_CALLERS};
pub use tasks::{
    ProcessKey, TasksConfig, DEFAULT_TASK_POLL_BURST, DEFAULT_TASK_POLL_INTERVAL_MS, DEFAULT_TASK_TTL_MS,
    DEFAULT_TASK_WAIT_POLL_INTERVAL_MS, MAX_TASK_KEYS, MIN_TASK_KEY_BYTES,
};

pub use checks::parse_selector;
#[cfg(feature = "schema")]
pub use json_schema::json_schema;
pub use listing::{
    Discovery, DiscoveryTools, ToolsListConfig, DEFAULT_CALL_TOOL, DEFAULT_LIST_TTL_MS, DEFAULT_PAGE_SIZE,
    DEFAULT_SEARCH_TOOL, MAX_PAGE_SIZE,
};
pub use ordered_map::OrderedMap;

/// The `serverInfo` and `instructions` the server introduces itself with.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ServerIdentity {
    /// `serverInfo.name`; `switchblade` if unset.
    pub name: Option<String>,
    /// `serverInfo.version`; the filter's version if unset.
    pub version: Option<String>,
    /// `serverInfo.title`.
    pub title: Option<String>,
    /// Guidance for the model, in `initialize` and `server/discover`.
    pub instructions: Option<String>,
}

/// Which methods of a service become tools.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum Exposure {
    /// Every unary method, and the streaming ones with `streaming: true` (otherwise they are
    /// skipped, with a log line each).
    #[default]
    All,
    /// Only the methods listed in `methods`.
    Selected,
    /// None: the service is configured but hidden.
    None,
}

/// One gRPC service to expose.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ServiceConfig {
    /// Name of the Envoy cluster (HTTP/2) that serves it.
    pub cluster: String,
    #[serde(default)]
    pub expose: Exposure,
    /// Method selectors (`package.Service/Method`) for `expose: selected`.
    #[serde(default)]
    pub methods: Vec<String>,
    /// Deadline for each call, in milliseconds; sent upstream as the gRPC deadline.
    #[serde(default = "default_timeout_ms")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub timeout_ms: u64,
    /// gRPC metadata sent with every call to this service.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// Read the service's descriptors from its own gRPC server reflection, through its
    /// cluster, when the filter is configured and then every `reflection.interval_ms`, instead
    /// of from the configuration's descriptor set.
    #[serde(default)]
    pub from_reflection: bool,
    /// With `expose: all`, streaming methods become tools too (server-streaming,
    /// client-streaming, bidirectional); without it they are skipped, as before streams were
    /// served. `expose: selected` may name streaming methods whatever this says.
    #[serde(default)]
    pub streaming: bool,
    /// The messages a streaming tool takes or gathers at most; unset: 100.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_messages: Option<usize>,
    /// The Envoy cluster (HTTP/2) that serves `google.longrunning.Operations` for the
    /// operations this service's methods start; unset: `cluster`.
    #[serde(default)]
    pub operations_cluster: Option<String>,
}

/// What a tool shows of itself, instead of what the descriptors say.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ToolOverride {
    /// The tool's name (1-64 characters of `[A-Za-z0-9_-]`); `Service_Method` if unset.
    #[cfg_attr(feature = "schema", schemars(regex(pattern = crate::tool_name::PATTERN)))]
    pub name: Option<String>,
    /// The tool's title; `Service: Method` if unset.
    pub title: Option<String>,
    /// The tool's description; the method's proto comment if unset.
    pub description: Option<String>,
    /// MCP tool annotations (hints for clients, never authorization).
    pub annotations: Option<Annotations>,
    /// The deadline of this tool's calls, in milliseconds; the service's if unset.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub timeout_ms: Option<u64>,
    /// The messages this streaming tool takes or gathers at most.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_messages: Option<usize>,
    /// gRPC metadata sent with this tool's calls, over the service's of the same key: fixed
    /// text, or text with arguments' values in it (`{name}`, `{parent.id}`, percent-encoded;
    /// `{{` and `}}` are braces). An entry whose argument is absent is not sent.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// Whether the arguments `metadata` reads stay in the request message (`keep`) or go as
    /// metadata only (`remove`), for a service that takes a tenant or a namespace from its
    /// metadata and not from the message.
    #[serde(default)]
    pub metadata_arguments: MetadataArguments,
    /// For a method that returns `google.longrunning.Operation`: the types of the operation's
    /// response and metadata, which make it a task tool (in place of, or without, the method's
    /// `google.longrunning.operation_info` option).
    pub operation: Option<OperationTypes>,
}

/// The message types of a long-running operation, as `google.longrunning.OperationInfo` gives
/// them: relative to the method's package, or fully qualified.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OperationTypes {
    /// The message the operation's `response` holds once it is done: the tool's output.
    pub response_type: String,
    /// The message the operation's `metadata` holds while it runs (its progress).
    #[serde(default)]
    pub metadata_type: Option<String>,
}

/// MCP tool annotations.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Annotations {
    pub title: Option<String>,
    pub read_only_hint: Option<bool>,
    pub destructive_hint: Option<bool>,
    pub idempotent_hint: Option<bool>,
    pub open_world_hint: Option<bool>,
}

impl Annotations {
    /// The annotations object, with only the hints that are set.
    pub fn to_json(&self) -> Map<String, Value> {
        let mut map = Map::new();
        if let Some(title) = &self.title {
            map.insert("title".into(), Value::String(title.clone()));
        }
        let hints = [
            ("readOnlyHint", self.read_only_hint),
            ("destructiveHint", self.destructive_hint),
            ("idempotentHint", self.idempotent_hint),
            ("openWorldHint", self.open_world_hint),
        ];
        for (key, hint) in hints {
            if let Some(hint) = hint {
                map.insert(key.into(), Value::Bool(hint));
            }
        }
        map
    }
}

/// Where the arguments that a tool's metadata reads go.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum MetadataArguments {
    /// In the metadata and in the request message.
    #[default]
    Keep,
    /// In the metadata only: cleared from the request message (after the gate checked them).
    Remove,
}

fn default_true() -> bool {
    true
}

fn default_mcp_path() -> String {
    DEFAULT_MCP_PATH.to_owned()
}

fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

/// A configuration the filter refuses, with the key at fault and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl PluginConfig {
    /// Parses and checks the configuration bytes Envoy hands to `on_configure`.
    pub fn parse(bytes: &[u8]) -> Result<Self, ConfigError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ConfigError(
                "the plugin configuration is empty; set the Wasm filter's `configuration` to a JSON object with at least `services`".into(),
            ));
        }
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        let config: PluginConfig = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
            let path = error.path().to_string();
            if path == "." || path == "?" {
                ConfigError(format!(
                    "the configuration is not valid JSON for this filter: {}",
                    error.inner()
                ))
            } else {
                ConfigError(format!("at `{path}`: {}", error.inner()))
            }
        })?;
        deserializer
            .end()
            .map_err(|error| ConfigError(format!("trailing characters after the configuration JSON: {error}")))?;
        config.check()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests;

//! The tool catalog: the exposed methods, compiled once per configuration into tools with
//! names, descriptions, schemas, hints and call targets.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use log::{info, warn};
use prost_reflect::{DescriptorPool, MessageDescriptor, MethodDescriptor, ServiceDescriptor, Value as ProtoValue};
use serde_json::value::{to_raw_value, RawValue};
use serde_json::{json, Map, Value};

use crate::config::{
    parse_selector, ConfigError, Exposure, MetadataArguments, PluginConfig, ServiceConfig, ToolOverride,
};
use crate::docs::Docs;
use crate::grpc;
use crate::proto_json::gate::Gate;
use crate::proto_json::render::RenderPlan;
use crate::proto_json::rules::unenforced_rules;
use crate::proto_json::schema::{message_schema, SchemaTooLarge, MAX_SCHEMA_BYTES};
use crate::proto_json::Direction;
use crate::streams::{messages_input_schema, stream_output_schema, CallKind, DEFAULT_MAX_MESSAGES};
use crate::tasks::{operation_types, OperationSpec};
use crate::tool_name;
use crate::wrapped_root::object_root;

/// How much later than the tool's deadline Envoy's router gives up on a routed call: the module
/// answers DEADLINE_EXCEEDED at the deadline itself (the router, once the upstream's headers
/// have come, could only reset the stream), and the router's timeout stays as a backstop.
const ROUTER_TIMEOUT_GRACE: Duration = Duration::from_secs(1);

/// How much later than a stream's collection window its upstream is told the call's deadline
/// is (`grpc-timeout`). The filter closes the window itself and cancels the stream; a server
/// that keeps the deadline it is sent (etcd, any Go server) would otherwise end the stream
/// with an error of its own at the instant the window closes, and win that race.
const WINDOW_DEADLINE_GRACE: Duration = Duration::from_secs(1);

/// One MCP tool backed by one gRPC method.
#[derive(Debug)]
pub struct Tool {
    pub name: String,
    pub method: MethodDescriptor,
    /// How the method streams: a stream of requests is taken from the arguments' `messages`,
    /// a stream of answers gathered into the result (see [`crate::streams`]).
    pub kind: CallKind,
    /// The messages a streaming tool takes or gathers at most.
    pub max_messages: usize,
    pub cluster: String,
    pub timeout: Duration,
    /// `/package.Service/Method`: the HTTP/2 path of a call.
    pub grpc_path: String,
    /// The deadline the upstream is sent, as a `grpc-timeout` value, written once: the tool's,
    /// or for a stream of answers a little past its window ([`WINDOW_DEADLINE_GRACE`]).
    pub grpc_timeout: String,
    /// The router's timeout for a call the module routes, in milliseconds, written once: a
    /// little past the deadline ([`ROUTER_TIMEOUT_GRACE`]).
    pub router_timeout_ms: String,
    /// The gRPC metadata its calls carry: the service's, and the tool's own over it (see
    /// [`MetadataValue`]).
    pub metadata: Vec<(String, MetadataValue)>,
    /// Whether the arguments the metadata reads are cleared from the request message.
    pub metadata_arguments: MetadataArguments,
    /// The request message's JSON is not an object (a Timestamp, say): the arguments carry it
    /// as `{"value": …}`, since MCP needs an object.
    pub wrap_input: bool,
    /// Likewise for the response: structured content is `{"value": …}`.
    pub wrap_output: bool,
    /// The tool's entry in `tools/list`, as JSON text: a parsed `Value` takes about ten times
    /// the memory of its text (BENCHMARKS.md, "Scale"), and the entry is only ever copied out.
    pub definition: Box<RawValue>,
    /// A method that starts a long-running operation: the tool runs as an MCP task, and its
    /// output is the operation's response.
    pub task: Option<TaskTool>,
    /// How to write the method's response as JSON: made on the tool's first answer, so a
    /// catalog of thousands of tools pays only for the ones called.
    response_plan: OnceLock<RenderPlan>,
}

/// What a task tool needs beyond its method: the operation's types, and where to poll it.
#[derive(Debug)]
pub struct TaskTool {
    pub operation: OperationSpec,
    /// The Envoy cluster that serves `google.longrunning.Operations` for it.
    pub operations_cluster: String,
    /// How to write the operation's response as JSON: made on the first result, as a tool's.
    response_plan: OnceLock<RenderPlan>,
}

impl TaskTool {
    /// How to write the operation's response, the tool's output, as JSON.
    pub fn response_plan(&self) -> &RenderPlan {
        self.response_plan
            .get_or_init(|| RenderPlan::new(&self.operation.response))
    }
}

impl Tool {
    /// Fully qualified gRPC service name, as sent on the wire.
    pub fn service_name(&self) -> &str {
        self.method.parent_service().full_name()
    }

    pub fn method_name(&self) -> &str {
        self.method.name()
    }

    /// How to write the method's response as JSON.
    pub fn response_plan(&self) -> &RenderPlan {
        self.response_plan
            .get_or_init(|| RenderPlan::new(&self.method.output()))
    }

    /// The tool's entry parsed, for readers that look inside it (the CLI, tests).
    pub fn definition_value(&self) -> Value {
        // serde_json wrote this text from a `Value`, so it reads back; Null is unreachable.
        serde_json::from_str(self.definition.get()).unwrap_or(Value::Null)
    }
}

/// Every tool of a configuration, in configuration order.
#[derive(Debug, Default)]
pub struct Catalog {
    tools: Vec<Arc<Tool>>,
    by_name: HashMap<String, usize>,
    /// Services read through reflection whose descriptors have not come yet.
    pending: Vec<String>,
    /// Reads tool arguments into request messages (the descriptor pool's required fields).
    gate: Gate,
}

impl Catalog {
    /// The catalog of the configuration's services in `pool`. Services read through reflection
    /// are pending until `reflected` (their descriptors are then in `pool`); overrides and rules
    /// that name them are checked once they are known.
    pub fn build(config: &PluginConfig, pool: &DescriptorPool, reflected: bool) -> Result<Self, ConfigError> {
        let docs = Docs::from_pool(pool);
        let gate = Gate::build(pool).map_err(|problem| ConfigError(format!("in the descriptor set: {problem}")))?;
        let mut catalog = Catalog {
            gate,
            ..Catalog::default()
        };
        let mut exposed = HashSet::new();
        for (service_name, service_config) in config.services.iter() {
            if service_config.from_reflection && !reflected {
                catalog.pending.push(service_name.to_owned());
                continue;
            }
            let service = pool.get_service_by_name(service_name).ok_or_else(|| {
                let source = if service_config.from_reflection {
                    format!("the reflection of cluster {}", service_config.cluster)
                } else {
                    "the descriptor set".to_owned()
                };
                ConfigError(format!(
                    "at `services.{service_name}`: service {service_name} is not in {source}; known services: {}",
                    known_services(pool)
                ))
            })?;
            for method in exposed_methods(&service, service_config)? {
                let selector = format!("{}/{}", service.full_name(), method.name());
                let overrides = config.tools.get(&selector).cloned().unwrap_or_default();
                let tool = build_tool(&service, method, service_config, &overrides, &docs, &catalog.gate)?;
                catalog.insert(tool, &selector)?;
                exposed.insert(selector);
            }
        }
        check_overrides(&config.tools, &exposed, &catalog.pending)?;
        let inputs = catalog.tools.iter().map(|tool| tool.method.input());
        let unchecked = unenforced_rules(|name| catalog.gate.rules(name), inputs);
        if !unchecked.is_empty() {
            warn!(
                "buf.validate CEL rules are shown in the tools' schemas but not checked by the gateway: {}",
                unchecked.join(", ")
            );
        }
        Ok(catalog)
    }

    /// Services read through reflection whose tools are not known yet.
    pub fn pending_services(&self) -> &[String] {
        &self.pending
    }

    /// Whether `selector` (`package.Service/Method`) belongs to a pending service, and so
    /// cannot be checked yet.
    pub fn is_pending(&self, selector: &str) -> bool {
        let service = selector.split_once('/').map_or(selector, |(service, _)| service);
        self.pending.iter().any(|pending| pending == service)
    }

    fn insert(&mut self, tool: Tool, selector: &str) -> Result<(), ConfigError> {
        if let Some(&existing) = self.by_name.get(&tool.name) {
            let other = &self.tools[existing];
            return Err(ConfigError(format!(
                "{selector} would be tool {:?}, which {}/{} already is; tool names must be unique (rename one under `tools.{selector}.name`)",
                tool.name,
                other.service_name(),
                other.method_name(),
            )));
        }
        self.by_name.insert(tool.name.clone(), self.tools.len());
        self.tools.push(Arc::new(tool));
        Ok(())
    }

    /// The gate that reads tool arguments into request messages.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Tool>> {
        self.by_name.get(name).and_then(|&index| self.tools.get(index))
    }

    pub fn tools(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.tools.iter()
    }

    /// The tool at `index` in the catalog's order.
    pub fn tool_at(&self, index: usize) -> Option<&Arc<Tool>> {
        self.tools.get(index)
    }

    pub fn tool_count(&self) -> usize {
        self.tools.len()
    }
}

/// The methods a service's exposure mode selects. `all` takes streaming methods only with
/// `streaming: true`, and says in the log which it skipped; `selected` takes what it names.
fn exposed_methods(service: &ServiceDescriptor, config: &ServiceConfig) -> Result<Vec<MethodDescriptor>, ConfigError> {
    let name = service.full_name();
    match config.expose {
        Exposure::None => Ok(Vec::new()),
        Exposure::All => Ok(service
            .methods()
            .filter(|method| {
                let kind = CallKind::of(method);
                let skipped = kind != CallKind::Unary && !config.streaming;
                if skipped {
                    info!(
                        "skipping {} method {name}/{}: set `streaming: true` on the service to expose its streaming methods",
                        kind.label(),
                        method.name()
                    );
                }
                !skipped
            })
            .collect()),
        Exposure::Selected => {
            let mut methods: Vec<MethodDescriptor> = Vec::with_capacity(config.methods.len());
            for (index, selector) in config.methods.iter().enumerate() {
                let at = format!("at `services.{name}.methods[{index}]`");
                let method =
                    select_method(service, selector).map_err(|problem| ConfigError(format!("{at}: {problem}")))?;
                if methods.iter().any(|known| known.name() == method.name()) {
                    return Err(ConfigError(format!("{at}: {selector} is listed twice")));
                }
                methods.push(method);
            }
            Ok(methods)
        }
    }
}

fn select_method(service: &ServiceDescriptor, selector: &str) -> Result<MethodDescriptor, String> {
    let name = service.full_name();
    let Some((service_part, method_part)) = parse_selector(selector) else {
        return Err(format!("{selector:?} is not a method selector; write {name}/Method"));
    };
    if service_part != name {
        return Err(format!(
            "{selector} names service {service_part}, not {name}; list it under `services.{service_part}`"
        ));
    }
    service
        .methods()
        .find(|method| method.name() == method_part)
        .ok_or_else(|| {
            let known: Vec<String> = service.methods().map(|method| method.name().to_owned()).collect();
            format!(
                "service {name} has no method {method_part}; its methods: {}",
                known.join(", ")
            )
        })
}

/// Every override must name a tool that exists, or it silently does nothing.
fn check_overrides(
    tools: &BTreeMap<String, ToolOverride>,
    exposed: &HashSet<String>,
    pending: &[String],
) -> Result<(), ConfigError> {
    for selector in tools.keys() {
        let Some((service, _)) = parse_selector(selector) else {
            return Err(ConfigError(format!(
                "at `tools.{selector}`: {selector:?} is not a method selector; write package.Service/Method"
            )));
        };
        if !exposed.contains(selector) && !pending.iter().any(|known| known == service) {
            return Err(ConfigError(format!(
                "at `tools.{selector}`: {selector} is not an exposed method; expose it under `services` or remove the override"
            )));
        }
    }
    Ok(())
}

fn build_tool(
    service: &ServiceDescriptor,
    method: MethodDescriptor,
    config: &ServiceConfig,
    overrides: &ToolOverride,
    docs: &Docs,
    gate: &Gate,
) -> Result<Tool, ConfigError> {
    let selector = format!("{}/{}", service.full_name(), method.name());
    let name = overrides
        .name
        .clone()
        .unwrap_or_else(|| format!("{}_{}", service.name(), method.name()));
    if !tool_name::is_valid(&name) {
        let key = if overrides.name.is_some() {
            format!("at `tools.{selector}.name`: ")
        } else {
            String::new()
        };
        return Err(ConfigError(format!(
            "{key}tool name {name:?} for {selector} is not 1-{} characters of [A-Za-z0-9_-]",
            tool_name::MAX_LEN
        )));
    }
    let description = overrides
        .description
        .clone()
        .or_else(|| docs.method(&method).map(str::to_owned))
        .unwrap_or_else(|| format!("Calls {selector}."));
    let timeout_ms = overrides.timeout_ms.unwrap_or(config.timeout_ms);
    let description = match stream_words(
        CallKind::of(&method),
        overrides.max_messages.or(config.max_messages),
        timeout_ms,
    ) {
        Some(words) => format!("{description} {words}"),
        None => description,
    };
    let operation = operation_types(&method, overrides.operation.as_ref(), &selector)?;
    let description = match &operation {
        Some(operation) => format!("{description} {}", task_words(&operation.response, timeout_ms)),
        None => description,
    };
    let title = overrides
        .title
        .clone()
        .unwrap_or_else(|| format!("{}: {}", service.name(), method.name()));
    let mut definition = Map::new();
    definition.insert("name".into(), json!(name));
    definition.insert("title".into(), json!(title));
    definition.insert("description".into(), json!(description));
    let kind = CallKind::of(&method);
    let max_messages = overrides
        .max_messages
        .or(config.max_messages)
        .unwrap_or(DEFAULT_MAX_MESSAGES);
    let input = tool_schema(&selector, &method.input(), Direction::Input, docs, gate)?;
    // A task tool's result is the operation's response, never the Operation itself.
    let output_message = operation
        .as_ref()
        .map_or_else(|| method.output(), |operation| operation.response.clone());
    let output = tool_schema(&selector, &output_message, Direction::Output, docs, gate)?;
    // A stream's messages are items of an array: each takes its message's own JSON, wrapped or not.
    let (input_schema, wrap_input) = match kind.sends_many() {
        true => (messages_input_schema(input, max_messages), false),
        false => object_root(input),
    };
    let (output_schema, wrap_output) = match kind.receives_many() {
        true => (stream_output_schema(output), false),
        false => object_root(output),
    };
    definition.insert("inputSchema".into(), input_schema);
    definition.insert("outputSchema".into(), output_schema);
    let annotations = match &overrides.annotations {
        Some(annotations) => annotations.to_json(),
        None => default_annotations(&method),
    };
    if !annotations.is_empty() {
        definition.insert("annotations".into(), Value::Object(annotations));
    }
    let definition = to_raw_value(&definition).map_err(|error| {
        ConfigError(format!(
            "{selector}: the tool's definition could not be written: {error}"
        ))
    })?;
    Ok(Tool {
        name,
        kind,
        max_messages,
        cluster: config.cluster.clone(),
        timeout: Duration::from_millis(timeout_ms),
        grpc_path: format!("/{selector}"),
        grpc_timeout: grpc::timeout(upstream_deadline(kind, Duration::from_millis(timeout_ms))),
        router_timeout_ms: (Duration::from_millis(timeout_ms) + ROUTER_TIMEOUT_GRACE)
            .as_millis()
            .to_string(),
        metadata: tool_metadata(
            &selector,
            config,
            overrides,
            (!kind.sends_many() && !wrap_input).then(|| method.input()),
        )?,
        metadata_arguments: overrides.metadata_arguments,
        wrap_input,
        wrap_output,
        method,
        definition,
        response_plan: OnceLock::new(),
        task: operation.map(|operation| TaskTool {
            operation,
            operations_cluster: config
                .operations_cluster
                .clone()
                .unwrap_or_else(|| config.cluster.clone()),
            response_plan: OnceLock::new(),
        }),
    })
}

/// The metadata of a tool's calls: the service's fixed text, then the tool's own (templates of
/// its arguments, read against `input`, its request message when the arguments are one) over
/// the service's of the same key.
fn tool_metadata(
    selector: &str,
    config: &ServiceConfig,
    overrides: &ToolOverride,
    input: Option<MessageDescriptor>,
) -> Result<Vec<(String, MetadataValue)>, ConfigError> {
    let mut metadata: Vec<(String, MetadataValue)> = config
        .metadata
        .iter()
        .filter(|(key, _)| !overrides.metadata.contains_key(*key))
        .map(|(key, value)| (key.clone(), MetadataValue::fixed(value)))
        .collect();
    for (key, template) in &overrides.metadata {
        let at = format!("at `tools.{selector}.metadata.{key}`");
        metadata.push((key.clone(), MetadataValue::parse(&at, template, input.as_ref())?));
    }
    let reads_arguments = metadata.iter().any(|(_, value)| value.arguments().next().is_some());
    if overrides.metadata_arguments == MetadataArguments::Remove && !reads_arguments {
        return Err(ConfigError(format!(
            "at `tools.{selector}.metadata_arguments`: `remove` clears the arguments the tool's metadata reads, \
             and no `tools.{selector}.metadata` entry reads one (write `{{field}}` in a value)"
        )));
    }
    Ok(metadata)
}

/// The deadline a call of `kind` with the tool's `timeout` sends its upstream.
fn upstream_deadline(kind: CallKind, timeout: Duration) -> Duration {
    match kind.receives_many() {
        true => timeout + WINDOW_DEADLINE_GRACE,
        false => timeout,
    }
}

/// What a task tool's description adds, so that a model knows the call may come back as a task.
fn task_words(response: &MessageDescriptor, timeout_ms: u64) -> String {
    format!(
        "Runs as a task: the method starts a long-running operation, whose result ({}) is the tool's output. \
         A client that declares tasks gets the task at once and polls it; otherwise the call waits for the result, \
         at most {timeout_ms} ms.",
        response.name()
    )
}

/// The schema of one side of the method `selector`; refused, naming the method and the bound,
/// when even its shared layout is too large (see `proto_json::schema`).
fn tool_schema(
    selector: &str,
    message: &MessageDescriptor,
    direction: Direction,
    docs: &Docs,
    gate: &Gate,
) -> Result<Value, ConfigError> {
    message_schema(message, direction, docs, gate).map_err(|SchemaTooLarge| {
        let service = selector.split_once('/').map_or(selector, |(service, _)| service);
        let side = match direction {
            Direction::Input => "input",
            Direction::Output => "output",
        };
        ConfigError(format!(
            "at `services.{service}`: the {side} schema of {selector} (message {}) would be larger than \
             {MAX_SCHEMA_BYTES} bytes of JSON, even with each message that occurs more than once written once \
             under `$defs`; leave the method out (`expose: selected`) or give it a smaller message",
            message.full_name()
        ))
    })
}

/// What a streaming tool's description adds, so that a model knows how it is called and what
/// comes back.
fn stream_words(kind: CallKind, max_messages: Option<usize>, timeout_ms: u64) -> Option<String> {
    let max = max_messages.unwrap_or(DEFAULT_MAX_MESSAGES);
    let sends = format!("Takes its request messages as `messages` (at most {max}), sent in order on one stream.");
    let gathers = format!(
        "Returns the messages the method streams back as `messages` (at most {max}, within {timeout_ms} ms), \
         and how the stream ended as `end`."
    );
    match kind {
        CallKind::Unary => None,
        CallKind::ServerStreaming => Some(gathers),
        CallKind::ClientStreaming => Some(sends),
        CallKind::Bidirectional => Some(format!("{sends} {gathers}")),
    }
}

/// Hints from the method's `idempotency_level`; hints only, never authorization.
fn default_annotations(method: &MethodDescriptor) -> Map<String, Value> {
    const NO_SIDE_EFFECTS: i32 = 1;
    const IDEMPOTENT: i32 = 2;
    let level = match method.options().get_field_by_name("idempotency_level").as_deref() {
        Some(ProtoValue::EnumNumber(level)) => *level,
        _ => 0,
    };
    let hints = match level {
        NO_SIDE_EFFECTS => {
            json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true})
        }
        IDEMPOTENT => json!({"readOnlyHint": false, "idempotentHint": true}),
        _ => json!({}),
    };
    match hints {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn known_services(pool: &DescriptorPool) -> String {
    let names: Vec<String> = pool.services().map(|service| service.full_name().to_owned()).collect();
    if names.is_empty() {
        "(none)".into()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests;

pub mod metadata;

pub use metadata::{remove_argument, MetadataValue};

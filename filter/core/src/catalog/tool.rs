//! One method as one tool: its name, its words (the method's comments, and what a stream or a
//! task adds), its schemas, its hints and where its calls go.

use std::sync::OnceLock;
use std::time::Duration;

use prost_reflect::{MessageDescriptor, MethodDescriptor, ServiceDescriptor, Value as ProtoValue};
use serde_json::value::to_raw_value;
use serde_json::{json, Map, Value};

use super::{MetadataValue, TaskTool, Tool};
use crate::config::{ConfigError, MetadataArguments, ServiceConfig, ToolOverride};
use crate::docs::Docs;
use crate::grpc;
use crate::proto_json::gate::Gate;
use crate::proto_json::schema::{message_schema, SchemaTooLarge, MAX_SCHEMA_BYTES};
use crate::proto_json::Direction;
use crate::streams::{messages_input_schema, stream_output_schema, CallKind, DEFAULT_MAX_MESSAGES};
use crate::tasks::operation_types;
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

pub(super) fn build_tool(
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

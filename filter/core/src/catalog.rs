//! The tool catalog: the exposed methods, compiled once per configuration into tools with
//! names, descriptions, schemas, hints and call targets.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use log::{info, warn};
use prost_reflect::{DescriptorPool, MethodDescriptor, ServiceDescriptor};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::config::{
    parse_selector, ConfigError, Exposure, MetadataArguments, PluginConfig, ServiceConfig, ToolOverride,
};
use crate::docs::Docs;
use crate::proto_json::gate::Gate;
use crate::proto_json::render::RenderPlan;
use crate::proto_json::rules::unenforced_rules;
use crate::streams::CallKind;
use crate::tasks::OperationSpec;

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
    /// or for a stream of answers a little past its window ([`tool::WINDOW_DEADLINE_GRACE`]).
    pub grpc_timeout: String,
    /// The router's timeout for a call the module routes, in milliseconds, written once: a
    /// little past the deadline ([`tool::ROUTER_TIMEOUT_GRACE`]).
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
    /// the memory of its text (docs/benchmarks/scale-and-memory.md), and the entry is only ever copied out.
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
                let tool = tool::build_tool(&service, method, service_config, &overrides, &docs, &catalog.gate)?;
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
mod tool;

pub use metadata::{remove_argument, MetadataValue};

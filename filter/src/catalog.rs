//! The tool catalog: the configured services' unary methods, compiled once per
//! configuration into tools with names, descriptions, schemas and call targets.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use log::info;
use prost_reflect::{DescriptorPool, MethodDescriptor, ServiceDescriptor, Value as ProtoValue};
use serde_json::{json, Map, Value};

use crate::config::{ConfigError, PluginConfig, ServiceConfig};
use crate::docs::Docs;
use crate::schema::{message_schema, Direction};

pub const MAX_TOOL_NAME_LEN: usize = 64;

/// One MCP tool backed by one unary gRPC method.
#[derive(Debug)]
pub struct Tool {
    pub name: String,
    pub method: MethodDescriptor,
    pub cluster: String,
    pub timeout: Duration,
    /// The tool's entry in `tools/list`.
    pub definition: Value,
}

impl Tool {
    /// Fully qualified gRPC service name, as sent on the wire.
    pub fn service_name(&self) -> &str {
        self.method.parent_service().full_name()
    }

    pub fn method_name(&self) -> &str {
        self.method.name()
    }
}

/// Every tool of a configuration, in configuration order.
#[derive(Debug, Default)]
pub struct Catalog {
    tools: Vec<Rc<Tool>>,
    by_name: HashMap<String, usize>,
}

impl Catalog {
    pub fn build(config: &PluginConfig, pool: &DescriptorPool) -> Result<Self, ConfigError> {
        let docs = Docs::from_pool(pool);
        let mut catalog = Catalog::default();
        for (index, service_config) in config.services.iter().enumerate() {
            let service = pool.get_service_by_name(&service_config.name).ok_or_else(|| {
                ConfigError(format!(
                    "at `services[{index}].name`: service {} is not in the descriptor set; known services: {}",
                    service_config.name,
                    known_services(pool)
                ))
            })?;
            for method in service.methods() {
                if method.is_client_streaming() || method.is_server_streaming() {
                    info!(
                        "skipping streaming method {}/{}: only unary methods become tools",
                        service.full_name(),
                        method.name()
                    );
                    continue;
                }
                let tool = build_tool(&service, method, service_config, &docs)?;
                catalog.insert(tool, index)?;
            }
        }
        Ok(catalog)
    }

    fn insert(&mut self, tool: Tool, service_index: usize) -> Result<(), ConfigError> {
        if let Some(&existing) = self.by_name.get(&tool.name) {
            return Err(ConfigError(format!(
                "at `services[{service_index}]`: {}/{} would be tool {:?}, which {}/{} already is; tool names must be unique",
                tool.service_name(),
                tool.method_name(),
                tool.name,
                self.tools[existing].service_name(),
                self.tools[existing].method_name(),
            )));
        }
        self.by_name.insert(tool.name.clone(), self.tools.len());
        self.tools.push(Rc::new(tool));
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&Rc<Tool>> {
        self.by_name
            .get(name)
            .and_then(|&index| self.tools.get(index))
    }

    pub fn tools(&self) -> impl Iterator<Item = &Rc<Tool>> {
        self.tools.iter()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

fn build_tool(
    service: &ServiceDescriptor,
    method: MethodDescriptor,
    config: &ServiceConfig,
    docs: &Docs,
) -> Result<Tool, ConfigError> {
    let name = tool_name(service, &method);
    if !is_valid_tool_name(&name) {
        return Err(ConfigError(format!(
            "tool name {name:?} for {}/{} is not 1-{MAX_TOOL_NAME_LEN} characters of [A-Za-z0-9_-]",
            service.full_name(),
            method.name()
        )));
    }
    let description = docs
        .method(&method)
        .map(str::to_owned)
        .unwrap_or_else(|| format!("Calls {}/{}.", service.full_name(), method.name()));
    let mut definition = Map::new();
    definition.insert("name".into(), json!(name));
    definition.insert(
        "title".into(),
        json!(format!("{}: {}", service.name(), method.name())),
    );
    definition.insert("description".into(), json!(description));
    definition.insert(
        "inputSchema".into(),
        message_schema(&method.input(), Direction::Input, docs),
    );
    definition.insert(
        "outputSchema".into(),
        message_schema(&method.output(), Direction::Output, docs),
    );
    if let Some(annotations) = annotations(&method) {
        definition.insert("annotations".into(), annotations);
    }
    Ok(Tool {
        name,
        cluster: config.cluster.clone(),
        timeout: Duration::from_millis(config.timeout_ms),
        method,
        definition: Value::Object(definition),
    })
}

/// `Service_Method`: unique within a configuration unless two packages share a service name,
/// which the catalog refuses.
fn tool_name(service: &ServiceDescriptor, method: &MethodDescriptor) -> String {
    format!("{}_{}", service.name(), method.name())
}

pub fn is_valid_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Hints from the method's `idempotency_level`; hints only, never authorization.
fn annotations(method: &MethodDescriptor) -> Option<Value> {
    const NO_SIDE_EFFECTS: i32 = 1;
    const IDEMPOTENT: i32 = 2;
    let level = match method
        .options()
        .get_field_by_name("idempotency_level")
        .as_deref()
    {
        Some(ProtoValue::EnumNumber(level)) => *level,
        _ => 0,
    };
    match level {
        NO_SIDE_EFFECTS => {
            Some(json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true}))
        }
        IDEMPOTENT => Some(json!({"readOnlyHint": false, "idempotentHint": true})),
        _ => None,
    }
}

fn known_services(pool: &DescriptorPool) -> String {
    let names: Vec<String> = pool
        .services()
        .map(|service| service.full_name().to_owned())
        .collect();
    if names.is_empty() {
        "(none)".into()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptors::embedded_pool;

    fn demo_config() -> PluginConfig {
        PluginConfig::parse(
            br#"{"services":[
                {"name":"demo.catalog.v1.CatalogService","cluster":"catalog","timeout_ms":2500},
                {"name":"demo.users.v1.UserService","cluster":"users"}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn unary_methods_become_tools_and_streaming_ones_do_not() {
        let catalog = Catalog::build(&demo_config(), &embedded_pool().unwrap()).unwrap();
        let names: Vec<&str> = catalog.tools().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "CatalogService_Search",
                "CatalogService_GetItem",
                "UserService_GetUser"
            ]
        );
        let get_item = catalog.get("CatalogService_GetItem").unwrap();
        assert_eq!(get_item.service_name(), "demo.catalog.v1.CatalogService");
        assert_eq!(get_item.method_name(), "GetItem");
        assert_eq!(get_item.cluster, "catalog");
        assert_eq!(get_item.timeout, Duration::from_millis(2500));
        assert!(catalog.get("CatalogService_WatchItems").is_none());
    }

    #[test]
    fn definitions_carry_comments_schemas_and_hints() {
        let catalog = Catalog::build(&demo_config(), &embedded_pool().unwrap()).unwrap();
        let definition = &catalog.get("UserService_GetUser").unwrap().definition;
        assert_eq!(
            definition["description"],
            "Fetch a user account by its numeric id. Fails with NOT_FOUND when no user has that id."
        );
        assert_eq!(
            definition["inputSchema"]["properties"]["user_id"]["type"],
            "integer"
        );
        assert_eq!(definition["outputSchema"]["type"], "object");
        assert_eq!(definition["annotations"]["readOnlyHint"], true);
    }

    #[test]
    fn unknown_service_names_the_key_and_the_known_services() {
        let config =
            PluginConfig::parse(br#"{"services":[{"name":"demo.Nope","cluster":"c"}]}"#).unwrap();
        let error = Catalog::build(&config, &embedded_pool().unwrap())
            .unwrap_err()
            .0;
        assert!(
            error.starts_with(
                "at `services[0].name`: service demo.Nope is not in the descriptor set"
            ),
            "{error}"
        );
        assert!(error.contains("demo.users.v1.UserService"), "{error}");
    }

    #[test]
    fn tool_names_are_checked() {
        assert!(is_valid_tool_name("CatalogService_GetItem"));
        assert!(is_valid_tool_name("a-b_C9"));
        assert!(!is_valid_tool_name(""));
        assert!(!is_valid_tool_name("a.b"));
        assert!(!is_valid_tool_name(&"x".repeat(65)));
    }
}

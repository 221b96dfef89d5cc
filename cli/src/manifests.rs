//! `switchblade check`: the plugin configurations inside deployment files, found and checked
//! with the filter's own validation. It reads Envoy bootstraps and ECDS files (the Wasm
//! filter's and the dynamic module's typed configs), Istio `WasmPlugin`s (`pluginConfig`) and
//! Envoy Gateway `EnvoyExtensionPolicy`s (`wasm[].config`), in any number of YAML documents.

use serde::Deserialize;
use serde_json::Value;
use switchblade_core::server::Server;

const WASM_TYPE: &str = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm";
const MODULE_TYPE: &str = "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter";
/// The filter's root id (Wasm) and filter name (module).
const FILTER_NAME: &str = "switchblade";

/// One plugin configuration found in a file.
#[derive(Debug, PartialEq)]
pub struct Embedded {
    /// Where it is, for people: the kind and name of the resource, or the document's index.
    pub place: String,
    /// The configuration as the filter receives it: JSON text.
    pub config: String,
}

/// Every Switchblade configuration in `yaml` (one or more documents).
pub fn embedded_configs(yaml: &str) -> Result<Vec<Embedded>, String> {
    let mut found = Vec::new();
    for (index, document) in yaml_serde::Deserializer::from_str(yaml).enumerate() {
        let value = Value::deserialize(document).map_err(|error| format!("document {}: {error}", index + 1))?;
        let place = resource_name(&value).unwrap_or_else(|| format!("document {}", index + 1));
        match value.get("kind").and_then(Value::as_str) {
            Some("WasmPlugin") if plugin_name(&value) == Some(FILTER_NAME) => {
                let config = value.pointer("/spec/pluginConfig").cloned().unwrap_or(Value::Null);
                found.push(Embedded {
                    place,
                    config: config.to_string(),
                });
            }
            Some("EnvoyExtensionPolicy") => {
                let extensions = value
                    .pointer("/spec/wasm")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten();
                for extension in
                    extensions.filter(|wasm| wasm.get("rootID").and_then(Value::as_str) == Some(FILTER_NAME))
                {
                    let config = extension.get("config").cloned().unwrap_or(Value::Null);
                    found.push(Embedded {
                        place: place.clone(),
                        config: config.to_string(),
                    });
                }
            }
            _ => typed_configs(&value, &place, &mut found),
        }
    }
    Ok(found)
}

/// Checks each configuration as the filter would: the number of tools it serves, or why the
/// filter would refuse it.
pub fn check(embedded: &Embedded) -> Result<usize, String> {
    Server::from_config_bytes(embedded.config.as_bytes())
        .map(|server| server.catalog().tool_count())
        .map_err(|error| error.to_string())
}

fn plugin_name(resource: &Value) -> Option<&str> {
    resource.pointer("/spec/pluginName").and_then(Value::as_str)
}

/// `Kind namespace/name` of a Kubernetes resource.
fn resource_name(resource: &Value) -> Option<String> {
    let kind = resource.get("kind")?.as_str()?;
    let name = resource.pointer("/metadata/name")?.as_str()?;
    Some(match resource.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    })
}

/// The filter's typed configs anywhere in an Envoy bootstrap or ECDS file.
fn typed_configs(value: &Value, place: &str, found: &mut Vec<Embedded>) {
    match value {
        Value::Object(map) => {
            let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str).map(str::to_owned);
            let config = match map.get("@type").and_then(Value::as_str) {
                Some(WASM_TYPE) if text("/config/root_id").as_deref() == Some(FILTER_NAME) => {
                    text("/config/configuration/value").map(|config| ("the Wasm filter", config))
                }
                Some(MODULE_TYPE) if text("/filter_name").as_deref() == Some(FILTER_NAME) => {
                    text("/filter_config/value").map(|config| ("the dynamic module", config))
                }
                _ => None,
            };
            match config {
                Some((filter, config)) => found.push(Embedded {
                    place: format!("{place}, {filter}"),
                    config,
                }),
                None => map.values().for_each(|inner| typed_configs(inner, place, found)),
            }
        }
        Value::Array(items) => items.iter().for_each(|inner| typed_configs(inner, place, found)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_kind_of_place() {
        let yaml = r#"
kind: WasmPlugin
metadata: {name: switchblade, namespace: istio-system}
spec: {pluginName: switchblade, pluginConfig: {services: {}}}
---
kind: EnvoyExtensionPolicy
metadata: {name: sb}
spec: {wasm: [{rootID: other, config: {}}, {rootID: switchblade, config: {mcp_path: /x}}]}
---
static_resources:
  listeners:
    - filters:
        - typed_config:
            "@type": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
            config: {root_id: switchblade, configuration: {value: '{"a":1}'}}
"#;
        let found = embedded_configs(yaml).unwrap();
        let places: Vec<(&str, &str)> = found.iter().map(|e| (e.place.as_str(), e.config.as_str())).collect();
        assert_eq!(
            places,
            [
                ("WasmPlugin istio-system/switchblade", r#"{"services":{}}"#),
                ("EnvoyExtensionPolicy sb", r#"{"mcp_path":"/x"}"#),
                ("document 3, the Wasm filter", r#"{"a":1}"#),
            ]
        );
    }

    #[test]
    fn a_wrong_configuration_is_refused_with_the_filters_words() {
        let embedded = Embedded {
            place: "x".into(),
            config: r#"{"services":{"demo.users.v1.UserService":{"cluster":"c","timout_ms":5}}}"#.into(),
        };
        let error = check(&embedded).unwrap_err();
        assert!(error.contains("timout_ms"), "{error}");
    }

    #[test]
    fn bad_yaml_says_which_document() {
        let error = embedded_configs("a: 1\n---\n[unclosed").unwrap_err();
        assert!(error.starts_with("document 2:"), "{error}");
    }
}

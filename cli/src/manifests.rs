//! The plugin configurations inside deployment files, for `switchblade check`: Envoy
//! bootstraps and ECDS files (the Wasm filter's and the dynamic module's typed configs, and the
//! ECDS files a filter's `config_discovery` reads), Istio `WasmPlugin`s (`pluginConfig`), Envoy
//! Gateway `EnvoyExtensionPolicy`s (`wasm[].config`) and bare plugin configurations (JSON or
//! YAML), in any number of YAML documents.

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

/// A filter configured through ECDS (`config_discovery`): where its configuration comes from.
#[derive(Debug, PartialEq)]
pub struct Discovery {
    pub place: String,
    /// The ECDS file (`path_config_source.path`), as Envoy reads it: relative to its working
    /// directory. `None` for a control plane (xDS), which this cannot follow.
    pub path: Option<String>,
}

/// What a file holds of Switchblade's.
#[derive(Debug, Default, PartialEq)]
pub struct Found {
    pub configs: Vec<Embedded>,
    pub discovered: Vec<Discovery>,
}

impl Found {
    pub fn is_empty(&self) -> bool {
        self.configs.is_empty() && self.discovered.is_empty()
    }
}

/// Every Switchblade configuration in `yaml` (one or more documents; JSON is YAML too).
pub fn embedded_configs(yaml: &str) -> Result<Found, String> {
    let mut found = Found::default();
    for (index, document) in yaml_serde::Deserializer::from_str(yaml).enumerate() {
        let value = Value::deserialize(document).map_err(|error| format!("document {}: {error}", index + 1))?;
        let place = resource_name(&value).unwrap_or_else(|| format!("document {}", index + 1));
        if is_bare_plugin_config(&value) {
            found.configs.push(Embedded {
                place: format!("{place}, the plugin configuration"),
                config: value.to_string(),
            });
            continue;
        }
        match value.get("kind").and_then(Value::as_str) {
            Some("WasmPlugin") if plugin_name(&value) == Some(FILTER_NAME) => {
                let config = value.pointer("/spec/pluginConfig").cloned().unwrap_or(Value::Null);
                found.configs.push(Embedded {
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
                    found.configs.push(Embedded {
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

/// A plugin configuration on its own, as `switchblade config` prints it: an object with
/// `services` that is no Kubernetes resource, bootstrap or ECDS file.
pub fn is_bare_plugin_config(value: &Value) -> bool {
    value.get("services").is_some()
        && ["kind", "static_resources", "resources"]
            .iter()
            .all(|key| value.get(key).is_none())
}

/// An HTTP filter configured through ECDS as the Wasm filter or the dynamic module.
fn discovery(filter: &serde_json::Map<String, Value>, place: &str) -> Option<Discovery> {
    let discovery = filter.get("config_discovery")?;
    let type_urls = discovery.get("type_urls")?.as_array()?;
    let filter_type = type_urls.iter().find_map(|url| match url.as_str() {
        Some(WASM_TYPE) => Some("the Wasm filter"),
        Some(MODULE_TYPE) => Some("the dynamic module"),
        _ => None,
    })?;
    let name = filter.get("name").and_then(Value::as_str).unwrap_or("?");
    let path = discovery
        .pointer("/config_source/path_config_source/path")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Some(Discovery {
        place: format!("{place}, {filter_type} `{name}` through ECDS"),
        path,
    })
}

/// The filter's typed configs and ECDS references anywhere in an Envoy bootstrap or ECDS file.
fn typed_configs(value: &Value, place: &str, found: &mut Found) {
    match value {
        Value::Object(map) => {
            if let Some(discovered) = discovery(map, place) {
                found.discovered.push(discovered);
                return;
            }
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
                Some((filter, config)) => found.configs.push(Embedded {
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
        let places: Vec<(&str, &str)> = found
            .configs
            .iter()
            .map(|e| (e.place.as_str(), e.config.as_str()))
            .collect();
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
    fn follows_ecds_and_takes_bare_configurations() {
        let yaml = r#"
http_filters:
  - name: switchblade
    config_discovery:
      config_source: {path_config_source: {path: .work/ecds/switchblade.yaml}}
      type_urls: ["type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm"]
  - name: other
    config_discovery:
      config_source: {ads: {}}
      type_urls: ["type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter"]
  - name: lua
    config_discovery:
      config_source: {ads: {}}
      type_urls: ["type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua"]
"#;
        let found = embedded_configs(yaml).unwrap();
        assert_eq!(
            found.discovered,
            [
                Discovery {
                    place: "document 1, the Wasm filter `switchblade` through ECDS".into(),
                    path: Some(".work/ecds/switchblade.yaml".into()),
                },
                Discovery {
                    place: "document 1, the dynamic module `other` through ECDS".into(),
                    path: None,
                },
            ]
        );
        let bare = embedded_configs(r#"{"services": {"a.B": {"cluster": "c"}}}"#).unwrap();
        assert_eq!(bare.configs.len(), 1);
        assert_eq!(bare.configs[0].place, "document 1, the plugin configuration");
        assert_eq!(bare.configs[0].config, r#"{"services":{"a.B":{"cluster":"c"}}}"#);
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

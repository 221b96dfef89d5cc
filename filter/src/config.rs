//! The plugin configuration: the JSON in the Wasm filter's `configuration` field.
//!
//! Parsing is strict (unknown keys are refused) and every error names the offending key,
//! because the only place a user sees it is one line in Envoy's log.

use std::fmt;

use serde::Deserialize;

pub const DEFAULT_MCP_PATH: &str = "/mcp";
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
pub const DEFAULT_PAGE_SIZE: usize = 100;
pub const MAX_PAGE_SIZE: usize = 1000;
pub const DEFAULT_LIST_TTL_MS: u64 = 300_000;

/// The whole plugin configuration.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    /// Path of the MCP endpoint; requests to any other path pass through untouched.
    #[serde(default = "default_mcp_path")]
    pub mcp_path: String,
    /// How the server introduces itself in `initialize`.
    #[serde(default)]
    pub server: ServerIdentity,
    /// The gRPC services whose unary methods become tools.
    pub services: Vec<ServiceConfig>,
    /// How `tools/list` pages and how long clients may cache it.
    #[serde(default)]
    pub tools_list: ToolsListConfig,
}

/// `tools/list` paging and caching hints.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ToolsListConfig {
    /// Tools per page; longer lists are paged with opaque cursors.
    #[serde(default = "default_page_size")]
    pub page_size: usize,
    /// `ttlMs` of `tools/list` and `server/discover` results (2026-07-28 clients cache them).
    #[serde(default = "default_list_ttl_ms")]
    pub ttl_ms: u64,
}

impl Default for ToolsListConfig {
    fn default() -> Self {
        ToolsListConfig {
            page_size: DEFAULT_PAGE_SIZE,
            ttl_ms: DEFAULT_LIST_TTL_MS,
        }
    }
}

fn default_page_size() -> usize {
    DEFAULT_PAGE_SIZE
}

fn default_list_ttl_ms() -> u64 {
    DEFAULT_LIST_TTL_MS
}

/// The `serverInfo` and `instructions` of `initialize`.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct ServerIdentity {
    pub name: Option<String>,
    pub version: Option<String>,
    pub title: Option<String>,
    pub instructions: Option<String>,
}

/// One gRPC service to expose.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServiceConfig {
    /// Fully qualified service name, for example `demo.catalog.v1.CatalogService`.
    pub name: String,
    /// Name of the Envoy cluster (HTTP/2) that serves it.
    pub cluster: String,
    /// Deadline for each call, in milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
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
        let config: PluginConfig =
            serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
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
        deserializer.end().map_err(|error| {
            ConfigError(format!(
                "trailing characters after the configuration JSON: {error}"
            ))
        })?;
        config.check()?;
        Ok(config)
    }

    fn check(&self) -> Result<(), ConfigError> {
        if !self.mcp_path.starts_with('/') || self.mcp_path.contains(['?', '#']) {
            return Err(ConfigError(format!(
                "at `mcp_path`: {:?} is not a plain absolute path; use something like \"/mcp\"",
                self.mcp_path
            )));
        }
        if !(1..=MAX_PAGE_SIZE).contains(&self.tools_list.page_size) {
            return Err(ConfigError(format!(
                "at `tools_list.page_size`: {} is not between 1 and {MAX_PAGE_SIZE}",
                self.tools_list.page_size
            )));
        }
        if self.services.is_empty() {
            return Err(ConfigError(
                "at `services`: the list is empty; name at least one gRPC service and its cluster"
                    .into(),
            ));
        }
        for (index, service) in self.services.iter().enumerate() {
            if service.cluster.trim().is_empty() {
                return Err(ConfigError(format!(
                    "at `services[{index}].cluster`: empty; give the name of the Envoy cluster that serves {}",
                    service.name
                )));
            }
            if service.timeout_ms == 0 {
                return Err(ConfigError(format!(
                    "at `services[{index}].timeout_ms`: must be greater than 0"
                )));
            }
            if let Some(first) = self.services[..index]
                .iter()
                .position(|s| s.name == service.name)
            {
                return Err(ConfigError(format!(
                    "at `services[{index}].name`: {} is already configured at `services[{first}]`; list each service once",
                    service.name
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<PluginConfig, String> {
        PluginConfig::parse(json.as_bytes()).map_err(|e| e.0)
    }

    #[test]
    fn minimal_config_gets_defaults() {
        let config = parse(r#"{"services":[{"name":"a.B","cluster":"c"}]}"#).unwrap();
        assert_eq!(config.mcp_path, "/mcp");
        assert_eq!(config.services[0].timeout_ms, DEFAULT_TIMEOUT_MS);
        assert_eq!(config.server, ServerIdentity::default());
        assert_eq!(
            config.tools_list,
            ToolsListConfig {
                page_size: 100,
                ttl_ms: 300_000
            }
        );
    }

    #[test]
    fn unknown_key_is_named_with_its_path() {
        let error = parse(r#"{"services":[{"name":"a.B","clustr":"c"}]}"#).unwrap_err();
        assert!(
            error.starts_with("at `services[0].clustr`: unknown field `clustr`"),
            "{error}"
        );
    }

    #[test]
    fn wrong_type_is_named_with_its_path() {
        let error =
            parse(r#"{"services":[{"name":"a.B","cluster":"c","timeout_ms":"5s"}]}"#).unwrap_err();
        assert!(
            error.starts_with("at `services[0].timeout_ms`: invalid type"),
            "{error}"
        );
    }

    #[test]
    fn refuses_empty_and_missing_services() {
        assert!(parse("").unwrap_err().contains("configuration is empty"));
        assert!(parse("{}")
            .unwrap_err()
            .contains("missing field `services`"));
        assert!(parse(r#"{"services":[]}"#)
            .unwrap_err()
            .starts_with("at `services`: the list is empty"));
    }

    #[test]
    fn refuses_bad_values() {
        let error =
            parse(r#"{"mcp_path":"mcp","services":[{"name":"a.B","cluster":"c"}]}"#).unwrap_err();
        assert!(error.starts_with("at `mcp_path`"), "{error}");
        let error =
            parse(r#"{"tools_list":{"page_size":0},"services":[{"name":"a.B","cluster":"c"}]}"#)
                .unwrap_err();
        assert!(
            error.starts_with("at `tools_list.page_size`: 0 is not between 1 and 1000"),
            "{error}"
        );
        let error = parse(r#"{"services":[{"name":"a.B","cluster":" "}]}"#).unwrap_err();
        assert!(error.starts_with("at `services[0].cluster`"), "{error}");
        let error =
            parse(r#"{"services":[{"name":"a.B","cluster":"c","timeout_ms":0}]}"#).unwrap_err();
        assert!(error.starts_with("at `services[0].timeout_ms`"), "{error}");
        let error =
            parse(r#"{"services":[{"name":"a.B","cluster":"c"},{"name":"a.B","cluster":"d"}]}"#)
                .unwrap_err();
        assert!(
            error.starts_with("at `services[1].name`: a.B is already configured at `services[0]`"),
            "{error}"
        );
    }

    #[test]
    fn refuses_trailing_garbage() {
        let error = parse(r#"{"services":[{"name":"a.B","cluster":"c"}]} x"#).unwrap_err();
        assert!(error.contains("trailing characters"), "{error}");
    }
}

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
    /// Sizes and depths past which input and output are refused.
    #[serde(default)]
    pub limits: Limits,
}

/// Bounds on what one request may cost.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest MCP request body, in bytes (HTTP 413 past it). Keep it below Envoy's buffer
    /// limit for the listener (`per_connection_buffer_limit_bytes`, 1 MiB by default), or
    /// Envoy answers first, in plain text.
    pub max_request_bytes: usize,
    /// Deepest JSON nesting accepted in a request body (at most 100).
    pub max_json_depth: usize,
    /// Largest request message sent upstream (the encoded tool arguments), in bytes.
    pub max_request_message_bytes: usize,
    /// Largest response message accepted from upstream, in bytes.
    pub max_response_bytes: usize,
}

/// Below serde_json's own recursion limit (128), so that this limit is the one that answers.
pub const MAX_JSON_DEPTH: usize = 100;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_bytes: 256 * 1024,
            max_json_depth: MAX_JSON_DEPTH,
            max_request_message_bytes: 1024 * 1024,
            max_response_bytes: 4 * 1024 * 1024,
        }
    }
}

/// A JSON object read in order, refusing a key given twice (serde's maps keep the last).
#[derive(Debug, Clone, PartialEq)]
pub struct OrderedMap<V>(pub Vec<(String, V)>);

mod ordered_map {
    use super::OrderedMap;
    use serde::{Deserialize, Deserializer};

    impl<V> OrderedMap<V> {
        pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
            self.0.iter().map(|(key, value)| (key.as_str(), value))
        }

        pub fn is_empty(&self) -> bool {
            self.0.is_empty()
        }
    }

    impl<'de, V: Deserialize<'de>> Deserialize<'de> for OrderedMap<V> {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Visitor<V>(std::marker::PhantomData<V>);
            impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for Visitor<V> {
                type Value = OrderedMap<V>;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object keyed by fully qualified service name")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                    let mut entries: Vec<(String, V)> = Vec::new();
                    while let Some(key) = map.next_key::<String>()? {
                        if entries.iter().any(|(existing, _)| *existing == key) {
                            return Err(serde::de::Error::custom(format!("{key} is listed twice")));
                        }
                        let value = map.next_value()?;
                        entries.push((key, value));
                    }
                    Ok(OrderedMap(entries))
                }
            }
            deserializer.deserialize_map(Visitor(std::marker::PhantomData))
        }
    }
}

/// The `serverInfo` and `instructions` the server introduces itself with.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct ServerIdentity {
    pub name: Option<String>,
    pub version: Option<String>,
    pub title: Option<String>,
    pub instructions: Option<String>,
}

/// Which methods of a service become tools.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Exposure {
    /// Every unary method (streaming ones are skipped, with a log line each).
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
    pub timeout_ms: u64,
    /// gRPC metadata sent with every call to this service.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

/// What a tool shows of itself, instead of what the descriptors say.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct ToolOverride {
    pub name: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    /// MCP tool annotations (hints for clients, never authorization).
    pub annotations: Option<Annotations>,
    pub timeout_ms: Option<u64>,
}

/// MCP tool annotations.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
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

/// Headers that are never forwarded or set as metadata: HTTP/2 and gRPC framing, and the
/// MCP routing headers, which describe the MCP request and not the gRPC one.
const RESERVED_METADATA: [&str; 9] = [
    "content-type",
    "content-length",
    "te",
    "host",
    "connection",
    "user-agent",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
];

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
        let limits = &self.limits;
        let sizes = [
            ("max_request_bytes", limits.max_request_bytes),
            ("max_request_message_bytes", limits.max_request_message_bytes),
            ("max_response_bytes", limits.max_response_bytes),
        ];
        if let Some((key, _)) = sizes.iter().find(|(_, value)| *value == 0) {
            return Err(ConfigError(format!("at `limits.{key}`: must be greater than 0")));
        }
        if !(1..=MAX_JSON_DEPTH).contains(&limits.max_json_depth) {
            return Err(ConfigError(format!(
                "at `limits.max_json_depth`: {} is not between 1 and {MAX_JSON_DEPTH}",
                limits.max_json_depth
            )));
        }
        if self.services.is_empty() {
            return Err(ConfigError(
                "at `services`: no services; map at least one fully qualified gRPC service name to its cluster".into(),
            ));
        }
        for (name, service) in self.services.iter() {
            check_service(name, service)?;
        }
        for (selector, tool) in &self.tools {
            if tool.timeout_ms == Some(0) {
                return Err(ConfigError(format!(
                    "at `tools.{selector}.timeout_ms`: must be greater than 0"
                )));
            }
        }
        for (index, origin) in self.allowed_origins.iter().enumerate() {
            if origin != "*" && !is_origin(origin) {
                return Err(ConfigError(format!(
                    "at `allowed_origins[{index}]`: {origin:?} is not an origin; write scheme://host[:port], like \"https://chat.example.com\", or \"*\""
                )));
            }
        }
        for (index, host) in self.allowed_hosts.iter().enumerate() {
            if host.is_empty() || host.contains(['/', ' ']) || host != &host.to_ascii_lowercase() {
                return Err(ConfigError(format!(
                    "at `allowed_hosts[{index}]`: {host:?} is not a lowercase host[:port], like \"mcp.example.com\" or \"127.0.0.1:10000\""
                )));
            }
        }
        for (index, header) in self.forward_headers.iter().enumerate() {
            check_metadata_key(header)
                .map_err(|problem| ConfigError(format!("at `forward_headers[{index}]`: {problem}")))?;
            if self.forward_headers[..index].contains(header) {
                return Err(ConfigError(format!(
                    "at `forward_headers[{index}]`: {header:?} is listed twice"
                )));
            }
        }
        Ok(())
    }
}

fn check_service(name: &str, service: &ServiceConfig) -> Result<(), ConfigError> {
    let at = |key: &str| format!("at `services.{name}.{key}`");
    if service.cluster.trim().is_empty() {
        return Err(ConfigError(format!(
            "{}: empty; give the name of the Envoy cluster that serves {name}",
            at("cluster")
        )));
    }
    if service.timeout_ms == 0 {
        return Err(ConfigError(format!("{}: must be greater than 0", at("timeout_ms"))));
    }
    match (service.expose, service.methods.is_empty()) {
        (Exposure::Selected, true) => {
            return Err(ConfigError(format!(
                "{}: `expose: selected` needs the methods to expose, written {name}/Method",
                at("methods")
            )))
        }
        (Exposure::All | Exposure::None, false) => {
            return Err(ConfigError(format!(
                "{}: methods are only read with `expose: selected`; remove them or set `expose` to \"selected\"",
                at("methods")
            )))
        }
        _ => {}
    }
    for (key, value) in &service.metadata {
        check_metadata_key(key)
            .map_err(|problem| ConfigError(format!("{}: {problem}", at(&format!("metadata.{key}")))))?;
        if !value.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return Err(ConfigError(format!(
                "{}: metadata values must be printable ASCII",
                at(&format!("metadata.{key}"))
            )));
        }
    }
    Ok(())
}

/// gRPC metadata keys: lowercase `[0-9a-z_.-]`, not reserved, not pseudo-headers, not `grpc-*`,
/// and not binary (`-bin`), since values here are text.
fn check_metadata_key(key: &str) -> Result<(), String> {
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b))
    {
        return Err(format!("{key:?} is not a lowercase header name ([0-9a-z_.-])"));
    }
    if key.starts_with("grpc-") || key.ends_with("-bin") || RESERVED_METADATA.contains(&key) {
        return Err(format!(
            "{key:?} is reserved for the HTTP/2 and gRPC protocols and cannot be forwarded or set"
        ));
    }
    Ok(())
}

/// `scheme://host[:port]`, lowercase, with nothing after the authority.
fn is_origin(origin: &str) -> bool {
    origin.split_once("://").is_some_and(|(scheme, authority)| {
        !scheme.is_empty()
            && !authority.is_empty()
            && !authority.contains(['/', '?', '#', ' '])
            && origin == origin.to_ascii_lowercase()
    })
}

/// `package.Service/Method`, split.
pub fn parse_selector(selector: &str) -> Option<(&str, &str)> {
    let (service, method) = selector.split_once('/')?;
    let valid = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
    };
    (valid(service) && valid(method) && !method.contains('.')).then_some((service, method))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<PluginConfig, String> {
        PluginConfig::parse(json.as_bytes()).map_err(|e| e.0)
    }

    #[test]
    fn minimal_config_gets_defaults() {
        let config = parse(r#"{"services":{"a.B":{"cluster":"c"}}}"#).unwrap();
        assert_eq!(config.mcp_path, "/mcp");
        let (name, service) = config.services.iter().next().unwrap();
        assert_eq!(
            (name, service.expose, service.timeout_ms),
            ("a.B", Exposure::All, DEFAULT_TIMEOUT_MS)
        );
        assert_eq!(config.server, ServerIdentity::default());
        assert_eq!(
            config.tools_list,
            ToolsListConfig {
                page_size: 100,
                ttl_ms: 300_000
            }
        );
        assert!(config.descriptor_set.is_none() && config.forward_headers.is_empty() && config.tools.is_empty());
    }

    #[test]
    fn services_keep_their_order() {
        let config =
            parse(r#"{"services":{"z.Z":{"cluster":"c"},"a.A":{"cluster":"c"},"m.M":{"cluster":"c"}}}"#).unwrap();
        let names: Vec<&str> = config.services.iter().map(|(name, _)| name).collect();
        assert_eq!(names, ["z.Z", "a.A", "m.M"]);
    }

    #[test]
    fn full_config_parses() {
        let config = parse(
            r#"{"descriptor_set":"AA==","forward_headers":["authorization","x-request-id"],
                "services":{"a.B":{"cluster":"c","expose":"selected","methods":["a.B/Get"],"timeout_ms":5,"metadata":{"x-tenant":"t1"}}},
                "tools":{"a.B/Get":{"name":"get","title":"Get","description":"d","timeout_ms":7,"annotations":{"readOnlyHint":true,"openWorldHint":false}}}}"#,
        )
        .unwrap();
        let tool = &config.tools["a.B/Get"];
        assert_eq!(tool.name.as_deref(), Some("get"));
        assert_eq!(
            Value::Object(tool.annotations.as_ref().unwrap().to_json()),
            serde_json::json!({"readOnlyHint": true, "openWorldHint": false})
        );
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_named_with_their_path() {
        let error = parse(r#"{"services":{"a.B":{"clustr":"c"}}}"#).unwrap_err();
        assert!(
            error.starts_with("at `services.a.B.clustr`: unknown field `clustr`"),
            "{error}"
        );
        let error = parse(r#"{"services":{"a.B":{"cluster":"c","timeout_ms":"5s"}}}"#).unwrap_err();
        assert!(
            error.starts_with("at `services.a.B.timeout_ms`: invalid type"),
            "{error}"
        );
        let error = parse(r#"{"services":{"a.B":{"cluster":"c","expose":"some"}}}"#).unwrap_err();
        assert!(
            error.starts_with(
                "at `services.a.B.expose`: unknown variant `some`, expected one of `all`, `selected`, `none`"
            ),
            "{error}"
        );
        let error = parse(r#"{"services":{"a.B":{"cluster":"c"}},"tools":{"a.B/X":{"nam":"x"}}}"#).unwrap_err();
        assert!(
            error.starts_with("at `tools.a.B/X.nam`: unknown field `nam`"),
            "{error}"
        );
    }

    #[test]
    fn refuses_empty_and_missing_services() {
        assert!(parse("").unwrap_err().contains("configuration is empty"));
        assert_eq!(
            parse("{}").unwrap_err(),
            "the configuration is not valid JSON for this filter: missing field `services` at line 1 column 2"
        );
        assert_eq!(
            parse("{").unwrap_err(),
            "the configuration is not valid JSON for this filter: EOF while parsing an object at line 1 column 1"
        );
        assert!(parse(r#"{"services":{}}"#)
            .unwrap_err()
            .starts_with("at `services`: no services"));
        assert!(parse(r#"{"services":[]}"#)
            .unwrap_err()
            .starts_with("at `services`: invalid type: sequence"));
        let twice = parse(r#"{"services":{"a.B":{"cluster":"c"},"a.B":{"cluster":"d"}}}"#).unwrap_err();
        assert!(twice.contains("a.B is listed twice"), "{twice}");
    }

    #[test]
    fn refuses_bad_values() {
        let cases = [
            (
                r#"{"mcp_path":"mcp","services":{"a.B":{"cluster":"c"}}}"#,
                "at `mcp_path`",
            ),
            (
                r#"{"tools_list":{"page_size":0},"services":{"a.B":{"cluster":"c"}}}"#,
                "at `tools_list.page_size`: 0 is not between 1 and 1000",
            ),
            (
                r#"{"services":{"a.B":{"cluster":" "}}}"#,
                "at `services.a.B.cluster`: empty",
            ),
            (
                r#"{"services":{"a.B":{"cluster":"c","timeout_ms":0}}}"#,
                "at `services.a.B.timeout_ms`: must be greater than 0",
            ),
            (
                r#"{"services":{"a.B":{"cluster":"c","expose":"selected"}}}"#,
                "at `services.a.B.methods`: `expose: selected` needs the methods",
            ),
            (
                r#"{"services":{"a.B":{"cluster":"c","methods":["a.B/X"]}}}"#,
                "at `services.a.B.methods`: methods are only read with `expose: selected`",
            ),
            (
                r#"{"services":{"a.B":{"cluster":"c","metadata":{"X-Up":"1"}}}}"#,
                "at `services.a.B.metadata.X-Up`: \"X-Up\" is not a lowercase header name",
            ),
            (
                r#"{"services":{"a.B":{"cluster":"c","metadata":{"grpc-timeout":"1S"}}}}"#,
                "is reserved",
            ),
            (
                r#"{"services":{"a.B":{"cluster":"c","metadata":{"x":"caf\u00e9"}}}}"#,
                "metadata values must be printable ASCII",
            ),
            (
                r#"{"services":{"a.B":{"cluster":"c"}},"forward_headers":[":path"]}"#,
                "at `forward_headers[0]`: \":path\" is not a lowercase header name",
            ),
            (
                r#"{"services":{"a.B":{"cluster":"c"}},"forward_headers":["content-type"]}"#,
                "at `forward_headers[0]`: \"content-type\" is reserved",
            ),
            (
                r#"{"services":{"a.B":{"cluster":"c"}},"forward_headers":["x-a","x-a"]}"#,
                "at `forward_headers[1]`: \"x-a\" is listed twice",
            ),
            (
                r#"{"services":{"a.B":{"cluster":"c"}},"tools":{"a.B/X":{"timeout_ms":0}}}"#,
                "at `tools.a.B/X.timeout_ms`: must be greater than 0",
            ),
            (
                r#"{"services":{"a.B":{"cluster":"c"}},"allowed_origins":["chat.example.com"]}"#,
                "at `allowed_origins[0]`: \"chat.example.com\" is not an origin",
            ),
            (
                r#"{"services":{"a.B":{"cluster":"c"}},"allowed_origins":["https://x.com/app"]}"#,
                "at `allowed_origins[0]`",
            ),
            (
                r#"{"services":{"a.B":{"cluster":"c"}},"limits":{"max_json_depth":500}}"#,
                "at `limits.max_json_depth`: 500 is not between 1 and 100",
            ),
            (
                r#"{"services":{"a.B":{"cluster":"c"}},"limits":{"max_response_bytes":0}}"#,
                "at `limits.max_response_bytes`: must be greater than 0",
            ),
            (
                r#"{"services":{"a.B":{"cluster":"c"}},"allowed_hosts":["MCP.example.com"]}"#,
                "at `allowed_hosts[0]`: \"MCP.example.com\" is not a lowercase host[:port]",
            ),
        ];
        for (json, expected) in cases {
            let error = parse(json).unwrap_err();
            assert!(
                error.starts_with(expected) || error.contains(expected),
                "{json}: {error}"
            );
        }
    }

    #[test]
    fn refuses_trailing_garbage() {
        let error = parse(r#"{"services":{"a.B":{"cluster":"c"}}} x"#).unwrap_err();
        assert!(error.contains("trailing characters"), "{error}");
    }

    #[test]
    fn selectors() {
        assert_eq!(
            parse_selector("demo.catalog.v1.CatalogService/GetItem"),
            Some(("demo.catalog.v1.CatalogService", "GetItem"))
        );
        assert_eq!(parse_selector("Svc/M"), Some(("Svc", "M")));
        for bad in ["", "a.B", "a.B/", "/M", "a.B/M/N", "a.B/M.x", "a B/M"] {
            assert_eq!(parse_selector(bad), None, "{bad}");
        }
    }
}

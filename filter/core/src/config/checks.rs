//! The checks a configuration must pass before a catalog is built from it: each names the key
//! at fault and what to write instead.

use super::{
    Authorization, ConfigError, Exposure, PluginConfig, ServiceConfig, MAX_JSON_DEPTH, MAX_PAGE_SIZE,
    MIN_REFLECTION_INTERVAL_MS,
};
use base64::Engine as _;

/// The header a bearer token travels in.
const TOKEN_HEADER: &str = "authorization";

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
    /// Every check that needs no descriptors (those run when the catalog is built).
    pub(super) fn check(&self) -> Result<(), ConfigError> {
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
        let tools = &self.discovery_tools;
        for (key, name) in [("search", &tools.search), ("call", &tools.call)] {
            if !crate::tool_name::is_valid(name) {
                return Err(ConfigError(format!(
                    "at `discovery_tools.{key}`: {name:?} is not a tool name, 1-{} characters of [A-Za-z0-9_-]",
                    crate::tool_name::MAX_LEN
                )));
            }
        }
        if tools.search == tools.call {
            return Err(ConfigError(format!(
                "at `discovery_tools`: search and call are both named {:?}; give them two names",
                tools.call
            )));
        }
        let limits = &self.limits;
        let sizes = [
            ("max_request_bytes", limits.max_request_bytes),
            ("max_request_message_bytes", limits.max_request_message_bytes),
            ("max_response_bytes", limits.max_response_bytes),
            ("max_rendered_bytes", limits.max_rendered_bytes.unwrap_or(1)),
            ("max_batch_size", limits.max_batch_size),
            ("max_calls_in_flight", limits.max_calls_in_flight),
            ("max_batch_reply_bytes", limits.max_batch_reply_bytes.unwrap_or(1)),
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
        super::quota::check(self)?;
        for (selector, tool) in &self.tools {
            if tool.timeout_ms == Some(0) {
                return Err(ConfigError(format!(
                    "at `tools.{selector}.timeout_ms`: must be greater than 0"
                )));
            }
            if tool.max_messages == Some(0) {
                return Err(ConfigError(format!(
                    "at `tools.{selector}.max_messages`: must be greater than 0"
                )));
            }
            for (key, value) in &tool.metadata {
                check_metadata_entry(&format!("at `tools.{selector}.metadata.{key}`"), key, value)?;
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
        let reflection = &self.reflection;
        if reflection.interval_ms < MIN_REFLECTION_INTERVAL_MS {
            return Err(ConfigError(format!(
                "at `reflection.interval_ms`: {} is below {MIN_REFLECTION_INTERVAL_MS}; reading reflection that often would load the upstream for nothing",
                reflection.interval_ms
            )));
        }
        if reflection.timeout_ms == 0 {
            return Err(ConfigError("at `reflection.timeout_ms`: must be greater than 0".into()));
        }
        self.tasks.check()?;
        if let Some(header) = &self.routing.cluster_header {
            check_metadata_key(header)
                .map_err(|problem| ConfigError(format!("at `routing.cluster_header`: {problem}")))?;
        }
        for (index, header) in self.forward_headers.iter().enumerate() {
            check_metadata_key(header)
                .map_err(|problem| ConfigError(format!("at `forward_headers[{index}]`: {problem}")))?;
            if self.forward_headers[..index].contains(header) {
                return Err(ConfigError(format!(
                    "at `forward_headers[{index}]`: {header:?} is listed twice"
                )));
            }
            if header == TOKEN_HEADER && !self.allow_token_passthrough {
                return Err(ConfigError(format!(
                    "at `forward_headers[{index}]`: \"authorization\" would hand the client's token to the upstream, which the MCP specification forbids (a token is issued for this server alone); \
                     hand the upstream the verified caller with `authorization.caller_metadata`, or, if the upstream truly needs the token, set `allow_token_passthrough: true`"
                )));
            }
        }
        if let Some(authorization) = &self.authorization {
            self.check_caller_metadata(authorization)?;
        }
        Ok(())
    }

    /// Caller metadata names are metadata keys that nothing else sets: not a forwarded header
    /// (a client could then write it) and not a service's fixed metadata.
    fn check_caller_metadata(&self, authorization: &Authorization) -> Result<(), ConfigError> {
        for (name, claim) in &authorization.caller_metadata {
            let at = format!("at `authorization.caller_metadata.{name}`");
            check_metadata_key(name).map_err(|problem| ConfigError(format!("{at}: {problem}")))?;
            if name == TOKEN_HEADER {
                return Err(ConfigError(format!(
                    "{at}: \"authorization\" carries credentials, not a caller's claims; choose a name like \"x-caller-sub\""
                )));
            }
            if self.forward_headers.contains(name) {
                return Err(ConfigError(format!(
                    "{at}: {name:?} is also in `forward_headers`, where a client would write it; remove it there"
                )));
            }
            if let Some((service, _)) = self
                .services
                .iter()
                .find(|(_, service)| service.metadata.contains_key(name))
            {
                return Err(ConfigError(format!(
                    "{at}: {name:?} is also fixed metadata of {service} (`services.{service}.metadata`); give one of them another name"
                )));
            }
            if let Some((selector, _)) = self.tools.iter().find(|(_, tool)| tool.metadata.contains_key(name)) {
                return Err(ConfigError(format!(
                    "{at}: {name:?} is also metadata of {selector} (`tools.{selector}.metadata`); give one of them another name"
                )));
            }
            if claim.names().is_empty() || claim.names().iter().any(String::is_empty) {
                return Err(ConfigError(format!(
                    "{at}: a claim name must not be empty; write a name like \"sub\", or a path like [\"org\", \"id\"]"
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
    if service.max_messages == Some(0) {
        return Err(ConfigError(format!("{}: must be greater than 0", at("max_messages"))));
    }
    if service
        .operations_cluster
        .as_deref()
        .is_some_and(|cluster| cluster.trim().is_empty())
    {
        return Err(ConfigError(format!(
            "{}: empty; give the Envoy cluster that serves google.longrunning.Operations for {name}, or leave it out to use `cluster`",
            at("operations_cluster")
        )));
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
        check_metadata_entry(&at(&format!("metadata.{key}")), key, value)?;
    }
    Ok(())
}

/// A configured metadata entry (`at` names it): a key that may be set, a value that is
/// printable ASCII; a binary key's (`-bin`) value is its bytes in base64, as gRPC carries them.
fn check_metadata_entry(at: &str, key: &str, value: &str) -> Result<(), ConfigError> {
    let problem = |problem: String| ConfigError(format!("{at}: {problem}"));
    if key.ends_with(BINARY_SUFFIX) {
        check_settable_key(key).map_err(problem)?;
        return match base64::engine::general_purpose::STANDARD.decode(value) {
            Ok(_) => Ok(()),
            Err(_) if value.contains('{') => Err(problem(format!(
                "{key:?} is binary metadata, so its value is fixed base64; an argument's value cannot go into it"
            ))),
            Err(error) => Err(problem(format!(
                "{key:?} is binary metadata (`-bin`), so its value must be base64 (RFC 4648, padded): {error}"
            ))),
        };
    }
    check_metadata_key(key).map_err(problem)?;
    if !value.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(ConfigError(format!("{at}: metadata values must be printable ASCII")));
    }
    Ok(())
}

/// The suffix of gRPC's binary metadata keys, whose values travel in base64.
const BINARY_SUFFIX: &str = "-bin";

/// Text metadata keys (a header forwarded, a caller's claim): settable, and not binary (`-bin`).
fn check_metadata_key(key: &str) -> Result<(), String> {
    check_settable_key(key)?;
    if key.ends_with(BINARY_SUFFIX) {
        return Err(format!(
            "{key:?} is binary metadata (`-bin`), whose values are base64 bytes; only a service's or tool's fixed `metadata` can set one"
        ));
    }
    Ok(())
}

/// gRPC metadata keys this filter may set: lowercase `[0-9a-z_.-]`, not reserved, not
/// pseudo-headers, not `grpc-*`, not Envoy's controls.
fn check_settable_key(key: &str) -> Result<(), String> {
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b))
    {
        return Err(format!("{key:?} is not a lowercase header name ([0-9a-z_.-])"));
    }
    if key.starts_with("grpc-") || RESERVED_METADATA.contains(&key) {
        return Err(format!(
            "{key:?} is reserved for the HTTP/2 and gRPC protocols and cannot be forwarded or set"
        ));
    }
    // On a call the module routes, these would steer Envoy's router (retries, timeouts,
    // hosts) from the client's request.
    if key.starts_with("x-envoy-") {
        return Err(format!(
            "{key:?} is an Envoy control header (x-envoy-*): Envoy's router acts on it, so it cannot be forwarded or set"
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

//! MCP protocol versions and eras, chosen per request, and the checks the stateless
//! 2026-07-28 era makes before a request is served (SEP-2243 header/body agreement).

use std::borrow::Cow;
use std::fmt;

use base64::Engine;
use serde_json::{json, Map, Value};

use crate::http::McpHeaders;
use crate::jsonrpc::{RpcError, HEADER_MISMATCH, INVALID_PARAMS, METHOD_NOT_FOUND, UNSUPPORTED_PROTOCOL_VERSION};

/// The stateless revision: no handshake, metadata on every request.
pub const MODERN_VERSION: &str = "2026-07-28";
/// Handshake-era revisions served, newest first.
pub const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// What a request without `MCP-Protocol-Version` speaks (the transport spec's rule).
pub const DEFAULT_LEGACY_VERSION: &str = "2025-03-26";
/// The one revision that allows JSON-RPC batches.
pub const BATCH_VERSION: &str = "2025-03-26";

pub const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";
pub const CLIENT_CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";
pub const SERVER_INFO_META: &str = "io.modelcontextprotocol/serverInfo";

/// Every version served, newest first.
pub fn supported_versions() -> Vec<&'static str> {
    std::iter::once(MODERN_VERSION).chain(LEGACY_VERSIONS).collect()
}

/// The protocol era of one POST.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// Handshake era, with the version the request speaks.
    Legacy(&'static str),
    /// 2026-07-28: stateless, every request carries its version and capabilities.
    Modern,
}

impl Era {
    /// Picks the era from the `MCP-Protocol-Version` header. A body that declares the modern
    /// envelope is modern whatever the header says, so that a missing or contradicting header
    /// is reported rather than the request served under the other era's rules.
    pub fn of(header: Option<&str>, body_declares_modern: bool) -> Result<Era, RpcError> {
        let Some(version) = header else {
            return Ok(if body_declares_modern {
                Era::Modern
            } else {
                Era::Legacy(DEFAULT_LEGACY_VERSION)
            });
        };
        match LEGACY_VERSIONS.iter().find(|known| **known == version) {
            Some(_) if body_declares_modern => Ok(Era::Modern),
            Some(known) => Ok(Era::Legacy(known)),
            None if version == MODERN_VERSION => Ok(Era::Modern),
            None => Err(unsupported_version(version)),
        }
    }

    /// The HTTP status for a JSON-RPC error code, as the reference SDKs map them.
    pub fn error_status(self, code: i64) -> u16 {
        use crate::jsonrpc::{INVALID_REQUEST, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY, PARSE_ERROR};
        match (self, code) {
            (_, PARSE_ERROR | INVALID_REQUEST | HEADER_MISMATCH | UNSUPPORTED_PROTOCOL_VERSION) => 400,
            (Era::Modern, MISSING_REQUIRED_CLIENT_CAPABILITY) => 400,
            (Era::Modern, INVALID_PARAMS) => 400,
            (Era::Modern, METHOD_NOT_FOUND) => 404,
            _ => 200,
        }
    }
}

pub fn unsupported_version(requested: &str) -> RpcError {
    RpcError::new(
        &Value::Null,
        UNSUPPORTED_PROTOCOL_VERSION,
        format!("Unsupported protocol version {requested:?}"),
    )
    .with_data(json!({"supported": supported_versions(), "requested": requested}))
}

/// Whether a message's `params._meta` names a protocol version (the modern envelope).
pub fn declares_modern_envelope(params: Option<&Value>) -> bool {
    params
        .and_then(|params| params.get("_meta"))
        .and_then(|meta| meta.get(PROTOCOL_VERSION_META))
        .is_some()
}

/// The 2026-07-28 checks, in the reference SDKs' order: the `_meta` envelope, then
/// header/body agreement, then the version itself.
pub fn check_modern_request(
    id: &Value,
    method: &str,
    params: &Map<String, Value>,
    headers: &McpHeaders,
) -> Result<(), RpcError> {
    let Some(Value::Object(meta)) = params.get("_meta") else {
        return Err(RpcError::new(
            id,
            INVALID_PARAMS,
            format!("Invalid params: params._meta must be an object carrying {PROTOCOL_VERSION_META:?} and {CLIENT_CAPABILITIES_META:?}"),
        ));
    };
    let missing: Vec<&str> = [PROTOCOL_VERSION_META, CLIENT_CAPABILITIES_META]
        .into_iter()
        .filter(|key| !meta.contains_key(*key))
        .collect();
    if !missing.is_empty() {
        return Err(RpcError::new(
            id,
            INVALID_PARAMS,
            format!("Invalid params: params._meta is missing {}", missing.join(" and ")),
        ));
    }
    check_headers_match_body(id, method, params, meta, headers)?;
    match meta.get(PROTOCOL_VERSION_META) {
        Some(Value::String(version)) if version == MODERN_VERSION => Ok(()),
        Some(Value::String(version)) => Err(RpcError {
            id: id.clone(),
            ..unsupported_version(version)
        }),
        _ => Err(RpcError::new(
            id,
            INVALID_PARAMS,
            format!("Invalid params: {PROTOCOL_VERSION_META} must be a string"),
        )),
    }
}

fn check_headers_match_body(
    id: &Value,
    method: &str,
    params: &Map<String, Value>,
    meta: &Map<String, Value>,
    headers: &McpHeaders,
) -> Result<(), RpcError> {
    let mismatch = |message: String| {
        Err(RpcError::new(
            id,
            HEADER_MISMATCH,
            format!("Header mismatch: {message}"),
        ))
    };
    if let Some(name) = headers.duplicated {
        return mismatch(format!("the {name} header appears more than once"));
    }
    let body_version = meta.get(PROTOCOL_VERSION_META).and_then(Value::as_str);
    match headers.protocol_version.as_deref() {
        None => return mismatch("the MCP-Protocol-Version header is missing".into()),
        Some(header) if Some(header) != body_version => {
            return mismatch(format!(
                "MCP-Protocol-Version header {header:?} does not match params._meta {:?}",
                body_version.unwrap_or("(not a string)")
            ))
        }
        Some(_) => {}
    }
    match headers.mcp_method.as_deref() {
        None => return mismatch("the Mcp-Method header is missing".into()),
        Some(header) if header != method => {
            return mismatch(format!(
                "Mcp-Method header {header:?} does not match body method {method:?}"
            ))
        }
        Some(_) => {}
    }
    let Some(name_key) = name_bearing_param(method) else {
        return Ok(());
    };
    let Some(body_name) = params.get(name_key).and_then(Value::as_str) else {
        return Ok(()); // The method itself reports the missing or malformed name.
    };
    let Some(header) = headers.mcp_name.as_deref() else {
        return mismatch(format!(
            "the Mcp-Name header is missing (body {name_key} is {body_name:?})"
        ));
    };
    match decode_header_value(header) {
        Err(problem) => mismatch(problem.to_string()),
        Ok(header) if header != body_name => mismatch(format!(
            "Mcp-Name header {header:?} does not match body {name_key} {body_name:?}"
        )),
        Ok(_) => Ok(()),
    }
}

/// The body parameter that `Mcp-Name` mirrors, for the methods that have one.
fn name_bearing_param(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        // The tasks extension: `Mcp-Name` carries the task id, for routers in front.
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    }
}

const SENTINEL_PREFIX: &str = "=?base64?";
const SENTINEL_SUFFIX: &str = "?=";

/// Why a SEP-2243 header value is refused before it is compared with the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderValueError {
    /// `=?base64?…?=` around something that is not canonical base64 of UTF-8.
    Malformed,
    /// The sentinel form of a value that can be sent plain: one value, one spelling.
    NeedlessEncoding(String),
    /// A plain value with bytes a plain value cannot have (or that looks like the sentinel).
    NotPlain,
}

impl fmt::Display for HeaderValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderValueError::Malformed => f.write_str("the Mcp-Name header has a malformed =?base64?...?= value"),
            HeaderValueError::NeedlessEncoding(plain) => write!(
                f,
                "the Mcp-Name header encodes {plain:?} as =?base64?...?=, which is only for values that cannot be sent plain; send Mcp-Name: {plain}"
            ),
            HeaderValueError::NotPlain => f.write_str(
                "the Mcp-Name header has characters a plain value cannot have (non-ASCII, control characters, whitespace at either end, or the =?base64?...?= form itself); send it as =?base64?...?=",
            ),
        }
    }
}

/// Decodes a SEP-2243 header value: a plain value as it is, or the UTF-8 inside
/// `=?base64?…?=`. The sentinel form is taken only where the value cannot be sent plain, so that
/// each value has exactly one spelling: an RBAC rule or a rate limit on the header in front of
/// the filter sees what the filter serves, and no alias slips past it.
pub fn decode_header_value(value: &str) -> Result<Cow<'_, str>, HeaderValueError> {
    let Some(payload) = value
        .strip_prefix(SENTINEL_PREFIX)
        .and_then(|rest| rest.strip_suffix(SENTINEL_SUFFIX))
    else {
        return match can_be_plain(value) {
            true => Ok(Cow::Borrowed(value)),
            false => Err(HeaderValueError::NotPlain),
        };
    };
    let engine = base64::engine::general_purpose::STANDARD;
    let bytes = engine.decode(payload).map_err(|_| HeaderValueError::Malformed)?;
    if engine.encode(&bytes) != payload {
        return Err(HeaderValueError::Malformed);
    }
    let decoded = String::from_utf8(bytes).map_err(|_| HeaderValueError::Malformed)?;
    match can_be_plain(&decoded) {
        true => Err(HeaderValueError::NeedlessEncoding(decoded)),
        false => Ok(Cow::Owned(decoded)),
    }
}

/// Whether a value can go in a header as it is (SEP-2243's value encoding): visible ASCII,
/// spaces and tabs, none at either end, and not itself of the sentinel's shape.
fn can_be_plain(value: &str) -> bool {
    let visible = value.bytes().all(|byte| matches!(byte, b' ' | b'\t' | 0x21..=0x7e));
    let trimmed = !value.starts_with([' ', '\t']) && !value.ends_with([' ', '\t']);
    let sentinel = value.starts_with(SENTINEL_PREFIX) && value.ends_with(SENTINEL_SUFFIX);
    visible && trimmed && !sentinel
}

/// `Method not found`, worded for the era: a handshake method in 2026-07-28 names the versions
/// that have it.
pub(crate) fn method_not_found(era: Era, id: &Value, method: &str) -> RpcError {
    let message = match (era, method) {
        (Era::Modern, "initialize" | "ping" | "logging/setLevel") => format!(
            "Method not found: {method} is not part of protocol version {MODERN_VERSION} (handshake-era versions served: {})",
            LEGACY_VERSIONS.join(", ")
        ),
        (Era::Modern, "subscriptions/listen") => "Method not found: subscriptions/listen is not served; \
             the tool list changes when Envoy reconfigures the filter or gRPC server reflection finds a changed API, so list again after ttlMs"
            .to_owned(),
        _ => format!("Method not found: {method}"),
    };
    RpcError::new(id, METHOD_NOT_FOUND, message)
}

#[cfg(test)]
mod tests;

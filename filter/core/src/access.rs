//! Who may call which tool: the claim values each tool requires (from the configuration's
//! `authorization` rules), and the grants a caller holds (from the verified token's payload,
//! which the host reads where Envoy's jwt_authn left it). A tool outside the caller's grants
//! is neither listed nor callable; without a verified token nothing is served.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use prost::Message;
use serde_json::{json, Map, Number, Value};

use crate::catalog::Catalog;
use crate::config::{
    parse_selector, Authorization, CallerSource, ConfigError, InsufficientScope, PluginConfig, TokenPayloadSource,
    Unlisted, DEFAULT_CLAIM,
};

pub mod protected_resource;

pub use protected_resource::ProtectedResource;

/// The configuration's authorization, resolved against its catalog.
#[derive(Debug)]
pub struct AccessPolicy {
    source: TokenPayloadSource,
    claim: Vec<String>,
    /// The claim whose value is the caller's key for the rate limits (`limits.caller`).
    key_claim: Option<Vec<String>>,
    /// Tool name → the claim values it requires (all of them); `None`: nobody may call it.
    requirements: HashMap<String, Option<BTreeSet<String>>>,
    insufficient_scope: InsufficientScope,
    /// The OAuth protected resource this server is, if the configuration publishes it.
    protected_resource: Option<ProtectedResource>,
    /// gRPC metadata name → the claim path whose value it carries upstream.
    caller_metadata: Vec<(String, Vec<String>)>,
}

/// Who is calling, as far as authorization is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// No authorization is configured: every tool is everyone's.
    Anyone,
    /// Authorization is configured and no verified token payload reached the filter.
    Unverified(String),
    /// A verified token that was not issued for this server (its audience): why.
    WrongAudience(String),
    /// A verified token: the claim values it grants, the caller's key for the rate limits (the
    /// value of `limits.caller`'s claim, if the token has one), and the caller's identity that
    /// tasks are bound to (see [`identity_of`]), and the metadata that tells the upstream who
    /// it is (`caller_metadata`).
    Verified {
        grants: BTreeSet<String>,
        key: Option<String>,
        identity: String,
        metadata: Vec<(String, String)>,
    },
}

impl AccessPolicy {
    /// Resolves the rules against the catalog; a rule that names no configured service or
    /// exposed tool is refused, since a typo would otherwise open or close the wrong tool.
    pub fn build(config: &PluginConfig, catalog: &Catalog) -> Result<Option<Self>, ConfigError> {
        let Some(authorization) = &config.authorization else {
            return Ok(None);
        };
        check_source(&authorization.token_payload)?;
        let claim = authorization.claim.names().to_vec();
        if claim.is_empty() || claim.iter().any(String::is_empty) {
            return Err(ConfigError(
                "at `authorization.claim`: a claim name must not be empty; write a name like \"scope\", or a path like [\"realm_access\", \"roles\"]".into(),
            ));
        }
        check_rules(authorization, config, catalog)?;
        let requirements = catalog
            .tools()
            .map(|tool| {
                let selector = format!("{}/{}", tool.service_name(), tool.method_name());
                let rule = authorization
                    .rules
                    .get(&selector)
                    .or_else(|| authorization.rules.get(tool.service_name()));
                let required = match (rule, authorization.unlisted) {
                    (Some(values), _) => Some(values.iter().cloned().collect()),
                    (None, Unlisted::Allow) => Some(BTreeSet::new()),
                    (None, Unlisted::Deny) => None,
                };
                (tool.name.clone(), required)
            })
            .collect();
        let key_claim = match config.caller_source() {
            CallerSource::Claim(path) => Some(path.names().to_vec()),
            CallerSource::ClientAddress => None,
        };
        // Scopes a client may ask for, by default: what the rules require, where they require
        // OAuth scopes.
        let rule_scopes = match claim == [DEFAULT_CLAIM] {
            true => authorization.rules.values().flatten().map(String::as_str).collect(),
            false => BTreeSet::new(),
        };
        let protected_resource = authorization
            .resource_metadata
            .as_ref()
            .map(|metadata| ProtectedResource::build(metadata, rule_scopes))
            .transpose()?;
        Ok(Some(AccessPolicy {
            source: authorization.token_payload.clone(),
            claim,
            key_claim,
            requirements,
            insufficient_scope: authorization.insufficient_scope,
            protected_resource,
            caller_metadata: authorization
                .caller_metadata
                .iter()
                .map(|(name, claim)| (name.clone(), claim.names().to_vec()))
                .collect(),
        }))
    }

    /// Where the host finds the token payload: dynamic metadata (serialized
    /// `envoy.config.core.v3.Metadata`) or a filter state object (JSON text).
    pub fn source(&self) -> &TokenPayloadSource {
        &self.source
    }

    /// The caller, from the bytes the host read at [`Self::source`] (`None`: nothing there).
    pub fn caller(&self, found: Option<&[u8]>) -> Caller {
        let payload = match (&self.source, found) {
            (_, None) => Err(format!("nothing at {}", self.source)),
            (TokenPayloadSource::Metadata { namespace, key }, Some(bytes)) => {
                payload_in_metadata(bytes, namespace, key).ok_or_else(|| format!("no token payload at {}", self.source))
            }
            (TokenPayloadSource::FilterState(_), Some(bytes)) => serde_json::from_slice::<Value>(bytes)
                .ok()
                .filter(Value::is_object)
                .ok_or_else(|| format!("{} does not hold a JSON object", self.source)),
        };
        let payload = match payload {
            Ok(payload) => payload,
            Err(reason) => return Caller::Unverified(reason),
        };
        if let Some(refused) = self
            .protected_resource
            .as_ref()
            .and_then(|resource| resource.refuse_audience(&payload))
        {
            return Caller::WrongAudience(refused);
        }
        Caller::Verified {
            grants: self.grants(&payload),
            key: self.key(&payload),
            identity: identity_of(&payload),
            metadata: self.caller_metadata(&payload),
        }
    }

    /// The OAuth protected resource this server is, if the configuration publishes it.
    pub fn protected_resource(&self) -> Option<&ProtectedResource> {
        self.protected_resource.as_ref()
    }

    /// Whether a caller whose grants do not cover a tool is told which scopes it needs.
    pub fn challenges(&self) -> bool {
        self.insufficient_scope == InsufficientScope::Challenge
    }

    /// The claim values the tool requires, space-separated; `None`: nobody may call it.
    pub fn required(&self, tool_name: &str) -> Option<String> {
        let required = self.requirements.get(tool_name)?.as_ref()?;
        Some(required.iter().map(String::as_str).collect::<Vec<_>>().join(" "))
    }

    /// Whether a verified caller with `grants` sees the tool in `tools/list`: one it may call,
    /// or, when callers are challenged for scopes, one that some caller may call.
    pub fn lists(&self, grants: &BTreeSet<String>, tool_name: &str) -> bool {
        match self.insufficient_scope {
            InsufficientScope::Hide => self.permits(grants, tool_name),
            InsufficientScope::Challenge => matches!(self.requirements.get(tool_name), Some(Some(_))),
        }
    }

    /// The caller metadata of a payload: each configured claim that it has, as metadata text.
    fn caller_metadata(&self, payload: &Value) -> Vec<(String, String)> {
        self.caller_metadata
            .iter()
            .filter_map(|(name, path)| {
                let value = path.iter().try_fold(payload, |value, name| value.get(name))?;
                Some((name.clone(), metadata_text(&claim_text(value)?)))
            })
            .collect()
    }

    /// The claim values the payload grants: a space-separated string's words, an array's strings.
    /// Scopes are separated by the ASCII space alone (RFC 6749, 3.3): any other white space is
    /// part of a word, so `"a\u{a0}admin"` grants neither `a` nor `admin`.
    fn grants(&self, payload: &Value) -> BTreeSet<String> {
        let claim = self.claim.iter().try_fold(payload, |value, name| value.get(name));
        match claim {
            Some(Value::String(words)) => words
                .split(' ')
                .filter(|word| !word.is_empty())
                .map(str::to_owned)
                .collect(),
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
            _ => BTreeSet::new(),
        }
    }

    /// The value of the claim callers are counted by, as text (a string, a number or a boolean).
    fn key(&self, payload: &Value) -> Option<String> {
        let path = self.key_claim.as_ref()?;
        scalar_text(path.iter().try_fold(payload, |value, name| value.get(name))?).filter(|text| !text.is_empty())
    }

    /// Whether a verified caller with `grants` may call the tool.
    pub fn permits(&self, grants: &BTreeSet<String>, tool_name: &str) -> bool {
        match self.requirements.get(tool_name) {
            Some(Some(required)) => required.is_subset(grants),
            _ => false,
        }
    }
}

impl Caller {
    /// A verified caller with these grants, counted under no key of its own, with this
    /// identity.
    pub fn verified(grants: BTreeSet<String>, identity: &str) -> Self {
        Caller::Verified {
            grants,
            key: None,
            identity: identity.to_owned(),
            metadata: Vec::new(),
        }
    }

    /// Whether this caller sees the tool in `tools/list` under `policy` (none: every tool).
    pub fn lists(&self, policy: Option<&AccessPolicy>, tool_name: &str) -> bool {
        match (policy, self) {
            (None, _) => true,
            (Some(policy), Caller::Verified { grants, .. }) => policy.lists(grants, tool_name),
            (Some(_), _) => false,
        }
    }

    /// The metadata that tells the upstream who the caller is.
    pub fn metadata(&self) -> &[(String, String)] {
        match self {
            Caller::Verified { metadata, .. } => metadata,
            _ => &[],
        }
    }

    /// Whether this caller may call the tool under `policy` (none: everyone may).
    pub fn may_call(&self, policy: Option<&AccessPolicy>, tool_name: &str) -> bool {
        match (policy, self) {
            (None, _) => true,
            (Some(policy), Caller::Verified { grants, .. }) => policy.permits(grants, tool_name),
            (Some(_), _) => false,
        }
    }

    /// Who the caller is, for binding a task to it: empty for anyone (no authorization).
    pub fn identity(&self) -> &[u8] {
        match self {
            Caller::Verified { identity, .. } => identity.as_bytes(),
            Caller::Anyone | Caller::Unverified(_) | Caller::WrongAudience(_) => &[],
        }
    }
}

/// A string, a number or a boolean claim as text. Dynamic metadata carries every number as a
/// double: a whole one is written without a fraction, as the token had it.
fn scalar_text(value: &Value) -> Option<String> {
    const EXACT_INTEGERS: f64 = 9_007_199_254_740_992.0; // 2^53
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => match number.as_f64() {
            Some(double) if number.is_f64() && double.fract() == 0.0 && double.abs() < EXACT_INTEGERS => {
                // Whole and exact: the cast loses nothing.
                #[allow(clippy::cast_possible_truncation)]
                let whole = double as i64;
                Some(whole.to_string())
            }
            _ => Some(number.to_string()),
        },
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// A claim as one line of text: a scalar as [`scalar_text`] writes it, an array of scalars
/// joined by spaces (as OAuth joins scopes); `None` for anything else.
fn claim_text(value: &Value) -> Option<String> {
    match value {
        Value::Array(items) => {
            let words: Option<Vec<String>> = items.iter().map(scalar_text).collect();
            Some(words?.join(" "))
        }
        value => scalar_text(value),
    }
}

/// Text as a gRPC metadata value, which must be printable ASCII: `%`, every byte outside it,
/// and a space at either end (which HTTP would trim) are percent-encoded (RFC 3986), so that
/// any URL decoder gets the claim back whole.
fn metadata_text(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut encoded = String::with_capacity(bytes.len());
    for (index, &byte) in bytes.iter().enumerate() {
        let at_an_end = index == 0 || index + 1 == bytes.len();
        let plain = byte.is_ascii_graphic() && byte != b'%' || byte == b' ' && !at_an_end;
        if plain {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// Claims that change from one token of a caller to the next: left out of its identity.
const PER_TOKEN_CLAIMS: [&str; 5] = ["exp", "iat", "nbf", "jti", "auth_time"];

/// The identity of a verified caller: its token's issuer and subject (`iss`, `sub`) when it has
/// a subject, so that a refreshed token is the same caller; otherwise every claim but those
/// that change per token, in a canonical order.
pub fn identity_of(payload: &Value) -> String {
    if let Some(subject) = payload.get("sub") {
        return json!([payload.get("iss"), subject]).to_string();
    }
    let claims: BTreeMap<&String, &Value> = payload
        .as_object()
        .map(|object| {
            object
                .iter()
                .filter(|(name, _)| !PER_TOKEN_CLAIMS.contains(&name.as_str()))
                .collect()
        })
        .unwrap_or_default();
    json!(claims).to_string()
}

fn check_source(source: &TokenPayloadSource) -> Result<(), ConfigError> {
    let empty = match source {
        TokenPayloadSource::Metadata { namespace, key } => namespace.is_empty() || key.is_empty(),
        TokenPayloadSource::FilterState(name) => name.is_empty(),
    };
    if empty {
        return Err(ConfigError(
            "at `authorization.token_payload`: names must not be empty; the default is {\"metadata\": {\"namespace\": \"envoy.filters.http.jwt_authn\", \"key\": \"jwt_payload\"}}, jwt_authn's `payload_in_metadata: jwt_payload`".into(),
        ));
    }
    Ok(())
}

fn check_rules(authorization: &Authorization, config: &PluginConfig, catalog: &Catalog) -> Result<(), ConfigError> {
    for (name, values) in &authorization.rules {
        let known = catalog.is_pending(name)
            || match parse_selector(name) {
                Some((service, method)) => catalog
                    .tools()
                    .any(|tool| tool.service_name() == service && tool.method_name() == method),
                None => config.services.iter().any(|(service, _)| service == name),
            };
        if !known {
            let services: Vec<&str> = config.services.iter().map(|(service, _)| service).collect();
            return Err(ConfigError(format!(
                "at `authorization.rules.{name}`: names no configured service and no exposed tool's method; write a service from `services` ({}) or `package.Service/Method` of a tool",
                services.join(", ")
            )));
        }
        if let Some(index) = values
            .iter()
            .position(|value| value.is_empty() || value.contains(char::is_whitespace))
        {
            return Err(ConfigError(format!(
                "at `authorization.rules.{name}[{index}]`: {:?} is not a claim value; a scope is one word",
                values[index]
            )));
        }
    }
    Ok(())
}

/// `envoy.config.core.v3.Metadata`, as Envoy serializes a stream's dynamic metadata: only the
/// untyped namespaces, where jwt_authn writes.
#[derive(Clone, PartialEq, Message)]
struct Metadata {
    #[prost(btree_map = "string, message", tag = "1")]
    filter_metadata: BTreeMap<String, prost_types::Struct>,
}

/// The object at `namespace`/`key` of serialized dynamic metadata.
fn payload_in_metadata(bytes: &[u8], namespace: &str, key: &str) -> Option<Value> {
    let metadata = Metadata::decode(bytes).ok()?;
    let value = metadata.filter_metadata.get(namespace)?.fields.get(key)?;
    Some(json_of(value)).filter(Value::is_object)
}

/// A protobuf `Value` as JSON.
fn json_of(value: &prost_types::Value) -> Value {
    use prost_types::value::Kind;
    match &value.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::NumberValue(number)) => Number::from_f64(*number).map_or(Value::Null, Value::Number),
        Some(Kind::StringValue(text)) => Value::String(text.clone()),
        Some(Kind::BoolValue(flag)) => Value::Bool(*flag),
        Some(Kind::StructValue(object)) => Value::Object(
            object
                .fields
                .iter()
                .map(|(name, value)| (name.clone(), json_of(value)))
                .collect::<Map<String, Value>>(),
        ),
        Some(Kind::ListValue(list)) => Value::Array(list.values.iter().map(json_of).collect()),
    }
}

#[cfg(test)]
mod tests;

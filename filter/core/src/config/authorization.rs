//! The `authorization` section: which verified claim values each tool or service requires.
//! The rules are checked against the catalog when the server is built ([`crate::access`]).

use std::collections::BTreeMap;

use serde::Deserialize;

/// jwt_authn's filter name: the dynamic metadata namespace its `payload_in_metadata` writes.
pub const JWT_AUTHN_NAMESPACE: &str = "envoy.filters.http.jwt_authn";
pub const DEFAULT_PAYLOAD_KEY: &str = "jwt_payload";
pub const DEFAULT_CLAIM: &str = "scope";

/// Per-tool authorization from the caller's verified token.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Authorization {
    /// Where Envoy left the verified token's payload (claims) for this request.
    #[serde(default)]
    pub token_payload: TokenPayloadSource,
    /// The claim that holds the caller's grants: a name, or a path of names into nested
    /// objects (`["realm_access", "roles"]`). A space-separated string (OAuth `scope`) or an
    /// array of strings.
    #[serde(default)]
    pub claim: ClaimPath,
    /// A service (`package.Service`) or method (`package.Service/Method`) → the claim values
    /// a caller must hold, all of them. A method's rule replaces its service's.
    pub rules: BTreeMap<String, Vec<String>>,
    /// Tools that no rule names: `deny` (the default) or `allow` (any verified caller).
    #[serde(default)]
    pub unlisted: Unlisted,
    /// The OAuth 2.0 protected resource metadata (RFC 9728) this server publishes, which OAuth
    /// clients find their authorization server by; with it, a token must be issued for
    /// `resource` (its `aud`).
    #[serde(default)]
    pub resource_metadata: Option<ResourceMetadata>,
    /// What a caller whose grants do not cover a tool is told: `hide` (the default: the tool
    /// is not listed, and a call answers as for an unknown tool) or `challenge` (the tool is
    /// listed, and a call is HTTP 403 `insufficient_scope` naming the scopes it needs).
    #[serde(default)]
    pub insufficient_scope: InsufficientScope,
    /// gRPC metadata name → the claim (a name, or a path into nested claims) whose value goes
    /// upstream with every call, so that a service knows on whose behalf the agent acts. A
    /// client's own headers of these names never reach the upstream.
    #[serde(default)]
    pub caller_metadata: BTreeMap<String, ClaimPath>,
}

/// The protected resource metadata document (RFC 9728, section 2).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ResourceMetadata {
    /// This MCP endpoint's URL as clients reach it (`https://mcp.example.com/mcp`): the
    /// resource tokens must be issued for (RFC 8707), and where the metadata URL is derived
    /// from. `http` only for a loopback host.
    pub resource: String,
    /// The issuer URLs of the authorization servers that issue tokens for this resource (at
    /// least one).
    pub authorization_servers: Vec<String>,
    /// The scopes a client may ask for; by default every claim value the rules name.
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    /// How a token may be sent: `header` (the default) and `query`, as jwt_authn is set to
    /// read it.
    #[serde(default)]
    pub bearer_methods_supported: Option<Vec<String>>,
    /// A name for people, shown by clients when they ask for consent.
    #[serde(default)]
    pub resource_name: Option<String>,
    /// A page for people about this server.
    #[serde(default)]
    pub resource_documentation: Option<String>,
}

/// What a caller learns of a tool its grants do not cover.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum InsufficientScope {
    /// Nothing: the tool is not listed, and calling it answers as for an unknown tool.
    #[default]
    Hide,
    /// That it exists and which scopes it needs: the tool is listed, and calling it is HTTP 403
    /// with `WWW-Authenticate: Bearer error="insufficient_scope"` (MCP step-up).
    Challenge,
}

/// Where the verified token's payload is, as a JSON object.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum TokenPayloadSource {
    /// A key of a dynamic metadata namespace, as jwt_authn's `payload_in_metadata` writes it.
    Metadata { namespace: String, key: String },
    /// A filter state object holding the payload as JSON text, as
    /// `envoy.filters.http.set_filter_state` writes it from `%DYNAMIC_METADATA(...)%`.
    FilterState(String),
}

impl Default for TokenPayloadSource {
    fn default() -> Self {
        TokenPayloadSource::Metadata {
            namespace: JWT_AUTHN_NAMESPACE.to_owned(),
            key: DEFAULT_PAYLOAD_KEY.to_owned(),
        }
    }
}

impl std::fmt::Display for TokenPayloadSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenPayloadSource::Metadata { namespace, key } => {
                write!(f, "dynamic metadata `{namespace}` key `{key}`")
            }
            TokenPayloadSource::FilterState(name) => write!(f, "filter state `{name}`"),
        }
    }
}

/// A claim name, or a path of names into nested objects.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(
    untagged,
    expecting = "a claim name, or an array of names (a path into nested claims)"
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum ClaimPath {
    Name(String),
    Path(Vec<String>),
}

impl Default for ClaimPath {
    fn default() -> Self {
        ClaimPath::Name(DEFAULT_CLAIM.to_owned())
    }
}

impl ClaimPath {
    pub fn names(&self) -> &[String] {
        match self {
            ClaimPath::Name(name) => std::slice::from_ref(name),
            ClaimPath::Path(path) => path,
        }
    }
}

/// What a tool that no rule names requires.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum Unlisted {
    /// Nobody may call it: a tool added later stays closed until a rule opens it.
    #[default]
    Deny,
    /// Any caller with a verified token.
    Allow,
}

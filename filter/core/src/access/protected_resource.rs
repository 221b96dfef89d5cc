//! This server as an OAuth 2.0 protected resource: the metadata document OAuth clients find
//! their authorization server by (RFC 9728), the `WWW-Authenticate` challenges that point at it,
//! and the audience a token must have been issued for (RFC 8707).

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use crate::config::{ConfigError, ResourceMetadata};
use crate::http::HttpResponse;

/// Where RFC 9728 puts the metadata: this, then the resource's path.
pub const WELL_KNOWN_PREFIX: &str = "/.well-known/oauth-protected-resource";
/// How long clients and caches may keep the document: it changes only with the configuration.
const CACHE_CONTROL: &str = "public, max-age=3600";
const BEARER_METHODS: [&str; 2] = ["header", "query"];

/// The resource, its metadata document, and where both are served.
#[derive(Debug)]
pub struct ProtectedResource {
    resource: String,
    /// The metadata document's URL, which every challenge names.
    metadata_url: String,
    /// The paths the document is served at: the resource's path appended to the well-known
    /// prefix, and the prefix alone (clients try both, in that order).
    paths: Vec<String>,
    document: Vec<u8>,
}

/// An `http(s)` URL, split where this module needs it.
struct HttpUrl<'a> {
    https: bool,
    authority: &'a str,
    path: &'a str,
    query_or_fragment: bool,
}

impl<'a> HttpUrl<'a> {
    fn parse(text: &'a str) -> Option<Self> {
        let (scheme, rest) = text.split_once("://")?;
        let https = match scheme {
            "https" => true,
            "http" => false,
            _ => return None,
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, rest) = rest.split_at(end);
        let path_end = rest.find(['?', '#']).unwrap_or(rest.len());
        // A challenge quotes the URL: nothing in it may end the quoted string.
        let plain = text.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\');
        (plain && !authority.is_empty() && !authority.contains('@')).then_some(HttpUrl {
            https,
            authority,
            path: &rest[..path_end],
            query_or_fragment: path_end < rest.len(),
        })
    }

    /// `https`, or `http` to this machine.
    fn is_secure(&self) -> bool {
        let host = match self.authority.rsplit_once(':') {
            Some((host, port)) if !port.contains(']') => host,
            _ => self.authority,
        };
        self.https || ["localhost", "127.0.0.1", "[::1]"].contains(&host.to_ascii_lowercase().as_str())
    }
}

/// An absolute `https` URL (`http` for a loopback host) with no query and no fragment, as a
/// resource and an issuer must be.
fn check_secure_url<'a>(at: &str, text: &'a str, what: &str) -> Result<HttpUrl<'a>, ConfigError> {
    let url = HttpUrl::parse(text).ok_or_else(|| {
        ConfigError(format!(
            "at `{at}`: {text:?} is not an absolute URL; write {what}, like \"https://mcp.example.com/mcp\""
        ))
    })?;
    if !url.is_secure() {
        return Err(ConfigError(format!(
            "at `{at}`: {text:?} is not https; OAuth needs TLS ({what}), and http is accepted only for localhost, 127.0.0.1 and [::1]"
        )));
    }
    if url.query_or_fragment {
        return Err(ConfigError(format!(
            "at `{at}`: {text:?} has a query or a fragment, which {what} must not have (RFC 8707, RFC 8414)"
        )));
    }
    Ok(url)
}

impl ProtectedResource {
    /// The resource of `config`; `rule_scopes` are the claim values the authorization rules
    /// name, which `scopes_supported` defaults to.
    pub fn build(config: &ResourceMetadata, rule_scopes: BTreeSet<&str>) -> Result<Self, ConfigError> {
        const AT: &str = "authorization.resource_metadata";
        let resource = check_secure_url(&format!("{AT}.resource"), &config.resource, "this MCP endpoint's URL")?;
        if config.authorization_servers.is_empty() {
            return Err(ConfigError(format!(
                "at `{AT}.authorization_servers`: empty; list the issuer URL of at least one authorization server that issues tokens for {}",
                config.resource
            )));
        }
        for (index, issuer) in config.authorization_servers.iter().enumerate() {
            check_secure_url(
                &format!("{AT}.authorization_servers[{index}]"),
                issuer,
                "an authorization server's issuer URL",
            )?;
        }
        let scopes: Vec<&str> = match &config.scopes_supported {
            Some(scopes) => scopes.iter().map(String::as_str).collect(),
            None => rule_scopes.into_iter().collect(),
        };
        if let Some(scope) = scopes
            .iter()
            .find(|scope| scope.is_empty() || !scope.bytes().all(is_scope_byte))
        {
            return Err(ConfigError(format!(
                "at `{AT}.scopes_supported`: {scope:?} is not a scope (RFC 6749: printable ASCII, no space, no quote or backslash)"
            )));
        }
        let bearer_methods: Vec<&str> = match &config.bearer_methods_supported {
            Some(methods) => methods.iter().map(String::as_str).collect(),
            None => vec!["header"],
        };
        if let Some(method) = bearer_methods.iter().find(|method| !BEARER_METHODS.contains(method)) {
            return Err(ConfigError(format!(
                "at `{AT}.bearer_methods_supported`: {method:?} is not a way jwt_authn reads a token; write \"header\" or \"query\""
            )));
        }
        if let Some(page) = &config.resource_documentation {
            if HttpUrl::parse(page).is_none() {
                return Err(ConfigError(format!(
                    "at `{AT}.resource_documentation`: {page:?} is not an absolute http(s) URL"
                )));
            }
        }
        let mut document = Map::new();
        document.insert("resource".into(), json!(config.resource));
        document.insert("authorization_servers".into(), json!(config.authorization_servers));
        if !scopes.is_empty() {
            document.insert("scopes_supported".into(), json!(scopes));
        }
        document.insert("bearer_methods_supported".into(), json!(bearer_methods));
        if let Some(name) = &config.resource_name {
            document.insert("resource_name".into(), json!(name));
        }
        if let Some(page) = &config.resource_documentation {
            document.insert("resource_documentation".into(), json!(page));
        }
        let scheme = if resource.https { "https" } else { "http" };
        let path = resource.path.trim_end_matches('/');
        let suffixed = format!("{WELL_KNOWN_PREFIX}{path}");
        let mut paths = vec![suffixed.clone()];
        if !path.is_empty() {
            paths.push(WELL_KNOWN_PREFIX.to_owned());
        }
        Ok(ProtectedResource {
            metadata_url: format!("{scheme}://{}{suffixed}", resource.authority),
            resource: config.resource.clone(),
            paths,
            document: Value::Object(document).to_string().into_bytes(),
        })
    }

    pub fn metadata_url(&self) -> &str {
        &self.metadata_url
    }

    /// Whether `path` (with its query, if any) is where the metadata is served.
    pub fn serves(&self, path: &str) -> bool {
        let path = path.split_once('?').map_or(path, |(path, _query)| path);
        self.paths.iter().any(|served| served == path)
    }

    /// The answer to a request for the metadata with `method`: the document to GET (and HEAD),
    /// from any origin, since it is public; a CORS preflight; 405 otherwise.
    pub fn answer(&self, method: &str) -> HttpResponse {
        let cors = ("access-control-allow-origin", Cow::Borrowed("*"));
        match method {
            "GET" | "HEAD" => HttpResponse {
                status: 200,
                headers: vec![
                    ("content-type", Cow::Borrowed("application/json")),
                    ("cache-control", Cow::Borrowed(CACHE_CONTROL)),
                    cors,
                ],
                body: self.document.clone(),
            },
            "OPTIONS" => HttpResponse {
                status: 204,
                headers: vec![
                    cors,
                    ("access-control-allow-methods", Cow::Borrowed("GET, HEAD, OPTIONS")),
                    // Browser clients send MCP-Protocol-Version on discovery requests.
                    ("access-control-allow-headers", Cow::Borrowed("*")),
                    ("access-control-max-age", Cow::Borrowed("86400")),
                ],
                body: Vec::new(),
            },
            _ => HttpResponse {
                status: 405,
                headers: vec![
                    ("allow", Cow::Borrowed("GET, HEAD, OPTIONS")),
                    ("content-type", Cow::Borrowed("text/plain")),
                ],
                body: b"Method Not Allowed: the protected resource metadata is read with GET".to_vec(),
            },
        }
    }

    /// A `WWW-Authenticate` challenge that names the metadata, with an RFC 6750 error and the
    /// scopes needed where known.
    pub fn challenge(&self, error: Option<&str>, scope: Option<&str>) -> String {
        bearer_challenge(error, scope, Some(&self.metadata_url))
    }

    /// Why a verified token's payload was not issued for this resource, if it was not: its
    /// `aud` (a string or an array of them) must name the resource.
    pub fn refuse_audience(&self, payload: &Value) -> Option<String> {
        let audience = payload.get("aud");
        let names_resource = match audience {
            Some(Value::String(audience)) => *audience == self.resource,
            Some(Value::Array(audiences)) => audiences.iter().any(|audience| audience == self.resource.as_str()),
            _ => false,
        };
        (!names_resource).then(|| match audience {
            Some(audience) => format!("its audience {audience} does not name {}", self.resource),
            None => format!("it has no audience, and must name {}", self.resource),
        })
    }

    pub fn resource(&self) -> &str {
        &self.resource
    }
}

/// A Bearer `WWW-Authenticate` challenge (RFC 6750, section 3) with the parameters given.
pub fn bearer_challenge(error: Option<&str>, scope: Option<&str>, resource_metadata: Option<&str>) -> String {
    let parameters: Vec<String> = [
        ("error", error),
        ("scope", scope),
        ("resource_metadata", resource_metadata),
    ]
    .into_iter()
    .filter_map(|(name, value)| Some(format!("{name}=\"{}\"", quoted(value?))))
    .collect();
    match parameters.is_empty() {
        true => "Bearer".to_owned(),
        false => format!("Bearer {}", parameters.join(", ")),
    }
}

/// RFC 6749's scope-token characters: printable ASCII but space, `"` and `\`.
fn is_scope_byte(byte: u8) -> bool {
    byte.is_ascii_graphic() && byte != b'"' && byte != b'\\'
}

/// Text inside an RFC 9110 quoted-string.
fn quoted(text: &str) -> Cow<'_, str> {
    if !text.contains(['"', '\\']) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(resource: &str) -> ResourceMetadata {
        ResourceMetadata {
            resource: resource.into(),
            authorization_servers: vec!["https://auth.example.com".into()],
            scopes_supported: None,
            bearer_methods_supported: None,
            resource_name: Some("Catalog".into()),
            resource_documentation: None,
        }
    }

    fn build(config: &ResourceMetadata) -> Result<ProtectedResource, String> {
        ProtectedResource::build(config, BTreeSet::from(["users:read", "catalog:read"])).map_err(|error| error.0)
    }

    #[test]
    fn the_document_is_served_at_the_path_form_and_the_root_form() {
        let resource = build(&config("https://mcp.example.com/mcp")).unwrap();
        assert_eq!(
            resource.metadata_url(),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert!(resource.serves("/.well-known/oauth-protected-resource/mcp"));
        assert!(resource.serves("/.well-known/oauth-protected-resource?x=1"));
        assert!(!resource.serves("/.well-known/oauth-protected-resource/other"));
        assert!(!resource.serves("/mcp"));
        let answer = resource.answer("GET");
        assert_eq!(answer.status, 200);
        assert!(answer.header_pairs().contains(&("access-control-allow-origin", "*")));
        let document: Value = serde_json::from_slice(&answer.body).unwrap();
        assert_eq!(
            document,
            json!({
                "resource": "https://mcp.example.com/mcp",
                "authorization_servers": ["https://auth.example.com"],
                "scopes_supported": ["catalog:read", "users:read"],
                "bearer_methods_supported": ["header"],
                "resource_name": "Catalog",
            })
        );
        assert_eq!(resource.answer("OPTIONS").status, 204);
        assert_eq!(resource.answer("POST").status, 405);
        let root = build(&config("https://mcp.example.com")).unwrap();
        assert_eq!(
            root.metadata_url(),
            "https://mcp.example.com/.well-known/oauth-protected-resource"
        );
        assert_eq!(root.paths, ["/.well-known/oauth-protected-resource"]);
    }

    #[test]
    fn a_resource_or_issuer_that_is_not_a_plain_secure_url_is_refused() {
        for (resource, problem) in [
            ("mcp.example.com/mcp", "is not an absolute URL"),
            ("http://mcp.example.com/mcp", "is not https"),
            ("https://mcp.example.com/mcp#x", "has a query or a fragment"),
            ("https://mcp.example.com/mcp?tenant=1", "has a query or a fragment"),
            ("https://user@mcp.example.com/mcp", "is not an absolute URL"),
            ("https://mcp.example.com/m\"cp", "is not an absolute URL"),
        ] {
            let error = build(&config(resource)).unwrap_err();
            assert!(
                error.starts_with("at `authorization.resource_metadata.resource`: ") && error.contains(problem),
                "{resource}: {error}"
            );
        }
        for loopback in [
            "http://127.0.0.1:10000/mcp",
            "http://localhost/mcp",
            "http://[::1]:8080/mcp",
        ] {
            assert!(build(&config(loopback)).is_ok(), "{loopback}");
        }
        let mut no_servers = config("https://mcp.example.com/mcp");
        no_servers.authorization_servers.clear();
        assert!(build(&no_servers)
            .unwrap_err()
            .contains("list the issuer URL of at least one"));
        let mut plain_issuer = config("https://mcp.example.com/mcp");
        plain_issuer
            .authorization_servers
            .push("http://auth.example.com".into());
        assert!(build(&plain_issuer)
            .unwrap_err()
            .starts_with("at `authorization.resource_metadata.authorization_servers[1]`: "));
        let mut bad_scope = config("https://mcp.example.com/mcp");
        bad_scope.scopes_supported = Some(vec!["catalog read".into()]);
        assert!(build(&bad_scope).unwrap_err().contains("is not a scope"));
        let mut body = config("https://mcp.example.com/mcp");
        body.bearer_methods_supported = Some(vec!["body".into()]);
        assert!(build(&body)
            .unwrap_err()
            .contains("\"body\" is not a way jwt_authn reads a token"));
    }

    #[test]
    fn challenges_name_the_metadata_and_quote_what_they_carry() {
        let resource = build(&config("https://mcp.example.com/mcp")).unwrap();
        assert_eq!(
            resource.challenge(None, None),
            "Bearer resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\""
        );
        assert_eq!(
            resource.challenge(Some("insufficient_scope"), Some("users:read users:\"write\"")),
            "Bearer error=\"insufficient_scope\", scope=\"users:read users:\\\"write\\\"\", \
             resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\""
        );
    }

    #[test]
    fn a_challenge_without_metadata_has_only_what_it_is_given() {
        assert_eq!(bearer_challenge(None, None, None), "Bearer");
        assert_eq!(
            bearer_challenge(Some("insufficient_scope"), Some("a b"), None),
            "Bearer error=\"insufficient_scope\", scope=\"a b\""
        );
    }

    #[test]
    fn a_token_must_name_the_resource_in_its_audience() {
        let resource = build(&config("https://mcp.example.com/mcp")).unwrap();
        assert_eq!(
            resource.refuse_audience(&json!({"aud": "https://mcp.example.com/mcp"})),
            None
        );
        assert_eq!(
            resource.refuse_audience(&json!({"aud": ["other", "https://mcp.example.com/mcp"]})),
            None
        );
        assert_eq!(
            resource
                .refuse_audience(&json!({"aud": "https://mcp.example.com/mcp/"}))
                .as_deref(),
            Some("its audience \"https://mcp.example.com/mcp/\" does not name https://mcp.example.com/mcp")
        );
        assert!(resource
            .refuse_audience(&json!({"sub": "x"}))
            .unwrap()
            .contains("has no audience"));
    }
}

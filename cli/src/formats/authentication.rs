//! The token check in front of an authenticated configuration (`--resource`): Envoy's
//! jwt_authn for the issuer, with the resource as the audience; the local reply mapping that
//! points its refusals at the protected resource metadata; the cluster it fetches the signing
//! keys from; and, for the dynamic module, the copy of the payload into filter state.

use serde_json::{json, Value};

use super::{mcp_path, Wiring};

/// What the bootstrap needs to check tokens.
pub struct Authentication {
    /// The authorization server whose tokens jwt_authn verifies.
    pub issuer: String,
    /// The resource, which a token's `aud` must name.
    pub audience: String,
    pub jwks_uri: String,
    /// The protected resource metadata's URL, which every challenge names.
    pub metadata_url: String,
}

/// The filter state object the module reads the token payload from.
pub const MODULE_TOKEN_PAYLOAD: &str = "switchblade.token_payload";
const JWKS_CLUSTER: &str = "switchblade_jwks";
const PAYLOAD_KEY: &str = "jwt_payload";
/// Debian's and Ubuntu's bundle of the system's trusted roots (Envoy's images are Ubuntu).
const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The HTTP filters before Switchblade's: jwt_authn, and for the module the copy of the
/// payload into filter state.
pub fn filters(wiring: &Wiring<'_>, module: bool) -> Vec<Value> {
    let Some(authentication) = wiring.authentication else {
        return Vec::new();
    };
    let mut filters = vec![json!({
        "name": "envoy.filters.http.jwt_authn",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication",
            "providers": {"oauth": {
                "issuer": authentication.issuer,
                // RFC 8707: a token must have been issued for this resource.
                "audiences": [authentication.audience],
                "remote_jwks": {
                    "http_uri": {"uri": authentication.jwks_uri, "cluster": JWKS_CLUSTER, "timeout": "5s"},
                    "cache_duration": "600s",
                    "async_fetch": {}
                },
                // The token stays here: the upstream learns who calls from caller_metadata.
                "forward": false,
                "payload_in_metadata": PAYLOAD_KEY
            }},
            "rules": [{"match": {"path": mcp_path(wiring)}, "requires": {"provider_name": "oauth"}}]
        }
    })];
    if module {
        filters.push(json!({
            "name": "envoy.filters.http.set_filter_state",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.set_filter_state.v3.Config",
                "on_request_headers": [{
                    "object_key": MODULE_TOKEN_PAYLOAD,
                    "factory_key": "envoy.string",
                    "format_string": {"text_format_source": {"inline_string":
                        format!("%DYNAMIC_METADATA(envoy.filters.http.jwt_authn:{PAYLOAD_KEY})%")}}
                }]
            }
        }));
    }
    filters
}

/// jwt_authn's refusals made the challenges the MCP authorization spec asks for: a 401 that
/// names the metadata, and a token of another audience a 401 `invalid_token` (jwt_authn says
/// 403).
pub fn local_reply_config(authentication: &Authentication) -> Value {
    let mapper = |expression: &str, challenge: String, status: Option<u16>| {
        let mut mapper = json!({
            "filter": {"extension_filter": {
                "name": "envoy.access_loggers.extension_filters.cel",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter",
                    "expression": expression
                }
            }},
            "headers_to_add": [{
                "header": {"key": "www-authenticate", "value": challenge},
                "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"
            }]
        });
        if let Some(status) = status {
            mapper["status_code"] = json!(status);
        }
        mapper
    };
    let url = &authentication.metadata_url;
    json!({"mappers": [
        mapper(
            "response.code_details == 'jwt_authn_access_denied{Jwt_is_missing}'",
            format!("Bearer resource_metadata=\"{url}\""),
            None,
        ),
        mapper(
            "response.code_details.startsWith('jwt_authn_access_denied')",
            format!("Bearer error=\"invalid_token\", resource_metadata=\"{url}\""),
            Some(401),
        ),
    ]})
}

/// The cluster jwt_authn fetches the signing keys through: the JWKS URI's host, over TLS for
/// `https`.
pub fn jwks_cluster(authentication: &Authentication) -> Result<Value, String> {
    let uri = &authentication.jwks_uri;
    let refused = || format!("--jwks-uri {uri:?}: not an http(s) URL with a host");
    let (scheme, rest) = uri.split_once("://").ok_or_else(refused)?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let tls = match scheme {
        "https" => true,
        "http" => false,
        _ => return Err(refused()),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => (host, port.parse::<u16>().map_err(|_| refused())?),
        _ => (authority, if tls { 443 } else { 80 }),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || authority.contains('@') {
        return Err(refused());
    }
    let mut cluster = json!({
        "name": JWKS_CLUSTER,
        "type": "STRICT_DNS",
        "connect_timeout": "5s",
        "load_assignment": {
            "cluster_name": JWKS_CLUSTER,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {
                "socket_address": {"address": host, "port_value": port}
            }}}]}]
        }
    });
    if tls {
        // The keys decide who may call: the server's certificate is checked against the
        // system's roots and the host name.
        cluster["transport_socket"] = json!({
            "name": "envoy.transport_sockets.tls",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                "sni": host,
                "common_tls_context": {"validation_context": {
                    "trusted_ca": {"filename": SYSTEM_ROOTS},
                    "match_typed_subject_alt_names": [{"san_type": "DNS", "matcher": {"exact": host}}]
                }}
            }
        });
    }
    Ok(cluster)
}

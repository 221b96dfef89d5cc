//! Who a request is from, read once from what the host can tell about it: the verified token
//! payload where the configuration says it is, the caller that payload makes, and the client's
//! address when the rate limits count callers by it. Both hosts read it through
//! [`RequestFacts`], and build the request and its cancel key from the [`Origin`].

use serde_json::Value;

use super::{McpRequest, Server};
use crate::access::Caller;
use crate::cancel::CancelKey;
use crate::config::TokenPayloadSource;
use crate::http::McpHeaders;
use crate::quota::counters::Counters;

/// What a host can tell about a request beyond its headers and body, asked only when the
/// configuration needs it.
pub trait RequestFacts {
    /// The verified token payload at `source` (dynamic metadata or filter state), if any.
    fn token_payload(&self, source: &TokenPayloadSource) -> Option<Vec<u8>>;
    /// The client's address (Envoy's `source.address`, with its port).
    fn client_address(&self) -> Option<String>;
}

/// Who a request is from.
#[derive(Debug)]
pub struct Origin {
    token_payload: Option<Vec<u8>>,
    caller: Caller,
    client_address: Option<String>,
}

impl Server {
    /// Who the request the host describes is from.
    pub fn origin(&self, facts: &impl RequestFacts) -> Origin {
        let token_payload = self
            .access
            .as_ref()
            .and_then(|policy| facts.token_payload(policy.source()));
        Origin {
            caller: self.caller(token_payload.as_deref()),
            client_address: self.reads_client_address().then(|| facts.client_address()).flatten(),
            token_payload,
        }
    }
}

impl Origin {
    /// The POST as the server handles it, with the counters every worker shares.
    pub(crate) fn request<'a>(
        &'a self,
        headers: &'a McpHeaders,
        body: &'a [u8],
        counters: Option<&'a Counters>,
    ) -> McpRequest<'a> {
        McpRequest {
            headers,
            body,
            caller: &self.caller,
            client_address: self.client_address.as_deref(),
            counters,
        }
    }

    /// The key the request `request_id` from this client is cancelled under, if it can be.
    pub fn cancel_key(&self, headers: &McpHeaders, request_id: &Value) -> Option<CancelKey> {
        CancelKey::new(headers, self.token_payload.as_deref(), request_id)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use serde_json::json;

    use super::*;

    const SERVICES: &str = r#""services": {"demo.catalog.v1.CatalogService": {"cluster": "c"}}"#;

    /// A host's answers, and what the core asked of it.
    #[derive(Default)]
    struct Host {
        asked: RefCell<Vec<&'static str>>,
    }

    impl RequestFacts for Host {
        fn token_payload(&self, source: &TokenPayloadSource) -> Option<Vec<u8>> {
            self.asked.borrow_mut().push("token_payload");
            assert_eq!(source, &TokenPayloadSource::FilterState("payload".into()));
            Some(br#"{"scope": "catalog:read"}"#.to_vec())
        }

        fn client_address(&self) -> Option<String> {
            self.asked.borrow_mut().push("client_address");
            Some("10.0.0.7:5000".into())
        }
    }

    fn server(rest: &str) -> Server {
        Server::from_config_bytes(format!("{{{SERVICES}{rest}}}").as_bytes()).unwrap()
    }

    #[test]
    fn a_host_is_asked_only_what_the_configuration_needs() {
        let host = Host::default();
        let origin = server("").origin(&host);
        assert!(host.asked.borrow().is_empty());
        assert_eq!(origin.caller, Caller::Anyone);
        let headers = McpHeaders::default();
        let request = origin.request(&headers, b"{}", None);
        assert_eq!(request.client_address, None);

        let limited = server(r#", "limits": {"rules": [{"match": "*", "requests_per_second": 1}]}"#);
        let origin = limited.origin(&host);
        assert_eq!(*host.asked.borrow(), ["client_address"]);
        assert_eq!(origin.client_address.as_deref(), Some("10.0.0.7:5000"));

        host.asked.borrow_mut().clear();
        let authorized = server(
            r#", "authorization": {"token_payload": {"filter_state": "payload"},
                "rules": {"demo.catalog.v1.CatalogService": ["catalog:read"]}}"#,
        );
        let origin = authorized.origin(&host);
        assert_eq!(*host.asked.borrow(), ["token_payload"]);
        assert_ne!(origin.caller, Caller::Anyone);
    }

    #[test]
    fn the_cancel_key_holds_what_only_the_client_has() {
        let host = Host::default();
        let authorized = server(
            r#", "authorization": {"token_payload": {"filter_state": "payload"},
                "rules": {"demo.catalog.v1.CatalogService": ["catalog:read"]}}"#,
        );
        let headers = McpHeaders::default();
        let with_token = authorized.origin(&host).cancel_key(&headers, &json!(1));
        assert!(with_token.is_some(), "the verified token names the client");
        let anonymous = server("").origin(&host).cancel_key(&headers, &json!(1));
        assert_eq!(anonymous, None, "nothing names an anonymous client without a session");
    }
}

//! Cancelling a request from another POST: `notifications/cancelled` in the handshake eras
//! (in 2026-07-28 a client cancels by closing the request's SSE stream, which Envoy turns into
//! a reset of the upstream stream). The server keeps no sessions, so a request is known by who
//! sent it and its JSON-RPC id: a [`CancelKey`] names the client's address, its credential (the
//! `Authorization` header, and the verified token's payload) and the id. A client cancels only
//! its own requests; clients that share an address and send no credential share their ids.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use serde_json::Value;

use crate::http::McpHeaders;

/// The last bytes of the answer to a cancelled request: an SSE comment, which clients skip (no
/// JSON-RPC response goes for a cancelled request), and which keeps the answer from being empty
/// (Envoy drops the content type of an empty local reply).
pub const CANCELLED_COMMENT: &[u8] = b": cancelled\n\n";

/// Which request a cancellation names, as hosts file it. Hashed with the standard library's
/// fixed-key hasher, so that every VM and thread of one build computes the same key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CancelKey(u64);

impl CancelKey {
    /// The key of the request `request_id` from the client at `address` (Envoy's
    /// `source.address`, with or without its port), which sent `headers` and, under
    /// authorization, a verified token whose payload reached the filter as `token_payload`.
    pub fn new(
        address: Option<&str>,
        headers: &McpHeaders,
        token_payload: Option<&[u8]>,
        request_id: &Value,
    ) -> CancelKey {
        let mut hasher = DefaultHasher::new();
        address.map(without_port).hash(&mut hasher);
        headers.authorization.hash(&mut hasher);
        token_payload.hash(&mut hasher);
        // The id's JSON text: 7 and "7" are different requests.
        request_id.to_string().hash(&mut hasher);
        CancelKey(hasher.finish())
    }

    /// The key as text, for a host's table of them.
    pub fn text(&self) -> String {
        format!("{:016x}", self.0)
    }

    /// One of `slots` places for the key, where a host keeps a table of bounded size.
    pub fn slot(&self, slots: u64) -> u64 {
        self.0 % slots.max(1)
    }

    /// What a host that shares cancellations through a table writes in the key's slot: the key
    /// and when the cancellation came (`now`, on a clock every reader shares).
    pub fn record(&self, now: Duration) -> String {
        format!("{} {}", self.text(), now.as_millis())
    }

    /// Whether `record` (read from the key's slot) cancels this key's request, sent at `since`:
    /// a record for another key (which took the slot since) or for an earlier request with the
    /// same id does not.
    pub fn is_cancelled_by(&self, record: &[u8], since: Duration) -> bool {
        let Some((key, at)) = std::str::from_utf8(record)
            .ok()
            .and_then(|record| record.split_once(' '))
        else {
            return false;
        };
        let at = at.parse::<u128>().unwrap_or(0);
        key == self.text() && at >= since.as_millis()
    }
}

/// The address without its port: a client's requests come from many ports.
fn without_port(address: &str) -> &str {
    if let Some(bracketed) = address.strip_prefix('[') {
        return bracketed.split(']').next().unwrap_or(bracketed);
    }
    match address.split_once(':') {
        Some((host, port)) if !port.contains(':') => host,
        _ => address,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn headers(authorization: Option<&str>) -> McpHeaders {
        McpHeaders {
            authorization: authorization.map(str::to_owned),
            ..McpHeaders::default()
        }
    }

    #[test]
    fn a_client_names_its_requests_from_any_port() {
        let key = |address| CancelKey::new(Some(address), &headers(None), None, &json!(3));
        assert_eq!(key("10.0.0.1:4000"), key("10.0.0.1:4001"));
        assert_eq!(key("[::1]:4000"), key("[::1]:4001"));
        assert_eq!(key("[::1]:4000"), key("::1"));
        assert_ne!(key("10.0.0.1:4000"), key("10.0.0.2:4000"));
    }

    #[test]
    fn another_credential_or_id_is_another_request() {
        let key = |authorization, payload: Option<&[u8]>, id| {
            CancelKey::new(Some("10.0.0.1:1"), &headers(authorization), payload, &id)
        };
        let base = key(Some("Bearer a"), None, json!(3));
        assert_eq!(base, key(Some("Bearer a"), None, json!(3)));
        assert_ne!(base, key(Some("Bearer b"), None, json!(3)));
        assert_ne!(base, key(None, None, json!(3)));
        assert_ne!(base, key(Some("Bearer a"), Some(b"{}"), json!(3)));
        assert_ne!(base, key(Some("Bearer a"), None, json!("3")));
        assert_ne!(base, key(Some("Bearer a"), None, json!(4)));
    }

    #[test]
    fn a_record_cancels_its_key_from_when_it_came() {
        let key = CancelKey::new(Some("10.0.0.1:1"), &headers(None), None, &json!(3));
        let other = CancelKey::new(Some("10.0.0.1:1"), &headers(None), None, &json!(4));
        let record = key.record(Duration::from_millis(5_000));
        assert!(key.is_cancelled_by(record.as_bytes(), Duration::from_millis(4_000)));
        assert!(key.is_cancelled_by(record.as_bytes(), Duration::from_millis(5_000)));
        assert!(
            !key.is_cancelled_by(record.as_bytes(), Duration::from_millis(5_001)),
            "a later request with the id"
        );
        assert!(!other.is_cancelled_by(record.as_bytes(), Duration::ZERO));
        for garbage in [&b""[..], b"x", b"\xff\xfe 1", b"abc"] {
            assert!(!key.is_cancelled_by(garbage, Duration::ZERO));
        }
    }

    #[test]
    fn slots_stay_in_range() {
        let key = CancelKey::new(None, &headers(None), None, &json!(1));
        assert!(key.slot(64) < 64);
        assert_eq!(key.slot(0), 0);
        assert_eq!(key.text().len(), 16);
    }
}

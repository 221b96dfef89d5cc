//! Cancelling a request from another POST: `notifications/cancelled` in the handshake eras
//! (in 2026-07-28 a client cancels by closing the request's SSE stream, which Envoy turns into
//! a reset of the upstream stream). The server keeps no state per client, so a request is known
//! by what only its client holds, and its JSON-RPC id: a [`CancelKey`] names the session id
//! handed to the client at `initialize` ([`crate::session`]), its credential (the
//! `Authorization` header, and the verified token's payload) and the id. Never the client's
//! address: others share it, or write it (`X-Forwarded-For`). A request that carries none of
//! these cannot be cancelled by notification; closing its connection still cancels it.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use serde_json::Value;

use crate::http::McpHeaders;
use crate::quota::counters::{update, SharedCounters};

/// The last bytes of the answer to a cancelled request: an SSE comment, which clients skip (no
/// JSON-RPC response goes for a cancelled request), and which keeps the answer from being empty
/// (Envoy drops the content type of an empty local reply).
pub const CANCELLED_COMMENT: &[u8] = b": cancelled\n\n";

/// The slots of a shared store's cancellations: a worker reads its requests' slots at each
/// tick, so a slot is taken from an earlier cancellation only by many within one tick.
const CANCEL_SLOTS: u64 = 256;

/// Which request a cancellation names, as hosts file it. Hashed with the standard library's
/// fixed-key hasher, so that every VM and thread of one build computes the same key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CancelKey(u64);

impl CancelKey {
    /// The key of the request `request_id` from the client that sent `headers` (its session id
    /// and `Authorization`) and, under authorization, a verified token whose payload reached
    /// the filter as `token_payload`; `None` when it sent none of them, so that nobody else can
    /// name its requests.
    pub fn new(headers: &McpHeaders, token_payload: Option<&[u8]>, request_id: &Value) -> Option<CancelKey> {
        let held = [
            headers.session_id.as_deref().map(str::as_bytes),
            headers.authorization.as_deref().map(str::as_bytes),
            token_payload,
        ];
        if held.iter().all(|part| part.is_none_or(<[u8]>::is_empty)) {
            return None;
        }
        let mut hasher = DefaultHasher::new();
        held.hash(&mut hasher);
        // The id's JSON text: 7 and "7" are different requests.
        request_id.to_string().hash(&mut hasher);
        Some(CancelKey(hasher.finish()))
    }

    /// The key as text, for a host's table of them.
    pub fn text(&self) -> String {
        format!("{:016x}", self.0)
    }

    /// Files the cancellation of this key's request, which came at `now` (on a clock every
    /// worker shares), in a store every worker reads: for a host whose workers share no memory
    /// (the Wasm filter's VMs, through proxy-wasm's shared data). The key has one of a fixed
    /// number of slots, so that a client sending many cannot grow the store; a cancellation
    /// whose slot another takes before the request's worker reads it is lost, and the request
    /// then ends as it would have without one.
    pub fn file_in(&self, store: &dyn SharedCounters, now: Duration) {
        let record = self.record(now).into_bytes();
        if update(store, &self.slot_key(), |_| (Some(record.clone()), ())).is_err() {
            log::warn!("cannot file a cancellation: every worker kept writing its slot");
        }
    }

    /// Whether a cancellation filed in `store` ([`Self::file_in`]) names this key's request,
    /// which came at `since`.
    pub fn is_cancelled_in(&self, store: &dyn SharedCounters, since: Duration) -> bool {
        store
            .get(&self.slot_key())
            .is_some_and(|(record, _)| self.is_cancelled_by(&record, since))
    }

    /// The store's key of this key's slot.
    fn slot_key(&self) -> String {
        format!("cancelled/{}", self.slot(CANCEL_SLOTS))
    }

    /// One of `slots` places for the key.
    fn slot(&self, slots: u64) -> u64 {
        self.0 % slots.max(1)
    }

    /// What the key's slot holds: the key and when the cancellation came.
    fn record(&self, now: Duration) -> String {
        format!("{} {}", self.text(), now.as_millis())
    }

    /// Whether `record` (read from the key's slot) cancels this key's request, sent at `since`:
    /// a record for another key (which took the slot since) or for an earlier request with the
    /// same id does not.
    fn is_cancelled_by(&self, record: &[u8], since: Duration) -> bool {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn headers(session_id: Option<&str>, authorization: Option<&str>) -> McpHeaders {
        McpHeaders {
            session_id: session_id.map(str::to_owned),
            authorization: authorization.map(str::to_owned),
            ..McpHeaders::default()
        }
    }

    #[test]
    fn a_request_is_named_only_by_what_its_client_holds() {
        let key = |session, authorization, payload: Option<&[u8]>, id| {
            CancelKey::new(&headers(session, authorization), payload, &id)
        };
        let base = key(Some("s1"), None, None, json!(3)).unwrap();
        assert_eq!(Some(base), key(Some("s1"), None, None, json!(3)));
        assert_ne!(Some(base), key(Some("s2"), None, None, json!(3)), "another session");
        assert_ne!(Some(base), key(Some("s1"), Some("Bearer a"), None, json!(3)));
        assert_ne!(Some(base), key(Some("s1"), None, Some(b"{}"), json!(3)));
        assert_ne!(Some(base), key(Some("s1"), None, None, json!("3")));
        assert_ne!(Some(base), key(Some("s1"), None, None, json!(4)));
        assert!(key(None, Some("Bearer a"), None, json!(3)).is_some());
        assert!(key(None, None, Some(b"{\"sub\":\"a\"}"), json!(3)).is_some());
        // Nothing only the client holds: its requests cannot be named by anyone.
        assert_eq!(key(None, None, None, json!(3)), None);
        assert_eq!(key(Some(""), Some(""), None, json!(3)), None);
        // The factors are kept apart: a session id is not an Authorization header.
        assert_ne!(
            key(Some("x"), None, None, json!(3)),
            key(None, Some("x"), None, json!(3))
        );
    }

    #[test]
    fn a_record_cancels_its_key_from_when_it_came() {
        let key = CancelKey::new(&headers(Some("s"), None), None, &json!(3)).unwrap();
        let other = CancelKey::new(&headers(Some("s"), None), None, &json!(4)).unwrap();
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
    fn a_cancellation_filed_in_a_shared_store_is_read_by_its_key_alone() {
        use crate::quota::counters::MemoryCounters;

        let store = MemoryCounters::default();
        let key = CancelKey::new(&headers(Some("s"), None), None, &json!(3)).unwrap();
        let other = CancelKey::new(&headers(Some("s"), None), None, &json!(4)).unwrap();
        let since = Duration::from_millis(1_000);
        assert!(!key.is_cancelled_in(&store, since), "nothing filed");
        key.file_in(&store, Duration::from_millis(1_500));
        assert!(key.is_cancelled_in(&store, since));
        assert!(
            !key.is_cancelled_in(&store, Duration::from_millis(2_000)),
            "a later request"
        );
        assert!(!other.is_cancelled_in(&store, since));
        // Filed again (another cancellation in the slot): the last one is read.
        other.file_in(&store, Duration::from_millis(1_600));
        assert!(other.is_cancelled_in(&store, since));
    }

    #[test]
    fn slots_stay_in_range() {
        let key = CancelKey::new(&headers(Some("s"), None), None, &json!(1)).unwrap();
        assert!(key.slot(64) < 64);
        assert_eq!(key.slot(0), 0);
        assert_eq!(key.text().len(), 16);
    }
}

//! Session ids of the handshake eras. The filter keeps no sessions: an id is a random value
//! handed to a client with its `initialize` answer (`Mcp-Session-Id`), which the client then
//! sends with every request. Nobody else has it, so it is what names the client's requests when
//! it cancels one from another connection ([`crate::cancel`]).

use std::fmt::Write;

/// Bytes of randomness in an id: guessing one is out of reach.
const SESSION_ID_BYTES: usize = 16;

/// A fresh session id (32 hex digits); `None` if the system has no randomness to give.
pub fn new_session_id() -> Option<String> {
    let mut bytes = [0; SESSION_ID_BYTES];
    if let Err(error) = getrandom::fill(&mut bytes) {
        log::warn!("cannot make a session id: {error}; the client's requests cannot be cancelled by notification");
        return None;
    }
    let mut id = String::with_capacity(2 * SESSION_ID_BYTES);
    for byte in bytes {
        let _ = write!(id, "{byte:02x}");
    }
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_fresh_and_header_safe() {
        let (first, second) = (new_session_id().unwrap(), new_session_id().unwrap());
        assert_ne!(first, second);
        assert_eq!(first.len(), 32);
        assert!(first.bytes().all(|byte| byte.is_ascii_hexdigit()));
    }
}

//! The key this Envoy signs task ids with when a configuration has no `tasks.keys`: one per
//! process, made on first use and kept for every configuration after it (a swapped
//! configuration keeps honouring the ids of the one before). The module's configuration is
//! shared by every worker, so every worker signs and checks with this one key.

use std::sync::OnceLock;

/// The process's key; `None` if the system has no randomness to make one with (then a
/// configuration without `tasks.keys` cannot make tasks).
pub fn process_key() -> Option<[u8; 32]> {
    static KEY: OnceLock<Option<[u8; 32]>> = OnceLock::new();
    *KEY.get_or_init(|| {
        let mut key = [0; 32];
        match getrandom::fill(&mut key) {
            Ok(()) => Some(key),
            Err(error) => {
                log::error!("cannot make this Envoy's task key: {error}; set tasks.keys");
                None
            }
        }
    })
}

//! `tasks`: long-running operations as MCP tasks, as configured: the keys task ids are signed
//! with, the timings told to clients and kept by the gateway, the bound on polls, and their
//! check.

use std::fmt;

use serde::Deserialize;

use super::quota::MAX_REQUESTS_PER_SECOND;
use super::ConfigError;

pub const DEFAULT_TASK_POLL_INTERVAL_MS: u64 = 5_000;
pub const DEFAULT_TASK_TTL_MS: u64 = 86_400_000;
pub const DEFAULT_TASK_WAIT_POLL_INTERVAL_MS: u64 = 1_000;
/// The smallest bucket of a task's polls, unless configured.
pub const DEFAULT_TASK_POLL_BURST: u32 = 10;
/// A key ring of two lets a key be rotated: add the new one first, then drop the old one once
/// no task signed with it is still wanted.
pub const MAX_TASK_KEYS: usize = 2;
/// HMAC-SHA256 keys shorter than its output would be its weakest part.
pub const MIN_TASK_KEY_BYTES: usize = 32;

/// Long-running operations as MCP tasks: how task ids are signed, and the timings told to
/// clients and kept by the gateway.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TasksConfig {
    /// Keys (base64, at least 32 bytes each) that authenticate task ids with HMAC-SHA256: the
    /// first signs new ids, every one is accepted (at most two, to rotate a key). The same keys
    /// on every Envoy let any of them answer any poll. Unset: each Envoy makes a key of its
    /// own when it starts, and refuses the ids of the others.
    pub keys: Vec<String>,
    /// `pollIntervalMs`: how long task clients are asked to wait between polls.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub poll_interval_ms: u64,
    /// `ttlMs`: how long after its creation a task id is honoured.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub ttl_ms: u64,
    /// How often the gateway polls an operation itself for a caller that did not declare
    /// tasks, within the tool's deadline.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub wait_poll_interval_ms: u64,
    /// Calls to the Operations service each task may have per second, for each caller
    /// (`tasks/get`, `tasks/result`, `tasks/cancel`, and the gateway's own polling): a poll over
    /// it is refused (a client's) or put off (the gateway's), so that no loop of polls floods
    /// the service. Unset: twice the faster of `poll_interval_ms` and `wait_poll_interval_ms`.
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = MAX_REQUESTS_PER_SECOND)))]
    pub max_polls_per_second: Option<u32>,
    /// The polls a task may have at once after a quiet spell (the bucket's size). Unset: 10, or
    /// the rate if it is more.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub poll_burst: Option<u32>,
    /// This Envoy's own key, for a configuration without `keys`: made by the host when it
    /// starts, never read from the configuration.
    #[serde(skip)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub process_key: Option<ProcessKey>,
}

/// A key a host made for itself (random, 32 bytes).
#[derive(Clone, PartialEq, Eq)]
pub struct ProcessKey(pub [u8; 32]);

impl fmt::Debug for ProcessKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A key never goes to a log, not even a debug print.
        f.write_str("ProcessKey(..)")
    }
}

impl TasksConfig {
    /// `max_polls_per_second`, or twice the rate of the faster of the two intervals: room for
    /// the gateway's own polling and a client that keeps to `pollIntervalMs`, with a margin.
    pub fn polls_per_second(&self) -> u32 {
        self.max_polls_per_second.unwrap_or_else(|| {
            let interval = self.poll_interval_ms.min(self.wait_poll_interval_ms).max(1);
            u32::try_from(2_000u64.div_ceil(interval)).unwrap_or(u32::MAX).max(1)
        })
    }

    /// `poll_burst`, or the rate, and at least [`DEFAULT_TASK_POLL_BURST`].
    pub fn poll_burst_size(&self) -> u32 {
        self.poll_burst
            .unwrap_or_else(|| self.polls_per_second().max(DEFAULT_TASK_POLL_BURST))
    }

    /// The bytes of `keys`, in order (a configuration that passed its check has no key that
    /// does not decode).
    pub fn decoded_keys(&self) -> Vec<Vec<u8>> {
        self.keys.iter().filter_map(|key| decode_key(key).ok()).collect()
    }
}

/// The bytes of a configured key: base64, standard or URL-safe, padded or not.
fn decode_key(text: &str) -> Result<Vec<u8>, String> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    use base64::Engine;
    let text = text.trim();
    [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|engine| engine.decode(text).ok())
        .ok_or_else(|| "not base64".to_owned())
}

impl Default for TasksConfig {
    fn default() -> Self {
        TasksConfig {
            keys: Vec::new(),
            poll_interval_ms: DEFAULT_TASK_POLL_INTERVAL_MS,
            ttl_ms: DEFAULT_TASK_TTL_MS,
            wait_poll_interval_ms: DEFAULT_TASK_WAIT_POLL_INTERVAL_MS,
            max_polls_per_second: None,
            poll_burst: None,
            process_key: None,
        }
    }
}

impl TasksConfig {
    pub(super) fn check(&self) -> Result<(), ConfigError> {
        for (key, value) in [
            ("poll_interval_ms", self.poll_interval_ms),
            ("ttl_ms", self.ttl_ms),
            ("wait_poll_interval_ms", self.wait_poll_interval_ms),
            (
                "max_polls_per_second",
                u64::from(self.max_polls_per_second.unwrap_or(1)),
            ),
            ("poll_burst", u64::from(self.poll_burst.unwrap_or(1))),
        ] {
            if value == 0 {
                return Err(ConfigError(format!("at `tasks.{key}`: must be greater than 0")));
            }
        }
        if f64::from(self.polls_per_second()) > MAX_REQUESTS_PER_SECOND {
            return Err(ConfigError(format!(
                "at `tasks.max_polls_per_second`: {} is more than {}",
                self.polls_per_second(),
                MAX_REQUESTS_PER_SECOND
            )));
        }
        if self.keys.len() > MAX_TASK_KEYS {
            return Err(ConfigError(format!(
                "at `tasks.keys`: {} keys; at most {MAX_TASK_KEYS} are taken (the one that signs, and the one it replaces while it is rotated out)",
                self.keys.len()
            )));
        }
        for (index, key) in self.keys.iter().enumerate() {
            let length = decode_key(key).map_err(|problem| {
                ConfigError(format!(
                    "at `tasks.keys[{index}]`: {problem}; write {MIN_TASK_KEY_BYTES} random bytes or more in base64 (`head -c 32 /dev/urandom | base64`)"
                ))
            })?;
            if length.len() < MIN_TASK_KEY_BYTES {
                return Err(ConfigError(format!(
                    "at `tasks.keys[{index}]`: {} bytes; a key takes at least {MIN_TASK_KEY_BYTES} (`head -c 32 /dev/urandom | base64`)",
                    length.len()
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_keys_are_read_in_every_base64_spelling() {
        use base64::Engine;
        let bytes: Vec<u8> = (0..32).map(|byte| byte * 7).collect();
        for engine in [
            base64::engine::general_purpose::STANDARD,
            base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ] {
            assert_eq!(decode_key(&engine.encode(&bytes)).unwrap(), bytes);
        }
        assert!(decode_key("not base64!").is_err());
    }
}

//! Where the limits' state lives: bytes under keys, shared by every worker of one Envoy, each
//! changed by compare-and-swap. The Wasm filter keeps them in proxy-wasm's shared data (whose
//! `set` fails when another VM wrote since the `get`); the module in [`MemoryCounters`],
//! shared by its worker threads. The arithmetic on the bytes is the core's ([`super::bucket`],
//! [`super::in_flight`]); a host only stores them.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

/// Another worker changed the bytes since they were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conflict;

/// Bytes under keys, shared by every worker, with a version per key.
pub trait SharedCounters: Send + Sync + fmt::Debug {
    /// The bytes under `key` and their version; `None` if the key was never set.
    fn get(&self, key: &str) -> Option<(Vec<u8>, u32)>;
    /// Sets the bytes under `key`, if their version is still `version` (`None`: whatever it
    /// is). A failure other than a conflict is logged by the host and read as one.
    fn set(&self, key: &str, value: &[u8], version: Option<u32>) -> Result<(), Conflict>;
}

/// How often a change is tried again after a conflict: each try is a read and a write, and
/// only another worker's write between them makes one fail.
const TRIES: usize = 64;

/// Every worker went on writing the key, try after try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Contended;

/// Changes the bytes under `key` with `change` (which gets the bytes, empty when the key is
/// new, and gives the new bytes if they change, with its answer), by compare-and-swap, tried
/// again on a conflict.
pub fn update<T>(
    counters: &dyn SharedCounters,
    key: &str,
    mut change: impl FnMut(&[u8]) -> (Option<Vec<u8>>, T),
) -> Result<T, Contended> {
    for _ in 0..TRIES {
        let Some((bytes, version)) = counters.get(key) else {
            // A new key is set to empty bytes (a fresh state) whatever is there: two workers
            // that race here write the same thing, and every change after is versioned.
            let _ = counters.set(key, &[], None);
            continue;
        };
        let (next, answer) = change(&bytes);
        let Some(next) = next else {
            return Ok(answer);
        };
        if counters.set(key, &next, Some(version)).is_ok() {
            return Ok(answer);
        }
    }
    Err(Contended)
}

/// Shared counters in memory, for a host whose workers are threads of one process (the
/// module), and for tests.
#[derive(Default)]
pub struct MemoryCounters {
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    values: HashMap<String, (Vec<u8>, u32)>,
    /// The last version given; versions start at 1, as proxy-wasm's do.
    version: u32,
}

impl SharedCounters for MemoryCounters {
    fn get(&self, key: &str) -> Option<(Vec<u8>, u32)> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.values.get(key).cloned()
    }

    fn set(&self, key: &str, value: &[u8], version: Option<u32>) -> Result<(), Conflict> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let current = entries.values.get(key).map(|(_, current)| *current);
        if version.is_some() && version != current {
            return Err(Conflict);
        }
        entries.version = entries.version.checked_add(1).unwrap_or(1);
        let next = entries.version;
        entries.values.insert(key.to_owned(), (value.to_vec(), next));
        Ok(())
    }
}

impl fmt::Debug for MemoryCounters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MemoryCounters")
    }
}

/// The counters a request's calls are limited with, shared by every worker.
pub type Counters = Arc<dyn SharedCounters>;

/// A call's place among a rule's calls in flight: given back when dropped, however the call
/// ended (an answer, a failure, a reset, a deadline, the request gone, a hook that panicked).
pub struct Lease {
    counters: Counters,
    key: String,
    id: u64,
}

impl Lease {
    pub(super) fn new(counters: Counters, key: String, id: u64) -> Self {
        Lease { counters, key, id }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let id = self.id;
        if update(&*self.counters, &self.key, |bytes| {
            (super::in_flight::release(bytes, id), ())
        })
        .is_err()
        {
            log::warn!(
                "cannot give back a call's place under {} (the counters stayed contended); it lapses at the call's deadline",
                self.key
            );
        }
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Lease({}#{})", self.key, self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;
    use std::time::Duration;

    use crate::quota::bucket::{Bucket, Take};

    #[test]
    fn a_versioned_set_fails_after_another_write() {
        let counters = MemoryCounters::default();
        assert_eq!(counters.get("k"), None);
        counters.set("k", b"a", None).unwrap();
        let (_, version) = counters.get("k").unwrap();
        counters.set("k", b"b", Some(version)).unwrap();
        assert_eq!(counters.set("k", b"c", Some(version)), Err(Conflict));
        assert_eq!(counters.get("k").unwrap().0, b"b");
    }

    /// Many threads take from one bucket at the same instant: exactly its burst is given.
    #[test]
    fn concurrent_takes_from_one_bucket_are_exact() {
        let counters: Arc<MemoryCounters> = Arc::default();
        let bucket = Bucket::new(0.001, 37);
        let taken: usize = (0..8)
            .map(|_| {
                let counters = Arc::clone(&counters);
                thread::spawn(move || {
                    (0..20)
                        .filter(|_| {
                            update(&*counters, "bucket", |bytes| bucket.take(bytes, Duration::ZERO, 1))
                                == Ok(Take::Taken)
                        })
                        .count()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|worker| worker.join().unwrap())
            .sum();
        assert_eq!(taken, 37);
    }

    /// A store whose writes always conflict: an update gives up, bounded.
    #[derive(Debug)]
    struct Busy;

    impl SharedCounters for Busy {
        fn get(&self, _key: &str) -> Option<(Vec<u8>, u32)> {
            Some((Vec::new(), 1))
        }

        fn set(&self, _key: &str, _value: &[u8], _version: Option<u32>) -> Result<(), Conflict> {
            Err(Conflict)
        }
    }

    #[test]
    fn an_update_that_always_conflicts_gives_up() {
        let bucket = Bucket::new(1.0, 1);
        assert_eq!(
            update(&Busy, "k", |bytes| bucket.take(bytes, Duration::ZERO, 1)),
            Err(Contended)
        );
    }
}

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

/// What a write expects to find under its key: it fails (a [`Conflict`]) otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Nothing: the key was never set.
    Absent,
    /// The bytes of this version, as a read gave them.
    Version(u32),
}

/// Bytes under keys, shared by every worker, with a version per key.
pub trait SharedCounters: Send + Sync + fmt::Debug {
    /// The bytes under `key` and their version; `None` if the key was never set.
    fn get(&self, key: &str) -> Option<(Vec<u8>, u32)>;
    /// Sets the bytes under `key`, if what is there is what `expect` says. A failure other
    /// than a conflict is logged by the host and read as one.
    fn set(&self, key: &str, value: &[u8], expect: Expect) -> Result<(), Conflict>;
}

/// How often a change is tried again after a conflict: each try is a read and a write, and
/// only another worker's write between them makes one fail.
pub(super) const TRIES: usize = 64;

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
        // A key never set is a fresh state, written only if it is still not set: two workers
        // that both found it new cannot both start from a fresh state.
        let (bytes, expect) = match counters.get(key) {
            Some((bytes, version)) => (bytes, Expect::Version(version)),
            None => (Vec::new(), Expect::Absent),
        };
        let (next, answer) = change(&bytes);
        let Some(next) = next else {
            return Ok(answer);
        };
        if counters.set(key, &next, expect).is_ok() {
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

    fn set(&self, key: &str, value: &[u8], expect: Expect) -> Result<(), Conflict> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let current = entries.values.get(key).map(|(_, current)| *current);
        let expected = match expect {
            Expect::Absent => None,
            Expect::Version(version) => Some(version),
        };
        if current != expected {
            return Err(Conflict);
        }
        entries.version = entries.version.checked_add(1).unwrap_or(1);
        let next = entries.version;
        entries.values.insert(key.to_owned(), (value.to_vec(), next));
        Ok(())
    }
}

impl MemoryCounters {
    /// How many keys are held.
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner).values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
        counters.set("k", b"a", Expect::Absent).unwrap();
        assert_eq!(counters.set("k", b"x", Expect::Absent), Err(Conflict));
        let (_, version) = counters.get("k").unwrap();
        counters.set("k", b"b", Expect::Version(version)).unwrap();
        assert_eq!(counters.set("k", b"c", Expect::Version(version)), Err(Conflict));
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

        fn set(&self, _key: &str, _value: &[u8], _expect: Expect) -> Result<(), Conflict> {
            Err(Conflict)
        }
    }

    /// Two workers both find a key new, and both take from a bucket of 1: the second's write
    /// of a fresh state fails, it reads the first's, and is refused.
    #[test]
    fn two_first_takes_that_race_give_one_token() {
        #[derive(Debug, Default)]
        struct Racing {
            store: MemoryCounters,
            /// Reads that see the key as never set, whatever it holds (the other worker's
            /// read, made before the first write).
            stale_reads: Mutex<usize>,
        }
        impl SharedCounters for Racing {
            fn get(&self, key: &str) -> Option<(Vec<u8>, u32)> {
                let mut stale = self.stale_reads.lock().unwrap();
                if *stale > 0 {
                    *stale -= 1;
                    return None;
                }
                self.store.get(key)
            }
            fn set(&self, key: &str, value: &[u8], expect: Expect) -> Result<(), Conflict> {
                self.store.set(key, value, expect)
            }
        }
        let counters = Racing {
            stale_reads: Mutex::new(2),
            ..Racing::default()
        };
        let bucket = Bucket::new(0.001, 1);
        let take = || update(&counters, "k", |bytes| bucket.take(bytes, Duration::ZERO, 1));
        assert_eq!(take(), Ok(Take::Taken));
        assert!(matches!(take(), Ok(Take::Refused { .. })));
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

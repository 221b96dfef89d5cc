//! Where each caller's rate lives. Each rate rule has a table of `limits.max_callers` places,
//! keys in the shared counters: proxy-wasm cannot delete shared data, so a key per caller would
//! grow Envoy's memory with every address a client can send from. A caller has two places,
//! picked by a hash keyed with this Envoy's secret, so that a client cannot aim at another's.
//! It uses the place that holds its bucket; else one that is empty or idle (a bucket refilled
//! to its brim holds nothing a fresh one would not); else it takes the place of the two whose
//! bucket is nearest to full again (a caller that keeps calling keeps its debt, and its place).
//! Only then is a rate forgotten: with more callers in debt than the table holds, the one that
//! owes least may get its burst again early.

use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::bucket::{Bucket, Take};
use super::counters::{Contended, Expect, SharedCounters, TRIES};

/// A caller as the rate limits count it: the text it is known by (the rate limit service's
/// `caller` descriptor), and where its buckets live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerKey {
    pub text: String,
    fingerprint: u64,
    places: [u32; 2],
}

/// How callers are placed in the tables.
#[derive(Clone)]
pub(crate) struct Places {
    secret: [u8; 32],
    count: u32,
}

impl std::fmt::Debug for Places {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret never goes to a log.
        write!(f, "Places({})", self.count)
    }
}

/// The bytes of a place: the fingerprint of the caller it holds, then its bucket's state.
const FINGERPRINT_BYTES: usize = 8;

impl Places {
    /// `count` places per rule, placed with `secret` (the host's key; without one, every
    /// Envoy places alike, which a client that reads this code could aim at).
    pub(crate) fn new(secret: Option<&[u8; 32]>, count: u32) -> Self {
        Places {
            secret: secret.copied().unwrap_or_default(),
            count: count.max(1),
        }
    }

    pub(crate) fn key(&self, text: String) -> CallerKey {
        let digest = match Hmac::<Sha256>::new_from_slice(&self.secret) {
            Ok(mut mac) => {
                mac.update(text.as_bytes());
                mac.finalize().into_bytes().into()
            }
            // HMAC takes a key of any length: this does not happen.
            Err(_) => [0; 32],
        };
        let word = |at: usize| {
            let mut bytes = [0; 4];
            bytes.copy_from_slice(&digest[at..at + 4]);
            u32::from_le_bytes(bytes)
        };
        let mut fingerprint = [0; FINGERPRINT_BYTES];
        fingerprint.copy_from_slice(&digest[..FINGERPRINT_BYTES]);
        CallerKey {
            text,
            fingerprint: u64::from_le_bytes(fingerprint),
            places: [word(8) % self.count, word(12) % self.count],
        }
    }
}

/// Takes `count` tokens from `caller`'s bucket under `selector`, in its place or in the one
/// it gets, by compare-and-swap, tried again on a conflict.
pub(crate) fn take(
    counters: &dyn SharedCounters,
    selector: &str,
    caller: &CallerKey,
    bucket: Bucket,
    count: u32,
    now: Duration,
) -> Result<Take, Contended> {
    let keys = caller.places.map(|place| place_key(selector, place));
    for _ in 0..TRIES {
        let found = [counters.get(&keys[0]), counters.get(&keys[1])];
        let choice = choose(&found, caller.fingerprint, bucket, now);
        let (next, take) = bucket.take(choice.state, now, count);
        let Some(next) = next else {
            return Ok(take);
        };
        let mut entry = Vec::with_capacity(FINGERPRINT_BYTES + next.len());
        entry.extend_from_slice(&choice.holder.to_le_bytes());
        entry.extend_from_slice(&next);
        if counters.set(&keys[choice.index], &entry, choice.expect).is_ok() {
            return Ok(take);
        }
    }
    Err(Contended)
}

/// The key of a place in a rule's table.
fn place_key(selector: &str, place: u32) -> String {
    format!("quota/rate/{selector}/{place}")
}

/// Which of a caller's two places it takes from, and as whose.
#[derive(Debug, PartialEq, Eq)]
struct Choice<'a> {
    index: usize,
    /// The caller whose fingerprint the place keeps.
    holder: u64,
    /// The bucket taken from (empty: a fresh one).
    state: &'a [u8],
    expect: Expect,
}

fn choose(found: &[Option<(Vec<u8>, u32)>; 2], caller: u64, bucket: Bucket, now: Duration) -> Choice<'_> {
    let entries = found.each_ref().map(|entry| {
        entry.as_ref().map(|(bytes, version)| {
            let (holder, state) = bytes.split_at(FINGERPRINT_BYTES.min(bytes.len()));
            let mut fingerprint = [0; FINGERPRINT_BYTES];
            if let Ok(holder) = <[u8; FINGERPRINT_BYTES]>::try_from(holder) {
                fingerprint = holder;
            }
            (u64::from_le_bytes(fingerprint), state, Expect::Version(*version))
        })
    });
    let own = entries.iter().enumerate().find_map(|(index, entry)| {
        let (holder, state, expect) = (*entry)?;
        (holder == caller).then_some(Choice {
            index,
            holder,
            state,
            expect,
        })
    });
    if let Some(own) = own {
        return own;
    }
    let fresh = |index: usize, expect: Expect| Choice {
        index,
        holder: caller,
        state: &[],
        expect,
    };
    if let Some(index) = entries.iter().position(Option::is_none) {
        return fresh(index, Expect::Absent);
    }
    let idle = entries.iter().enumerate().find_map(|(index, entry)| {
        entry
            .filter(|(_, state, _)| bucket.is_idle(state, now))
            .map(|(_, _, expect)| (index, expect))
    });
    if let Some((index, expect)) = idle {
        return fresh(index, expect);
    }
    // Both hold another caller's debt: the smaller debt goes.
    let units = |index: usize| entries[index].map_or(0, |(_, state, _)| bucket.units_at(state, now));
    let index = usize::from(units(1) > units(0));
    let expect = entries[index].map_or(Expect::Absent, |(_, _, expect)| expect);
    fresh(index, expect)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::counters::MemoryCounters;

    fn ms(value: u64) -> Duration {
        Duration::from_millis(value)
    }

    fn taken(counters: &MemoryCounters, caller: &CallerKey, bucket: Bucket, now: Duration) -> bool {
        take(counters, "*", caller, bucket, 1, now) == Ok(Take::Taken)
    }

    #[test]
    fn a_callers_places_are_stable_and_in_range() {
        let places = Places::new(Some(&[7; 32]), 10);
        let key = places.key("10.0.0.1".into());
        assert_eq!(key, places.key("10.0.0.1".into()));
        assert!(key.places.iter().all(|place| *place < 10));
        assert_ne!(key.fingerprint, places.key("10.0.0.2".into()).fingerprint);
        let elsewhere = Places::new(Some(&[8; 32]), 10);
        assert_ne!(
            key.fingerprint,
            elsewhere.key("10.0.0.1".into()).fingerprint,
            "another Envoy's secret"
        );
    }

    /// Thousands of callers through a table of 8 places: the store never holds more than the
    /// table, and no caller is given more than its burst at one instant.
    #[test]
    fn any_number_of_callers_is_held_in_the_table() {
        let counters = MemoryCounters::default();
        let places = Places::new(Some(&[1; 32]), 8);
        let bucket = Bucket::new(0.001, 1);
        for caller in 0..5_000 {
            let key = places.key(format!("10.0.{}.{}", caller / 256, caller % 256));
            let calls = (0..3).filter(|_| taken(&counters, &key, bucket, ms(caller))).count();
            assert_eq!(calls, 1, "caller {caller}");
        }
        assert!(counters.len() <= 8, "{} places held", counters.len());
    }

    /// Callers that come and go at a rate the table can hold: each is served its burst, and
    /// the places of those gone quiet are reused.
    #[test]
    fn places_of_quiet_callers_are_reused() {
        let counters = MemoryCounters::default();
        let places = Places::new(Some(&[2; 32]), 64);
        let bucket = Bucket::new(10.0, 2);
        for caller in 0..10_000u64 {
            let key = places.key(format!("caller-{caller}"));
            // One new caller a millisecond; a bucket refills in 200 ms: about 200 are in debt.
            let now = ms(caller);
            let calls = (0..3).filter(|_| taken(&counters, &key, bucket, now)).count();
            assert!(calls <= 2, "caller {caller} was served {calls} calls");
        }
        assert!(counters.len() <= 64);
    }

    #[test]
    fn an_idle_place_is_taken_over_and_in_a_full_table_the_smaller_debt_goes() {
        let counters = MemoryCounters::default();
        // One place: every caller's two places are the same one.
        let places = Places::new(None, 1);
        let bucket = Bucket::new(1.0, 1);
        let (first, second) = (places.key("a".into()), places.key("b".into()));
        assert!(taken(&counters, &first, bucket, ms(0)));
        assert!(!taken(&counters, &first, bucket, ms(500)));
        // `first` is in debt, and the table is full: `second` takes its place, fresh.
        assert!(taken(&counters, &second, bucket, ms(600)));
        assert!(!taken(&counters, &second, bucket, ms(600)));
        // `first` comes back to the place, which holds `second`'s debt: the only one there is,
        // so it goes.
        assert!(taken(&counters, &first, bucket, ms(700)));
        // A second after `first`'s take its bucket is full again: idle, so it goes first.
        assert!(taken(&counters, &second, bucket, ms(1_700)));
    }

    /// With room in the table, callers keep their own places whatever comes and goes.
    #[test]
    fn a_caller_keeps_its_place_while_the_table_has_room() {
        let counters = MemoryCounters::default();
        let places = Places::new(Some(&[3; 32]), 1_000);
        let bucket = Bucket::new(0.001, 1);
        let regular = places.key("regular".into());
        assert!(taken(&counters, &regular, bucket, ms(0)));
        for caller in 0..100 {
            let key = places.key(format!("passer-by-{caller}"));
            taken(&counters, &key, bucket, ms(caller + 1));
            assert!(
                !taken(&counters, &regular, bucket, ms(caller + 1)),
                "after caller {caller}"
            );
        }
    }

    /// A caller that keeps calling keeps its debt, and with it its place: a newcomer takes the
    /// place whose bucket is nearer to full.
    #[test]
    fn in_a_full_table_the_place_that_owes_least_goes() {
        let bucket = Bucket::new(1.0, 10);
        let spent = |count| bucket.take(&[], ms(0), count).0.unwrap();
        let held = |holder: u64, state: Vec<u8>| Some(([holder.to_le_bytes().to_vec(), state].concat(), 1));
        let found = [held(1, spent(10)), held(3, spent(4))];
        let choice = choose(&found, 2, bucket, ms(100));
        assert_eq!((choice.index, choice.holder, choice.state), (1, 2, &[][..]));
        let found = [held(3, spent(4)), held(1, spent(10))];
        assert_eq!(choose(&found, 2, bucket, ms(100)).index, 0);
    }

    #[test]
    fn an_empty_place_is_taken_before_any_held_one() {
        let found = [Some(([1u64.to_le_bytes().as_slice(), &[0; 16]].concat(), 3)), None];
        let bucket = Bucket::new(1.0, 1);
        let choice = choose(&found, 2, bucket, ms(0));
        assert_eq!((choice.index, choice.holder, choice.expect), (1, 2, Expect::Absent));
    }
}

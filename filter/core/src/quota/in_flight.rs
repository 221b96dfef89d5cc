//! The calls a rule has out at the upstream, as bytes: one lease per call, each with an id and
//! the time it lapses. A call gives its lease back when it ends; a lease whose holder never
//! could (a Wasm VM that died with calls out) lapses at its call's deadline and a little
//! more, so that the count heals itself.

use std::time::Duration;

/// The state: the next id, then each lease's id and the time it lapses (microseconds on the
/// host's clock).
const ID_BYTES: usize = 8;
const LEASE_BYTES: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lease {
    id: u64,
    until: u64,
}

/// What an acquire got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquired {
    /// A lease, under this id.
    Leased(u64),
    /// `max` calls are out already.
    Full,
}

/// Takes a lease at `now` lapsing at `until`, if fewer than `max` unlapsed ones are out. The
/// new state, when it changed, and what the acquire got.
pub fn acquire(bytes: &[u8], now: Duration, until: Duration, max: u32) -> (Option<Vec<u8>>, Acquired) {
    let (next_id, mut leases) = read(bytes);
    let now = micros(now);
    leases.retain(|lease| lease.until > now);
    if leases.len() >= usize::try_from(max).unwrap_or(usize::MAX) {
        return (None, Acquired::Full);
    }
    leases.push(Lease {
        id: next_id,
        until: micros(until),
    });
    (Some(write(next_id.wrapping_add(1), &leases)), Acquired::Leased(next_id))
}

/// Gives back the lease `id`; the new state, when it changed (a lapsed lease is gone already).
pub fn release(bytes: &[u8], id: u64) -> Option<Vec<u8>> {
    let (next_id, mut leases) = read(bytes);
    let before = leases.len();
    leases.retain(|lease| lease.id != id);
    (leases.len() != before).then(|| write(next_id, &leases))
}

/// How many leases are out and unlapsed at `now`.
pub fn count(bytes: &[u8], now: Duration) -> usize {
    let now = micros(now);
    read(bytes).1.iter().filter(|lease| lease.until > now).count()
}

fn micros(time: Duration) -> u64 {
    u64::try_from(time.as_micros()).unwrap_or(u64::MAX)
}

/// The state in `bytes`; empty or unreadable bytes are no leases.
fn read(bytes: &[u8]) -> (u64, Vec<Lease>) {
    let word = |chunk: &[u8]| chunk.try_into().map(u64::from_le_bytes).unwrap_or_default();
    if bytes.len() < ID_BYTES || !(bytes.len() - ID_BYTES).is_multiple_of(LEASE_BYTES) {
        return (0, Vec::new());
    }
    let (next_id, rest) = bytes.split_at(ID_BYTES);
    let leases = rest
        .chunks_exact(LEASE_BYTES)
        .map(|lease| {
            let (id, until) = lease.split_at(8);
            Lease {
                id: word(id),
                until: word(until),
            }
        })
        .collect();
    (word(next_id), leases)
}

fn write(next_id: u64, leases: &[Lease]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(ID_BYTES + LEASE_BYTES * leases.len());
    bytes.extend_from_slice(&next_id.to_le_bytes());
    for lease in leases {
        bytes.extend_from_slice(&lease.id.to_le_bytes());
        bytes.extend_from_slice(&lease.until.to_le_bytes());
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(value: u64) -> Duration {
        Duration::from_secs(value)
    }

    #[test]
    fn at_most_max_leases_are_out_and_a_release_makes_room() {
        let (state, first) = acquire(&[], s(0), s(10), 2);
        let state = state.unwrap();
        let (state, second) = acquire(&state, s(0), s(10), 2);
        let state = state.unwrap();
        assert_eq!((first, second), (Acquired::Leased(0), Acquired::Leased(1)));
        assert_eq!(acquire(&state, s(1), s(11), 2), (None, Acquired::Full));
        let state = release(&state, 0).unwrap();
        assert_eq!(count(&state, s(1)), 1);
        assert_eq!(acquire(&state, s(1), s(11), 2).1, Acquired::Leased(2));
        assert_eq!(release(&state, 0), None, "released twice");
    }

    #[test]
    fn a_lease_nobody_gives_back_lapses() {
        let (state, _) = acquire(&[], s(0), s(10), 1);
        let state = state.unwrap();
        assert_eq!(acquire(&state, s(9), s(19), 1).1, Acquired::Full);
        assert_eq!(acquire(&state, s(10), s(20), 1).1, Acquired::Leased(1));
    }

    #[test]
    fn unreadable_bytes_are_no_leases() {
        assert_eq!(count(b"garbage!+", s(0)), 0);
        assert_eq!(acquire(b"xyz", s(0), s(1), 1).1, Acquired::Leased(0));
    }

    proptest! {
        /// Whatever the order of acquires and releases, the leases out never pass `max`, and
        /// every one given back is gone.
        #[test]
        fn the_count_never_passes_max(max in 1u32..6, steps in proptest::collection::vec(any::<(bool, u8)>(), 1..200)) {
            let mut state = Vec::new();
            let mut held: Vec<u64> = Vec::new();
            for (take, pick) in steps {
                if take || held.is_empty() {
                    let (next, acquired) = acquire(&state, s(0), s(100), max);
                    match acquired {
                        Acquired::Leased(id) => { state = next.unwrap(); held.push(id); }
                        Acquired::Full => prop_assert_eq!(held.len(), max as usize),
                    }
                } else {
                    let id = held.remove(usize::from(pick) % held.len());
                    state = release(&state, id).unwrap();
                }
                prop_assert_eq!(count(&state, s(0)), held.len());
                prop_assert!(held.len() <= max as usize);
            }
        }
    }
}

//! A token bucket as bytes: what one caller has left under one rule. Pure arithmetic on the
//! host's clock (`now`, any epoch, the same for every worker that shares the bytes), in whole
//! microseconds and millionths of a token, so that every worker computes the same state from
//! the same bytes.

use std::time::Duration;

/// Millionths of a token: a rate of 0.5 per second refills 500,000 every second.
const UNITS_PER_TOKEN: u64 = 1_000_000;
const MICROS_PER_SECOND: u128 = 1_000_000;

/// A bucket's shape: refilled at `rate` units a second, up to `burst` tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// Units (millionths of a token) added per second.
    rate: u64,
    burst: u32,
}

/// A bucket's state: the units it held at `at` (microseconds on the host's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct State {
    units: u64,
    at: u64,
}

const STATE_BYTES: usize = 16;

/// What a bucket said to a take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    Taken,
    /// Not enough tokens: they will be there in `retry_after`; `None` when they never can
    /// (more than the bucket holds).
    Refused {
        retry_after: Option<Duration>,
    },
}

impl Bucket {
    /// A bucket refilled at `requests_per_second` (greater than 0, at most a million: the
    /// configuration checks it) up to `burst` tokens.
    pub fn new(requests_per_second: f64, burst: u32) -> Self {
        // Checked positive and at most a million: the product fits and is not negative.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let rate = (requests_per_second * UNITS_PER_TOKEN as f64).round().max(1.0) as u64;
        Bucket { rate, burst }
    }

    fn capacity(self) -> u64 {
        u64::from(self.burst) * UNITS_PER_TOKEN
    }

    /// Takes `count` tokens at `now` from the bucket in `bytes` (empty, or anything unreadable:
    /// a full bucket). The new state, when it changed, and what the take got.
    pub fn take(self, bytes: &[u8], now: Duration, count: u32) -> (Option<Vec<u8>>, Take) {
        let now = micros(now);
        let state = self.refilled(read(bytes), now);
        let wanted = u64::from(count) * UNITS_PER_TOKEN;
        if state.units >= wanted {
            let left = State {
                units: state.units - wanted,
                at: now,
            };
            return (Some(write(left)), Take::Taken);
        }
        if wanted > self.capacity() {
            return (None, Take::Refused { retry_after: None });
        }
        let missing = u128::from(wanted - state.units);
        // Rounded up: a retry at that time finds the tokens there.
        let wait = (missing * MICROS_PER_SECOND).div_ceil(u128::from(self.rate));
        let retry_after = Duration::from_micros(u64::try_from(wait).unwrap_or(u64::MAX));
        (
            None,
            Take::Refused {
                retry_after: Some(retry_after),
            },
        )
    }

    /// Whether the bucket in `bytes` is full again at `now` (or was never used): it then holds
    /// nothing a fresh bucket would not, and its place may go to another caller.
    pub fn is_idle(self, bytes: &[u8], now: Duration) -> bool {
        let state = read(bytes);
        state.is_none() || self.refilled(state, micros(now)).units >= self.capacity()
    }

    /// What the bucket in `bytes` holds at `now`, in millionths of a token (a full bucket if
    /// never used).
    pub fn units_at(self, bytes: &[u8], now: Duration) -> u64 {
        self.refilled(read(bytes), micros(now)).units
    }

    /// The state at `now`: what `state` held, refilled for the time since, within the burst.
    /// A clock that went back (the Wasm host's wall clock) refills nothing and moves the state
    /// to `now`, so that a bucket never waits for a time already passed.
    fn refilled(self, state: Option<State>, now: u64) -> State {
        let Some(state) = state else {
            return State {
                units: self.capacity(),
                at: now,
            };
        };
        let elapsed = u128::from(now.saturating_sub(state.at));
        let added = elapsed * u128::from(self.rate) / MICROS_PER_SECOND;
        let units = u128::from(state.units)
            .saturating_add(added)
            .min(u128::from(self.capacity()));
        State {
            units: u64::try_from(units).unwrap_or(u64::MAX),
            at: now,
        }
    }
}

fn micros(now: Duration) -> u64 {
    u64::try_from(now.as_micros()).unwrap_or(u64::MAX)
}

fn read(bytes: &[u8]) -> Option<State> {
    let bytes: &[u8; STATE_BYTES] = bytes.try_into().ok()?;
    let (units, at) = bytes.split_at(8);
    Some(State {
        units: u64::from_le_bytes(units.try_into().ok()?),
        at: u64::from_le_bytes(at.try_into().ok()?),
    })
}

fn write(state: State) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(STATE_BYTES);
    bytes.extend_from_slice(&state.units.to_le_bytes());
    bytes.extend_from_slice(&state.at.to_le_bytes());
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(value: u64) -> Duration {
        Duration::from_millis(value)
    }

    /// Takes one token at each time, keeping the state; which were taken.
    fn run(bucket: Bucket, times: &[Duration]) -> Vec<bool> {
        let mut state = Vec::new();
        times
            .iter()
            .map(|now| {
                let (next, take) = bucket.take(&state, *now, 1);
                if let Some(next) = next {
                    state = next;
                }
                take == Take::Taken
            })
            .collect()
    }

    #[test]
    fn a_full_bucket_gives_its_burst_then_one_token_per_interval() {
        let bucket = Bucket::new(2.0, 2);
        let times = [ms(0), ms(0), ms(0), ms(499), ms(500), ms(500), ms(1000)];
        assert_eq!(run(bucket, &times), [true, true, false, false, true, false, true]);
    }

    #[test]
    fn a_refusal_says_when_the_token_will_be_there() {
        let bucket = Bucket::new(2.0, 1);
        let (state, take) = bucket.take(&[], ms(1000), 1);
        assert_eq!(take, Take::Taken);
        let state = state.unwrap();
        let (unchanged, take) = bucket.take(&state, ms(1200), 1);
        assert_eq!(unchanged, None, "a refusal writes nothing");
        assert_eq!(
            take,
            Take::Refused {
                retry_after: Some(ms(300))
            }
        );
        assert_eq!(bucket.take(&state, ms(1500), 1).1, Take::Taken);
    }

    #[test]
    fn fractional_rates_refill_slowly_and_more_than_the_burst_is_never_given() {
        let bucket = Bucket::new(0.5, 1);
        let (state, _) = bucket.take(&[], ms(0), 1);
        let state = state.unwrap();
        assert_eq!(
            bucket.take(&state, ms(1999), 1).1,
            Take::Refused {
                retry_after: Some(Duration::from_micros(1000))
            }
        );
        assert_eq!(bucket.take(&state, ms(2000), 1).1, Take::Taken);
        assert_eq!(bucket.take(&[], ms(0), 2).1, Take::Refused { retry_after: None });
    }

    #[test]
    fn a_clock_that_goes_back_refills_nothing_and_does_not_stall_the_bucket() {
        let bucket = Bucket::new(1.0, 1);
        let (state, _) = bucket.take(&[], ms(10_000), 1);
        let (state, take) = bucket.take(&state.unwrap(), ms(5_000), 1);
        assert!(matches!(take, Take::Refused { .. }));
        assert_eq!(state, None);
        // From the earlier time on, a second is a second.
        let (_, take) = bucket.take(
            &write(State {
                units: 0,
                at: 5_000_000,
            }),
            ms(6_000),
            1,
        );
        assert_eq!(take, Take::Taken);
    }

    #[test]
    fn a_bucket_is_idle_once_it_has_refilled_to_its_burst() {
        let bucket = Bucket::new(2.0, 2);
        assert!(bucket.is_idle(&[], ms(0)));
        let (state, _) = bucket.take(&[], ms(1_000), 1);
        let state = state.unwrap();
        assert_eq!(bucket.units_at(&state, ms(1_250)), 1_500_000);
        assert!(!bucket.is_idle(&state, ms(1_000)));
        assert!(!bucket.is_idle(&state, ms(1_499)));
        assert!(bucket.is_idle(&state, ms(1_500)));
    }

    #[test]
    fn unreadable_bytes_are_a_full_bucket() {
        let bucket = Bucket::new(1.0, 3);
        assert_eq!(bucket.take(b"garbage", ms(0), 3).1, Take::Taken);
    }

    proptest! {
        /// Over any window, a bucket gives at most its burst plus what the rate refills in
        /// the window, whatever the order and spacing of the takes.
        #[test]
        fn takes_never_exceed_burst_plus_refill(
            rate in 0.1f64..50.0,
            burst in 1u32..20,
            gaps in proptest::collection::vec(0u64..400, 1..300),
        ) {
            let bucket = Bucket::new(rate, burst);
            let mut now = 0u64;
            let times: Vec<Duration> = gaps.iter().map(|gap| { now += gap; ms(now) }).collect();
            let taken = run(bucket, &times);
            for start in 0..times.len() {
                for end in start..times.len() {
                    let window = (times[end] - times[start]).as_secs_f64();
                    let given = taken[start..=end].iter().filter(|taken| **taken).count() as f64;
                    prop_assert!(given <= f64::from(burst) + rate * window + 1e-6,
                        "{given} taken in {window} s at {rate}/s, burst {burst}");
                }
            }
        }

        /// A caller that waits as long as a refusal says is served then.
        #[test]
        fn retrying_after_the_time_a_refusal_gives_is_served(
            rate in 0.1f64..50.0,
            burst in 1u32..5,
            start in 0u64..10_000,
        ) {
            let bucket = Bucket::new(rate, burst);
            let mut state = Vec::new();
            let now = ms(start);
            loop {
                let (next, take) = bucket.take(&state, now, 1);
                match take {
                    Take::Taken => state = next.unwrap(),
                    Take::Refused { retry_after } => {
                        let retry_after = retry_after.unwrap();
                        prop_assert_eq!(bucket.take(&state, now + retry_after, 1).1, Take::Taken);
                        break;
                    }
                }
            }
        }
    }
}

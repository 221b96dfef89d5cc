//! The module's clock, for the time a call is out and when a refresh is due: monotonic, from
//! its first reading.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub fn now() -> Duration {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

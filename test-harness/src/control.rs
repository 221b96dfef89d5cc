//! What tests can see and steer in the upstream: per-method call counts, and an artificial
//! delay before every answer (to exercise deadlines).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

#[derive(Debug, Clone, Default)]
pub struct Control {
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
    delay_ms: Arc<AtomicU64>,
}

impl Control {
    /// Records one call to `method` (`/package.Service/Method`), then waits out the delay.
    pub async fn enter(&self, method: &str) {
        {
            let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
            *counts.entry(method.to_owned()).or_default() += 1;
        }
        let delay = self.delay_ms.load(Ordering::Relaxed);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
    }

    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Clears the counts and the delay.
    pub fn reset(&self) {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.delay_ms.store(0, Ordering::Relaxed);
    }

    pub fn set_delay(&self, delay: Duration) {
        self.delay_ms.store(
            u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }
}

//! Per-method call counts, shared by the services and the control endpoint.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

#[derive(Debug, Clone, Default)]
pub struct CallLog {
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl CallLog {
    /// Records one call to `method` (`/package.Service/Method`).
    pub fn record(&self, method: &str) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        *counts.entry(method.to_owned()).or_default() += 1;
    }

    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn reset(&self) {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

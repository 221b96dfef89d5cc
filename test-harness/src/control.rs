//! What tests can see and steer in the upstream: per-method call counts, the gRPC metadata
//! of each method's last call, an artificial delay before every answer (for deadlines), and
//! the most calls that were in that delay at once (for bounds on calls in flight).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tonic::metadata::{KeyAndValueRef, MetadataMap};

#[derive(Debug, Clone, Default)]
pub struct Control {
    state: Arc<Mutex<Seen>>,
    delay_ms: Arc<AtomicU64>,
    waiting: Arc<AtomicU64>,
    most_waiting: Arc<AtomicU64>,
}

#[derive(Debug, Default)]
struct Seen {
    counts: BTreeMap<String, u64>,
    metadata: BTreeMap<String, BTreeMap<String, String>>,
}

impl Control {
    /// Records one call to `method` (`/package.Service/Method`) and its metadata, then waits
    /// out the delay.
    pub async fn enter(&self, method: &str, metadata: &MetadataMap) {
        {
            let mut seen = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            *seen.counts.entry(method.to_owned()).or_default() += 1;
            seen.metadata.insert(method.to_owned(), text_entries(metadata));
        }
        let delay = self.delay_ms.load(Ordering::Relaxed);
        if delay > 0 {
            let now = self.waiting.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_waiting.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// The most calls that were in the delay at once since the last reset.
    pub fn most_in_flight(&self) -> u64 {
        self.most_waiting.load(Ordering::SeqCst)
    }

    pub fn counts(&self) -> BTreeMap<String, u64> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).counts.clone()
    }

    pub fn metadata(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .metadata
            .clone()
    }

    /// Clears the counts, the metadata and the delay.
    pub fn reset(&self) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = Seen::default();
        self.delay_ms.store(0, Ordering::Relaxed);
        self.most_waiting.store(0, Ordering::SeqCst);
    }

    pub fn set_delay(&self, delay: Duration) {
        self.delay_ms
            .store(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

fn text_entries(metadata: &MetadataMap) -> BTreeMap<String, String> {
    metadata
        .iter()
        .filter_map(|entry| match entry {
            KeyAndValueRef::Ascii(key, value) => Some((key.to_string(), value.to_str().ok()?.to_owned())),
            KeyAndValueRef::Binary(..) => None,
        })
        .collect()
}

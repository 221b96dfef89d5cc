//! What tests can see and steer in the upstream: per-method call counts, the gRPC metadata
//! of each method's last call (the values of a key sent more than once joined by ", ", as
//! HTTP combines them), an artificial delay before every answer (for deadlines), the
//! most calls that were in that delay at once (for bounds on calls in flight), how
//! server-streaming answers behave, and how many streams were opened and cancelled.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use tonic::metadata::{KeyAndValueRef, MetadataMap};

#[derive(Debug, Clone, Default)]
pub struct Control {
    state: Arc<Mutex<Seen>>,
    delay_ms: Arc<AtomicU64>,
    waiting: Arc<AtomicU64>,
    most_waiting: Arc<AtomicU64>,
    streams: Arc<Mutex<StreamCounts>>,
    stream_mode: Arc<Mutex<StreamMode>>,
}

/// How the upstream's server-streaming answers behave, for tests of a client that must cope
/// with a misbehaving server. Every mode but `Normal` ignores the call's deadline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StreamMode {
    /// As each method says.
    #[default]
    Normal,
    /// `MANY_MESSAGES` messages as fast as the client takes them, then OK.
    Many,
    /// That many messages as fast as the client takes them, then OK (the benchmark's streams).
    Count(u64),
    /// That many messages, then FAILED_PRECONDITION.
    ErrorAfter(u64),
    /// One message, then nothing, never ending: the client must give up.
    NeverEnd,
}

/// How many messages a stream in mode `Many` sends.
pub const MANY_MESSAGES: u64 = 10_000;

impl FromStr for StreamMode {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        let counted = match value.split_once('=') {
            Some(("error_after", count)) => count.parse::<u64>().map(StreamMode::ErrorAfter).ok(),
            Some(("count", count)) => count.parse::<u64>().map(StreamMode::Count).ok(),
            _ => None,
        };
        match (value, counted) {
            ("normal", _) => Ok(StreamMode::Normal),
            ("many", _) => Ok(StreamMode::Many),
            ("never_end", _) => Ok(StreamMode::NeverEnd),
            (_, Some(mode)) => Ok(mode),
            _ => Err(format!(
                "stream mode {value:?}: write normal, many, count=N, error_after=N (N a count) or never_end"
            )),
        }
    }
}

/// Server-streaming and bidirectional answers: open now, and opened and cancelled since the
/// last reset. Cancelled ones ended before the server finished them: the client went away or
/// reset the stream, its request stream broke, or its deadline passed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StreamCounts {
    pub open: u64,
    pub opened: u64,
    pub cancelled: u64,
}

#[derive(Debug, Default)]
struct Seen {
    counts: BTreeMap<String, u64>,
    metadata: BTreeMap<String, BTreeMap<String, String>>,
}

/// A call in the delay; dropped when it leaves, however it leaves.
struct Waiting(Arc<AtomicU64>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
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
            // A call its client resets is dropped mid-sleep: the guard still counts it out.
            let _left = Waiting(Arc::clone(&self.waiting));
            tokio::time::sleep(Duration::from_millis(delay)).await;
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

    /// Clears the counts, the metadata, the delay and the stream mode. Streams still open stay
    /// counted open: they have not ended.
    pub fn reset(&self) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = Seen::default();
        self.delay_ms.store(0, Ordering::Relaxed);
        self.most_waiting.store(0, Ordering::SeqCst);
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        *streams = StreamCounts {
            open: streams.open,
            ..StreamCounts::default()
        };
        self.set_stream_mode(StreamMode::Normal);
    }

    pub fn streams(&self) -> StreamCounts {
        *self.streams.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn stream_opened(&self) {
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        streams.open += 1;
        streams.opened += 1;
    }

    /// `finished`: the server ended the stream (with OK or not), rather than the client or the
    /// deadline.
    pub fn stream_closed(&self, finished: bool) {
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        streams.open = streams.open.saturating_sub(1);
        if !finished {
            streams.cancelled += 1;
        }
    }

    pub fn stream_mode(&self) -> StreamMode {
        *self.stream_mode.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn set_stream_mode(&self, mode: StreamMode) {
        *self.stream_mode.lock().unwrap_or_else(PoisonError::into_inner) = mode;
    }

    pub fn set_delay(&self, delay: Duration) {
        self.delay_ms
            .store(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

/// The call's metadata as text: an ASCII entry's value, and a binary (`-bin`) entry's bytes as
/// gRPC decoded them from base64, in lowercase hex. Repeated keys are joined with ", ".
fn text_entries(metadata: &MetadataMap) -> BTreeMap<String, String> {
    let mut entries: BTreeMap<String, String> = BTreeMap::new();
    for entry in metadata.iter() {
        let (key, value) = match entry {
            KeyAndValueRef::Ascii(key, value) => match value.to_str() {
                Ok(value) => (key.to_string(), value.to_owned()),
                Err(_) => continue,
            },
            KeyAndValueRef::Binary(key, value) => match value.to_bytes() {
                Ok(bytes) => (
                    key.to_string(),
                    bytes.iter().map(|byte| format!("{byte:02x}")).collect(),
                ),
                Err(_) => continue,
            },
        };
        entries
            .entry(key)
            .and_modify(|values| {
                values.push_str(", ");
                values.push_str(&value);
            })
            .or_insert(value);
    }
    entries
}

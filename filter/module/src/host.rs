//! What the module's request logic asks of Envoy, as a small safe trait: one HTTP stream behind
//! the ABI ([`crate::abi::Stream`]), or the exchange's unit tests' fake.

use std::any::Any;
use std::time::Instant;

use switchblade_core::host_api::{HeaderCopy, MetricKind};

/// Which header map a call acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderMap {
    Request,
    RequestTrailers,
    Response,
    ResponseTrailers,
}

/// Which body a call acts on: the chunk of the current hook, or what Envoy buffered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    ReceivedRequest,
    BufferedRequest,
    ReceivedResponse,
    BufferedResponse,
}

/// A wake-up the host has scheduled for a stream; dropping it cancels it.
pub struct Alarm(#[allow(dead_code)] pub Box<dyn Any>);

/// One HTTP stream, as the exchange uses it, for the length of one hook.
pub trait StreamHost {
    /// The first value of a header, as bytes.
    fn header(&self, map: HeaderMap, name: &str) -> Option<Vec<u8>>;
    fn headers(&self, map: HeaderMap) -> HeaderCopy;
    /// Sets a header to one value, in place of all it had.
    fn set_header(&self, map: HeaderMap, name: &str, value: &[u8]) -> bool;
    /// Adds a value to a header, keeping those it has.
    fn add_header(&self, map: HeaderMap, name: &str, value: &[u8]) -> bool;
    fn remove_header(&self, map: HeaderMap, name: &str);
    fn body(&self, body: Body) -> Vec<u8>;
    fn body_size(&self, body: Body) -> usize;
    /// Replaces a body: drains it, then appends `bytes`.
    fn replace_body(&self, body: Body, bytes: &[u8]) -> bool;
    fn drain_body(&self, body: Body);
    /// Answers the request here (a local reply).
    fn send_response(&self, status: u16, headers: &[(&str, &str)], body: &[u8]);
    /// Starts an answer sent in parts (an SSE stream): its headers, `:status` among them.
    fn send_response_headers(&self, headers: &[(&str, &str)], end_stream: bool);
    /// A part of an answer begun with [`Self::send_response_headers`].
    fn send_response_data(&self, data: &[u8], end_stream: bool);
    /// Resets the stream: for a response that has begun and cannot be answered any more.
    fn reset(&self);
    /// Adds to a counter, or records a histogram value, with one value per label.
    fn record_metric(&self, kind: MetricKind, id: usize, label_values: &[&str], value: u64) -> bool;
    /// Sets a read-only string in the stream's filter state (once per key).
    fn set_filter_state(&self, key: &str, value: &str) -> bool;
    /// A string filter state object's bytes.
    fn filter_state(&self, key: &str) -> Option<Vec<u8>>;
    /// The client's address (Envoy's `source.address`, with its port).
    fn client_address(&self) -> Option<String>;
    /// Makes Envoy choose the request's route again.
    fn clear_route_cache(&self);
    /// Starts an HTTP request to `cluster`, sent whole: its answer comes in parts to the
    /// exchange's `call_*` hooks under the id returned, or Envoy's refusal.
    fn start_call(&self, cluster: &str, headers: &[(&str, &str)], body: &[u8], timeout_ms: u64) -> Result<u64, u32>;
    /// Cancels a call it started.
    fn reset_call(&self, call: u64);
    /// Asks for the exchange's `wake` hook at `when`, with `event`; `None` if the host cannot.
    fn wake_at(&self, when: Instant, event: u64) -> Option<Alarm>;
    /// Asks for the `wake` hook, with `event`, when another stream of the same configuration
    /// cancels `cancel_key` ([`Self::cancel_listeners`]); `None` if the host cannot.
    fn listen_for_cancel(&self, cancel_key: &str, event: u64) -> Option<Alarm>;
    /// Wakes the streams listening for `cancel_key`; how many.
    fn cancel_listeners(&self, cancel_key: &str) -> usize;
}

/// What a configuration needs of Envoy while it is made: its stats.
pub trait StatsHost {
    /// Defines a counter or histogram with labels; its id, or `None` if Envoy refused it.
    fn define(&self, kind: MetricKind, name: &str, label_names: &[&str]) -> Option<usize>;
}

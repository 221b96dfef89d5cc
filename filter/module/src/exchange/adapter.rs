//! The stream as the core exchange's host: what the core asks (start and reset calls, publish,
//! send the answer whole or in parts, alarms, cancel listeners) done on the stream for one
//! event, and the request's headers read from it.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use switchblade_core::host_api::{
    Answer, CancelKey, Counters, ExchangeHost, HeaderCopy, HeaderPair, Observations, RequestFacts, RequestHead,
    TokenPayloadSource, UpstreamCall,
};

use super::{Exchange, CANCELLED, POLL_DUE};
use crate::clock::now;
use crate::host::{Facts, HeaderMap, StreamHost};

/// Room for a sample's stat name at once: the longest a request usually writes is a tool's
/// call counter, `tool_calls.tool.<tool>.outcome.success.grpc_status.OK`, 49 bytes and the
/// tool's name.
const STAT_NAME_CAPACITY: usize = 128;

/// The stream as the core's host, for one event.
pub(super) struct Adapter<'a, H> {
    pub(super) stream: &'a H,
    pub(super) exchange: &'a Exchange,
}

impl<H: StreamHost> RequestFacts for Adapter<'_, H> {
    fn token_payload(&self, source: &TokenPayloadSource) -> Option<Vec<u8>> {
        Facts(self.stream).token_payload(source)
    }

    fn client_address(&self) -> Option<String> {
        self.stream.client_address()
    }
}

impl<H: StreamHost> ExchangeHost for Adapter<'_, H> {
    /// Envoy's id for a callout.
    type CallHandle = u64;

    fn now(&self) -> Duration {
        now()
    }

    fn counters(&self) -> Option<&Counters> {
        Some(self.exchange.config.counters())
    }

    fn sends_in_parts(&self) -> bool {
        true
    }

    fn routes_calls(&self) -> bool {
        true
    }

    fn route_call(&mut self, call: &UpstreamCall, cluster_header: &str) {
        self.exchange.route_call(self.stream, call, cluster_header);
    }

    fn start_call(&mut self, call: &UpstreamCall) -> Result<u64, String> {
        // Envoy may call this exchange's call hooks from inside: they defer what they heard.
        let timeout_ms = u64::try_from(call.timeout().as_millis()).unwrap_or(u64::MAX).max(1);
        self.stream
            .start_call(call.cluster(), &call.http_headers(), call.http_body(), timeout_ms)
            .map_err(|result| format!("Envoy refused the call (result {result})"))
    }

    /// Its end, if Envoy tells it inline, is deferred and then finds the call forgotten.
    fn reset_call(&mut self, call: u64) {
        self.stream.reset_call(call);
    }

    /// Adds what the request told to Envoy's stats, and to its filter state
    /// (`switchblade.<field>`) for the access log.
    fn publish(&mut self, observed: &Observations) {
        let mut name = String::with_capacity(STAT_NAME_CAPACITY);
        for sample in observed.samples() {
            let Some((id, labels)) = self.exchange.config.stat_of(&sample, &mut name) else {
                continue;
            };
            if !self
                .stream
                .record_metric(sample.metric.kind(), id, labels, sample.value)
            {
                log::warn!("Envoy refused a value for the stat {}", sample.metric.name());
            }
        }
        for (key, value) in observed.log_entries() {
            if !self.stream.set_filter_state(key, &value) {
                log::warn!("Envoy refused {key} for the access log");
            }
        }
    }

    fn send(&mut self, answer: Answer<'_>) {
        let exchange = self.exchange;
        match answer {
            Answer::Whole(response) => {
                exchange.stop_alarms();
                exchange.answered.set(true);
                self.stream
                    .send_response(response.status, &response.header_pairs(), &response.body);
            }
            Answer::Begin { head, events } => {
                exchange.answered.set(true);
                let mut headers = vec![(":status", "200")];
                headers.extend(head.header_pairs());
                self.stream.send_response_headers(&headers, false);
                self.stream.send_response_data(events, false);
            }
            Answer::Part { data, last } => {
                if last {
                    exchange.stop_alarms();
                }
                self.stream.send_response_data(data, last);
            }
        }
    }

    fn wake_at(&mut self, at: Duration) -> bool {
        let when = Instant::now() + at.saturating_sub(now());
        let alarm = self.stream.wake_at(when, POLL_DUE);
        let can = alarm.is_some();
        self.exchange.poll.replace(alarm);
        can
    }

    fn listen_for_cancel(&mut self, key: CancelKey) {
        let alarm = self.stream.listen_for_cancel(&key.text(), CANCELLED);
        self.exchange.cancel_listener.replace(alarm);
    }

    fn file_cancel(&mut self, key: &CancelKey) {
        self.stream.cancel_listeners(&key.text());
    }
}

/// The request's headers: one value at a time from Envoy, until the core reads them all (an
/// MCP request's), which copies the map out once and keeps it for a routed call.
pub(super) struct Head<'a, H> {
    pub(super) stream: &'a H,
    pub(super) map: &'a RefCell<Option<HeaderCopy>>,
}

impl<H: StreamHost> RequestHead for Head<'_, H> {
    fn header(&self, name: &str) -> Option<Vec<u8>> {
        self.stream.header(HeaderMap::Request, name)
    }

    fn read_all<R>(&self, read: impl FnOnce(&[HeaderPair<'_>]) -> R) -> R {
        if self.map.borrow().is_none() {
            *self.map.borrow_mut() = Some(self.stream.headers(HeaderMap::Request));
        }
        let map = self.map.borrow();
        let pairs = map.as_ref().map(HeaderCopy::pairs).unwrap_or_default();
        read(&pairs)
    }
}

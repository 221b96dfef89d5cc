//! The stream as the core exchange's host for one event, and the request's headers read from
//! it.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use switchblade_core::host_api::{
    Answer, CancelKey, Counters, ExchangeHost, HeaderCopy, HeaderPair, Observations, RequestFacts, RequestHead,
    TokenPayloadSource, UpstreamCall, STAT_NAME_BYTES,
};

use super::{Exchange, CANCELLED, POLL_DUE};
use crate::clock::now;
use crate::host::{HeaderMap, StreamHost};

pub(super) struct Adapter<'a, H> {
    pub(super) stream: &'a H,
    pub(super) exchange: &'a Exchange,
}

impl<H: StreamHost> RequestFacts for Adapter<'_, H> {
    /// Through filter state only: the module reads no metadata object.
    fn token_payload(&self, source: &TokenPayloadSource) -> Option<Vec<u8>> {
        match source {
            TokenPayloadSource::FilterState(key) => self.stream.filter_state(key),
            TokenPayloadSource::Metadata { .. } => None,
        }
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
        Some(&self.exchange.config.counters)
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
        let timeout_ms = u64::try_from(call.timeout().as_millis()).unwrap_or(u64::MAX).max(1);
        self.stream
            .start_call(call.cluster(), &call.http_headers(), call.http_body(), timeout_ms)
            .map_err(|result| format!("Envoy refused the call (result {result})"))
    }

    fn reset_call(&mut self, call: u64) {
        self.stream.reset_call(call);
    }

    /// To Envoy's stats, and to filter state (`switchblade.<field>`) for the access log.
    fn publish(&mut self, observed: &Observations) {
        let mut name = String::with_capacity(STAT_NAME_BYTES);
        for sample in observed.samples() {
            let Some((id, labels)) = self.exchange.config.stat_ids.of(&sample, &mut name) else {
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
                self.stream
                    .send_response(response.status, &response.header_pairs(), &response.body);
            }
            Answer::Begin { head, events } => {
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
        self.exchange.keep_alarm(POLL_DUE, alarm);
        can
    }

    fn listen_for_cancel(&mut self, key: CancelKey) {
        let alarm = self.stream.listen_for_cancel(&key.text(), CANCELLED);
        self.exchange.keep_alarm(CANCELLED, alarm);
    }

    fn file_cancel(&mut self, key: &CancelKey) {
        self.stream.cancel_listeners(&key.text());
    }
}

/// The request's headers: one value at a time from Envoy, until the core reads them all (an
/// MCP request's): the map is copied out once, and kept for a routed call.
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

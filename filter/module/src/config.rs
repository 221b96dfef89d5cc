//! One filter configuration, shared by every worker thread: its server, its stats' ids, and the
//! clocks it runs (reflection refreshes; its streams' wake-ups).

use std::any::Any;
use std::sync::Arc;

use switchblade_core::host_api::{
    process_key, Build, ConfigError, Counters, MemoryCounters, ReflectionCall, Sample, ServedServer, StatIds,
};

use crate::abi::{ConfigHost, Ticker, Wakeups};
use crate::clock::now;
use crate::host::StatsHost;

pub struct Config {
    /// Refreshed (if it reads reflection) on the main thread, by the configuration's own calls.
    pub(crate) served: ServedServer,
    /// The refreshes' clock (a [`Ticker`], stopped when the configuration goes), as `Any` so
    /// that the unit tests never link its ABI calls.
    ticker: Option<Box<dyn Any + Send + Sync>>,
    pub(crate) wakeups: Option<Wakeups>,
    pub(crate) stat_ids: StatIds<usize>,
    /// The rate limits' counters, shared by every worker and every server reflection swaps in.
    pub(crate) counters: Counters,
}

impl Config {
    /// Builds the server, and defines its stats (Envoy allows that only now).
    pub fn from_bytes(bytes: &[u8], stats: &impl StatsHost) -> Result<Self, ConfigError> {
        let served = ServedServer::load(bytes, process_key(), Build::DynamicModule, now)?;
        let server = served.current();
        let tools: Vec<&str> = server.catalog().tools().map(|tool| tool.name.as_str()).collect();
        let stat_ids = StatIds::labelled(&tools, |kind, name, labels| stats.define(kind, name, labels));
        drop(server);
        Ok(Config {
            served,
            ticker: None,
            wakeups: None,
            stat_ids,
            counters: Arc::new(MemoryCounters::default()),
        })
    }

    pub fn keep_wakeups(&mut self, wakeups: Option<Wakeups>) {
        if wakeups.is_none() {
            log::warn!(
                "cannot start the clock of routed calls' deadlines; Envoy's route timeout alone bounds them, \
                 and notifications/cancelled cannot stop a stream"
            );
        }
        self.wakeups = wakeups;
    }

    pub fn keep_ticker(&mut self, ticker: Option<Ticker>) {
        match ticker {
            Some(ticker) => self.ticker = Some(Box::new(ticker)),
            None => log::warn!("cannot start the reflection clock; reflection is read once"),
        }
    }

    /// The scheduled hook: starts a reflection refresh if one is due.
    pub fn tick(&self, host: &ConfigHost) {
        let ended = self.served.tick(now(), |call| start(host, call));
        self.count_refresh(host, ended);
    }

    pub fn call_ended(&self, host: &ConfigHost, call: u64, reset: bool) {
        let ended = self.served.ended(call, reset, now(), |call| start(host, call));
        self.count_refresh(host, ended);
    }

    fn count_refresh(&self, host: &ConfigHost, ended: Option<Sample<'_>>) {
        let Some(sample) = ended else { return };
        if let Some((id, labels)) = self.stat_ids.of(&sample, &mut String::new()) {
            host.increment(id, labels, sample.value);
        }
    }
}

/// Starts a reflection call from the configuration, sent whole.
fn start(host: &ConfigHost, call: &ReflectionCall) -> Result<u64, String> {
    let timeout_ms = u64::try_from(call.timeout().as_millis()).unwrap_or(u64::MAX);
    host.start_call(call.cluster(), &call.http_headers(), call.http_body(), timeout_ms)
        .map_err(|code| format!("Envoy's callout result {code}"))
}

//! One filter configuration, shared by every worker thread: its server (fixed, or swapped by
//! live reflection), its stats' ids, and the clocks it runs (reflection refreshes, and the
//! wake-ups of its streams: deadlines of routed calls, cancellations).

use std::any::Any;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use switchblade_core::host_api::{
    configure_with_process_key, process_key, serving_line, CallPart, ConfigError, Configured, Counters, MemoryCounters,
    ReflectionCall, Refreshed, Sample, Server, SharedRefresher, StatIds, TokenPayloadSource, REFRESH_TICK,
};

use crate::abi::{ConfigHost, Ticker, Wakeups};
use crate::clock::now;
use crate::host::StatsHost;

pub struct Config {
    /// The server new requests get.
    server: ServerSlot,
    /// Reads the services with `from_reflection`, if there are any: on the main thread, from
    /// the configuration's scheduled hook; its calls are the configuration's own.
    live: Option<SharedRefresher>,
    /// Runs the refreshes' clock (a [`Ticker`]); stopped, its thread joined, when the
    /// configuration goes. Kept as `Any` so that code without Envoy (the unit tests) never
    /// links the ticker's ABI calls.
    ticker: Option<Box<dyn Any + Send + Sync>>,
    /// Wakes routed calls whose deadline has passed, and streams whose request was cancelled.
    wakeups: Option<Wakeups>,
    /// Envoy's stat ids: each metric with labels, and the label sets most requests use by
    /// name (defined without labels: Envoy gives a labeled stat the same name).
    stat_ids: StatIds<usize>,
    /// The rate limits' counters, shared by every worker (and by the servers live reflection
    /// swaps in: calls in flight keep their places).
    counters: Counters,
}

impl Config {
    /// Builds the server, and defines its stats (Envoy allows that only now, while the
    /// configuration is made).
    pub fn from_bytes(bytes: &[u8], stats: &impl StatsHost) -> Result<Self, ConfigError> {
        let started = Instant::now();
        let Configured { server, refresher } = configure_with_process_key(bytes, process_key())?;
        let took = started.elapsed();
        if let Some(TokenPayloadSource::Metadata { namespace, key }) = server.access().map(|policy| policy.source()) {
            return Err(ConfigError(format!(
                "at `authorization.token_payload`: the dynamic module cannot read dynamic metadata `{namespace}` key `{key}`: \
                 Envoy 1.40's module ABI reads only top-level metadata strings, numbers and lists, and jwt_authn writes the payload as an object. \
                 Copy it into filter state with envoy.filters.http.set_filter_state before this filter \
                 (object_key \"switchblade.token_payload\", factory_key \"envoy.string\", format %DYNAMIC_METADATA({namespace}:{key})%) \
                 and set `token_payload` to {{\"filter_state\": \"switchblade.token_payload\"}}; see docs/authorization.md"
            )));
        }
        let tools: Vec<&str> = server.catalog().tools().map(|tool| tool.name.as_str()).collect();
        let stat_ids = StatIds::labelled(&tools, |kind, name, labels| stats.define(kind, name, labels));
        log::info!("{}", serving_line(&server, Some(took), true));
        Ok(Config {
            server: match refresher {
                Some(_) => ServerSlot::Live(RwLock::new(Arc::new(server))),
                None => ServerSlot::Fixed(Box::new(server)),
            },
            live: refresher.map(SharedRefresher::new),
            ticker: None,
            wakeups: None,
            stat_ids,
            counters: Arc::new(MemoryCounters::default()),
        })
    }

    /// The server for a new request.
    pub(crate) fn current(&'static self) -> ServerRef {
        match &self.server {
            ServerSlot::Fixed(server) => ServerRef::Fixed(server),
            ServerSlot::Live(slot) => ServerRef::Live(Arc::clone(&slot.read().unwrap_or_else(PoisonError::into_inner))),
        }
    }

    /// The rate limits' counters.
    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Keeps the wake-ups of the configuration's streams, which the host starts.
    pub fn keep_wakeups(&mut self, wakeups: Option<Wakeups>) {
        if wakeups.is_none() {
            log::warn!(
                "cannot start the clock of routed calls' deadlines; Envoy's route timeout alone bounds them, \
                 and notifications/cancelled cannot stop a stream"
            );
        }
        self.wakeups = wakeups;
    }

    /// The wake-ups of the configuration's streams, if they could be started.
    pub fn wakeups(&self) -> Option<&Wakeups> {
        self.wakeups.as_ref()
    }

    /// How often the configuration needs its scheduled hook: only if it reads reflection.
    pub fn tick_period(&self) -> Option<Duration> {
        self.live.as_ref().map(|_| REFRESH_TICK)
    }

    pub fn keep_ticker(&mut self, ticker: Option<Ticker>) {
        match ticker {
            Some(ticker) => self.ticker = Some(Box::new(ticker)),
            None => log::warn!("cannot start the reflection clock; reflection is read once"),
        }
    }

    /// The scheduled hook: starts a reflection refresh if one is due.
    pub fn tick(&self, host: &ConfigHost) {
        let refreshed = self
            .live
            .as_ref()
            .and_then(|live| live.tick(now(), |call| start(host, call)));
        if let Some(refreshed) = refreshed {
            self.refreshed(host, refreshed);
        }
    }

    /// A part of the answer to one of the configuration's own calls.
    pub fn call_heard(&self, call: u64, part: CallPart<'_>) {
        if let Some(live) = &self.live {
            live.heard(call, part);
        }
    }

    pub fn call_ended(&self, host: &ConfigHost, call: u64, reset: bool) {
        let start = |reflection: &ReflectionCall| start(host, reflection);
        if let Some(refreshed) = self
            .live
            .as_ref()
            .and_then(|live| live.ended(call, reset, now(), start))
        {
            self.refreshed(host, refreshed);
        }
    }

    /// A refresh ended: count it, and serve its server if the API changed.
    fn refreshed(&self, host: &ConfigHost, refreshed: Refreshed) {
        let sample = refreshed.sample();
        if let Some((id, labels)) = self.stat_of(&sample, &mut String::new()) {
            host.increment(id, labels, sample.value);
        }
        let ServerSlot::Live(slot) = &self.server else {
            return;
        };
        refreshed.log(
            slot.read()
                .unwrap_or_else(PoisonError::into_inner)
                .catalog()
                .tool_count(),
        );
        if let Refreshed::Changed { server, .. } = refreshed {
            *slot.write().unwrap_or_else(PoisonError::into_inner) = Arc::from(server);
        }
    }

    /// Where a sample goes among Envoy's stats ([`StatIds::of`]).
    pub fn stat_of<'a>(&self, sample: &'a Sample<'_>, name: &mut String) -> Option<(usize, &'a [&'a str])> {
        self.stat_ids.of(sample, name)
    }
}

/// Starts a reflection call from the configuration, sent whole.
fn start(host: &ConfigHost, call: &ReflectionCall) -> Result<u64, String> {
    let timeout_ms = u64::try_from(call.timeout().as_millis()).unwrap_or(u64::MAX);
    host.start_call(call.cluster(), &call.http_headers(), call.http_body(), timeout_ms)
        .map_err(|code| format!("Envoy's callout result {code}"))
}

/// Where a configuration keeps its server: fixed for its life, or swapped by reflection
/// (requests in flight keep the one they started with).
enum ServerSlot {
    Fixed(Box<Server>),
    Live(RwLock<Arc<Server>>),
}

/// A request's server: borrowed from a fixed slot (no count to keep on the hot path), or a
/// share of the live one.
pub(crate) enum ServerRef {
    Fixed(&'static Server),
    Live(Arc<Server>),
}

impl ServerRef {
    pub(crate) fn get(&self) -> &Server {
        match self {
            ServerRef::Fixed(server) => server,
            ServerRef::Live(server) => server,
        }
    }
}

//! Live discovery in the module: the core's [`Refresher`] driven from the configuration's own
//! main-thread hooks. A ticker thread asks Envoy to run the configuration's scheduled hook;
//! due refreshes start HTTP streams from the configuration (not from a request), whose answers
//! come back to the configuration's stream hooks.

use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use switchblade_core::host_api::{CallPart, ReflectionCall, Refreshed, Refresher};

use crate::abi::ConfigHost;
use crate::clock::now;
use crate::deferred::Deferred;

/// The configuration's reflection refreshes.
pub struct LiveCatalog {
    refresher: Mutex<Refresher>,
    /// What Envoy told about a stream while the refresher was busy starting one (should it
    /// answer inside `start_call`): delivered as soon as the start returns.
    deferred: Mutex<Vec<(u64, Deferred)>>,
}

/// A lock only the main thread takes; a panic there leaves state that is still readable.
fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LiveCatalog {
    pub fn new(refresher: Refresher) -> Self {
        LiveCatalog {
            refresher: Mutex::new(refresher),
            deferred: Mutex::default(),
        }
    }

    /// Starts a refresh if one is due; how it ended, if it ended at once.
    pub fn tick(&self, host: &ConfigHost) -> Option<Refreshed> {
        let refreshed = locked(&self.refresher).tick(now(), |call| start(host, call));
        self.deliver_deferred(host).or(refreshed)
    }

    /// A part of a stream's answer.
    pub fn heard(&self, stream: u64, part: CallPart<'_>) {
        match self.refresher.try_lock() {
            Ok(mut refresher) => refresher.heard(stream, part),
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner().heard(stream, part),
            Err(TryLockError::WouldBlock) => locked(&self.deferred).push((stream, Deferred::from(part))),
        }
    }

    /// The stream ended (`reset`: without a whole answer); how the refresh ended, if it did.
    pub fn ended(&self, host: &ConfigHost, stream: u64, reset: bool) -> Option<Refreshed> {
        let refreshed = match self.refresher.try_lock() {
            Ok(mut refresher) => refresher.ended(stream, reset, now(), |call| start(host, call)),
            Err(TryLockError::Poisoned(poisoned)) => poisoned
                .into_inner()
                .ended(stream, reset, now(), |call| start(host, call)),
            Err(TryLockError::WouldBlock) => {
                locked(&self.deferred).push((stream, Deferred::Ended { reset }));
                return None;
            }
        };
        self.deliver_deferred(host).or(refreshed)
    }

    /// Delivers what was heard while the refresher was busy; how a refresh ended, if it did.
    fn deliver_deferred(&self, host: &ConfigHost) -> Option<Refreshed> {
        let mut refreshed = None;
        loop {
            let deferred = std::mem::take(&mut *locked(&self.deferred));
            if deferred.is_empty() {
                return refreshed;
            }
            for (stream, heard) in deferred {
                match heard {
                    Deferred::Part(part) => self.heard(stream, part.as_part()),
                    Deferred::Ended { reset } => {
                        let ended = locked(&self.refresher).ended(stream, reset, now(), |call| start(host, call));
                        refreshed = ended.or(refreshed);
                    }
                }
            }
        }
    }
}

/// Starts a reflection call from the configuration, sent whole.
fn start(host: &ConfigHost, call: &ReflectionCall) -> Result<u64, String> {
    let timeout_ms = u64::try_from(call.timeout().as_millis()).unwrap_or(u64::MAX);
    host.start_call(call.cluster(), &call.http_headers(), call.http_body(), timeout_ms)
        .map_err(|code| format!("Envoy's callout result {code}"))
}

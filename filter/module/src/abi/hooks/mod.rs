//! The functions Envoy calls: each turns Envoy's pointers into the module's safe types and runs
//! the safe code with panics caught, so that none unwinds into Envoy. A panic in a stream's
//! hook poisons its exchange: the request gets an internal error if nothing was answered yet,
//! or is reset, and every later hook of that stream lets it be.

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::bindings::{HttpFilterConfigModulePtr, HttpFilterEnvoyPtr, HttpFilterModulePtr};
use super::stream::Stream;
use crate::config::Config;
use crate::exchange::Exchange;

mod configuration;
mod stream;

/// The exchange behind a module pointer (rule 5); `None` for the null pointer a failed
/// `on_http_filter_new` returned.
///
/// # Safety
/// `filter` must be null or a pointer returned by `on_http_filter_new` and not yet destroyed.
pub(super) unsafe fn exchange<'a>(filter: HttpFilterModulePtr) -> Option<&'a Exchange> {
    // SAFETY: by the caller's contract, null or a live `Box<Exchange>` (rule 5).
    unsafe { (filter as *const Exchange).as_ref() }
}

/// The configuration behind a module pointer (rule 5).
///
/// # Safety
/// `config` must be a pointer returned by `on_http_filter_config_new` and not yet destroyed.
pub(super) unsafe fn config_of<'a>(config: HttpFilterConfigModulePtr) -> Option<&'a Config> {
    // SAFETY: by the caller's contract, null or a live `Box<Config>` (rule 5).
    unsafe { (config as *const Config).as_ref() }
}

/// Runs a stream hook's work for a live exchange with panics caught. A poisoned exchange (or
/// none) gets `idle`; a panic poisons the exchange and gives `idle` too.
pub(super) fn guarded<T>(
    filter: HttpFilterEnvoyPtr,
    exchange: Option<&Exchange>,
    what: &str,
    idle: T,
    work: impl FnOnce(&Exchange, &Stream) -> T,
) -> T {
    let Some(exchange) = exchange.filter(|exchange| !exchange.is_poisoned()) else {
        return idle;
    };
    let stream = Stream {
        filter,
        wakeups: exchange.config.wakeups.as_ref(),
    };
    match catch_unwind(AssertUnwindSafe(|| work(exchange, &stream))) {
        Ok(value) => value,
        Err(_) => {
            log::error!("{what} failed unexpectedly; the request is answered with an internal error, or reset");
            if catch_unwind(AssertUnwindSafe(|| exchange.poison(&stream))).is_err() {
                log::error!("answering the failed request failed too");
            }
            idle
        }
    }
}

/// Runs work outside any stream with panics caught: `fallback` if it panicked.
pub(super) fn guarded_config<T>(what: &str, fallback: T, work: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|_| {
        log::error!("{what} failed unexpectedly");
        fallback
    })
}

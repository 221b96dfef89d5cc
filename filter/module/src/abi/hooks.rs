//! The functions Envoy calls: each turns Envoy's pointers into the module's safe types and runs
//! the safe code with panics caught, so that none unwinds into Envoy. A panic in a stream's
//! hook poisons its exchange: the request gets an internal error if nothing was answered yet,
//! or is reset, and every later hook of that stream lets it be.

use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use switchblade_core::grpc::call_end::CallPart;

use super::bindings::{
    copied_chunks, copied_headers, ConfigHost, ConfigStats, Deadlines, EnvoyBuffer, EnvoyHttpHeader,
    HttpFilterConfigEnvoyPtr, HttpFilterConfigModulePtr, HttpFilterEnvoyPtr, HttpFilterModulePtr, Stream, Ticker,
    LOGGER,
};
use crate::config::Config;
use crate::exchange::{Exchange, Verdict};

/// The ABI version this module was written against (`ENVOY_DYNAMIC_MODULES_ABI_VERSION`).
const ABI_VERSION: &[u8] = b"v0.2.0\0";

// Statuses returned to Envoy: its own Filter*Status values.
const HEADERS_CONTINUE: u32 = 0;
const HEADERS_STOP_ITERATION: u32 = 1;
const BODY_CONTINUE: u32 = 0;
const BODY_STOP_AND_BUFFER: u32 = 1;
const BODY_STOP_NO_BUFFER: u32 = 3;
const TRAILERS_CONTINUE: u32 = 0;
const TRAILERS_STOP: u32 = 1;

/// The exchange behind a module pointer (rule 5); `None` for the null pointer a failed
/// `on_http_filter_new` returned.
///
/// # Safety
/// `filter` must be null or a pointer returned by `on_http_filter_new` and not yet destroyed.
unsafe fn exchange<'a>(filter: HttpFilterModulePtr) -> Option<&'a Exchange> {
    // SAFETY: by the caller's contract, null or a live `Box<Exchange>` (rule 5).
    unsafe { (filter as *const Exchange).as_ref() }
}

/// The configuration behind a module pointer (rule 5).
///
/// # Safety
/// `config` must be a pointer returned by `on_http_filter_config_new` and not yet destroyed.
unsafe fn config_of<'a>(config: HttpFilterConfigModulePtr) -> Option<&'a Config> {
    // SAFETY: by the caller's contract, null or a live `Box<Config>` (rule 5).
    unsafe { (config as *const Config).as_ref() }
}

/// Runs a stream hook's work for a live exchange with panics caught. A poisoned exchange (or
/// none) gets `idle`; a panic poisons the exchange and gives `idle` too.
fn guarded<T>(
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
        deadlines: exchange.config().deadlines(),
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
fn guarded_config<T>(what: &str, fallback: T, work: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|_| {
        log::error!("{what} failed unexpectedly");
        fallback
    })
}

// ---- The module and its configurations ----

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_program_init() -> *const c_char {
    guarded_config("loading the module", ptr::null(), || {
        // Already set when Envoy loads the module a second time in one process: nothing to do.
        if log::set_logger(&LOGGER).is_ok() {
            log::set_max_level(log::LevelFilter::Info);
        }
        ABI_VERSION.as_ptr().cast()
    })
}

/// # Safety
/// `config` is Envoy's buffer for this call (rule 1).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_new(
    config_envoy: HttpFilterConfigEnvoyPtr,
    _name: EnvoyBuffer,
    config: EnvoyBuffer,
) -> HttpFilterConfigModulePtr {
    let stats = ConfigStats { config: config_envoy };
    let what = "loading the configuration (it is refused)";
    guarded_config(what, ptr::null(), || {
        match Config::from_bytes(&config.to_vec(), &stats) {
            Ok(mut config) => {
                // The first refresh starts on the first tick: Envoy may answer a call inline, and
                // its hooks need this configuration's pointer, which it has only once this returns.
                if let Some(period) = config.tick_period() {
                    config.keep_ticker(Ticker::start(config_envoy, period));
                }
                if config.routes_calls() {
                    config.keep_deadlines(Deadlines::start());
                }
                Box::into_raw(Box::new(config)).cast()
            }
            Err(problem) => {
                log::error!("invalid plugin configuration: {problem}");
                ptr::null()
            }
        }
    })
}

/// # Safety
/// Envoy's pointers for this configuration, on the main thread (rules 5 and 7).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_scheduled(
    config_envoy: HttpFilterConfigEnvoyPtr,
    config: HttpFilterConfigModulePtr,
    _event_id: u64,
) {
    // SAFETY: a live config of ours (rule 5).
    if let Some(config) = unsafe { config_of(config) } {
        guarded_config("a reflection refresh", (), || {
            config.tick(&ConfigHost { config: config_envoy })
        });
    }
}

/// # Safety
/// Envoy's pointers and headers for this configuration's call (rules 1, 3, 5 and 7).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_headers(
    _config_envoy: HttpFilterConfigEnvoyPtr,
    config: HttpFilterConfigModulePtr,
    call: u64,
    headers: *const EnvoyHttpHeader,
    headers_size: usize,
    _end_stream: bool,
) {
    // SAFETY: a live config of ours (rule 5), and Envoy's headers for this hook (rules 1, 3).
    if let (Some(config), headers) = unsafe { (config_of(config), copied_headers(headers, headers_size)) } {
        guarded_config("reading a reflection answer", (), || {
            config.call_heard(call, CallPart::Headers(headers))
        });
    }
}

/// # Safety
/// Envoy's pointers and data for this configuration's call (rules 1, 3, 5 and 7).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_data(
    _config_envoy: HttpFilterConfigEnvoyPtr,
    config: HttpFilterConfigModulePtr,
    call: u64,
    data: *const EnvoyBuffer,
    data_count: usize,
    _end_stream: bool,
) {
    // SAFETY: a live config of ours (rule 5), and Envoy's chunks for this hook (rules 1, 3).
    if let (Some(config), data) = unsafe { (config_of(config), copied_chunks(data, data_count)) } {
        guarded_config("reading a reflection answer", (), || {
            config.call_heard(call, CallPart::Data(&data))
        });
    }
}

/// # Safety
/// Envoy's pointers and trailers for this configuration's call (rules 1, 3, 5 and 7).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_trailers(
    _config_envoy: HttpFilterConfigEnvoyPtr,
    config: HttpFilterConfigModulePtr,
    call: u64,
    trailers: *const EnvoyHttpHeader,
    trailers_size: usize,
) {
    // SAFETY: a live config of ours (rule 5), and Envoy's trailers for this hook (rules 1, 3).
    if let (Some(config), trailers) = unsafe { (config_of(config), copied_headers(trailers, trailers_size)) } {
        guarded_config("reading a reflection answer", (), || {
            config.call_heard(call, CallPart::Trailers(trailers))
        });
    }
}

/// # Safety
/// Envoy's pointers for this configuration, on the main thread (rules 5 and 7).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_complete(
    config_envoy: HttpFilterConfigEnvoyPtr,
    config: HttpFilterConfigModulePtr,
    call: u64,
) {
    // SAFETY: a live config of ours (rule 5).
    if let Some(config) = unsafe { config_of(config) } {
        guarded_config("reading a reflection answer", (), || {
            config.call_ended(&ConfigHost { config: config_envoy }, call, false)
        });
    }
}

/// # Safety
/// Envoy's pointers for this configuration, on the main thread (rules 5 and 7).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_reset(
    config_envoy: HttpFilterConfigEnvoyPtr,
    config: HttpFilterConfigModulePtr,
    call: u64,
    _reason: u32,
) {
    // SAFETY: a live config of ours (rule 5).
    if let Some(config) = unsafe { config_of(config) } {
        guarded_config("reading a reflection answer", (), || {
            config.call_ended(&ConfigHost { config: config_envoy }, call, true)
        });
    }
}

/// # Safety
/// `config` was returned by `on_http_filter_config_new` (rule 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(config: HttpFilterConfigModulePtr) {
    if !config.is_null() {
        // SAFETY: the Box made in `config_new`, given back once (rule 5).
        let config = unsafe { Box::from_raw(config as *mut Config) };
        guarded_config("dropping a configuration", (), || drop(config));
    }
}

// ---- Streams ----

/// # Safety
/// `config` was returned by `on_http_filter_config_new` and outlives the filter (rule 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_new(
    config: HttpFilterConfigModulePtr,
    _filter: HttpFilterEnvoyPtr,
) -> HttpFilterModulePtr {
    if config.is_null() {
        return ptr::null();
    }
    // SAFETY: a live config, kept by Envoy until every filter from it is gone (rule 5).
    let config: &'static Config = unsafe { &*(config as *const Config) };
    // Null on a panic: every hook then lets the stream be.
    guarded_config("starting a request", ptr::null(), || {
        Box::into_raw(Box::new(Exchange::new(config))).cast()
    })
}

/// # Safety
/// `module` was returned by `on_http_filter_new` (rule 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_destroy(module: HttpFilterModulePtr) {
    if !module.is_null() {
        // SAFETY: the Box made in `filter_new`, given back once (rule 5).
        let exchange = unsafe { Box::from_raw(module as *mut Exchange) };
        guarded_config("ending a request", (), || drop(exchange));
    }
}

/// The verdict of a hook, as its status for Envoy.
fn headers_status(verdict: Verdict) -> u32 {
    match verdict {
        Verdict::Continue => HEADERS_CONTINUE,
        Verdict::Stop | Verdict::Buffer | Verdict::Drop => HEADERS_STOP_ITERATION,
    }
}

fn body_status(verdict: Verdict) -> u32 {
    match verdict {
        Verdict::Continue => BODY_CONTINUE,
        Verdict::Buffer | Verdict::Stop => BODY_STOP_AND_BUFFER,
        Verdict::Drop => BODY_STOP_NO_BUFFER,
    }
}

fn trailers_status(verdict: Verdict) -> u32 {
    match verdict {
        Verdict::Continue => TRAILERS_CONTINUE,
        _ => TRAILERS_STOP,
    }
}

/// # Safety
/// Envoy's pointers for this stream (rules 4 and 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_request_headers(
    filter: HttpFilterEnvoyPtr,
    module: HttpFilterModulePtr,
    end_of_stream: bool,
) -> u32 {
    // SAFETY: null or a live filter of ours (rule 5).
    let exchange = unsafe { exchange(module) };
    headers_status(guarded(
        filter,
        exchange,
        "reading the request headers",
        Verdict::Continue,
        |exchange, stream| exchange.request_headers(stream, end_of_stream),
    ))
}

/// # Safety
/// Envoy's pointers for this stream (rules 4 and 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_request_body(
    filter: HttpFilterEnvoyPtr,
    module: HttpFilterModulePtr,
    end_of_stream: bool,
) -> u32 {
    // SAFETY: null or a live filter of ours (rule 5).
    let exchange = unsafe { exchange(module) };
    body_status(guarded(
        filter,
        exchange,
        "reading the request body",
        Verdict::Continue,
        |exchange, stream| exchange.request_body(stream, end_of_stream),
    ))
}

/// # Safety
/// Envoy's pointers for this stream (rules 4 and 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_request_trailers(
    filter: HttpFilterEnvoyPtr,
    module: HttpFilterModulePtr,
) -> u32 {
    // SAFETY: null or a live filter of ours (rule 5).
    let exchange = unsafe { exchange(module) };
    trailers_status(guarded(
        filter,
        exchange,
        "reading the request trailers",
        Verdict::Continue,
        |exchange, stream| exchange.request_trailers(stream),
    ))
}

/// # Safety
/// Envoy's pointers for this stream (rules 4 and 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_response_headers(
    filter: HttpFilterEnvoyPtr,
    module: HttpFilterModulePtr,
    end_of_stream: bool,
) -> u32 {
    // SAFETY: null or a live filter of ours (rule 5).
    let exchange = unsafe { exchange(module) };
    headers_status(guarded(
        filter,
        exchange,
        "reading the response headers",
        Verdict::Continue,
        |exchange, stream| exchange.response_headers(stream, end_of_stream),
    ))
}

/// # Safety
/// Envoy's pointers for this stream (rules 4 and 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_response_body(
    filter: HttpFilterEnvoyPtr,
    module: HttpFilterModulePtr,
    end_of_stream: bool,
) -> u32 {
    // SAFETY: null or a live filter of ours (rule 5).
    let exchange = unsafe { exchange(module) };
    body_status(guarded(
        filter,
        exchange,
        "reading the response body",
        Verdict::Continue,
        |exchange, stream| exchange.response_body(stream, end_of_stream),
    ))
}

/// # Safety
/// Envoy's pointers for this stream (rules 4 and 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_response_trailers(
    filter: HttpFilterEnvoyPtr,
    module: HttpFilterModulePtr,
) -> u32 {
    // SAFETY: null or a live filter of ours (rule 5).
    let exchange = unsafe { exchange(module) };
    trailers_status(guarded(
        filter,
        exchange,
        "reading the response trailers",
        Verdict::Continue,
        |exchange, stream| exchange.response_trailers(stream),
    ))
}

/// # Safety
/// Envoy's pointers for this stream (rules 4 and 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_stream_complete(
    _filter: HttpFilterEnvoyPtr,
    _module: HttpFilterModulePtr,
) {
}

/// # Safety
/// Envoy's pointers and headers for this stream and call (rules 1, 3, 4 and 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_headers(
    filter: HttpFilterEnvoyPtr,
    module: HttpFilterModulePtr,
    call: u64,
    headers: *const EnvoyHttpHeader,
    headers_size: usize,
    _end_stream: bool,
) {
    // SAFETY: null or a live filter of ours (rule 5), and Envoy's headers for this hook
    // (rules 1, 3).
    let (exchange, headers) = unsafe { (exchange(module), copied_headers(headers, headers_size)) };
    guarded(filter, exchange, "reading a call's answer", (), |exchange, _| {
        exchange.call_heard(call, CallPart::Headers(headers))
    });
}

/// # Safety
/// Envoy's pointers and data for this stream and call (rules 1, 3, 4 and 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_data(
    filter: HttpFilterEnvoyPtr,
    module: HttpFilterModulePtr,
    call: u64,
    data: *const EnvoyBuffer,
    data_count: usize,
    _end_stream: bool,
) {
    // SAFETY: null or a live filter of ours (rule 5), and Envoy's chunks for this hook
    // (rules 1, 3).
    let (exchange, data) = unsafe { (exchange(module), copied_chunks(data, data_count)) };
    guarded(filter, exchange, "reading a call's answer", (), |exchange, _| {
        exchange.call_heard(call, CallPart::Data(&data))
    });
}

/// # Safety
/// Envoy's pointers and trailers for this stream and call (rules 1, 3, 4 and 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_trailers(
    filter: HttpFilterEnvoyPtr,
    module: HttpFilterModulePtr,
    call: u64,
    trailers: *const EnvoyHttpHeader,
    trailers_size: usize,
) {
    // SAFETY: null or a live filter of ours (rule 5), and Envoy's trailers for this hook
    // (rules 1, 3).
    let (exchange, trailers) = unsafe { (exchange(module), copied_headers(trailers, trailers_size)) };
    guarded(filter, exchange, "reading a call's answer", (), |exchange, _| {
        exchange.call_heard(call, CallPart::Trailers(trailers))
    });
}

/// # Safety
/// Envoy's pointers for this stream (rules 4 and 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_complete(
    filter: HttpFilterEnvoyPtr,
    module: HttpFilterModulePtr,
    call: u64,
) {
    // SAFETY: null or a live filter of ours (rule 5).
    let exchange = unsafe { exchange(module) };
    guarded(filter, exchange, "finishing a call", (), |exchange, stream| {
        exchange.call_ended(stream, call, false)
    });
}

/// # Safety
/// Envoy's pointers for this stream (rules 4 and 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_reset(
    filter: HttpFilterEnvoyPtr,
    module: HttpFilterModulePtr,
    call: u64,
    _reason: u32,
) {
    // SAFETY: null or a live filter of ours (rule 5).
    let exchange = unsafe { exchange(module) };
    guarded(filter, exchange, "finishing a call", (), |exchange, stream| {
        exchange.call_ended(stream, call, true)
    });
}

/// # Safety
/// Envoy's pointers for this stream (rules 4, 5 and 8).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_scheduled(
    filter: HttpFilterEnvoyPtr,
    module: HttpFilterModulePtr,
    event_id: u64,
) {
    // SAFETY: null or a live filter of ours (rule 5).
    let exchange = unsafe { exchange(module) };
    guarded(
        filter,
        exchange,
        "answering a routed call past its deadline",
        (),
        |exchange, stream| exchange.wake(stream, event_id),
    );
}

// Hooks every HTTP module must export, which this one does not use.

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_callout_done(
    _filter: HttpFilterEnvoyPtr,
    _module: HttpFilterModulePtr,
    _callout_id: u64,
    _result: u32,
    _headers: *const EnvoyHttpHeader,
    _headers_size: usize,
    _body_chunks: *const EnvoyBuffer,
    _body_chunks_size: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark(
    _filter: HttpFilterEnvoyPtr,
    _module: HttpFilterModulePtr,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark(
    _filter: HttpFilterEnvoyPtr,
    _module: HttpFilterModulePtr,
) {
}

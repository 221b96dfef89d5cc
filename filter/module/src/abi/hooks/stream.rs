//! The hooks of one HTTP stream: made and destroyed, its request and response, the answers to
//! the calls it started, and its wake-ups.

use std::ptr;

use switchblade_core::host_api::CallPart;

use super::{exchange, guarded, guarded_config};
use crate::abi::bindings::{
    copied_chunks, copied_headers, EnvoyBuffer, EnvoyHttpHeader, HttpFilterConfigModulePtr, HttpFilterEnvoyPtr,
    HttpFilterModulePtr,
};
use crate::config::Config;
use crate::exchange::{Exchange, HookStatus};

// Statuses returned to Envoy: its own Filter*Status values.
const HEADERS_CONTINUE: u32 = 0;
const HEADERS_STOP_ITERATION: u32 = 1;
const BODY_CONTINUE: u32 = 0;
const BODY_STOP_AND_BUFFER: u32 = 1;
const BODY_STOP_NO_BUFFER: u32 = 3;
const TRAILERS_CONTINUE: u32 = 0;
const TRAILERS_STOP: u32 = 1;

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

/// A hook's status, as the number Envoy reads.
fn headers_status(status: HookStatus) -> u32 {
    match status {
        HookStatus::Continue => HEADERS_CONTINUE,
        HookStatus::Stop | HookStatus::Buffer | HookStatus::Drop => HEADERS_STOP_ITERATION,
    }
}

fn body_status(status: HookStatus) -> u32 {
    match status {
        HookStatus::Continue => BODY_CONTINUE,
        HookStatus::Buffer | HookStatus::Stop => BODY_STOP_AND_BUFFER,
        HookStatus::Drop => BODY_STOP_NO_BUFFER,
    }
}

fn trailers_status(status: HookStatus) -> u32 {
    match status {
        HookStatus::Continue => TRAILERS_CONTINUE,
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
        HookStatus::Continue,
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
        HookStatus::Continue,
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
        HookStatus::Continue,
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
        HookStatus::Continue,
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
        HookStatus::Continue,
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
        HookStatus::Continue,
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
    guarded(filter, exchange, "reading a call's answer", (), |exchange, stream| {
        exchange.call_heard(stream, call, CallPart::Headers(headers))
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
    guarded(filter, exchange, "reading a call's answer", (), |exchange, stream| {
        exchange.call_heard(stream, call, CallPart::Data(&data))
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
    guarded(filter, exchange, "reading a call's answer", (), |exchange, stream| {
        exchange.call_heard(stream, call, CallPart::Trailers(trailers))
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
        "a wake-up (a routed call past its deadline, or a cancellation)",
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

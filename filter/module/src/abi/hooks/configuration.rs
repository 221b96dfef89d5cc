//! The hooks of the module and its configurations: program init, a configuration made and
//! destroyed, its clock, and the answers to its own calls (reflection).

use std::ffi::c_char;
use std::ptr;

use switchblade_core::host_api::CallPart;

use super::{config_of, guarded_config};
use crate::abi::bindings::{
    copied_chunks, copied_headers, EnvoyBuffer, EnvoyHttpHeader, HttpFilterConfigEnvoyPtr, HttpFilterConfigModulePtr,
};
use crate::abi::clocks::{Ticker, Wakeups};
use crate::abi::configuration::{ConfigHost, ConfigStats, LOGGER};
use crate::config::Config;

/// The ABI version this module was written against (`ENVOY_DYNAMIC_MODULES_ABI_VERSION`).
const ABI_VERSION: &[u8] = b"v0.2.0\0";

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
                if let Some(period) = config.served.refresh_period() {
                    config.keep_ticker(Ticker::start(config_envoy, period));
                }
                config.keep_wakeups(Wakeups::start());
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
            config.served.heard(call, CallPart::Headers(headers))
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
            config.served.heard(call, CallPart::Data(&data))
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
            config.served.heard(call, CallPart::Trailers(trailers))
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

//! Envoy's dynamic-module C ABI, as far as this module uses it, and every `unsafe` of the
//! crate. Written from `source/extensions/dynamic_modules/abi/abi.h` of Envoy's 1.40 cycle (ABI
//! version "v0.2.0"); the symbols referenced here are all present in the 1.40.0 binary, which
//! loads modules with `RTLD_NOW`, so a missing one would refuse the module at load.
//!
//! Above this module the crate is safe Rust: the exported hooks turn Envoy's pointers into a
//! [`Stream`] (one HTTP stream, valid for one hook) and the filter's own state, and catch
//! panics, which must not cross the C boundary (one would take Envoy down).
//!
//! The rules the `unsafe` code relies on, from the ABI's documentation:
//! 1. Envoy-owned memory a callback hands out (`EnvoyBuffer`, `EnvoyHttpHeader`) is valid
//!    until the hook returns or the same map or buffer is changed; it is copied at once.
//! 2. Module memory passed in (`ModuleBuffer`, `ModuleHttpHeader`) is copied by Envoy during
//!    the call; it need only outlive the call.
//! 3. Arrays Envoy fills are sized by the matching `*_size` call in the same hook, just before.
//! 4. `HttpFilterEnvoyPtr` is valid from `on_http_filter_new` to `on_http_filter_destroy`, on
//!    the stream's worker thread only; it never leaves a hook.
//! 5. The pointer returned by `on_http_filter_config_new` is ours until
//!    `on_http_filter_config_destroy`, which Envoy calls after every filter made from it is
//!    destroyed; the one returned by `on_http_filter_new` likewise until
//!    `on_http_filter_destroy`. Both are `Box`es turned into pointers, and back exactly once.
//! 6. The hooks of one stream run on one thread, never at the same time, but may nest (a local
//!    reply runs other filters inline); the stream's state is borrowed only for the length of
//!    a hook's own work, never across a callback that can call back.
//! 7. `HttpFilterConfigEnvoyPtr` is valid from `on_http_filter_config_new` to
//!    `on_http_filter_config_destroy`, on the main thread only: the configuration's own calls
//!    (streams, counters) are made from its hooks there (`config_new`, `config_scheduled`, the
//!    `config_http_stream_*` hooks). A config scheduler may be committed from any thread until
//!    it is deleted; the thread that commits is joined before it is.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use switchblade_core::http::HttpResponse;
use switchblade_core::observe::MetricKind;

use crate::filter::{Config, Exchange, Verdict};

/// The ABI version this module was written against (`ENVOY_DYNAMIC_MODULES_ABI_VERSION`).
const ABI_VERSION: &[u8] = b"v0.2.0\0";

type HttpFilterConfigEnvoyPtr = *mut c_void;
type HttpFilterConfigModulePtr = *const c_void;
type HttpFilterEnvoyPtr = *mut c_void;
type HttpFilterModulePtr = *const c_void;

/// Envoy-owned bytes (rule 1).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct EnvoyBuffer {
    ptr: *const u8,
    length: usize,
}

/// Module-owned bytes (rule 2).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ModuleBuffer {
    ptr: *const u8,
    length: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct EnvoyHttpHeader {
    key_ptr: *const u8,
    key_length: usize,
    value_ptr: *const u8,
    value_length: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ModuleHttpHeader {
    key_ptr: *const u8,
    key_length: usize,
    value_ptr: *const u8,
    value_length: usize,
}

/// (name, value) pairs as Envoy reads headers and metadata entries from a module (rule 2: they
/// borrow `pairs`, which must outlive the call they are passed to).
fn module_pairs(pairs: &[(&str, &str)]) -> Vec<ModuleHttpHeader> {
    pairs
        .iter()
        .map(|(name, value)| ModuleHttpHeader {
            key_ptr: name.as_ptr(),
            key_length: name.len(),
            value_ptr: value.as_ptr(),
            value_length: value.len(),
        })
        .collect()
}

impl ModuleBuffer {
    fn of(bytes: &[u8]) -> Self {
        ModuleBuffer {
            ptr: bytes.as_ptr(),
            length: bytes.len(),
        }
    }
}

impl EnvoyBuffer {
    const EMPTY: EnvoyBuffer = EnvoyBuffer {
        ptr: ptr::null(),
        length: 0,
    };

    /// A copy of the bytes (rule 1).
    fn to_vec(self) -> Vec<u8> {
        if self.ptr.is_null() || self.length == 0 {
            return Vec::new();
        }
        // SAFETY: Envoy hands out `length` readable bytes at `ptr`, valid for this hook (rule 1).
        unsafe { std::slice::from_raw_parts(self.ptr, self.length) }.to_vec()
    }
}

/// Which header map a header callback acts on.
#[derive(Clone, Copy)]
#[repr(u32)]
pub enum HeaderMap {
    Request = 0,
    Response = 2,
    ResponseTrailers = 3,
}

/// Which body a body callback acts on: the chunk of the current hook, or what Envoy buffered.
#[derive(Clone, Copy)]
#[repr(u32)]
pub enum Body {
    ReceivedRequest = 0,
    BufferedRequest = 1,
    ReceivedResponse = 2,
    BufferedResponse = 3,
}

// Statuses returned to Envoy: its own Filter*Status values.
const HEADERS_CONTINUE: u32 = 0;
const HEADERS_STOP_ITERATION: u32 = 1;
const BODY_CONTINUE: u32 = 0;
const BODY_STOP_AND_BUFFER: u32 = 1;
const BODY_STOP_NO_BUFFER: u32 = 3;
const TRAILERS_CONTINUE: u32 = 0;
const TRAILERS_STOP: u32 = 1;
const CALLOUT_SUCCESS: u32 = 0;
const LOG_LEVELS: [log::Level; 5] = [
    log::Level::Trace,
    log::Level::Debug,
    log::Level::Info,
    log::Level::Warn,
    log::Level::Error,
];

extern "C" {
    fn envoy_dynamic_module_callback_log(level: u32, message: ModuleBuffer);
    fn envoy_dynamic_module_callback_http_get_header(
        filter: HttpFilterEnvoyPtr,
        header_type: u32,
        key: ModuleBuffer,
        result: *mut EnvoyBuffer,
        index: usize,
        optional_size: *mut usize,
    ) -> bool;
    fn envoy_dynamic_module_callback_http_get_headers_size(filter: HttpFilterEnvoyPtr, header_type: u32) -> usize;
    fn envoy_dynamic_module_callback_http_get_headers(
        filter: HttpFilterEnvoyPtr,
        header_type: u32,
        result_headers: *mut EnvoyHttpHeader,
    ) -> bool;
    fn envoy_dynamic_module_callback_http_set_header(
        filter: HttpFilterEnvoyPtr,
        header_type: u32,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool;
    fn envoy_dynamic_module_callback_http_get_body_chunks_size(filter: HttpFilterEnvoyPtr, body_type: u32) -> usize;
    fn envoy_dynamic_module_callback_http_get_body_chunks(
        filter: HttpFilterEnvoyPtr,
        body_type: u32,
        result_buffer_vector: *mut EnvoyBuffer,
    ) -> bool;
    fn envoy_dynamic_module_callback_http_get_body_size(filter: HttpFilterEnvoyPtr, body_type: u32) -> usize;
    fn envoy_dynamic_module_callback_http_append_body(
        filter: HttpFilterEnvoyPtr,
        body_type: u32,
        data: ModuleBuffer,
    ) -> bool;
    fn envoy_dynamic_module_callback_http_drain_body(
        filter: HttpFilterEnvoyPtr,
        body_type: u32,
        number_of_bytes: usize,
    ) -> bool;
    fn envoy_dynamic_module_callback_http_send_response(
        filter: HttpFilterEnvoyPtr,
        status_code: u32,
        headers_vector: *mut ModuleHttpHeader,
        headers_vector_size: usize,
        body: ModuleBuffer,
        details: ModuleBuffer,
    );
    fn envoy_dynamic_module_callback_http_clear_route_cache(filter: HttpFilterEnvoyPtr);
    fn envoy_dynamic_module_callback_http_filter_start_http_stream(
        filter: HttpFilterEnvoyPtr,
        stream_id_out: *mut u64,
        cluster_name: ModuleBuffer,
        headers: *mut ModuleHttpHeader,
        headers_size: usize,
        body: ModuleBuffer,
        end_stream: bool,
        timeout_milliseconds: u64,
    ) -> u32;
    fn envoy_dynamic_module_callback_http_filter_config_define_counter(
        config: HttpFilterConfigEnvoyPtr,
        name: ModuleBuffer,
        label_names: *mut ModuleBuffer,
        label_names_length: usize,
        counter_id: *mut usize,
    ) -> u32;
    fn envoy_dynamic_module_callback_http_filter_config_define_histogram(
        config: HttpFilterConfigEnvoyPtr,
        name: ModuleBuffer,
        label_names: *mut ModuleBuffer,
        label_names_length: usize,
        histogram_id: *mut usize,
    ) -> u32;
    fn envoy_dynamic_module_callback_http_filter_increment_counter(
        filter: HttpFilterEnvoyPtr,
        id: usize,
        label_values: *mut ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;
    fn envoy_dynamic_module_callback_http_filter_record_histogram_value(
        filter: HttpFilterEnvoyPtr,
        id: usize,
        label_values: *mut ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;
    fn envoy_dynamic_module_callback_http_set_filter_state_bytes(
        filter: HttpFilterEnvoyPtr,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool;
    fn envoy_dynamic_module_callback_http_get_filter_state_bytes(
        filter: HttpFilterEnvoyPtr,
        key: ModuleBuffer,
        result: *mut EnvoyBuffer,
    ) -> bool;
    fn envoy_dynamic_module_callback_http_filter_config_start_http_stream(
        config: HttpFilterConfigEnvoyPtr,
        stream_id_out: *mut u64,
        cluster_name: ModuleBuffer,
        headers: *mut ModuleHttpHeader,
        headers_size: usize,
        body: ModuleBuffer,
        end_stream: bool,
        timeout_milliseconds: u64,
    ) -> u32;
    fn envoy_dynamic_module_callback_http_filter_config_increment_counter(
        config: HttpFilterConfigEnvoyPtr,
        id: usize,
        label_values: *mut ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;
    fn envoy_dynamic_module_callback_http_filter_config_scheduler_new(config: HttpFilterConfigEnvoyPtr) -> *mut c_void;
    fn envoy_dynamic_module_callback_http_filter_config_scheduler_commit(scheduler: *mut c_void, event_id: u64);
    fn envoy_dynamic_module_callback_http_filter_config_scheduler_delete(scheduler: *mut c_void);
}

/// What the metric calls answer when they worked (`envoy_dynamic_module_type_metrics_result`).
const METRICS_SUCCESS: u32 = 0;

/// The configuration being made, for the one moment Envoy lets a module define its stats
/// (during `on_http_filter_config_new`).
pub struct ConfigStats {
    config: HttpFilterConfigEnvoyPtr,
}

impl ConfigStats {
    /// Defines a labeled counter or histogram; its id, or `None` if Envoy refused it.
    pub fn define(&self, kind: MetricKind, name: &str, label_names: &[&str]) -> Option<usize> {
        let mut labels: Vec<ModuleBuffer> = label_names
            .iter()
            .map(|label| ModuleBuffer::of(label.as_bytes()))
            .collect();
        let mut id = 0usize;
        let define = match kind {
            MetricKind::Counter => envoy_dynamic_module_callback_http_filter_config_define_counter,
            MetricKind::Histogram => envoy_dynamic_module_callback_http_filter_config_define_histogram,
        };
        // SAFETY: inside `on_http_filter_config_new`, with its config pointer; every buffer is
        // module memory for the call (rule 2); `id` is written on success.
        let result = unsafe {
            define(
                self.config,
                ModuleBuffer::of(name.as_bytes()),
                labels.as_mut_ptr(),
                labels.len(),
                &mut id,
            )
        };
        (result == METRICS_SUCCESS).then_some(id)
    }
}

/// The configuration's own handle on Envoy, in one of its main-thread hooks (rule 7).
pub struct ConfigHost {
    config: HttpFilterConfigEnvoyPtr,
}

impl ConfigHost {
    /// Starts an HTTP request to `cluster` from the configuration, sent whole: its answer comes
    /// to the `on_http_filter_config_http_stream_*` hooks under the id returned.
    pub fn start_call(
        &self,
        cluster: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        timeout_ms: u64,
    ) -> Result<u64, u32> {
        // SAFETY: the config pointer on the main thread, in one of its hooks (rule 7).
        unsafe {
            start_stream(
                envoy_dynamic_module_callback_http_filter_config_start_http_stream,
                self.config,
                cluster,
                headers,
                body,
                timeout_ms,
            )
        }
    }

    /// Adds to a labeled counter defined for this configuration.
    pub fn increment(&self, id: usize, label_values: &[&str], value: u64) -> bool {
        let mut labels: Vec<ModuleBuffer> = label_values
            .iter()
            .map(|label| ModuleBuffer::of(label.as_bytes()))
            .collect();
        // SAFETY: as above (rules 2 and 7).
        let result = unsafe {
            envoy_dynamic_module_callback_http_filter_config_increment_counter(
                self.config,
                id,
                labels.as_mut_ptr(),
                labels.len(),
                value,
            )
        };
        result == METRICS_SUCCESS
    }
}

/// A config scheduler, which Envoy lets any thread commit (rule 7).
struct Scheduler(*mut c_void);

// SAFETY: Envoy documents the config scheduler's commit as safe from any thread; the pointer is
// deleted only after the one thread that holds it is joined (rule 7).
unsafe impl Send for Scheduler {}
// SAFETY: as for Send: shared between the ticker and its owner, only commit is called through it.
unsafe impl Sync for Scheduler {}

/// A thread that asks Envoy, every `period`, to run `on_http_filter_config_scheduled` on the
/// main thread: the configuration's clock for work of its own (reflection refreshes).
pub struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    scheduler: Arc<Scheduler>,
}

impl Ticker {
    fn start(config: HttpFilterConfigEnvoyPtr, period: Duration) -> Option<Ticker> {
        // SAFETY: the config pointer, inside `on_http_filter_config_new` (rule 7).
        let scheduler = unsafe { envoy_dynamic_module_callback_http_filter_config_scheduler_new(config) };
        if scheduler.is_null() {
            return None;
        }
        let scheduler = Arc::new(Scheduler(scheduler));
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_stop, thread_scheduler) = (Arc::clone(&stop), Arc::clone(&scheduler));
        let thread = std::thread::Builder::new()
            .name("switchblade-tick".into())
            .spawn(move || {
                while !thread_stop.load(Ordering::Acquire) {
                    std::thread::park_timeout(period);
                    if thread_stop.load(Ordering::Acquire) {
                        break;
                    }
                    // SAFETY: the scheduler lives until this thread is joined (rule 7).
                    unsafe { envoy_dynamic_module_callback_http_filter_config_scheduler_commit(thread_scheduler.0, 0) };
                }
            })
            .ok()?;
        Some(Ticker {
            stop,
            thread: Some(thread),
            scheduler,
        })
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
        // SAFETY: the only other holder, the thread, is joined (rule 7).
        unsafe { envoy_dynamic_module_callback_http_filter_config_scheduler_delete(self.scheduler.0) };
    }
}

/// Envoy's logger (the `dynamic_modules` component), for the `log` macros.
struct EnvoyLog;

static LOGGER: EnvoyLog = EnvoyLog;

impl log::Log for EnvoyLog {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Info
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = LOG_LEVELS
            .iter()
            .position(|level| *level == record.level())
            .unwrap_or(2);
        let message = format!("switchblade: {}", record.args());
        // SAFETY: the message is module memory that lives through the call (rule 2).
        unsafe { envoy_dynamic_module_callback_log(level as u32, ModuleBuffer::of(message.as_bytes())) };
    }

    fn flush(&self) {}
}

/// One HTTP stream, for the length of one hook (rule 4).
pub struct Stream {
    filter: HttpFilterEnvoyPtr,
}

impl Stream {
    /// The first value of a header, as bytes.
    pub fn header(&self, map: HeaderMap, name: &str) -> Option<Vec<u8>> {
        let mut value = EnvoyBuffer::EMPTY;
        // SAFETY: the key is module memory for the call (rule 2); `value` is written by Envoy
        // and copied before the hook returns (rule 1); the size pointer may be null.
        let found = unsafe {
            envoy_dynamic_module_callback_http_get_header(
                self.filter,
                map as u32,
                ModuleBuffer::of(name.as_bytes()),
                &mut value,
                0,
                ptr::null_mut(),
            )
        };
        found.then(|| value.to_vec())
    }

    /// Every header of a map, in order, as owned names and byte values.
    pub fn headers(&self, map: HeaderMap) -> Vec<(String, Vec<u8>)> {
        // SAFETY: a plain query on this stream (rule 4).
        let count = unsafe { envoy_dynamic_module_callback_http_get_headers_size(self.filter, map as u32) };
        if count == 0 {
            return Vec::new();
        }
        let empty = EnvoyHttpHeader {
            key_ptr: ptr::null(),
            key_length: 0,
            value_ptr: ptr::null(),
            value_length: 0,
        };
        let mut headers = vec![empty; count];
        // SAFETY: the array has exactly the size Envoy just gave (rule 3).
        if !unsafe { envoy_dynamic_module_callback_http_get_headers(self.filter, map as u32, headers.as_mut_ptr()) } {
            return Vec::new();
        }
        headers
            .into_iter()
            .map(|header| {
                let name = EnvoyBuffer {
                    ptr: header.key_ptr,
                    length: header.key_length,
                }
                .to_vec();
                let value = EnvoyBuffer {
                    ptr: header.value_ptr,
                    length: header.value_length,
                }
                .to_vec();
                (String::from_utf8_lossy(&name).into_owned(), value)
            })
            .collect()
    }

    /// Sets a header to one value; an empty value removes it (the ABI has no other way).
    pub fn set_header(&self, map: HeaderMap, name: &str, value: &[u8]) -> bool {
        // SAFETY: both buffers are module memory for the call (rule 2).
        unsafe {
            envoy_dynamic_module_callback_http_set_header(
                self.filter,
                map as u32,
                ModuleBuffer::of(name.as_bytes()),
                ModuleBuffer::of(value),
            )
        }
    }

    pub fn remove_header(&self, map: HeaderMap, name: &str) {
        self.set_header(map, name, &[]);
    }

    /// The bytes of a body, copied out of Envoy's chunks.
    pub fn body(&self, body: Body) -> Vec<u8> {
        // SAFETY: a plain query on this stream (rule 4).
        let count = unsafe { envoy_dynamic_module_callback_http_get_body_chunks_size(self.filter, body as u32) };
        if count == 0 {
            return Vec::new();
        }
        let mut chunks = vec![EnvoyBuffer::EMPTY; count];
        // SAFETY: the array has exactly the size Envoy just gave (rule 3).
        if !unsafe { envoy_dynamic_module_callback_http_get_body_chunks(self.filter, body as u32, chunks.as_mut_ptr()) }
        {
            return Vec::new();
        }
        let mut bytes = Vec::with_capacity(chunks.iter().map(|chunk| chunk.length).sum());
        for chunk in chunks {
            bytes.extend_from_slice(&chunk.to_vec());
        }
        bytes
    }

    pub fn body_size(&self, body: Body) -> usize {
        // SAFETY: a plain query on this stream (rule 4).
        unsafe { envoy_dynamic_module_callback_http_get_body_size(self.filter, body as u32) }
    }

    /// Replaces a body: drains it, then appends `bytes`.
    pub fn replace_body(&self, body: Body, bytes: &[u8]) -> bool {
        // SAFETY: draining takes a count (`usize::MAX`: all); the data is module memory for
        // the call (rule 2).
        unsafe {
            envoy_dynamic_module_callback_http_drain_body(self.filter, body as u32, usize::MAX);
            envoy_dynamic_module_callback_http_append_body(self.filter, body as u32, ModuleBuffer::of(bytes))
        }
    }

    pub fn drain_body(&self, body: Body) {
        // SAFETY: draining takes a count (`usize::MAX`: all) (rule 4).
        unsafe { envoy_dynamic_module_callback_http_drain_body(self.filter, body as u32, usize::MAX) };
    }

    /// Answers the request here; the upstream is not contacted (or is reset).
    pub fn send_response(&self, status: u16, headers: &[(&str, &str)], body: &[u8]) {
        let mut headers = module_pairs(headers);
        // SAFETY: the header array, body and details are module memory for the call (rule 2);
        // this may run other filters inline, and no state of ours is borrowed now (rule 6).
        unsafe {
            envoy_dynamic_module_callback_http_send_response(
                self.filter,
                u32::from(status),
                headers.as_mut_ptr(),
                headers.len(),
                ModuleBuffer::of(body),
                ModuleBuffer::of(b"switchblade"),
            );
        }
    }

    /// Adds to a labeled counter, or records a histogram value, with one value per label.
    pub fn record_metric(&self, kind: MetricKind, id: usize, label_values: &[&str], value: u64) -> bool {
        let mut labels: Vec<ModuleBuffer> = label_values
            .iter()
            .map(|label| ModuleBuffer::of(label.as_bytes()))
            .collect();
        let record = match kind {
            MetricKind::Counter => envoy_dynamic_module_callback_http_filter_increment_counter,
            MetricKind::Histogram => envoy_dynamic_module_callback_http_filter_record_histogram_value,
        };
        // SAFETY: a stat defined for this configuration, on this stream (rule 4); the label
        // values are module memory for the call (rule 2).
        let result = unsafe { record(self.filter, id, labels.as_mut_ptr(), labels.len(), value) };
        result == METRICS_SUCCESS
    }

    /// Sets a read-only string in the stream's filter state (for access logs:
    /// `%FILTER_STATE(key:PLAIN)%`). Each key may be set once per stream.
    pub fn set_filter_state(&self, key: &str, value: &str) -> bool {
        // SAFETY: both buffers are module memory for the call (rule 2).
        unsafe {
            envoy_dynamic_module_callback_http_set_filter_state_bytes(
                self.filter,
                ModuleBuffer::of(key.as_bytes()),
                ModuleBuffer::of(value.as_bytes()),
            )
        }
    }

    /// The bytes of a string filter state object (`envoy.string`, as
    /// `envoy.filters.http.set_filter_state` makes them), if the stream has one under `key`.
    pub fn filter_state(&self, key: &str) -> Option<Vec<u8>> {
        let mut value = EnvoyBuffer::EMPTY;
        // SAFETY: the key is module memory for the call (rule 2); `value` is written by Envoy
        // and copied before the hook returns (rule 1).
        let found = unsafe {
            envoy_dynamic_module_callback_http_get_filter_state_bytes(
                self.filter,
                ModuleBuffer::of(key.as_bytes()),
                &mut value,
            )
        };
        found.then(|| value.to_vec())
    }

    pub fn clear_route_cache(&self) {
        // SAFETY: a plain action on this stream, in the request path (rule 4).
        unsafe { envoy_dynamic_module_callback_http_clear_route_cache(self.filter) };
    }

    /// Starts an HTTP request to `cluster`, sent whole: its answer comes in parts (headers,
    /// data, trailers, then complete, or a reset) to the `on_http_filter_http_stream_*` hooks,
    /// under the id returned. (The one-shot callout hands over no trailers, where gRPC puts
    /// its status.)
    pub fn start_call(
        &self,
        cluster: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        timeout_ms: u64,
    ) -> Result<u64, u32> {
        // SAFETY: this stream's pointer, in one of its hooks (rule 4).
        unsafe {
            start_stream(
                envoy_dynamic_module_callback_http_filter_start_http_stream,
                self.filter,
                cluster,
                headers,
                body,
                timeout_ms,
            )
        }
    }
}

/// Envoy's two ways to start an HTTP stream, from a stream or from a configuration: the same
/// shape, with the owner's pointer first.
type StartStream = unsafe extern "C" fn(
    *mut c_void,
    *mut u64,
    ModuleBuffer,
    *mut ModuleHttpHeader,
    usize,
    ModuleBuffer,
    bool,
    u64,
) -> u32;

/// Starts an HTTP request to `cluster`, sent whole (end of stream with the body); the id its
/// answer comes back under, or Envoy's callout result.
///
/// # Safety
/// `owner` is the pointer `start` takes, valid here (rules 4 and 7).
unsafe fn start_stream(
    start: StartStream,
    owner: *mut c_void,
    cluster: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout_ms: u64,
) -> Result<u64, u32> {
    let mut headers = module_pairs(headers);
    let mut id = 0u64;
    // SAFETY: `owner` by the caller's contract; every buffer is module memory for the call
    // (rule 2); `id` is written on success.
    let result = unsafe {
        start(
            owner,
            &mut id,
            ModuleBuffer::of(cluster.as_bytes()),
            headers.as_mut_ptr(),
            headers.len(),
            ModuleBuffer::of(body),
            true,
            timeout_ms,
        )
    };
    if result == CALLOUT_SUCCESS {
        Ok(id)
    } else {
        Err(result)
    }
}

/// Copies of headers Envoy hands over (rules 1 and 3); none for a null pointer.
///
/// # Safety
/// `headers` is null or points at `count` headers valid for this hook.
unsafe fn copied_headers(headers: *const EnvoyHttpHeader, count: usize) -> Vec<(String, Vec<u8>)> {
    if headers.is_null() {
        return Vec::new();
    }
    // SAFETY: by the caller's contract (rules 1 and 3).
    unsafe { std::slice::from_raw_parts(headers, count) }
        .iter()
        .map(|header| {
            let name = EnvoyBuffer {
                ptr: header.key_ptr,
                length: header.key_length,
            }
            .to_vec();
            let value = EnvoyBuffer {
                ptr: header.value_ptr,
                length: header.value_length,
            }
            .to_vec();
            (String::from_utf8_lossy(&name).into_owned(), value)
        })
        .collect()
}

/// Copies of the bytes of body chunks Envoy hands over (rules 1 and 3).
///
/// # Safety
/// `chunks` is null or points at `count` buffers valid for this hook.
unsafe fn copied_chunks(chunks: *const EnvoyBuffer, count: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    if !chunks.is_null() {
        // SAFETY: by the caller's contract (rules 1 and 3).
        for chunk in unsafe { std::slice::from_raw_parts(chunks, count) } {
            bytes.extend_from_slice(&chunk.to_vec());
        }
    }
    bytes
}

/// Runs a hook's work with panics caught, so that none crosses into Envoy: a panic is logged
/// and the request answered with a JSON-RPC internal error (or reset, if its answer has begun).
fn guarded<T>(stream: &Stream, what: &str, fallback: T, work: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(work)) {
        Ok(value) => value,
        Err(_) => {
            log::error!("{what} failed unexpectedly; the request is answered with an internal error");
            let response = HttpResponse::internal_error();
            stream.send_response(response.status, &response.headers, &response.body);
            fallback
        }
    }
}

/// Runs the configuration's work with panics caught: a configuration that panics is refused.
fn guarded_config<T>(fallback: T, work: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|_| {
        log::error!("loading the configuration failed unexpectedly; it is refused");
        fallback
    })
}

/// The filter state behind a module pointer (rule 5).
///
/// # Safety
/// `filter` must be a pointer returned by `on_http_filter_new` and not yet destroyed.
unsafe fn exchange<'a>(filter: HttpFilterModulePtr) -> &'a Exchange {
    // SAFETY: by the caller's contract, a live `Box<Exchange>` (rule 5).
    unsafe { &*(filter as *const Exchange) }
}

// ---- Hooks Envoy calls ----

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_program_init() -> *const c_char {
    // Already set when Envoy loads the module a second time in one process: nothing to do.
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
    ABI_VERSION.as_ptr().cast()
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
    guarded_config(ptr::null(), || match Config::from_bytes(&config.to_vec(), &stats) {
        Ok(mut config) => {
            // The first refresh starts on the first tick: Envoy may answer a call inline, and
            // its hooks need this configuration's pointer, which it has only once this returns.
            if let Some(period) = config.tick_period() {
                config.keep_ticker(Ticker::start(config_envoy, period));
            }
            Box::into_raw(Box::new(config)).cast()
        }
        Err(problem) => {
            log::error!("invalid plugin configuration: {problem}");
            ptr::null()
        }
    })
}

/// The configuration behind a module pointer (rule 5).
///
/// # Safety
/// `config` must be a pointer returned by `on_http_filter_config_new` and not yet destroyed.
unsafe fn config_of<'a>(config: HttpFilterConfigModulePtr) -> Option<&'a Config> {
    // SAFETY: by the caller's contract, null or a live `Box<Config>` (rule 5).
    unsafe { (config as *const Config).as_ref() }
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
        guarded_config((), || config.tick(&ConfigHost { config: config_envoy }));
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
        guarded_config((), || config.call_headers(call, headers));
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
        guarded_config((), || config.call_data(call, &data));
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
        guarded_config((), || config.call_trailers(call, trailers));
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
        guarded_config((), || {
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
        guarded_config((), || {
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
        drop(unsafe { Box::from_raw(config as *mut Config) });
    }
}

/// # Safety
/// `config` was returned by `on_http_filter_config_new` and outlives the filter (rule 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_new(
    config: HttpFilterConfigModulePtr,
    _filter: HttpFilterEnvoyPtr,
) -> HttpFilterModulePtr {
    // SAFETY: a live config, kept by Envoy until every filter from it is gone (rule 5).
    let config: &'static Config = unsafe { &*(config as *const Config) };
    Box::into_raw(Box::new(Exchange::new(config))).cast()
}

/// # Safety
/// `module` was returned by `on_http_filter_new` (rule 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_destroy(module: HttpFilterModulePtr) {
    if !module.is_null() {
        // SAFETY: the Box made in `filter_new`, given back once (rule 5).
        drop(unsafe { Box::from_raw(module as *mut Exchange) });
    }
}

/// The verdict of a hook, as its status for Envoy, after a local reply if the filter asked.
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
    let stream = Stream { filter };
    // SAFETY: a live filter of ours (rule 5).
    let exchange = unsafe { exchange(module) };
    headers_status(guarded(&stream, "reading the request headers", Verdict::Drop, || {
        exchange.request_headers(&stream, end_of_stream)
    }))
}

/// # Safety
/// Envoy's pointers for this stream (rules 4 and 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_request_body(
    filter: HttpFilterEnvoyPtr,
    module: HttpFilterModulePtr,
    end_of_stream: bool,
) -> u32 {
    let stream = Stream { filter };
    // SAFETY: a live filter of ours (rule 5).
    let exchange = unsafe { exchange(module) };
    body_status(guarded(&stream, "reading the request body", Verdict::Drop, || {
        exchange.request_body(&stream, end_of_stream)
    }))
}

/// # Safety
/// Envoy's pointers for this stream (rules 4 and 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_request_trailers(
    filter: HttpFilterEnvoyPtr,
    module: HttpFilterModulePtr,
) -> u32 {
    let stream = Stream { filter };
    // SAFETY: a live filter of ours (rule 5).
    let exchange = unsafe { exchange(module) };
    trailers_status(guarded(&stream, "reading the request trailers", Verdict::Drop, || {
        exchange.request_trailers(&stream)
    }))
}

/// # Safety
/// Envoy's pointers for this stream (rules 4 and 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_response_headers(
    filter: HttpFilterEnvoyPtr,
    module: HttpFilterModulePtr,
    end_of_stream: bool,
) -> u32 {
    let stream = Stream { filter };
    // SAFETY: a live filter of ours (rule 5).
    let exchange = unsafe { exchange(module) };
    headers_status(guarded(&stream, "reading the response headers", Verdict::Drop, || {
        exchange.response_headers(&stream, end_of_stream)
    }))
}

/// # Safety
/// Envoy's pointers for this stream (rules 4 and 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_response_body(
    filter: HttpFilterEnvoyPtr,
    module: HttpFilterModulePtr,
    end_of_stream: bool,
) -> u32 {
    let stream = Stream { filter };
    // SAFETY: a live filter of ours (rule 5).
    let exchange = unsafe { exchange(module) };
    body_status(guarded(&stream, "reading the response body", Verdict::Drop, || {
        exchange.response_body(&stream, end_of_stream)
    }))
}

/// # Safety
/// Envoy's pointers for this stream (rules 4 and 5).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_response_trailers(
    filter: HttpFilterEnvoyPtr,
    module: HttpFilterModulePtr,
) -> u32 {
    let stream = Stream { filter };
    // SAFETY: a live filter of ours (rule 5).
    let exchange = unsafe { exchange(module) };
    trailers_status(guarded(&stream, "reading the response trailers", Verdict::Drop, || {
        exchange.response_trailers(&stream)
    }))
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
    let stream = Stream { filter };
    // SAFETY: a live filter of ours (rule 5), and Envoy's headers for this hook (rules 1, 3).
    let (exchange, headers) = unsafe { (exchange(module), copied_headers(headers, headers_size)) };
    guarded(&stream, "reading a call's answer", (), || {
        exchange.call_headers(call, headers)
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
    let stream = Stream { filter };
    // SAFETY: a live filter of ours (rule 5), and Envoy's chunks for this hook (rules 1, 3).
    let (exchange, data) = unsafe { (exchange(module), copied_chunks(data, data_count)) };
    guarded(&stream, "reading a call's answer", (), || {
        exchange.call_data(call, &data)
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
    let stream = Stream { filter };
    // SAFETY: a live filter of ours (rule 5), and Envoy's trailers for this hook (rules 1, 3).
    let (exchange, trailers) = unsafe { (exchange(module), copied_headers(trailers, trailers_size)) };
    guarded(&stream, "reading a call's answer", (), || {
        exchange.call_trailers(call, trailers)
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
    let stream = Stream { filter };
    // SAFETY: a live filter of ours (rule 5).
    let exchange = unsafe { exchange(module) };
    guarded(&stream, "finishing a call", (), || {
        exchange.call_ended(&stream, call, false)
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
    let stream = Stream { filter };
    // SAFETY: a live filter of ours (rule 5).
    let exchange = unsafe { exchange(module) };
    guarded(&stream, "finishing a call", (), || {
        exchange.call_ended(&stream, call, true)
    });
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
pub extern "C" fn envoy_dynamic_module_on_http_filter_scheduled(
    _filter: HttpFilterEnvoyPtr,
    _module: HttpFilterModulePtr,
    _event_id: u64,
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

//! The callbacks Envoy exports, as far as the module uses them, and the safe types around
//! them. The rules every `unsafe` here cites are in the module's documentation ([`super`]).

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use switchblade_core::observe::MetricKind;

use crate::host::{Alarm, Body, HeaderMap, StatsHost, StreamHost};

pub(super) type HttpFilterConfigEnvoyPtr = *mut c_void;
pub(super) type HttpFilterConfigModulePtr = *const c_void;
pub(super) type HttpFilterEnvoyPtr = *mut c_void;
pub(super) type HttpFilterModulePtr = *const c_void;

/// Envoy-owned bytes (rule 1).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct EnvoyBuffer {
    pub(super) ptr: *const u8,
    pub(super) length: usize,
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
    pub(super) fn of(bytes: &[u8]) -> Self {
        ModuleBuffer {
            ptr: bytes.as_ptr(),
            length: bytes.len(),
        }
    }
}

impl EnvoyBuffer {
    pub(super) const EMPTY: EnvoyBuffer = EnvoyBuffer {
        ptr: ptr::null(),
        length: 0,
    };

    /// A copy of the bytes (rule 1).
    pub(super) fn to_vec(self) -> Vec<u8> {
        if self.ptr.is_null() || self.length == 0 {
            return Vec::new();
        }
        // SAFETY: Envoy hands out `length` readable bytes at `ptr`, valid for this hook (rule 1).
        unsafe { std::slice::from_raw_parts(self.ptr, self.length) }.to_vec()
    }
}

/// The ABI's number for a header map (`envoy_dynamic_module_type_http_header_type`).
fn header_type(map: HeaderMap) -> u32 {
    match map {
        HeaderMap::Request => 0,
        HeaderMap::RequestTrailers => 1,
        HeaderMap::Response => 2,
        HeaderMap::ResponseTrailers => 3,
    }
}

/// The ABI's number for a body (`envoy_dynamic_module_type_http_body_type`).
fn body_type(body: Body) -> u32 {
    match body {
        Body::ReceivedRequest => 0,
        Body::BufferedRequest => 1,
        Body::ReceivedResponse => 2,
        Body::BufferedResponse => 3,
    }
}

const CALLOUT_SUCCESS: u32 = 0;
/// `envoy_dynamic_module_type_http_filter_stream_reset_reason_LocalReset`.
const LOCAL_RESET: u32 = 0;
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
    fn envoy_dynamic_module_callback_http_filter_reset_stream(
        filter: HttpFilterEnvoyPtr,
        reason: u32,
        details: ModuleBuffer,
    );
    fn envoy_dynamic_module_callback_http_filter_scheduler_new(filter: HttpFilterEnvoyPtr) -> *mut c_void;
    fn envoy_dynamic_module_callback_http_filter_scheduler_commit(scheduler: *mut c_void, event_id: u64);
    fn envoy_dynamic_module_callback_http_filter_scheduler_delete(scheduler: *mut c_void);
}

/// What the metric calls answer when they worked (`envoy_dynamic_module_type_metrics_result`).
const METRICS_SUCCESS: u32 = 0;

/// The configuration being made, for the one moment Envoy lets a module define its stats
/// (during `on_http_filter_config_new`).
pub struct ConfigStats {
    pub(super) config: HttpFilterConfigEnvoyPtr,
}

impl StatsHost for ConfigStats {
    fn define(&self, kind: MetricKind, name: &str, label_names: &[&str]) -> Option<usize> {
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
    pub(super) config: HttpFilterConfigEnvoyPtr,
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
    pub(super) fn start(config: HttpFilterConfigEnvoyPtr, period: Duration) -> Option<Ticker> {
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
pub(super) struct EnvoyLog;

pub(super) static LOGGER: EnvoyLog = EnvoyLog;

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

/// One HTTP stream, for the length of one hook (rule 4), and the clock its configuration keeps
/// for deadlines, if it keeps one.
pub struct Stream {
    pub(super) filter: HttpFilterEnvoyPtr,
    pub(super) deadlines: Option<&'static Deadlines>,
}

impl StreamHost for Stream {
    fn header(&self, map: HeaderMap, name: &str) -> Option<Vec<u8>> {
        let mut value = EnvoyBuffer::EMPTY;
        // SAFETY: the key is module memory for the call (rule 2); `value` is written by Envoy
        // and copied before the hook returns (rule 1); the size pointer may be null.
        let found = unsafe {
            envoy_dynamic_module_callback_http_get_header(
                self.filter,
                header_type(map),
                ModuleBuffer::of(name.as_bytes()),
                &mut value,
                0,
                ptr::null_mut(),
            )
        };
        found.then(|| value.to_vec())
    }

    fn headers(&self, map: HeaderMap) -> Vec<(String, Vec<u8>)> {
        // SAFETY: a plain query on this stream (rule 4).
        let count = unsafe { envoy_dynamic_module_callback_http_get_headers_size(self.filter, header_type(map)) };
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
        if !unsafe {
            envoy_dynamic_module_callback_http_get_headers(self.filter, header_type(map), headers.as_mut_ptr())
        } {
            return Vec::new();
        }
        // SAFETY: Envoy's headers for this hook, just filled in (rules 1 and 3).
        unsafe { copied_headers(headers.as_ptr(), headers.len()) }
    }

    fn set_header(&self, map: HeaderMap, name: &str, value: &[u8]) -> bool {
        // SAFETY: both buffers are module memory for the call (rule 2).
        unsafe {
            envoy_dynamic_module_callback_http_set_header(
                self.filter,
                header_type(map),
                ModuleBuffer::of(name.as_bytes()),
                ModuleBuffer::of(value),
            )
        }
    }

    fn body(&self, body: Body) -> Vec<u8> {
        // SAFETY: a plain query on this stream (rule 4).
        let count = unsafe { envoy_dynamic_module_callback_http_get_body_chunks_size(self.filter, body_type(body)) };
        if count == 0 {
            return Vec::new();
        }
        let mut chunks = vec![EnvoyBuffer::EMPTY; count];
        // SAFETY: the array has exactly the size Envoy just gave (rule 3).
        if !unsafe {
            envoy_dynamic_module_callback_http_get_body_chunks(self.filter, body_type(body), chunks.as_mut_ptr())
        } {
            return Vec::new();
        }
        // SAFETY: Envoy's chunks for this hook, just filled in (rules 1 and 3).
        unsafe { copied_chunks(chunks.as_ptr(), chunks.len()) }
    }

    fn body_size(&self, body: Body) -> usize {
        // SAFETY: a plain query on this stream (rule 4).
        unsafe { envoy_dynamic_module_callback_http_get_body_size(self.filter, body_type(body)) }
    }

    fn replace_body(&self, body: Body, bytes: &[u8]) -> bool {
        // SAFETY: draining takes a count (`usize::MAX`: all); the data is module memory for
        // the call (rule 2).
        unsafe {
            envoy_dynamic_module_callback_http_drain_body(self.filter, body_type(body), usize::MAX);
            envoy_dynamic_module_callback_http_append_body(self.filter, body_type(body), ModuleBuffer::of(bytes))
        }
    }

    fn drain_body(&self, body: Body) {
        // SAFETY: draining takes a count (`usize::MAX`: all) (rule 4).
        unsafe { envoy_dynamic_module_callback_http_drain_body(self.filter, body_type(body), usize::MAX) };
    }

    fn send_response(&self, status: u16, headers: &[(&str, &str)], body: &[u8]) {
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

    fn reset(&self) {
        // SAFETY: a plain action on this stream; the details are module memory (rules 2, 4).
        unsafe {
            envoy_dynamic_module_callback_http_filter_reset_stream(
                self.filter,
                LOCAL_RESET,
                ModuleBuffer::of(b"switchblade_failed"),
            )
        };
    }

    fn record_metric(&self, kind: MetricKind, id: usize, label_values: &[&str], value: u64) -> bool {
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

    /// For access logs: `%FILTER_STATE(key:PLAIN)%`.
    fn set_filter_state(&self, key: &str, value: &str) -> bool {
        // SAFETY: both buffers are module memory for the call (rule 2).
        unsafe {
            envoy_dynamic_module_callback_http_set_filter_state_bytes(
                self.filter,
                ModuleBuffer::of(key.as_bytes()),
                ModuleBuffer::of(value.as_bytes()),
            )
        }
    }

    /// A string object (`envoy.string`, as `envoy.filters.http.set_filter_state` makes them).
    fn filter_state(&self, key: &str) -> Option<Vec<u8>> {
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

    fn clear_route_cache(&self) {
        // SAFETY: a plain action on this stream, in the request path (rule 4).
        unsafe { envoy_dynamic_module_callback_http_clear_route_cache(self.filter) };
    }

    /// The one-shot callout would hand over no trailers, where gRPC puts its status: this is a
    /// stream, its answer in parts (headers, data, trailers, then complete, or a reset).
    fn start_call(&self, cluster: &str, headers: &[(&str, &str)], body: &[u8], timeout_ms: u64) -> Result<u64, u32> {
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

    fn wake_at(&self, when: Instant, event: u64) -> Option<Alarm> {
        let deadlines = self.deadlines?;
        // SAFETY: this stream's pointer, in one of its hooks (rule 4); the scheduler is
        // deleted by the alarm, on this worker (rule 8).
        let scheduler = unsafe { envoy_dynamic_module_callback_http_filter_scheduler_new(self.filter) };
        if scheduler.is_null() {
            return None;
        }
        let scheduler = StreamScheduler(scheduler);
        let key = deadlines.add(when, scheduler, event);
        Some(Alarm(Box::new(DeadlineAlarm {
            deadlines,
            key,
            scheduler,
        })))
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
pub(super) unsafe fn copied_headers(headers: *const EnvoyHttpHeader, count: usize) -> Vec<(String, Vec<u8>)> {
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
pub(super) unsafe fn copied_chunks(chunks: *const EnvoyBuffer, count: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    if !chunks.is_null() {
        // SAFETY: by the caller's contract (rules 1 and 3).
        for chunk in unsafe { std::slice::from_raw_parts(chunks, count) } {
            bytes.extend_from_slice(&chunk.to_vec());
        }
    }
    bytes
}

/// A stream's scheduler: committing it runs the stream's `on_http_filter_scheduled` hook on its
/// worker (rule 8).
#[derive(Clone, Copy)]
struct StreamScheduler(*mut c_void);

// SAFETY: Envoy's stream scheduler may be committed from any thread until it is deleted; it is
// committed only under the deadline queue's lock while its deadline is queued, and deleted on
// the stream's worker after the deadline has left the queue (rule 8).
unsafe impl Send for StreamScheduler {}

/// The deadlines waiting, by when they fall due (and an order of arrival, for ties).
#[derive(Default)]
struct Queue {
    due: BTreeMap<(Instant, u64), (StreamScheduler, u64)>,
    next_key: u64,
    stop: bool,
}

/// The clock of a configuration's routed calls: one thread that commits each stream's scheduler
/// when its deadline falls due. Joined when the configuration goes (rule 8).
pub struct Deadlines {
    shared: Arc<(Mutex<Queue>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Deadlines {
    /// Starts the clock's thread; `None` if it cannot be started.
    pub fn start() -> Option<Deadlines> {
        let shared: Arc<(Mutex<Queue>, Condvar)> = Arc::default();
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("switchblade-deadlines".into())
            .spawn(move || run_deadlines(&thread_shared))
            .ok()?;
        Some(Deadlines {
            shared,
            thread: Some(thread),
        })
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        lock(&self.shared.0)
    }

    /// Queues `scheduler` to be committed with `event` at `when`; the key to cancel it with.
    fn add(&self, when: Instant, scheduler: StreamScheduler, event: u64) -> (Instant, u64) {
        let mut queue = self.queue();
        queue.next_key += 1;
        let key = (when, queue.next_key);
        queue.due.insert(key, (scheduler, event));
        drop(queue);
        self.shared.1.notify_one();
        key
    }

    /// Takes a deadline out of the queue: once this returns, its scheduler is never committed.
    fn cancel(&self, key: (Instant, u64)) {
        self.queue().due.remove(&key);
    }
}

impl Drop for Deadlines {
    fn drop(&mut self) {
        self.queue().stop = true;
        self.shared.1.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A lock that a panic elsewhere does not make unusable: the queue stays consistent (every
/// change to it is a single insert or remove).
fn lock(mutex: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The deadline thread: sleeps until the first deadline, commits it, and so on until stopped.
fn run_deadlines(shared: &(Mutex<Queue>, Condvar)) {
    let (mutex, wake) = shared;
    let mut queue = lock(mutex);
    while !queue.stop {
        let now = Instant::now();
        let Some((&key, _)) = queue.due.first_key_value() else {
            queue = wake.wait(queue).unwrap_or_else(PoisonError::into_inner);
            continue;
        };
        if key.0 > now {
            queue = wake
                .wait_timeout(queue, key.0 - now)
                .map(|(queue, _)| queue)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
            continue;
        }
        if let Some((scheduler, event)) = queue.due.remove(&key) {
            // SAFETY: its deadline was queued until now, and the lock is held: the stream's
            // worker cannot have deleted the scheduler (rule 8).
            unsafe { envoy_dynamic_module_callback_http_filter_scheduler_commit(scheduler.0, event) };
        }
    }
}

/// A queued deadline of one stream, and the scheduler it commits: dropping it (on the stream's
/// worker) takes the deadline out of the queue, then deletes the scheduler (rule 8).
struct DeadlineAlarm {
    deadlines: &'static Deadlines,
    key: (Instant, u64),
    scheduler: StreamScheduler,
}

impl Drop for DeadlineAlarm {
    fn drop(&mut self) {
        self.deadlines.cancel(self.key);
        // SAFETY: the deadline has left the queue, so the thread no longer commits it; this is
        // the one delete of the scheduler made for it (rule 8).
        unsafe { envoy_dynamic_module_callback_http_filter_scheduler_delete(self.scheduler.0) };
    }
}

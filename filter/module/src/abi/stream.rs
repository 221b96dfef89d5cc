//! One HTTP stream as the exchange uses it ([`StreamHost`]), over the callbacks of one hook.

use std::ptr;
use std::time::Instant;

use switchblade_core::host_api::{HeaderCopy, MetricKind};

use super::bindings::*;
use super::clocks::{CancelListener, DeadlineAlarm, StreamScheduler, Wakeups};
use crate::host::{Alarm, Body, HeaderMap, StreamHost};

/// How many headers or body chunks Envoy's answer to a query may hold for the module to take
/// it on the stack; more go on the heap. A request or an answer has a dozen headers or so.
const ON_STACK: usize = 32;

/// Room for `count` entries for Envoy to fill: the first `count` of `on_stack` if it has them,
/// else `on_heap`, made that long.
fn room<'a, T: Copy>(on_stack: &'a mut [T; ON_STACK], on_heap: &'a mut Vec<T>, count: usize, empty: T) -> &'a mut [T] {
    match on_stack.get_mut(..count) {
        Some(room) => room,
        None => {
            on_heap.resize(count, empty);
            on_heap
        }
    }
}

/// One HTTP stream, for the length of one hook (rule 4), and the clock its configuration keeps
/// for its streams' wake-ups, if it keeps them.
pub struct Stream {
    pub(super) filter: HttpFilterEnvoyPtr,
    pub(super) wakeups: Option<&'static Wakeups>,
}

impl Stream {
    /// A scheduler of this stream's, deleted by whoever it is handed to (rule 8).
    fn new_scheduler(&self) -> Option<StreamScheduler> {
        // SAFETY: this stream's pointer, in one of its hooks (rule 4).
        let scheduler = unsafe { envoy_dynamic_module_callback_http_filter_scheduler_new(self.filter) };
        (!scheduler.is_null()).then_some(StreamScheduler(scheduler))
    }
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

    fn headers(&self, map: HeaderMap) -> HeaderCopy {
        // SAFETY: a plain query on this stream (rule 4).
        let count = unsafe { envoy_dynamic_module_callback_http_get_headers_size(self.filter, header_type(map)) };
        if count == 0 {
            return HeaderCopy::default();
        }
        let empty = EnvoyHttpHeader {
            key_ptr: ptr::null(),
            key_length: 0,
            value_ptr: ptr::null(),
            value_length: 0,
        };
        let (mut on_stack, mut on_heap) = ([empty; ON_STACK], Vec::new());
        let headers = room(&mut on_stack, &mut on_heap, count, empty);
        // SAFETY: the array has exactly the size Envoy just gave (rule 3).
        if !unsafe {
            envoy_dynamic_module_callback_http_get_headers(self.filter, header_type(map), headers.as_mut_ptr())
        } {
            return HeaderCopy::default();
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

    fn add_header(&self, map: HeaderMap, name: &str, value: &[u8]) -> bool {
        // SAFETY: both buffers are module memory for the call (rule 2).
        unsafe {
            envoy_dynamic_module_callback_http_add_header(
                self.filter,
                header_type(map),
                ModuleBuffer::of(name.as_bytes()),
                ModuleBuffer::of(value),
            )
        }
    }

    fn remove_header(&self, map: HeaderMap, name: &str) {
        // SAFETY: the name is module memory for the call (rule 2); a null value removes.
        unsafe {
            envoy_dynamic_module_callback_http_set_header(
                self.filter,
                header_type(map),
                ModuleBuffer::of(name.as_bytes()),
                ModuleBuffer::NULL,
            );
        }
    }

    fn body(&self, body: Body) -> Vec<u8> {
        // SAFETY: a plain query on this stream (rule 4).
        let count = unsafe { envoy_dynamic_module_callback_http_get_body_chunks_size(self.filter, body_type(body)) };
        if count == 0 {
            return Vec::new();
        }
        let (mut on_stack, mut on_heap) = ([EnvoyBuffer::EMPTY; ON_STACK], Vec::new());
        let chunks = room(&mut on_stack, &mut on_heap, count, EnvoyBuffer::EMPTY);
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

    fn send_response_headers(&self, headers: &[(&str, &str)], end_stream: bool) {
        let mut headers = module_pairs(headers);
        // SAFETY: the header array is module memory for the call (rule 2); this may run other
        // filters inline, and no state of ours is borrowed now (rule 6).
        unsafe {
            envoy_dynamic_module_callback_http_send_response_headers(
                self.filter,
                headers.as_mut_ptr(),
                headers.len(),
                end_stream,
            )
        };
    }

    fn send_response_data(&self, data: &[u8], end_stream: bool) {
        // SAFETY: the data is module memory for the call (rule 2); as above (rule 6).
        unsafe {
            envoy_dynamic_module_callback_http_send_response_data(self.filter, ModuleBuffer::of(data), end_stream)
        };
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

    /// `source.address`, as Envoy's attributes give it (`127.0.0.1:54321`).
    fn client_address(&self) -> Option<String> {
        let mut value = EnvoyBuffer::EMPTY;
        // SAFETY: a plain query on this stream (rule 4); `value` is written by Envoy and copied
        // before the hook returns (rule 1).
        let found = unsafe {
            envoy_dynamic_module_callback_http_filter_get_attribute_string(
                self.filter,
                ATTRIBUTE_SOURCE_ADDRESS,
                &mut value,
            )
        };
        found.then(|| String::from_utf8(value.to_vec()).ok()).flatten()
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

    fn reset_call(&self, call: u64) {
        // SAFETY: a call this stream started, in one of its hooks (rule 4); an id that has
        // ended already is ignored by Envoy.
        unsafe { envoy_dynamic_module_callback_http_filter_reset_http_stream(self.filter, call) };
    }

    fn wake_at(&self, when: Instant, event: u64) -> Option<Alarm> {
        let wakeups = self.wakeups?;
        // The alarm deletes the scheduler, on this worker (rule 8).
        let scheduler = self.new_scheduler()?;
        let key = wakeups.add(when, scheduler, event);
        Some(Alarm(Box::new(DeadlineAlarm {
            wakeups,
            key,
            scheduler,
        })))
    }

    fn listen_for_cancel(&self, cancel_key: &str, event: u64) -> Option<Alarm> {
        let wakeups = self.wakeups?;
        // The listener deletes the scheduler, on this worker (rule 8).
        let scheduler = self.new_scheduler()?;
        let id = wakeups.listen(cancel_key, scheduler, event);
        Some(Alarm(Box::new(CancelListener {
            wakeups,
            cancel_key: cancel_key.to_owned(),
            id,
            scheduler,
        })))
    }

    fn cancel_listeners(&self, cancel_key: &str) -> usize {
        self.wakeups.map_or(0, |wakeups| wakeups.wake_listeners(cancel_key))
    }
}

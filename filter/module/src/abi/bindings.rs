//! The callbacks Envoy exports, as far as the module uses them, the C types they take, and the
//! small safe helpers every wrapper shares. The rules every `unsafe` here cites are in the
//! module's documentation ([`super`]).

use std::ffi::c_void;
use std::ptr;

use switchblade_core::host_api::HeaderCopy;

use crate::host::{Body, HeaderMap};

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
    pub(super) ptr: *const u8,
    pub(super) length: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct EnvoyHttpHeader {
    pub(super) key_ptr: *const u8,
    pub(super) key_length: usize,
    pub(super) value_ptr: *const u8,
    pub(super) value_length: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ModuleHttpHeader {
    pub(super) key_ptr: *const u8,
    pub(super) key_length: usize,
    pub(super) value_ptr: *const u8,
    pub(super) value_length: usize,
}

/// (name, value) pairs as Envoy reads headers and metadata entries from a module (rule 2: they
/// borrow `pairs`, which must outlive the call they are passed to).
pub(super) fn module_pairs(pairs: &[(&str, &str)]) -> Vec<ModuleHttpHeader> {
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
    /// No value at all: what `set_header` takes to remove a header. Envoy 1.40 removes a
    /// header set to a zero-length value as well, but its ABI documents only the null one, and
    /// later versions set such a header to an empty value.
    pub(super) const NULL: ModuleBuffer = ModuleBuffer {
        ptr: ptr::null(),
        length: 0,
    };

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
        // SAFETY: copied at once, while Envoy's bytes are valid (rule 1).
        unsafe { self.bytes() }.to_vec()
    }

    /// The bytes themselves, to copy at once.
    ///
    /// # Safety
    /// The slice must be dropped before the hook returns or the map or buffer it came from
    /// changes (rule 1).
    unsafe fn bytes<'hook>(self) -> &'hook [u8] {
        if self.ptr.is_null() || self.length == 0 {
            return &[];
        }
        // SAFETY: Envoy hands out `length` readable bytes at `ptr`, valid for this hook (rule 1).
        unsafe { std::slice::from_raw_parts(self.ptr, self.length) }
    }
}

/// The ABI's number for a header map (`envoy_dynamic_module_type_http_header_type`).
pub(super) fn header_type(map: HeaderMap) -> u32 {
    match map {
        HeaderMap::Request => 0,
        HeaderMap::RequestTrailers => 1,
        HeaderMap::Response => 2,
        HeaderMap::ResponseTrailers => 3,
    }
}

/// The ABI's number for a body (`envoy_dynamic_module_type_http_body_type`).
pub(super) fn body_type(body: Body) -> u32 {
    match body {
        Body::ReceivedRequest => 0,
        Body::BufferedRequest => 1,
        Body::ReceivedResponse => 2,
        Body::BufferedResponse => 3,
    }
}

/// `envoy_dynamic_module_type_attribute_id_SourceAddress`: `source.address`, the 25th of
/// the ABI's attribute ids (counted from 0, in the header's order).
pub(super) const ATTRIBUTE_SOURCE_ADDRESS: u32 = 24;

pub(super) const CALLOUT_SUCCESS: u32 = 0;
/// `envoy_dynamic_module_type_http_filter_stream_reset_reason_LocalReset`.
pub(super) const LOCAL_RESET: u32 = 0;
pub(super) const LOG_LEVELS: [log::Level; 5] = [
    log::Level::Trace,
    log::Level::Debug,
    log::Level::Info,
    log::Level::Warn,
    log::Level::Error,
];

extern "C" {
    pub(super) fn envoy_dynamic_module_callback_log(level: u32, message: ModuleBuffer);
    pub(super) fn envoy_dynamic_module_callback_http_get_header(
        filter: HttpFilterEnvoyPtr,
        header_type: u32,
        key: ModuleBuffer,
        result: *mut EnvoyBuffer,
        index: usize,
        optional_size: *mut usize,
    ) -> bool;
    pub(super) fn envoy_dynamic_module_callback_http_get_headers_size(
        filter: HttpFilterEnvoyPtr,
        header_type: u32,
    ) -> usize;
    pub(super) fn envoy_dynamic_module_callback_http_get_headers(
        filter: HttpFilterEnvoyPtr,
        header_type: u32,
        result_headers: *mut EnvoyHttpHeader,
    ) -> bool;
    pub(super) fn envoy_dynamic_module_callback_http_set_header(
        filter: HttpFilterEnvoyPtr,
        header_type: u32,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool;
    pub(super) fn envoy_dynamic_module_callback_http_add_header(
        filter: HttpFilterEnvoyPtr,
        header_type: u32,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool;
    pub(super) fn envoy_dynamic_module_callback_http_get_body_chunks_size(
        filter: HttpFilterEnvoyPtr,
        body_type: u32,
    ) -> usize;
    pub(super) fn envoy_dynamic_module_callback_http_get_body_chunks(
        filter: HttpFilterEnvoyPtr,
        body_type: u32,
        result_buffer_vector: *mut EnvoyBuffer,
    ) -> bool;
    pub(super) fn envoy_dynamic_module_callback_http_get_body_size(filter: HttpFilterEnvoyPtr, body_type: u32)
        -> usize;
    pub(super) fn envoy_dynamic_module_callback_http_append_body(
        filter: HttpFilterEnvoyPtr,
        body_type: u32,
        data: ModuleBuffer,
    ) -> bool;
    pub(super) fn envoy_dynamic_module_callback_http_drain_body(
        filter: HttpFilterEnvoyPtr,
        body_type: u32,
        number_of_bytes: usize,
    ) -> bool;
    pub(super) fn envoy_dynamic_module_callback_http_send_response(
        filter: HttpFilterEnvoyPtr,
        status_code: u32,
        headers_vector: *mut ModuleHttpHeader,
        headers_vector_size: usize,
        body: ModuleBuffer,
        details: ModuleBuffer,
    );
    pub(super) fn envoy_dynamic_module_callback_http_clear_route_cache(filter: HttpFilterEnvoyPtr);
    pub(super) fn envoy_dynamic_module_callback_http_send_response_headers(
        filter: HttpFilterEnvoyPtr,
        headers_vector: *mut ModuleHttpHeader,
        headers_vector_size: usize,
        end_stream: bool,
    );
    pub(super) fn envoy_dynamic_module_callback_http_send_response_data(
        filter: HttpFilterEnvoyPtr,
        data: ModuleBuffer,
        end_stream: bool,
    );
    pub(super) fn envoy_dynamic_module_callback_http_filter_reset_http_stream(
        filter: HttpFilterEnvoyPtr,
        stream_id: u64,
    );
    pub(super) fn envoy_dynamic_module_callback_http_filter_start_http_stream(
        filter: HttpFilterEnvoyPtr,
        stream_id_out: *mut u64,
        cluster_name: ModuleBuffer,
        headers: *mut ModuleHttpHeader,
        headers_size: usize,
        body: ModuleBuffer,
        end_stream: bool,
        timeout_milliseconds: u64,
    ) -> u32;
    pub(super) fn envoy_dynamic_module_callback_http_filter_config_define_counter(
        config: HttpFilterConfigEnvoyPtr,
        name: ModuleBuffer,
        label_names: *mut ModuleBuffer,
        label_names_length: usize,
        counter_id: *mut usize,
    ) -> u32;
    pub(super) fn envoy_dynamic_module_callback_http_filter_config_define_histogram(
        config: HttpFilterConfigEnvoyPtr,
        name: ModuleBuffer,
        label_names: *mut ModuleBuffer,
        label_names_length: usize,
        histogram_id: *mut usize,
    ) -> u32;
    pub(super) fn envoy_dynamic_module_callback_http_filter_increment_counter(
        filter: HttpFilterEnvoyPtr,
        id: usize,
        label_values: *mut ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;
    pub(super) fn envoy_dynamic_module_callback_http_filter_record_histogram_value(
        filter: HttpFilterEnvoyPtr,
        id: usize,
        label_values: *mut ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;
    pub(super) fn envoy_dynamic_module_callback_http_set_filter_state_bytes(
        filter: HttpFilterEnvoyPtr,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool;
    pub(super) fn envoy_dynamic_module_callback_http_get_filter_state_bytes(
        filter: HttpFilterEnvoyPtr,
        key: ModuleBuffer,
        result: *mut EnvoyBuffer,
    ) -> bool;
    pub(super) fn envoy_dynamic_module_callback_http_filter_get_attribute_string(
        filter: HttpFilterEnvoyPtr,
        attribute_id: u32,
        result: *mut EnvoyBuffer,
    ) -> bool;
    pub(super) fn envoy_dynamic_module_callback_http_filter_config_start_http_stream(
        config: HttpFilterConfigEnvoyPtr,
        stream_id_out: *mut u64,
        cluster_name: ModuleBuffer,
        headers: *mut ModuleHttpHeader,
        headers_size: usize,
        body: ModuleBuffer,
        end_stream: bool,
        timeout_milliseconds: u64,
    ) -> u32;
    pub(super) fn envoy_dynamic_module_callback_http_filter_config_increment_counter(
        config: HttpFilterConfigEnvoyPtr,
        id: usize,
        label_values: *mut ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;
    pub(super) fn envoy_dynamic_module_callback_http_filter_config_scheduler_new(
        config: HttpFilterConfigEnvoyPtr,
    ) -> *mut c_void;
    pub(super) fn envoy_dynamic_module_callback_http_filter_config_scheduler_commit(
        scheduler: *mut c_void,
        event_id: u64,
    );
    pub(super) fn envoy_dynamic_module_callback_http_filter_config_scheduler_delete(scheduler: *mut c_void);
    pub(super) fn envoy_dynamic_module_callback_http_filter_reset_stream(
        filter: HttpFilterEnvoyPtr,
        reason: u32,
        details: ModuleBuffer,
    );
    pub(super) fn envoy_dynamic_module_callback_http_filter_scheduler_new(filter: HttpFilterEnvoyPtr) -> *mut c_void;
    pub(super) fn envoy_dynamic_module_callback_http_filter_scheduler_commit(scheduler: *mut c_void, event_id: u64);
    pub(super) fn envoy_dynamic_module_callback_http_filter_scheduler_delete(scheduler: *mut c_void);
}

/// What the metric calls answer when they worked (`envoy_dynamic_module_type_metrics_result`).
pub(super) const METRICS_SUCCESS: u32 = 0;

/// Envoy's two ways to start an HTTP stream, from a stream or from a configuration: the same
/// shape, with the owner's pointer first.
pub(super) type StartStream = unsafe extern "C" fn(
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
pub(super) unsafe fn start_stream(
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

/// A copy of the headers Envoy hands over (rules 1 and 3); none for a null pointer.
///
/// # Safety
/// `headers` is null or points at `count` headers valid for this hook.
pub(super) unsafe fn copied_headers(headers: *const EnvoyHttpHeader, count: usize) -> HeaderCopy {
    if headers.is_null() {
        return HeaderCopy::default();
    }
    // SAFETY: by the caller's contract (rules 1 and 3).
    let headers = unsafe { std::slice::from_raw_parts(headers, count) };
    HeaderCopy::sized_from(headers.iter().map(|header| {
        let name = EnvoyBuffer {
            ptr: header.key_ptr,
            length: header.key_length,
        };
        let value = EnvoyBuffer {
            ptr: header.value_ptr,
            length: header.value_length,
        };
        // SAFETY: both copied within this call, in this hook (rule 1).
        unsafe { (name.bytes(), value.bytes()) }
    }))
}

/// Copies of the bytes of body chunks Envoy hands over (rules 1 and 3).
///
/// # Safety
/// `chunks` is null or points at `count` buffers valid for this hook.
pub(super) unsafe fn copied_chunks(chunks: *const EnvoyBuffer, count: usize) -> Vec<u8> {
    if chunks.is_null() {
        return Vec::new();
    }
    // SAFETY: by the caller's contract (rules 1 and 3).
    let chunks = unsafe { std::slice::from_raw_parts(chunks, count) };
    // SAFETY: each read twice within this call, to measure and to copy, in this hook (rule 1).
    let slices = chunks.iter().map(|chunk| unsafe { chunk.bytes() });
    // Sized once: a body in several chunks is not copied again as the buffer grows.
    let mut bytes = Vec::with_capacity(slices.clone().map(<[u8]>::len).fold(0, usize::saturating_add));
    for slice in slices {
        bytes.extend_from_slice(slice);
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lent(bytes: &[u8]) -> EnvoyBuffer {
        EnvoyBuffer {
            ptr: bytes.as_ptr(),
            length: bytes.len(),
        }
    }

    #[test]
    fn chunks_are_copied_in_order_into_one_buffer_of_their_size() {
        let chunks = [
            lent(b"{\"a\":"),
            EnvoyBuffer {
                ptr: ptr::null(),
                length: 7,
            },
            lent(b""),
            lent(b"1}"),
        ];
        // SAFETY: the buffers point at these statics, or are null.
        let bytes = unsafe { copied_chunks(chunks.as_ptr(), chunks.len()) };
        assert_eq!(bytes, b"{\"a\":1}");
        assert_eq!(bytes.capacity(), bytes.len());
        // SAFETY: a null pointer is read as no chunks.
        assert!(unsafe { copied_chunks(ptr::null(), 3) }.is_empty());
    }

    #[test]
    fn headers_are_copied_with_null_and_empty_parts_as_empty() {
        let header = |name: &[u8], value: &[u8]| EnvoyHttpHeader {
            key_ptr: name.as_ptr(),
            key_length: name.len(),
            value_ptr: value.as_ptr(),
            value_length: value.len(),
        };
        let headers = [
            header(b":path", b"/mcp"),
            EnvoyHttpHeader {
                key_ptr: b"x-empty".as_ptr(),
                key_length: 7,
                value_ptr: ptr::null(),
                value_length: 5,
            },
            header(b"x-a", b"1"),
        ];
        // SAFETY: the headers point at these statics, or are null.
        let copy = unsafe { copied_headers(headers.as_ptr(), headers.len()) };
        let expected: Vec<(&str, &[u8])> = vec![(":path", b"/mcp"), ("x-empty", b""), ("x-a", b"1")];
        assert_eq!(copy.pairs().as_slice(), expected);
        // SAFETY: a null pointer is read as no headers.
        assert!(unsafe { copied_headers(ptr::null(), 2) }.is_empty());
    }
}

//! A fake Envoy for the filter's native tests: the host functions of the proxy-wasm ABI
//! (0.2.1) that the SDK imports, defined over one thread's state. The SDK's dispatcher keeps
//! its contexts per thread too, so each test thread is one VM; VMs of one Envoy (its workers)
//! share only shared data ([`Envoy::shared`]). Envoy's own behaviour is followed where the
//! filter depends on it: a callout's answer comes to the context that started it, a shared
//! data write with a version fails if another came first, a map read with nothing in it hands
//! back no bytes.
//!
//! The only `unsafe` of the Wasm crate, all of it here, under these rules:
//! 1. Every pointer and length comes from the SDK's hostcalls, which pass a live slice's
//!    pointer and length (or a null pointer with a zero length), and out-pointers to their own
//!    locals; [`bytes`] turns a null pointer into an empty slice.
//! 2. Bytes handed back are a boxed slice given up with `Box::into_raw`: the SDK takes them
//!    with `Vec::from_raw_parts(ptr, len, len)`, the same allocation and layout.
//! 3. The signatures are the SDK's `extern "C"` declarations, with its own `#[repr(u32)]`
//!    types.

#![allow(unsafe_code)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use proxy_wasm::types::{BufferType, LogLevel, MapType, MetricType, Status, StreamType};

/// One local reply, as sent.
#[derive(Debug, Clone)]
pub(super) struct LocalReply {
    /// The context it was sent for (the effective context: a request's own, or the one the
    /// root context acted for).
    pub(super) context: u32,
    pub(super) status: u32,
    pub(super) headers: Map,
    pub(super) body: Vec<u8>,
}

/// One HTTP callout, as started.
#[derive(Debug, Clone)]
pub(super) struct Callout {
    pub(super) token: u32,
    pub(super) context: u32,
    pub(super) cluster: String,
    pub(super) headers: Map,
    pub(super) body: Vec<u8>,
    pub(super) timeout_ms: u32,
}

/// One gRPC stream, as opened and written.
#[derive(Debug, Clone, Default)]
pub(super) struct GrpcStream {
    pub(super) token: u32,
    pub(super) cluster: String,
    pub(super) path: String,
    pub(super) metadata: Map,
    pub(super) messages: Vec<Vec<u8>>,
    pub(super) half_closed: bool,
    pub(super) cancelled: bool,
}

/// A header map: names, and values as bytes.
pub(super) type Map = Vec<(String, Vec<u8>)>;

/// The store every VM of one Envoy shares: key → (value, version).
pub(super) type SharedData = Arc<Mutex<HashMap<String, (Vec<u8>, u32)>>>;

/// What this thread's VM was given and did.
#[derive(Default)]
pub(super) struct Envoy {
    pub(super) now_nanos: u64,
    pub(super) tick_period_ms: Option<u32>,
    pub(super) buffers: HashMap<BufferType, Vec<u8>>,
    pub(super) maps: HashMap<MapType, Map>,
    /// Properties by path, its parts joined with `.`.
    pub(super) properties: HashMap<String, Vec<u8>>,
    pub(super) properties_set: Map,
    pub(super) shared: SharedData,
    pub(super) replies: Vec<LocalReply>,
    pub(super) callouts: Vec<Callout>,
    pub(super) streams: Vec<GrpcStream>,
    /// Refuses every callout and stream (as Envoy does for an unknown cluster).
    pub(super) refuses_calls: bool,
    /// Stats by id: name, and value.
    pub(super) metrics: Vec<(String, i128)>,
    pub(super) effective_context: u32,
    /// How many times each map was read whole, and each buffer read.
    pub(super) map_reads: HashMap<MapType, usize>,
    pub(super) buffer_reads: HashMap<BufferType, usize>,
    pub(super) logs: Vec<(LogLevel, String)>,
    next_token: u32,
}

thread_local! {
    static ENVOY: RefCell<Envoy> = RefCell::default();
}

/// This thread's Envoy, to set up or read (never held while the filter runs).
pub(super) fn envoy<R>(f: impl FnOnce(&mut Envoy) -> R) -> R {
    ENVOY.with(|envoy| f(&mut envoy.borrow_mut()))
}

impl Envoy {
    /// The value of the stat named `name`, if it was defined.
    pub(super) fn metric(&self, name: &str) -> Option<i128> {
        self.metrics
            .iter()
            .find(|(known, _)| known == name)
            .map(|(_, value)| *value)
    }

    fn token(&mut self) -> u32 {
        self.next_token += 1;
        self.next_token
    }
}

fn bytes<'a>(data: *const u8, size: usize) -> &'a [u8] {
    if data.is_null() {
        return &[];
    }
    // SAFETY: rule 1.
    unsafe { std::slice::from_raw_parts(data, size) }
}

fn text(data: *const u8, size: usize) -> String {
    String::from_utf8_lossy(bytes(data, size)).into_owned()
}

/// Hands bytes to the SDK (rule 2).
fn give(value: Vec<u8>, data: *mut *mut u8, size: *mut usize) {
    let len = value.len();
    let raw = Box::into_raw(value.into_boxed_slice()).cast::<u8>();
    // SAFETY: rule 1 (out-pointers to the SDK's locals).
    unsafe {
        *data = raw;
        *size = len;
    }
}

/// Hands `value` to the SDK if there is one; else the host's "not found".
fn give_found(value: Option<Vec<u8>>, data: *mut *mut u8, size: *mut usize) -> Status {
    match value {
        Some(value) => {
            give(value, data, size);
            Status::Ok
        }
        None => Status::NotFound,
    }
}

fn put<T>(out: *mut T, value: T) {
    // SAFETY: rule 1 (an out-pointer to the SDK's local).
    unsafe { *out = value }
}

/// A map in the ABI's form: the count, each name's and value's length, then each name and
/// value with a NUL after it.
fn serialize_map(map: &[(String, Vec<u8>)]) -> Vec<u8> {
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes();
    let mut out = count(map.len()).to_vec();
    for (name, value) in map {
        out.extend(count(name.len()));
        out.extend(count(value.len()));
    }
    for (name, value) in map {
        out.extend(name.as_bytes());
        out.push(0);
        out.extend(value);
        out.push(0);
    }
    out
}

fn deserialize_map(bytes: &[u8]) -> Map {
    let word = |at: usize| {
        bytes
            .get(at..at + 4)
            .and_then(|word| word.try_into().ok())
            .map_or(0, |word| u32::from_le_bytes(word) as usize)
    };
    let count = word(0);
    let mut at = 4 + count * 8;
    let mut take = |len: usize| {
        let part = bytes.get(at..at + len).unwrap_or_default().to_vec();
        at += len + 1;
        part
    };
    (0..count)
        .map(|index| {
            let (name_len, value_len) = (word(4 + index * 8), word(8 + index * 8));
            let name = String::from_utf8_lossy(&take(name_len)).into_owned();
            (name, take(value_len))
        })
        .collect()
}

#[no_mangle]
extern "C" fn proxy_log(level: LogLevel, message_data: *const u8, message_size: usize) -> Status {
    envoy(|envoy| envoy.logs.push((level, text(message_data, message_size))));
    Status::Ok
}

#[no_mangle]
extern "C" fn proxy_get_log_level(return_level: *mut LogLevel) -> Status {
    put(return_level, LogLevel::Trace);
    Status::Ok
}

#[no_mangle]
extern "C" fn proxy_get_current_time_nanoseconds(return_time: *mut u64) -> Status {
    put(return_time, envoy(|envoy| envoy.now_nanos));
    Status::Ok
}

#[no_mangle]
extern "C" fn proxy_set_tick_period_milliseconds(period: u32) -> Status {
    envoy(|envoy| envoy.tick_period_ms = Some(period));
    Status::Ok
}

#[no_mangle]
extern "C" fn proxy_get_buffer_bytes(
    buffer_type: BufferType,
    start: usize,
    max_size: usize,
    return_buffer_data: *mut *mut u8,
    return_buffer_size: *mut usize,
) -> Status {
    let value = envoy(|envoy| {
        *envoy.buffer_reads.entry(buffer_type).or_default() += 1;
        let buffer = envoy.buffers.get(&buffer_type)?;
        let start = start.min(buffer.len());
        let end = start.saturating_add(max_size).min(buffer.len());
        Some(buffer[start..end].to_vec())
    });
    give_found(value, return_buffer_data, return_buffer_size)
}

#[no_mangle]
extern "C" fn proxy_set_buffer_bytes(_: BufferType, _: usize, _: usize, _: *const u8, _: usize) -> Status {
    Status::InternalFailure
}

#[no_mangle]
extern "C" fn proxy_get_header_map_pairs(
    map_type: MapType,
    return_map_data: *mut *mut u8,
    return_map_size: *mut usize,
) -> Status {
    let map = envoy(|envoy| {
        *envoy.map_reads.entry(map_type).or_default() += 1;
        envoy.maps.get(&map_type).cloned()
    });
    // Envoy hands back no bytes for a map that is not there.
    if let Some(map) = map {
        give(serialize_map(&map), return_map_data, return_map_size);
    }
    Status::Ok
}

#[no_mangle]
extern "C" fn proxy_set_header_map_pairs(_: MapType, _: *const u8, _: usize) -> Status {
    Status::InternalFailure
}

#[no_mangle]
extern "C" fn proxy_get_header_map_value(
    map_type: MapType,
    key_data: *const u8,
    key_size: usize,
    return_value_data: *mut *mut u8,
    return_value_size: *mut usize,
) -> Status {
    let name = text(key_data, key_size);
    let value = envoy(|envoy| {
        let map = envoy.maps.get(&map_type)?;
        map.iter()
            .find(|(known, _)| *known == name)
            .map(|(_, value)| value.clone())
    });
    give_found(value, return_value_data, return_value_size)
}

#[no_mangle]
extern "C" fn proxy_remove_header_map_value(_: MapType, _: *const u8, _: usize) -> Status {
    Status::InternalFailure
}

#[no_mangle]
extern "C" fn proxy_replace_header_map_value(_: MapType, _: *const u8, _: usize, _: *const u8, _: usize) -> Status {
    Status::InternalFailure
}

#[no_mangle]
extern "C" fn proxy_add_header_map_value(_: MapType, _: *const u8, _: usize, _: *const u8, _: usize) -> Status {
    Status::InternalFailure
}

/// A property path as the SDK sends it (parts with NULs between), joined with `.`.
fn property_path(data: *const u8, size: usize) -> String {
    text(data, size).replace('\0', ".")
}

#[no_mangle]
extern "C" fn proxy_get_property(
    path_data: *const u8,
    path_size: usize,
    return_value_data: *mut *mut u8,
    return_value_size: *mut usize,
) -> Status {
    let path = property_path(path_data, path_size);
    let value = envoy(|envoy| envoy.properties.get(&path).cloned());
    give_found(value, return_value_data, return_value_size)
}

#[no_mangle]
extern "C" fn proxy_set_property(
    path_data: *const u8,
    path_size: usize,
    value_data: *const u8,
    value_size: usize,
) -> Status {
    let path = property_path(path_data, path_size);
    let value = bytes(value_data, value_size).to_vec();
    envoy(|envoy| envoy.properties_set.push((path, value)));
    Status::Ok
}

#[no_mangle]
extern "C" fn proxy_get_shared_data(
    key_data: *const u8,
    key_size: usize,
    return_value_data: *mut *mut u8,
    return_value_size: *mut usize,
    return_cas: *mut u32,
) -> Status {
    let key = text(key_data, key_size);
    let shared = envoy(|envoy| Arc::clone(&envoy.shared));
    let entry = shared.lock().unwrap_or_else(PoisonError::into_inner).get(&key).cloned();
    match entry {
        Some((value, version)) => {
            give(value, return_value_data, return_value_size);
            put(return_cas, version);
            Status::Ok
        }
        None => Status::NotFound,
    }
}

/// Envoy's rule: a write with a version (not 0) fails if the key is there with another one; a
/// key not there is written whatever the version. Versions count writes from 1.
#[no_mangle]
extern "C" fn proxy_set_shared_data(
    key_data: *const u8,
    key_size: usize,
    value_data: *const u8,
    value_size: usize,
    cas: u32,
) -> Status {
    let key = text(key_data, key_size);
    let value = bytes(value_data, value_size).to_vec();
    let shared = envoy(|envoy| Arc::clone(&envoy.shared));
    let mut shared = shared.lock().unwrap_or_else(PoisonError::into_inner);
    match shared.get_mut(&key) {
        Some((_, version)) if cas != 0 && cas != *version => Status::CasMismatch,
        Some(entry) => {
            *entry = (value, entry.1 + 1);
            Status::Ok
        }
        None => {
            shared.insert(key, (value, 1));
            Status::Ok
        }
    }
}

#[no_mangle]
extern "C" fn proxy_register_shared_queue(_: *const u8, _: usize, _: *mut u32) -> Status {
    Status::InternalFailure
}

#[no_mangle]
extern "C" fn proxy_resolve_shared_queue(_: *const u8, _: usize, _: *const u8, _: usize, _: *mut u32) -> Status {
    Status::InternalFailure
}

#[no_mangle]
extern "C" fn proxy_dequeue_shared_queue(_: u32, _: *mut *mut u8, _: *mut usize) -> Status {
    Status::InternalFailure
}

#[no_mangle]
extern "C" fn proxy_enqueue_shared_queue(_: u32, _: *const u8, _: usize) -> Status {
    Status::InternalFailure
}

#[no_mangle]
extern "C" fn proxy_continue_stream(_: StreamType) -> Status {
    Status::InternalFailure
}

#[no_mangle]
extern "C" fn proxy_close_stream(_: StreamType) -> Status {
    Status::InternalFailure
}

#[no_mangle]
extern "C" fn proxy_send_local_response(
    status_code: u32,
    _details_data: *const u8,
    _details_size: usize,
    body_data: *const u8,
    body_size: usize,
    headers_data: *const u8,
    headers_size: usize,
    _grpc_status: i32,
) -> Status {
    let reply = LocalReply {
        context: envoy(|envoy| envoy.effective_context),
        status: status_code,
        headers: deserialize_map(bytes(headers_data, headers_size)),
        body: bytes(body_data, body_size).to_vec(),
    };
    envoy(|envoy| envoy.replies.push(reply));
    Status::Ok
}

#[no_mangle]
extern "C" fn proxy_http_call(
    upstream_data: *const u8,
    upstream_size: usize,
    headers_data: *const u8,
    headers_size: usize,
    body_data: *const u8,
    body_size: usize,
    _trailers_data: *const u8,
    _trailers_size: usize,
    timeout: u32,
    return_token: *mut u32,
) -> Status {
    let cluster = text(upstream_data, upstream_size);
    let headers = deserialize_map(bytes(headers_data, headers_size));
    let body = bytes(body_data, body_size).to_vec();
    let token = envoy(|envoy| {
        if envoy.refuses_calls {
            return None;
        }
        let token = envoy.token();
        let context = envoy.effective_context;
        envoy.callouts.push(Callout {
            token,
            context,
            cluster,
            headers,
            body,
            timeout_ms: timeout,
        });
        Some(token)
    });
    match token {
        Some(token) => {
            put(return_token, token);
            Status::Ok
        }
        None => Status::BadArgument,
    }
}

#[no_mangle]
extern "C" fn proxy_grpc_call(
    _: *const u8,
    _: usize,
    _: *const u8,
    _: usize,
    _: *const u8,
    _: usize,
    _: *const u8,
    _: usize,
    _: *const u8,
    _: usize,
    _: u32,
    _: *mut u32,
) -> Status {
    Status::InternalFailure
}

#[no_mangle]
extern "C" fn proxy_grpc_stream(
    upstream_data: *const u8,
    upstream_size: usize,
    service_name_data: *const u8,
    service_name_size: usize,
    method_name_data: *const u8,
    method_name_size: usize,
    initial_metadata_data: *const u8,
    initial_metadata_size: usize,
    return_stream_id: *mut u32,
) -> Status {
    let stream = GrpcStream {
        cluster: text(upstream_data, upstream_size),
        path: format!(
            "/{}/{}",
            text(service_name_data, service_name_size),
            text(method_name_data, method_name_size)
        ),
        metadata: deserialize_map(bytes(initial_metadata_data, initial_metadata_size)),
        ..GrpcStream::default()
    };
    let token = envoy(|envoy| {
        if envoy.refuses_calls {
            return None;
        }
        let token = envoy.token();
        envoy.streams.push(GrpcStream { token, ..stream });
        Some(token)
    });
    match token {
        Some(token) => {
            put(return_stream_id, token);
            Status::Ok
        }
        None => Status::InternalFailure,
    }
}

/// The stream under `token`, to write to.
fn with_stream(token: u32, f: impl FnOnce(&mut GrpcStream)) -> Status {
    envoy(|envoy| {
        match envoy
            .streams
            .iter_mut()
            .find(|stream| stream.token == token && !stream.cancelled)
        {
            Some(stream) => {
                f(stream);
                Status::Ok
            }
            None => Status::NotFound,
        }
    })
}

#[no_mangle]
extern "C" fn proxy_grpc_send(token: u32, message_ptr: *const u8, message_len: usize, end_stream: bool) -> Status {
    // A null pointer is no message (a bare half-close); any other, a message, maybe empty.
    let message = (!message_ptr.is_null()).then(|| bytes(message_ptr, message_len).to_vec());
    with_stream(token, |stream| {
        stream.messages.extend(message);
        stream.half_closed |= end_stream;
    })
}

#[no_mangle]
extern "C" fn proxy_grpc_cancel(token_id: u32) -> Status {
    with_stream(token_id, |stream| stream.cancelled = true)
}

#[no_mangle]
extern "C" fn proxy_grpc_close(token_id: u32) -> Status {
    with_stream(token_id, |stream| stream.half_closed = true)
}

#[no_mangle]
extern "C" fn proxy_get_status(_: *mut u32, _: *mut *mut u8, _: *mut usize) -> Status {
    Status::InternalFailure
}

#[no_mangle]
extern "C" fn proxy_set_effective_context(context_id: u32) -> Status {
    envoy(|envoy| envoy.effective_context = context_id);
    Status::Ok
}

#[no_mangle]
extern "C" fn proxy_call_foreign_function(
    _: *const u8,
    _: usize,
    _: *const u8,
    _: usize,
    _: *mut *mut u8,
    _: *mut usize,
) -> Status {
    Status::InternalFailure
}

#[no_mangle]
extern "C" fn proxy_done() -> Status {
    Status::InternalFailure
}

#[no_mangle]
extern "C" fn proxy_define_metric(
    _metric_type: MetricType,
    name_data: *const u8,
    name_size: usize,
    return_id: *mut u32,
) -> Status {
    let name = text(name_data, name_size);
    let id = envoy(|envoy| {
        let index = match envoy.metrics.iter().position(|(known, _)| *known == name) {
            Some(index) => index,
            None => {
                envoy.metrics.push((name, 0));
                envoy.metrics.len() - 1
            }
        };
        u32::try_from(index).unwrap_or(u32::MAX)
    });
    put(return_id, id);
    Status::Ok
}

#[no_mangle]
extern "C" fn proxy_get_metric(_: u32, _: *mut u64) -> Status {
    Status::InternalFailure
}

fn with_metric(id: u32, f: impl FnOnce(&mut i128)) -> Status {
    envoy(|envoy| match envoy.metrics.get_mut(id as usize) {
        Some((_, value)) => {
            f(value);
            Status::Ok
        }
        None => Status::NotFound,
    })
}

#[no_mangle]
extern "C" fn proxy_record_metric(metric_id: u32, value: u64) -> Status {
    with_metric(metric_id, |recorded| *recorded = i128::from(value))
}

#[no_mangle]
extern "C" fn proxy_increment_metric(metric_id: u32, offset: i64) -> Status {
    with_metric(metric_id, |recorded| *recorded += i128::from(offset))
}

/// The callbacks Envoy makes into the VM, which the SDK exports.
mod vm {
    use proxy_wasm::types::Action;

    extern "C" {
        pub(super) fn proxy_on_context_create(context_id: u32, root_context_id: u32);
        pub(super) fn proxy_on_done(context_id: u32) -> bool;
        pub(super) fn proxy_on_delete(context_id: u32);
        pub(super) fn proxy_on_vm_start(context_id: u32, vm_configuration_size: usize) -> bool;
        pub(super) fn proxy_on_configure(context_id: u32, plugin_configuration_size: usize) -> bool;
        pub(super) fn proxy_on_tick(context_id: u32);
        pub(super) fn proxy_on_request_headers(context_id: u32, num_headers: usize, end_of_stream: bool) -> Action;
        pub(super) fn proxy_on_request_body(context_id: u32, body_size: usize, end_of_stream: bool) -> Action;
        pub(super) fn proxy_on_http_call_response(
            context_id: u32,
            token_id: u32,
            num_headers: usize,
            body_size: usize,
            num_trailers: usize,
        );
        pub(super) fn proxy_on_grpc_receive_initial_metadata(context_id: u32, token_id: u32, headers: u32);
        pub(super) fn proxy_on_grpc_receive(context_id: u32, token_id: u32, response_size: usize);
        pub(super) fn proxy_on_grpc_receive_trailing_metadata(context_id: u32, token_id: u32, trailers: u32);
        pub(super) fn proxy_on_grpc_close(context_id: u32, token_id: u32, status_code: u32);
    }
}

/// Envoy's side of the VM's callbacks: each call sets what the callback reads, then makes it,
/// as Envoy does. No borrow of the fake's state is held across a callback.
pub(super) mod call {
    use proxy_wasm::types::{Action, BufferType, MapType};

    use super::{envoy, vm, Map};

    pub(crate) const ROOT: u32 = 1;

    /// Starts the VM (its `main`) and configures its root context with `configuration`.
    pub(crate) fn start(configuration: &str) -> bool {
        {
            // The SDK installs its logger the first time a VM starts, behind a flag that two
            // threads can both find unset (and the second `set_logger` panics): one at a time.
            static STARTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
            let _one = STARTING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            crate::_initialize();
            // The SDK's panic hook sends a panic to the host's log: a failing test's message
            // goes to the terminal instead.
            drop(std::panic::take_hook());
        }
        envoy(|envoy| {
            envoy.effective_context = ROOT;
            envoy.properties.insert("plugin_name".into(), b"switchblade".to_vec());
            envoy
                .buffers
                .insert(BufferType::PluginConfiguration, configuration.as_bytes().to_vec());
        });
        // SAFETY: rule 3; the SDK's callbacks, made once each as Envoy makes them.
        unsafe {
            vm::proxy_on_context_create(ROOT, 0);
            vm::proxy_on_vm_start(ROOT, 0) && vm::proxy_on_configure(ROOT, configuration.len())
        }
    }

    fn at(context: u32) {
        envoy(|envoy| envoy.effective_context = context);
    }

    pub(crate) fn request_headers(context: u32, headers: Map, end_of_stream: bool) -> Action {
        let count = headers.len();
        envoy(|envoy| envoy.maps.insert(MapType::HttpRequestHeaders, headers));
        at(context);
        // SAFETY: rule 3.
        unsafe {
            vm::proxy_on_context_create(context, ROOT);
            vm::proxy_on_request_headers(context, count, end_of_stream)
        }
    }

    pub(crate) fn request_body(context: u32, body: &[u8], end_of_stream: bool) -> Action {
        envoy(|envoy| envoy.buffers.insert(BufferType::HttpRequestBody, body.to_vec()));
        at(context);
        // SAFETY: rule 3.
        unsafe { vm::proxy_on_request_body(context, body.len(), end_of_stream) }
    }

    /// The request's stream ends: its context is done and deleted.
    pub(crate) fn done(context: u32) {
        at(context);
        // SAFETY: rule 3.
        unsafe {
            if vm::proxy_on_done(context) {
                vm::proxy_on_delete(context);
            }
        }
    }

    pub(crate) fn tick() {
        at(ROOT);
        // SAFETY: rule 3.
        unsafe { vm::proxy_on_tick(ROOT) }
    }

    /// The answer to a callout, whole; to whichever context started it (the SDK knows).
    pub(crate) fn callout_answered(token: u32, headers: Map, body: &[u8], trailers: Map) {
        let counts = (headers.len(), trailers.len());
        envoy(|envoy| {
            envoy.maps.insert(MapType::HttpCallResponseHeaders, headers);
            envoy.maps.insert(MapType::HttpCallResponseTrailers, trailers);
            envoy.buffers.insert(BufferType::HttpCallResponseBody, body.to_vec());
        });
        // SAFETY: rule 3 (the context id is not read by the SDK's dispatcher).
        unsafe { vm::proxy_on_http_call_response(0, token, counts.0, body.len(), counts.1) }
    }

    pub(crate) fn stream_initial_metadata(token: u32) {
        // SAFETY: rule 3.
        unsafe { vm::proxy_on_grpc_receive_initial_metadata(0, token, 0) }
    }

    pub(crate) fn stream_message(token: u32, message: &[u8]) {
        envoy(|envoy| envoy.buffers.insert(BufferType::GrpcReceiveBuffer, message.to_vec()));
        // SAFETY: rule 3.
        unsafe { vm::proxy_on_grpc_receive(0, token, message.len()) }
    }

    pub(crate) fn stream_closed(token: u32, status: u32, trailers: Map) {
        let count = u32::try_from(trailers.len()).unwrap_or(u32::MAX);
        envoy(|envoy| envoy.maps.insert(MapType::GrpcReceiveTrailingMetadata, trailers));
        // SAFETY: rule 3.
        unsafe {
            if count > 0 {
                vm::proxy_on_grpc_receive_trailing_metadata(0, token, count);
            }
            vm::proxy_on_grpc_close(0, token, status);
        }
    }
}

//! The host calls the filter makes, each with its failure turned into a log line or an error
//! value, never a panic (a panic would kill the VM for every later request).

use std::time::{Duration, UNIX_EPOCH};

use log::warn;
use proxy_wasm::hostcalls;
use proxy_wasm::types::{BufferType, Bytes, MapType, Status};
use switchblade_core::host_api::{
    Conflict, Expect, HeaderCopy, HeaderPair, Observations, SharedCounters, WholeCallResponse,
};

pub(crate) fn now() -> Duration {
    hostcalls::get_current_time()
        .ok()
        .and_then(|now| now.duration_since(UNIX_EPOCH).ok())
        .unwrap_or_default()
}

/// One HTTP callout: a request sent whole to `cluster`, answered in `on_http_call_response`
/// under the token returned.
pub(crate) fn call_out(cluster: &str, headers: &[(&str, &str)], body: &[u8], timeout: Duration) -> Result<u32, Status> {
    hostcalls::dispatch_http_call(cluster, headers.to_vec(), Some(body), Vec::new(), timeout)
}

/// A header map read from the host: names, and values as bytes.
pub(crate) type HeaderMapBytes = Vec<(String, Bytes)>;

/// The headers, body and trailers of a callout's answer, in its `on_http_call_response`.
pub(crate) fn call_response(headers: usize, body_size: usize, trailers: usize) -> WholeCallResponse {
    (
        HeaderCopy::sized_from(header_pairs(&map_bytes(MapType::HttpCallResponseHeaders, headers))),
        buffer(BufferType::HttpCallResponseBody, body_size),
        HeaderCopy::sized_from(header_pairs(&map_bytes(MapType::HttpCallResponseTrailers, trailers))),
    )
}

/// All of a header map that has `count` entries (unknown: `usize::MAX`), as bytes. An empty
/// map is not asked for: the SDK panics on the status the host answers for a missing one.
pub(crate) fn map_bytes(map: MapType, count: usize) -> HeaderMapBytes {
    if count == 0 {
        return Vec::new();
    }
    hostcalls::get_map_bytes(map).unwrap_or_else(|status| {
        warn!("cannot read {map:?}: {status:?}");
        Vec::new()
    })
}

/// A map read from the host as the pairs the core reads.
pub(crate) fn header_pairs(map: &HeaderMapBytes) -> impl Iterator<Item = HeaderPair<'_>> + Clone {
    map.iter().map(|(name, value)| (name.as_str(), value.as_slice()))
}

/// One request header, as bytes.
pub(crate) fn header_value(name: &str) -> Option<Bytes> {
    hostcalls::get_map_value_bytes(MapType::HttpRequestHeaders, name)
        .ok()
        .flatten()
}

pub(crate) fn buffer(buffer: BufferType, size: usize) -> Bytes {
    hostcalls::get_buffer(buffer, 0, size)
        .unwrap_or_else(|status| {
            warn!("cannot read {buffer:?}: {status:?}");
            None
        })
        .unwrap_or_default()
}

/// The request's MCP facts as filter state `wasm.switchblade.<field>`, for the access log.
pub(crate) fn log_fields(observed: &Observations) {
    for (key, value) in observed.log_entries() {
        if let Err(status) = hostcalls::set_property(vec![key], Some(value.as_bytes())) {
            warn!("cannot set {key} for the access log: {status:?}");
        }
    }
}

/// A check-and-set version no entry reaches (Envoy counts from 1, one per write): a set with it
/// inserts a key where none is, and fails where another VM put one first.
const ONLY_IF_ABSENT: u32 = u32::MAX;

/// This plugin's part of proxy-wasm's shared data, which every worker's VM reads and writes (the
/// rate limits' counters, cancellations, the task key). Envoy keeps one store per `vm_id`, which
/// other plugins may share, so every key is under this plugin's name (SECURITY.md). A `set` with
/// the version a `get` gave fails if another VM wrote in between, and the core tries again.
#[derive(Debug)]
pub(crate) struct SharedData {
    prefix: String,
}

impl SharedData {
    /// The shared data of the plugin being configured, under `switchblade/<plugin name>/`.
    pub(crate) fn of_this_plugin() -> Self {
        let name = hostcalls::get_property(vec!["plugin_name"])
            .ok()
            .flatten()
            .map(|name| String::from_utf8_lossy(&name).into_owned())
            .unwrap_or_default();
        SharedData {
            prefix: format!("switchblade/{name}/"),
        }
    }

    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }
}

impl SharedCounters for SharedData {
    fn get(&self, key: &str) -> Option<(Vec<u8>, u32)> {
        let key = self.key(key);
        match hostcalls::get_shared_data(&key) {
            // An empty value comes without bytes, but with its version.
            Ok((bytes, Some(version))) => Some((bytes.unwrap_or_default(), version)),
            Ok((_, None)) => None,
            Err(status) => {
                warn!("cannot read shared data {key}: {status:?}");
                None
            }
        }
    }

    fn set(&self, key: &str, value: &[u8], expect: Expect) -> Result<(), Conflict> {
        let cas = match expect {
            Expect::Absent => ONLY_IF_ABSENT,
            Expect::Version(version) => version,
        };
        let key = self.key(key);
        hostcalls::set_shared_data(&key, Some(value), Some(cas)).map_err(|status| {
            if status != Status::CasMismatch {
                warn!("cannot write shared data {key}: {status:?}");
            }
            Conflict
        })
    }
}

//! The key this Envoy signs task ids with when a configuration has no `tasks.keys`. Each
//! worker runs a VM of its own, and a poll may reach any worker: so the VMs agree on one key
//! through proxy-wasm's shared data (one store per VM id, for the whole Envoy process; the key
//! under this plugin's own prefix). The first VM to look makes it; every other reads it.

use log::warn;
use proxy_wasm::hostcalls;
use proxy_wasm::types::Status;
use switchblade_core::host_api::fresh_process_key;

use crate::host_io::{SharedData, ONLY_IF_ABSENT};

const SHARED_KEY: &str = "tasks/process_key";

/// The Envoy's key: the one in shared data, or a fresh one put there first.
pub(crate) fn process_key(shared_data: &SharedData) -> Option<[u8; 32]> {
    let name = shared_data.key(SHARED_KEY);
    let shared = || -> Option<[u8; 32]> {
        let (value, _) = hostcalls::get_shared_data(&name).ok()?;
        value?.try_into().ok()
    };
    if let Some(key) = shared() {
        return Some(key);
    }
    let fresh = fresh_process_key()?;
    match hostcalls::set_shared_data(&name, Some(&fresh), Some(ONLY_IF_ABSENT)) {
        Ok(()) | Err(Status::CasMismatch) => {}
        Err(status) => warn!("cannot share this Envoy's task key between its workers: {status:?}"),
    }
    // Whoever won the race, its key is the one every VM uses.
    shared().or_else(|| {
        warn!("this Envoy's task key is not in shared data: this worker signs with a key of its own; set tasks.keys");
        Some(fresh)
    })
}

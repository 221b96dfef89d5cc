//! Cancellations shared by every VM of one Envoy: a client's `notifications/cancelled` may reach
//! any worker, and the stream it cancels may be open in another worker's VM. Each is written to
//! proxy-wasm shared data, in one of a fixed number of slots (so that a client sending many
//! cannot grow Envoy's memory), and the tick of the VM that holds the stream reads its slot. A
//! cancellation whose slot another takes before that tick is lost; the stream then ends at its
//! deadline, as it would have without one.

use log::warn;
use proxy_wasm::hostcalls;
use switchblade_core::host_api::CancelKey;

use crate::host_io::{now, SharedData};

/// The slots of the table; a cancellation is read within a tick of its writing.
const SLOTS: u64 = 256;

fn slot_name(shared: &SharedData, key: &CancelKey) -> String {
    shared.key(&format!("cancelled/{}", key.slot(SLOTS)))
}

/// Files the cancellation of the request under `key`.
pub(crate) fn file(shared: &SharedData, key: &CancelKey) {
    let record = key.record(now());
    if let Err(status) = hostcalls::set_shared_data(&slot_name(shared, key), Some(record.as_bytes()), None) {
        warn!("cannot file a cancellation: {status:?}");
    }
}

/// Whether the request under `key`, which came at `since`, has been cancelled.
pub(crate) fn is_cancelled(shared: &SharedData, key: &CancelKey, since: std::time::Duration) -> bool {
    match hostcalls::get_shared_data(&slot_name(shared, key)) {
        Ok((Some(record), _)) => key.is_cancelled_by(&record, since),
        _ => false,
    }
}

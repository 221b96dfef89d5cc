//! What the root context's tick does on requests' behalf: it has the timer that HTTP contexts
//! lack, so it ends the streams due ([`end_streams_due`]), starts the polls due
//! ([`wake_due_requests`]), and files the answers of the callouts it started for them
//! ([`answer_adopted_call`]), each under the request's own context.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use log::warn;
use proxy_wasm::hostcalls;

use crate::cancels;
use crate::exchange::Inner;
use crate::host_io::{now, SharedData};
use crate::stream_clock::{Ending, StreamClock};

/// Ends the streams whose deadline has passed or whose request was cancelled, on behalf of
/// their requests: each is cancelled; a deadline's call ends with the messages so far as its
/// result, a cancelled request with no response.
pub(crate) fn end_streams_due(clock: &StreamClock<Inner>, shared: &SharedData) {
    let cancelled = |key: &_, since| cancels::is_cancelled(shared, key, since);
    for (stream, ending) in clock.take_ending(now(), cancelled) {
        let Some(inner) = act_for(stream.context_id, &stream.owner, "stream ends") else {
            continue;
        };
        if let Err(status) = hostcalls::cancel_grpc_stream(stream.token) {
            warn!("cannot cancel a gRPC stream ({ending:?}): {status:?}");
        }
        let Ok(mut inner) = inner.try_borrow_mut() else {
            continue;
        };
        match ending {
            Ending::Deadline => inner.stream_deadline_passed(stream.token),
            Ending::Cancelled => inner.cancelled(),
        }
    }
}

/// Starts the calls of the requests whose wake-up is due (a task's next poll), on their
/// behalf.
pub(crate) fn wake_due_requests(clock: &StreamClock<Inner>) {
    for wake in clock.due_wakes(now()) {
        let Some(inner) = act_for(wake.context_id, &wake.owner, "poll is due") else {
            continue;
        };
        if let Ok(mut inner) = inner.try_borrow_mut() {
            inner.wake();
        };
    }
}

/// The answer to a callout the root context started for a request (a task's poll): filed
/// into that request, on its behalf. Whether the callout was one.
pub(crate) fn answer_adopted_call(
    clock: &StreamClock<Inner>,
    token: u32,
    headers: usize,
    body_size: usize,
    trailers: usize,
) -> bool {
    let Some((context_id, owner)) = clock.take_adopted(token) else {
        return false;
    };
    let Some(inner) = act_for(context_id, &owner, "poll was answered") else {
        return true;
    };
    if let Ok(mut inner) = inner.try_borrow_mut() {
        inner.call_answered(token, (headers, body_size, trailers), true);
    };
    true
}

/// The request of `context_id`, with the host's calls from here on acting on its stream, not
/// the root context's; `None` if the request is gone or the host refuses (logged, with `why`).
fn act_for(context_id: u32, owner: &Weak<RefCell<Inner>>, why: &str) -> Option<Rc<RefCell<Inner>>> {
    let inner = owner.upgrade()?;
    if let Err(status) = hostcalls::set_effective_context(context_id) {
        warn!("cannot act for a request whose {why}: {status:?}");
        return None;
    }
    Some(inner)
}

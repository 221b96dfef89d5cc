//! What the root context's tick does on requests' behalf: it has the timer that HTTP contexts
//! lack, so it ends the streams due ([`end_streams_due`]), starts the polls due
//! ([`wake_due_requests`]), and files the answers of the callouts it started for them
//! ([`answer_adopted_call`]), each under the request's own context.

use std::cell::RefCell;
use std::rc::Rc;

use log::warn;
use proxy_wasm::hostcalls;
use switchblade_core::host_api::Ending;

use crate::exchange::{Clock, Inner, Owner};
use crate::host_io::{now, SharedData};

/// Ends the streams whose deadline has passed or whose request was cancelled, on behalf of
/// their requests: each is cancelled; a deadline's call ends with the messages so far as its
/// result, a cancelled request with no response.
pub(crate) fn end_streams_due(clock: &Clock, shared: &SharedData) {
    let ending = clock
        .borrow_mut()
        .ending(now(), |key, since| key.is_cancelled_in(shared, since));
    for (stream, ending) in ending {
        let Some(inner) = act_for(&stream.request, "stream ends") else {
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
pub(crate) fn wake_due_requests(clock: &Clock) {
    let due = clock.borrow_mut().due(now());
    for request in due {
        let Some(inner) = act_for(&request, "poll is due") else {
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
    clock: &Clock,
    token: u32,
    headers: usize,
    body_size: usize,
    trailers: usize,
) -> bool {
    let adopted = clock.borrow_mut().adopted(token);
    let Some(request) = adopted else {
        return false;
    };
    let Some(inner) = act_for(&request, "poll was answered") else {
        return true;
    };
    if let Ok(mut inner) = inner.try_borrow_mut() {
        inner.call_answered(token, (headers, body_size, trailers), true);
    };
    true
}

/// The request, with the host's calls from here on acting on its stream, not the root
/// context's; `None` if the request is gone or the host refuses (logged, with `why`).
fn act_for(request: &Owner, why: &str) -> Option<Rc<RefCell<Inner>>> {
    let inner = request.inner.upgrade()?;
    if let Err(status) = hostcalls::set_effective_context(request.context_id) {
        warn!("cannot act for a request whose {why}: {status:?}");
        return None;
    }
    Some(inner)
}

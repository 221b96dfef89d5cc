//! What the root context does for requests, which have no timer of their own: its tick ends
//! their streams due and starts their polls due, each under the request's own context.

use log::warn;
use proxy_wasm::hostcalls;
use switchblade_core::host_api::{Ending, Exchange as Core, Server, SharedCounters};

use crate::exchange::{Clock, Handle, Host, Owner};
use crate::host_io::now;

/// Ends the streams whose deadline has passed (the call ends with the messages so far) or
/// whose request was cancelled (with no response); then wakes the requests whose poll is due.
pub(crate) fn tick(clock: &Clock, shared: &dyn SharedCounters) {
    let now = now();
    let ending = clock
        .borrow_mut()
        .ending(now, |key, since| key.is_cancelled_in(shared, since));
    for (stream, ending) in ending {
        let token = stream.token;
        act_for(&stream.request, |exchange, server, host| {
            if let Err(status) = hostcalls::cancel_grpc_stream(token) {
                warn!("cannot cancel a gRPC stream ({ending:?}): {status:?}");
            }
            match ending {
                Ending::Deadline => exchange.call_ended(server, host, Handle::Stream(token), true),
                Ending::Cancelled => exchange.cancelled(server, host),
            }
        });
    }
    let due = clock.borrow_mut().due(now);
    for request in due {
        act_for(&request, |exchange, server, host| exchange.wake(server, host));
    }
}

/// Runs `event` for `request`, if it is still there, with the host's calls acting on its
/// stream rather than the root context's.
pub(crate) fn act_for(request: &Owner, event: impl FnOnce(&mut Core<Handle>, &Server, &mut Host)) {
    let Some(inner) = request.inner.upgrade() else {
        return;
    };
    if let Err(status) = hostcalls::set_effective_context(request.context_id) {
        warn!("cannot act for a request from the tick: {status:?}");
        return;
    }
    if let Ok(mut inner) = inner.try_borrow_mut() {
        inner.event(true, event);
    };
}

//! The wake-ups of a request that waits for a long-running operation: when a task tool's call
//! is to poll the operation again later, the exchange asks Envoy to wake it then, and starts
//! the poll when it does.

use std::time::Instant;

use super::{Exchange, State, POLL_DUE};
use crate::clock::now;
use crate::host::StreamHost;

impl Exchange {
    /// Asks to be woken when the reply's next scheduled call is due, if it has one. A host that
    /// cannot wake the request ends its waits now, so that it is answered, not held.
    pub(super) fn wake_for_scheduled(&self, host: &impl StreamHost) {
        let next = match &*self.state.borrow() {
            State::CallingOut(reply) => reply.next_wake(),
            _ => None,
        };
        let Some(at) = next else {
            return;
        };
        let when = Instant::now() + at.saturating_sub(now());
        if let Some(alarm) = host.wake_at(when, POLL_DUE) {
            self.poll.replace(Some(alarm));
            return;
        }
        log::warn!("cannot wake a request to poll its operation later; it is answered as still running");
        if let State::CallingOut(reply) = &mut *self.state.borrow_mut() {
            self.server().stop_waiting(reply, &mut self.observed.borrow_mut());
        }
        self.advance(host);
    }

    /// A scheduled call is due: start it.
    pub(super) fn poll_due(&self, host: &impl StreamHost) {
        self.poll.replace(None);
        self.advance(host);
    }
}

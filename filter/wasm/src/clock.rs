//! The gRPC streams a VM's requests have open, and what may end them early: their deadline, or
//! their client's `notifications/cancelled`. Proxy-wasm gives an HTTP context no timer of its
//! own, and Envoy's gRPC streams from Wasm take no timeout: the root context's tick looks for
//! streams past their deadline or cancelled, stops them, and ends their calls on behalf of the
//! request (whose state it reaches through a weak handle).

use std::cell::RefCell;
use std::rc::Weak;
use std::time::Duration;

use switchblade_core::cancel::CancelKey;

/// How often the root context looks, while any stream is open: the precision of a stream's
/// collection window, and how soon a cancellation takes effect.
pub(crate) const STREAM_TICK: Duration = Duration::from_millis(100);

/// A stream that ends at its deadline unless it ends before.
pub(crate) struct OpenStream<T> {
    pub(crate) deadline: Duration,
    /// The key its request may be cancelled under, and when the request came.
    pub(crate) cancel: Option<(CancelKey, Duration)>,
    /// The HTTP context the stream belongs to, for the host calls made on its behalf.
    pub(crate) context_id: u32,
    /// The host's gRPC stream token.
    pub(crate) token: u32,
    pub(crate) owner: Weak<RefCell<T>>,
}

/// Why the tick ends a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    Deadline,
    Cancelled,
}

/// The open streams of one VM.
pub(crate) struct StreamClock<T> {
    open: RefCell<Vec<OpenStream<T>>>,
}

impl<T> Default for StreamClock<T> {
    fn default() -> Self {
        StreamClock {
            open: RefCell::new(Vec::new()),
        }
    }
}

impl<T> StreamClock<T> {
    pub(crate) fn add(&self, stream: OpenStream<T>) {
        self.open.borrow_mut().push(stream);
    }

    /// The stream under `token` has ended: nothing ends it any more.
    pub(crate) fn remove(&self, token: u32) {
        self.open.borrow_mut().retain(|stream| stream.token != token);
    }

    /// Takes out the streams whose deadline is at or before `now`, those whose request was
    /// cancelled (`cancelled` says, from its key and when it came), and those whose request is
    /// gone.
    pub(crate) fn take_ending(
        &self,
        now: Duration,
        cancelled: impl Fn(&CancelKey, Duration) -> bool,
    ) -> Vec<(OpenStream<T>, Ending)> {
        let mut open = self.open.borrow_mut();
        let mut ending = Vec::new();
        for stream in std::mem::take(&mut *open) {
            let cancel = stream
                .cancel
                .as_ref()
                .is_some_and(|(key, since)| cancelled(key, *since));
            match (cancel, stream.deadline <= now || stream.owner.strong_count() == 0) {
                (true, _) => ending.push((stream, Ending::Cancelled)),
                (false, true) => ending.push((stream, Ending::Deadline)),
                (false, false) => open.push(stream),
            }
        }
        ending
    }
}

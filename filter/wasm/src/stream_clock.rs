//! The gRPC streams a VM's requests have open, and what may end them early: their deadline, or
//! their client's `notifications/cancelled`. Proxy-wasm gives an HTTP context no timer of its
//! own, and Envoy's gRPC streams from Wasm take no timeout: the root context's tick looks for
//! streams past their deadline or cancelled, stops them, and ends their calls on behalf of the
//! request (whose state it reaches through a weak handle).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Weak;
use std::time::Duration;

use switchblade_core::host_api::CancelKey;

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

/// A request to start calls again at a time: a task's next poll of its operation.
pub(crate) struct Wake<T> {
    pub(crate) at: Duration,
    /// The HTTP context of the request, for the host calls made on its behalf.
    pub(crate) context_id: u32,
    pub(crate) owner: Weak<RefCell<T>>,
}

/// The open streams of one VM, by deadline, the requests waiting to be woken, and the callouts
/// the tick started on their behalf.
pub(crate) struct StreamClock<T> {
    open: RefCell<Vec<OpenStream<T>>>,
    wakes: RefCell<Vec<Wake<T>>>,
    /// Callout token → the request it was started for. The SDK files a callout under the
    /// context it was started from, which for the tick is the root context: the root hands
    /// its answer to the request.
    adopted: RefCell<HashMap<u32, Owner<T>>>,
}

/// A request, as the root context acts for it: its HTTP context, and its state.
pub(crate) type Owner<T> = (u32, Weak<RefCell<T>>);

impl<T> Default for StreamClock<T> {
    fn default() -> Self {
        StreamClock {
            open: RefCell::new(Vec::new()),
            wakes: RefCell::new(Vec::new()),
            adopted: RefCell::new(HashMap::new()),
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

    /// Wakes the request of `wake.context_id` at `wake.at` (in place of an earlier wake-up).
    pub(crate) fn wake(&self, wake: Wake<T>) {
        let mut wakes = self.wakes.borrow_mut();
        wakes.retain(|known| known.context_id != wake.context_id);
        wakes.push(wake);
    }

    /// Takes out the wake-ups due at `now` (and those whose request is gone).
    pub(crate) fn due_wakes(&self, now: Duration) -> Vec<Wake<T>> {
        let mut wakes = self.wakes.borrow_mut();
        let (due, kept) = std::mem::take(&mut *wakes)
            .into_iter()
            .partition(|wake| wake.at <= now || wake.owner.strong_count() == 0);
        *wakes = kept;
        due
    }

    /// The callout under `token`, started by the root context, belongs to the request of
    /// `context_id`.
    pub(crate) fn adopt(&self, token: u32, context_id: u32, owner: Weak<RefCell<T>>) {
        self.adopted.borrow_mut().insert(token, (context_id, owner));
    }

    /// The request a callout started by the root context belongs to, if it is one.
    pub(crate) fn take_adopted(&self, token: u32) -> Option<Owner<T>> {
        self.adopted.borrow_mut().remove(&token)
    }
}

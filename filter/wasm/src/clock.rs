//! The deadlines of the gRPC streams a VM's requests have open. Proxy-wasm gives an HTTP
//! context no timer of its own, and Envoy's gRPC streams from Wasm take no timeout: the root
//! context's tick looks for streams past their deadline, cancels them, and ends their calls on
//! behalf of the request (whose state it reaches through a weak handle).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Weak;
use std::time::Duration;

/// How often the root context looks, while any stream is open: the precision of a stream's
/// collection window.
pub(crate) const STREAM_TICK: Duration = Duration::from_millis(100);

/// A stream that ends at its deadline unless it ends before.
pub(crate) struct Deadline<T> {
    pub(crate) at: Duration,
    /// The HTTP context the stream belongs to, for the host calls made on its behalf.
    pub(crate) context_id: u32,
    /// The host's gRPC stream token.
    pub(crate) token: u32,
    pub(crate) owner: Weak<RefCell<T>>,
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
    open: RefCell<Vec<Deadline<T>>>,
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
    pub(crate) fn add(&self, deadline: Deadline<T>) {
        self.open.borrow_mut().push(deadline);
    }

    /// The stream under `token` has ended: it no longer has a deadline.
    pub(crate) fn remove(&self, token: u32) {
        self.open.borrow_mut().retain(|deadline| deadline.token != token);
    }

    /// Takes out the streams whose deadline is at or before `now` (and those whose request is
    /// gone).
    pub(crate) fn expired(&self, now: Duration) -> Vec<Deadline<T>> {
        let mut open = self.open.borrow_mut();
        let (expired, kept) = std::mem::take(&mut *open)
            .into_iter()
            .partition(|deadline| deadline.at <= now || deadline.owner.strong_count() == 0);
        *open = kept;
        expired
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

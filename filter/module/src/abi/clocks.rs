//! The module's clocks: a configuration's ticker (reflection refreshes, on the main thread), and
//! its wake-ups of streams on their workers: deadlines (routed calls), kept by a thread, and
//! cancellations heard on another stream. Both commit Envoy's schedulers (rules 7 and 8).

use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::bindings::*;

/// A config scheduler, which Envoy lets any thread commit (rule 7).
struct Scheduler(*mut c_void);

// SAFETY: Envoy documents the config scheduler's commit as safe from any thread; the pointer is
// deleted only after the one thread that holds it is joined (rule 7).
unsafe impl Send for Scheduler {}
// SAFETY: as for Send: shared between the ticker and its owner, only commit is called through it.
unsafe impl Sync for Scheduler {}

/// A thread that asks Envoy, every `period`, to run `on_http_filter_config_scheduled` on the
/// main thread: the configuration's clock for work of its own (reflection refreshes).
pub struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    scheduler: Arc<Scheduler>,
}

impl Ticker {
    pub(super) fn start(config: HttpFilterConfigEnvoyPtr, period: Duration) -> Option<Ticker> {
        // SAFETY: the config pointer, inside `on_http_filter_config_new` (rule 7).
        let scheduler = unsafe { envoy_dynamic_module_callback_http_filter_config_scheduler_new(config) };
        if scheduler.is_null() {
            return None;
        }
        let scheduler = Arc::new(Scheduler(scheduler));
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_stop, thread_scheduler) = (Arc::clone(&stop), Arc::clone(&scheduler));
        let thread = std::thread::Builder::new()
            .name("switchblade-tick".into())
            .spawn(move || {
                while !thread_stop.load(Ordering::Acquire) {
                    std::thread::park_timeout(period);
                    if thread_stop.load(Ordering::Acquire) {
                        break;
                    }
                    // SAFETY: the scheduler lives until this thread is joined (rule 7).
                    unsafe { envoy_dynamic_module_callback_http_filter_config_scheduler_commit(thread_scheduler.0, 0) };
                }
            })
            .ok()?;
        Some(Ticker {
            stop,
            thread: Some(thread),
            scheduler,
        })
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
        // SAFETY: the only other holder, the thread, is joined (rule 7).
        unsafe { envoy_dynamic_module_callback_http_filter_config_scheduler_delete(self.scheduler.0) };
    }
}

/// A stream's scheduler: committing it runs the stream's `on_http_filter_scheduled` hook on its
/// worker (rule 8).
#[derive(Clone, Copy)]
pub(super) struct StreamScheduler(pub(super) *mut c_void);

// SAFETY: Envoy's stream scheduler may be committed from any thread until it is deleted; it is
// committed only under the wake-ups' lock while it is filed there, and deleted on the stream's
// worker after it has left them (rule 8).
unsafe impl Send for StreamScheduler {}

/// The wake-ups filed: deadlines by when they fall due (and an order of arrival, for ties), and
/// the streams waiting to hear that their request was cancelled, by its cancel key.
#[derive(Default)]
struct Filed {
    due: BTreeMap<(Instant, u64), (StreamScheduler, u64)>,
    listening: HashMap<String, Vec<(u64, StreamScheduler, u64)>>,
    next_key: u64,
    stop: bool,
    /// When the deadline thread's last sleep ends (none before its first): a deadline due
    /// before then must wake it.
    thread_wakes_at: Option<Instant>,
}

/// How long the deadline thread sleeps with no deadline filed before it looks again. A
/// deadline filed meanwhile that falls after its wake-up needs no wake of its own: with a
/// timeout of this or more (the default is 10 s), none does.
const IDLE_SLEEP: Duration = Duration::from_secs(1);

/// A configuration's wake-ups of its streams: one thread commits each stream's scheduler when
/// its deadline falls due, and [`Wakeups::wake_listeners`] commits those of the streams waiting
/// under a cancel key, from whichever worker heard the cancellation. The thread is joined when
/// the configuration goes (rule 8).
pub struct Wakeups {
    shared: Arc<(Mutex<Filed>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Wakeups {
    /// Starts the deadline thread; `None` if it cannot be started.
    pub fn start() -> Option<Wakeups> {
        let shared: Arc<(Mutex<Filed>, Condvar)> = Arc::default();
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("switchblade-deadlines".into())
            .spawn(move || run_deadlines(&thread_shared))
            .ok()?;
        Some(Wakeups {
            shared,
            thread: Some(thread),
        })
    }

    fn filed(&self) -> MutexGuard<'_, Filed> {
        lock(&self.shared.0)
    }

    /// Queues `scheduler` to be committed with `event` at `when`; the key to cancel it with.
    pub(super) fn add(&self, when: Instant, scheduler: StreamScheduler, event: u64) -> (Instant, u64) {
        let mut filed = self.filed();
        filed.next_key += 1;
        let key = (when, filed.next_key);
        filed.due.insert(key, (scheduler, event));
        // Only a deadline due before the thread's wake-up needs to wake it. Calls with the same
        // timeout file their deadlines in order, and an idle thread wakes within IDLE_SLEEP, so
        // under load this spares the worker a futex wake and a switch to the thread per call
        // (also when every call has ended and the next one files into an empty queue).
        let wakes_thread = filed.thread_wakes_at.is_none_or(|wakes_at| when < wakes_at);
        drop(filed);
        if wakes_thread {
            self.shared.1.notify_one();
        }
        key
    }

    /// Takes a deadline out of the queue: once this returns, its scheduler is never committed.
    fn cancel(&self, key: (Instant, u64)) {
        self.filed().due.remove(&key);
    }

    /// Files `scheduler` to be committed with `event` when a cancellation names `cancel_key`;
    /// the id to take it out with.
    pub(super) fn listen(&self, cancel_key: &str, scheduler: StreamScheduler, event: u64) -> u64 {
        let mut filed = self.filed();
        filed.next_key += 1;
        let id = filed.next_key;
        filed
            .listening
            .entry(cancel_key.to_owned())
            .or_default()
            .push((id, scheduler, event));
        id
    }

    /// Takes a listener out: once this returns, its scheduler is never committed.
    fn stop_listening(&self, cancel_key: &str, id: u64) {
        let mut filed = self.filed();
        if let Some(listeners) = filed.listening.get_mut(cancel_key) {
            listeners.retain(|(listener, _, _)| *listener != id);
            if listeners.is_empty() {
                filed.listening.remove(cancel_key);
            }
        }
    }

    /// Wakes the streams listening under `cancel_key`; how many there were.
    pub(super) fn wake_listeners(&self, cancel_key: &str) -> usize {
        let filed = self.filed();
        let Some(listeners) = filed.listening.get(cancel_key) else {
            return 0;
        };
        for (_, scheduler, event) in listeners {
            // SAFETY: the listener is filed and the lock is held: its stream's worker cannot
            // have deleted the scheduler (rule 8).
            unsafe { envoy_dynamic_module_callback_http_filter_scheduler_commit(scheduler.0, *event) };
        }
        listeners.len()
    }
}

impl Drop for Wakeups {
    fn drop(&mut self) {
        self.filed().stop = true;
        self.shared.1.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A lock that a panic elsewhere does not make unusable: what is filed stays consistent (every
/// change to it is a single insert or remove).
fn lock(mutex: &Mutex<Filed>) -> MutexGuard<'_, Filed> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The deadline thread: sleeps until the first deadline, commits it, and so on until stopped;
/// with none filed, it sleeps for IDLE_SLEEP and looks again. It never sleeps past the first
/// deadline: it sleeps until the first one it saw, deadlines taken out only make the first one
/// later, and a deadline filed that falls before its wake-up wakes it ([`Wakeups::add`]).
fn run_deadlines(shared: &(Mutex<Filed>, Condvar)) {
    let (mutex, wake) = shared;
    let mut filed = lock(mutex);
    while !filed.stop {
        let now = Instant::now();
        let first = filed.due.first_key_value().map(|(&key, _)| key);
        if let Some(key) = first.filter(|key| key.0 <= now) {
            if let Some((scheduler, event)) = filed.due.remove(&key) {
                // SAFETY: its deadline was queued until now, and the lock is held: the stream's
                // worker cannot have deleted the scheduler (rule 8).
                unsafe { envoy_dynamic_module_callback_http_filter_scheduler_commit(scheduler.0, event) };
            }
            continue;
        }
        let wakes_at = first.map_or(now + IDLE_SLEEP, |key| key.0);
        // Read by `add` only while this thread waits: the wait releases the lock, and it is
        // held from the wake-up to the next wait, which sets it again.
        filed.thread_wakes_at = Some(wakes_at);
        filed = wake
            .wait_timeout(filed, wakes_at - now)
            .map(|(filed, _)| filed)
            .unwrap_or_else(|poisoned| poisoned.into_inner().0);
    }
}

/// A queued deadline of one stream, and the scheduler it commits: dropping it (on the stream's
/// worker) takes the deadline out of the queue, then deletes the scheduler (rule 8).
pub(super) struct DeadlineAlarm {
    pub(super) wakeups: &'static Wakeups,
    pub(super) key: (Instant, u64),
    pub(super) scheduler: StreamScheduler,
}

impl Drop for DeadlineAlarm {
    fn drop(&mut self) {
        self.wakeups.cancel(self.key);
        // SAFETY: the deadline has left the queue, so the thread no longer commits it; this is
        // the one delete of the scheduler made for it (rule 8).
        unsafe { envoy_dynamic_module_callback_http_filter_scheduler_delete(self.scheduler.0) };
    }
}

/// A stream listening for the cancellation of its request: dropping it (on the stream's worker)
/// takes it out of the listeners, then deletes its scheduler (rule 8).
pub(super) struct CancelListener {
    pub(super) wakeups: &'static Wakeups,
    pub(super) cancel_key: String,
    pub(super) id: u64,
    pub(super) scheduler: StreamScheduler,
}

impl Drop for CancelListener {
    fn drop(&mut self) {
        self.wakeups.stop_listening(&self.cancel_key, self.id);
        // SAFETY: the listener has left the wake-ups, so nothing commits it any more; this is
        // the one delete of the scheduler made for it (rule 8).
        unsafe { envoy_dynamic_module_callback_http_filter_scheduler_delete(self.scheduler.0) };
    }
}

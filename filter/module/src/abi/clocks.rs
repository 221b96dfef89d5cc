//! The module's clocks: a configuration's ticker (reflection refreshes, on the main thread) and
//! its deadlines (routed calls, on each stream's worker), both threads that commit Envoy's
//! schedulers (rules 7 and 8).

use std::collections::BTreeMap;
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
// committed only under the deadline queue's lock while its deadline is queued, and deleted on
// the stream's worker after the deadline has left the queue (rule 8).
unsafe impl Send for StreamScheduler {}

/// The deadlines waiting, by when they fall due (and an order of arrival, for ties).
#[derive(Default)]
struct Queue {
    due: BTreeMap<(Instant, u64), (StreamScheduler, u64)>,
    next_key: u64,
    stop: bool,
}

/// The clock of a configuration's routed calls: one thread that commits each stream's scheduler
/// when its deadline falls due. Joined when the configuration goes (rule 8).
pub struct Deadlines {
    shared: Arc<(Mutex<Queue>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Deadlines {
    /// Starts the clock's thread; `None` if it cannot be started.
    pub fn start() -> Option<Deadlines> {
        let shared: Arc<(Mutex<Queue>, Condvar)> = Arc::default();
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("switchblade-deadlines".into())
            .spawn(move || run_deadlines(&thread_shared))
            .ok()?;
        Some(Deadlines {
            shared,
            thread: Some(thread),
        })
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        lock(&self.shared.0)
    }

    /// Queues `scheduler` to be committed with `event` at `when`; the key to cancel it with.
    pub(super) fn add(&self, when: Instant, scheduler: StreamScheduler, event: u64) -> (Instant, u64) {
        let mut queue = self.queue();
        queue.next_key += 1;
        let key = (when, queue.next_key);
        queue.due.insert(key, (scheduler, event));
        drop(queue);
        self.shared.1.notify_one();
        key
    }

    /// Takes a deadline out of the queue: once this returns, its scheduler is never committed.
    fn cancel(&self, key: (Instant, u64)) {
        self.queue().due.remove(&key);
    }
}

impl Drop for Deadlines {
    fn drop(&mut self) {
        self.queue().stop = true;
        self.shared.1.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A lock that a panic elsewhere does not make unusable: the queue stays consistent (every
/// change to it is a single insert or remove).
fn lock(mutex: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The deadline thread: sleeps until the first deadline, commits it, and so on until stopped.
fn run_deadlines(shared: &(Mutex<Queue>, Condvar)) {
    let (mutex, wake) = shared;
    let mut queue = lock(mutex);
    while !queue.stop {
        let now = Instant::now();
        let Some((&key, _)) = queue.due.first_key_value() else {
            queue = wake.wait(queue).unwrap_or_else(PoisonError::into_inner);
            continue;
        };
        if key.0 > now {
            queue = wake
                .wait_timeout(queue, key.0 - now)
                .map(|(queue, _)| queue)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
            continue;
        }
        if let Some((scheduler, event)) = queue.due.remove(&key) {
            // SAFETY: its deadline was queued until now, and the lock is held: the stream's
            // worker cannot have deleted the scheduler (rule 8).
            unsafe { envoy_dynamic_module_callback_http_filter_scheduler_commit(scheduler.0, event) };
        }
    }
}

/// A queued deadline of one stream, and the scheduler it commits: dropping it (on the stream's
/// worker) takes the deadline out of the queue, then deletes the scheduler (rule 8).
pub(super) struct DeadlineAlarm {
    pub(super) deadlines: &'static Deadlines,
    pub(super) key: (Instant, u64),
    pub(super) scheduler: StreamScheduler,
}

impl Drop for DeadlineAlarm {
    fn drop(&mut self) {
        self.deadlines.cancel(self.key);
        // SAFETY: the deadline has left the queue, so the thread no longer commits it; this is
        // the one delete of the scheduler made for it (rule 8).
        unsafe { envoy_dynamic_module_callback_http_filter_scheduler_delete(self.scheduler.0) };
    }
}

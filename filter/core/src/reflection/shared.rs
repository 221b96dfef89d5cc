//! A configuration's [`Refresher`] shared by the threads that may touch it (the dynamic
//! module's configuration lives as long as Envoy's workers and main thread), and safe to re-enter:
//! Envoy may tell a call's answer from inside the host's own call that starts it, while the
//! refresher is in use. What is told then is kept, and handed over as soon as the start returns.

use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Duration;

use super::{ReflectionCall, Refreshed, Refresher};
use crate::grpc::call_end::{CallPart, WholeCallResponse};
use crate::grpc::deferred::Deferred;

/// One configuration's reflection refreshes, behind a lock.
#[derive(Debug)]
pub struct SharedRefresher {
    refresher: Mutex<Refresher>,
    /// What the host told about a call while the refresher was in use.
    deferred: Mutex<Vec<(u64, Deferred)>>,
}

/// A lock that a panic leaves readable: the refresher's state stays consistent between calls.
fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SharedRefresher {
    pub fn new(refresher: Refresher) -> Self {
        SharedRefresher {
            refresher: Mutex::new(refresher),
            deferred: Mutex::default(),
        }
    }

    /// [`Refresher::tick`]; then what was told meanwhile.
    pub fn tick(
        &self,
        now: Duration,
        mut start: impl FnMut(&ReflectionCall) -> Result<u64, String>,
    ) -> Option<Refreshed> {
        let refreshed = locked(&self.refresher).tick(now, &mut start);
        self.deliver_deferred(now, start).or(refreshed)
    }

    /// [`Refresher::heard`], or kept if the refresher is in use.
    pub fn heard(&self, token: u64, part: CallPart<'_>) {
        match self.refresher.try_lock() {
            Ok(mut refresher) => refresher.heard(token, part),
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner().heard(token, part),
            Err(TryLockError::WouldBlock) => locked(&self.deferred).push((token, Deferred::from(part))),
        }
    }

    /// [`Refresher::ended`], or kept if the refresher is in use; then what was told meanwhile.
    pub fn ended(
        &self,
        token: u64,
        reset: bool,
        now: Duration,
        mut start: impl FnMut(&ReflectionCall) -> Result<u64, String>,
    ) -> Option<Refreshed> {
        let refreshed = match self.refresher.try_lock() {
            Ok(mut refresher) => refresher.ended(token, reset, now, &mut start),
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner().ended(token, reset, now, &mut start),
            Err(TryLockError::WouldBlock) => {
                locked(&self.deferred).push((token, Deferred::Ended { reset }));
                return None;
            }
        };
        self.deliver_deferred(now, start).or(refreshed)
    }

    /// [`Refresher::answered`], for a host that hears an answer whole (and never inside a
    /// start); then what was told meanwhile.
    pub fn answered(
        &self,
        token: u64,
        body_size: usize,
        read: impl FnOnce() -> WholeCallResponse,
        now: Duration,
        mut start: impl FnMut(&ReflectionCall) -> Result<u64, String>,
    ) -> Option<Refreshed> {
        let refreshed = locked(&self.refresher).answered(token, body_size, read, now, &mut start);
        self.deliver_deferred(now, start).or(refreshed)
    }

    /// Hands over what was told while the refresher was in use; how a refresh ended, if one did.
    fn deliver_deferred(
        &self,
        now: Duration,
        mut start: impl FnMut(&ReflectionCall) -> Result<u64, String>,
    ) -> Option<Refreshed> {
        let mut refreshed = None;
        loop {
            let deferred = std::mem::take(&mut *locked(&self.deferred));
            if deferred.is_empty() {
                return refreshed;
            }
            for (token, told) in deferred {
                match told {
                    Deferred::Part(part) => self.heard(token, part.as_part()),
                    Deferred::Ended { reset } => {
                        let ended = locked(&self.refresher).ended(token, reset, now, &mut start);
                        refreshed = ended.or(refreshed);
                    }
                }
            }
        }
    }
}

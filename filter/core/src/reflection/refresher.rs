//! The host contract for live discovery: the host says when the clock ticks and how to start a
//! call, hands over what it hears on each (in parts, or whole), and says when each has ended;
//! the refresher keeps the calls under the host's tokens, follows each refresh's rounds, and
//! says how a refresh ended. The host then counts it, logs it, and serves the new server when
//! the API changed.

use std::collections::HashMap;
use std::time::Duration;

use super::{Discovery, ReflectionCall, ReflectionCallEnd, Refreshed, Step, MAX_ANSWER_BYTES};
use crate::grpc::call_end::{CallPart, CallResponse, WholeCallResponse};

/// One configuration's reflection refreshes, as a host drives them.
#[derive(Debug)]
pub struct Refresher {
    discovery: Discovery,
    /// The host's token of each call out → its reflection call, and what has come back.
    out: HashMap<u64, (u64, CallResponse)>,
}

impl Refresher {
    pub fn new(discovery: Discovery) -> Self {
        Refresher {
            discovery,
            out: HashMap::new(),
        }
    }

    /// The clock ticked at `now`: starts a refresh if one is due, with `start` (the host's way
    /// to start a call: its token, or why it could not). How the refresh ended, if it ended at
    /// once (every call refused).
    pub fn tick(
        &mut self,
        now: Duration,
        start: impl FnMut(&ReflectionCall) -> Result<u64, String>,
    ) -> Option<Refreshed> {
        if !self.discovery.is_due(now) {
            return None;
        }
        let calls = self.discovery.start(now);
        self.follow(Step::Call(calls), now, start)
    }

    /// Adds a part of the answer to the call under `token`; a token not out is ignored.
    pub fn heard(&mut self, token: u64, part: CallPart<'_>) {
        if let Some((_, response)) = self.out.get_mut(&token) {
            response.add(part, MAX_ANSWER_BYTES);
        }
    }

    /// The call under `token` has ended (`reset`: without a whole answer): its answer is filed,
    /// and the refresh goes on with `start` if it needs another round.
    pub fn ended(
        &mut self,
        token: u64,
        reset: bool,
        now: Duration,
        start: impl FnMut(&ReflectionCall) -> Result<u64, String>,
    ) -> Option<Refreshed> {
        let (id, response) = self.out.remove(&token)?;
        let step = if reset {
            let reason = "the call was reset (a connection failure, the timeout, or no healthy upstream)";
            self.discovery.file(id, ReflectionCallEnd::Failed(reason), now)
        } else if response.size() > MAX_ANSWER_BYTES {
            self.too_large(id, response.size(), now)
        } else {
            let (headers, body, trailers) = response.parts();
            let answer = ReflectionCallEnd::Http {
                headers: &headers,
                body,
                trailers: &trailers,
            };
            self.discovery.file(id, answer, now)
        };
        self.follow(step, now, start)
    }

    /// The call under `token` was answered whole, with a body of `body_size` bytes: `read`
    /// gives its parts, and is not called when the body is over [`MAX_ANSWER_BYTES`].
    pub fn answered(
        &mut self,
        token: u64,
        body_size: usize,
        read: impl FnOnce() -> WholeCallResponse,
        now: Duration,
        start: impl FnMut(&ReflectionCall) -> Result<u64, String>,
    ) -> Option<Refreshed> {
        let (id, _) = self.out.remove(&token)?;
        let step = if body_size > MAX_ANSWER_BYTES {
            self.too_large(id, body_size, now)
        } else {
            let (headers, body, trailers) = read();
            let (headers, trailers) = (headers.pairs(), trailers.pairs());
            let answer = ReflectionCallEnd::Http {
                headers: &headers,
                body: &body,
                trailers: &trailers,
            };
            self.discovery.file(id, answer, now)
        };
        self.follow(step, now, start)
    }

    fn too_large(&mut self, id: u64, size: usize, now: Duration) -> Step {
        let reason = format!("an answer of {size} bytes, over {MAX_ANSWER_BYTES}");
        self.discovery.file(id, ReflectionCallEnd::Failed(&reason), now)
    }

    /// Does what filing an answer asked for: starts the next round's calls (filing at once
    /// those the host could not start), until the refresh waits or has ended.
    fn follow(
        &mut self,
        step: Step,
        now: Duration,
        mut start: impl FnMut(&ReflectionCall) -> Result<u64, String>,
    ) -> Option<Refreshed> {
        let mut calls = match step {
            Step::Wait => return None,
            Step::Done(refreshed) => return Some(refreshed),
            Step::Call(calls) => calls,
        };
        let mut refreshed = None;
        while let Some(call) = calls.pop() {
            let step = match start(&call) {
                Ok(token) => {
                    self.out.insert(token, (call.id, CallResponse::default()));
                    Step::Wait
                }
                Err(reason) => {
                    let reason = format!("cannot call cluster {:?}: {reason}", call.cluster());
                    self.discovery.file(call.id, ReflectionCallEnd::Failed(&reason), now)
                }
            };
            match step {
                Step::Wait => {}
                Step::Call(more) => calls.extend(more),
                Step::Done(done) => refreshed = Some(done),
            }
        }
        refreshed
    }
}

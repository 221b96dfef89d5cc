//! Live discovery in the module: the core's [`Discovery`] driven from the configuration's own
//! main-thread hooks. A ticker thread asks Envoy to run the configuration's scheduled hook;
//! due refreshes start HTTP streams from the configuration (not from a request), whose answers
//! come back to the configuration's stream hooks. The lock is never held while Envoy is
//! called, since Envoy may answer a call inline, before `start_call` returns.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use switchblade_core::http::header_pairs;
use switchblade_core::reflection::{Discovery, ReflectionAnswer, ReflectionCall, Refreshed, Step, MAX_ANSWER_BYTES};

use crate::abi::ConfigHost;
use crate::clock::now;

/// The configuration's reflection refreshes.
pub struct LiveCatalog {
    driver: Mutex<Driver>,
}

struct Driver {
    discovery: Discovery,
    /// Envoy's stream id → the reflection call it carries.
    streams: HashMap<u64, u64>,
    answers: HashMap<u64, Collected>,
    /// Streams that ended (reset or not) before `start_call` returned their id.
    ended_early: HashMap<u64, bool>,
    /// A `start_call` is under way: what is heard of a stream not yet known may be its own,
    /// and is kept until it returns. At any other time it is not, and is dropped, so that
    /// nothing piles up under ids no call has.
    starting: bool,
}

/// What has come back on a stream so far.
#[derive(Default)]
struct Collected {
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    trailers: Vec<(String, Vec<u8>)>,
    too_large: bool,
}

impl LiveCatalog {
    pub fn new(discovery: Discovery) -> Self {
        LiveCatalog {
            driver: Mutex::new(Driver {
                discovery,
                streams: HashMap::new(),
                answers: HashMap::new(),
                ended_early: HashMap::new(),
                starting: false,
            }),
        }
    }

    fn driver(&self) -> MutexGuard<'_, Driver> {
        // Only the main thread takes it; a panic there leaves maps that are still readable.
        self.driver.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a refresh if one is due; how it ended, if it ended at once.
    pub fn tick(&self, host: &ConfigHost) -> Option<Refreshed> {
        let calls = {
            let mut driver = self.driver();
            if !driver.discovery.is_due(now()) {
                return None;
            }
            driver.discovery.start(now())
        };
        self.start(host, calls)
    }

    fn start(&self, host: &ConfigHost, calls: Vec<ReflectionCall>) -> Option<Refreshed> {
        let mut queue = calls;
        let mut refreshed = None;
        while let Some(call) = queue.pop() {
            let timeout_ms = u64::try_from(call.timeout().as_millis()).unwrap_or(u64::MAX);
            self.driver().starting = true;
            let started = host.start_call(call.cluster(), &call.http_headers(), call.http_body(), timeout_ms);
            let step = {
                let mut driver = self.driver();
                driver.starting = false;
                let own = started.ok();
                let Driver {
                    streams,
                    answers,
                    ended_early,
                    ..
                } = &mut *driver;
                answers.retain(|stream, _| streams.contains_key(stream) || Some(*stream) == own);
                ended_early.retain(|stream, _| Some(*stream) == own);
                match started {
                    Ok(stream) => {
                        driver.streams.insert(stream, call.id);
                        match driver.ended_early.remove(&stream) {
                            Some(reset) => driver.finish(stream, reset),
                            None => Step::Wait,
                        }
                    }
                    Err(code) => {
                        let reason = format!(
                            "cannot call cluster {:?} (Envoy's callout result {code})",
                            call.cluster()
                        );
                        driver.discovery.file(call.id, ReflectionAnswer::Failed(&reason), now())
                    }
                }
            };
            match step {
                Step::Wait => {}
                Step::Call(more) => queue.extend(more),
                Step::Done(done) => refreshed = Some(done),
            }
        }
        refreshed
    }

    pub fn headers(&self, stream: u64, headers: Vec<(String, Vec<u8>)>) {
        if let Some(answer) = self.driver().answer(stream) {
            answer.headers = headers;
        }
    }

    pub fn data(&self, stream: u64, data: &[u8]) {
        if let Some(answer) = self.driver().answer(stream) {
            if answer.body.len() + data.len() > MAX_ANSWER_BYTES {
                answer.too_large = true;
            } else {
                answer.body.extend_from_slice(data);
            }
        }
    }

    pub fn trailers(&self, stream: u64, trailers: Vec<(String, Vec<u8>)>) {
        if let Some(answer) = self.driver().answer(stream) {
            answer.trailers = trailers;
        }
    }

    /// The stream ended (`reset`: without a whole answer); how the refresh ended, if it did.
    pub fn ended(&self, host: &ConfigHost, stream: u64, reset: bool) -> Option<Refreshed> {
        let step = {
            let mut driver = self.driver();
            if !driver.streams.contains_key(&stream) {
                if driver.starting {
                    driver.ended_early.insert(stream, reset);
                }
                return None;
            }
            driver.finish(stream, reset)
        };
        match step {
            Step::Wait => None,
            Step::Call(calls) => self.start(host, calls),
            Step::Done(refreshed) => Some(refreshed),
        }
    }
}

impl Driver {
    /// What has come back on `stream`, where it is kept: a stream of a call, or one that may be
    /// the call being started.
    fn answer(&mut self, stream: u64) -> Option<&mut Collected> {
        if !self.streams.contains_key(&stream) && !self.starting {
            return None;
        }
        Some(self.answers.entry(stream).or_default())
    }

    /// Files the answer of a stream that ended.
    fn finish(&mut self, stream: u64, reset: bool) -> Step {
        let Some(call) = self.streams.remove(&stream) else {
            return Step::Wait;
        };
        let answer = self.answers.remove(&stream).unwrap_or_default();
        if reset {
            let reason = "the call was reset (a connection failure, the timeout, or no healthy upstream)";
            return self.discovery.file(call, ReflectionAnswer::Failed(reason), now());
        }
        if answer.too_large {
            let reason = format!("an answer over {MAX_ANSWER_BYTES} bytes");
            return self.discovery.file(call, ReflectionAnswer::Failed(&reason), now());
        }
        let (headers, trailers) = (header_pairs(&answer.headers), header_pairs(&answer.trailers));
        let answer = ReflectionAnswer::Http {
            headers: &headers,
            body: &answer.body,
            trailers: &trailers,
        };
        self.discovery.file(call, answer, now())
    }
}

//! The host contract for upstream calls: a host starts a reply's calls when the core says they
//! may go ([`Server::start_calls`]), hands over what it hears on each ([`Server::heard`], or
//! [`Server::call_answered`] for an answer heard whole), and says when each has ended
//! ([`Server::call_ended`]); the core files each tool result. Once
//! [`start_calls`](Server::start_calls) says nothing is left to wait for, the reply is ready.

use std::time::Duration;

use super::reply::Heard;
use super::{Reply, Server};
use crate::grpc::call_end::{call_end, too_large, CallEnd, CallPart, WholeAnswer};
use crate::http::header_pairs;
use crate::observe::Observations;
use crate::upstream::UpstreamCall;

impl Server {
    /// Starts the calls the reply may have out now (at most `limits.max_calls_in_flight`; the
    /// others wait until some end) with `start`, the host's way to start one: its token for the
    /// call, or why it could not. A call that could not start is filed at once. Whether the
    /// reply is complete: nothing is out or waiting, and it can be sent.
    pub fn start_calls(
        &self,
        reply: &mut Reply,
        mut start: impl FnMut(&UpstreamCall) -> Result<u64, String>,
        now: Duration,
        observed: &mut Observations,
    ) -> bool {
        // Calls that fail to start free their place at once: start until none is left that may.
        loop {
            // A task's next call, due now, joins the calls waiting.
            reply.release_due(now);
            let calls = reply.take_calls_to_start();
            if calls.is_empty() {
                return reply.is_complete();
            }
            for call in calls {
                match start(&call) {
                    Ok(token) => reply.started(token, call, now),
                    Err(reason) => {
                        let end = CallEnd::NotStarted { reason: &reason };
                        self.file(reply, &call, end, now, observed);
                    }
                }
            }
        }
    }

    /// Adds a part of the answer to the call under `token`; whether the host is to stop the
    /// call now (a stream of answers reached a bound).
    pub fn heard(&self, reply: &mut Reply, token: u64, part: CallPart<'_>) -> Heard {
        reply.heard(token, part)
    }

    /// The call under `token` has ended (`reset`: without a whole answer): its result is filed.
    /// Nothing happens for a token that is not out (ended already, or never started).
    pub fn call_ended(&self, reply: &mut Reply, token: u64, reset: bool, now: Duration, observed: &mut Observations) {
        if let Some((call, response)) = reply.take(token) {
            let end = timed_out(&call, response.end(reset, self.limits.max_response_bytes), now);
            match response.stream() {
                Some(stream) => self.file_stream(reply, &call, end, stream, now, observed),
                None => self.file(reply, &call, end, now, observed),
            }
        }
    }

    /// The call under `token` was answered whole, with a body of `body_size` bytes: `read`
    /// gives its parts, and is not called when the body is over `limits.max_response_bytes`.
    pub fn call_answered(
        &self,
        reply: &mut Reply,
        token: u64,
        body_size: usize,
        read: impl FnOnce() -> WholeAnswer,
        now: Duration,
        observed: &mut Observations,
    ) {
        let Some((call, mut response)) = reply.take(token) else {
            return;
        };
        if response.stream().is_some() {
            // A stream of answers heard whole: its messages gathered within their bounds.
            let (headers, body, trailers) = read();
            response.add(CallPart::Headers(headers), self.limits.max_response_bytes);
            response.add(CallPart::Data(&body), self.limits.max_response_bytes);
            response.add(CallPart::Trailers(trailers), self.limits.max_response_bytes);
            let end = timed_out(&call, response.end(false, self.limits.max_response_bytes), now);
            if let Some(stream) = response.stream() {
                self.file_stream(reply, &call, end, stream, now, observed);
            }
            return;
        }
        if let Some(too_large) = too_large(body_size, self.limits.max_response_bytes) {
            return self.file(reply, &call, too_large, now, observed);
        }
        let (headers, body, trailers) = read();
        let end = call_end(&header_pairs(&headers), &body, &header_pairs(&trailers));
        self.file(reply, &call, timed_out(&call, end, now), now, observed);
    }
}

/// Timers fire on a millisecond tick, and the host's clock may read a hair earlier.
const CLOCK_SLACK: Duration = Duration::from_millis(5);

/// A call that ended without a whole answer once its deadline had passed was cut off by the
/// host's timeout (a callout's ends as a reset when the upstream's headers had come already).
fn timed_out<'a>(call: &UpstreamCall, end: CallEnd<'a>, now: Duration) -> CallEnd<'a> {
    let out_for = call.upstream_time(now).unwrap_or_default();
    match end {
        CallEnd::Reset if out_for + CLOCK_SLACK >= call.timeout() => CallEnd::DeadlinePassed,
        end => end,
    }
}

//! The host contract for upstream calls: a host starts a reply's calls when the core says they
//! may go ([`Server::start_calls`]), hands over what it hears on each ([`Server::heard`], or
//! [`Server::call_answered`] for an answer heard whole), and says when each has ended
//! ([`Server::call_ended`]); the core files each tool result. Once
//! [`start_calls`](Server::start_calls) says nothing is left to wait for, the reply is ready.
//!
//! The rate limits are passed here, where calls start, so that a host adds nothing for them:
//! the first start takes the local limits (the caller's rate across every tool, each call's
//! rule); each call takes its place in flight as it starts; and with a rate limit service,
//! each call's check is one more call for the host to start, in the call's place, before it.

use std::time::Duration;

use super::reply::CallControl;
use super::reply::RpcResponse;
use super::tasks::{Purpose, POLLS};
use super::tool_result::ToolResult;
use super::{Reply, Server};
use crate::cancel::CANCELLED_COMMENT;
use crate::config::FailureMode;
use crate::grpc::call_end::{call_end, too_large, CallEnd, CallPart, WholeCallResponse};
use crate::grpc::status::{CANCELLED, OK};
use crate::grpc::timeout as grpc_timeout;
use crate::http::{retry_after_ms, HeaderCopy, HttpResponse, Refusal};
use crate::jsonrpc::{RpcError, RATE_LIMITED};
use crate::observe::Observations;
use crate::quota::bucket::Take;
use crate::quota::callers;
use crate::quota::counters::Contended;
use crate::quota::rls::{verdict, Verdict, RATE_LIMIT_SERVICE, SHOULD_RATE_LIMIT, SHOULD_RATE_LIMIT_PATH};
use crate::quota::{Limited, DEFAULT_RETRY_AFTER};
use crate::upstream::{RateLimitCheck, Redirect, UpstreamCall};
use serde_json::json;

/// How much longer than the host waits for a rate limit service's answer the service is told it
/// has (`grpc-timeout`). A service that gives up at its deadline answers then (tonic's servers
/// answer CANCELLED): at the same deadline, that answer would race the host's own timer and, read
/// first, name that status instead of the timeout.
const CHECK_DEADLINE_GRACE: Duration = Duration::from_millis(250);

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
        self.take_local_limits(reply, now, observed);
        // Calls that fail to start free their place at once: start until none is left that may.
        loop {
            reply.release_checked();
            // A task's next call, due now, joins the calls waiting.
            reply.release_due(now);
            let calls = reply.take_calls_to_start();
            if calls.is_empty() {
                return reply.is_complete();
            }
            for call in calls {
                let Some(mut call) = self.take_poll(reply, call, now, observed) else {
                    continue;
                };
                if let Err(limited) = self.take_place_in_flight(reply, &mut call, now) {
                    self.rate_limited(reply, &call, &limited, observed);
                    continue;
                }
                match start(&call) {
                    Ok(token) => reply.started(token, call, now),
                    Err(reason) => {
                        log::warn!("cannot call cluster {:?}: {reason}", call.cluster());
                        let end = CallEnd::NotStarted { reason: &reason };
                        self.end_call(reply, call, end, now, observed);
                    }
                }
            }
        }
    }

    /// The call of a lone `tools/call` of a unary method, for a host that makes the request
    /// itself the call (the module's routing), once it has passed the rate limits; `None`,
    /// and nothing taken, for anything else (a batch, a stream, a call that waits for the rate
    /// limit service's check), or when the call was refused (its result is filed, and the
    /// reply may be complete: the host then starts the calls as usual).
    pub fn take_routable_call(
        &self,
        reply: &mut Reply,
        now: Duration,
        observed: &mut Observations,
    ) -> Option<UpstreamCall> {
        self.take_local_limits(reply, now, observed);
        let mut call = reply.take_routable_call()?;
        if let Err(limited) = self.take_place_in_flight(reply, &mut call, now) {
            self.rate_limited(reply, &call, &limited, observed);
            return None;
        }
        Some(call)
    }

    /// Before the first call starts: the caller's rate across every tool (all the request's
    /// calls, or HTTP 429 for the whole request), each call's rule's rate (a tool error for
    /// each call over it), and the rate limit service's check of each call that passed.
    fn take_local_limits(&self, reply: &mut Reply, now: Duration, observed: &mut Observations) {
        let Some(quota) = &self.quota else {
            return;
        };
        let Some(admission) = reply.admission.as_mut().filter(|admission| !admission.taken) else {
            return;
        };
        admission.taken = true;
        let counters = admission.counters.clone();
        let caller = admission.caller.clone();
        // A task's polls of its operation are not tool calls: only the call that starts the
        // operation is counted.
        let (polls, calls): (Vec<UpstreamCall>, Vec<UpstreamCall>) =
            reply.waiting_mut().drain(..).partition(UpstreamCall::polls_operation);
        reply.waiting_mut().extend(polls);
        if let Some(counters) = &counters {
            if let Err(limited) = quota.take_every_tool(counters, &caller, calls.len(), now) {
                for call in &calls {
                    observed.rate_limited(&call.tool);
                }
                observed.refused(Refusal::RateLimited);
                reply.refuse_whole(&limited);
                return;
            }
        }
        for mut call in calls {
            if let Some(counters) = &counters {
                if let Err(limited) = quota.take_tool(counters, &caller, &call.tool, now) {
                    self.rate_limited(reply, &call, &limited, observed);
                    continue;
                }
            }
            if let (Some(service), Some(frame)) = (quota.service(), quota.check_frame(&caller, &call.tool)) {
                let timeout = Duration::from_millis(service.timeout_ms);
                call.check = Some(Box::new(RateLimitCheck {
                    target: Redirect {
                        cluster: service.cluster.clone(),
                        service: RATE_LIMIT_SERVICE,
                        method: SHOULD_RATE_LIMIT,
                        path: SHOULD_RATE_LIMIT_PATH,
                        timeout,
                        grpc_timeout: grpc_timeout(timeout + CHECK_DEADLINE_GRACE),
                    },
                    frame,
                }));
            }
            reply.waiting_mut().push_back(call);
        }
    }

    /// A call about to start takes its place among its rule's calls in flight (a rate limit
    /// check or a task's poll takes none).
    fn take_place_in_flight(&self, reply: &Reply, call: &mut UpstreamCall, now: Duration) -> Result<(), Limited> {
        let (Some(quota), Some(counters)) = (
            &self.quota,
            reply
                .admission
                .as_ref()
                .and_then(|admission| admission.counters.as_ref()),
        ) else {
            return Ok(());
        };
        if call.is_rate_limit_check() || call.polls_operation() {
            return Ok(());
        }
        call.lease = quota.lease(counters, &call.tool, now)?.map(Box::new);
        Ok(())
    }

    /// Files a call refused over a limit: a tool error that names the limit and when to
    /// retry, with the time in `_meta`.
    fn rate_limited(&self, reply: &mut Reply, call: &UpstreamCall, limited: &Limited, observed: &mut Observations) {
        observed.rate_limited(&call.tool);
        let result = ToolResult::error(&limited.message).retry_after(retry_after_ms(limited.retry_after));
        reply.fill(call.slot, self.tool_result(call.era, &call.request_id, &result));
    }

    /// A call has ended as `end`: a tool call's result is filed; a rate limit check lets its
    /// call go, or refuses it.
    fn end_call(
        &self,
        reply: &mut Reply,
        call: UpstreamCall,
        end: CallEnd<'_>,
        now: Duration,
        observed: &mut Observations,
    ) {
        if !call.is_rate_limit_check() {
            return self.file(reply, &call, end, now, observed);
        }
        // A check is only ever made with a service configured.
        let Some(service) = self.quota.as_ref().and_then(|quota| quota.service()) else {
            return;
        };
        let mut call = call;
        match verdict(&end) {
            Verdict::Ok => {
                call.check = None;
                reply.hold_checked(call);
            }
            Verdict::Failed(why) if service.failure_mode == FailureMode::Allow => {
                log::warn!(
                    "the rate limit service (cluster {:?}) failed: {why}; the call goes on (failure_mode allow)",
                    service.cluster
                );
                call.check = None;
                reply.hold_checked(call);
            }
            Verdict::Failed(why) => {
                log::warn!(
                    "the rate limit service (cluster {:?}) failed: {why}; the call is refused (failure_mode deny)",
                    service.cluster
                );
                let limited = Limited {
                    message: format!(
                        "Rate limited: the rate limit service (cluster {:?}) did not answer ({why}), and limits.rate_limit_service.failure_mode is \"deny\"; retry after {} ms. The call was not sent.",
                        service.cluster,
                        retry_after_ms(DEFAULT_RETRY_AFTER)
                    ),
                    retry_after: DEFAULT_RETRY_AFTER,
                };
                self.rate_limited(reply, &call, &limited, observed);
            }
            Verdict::ToolOver { retry_after, limit } => {
                let retry_after = retry_after.unwrap_or(DEFAULT_RETRY_AFTER);
                let limited = Limited {
                    message: format!(
                        "Rate limited: the rate limit service says {} is over its limit for this caller{}; retry after {} ms. The call was not sent.",
                        call.tool.name,
                        limit.map(|limit| format!(" ({limit})")).unwrap_or_default(),
                        retry_after_ms(retry_after)
                    ),
                    retry_after,
                };
                self.rate_limited(reply, &call, &limited, observed);
            }
            Verdict::CallerOver { retry_after, limit } => {
                let retry_after = retry_after.unwrap_or(DEFAULT_RETRY_AFTER);
                observed.rate_limited(&call.tool);
                if let Some(admission) = reply.admission.as_mut() {
                    if admission.caller_over.is_none() {
                        observed.refused(Refusal::RateLimited);
                    }
                    admission.caller_over = Some(Limited {
                        message: format!(
                            "Too Many Requests: the rate limit service says this caller is over its limit across every tool{}; retry after {} ms",
                            limit.map(|limit| format!(" ({limit})")).unwrap_or_default(),
                            retry_after_ms(retry_after)
                        ),
                        retry_after,
                    });
                }
            }
        }
    }

    /// Adds a part of the answer to the call under `token`; whether the host is to stop the
    /// call now (a stream of answers reached a bound).
    pub fn heard(&self, reply: &mut Reply, token: u64, part: CallPart<'_>) -> CallControl {
        reply.heard(token, part)
    }

    /// A stream message of `size` bytes has come on the call under `token`, not yet read:
    /// whether the host is to stop the call instead of reading it (it would pass the bound).
    pub fn admits_message(&self, reply: &mut Reply, token: u64, size: usize) -> CallControl {
        reply.admits_message(token, size)
    }

    /// The call under `token` has ended (`reset`: without a whole answer): its result is filed.
    /// Nothing happens for a token that is not out (ended already, or never started). Gives
    /// back the headers its answer came with (empty if none), for a host that rewrites them.
    pub fn call_ended(
        &self,
        reply: &mut Reply,
        token: u64,
        reset: bool,
        now: Duration,
        observed: &mut Observations,
    ) -> HeaderCopy {
        let Some((call, response)) = reply.take(token) else {
            return HeaderCopy::default();
        };
        let end = timed_out(&call, response.end(reset, self.limits.max_response_bytes), now);
        match response.stream() {
            Some(stream) => self.file_stream(reply, &call, end, stream, now, observed),
            None => self.end_call(reply, call, end, now, observed),
        }
        response.into_headers()
    }

    /// The call under `token` was answered whole, with a body of `body_size` bytes: `read`
    /// gives its parts, and is not called when the body is over `limits.max_response_bytes`.
    pub fn call_answered(
        &self,
        reply: &mut Reply,
        token: u64,
        body_size: usize,
        read: impl FnOnce() -> WholeCallResponse,
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
            return self.end_call(reply, call, too_large, now, observed);
        }
        let (headers, body, trailers) = read();
        let end = call_end(&headers.pairs(), &body, &trailers.pairs());
        let end = timed_out(&call, end, now);
        self.end_call(reply, call, end, now, observed);
    }
}

/// What a host does for a request its client cancelled.
#[derive(Debug)]
pub struct Cancelled {
    /// The calls to cancel (their upstream streams reset).
    pub calls: Vec<u64>,
    /// The HTTP answer, which carries no JSON-RPC response (the spec asks for none): an SSE
    /// stream with only [`CANCELLED_COMMENT`]; `None` when the host has begun an SSE answer
    /// already, which it ends with that comment.
    pub response: Option<HttpResponse>,
}

impl Server {
    /// The client cancelled the request (`notifications/cancelled`): its calls out are counted
    /// as cancelled and handed back to be stopped, and nothing more is answered for it.
    pub fn cancel(&self, mut reply: Reply, now: Duration, observed: &mut Observations) -> Cancelled {
        let streaming = reply.is_streaming_events();
        let mut calls = Vec::new();
        for (token, call) in reply.take_all_out() {
            observed.call_cancelled(&call.tool, call.upstream_time(now));
            calls.push(token);
        }
        Cancelled {
            calls,
            response: (!streaming).then(|| HttpResponse::event_stream(CANCELLED_COMMENT.to_vec())),
        }
    }
}

/// How much earlier than the deadline, by the host's clock, a call cut off by the host's timer
/// may seem to end: Envoy arms a timer from its event loop's time, read when the loop woke, so it
/// can fire up to one turn of the loop early by a clock read during that turn. A reset this
/// close to the deadline is reported as the deadline.
const CLOCK_SLACK: Duration = Duration::from_millis(50);

/// A call that ended without a whole answer once its deadline had passed was cut off by the
/// host's timeout (a callout's ends as a reset when the upstream's headers had come already).
/// One its upstream answered `CANCELLED` once the deadline had passed was cut off by the
/// upstream's own timer, on the `grpc-timeout` it was sent (tonic's servers answer so), in a
/// race with the host's: it is the deadline, as a gRPC client reports it. A stream of answers
/// that its upstream ended with any error once its window had closed ended because the window
/// closed, whatever the server calls it (`DEADLINE_EXCEEDED`; etcd's `UNKNOWN` "context deadline
/// exceeded"), as the host's clock would have closed it.
fn timed_out<'a>(call: &UpstreamCall, end: CallEnd<'a>, now: Duration) -> CallEnd<'a> {
    let out_for = call.upstream_time(now).unwrap_or_default();
    let past = out_for + CLOCK_SLACK >= call.timeout();
    match end {
        CallEnd::Reset if past => CallEnd::DeadlinePassed,
        CallEnd::Replied(grpc) if past && grpc.status == CANCELLED => CallEnd::DeadlinePassed,
        CallEnd::Replied(grpc) if past && grpc.status != OK && call.kind().receives_many() => CallEnd::DeadlinePassed,
        end => end,
    }
}

impl Server {
    /// A call to the Operations service takes a poll from its task's bucket (per caller), and
    /// goes; over the bound, the gateway's own polling waits until the bucket has one, and a
    /// client's poll is refused: the call is given back only when it may go now.
    fn take_poll(
        &self,
        reply: &mut Reply,
        call: UpstreamCall,
        now: Duration,
        observed: &mut Observations,
    ) -> Option<UpstreamCall> {
        let (Some(counters), Some(step)) = (&reply.poll_counters, call.task.as_deref()) else {
            return Some(call);
        };
        if !call.polls_operation() {
            return Some(call);
        }
        let polls = &self.tasks.polls;
        let operation = step.operation.as_deref().unwrap_or_default();
        let key = polls
            .places
            .key(format!("{}\u{0}{operation}", String::from_utf8_lossy(&step.identity)));
        let retry_after = match callers::take(&**counters, POLLS, &key, polls.bucket, 1, now) {
            Ok(Take::Taken) => return Some(call),
            Ok(Take::Refused { retry_after }) => retry_after.unwrap_or(DEFAULT_RETRY_AFTER),
            Err(Contended) => DEFAULT_RETRY_AFTER,
        };
        if matches!(step.purpose, Purpose::Wait | Purpose::Result) {
            reply.schedule(call, now + retry_after);
            return None;
        }
        let limited = Limited {
            message: format!(
                "Too Many Requests: task operation {operation} may be polled {} times a second, {} at once, by each caller \
                 (tasks.max_polls_per_second, tasks.poll_burst); poll again after {} ms",
                polls.per_second,
                polls.burst,
                retry_after_ms(retry_after)
            ),
            retry_after,
        };
        match reply.is_batch_post() {
            false => {
                observed.refused(Refusal::RateLimited);
                reply.refuse_lone(&call.request_id, &limited);
            }
            true => {
                let error = RpcError::new(&call.request_id, RATE_LIMITED, limited.message)
                    .with_data(json!({"retryAfterMs": retry_after_ms(retry_after)}));
                reply.fill(call.slot, RpcResponse::error(call.era, &error));
            }
        }
        None
    }
}

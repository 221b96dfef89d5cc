//! The answer to one POST: one JSON-RPC response per request in the body, filled in as the
//! calls they wait for end, and sent as one object, or as an array for a batch. It also keeps
//! the books of those calls: waiting their turn, out under the host's token with what has come
//! back so far, ended.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::time::Duration;

use serde_json::Value;

use crate::config::Limits;
use crate::eras::{Era, BATCH_VERSION, MODERN_VERSION};
use crate::grpc::call_end::{CallPart, CallResponse};
use crate::http::HttpResponse;
use crate::jsonrpc::{self, RpcError, INTERNAL_ERROR, INVALID_REQUEST};
use crate::quota::counters::Counters;
use crate::quota::Limited;
use crate::streams::CallKind;
use crate::upstream::UpstreamCall;

use super::progress::{push_event, Progress};
pub(crate) use super::rpc_response::RpcResponse;

/// One call out: the host's token for it, and what has come back so far.
#[derive(Debug)]
struct CallOut {
    token: u64,
    call: UpstreamCall,
    response: CallResponse,
}

/// The answer to a POST, assembled as its upstream calls return.
#[derive(Debug)]
pub struct Reply {
    batch: bool,
    /// One response per request in the body; `None` while its call is out.
    slots: Vec<Option<RpcResponse>>,
    /// The bytes of the responses so far, which a batch's bound counts.
    bytes: usize,
    /// `limits.max_batch_reply_bytes`.
    max_batch_bytes: usize,
    /// `limits.max_calls_in_flight`.
    max_in_flight: usize,
    /// Calls planned and not yet started, in order.
    waiting: VecDeque<UpstreamCall>,
    /// Calls that may start only at a time on the host's clock (a task's next poll).
    scheduled: Vec<(Duration, UpstreamCall)>,
    /// Calls out.
    out: Vec<CallOut>,
    /// `limits.max_response_bytes`, which a stream of answers keeps to over all its messages.
    max_response_bytes: usize,
    /// A lone call of a streaming tool that asked for progress: the answer is an SSE stream.
    progress: Option<Progress>,
    /// The rate limits the calls pass before they start, when the configuration has any.
    pub(super) admission: Option<Box<Admission>>,
    /// The answer in place of every other (HTTP 429): the caller is over its limit across
    /// every tool.
    whole: Option<Box<HttpResponse>>,
    /// The counters a task's polls are bounded with (`tasks.max_polls_per_second`).
    pub(super) poll_counters: Option<Counters>,
}

/// Who a reply's calls are counted for, and how far their checks are.
#[derive(Debug)]
pub(super) struct Admission {
    /// The counters every worker shares; without them (a host that gives none), only the
    /// rate limit service limits.
    pub(super) counters: Option<Counters>,
    /// The caller's key.
    pub(super) caller: crate::quota::CallerKey,
    /// Whether the local limits have been taken (once, before the first call starts).
    pub(super) taken: bool,
    /// The rate limit service said the caller is over its limit across every tool.
    pub(super) caller_over: Option<Limited>,
    /// The request's id when it is one call: the 429 answers with it.
    pub(super) lone_id: Value,
    /// Calls the rate limit service let go, held until every check of the reply has ended:
    /// one over the caller's limit across every tool refuses the whole request.
    pub(super) checked: Vec<UpstreamCall>,
}

/// What a host is to do after handing over part of a call's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallControl {
    /// A stream of answers reached a bound: cancel the upstream stream now, and say the call
    /// ended ([`Server::call_ended`](super::Server::call_ended)).
    pub stop: bool,
}

impl Reply {
    pub(crate) fn new(batch: bool, capacity: usize, limits: &Limits) -> Self {
        Reply {
            batch,
            slots: Vec::with_capacity(capacity),
            bytes: 0,
            max_batch_bytes: limits.batch_reply_bytes(),
            max_in_flight: limits.max_calls_in_flight,
            waiting: VecDeque::new(),
            scheduled: Vec::new(),
            out: Vec::new(),
            max_response_bytes: limits.max_response_bytes,
            progress: None,
            admission: None,
            whole: None,
            poll_counters: None,
        }
    }

    /// The calls waiting to start.
    pub(super) fn waiting_mut(&mut self) -> &mut VecDeque<UpstreamCall> {
        &mut self.waiting
    }

    /// Whether a rate limit check is waiting or out.
    fn checking(&self) -> bool {
        self.waiting.iter().any(UpstreamCall::is_rate_limit_check)
            || self.out.iter().any(|out| out.call.is_rate_limit_check())
    }

    /// Once no rate limit check is waiting or out: the calls they let go start, or, if one
    /// found the caller over its limit across every tool, the request is refused whole.
    pub(super) fn release_checked(&mut self) {
        let held = self
            .admission
            .as_ref()
            .is_some_and(|admission| !admission.checked.is_empty() || admission.caller_over.is_some());
        if !held || self.checking() {
            return;
        }
        let Some(admission) = self.admission.as_mut() else {
            return;
        };
        let mut checked = std::mem::take(&mut admission.checked);
        match admission.caller_over.take() {
            Some(limited) => self.refuse_whole(&limited),
            None => {
                checked.sort_by_key(|call| call.slot);
                self.waiting.extend(checked);
            }
        }
    }

    /// Holds a call the rate limit service let go until every check has ended.
    pub(super) fn hold_checked(&mut self, call: UpstreamCall) {
        if let Some(admission) = self.admission.as_mut() {
            admission.checked.push(call);
        }
    }

    /// Whether the POST is a JSON-RPC batch.
    pub(super) fn is_batch_post(&self) -> bool {
        self.batch
    }

    /// A lone request is answered with HTTP 429 under its own id, in place of its answer.
    pub(super) fn refuse_lone(&mut self, id: &Value, limited: &Limited) {
        self.waiting.clear();
        self.whole = Some(Box::new(HttpResponse::too_many_requests(
            id,
            &limited.message,
            limited.retry_after,
        )));
    }

    /// The request is answered with HTTP 429 in place of every other answer; calls still
    /// waiting are dropped unsent.
    pub(super) fn refuse_whole(&mut self, limited: &Limited) {
        self.waiting.clear();
        let id = match (self.batch, self.admission.as_ref()) {
            (false, Some(admission)) => admission.lone_id.clone(),
            _ => Value::Null,
        };
        self.whole = Some(Box::new(HttpResponse::too_many_requests(
            &id,
            &limited.message,
            limited.retry_after,
        )));
    }

    /// The calls the host is to start now: those waiting, as long as fewer than
    /// `limits.max_calls_in_flight` are out (the rest wait until some end). Each is then
    /// [`started`](Self::started), or filed as
    /// [`NotStarted`](crate::grpc::call_end::CallEnd::NotStarted).
    pub fn take_calls_to_start(&mut self) -> Vec<UpstreamCall> {
        let room = self.max_in_flight.saturating_sub(self.out.len());
        let count = room.min(self.waiting.len());
        self.waiting.drain(..count).collect()
    }

    /// The call of a lone `tools/call` of a unary method, which a host may make the request
    /// itself (the module's routing); `None`, and nothing taken, for anything else: a batch,
    /// or a stream, which the host calls out for so that it can read and stop it.
    pub(crate) fn take_routable_call(&mut self) -> Option<UpstreamCall> {
        let lone = !self.batch && self.waiting.len() == 1 && self.out.is_empty();
        let unary = self
            .waiting
            .front()
            .is_some_and(|call| call.kind() == CallKind::Unary && !call.is_rate_limit_check() && !call.is_task_step());
        if lone && unary {
            return self.waiting.pop_front();
        }
        None
    }

    /// The host has started `call` under `token`, at `now` on its clock (any epoch, the same
    /// clock as for [`Server::file`](super::Server::file)).
    pub fn started(&mut self, token: u64, mut call: UpstreamCall, now: Duration) {
        call.sent_at = Some(now);
        let response = match call.kind().receives_many() {
            true => CallResponse::streamed(call.tool.max_messages, self.max_response_bytes),
            false => CallResponse::default(),
        };
        if let Some(token) = call.progress_token.clone().filter(|_| !call.is_rate_limit_check()) {
            self.progress = Some(Progress {
                token,
                count: 0,
                events: Vec::new(),
                streamed: false,
            });
        }
        self.out.push(CallOut { token, call, response });
    }

    /// Adds what the host heard on the call under `token` (ignored once it has ended), with a
    /// progress notification per stream message it completed when the answer is an SSE stream.
    /// The notifications are part of the answer: their bytes count against the stream's bound
    /// (`limits.max_response_bytes`), which stops the stream where they would pass it.
    pub(crate) fn heard(&mut self, token: u64, part: CallPart<'_>) -> CallControl {
        let Some(out) = self.out.iter_mut().find(|out| out.token == token) else {
            return CallControl { stop: false };
        };
        let completed = out.response.add(part, self.max_response_bytes);
        if let Some(progress) = &mut self.progress {
            for _ in 0..completed {
                let event = progress.next_event();
                if !out.response.spend(event.len()) {
                    break;
                }
                progress.events.extend_from_slice(&event);
            }
        }
        let stop = out.response.stream().is_some_and(|stream| stream.is_done());
        CallControl { stop }
    }

    /// Whether the call under `token` would keep a stream message of `size` bytes that the host
    /// has not read yet: if not, the stream stops unread (`stop`), as it would have once read.
    pub(crate) fn admits_message(&mut self, token: u64, size: usize) -> CallControl {
        let Some(out) = self.out.iter_mut().find(|out| out.token == token) else {
            return CallControl { stop: false };
        };
        CallControl {
            stop: !out.response.admits_message(size),
        }
    }

    /// The progress notifications not yet handed over, as SSE events, for a host that sends
    /// them as they come; the answer then carries only the result ([`Self::into_response`]).
    pub fn take_progress_events(&mut self) -> Option<Vec<u8>> {
        let progress = self.progress.as_mut()?;
        if progress.events.is_empty() {
            return None;
        }
        progress.streamed = true;
        Some(std::mem::take(&mut progress.events))
    }

    /// Whether the answer is an SSE stream whose head the host has sent already: the rest of
    /// the answer ([`Self::into_response`]'s body) goes after it, and ends it.
    pub fn is_streaming_events(&self) -> bool {
        self.progress.as_ref().is_some_and(|progress| progress.streamed)
    }

    /// Takes the call under `token` out of the books, with what came back on it; `None` once
    /// it has ended. Its result is then filed with [`Server::file`](super::Server::file).
    pub fn take(&mut self, token: u64) -> Option<(UpstreamCall, CallResponse)> {
        let index = self.out.iter().position(|out| out.token == token)?;
        let out = self.out.swap_remove(index);
        Some((out.call, out.response))
    }

    /// The id of the request its client may cancel while its call is out: a lone call of a
    /// streaming tool, whose stream may stay open until its deadline. (A unary call ends on
    /// its own; tracking it would cost every call.)
    pub fn cancellable_id(&self) -> Option<&Value> {
        if self.batch {
            return None;
        }
        let mut calls = self.waiting.iter().chain(self.out.iter().map(|out| &out.call));
        let call = calls.next()?;
        (calls.next().is_none() && call.kind() != CallKind::Unary).then_some(&call.request_id)
    }

    /// Empties the books of the calls out: their tokens, and each call with when it was sent.
    pub(crate) fn take_all_out(&mut self) -> Vec<(u64, UpstreamCall)> {
        self.waiting.clear();
        self.out.drain(..).map(|out| (out.token, out.call)).collect()
    }

    /// Whether every response is there: no call waits to start or is out.
    pub fn is_complete(&self) -> bool {
        self.waiting.is_empty()
            && self.scheduled.is_empty()
            && self.out.is_empty()
            && self
                .admission
                .as_ref()
                .is_none_or(|admission| admission.checked.is_empty())
            && (self.whole.is_some() || self.slots.iter().all(Option::is_some))
    }

    /// When the host is to start calls again although none has ended: the time of the first
    /// call scheduled (on the host's clock, as `now` of [`Server::start_calls`](super::Server::start_calls)),
    /// if no call is out to wake it before.
    pub fn next_wake(&self) -> Option<Duration> {
        self.scheduled.iter().map(|(at, _)| *at).min()
    }

    /// Keeps `call` (whose slot is already kept) to start at `at`.
    pub(crate) fn schedule(&mut self, call: UpstreamCall, at: Duration) {
        self.scheduled.push((at, call));
    }

    /// Moves the calls scheduled at or before `now` to those waiting to start.
    pub(crate) fn release_due(&mut self, now: Duration) {
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.scheduled)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        self.scheduled = later;
        self.waiting.extend(due.into_iter().map(|(_, call)| call));
    }

    /// Takes out every call scheduled for later.
    pub(crate) fn take_scheduled(&mut self) -> Vec<UpstreamCall> {
        std::mem::take(&mut self.scheduled)
            .into_iter()
            .map(|(_, call)| call)
            .collect()
    }

    /// Where the next response goes.
    pub(crate) fn next_slot(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn answered(&mut self, answer: RpcResponse) {
        let answer = self.bounded(answer);
        self.slots.push(Some(answer));
    }

    /// Keeps the next slot for the result of `call`, which the host is to start.
    pub(crate) fn awaiting(&mut self, call: UpstreamCall) {
        self.slots.push(None);
        self.waiting.push_back(call);
    }

    /// Whether any call was planned.
    pub(crate) fn has_calls(&self) -> bool {
        !self.waiting.is_empty() || !self.scheduled.is_empty() || !self.out.is_empty()
    }

    pub(crate) fn fill(&mut self, slot: usize, answer: RpcResponse) {
        let answer = self.bounded(answer);
        if let Some(slot) = self.slots.get_mut(slot) {
            *slot = Some(answer);
        }
    }

    /// The answer, or, in a batch whose reply it would take past its bound, an error in its
    /// place that says so (the bound holds whatever order the calls end in).
    fn bounded(&mut self, answer: RpcResponse) -> RpcResponse {
        if self.batch && self.bytes.saturating_add(answer.body.len()) > self.max_batch_bytes {
            let message = format!(
                "Internal error: this answer ({} bytes) would take the batch's reply over {} bytes \
                 (limits.max_batch_reply_bytes); send this request alone or in a smaller batch",
                answer.body.len(),
                self.max_batch_bytes
            );
            let error = RpcError::new(&answer.id, INTERNAL_ERROR, message);
            let refused = RpcResponse {
                id: answer.id,
                status: 200,
                body: jsonrpc::encode(&error.to_value()),
                header: None,
            };
            self.bytes = self.bytes.saturating_add(refused.body.len());
            return refused;
        }
        self.bytes = self.bytes.saturating_add(answer.body.len());
        answer
    }

    /// The HTTP response: one JSON-RPC response, or a batch array (always 200). Nothing to
    /// say (notifications, client responses) is 202.
    pub fn into_response(self) -> HttpResponse {
        if let Some(whole) = self.whole {
            return *whole;
        }
        let mut answers = self.slots.into_iter().flatten();
        if let Some(progress) = self.progress {
            // The progress notifications, then the result, as SSE events.
            let mut body = if progress.streamed { Vec::new() } else { progress.events };
            if let Some(answer) = answers.next() {
                push_event(&mut body, &answer.body);
            }
            return HttpResponse::event_stream(body);
        }
        if !self.batch {
            return match answers.next() {
                Some(answer) => {
                    let mut response = HttpResponse::json(answer.status, answer.body);
                    if let Some((name, value)) = answer.header {
                        response.headers.push((name, Cow::Owned(value)));
                    }
                    response
                }
                None => HttpResponse::accepted(),
            };
        }
        let mut body = Vec::with_capacity(self.bytes + 2);
        body.push(b'[');
        for (index, answer) in answers.enumerate() {
            if index > 0 {
                body.push(b',');
            }
            body.extend_from_slice(&answer.body);
        }
        body.push(b']');
        if body.len() == 2 {
            return HttpResponse::accepted();
        }
        HttpResponse::json(200, body)
    }
}

/// Batches are a 2025-03-26 feature, never empty, and at most `max` messages long.
pub(crate) fn refuse_batch(era: Era, size: usize, max: usize) -> Option<RpcError> {
    let message = match era {
        Era::Legacy(BATCH_VERSION) if size == 0 => "Invalid Request: an empty JSON-RPC batch".to_owned(),
        Era::Legacy(BATCH_VERSION) if size > max => {
            format!("Invalid Request: the batch has {size} messages; the limit is {max} (limits.max_batch_size)")
        }
        Era::Legacy(BATCH_VERSION) => return None,
        Era::Legacy(version) => format!(
            "Invalid Request: JSON-RPC batches are only allowed in protocol version {BATCH_VERSION}, not {version}"
        ),
        Era::Modern => format!(
            "Invalid Request: JSON-RPC batches are only allowed in protocol version {BATCH_VERSION}, not {MODERN_VERSION}"
        ),
    };
    Some(RpcError::new(&Value::Null, INVALID_REQUEST, message))
}

//! What the exchange asks of its host, and reads of a request's headers: the seam each build
//! implements over its ABI.

use std::fmt::Debug;
use std::time::Duration;

use crate::cancel::CancelKey;
use crate::http::{HeaderPair, HttpResponse};
use crate::observe::Observations;
use crate::quota::counters::Counters;
use crate::server::RequestFacts;
use crate::upstream::UpstreamCall;

#[cfg(doc)]
use super::Exchange;

/// A call's id within its exchange, given as the call starts: the core's own; a host knows
/// its calls by its own handles.
pub(crate) type CallId = u64;

/// What a host sends of the answer.
#[derive(Debug, Clone, Copy)]
pub enum Answer<'a> {
    /// All of it: a local reply, or a reply whose calls have all ended.
    Whole(&'a HttpResponse),
    /// The head of an answer sent in parts (an SSE stream), and its first part.
    Begin { head: &'a HttpResponse, events: &'a [u8] },
    /// The next part of an answer begun; `last` ends it.
    Part { data: &'a [u8], last: bool },
}

/// What the exchange asks of its host. Every call is made from inside one of the exchange's
/// own, on the host's thread.
pub trait ExchangeHost: RequestFacts {
    /// What the host knows a call it started by (a callout's token, a stream's), whatever
    /// its numbering: the host tells a call's answer under it, and the exchange keeps it
    /// beside the call's id.
    type CallHandle: Copy + PartialEq + Debug;
    /// The host's clock: the time since a fixed start, the unit of the core's timestamps.
    fn now(&self) -> Duration;
    /// The counters every worker shares, for the rate limits (none: only the rate limit
    /// service limits).
    fn counters(&self) -> Option<&Counters>;
    /// Whether the host can send an answer in parts. One that cannot (the default) gets the
    /// progress notifications of a streaming call with its result, in one answer.
    fn sends_in_parts(&self) -> bool {
        false
    }
    /// Whether the host can make the request itself a call, forwarded by its router
    /// ([`Self::route_call`]), when the configuration names a cluster header for it (by
    /// default it cannot).
    fn routes_calls(&self) -> bool {
        false
    }
    /// Makes the request itself `call`'s gRPC call, for the host's router to forward to the
    /// cluster it names in the header `cluster_header`. Its answer comes back as the request's
    /// response: [`Exchange::routed_heard`], then [`Exchange::routed_answer`] (or
    /// [`Exchange::routed_deadline_passed`]). Asked only of a host that [`Self::routes_calls`].
    fn route_call(&mut self, _call: &UpstreamCall, _cluster_header: &str) {}
    /// Starts `call`: the host's handle for it, or why it cannot.
    fn start_call(&mut self, call: &UpstreamCall) -> Result<Self::CallHandle, String>;
    /// Stops a call that is out (its upstream stream reset). Its end is the exchange's to file:
    /// a host that hears of it later may tell it, and it is ignored.
    fn reset_call(&mut self, call: Self::CallHandle);
    /// Publishes what the request told (stats, the access log's fields): before the answer goes,
    /// since sending it can run the stream's other hooks; and for a request that goes
    /// unanswered.
    fn publish(&mut self, observed: &Observations);
    /// Sends the answer, or a part of it.
    fn send(&mut self, answer: Answer<'_>);
    /// Asks for [`Exchange::wake`] at `at` on the host's clock, in place of an earlier wake-up;
    /// whether the host can.
    fn wake_at(&mut self, at: Duration) -> bool;
    /// Asks for [`Exchange::cancelled`] if the client cancels the request under `key` while it
    /// waits: a lone call of a streaming tool, whose stream may stay open until its deadline.
    fn listen_for_cancel(&mut self, key: CancelKey);
    /// Files the cancellation of the request under `key` (a `notifications/cancelled`), for the
    /// exchange that listens for it, in whichever worker.
    fn file_cancel(&mut self, key: &CancelKey);
}

/// A request's headers, as the host reads them.
pub trait RequestHead {
    /// The first value of a header.
    fn header(&self, name: &str) -> Option<Vec<u8>>;
    /// Hands every header, in order, to `read`: asked once, for a request to the MCP path.
    fn read_all<R>(&self, read: impl FnOnce(&[HeaderPair<'_>]) -> R) -> R;
}

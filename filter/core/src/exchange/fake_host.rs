//! A host that does what the exchange asks and writes it down: the one fake host the exchange's
//! tests, the fuzz targets and the benchmarks drive the core through, in place of Envoy. It
//! checks the promises the exchange makes to every host as it is called: only calls out are
//! reset, no more calls out than the bound it is told, nothing sent after the answer has ended,
//! no part before an answer begun in parts. It numbers the calls of each exchange from 1.

use std::time::Duration;

use super::{Answer, Exchange, ExchangeHost, RequestHead, Step};
use crate::cancel::CancelKey;
use crate::config::TokenPayloadSource;
use crate::grpc::call_end::WholeCallResponse;
use crate::grpc::frame::grpc_frame;
use crate::http::{HeaderCopy, HeaderPair};
use crate::observe::Observations;
use crate::quota::counters::Counters;
use crate::server::{RequestFacts, Server};
use crate::upstream::UpstreamCall;

/// What the exchange sent, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// A whole answer: its status and body.
    Whole(u16, String),
    /// An answer begun in parts, with its first part.
    Begin(String),
    /// A further part, and whether it is the last.
    Part(String, bool),
}

/// The fake host's handle for a call: its number within the exchange, from 1.
pub type FakeCall = u64;

/// An exchange over the fake host.
pub type FakeExchange = Exchange<FakeCall>;

/// A call the exchange started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    pub id: FakeCall,
    /// The method's name (`GetItem`).
    pub method: String,
}

/// A host that does what it is asked and writes it down.
#[derive(Default)]
pub struct FakeHost {
    /// The host's clock.
    pub clock: Duration,
    /// Whether it can send an answer in parts.
    pub in_parts: bool,
    /// Whether it can route a call (make the request the call).
    pub routes: bool,
    /// Refuses every call it is asked to start.
    pub refuses_calls: bool,
    /// Refuses every n-th call it is asked to start (0: none).
    pub refuses_every: u8,
    /// The most calls the exchange may have out at once, checked as each starts (none: not
    /// checked).
    pub max_out: Option<usize>,
    /// Refuses to wake the exchange.
    pub cannot_wake: bool,
    /// The verified token's payload, as the host would read it.
    pub token_payload: Option<Vec<u8>>,
    /// The client's address, as the host would read it.
    pub client_address: Option<String>,
    /// The counters every worker shares (none: only a rate limit service limits).
    pub counters: Option<Counters>,
    /// Writes down only what its checks need (the calls out), so that a benchmark counts the
    /// exchange's work and not the fake's.
    pub quiet: bool,
    /// The calls routed: their cluster, and the header that names it.
    pub routed: Vec<(String, String)>,
    /// Every call started, in order.
    pub started: Vec<Started>,
    /// The calls out now: started, and neither ended nor reset.
    pub out: Vec<FakeCall>,
    /// The calls reset, in order.
    pub resets: Vec<FakeCall>,
    /// What was sent, in order.
    pub sent: Vec<Sent>,
    /// How many times what the request told was published, and how many answers had gone then.
    pub published: Vec<usize>,
    /// When the exchange last asked to be woken.
    pub wake: Option<Duration>,
    /// The cancel key the exchange listens on.
    pub listening: Option<CancelKey>,
    /// The cancellations the exchange filed, in order.
    pub filed: Vec<CancelKey>,
    /// What it keeps to check the exchange's promises (opaque, so that a host can still be
    /// written `FakeHost { in_parts: true, ..FakeHost::default() }`).
    pub promises: Promises,
}

/// What a [`FakeHost`] keeps to check the exchange's promises.
#[derive(Debug, Default)]
pub struct Promises {
    asked_to_start: u32,
    /// The calls this exchange started.
    started_here: FakeCall,
    begun: bool,
    ended: bool,
}

impl FakeHost {
    /// Whether the answer has ended: sent whole, or its last part sent.
    pub fn has_answered(&self) -> bool {
        self.promises.ended
    }

    /// Forgets the answer of the exchange before, so that the next may answer anew.
    pub fn next_exchange(&mut self) {
        self.promises.begun = false;
        self.promises.ended = false;
        self.out.clear();
        self.promises.started_here = 0;
    }

    /// The host heard a call end: it is no longer out.
    pub fn call_gone(&mut self, id: FakeCall) {
        self.out.retain(|known| *known != id);
    }
}

impl RequestFacts for FakeHost {
    fn token_payload(&self, _: &TokenPayloadSource) -> Option<Vec<u8>> {
        self.token_payload.clone()
    }

    fn client_address(&self) -> Option<String> {
        self.client_address.clone()
    }
}

impl ExchangeHost for FakeHost {
    type CallHandle = FakeCall;

    fn now(&self) -> Duration {
        self.clock
    }

    fn counters(&self) -> Option<&Counters> {
        self.counters.as_ref()
    }

    fn sends_in_parts(&self) -> bool {
        self.in_parts
    }

    fn routes_calls(&self) -> bool {
        self.routes
    }

    fn route_call(&mut self, call: &UpstreamCall, cluster_header: &str) {
        assert!(self.routed.is_empty(), "a request routed twice");
        self.routed.push((call.cluster().to_owned(), cluster_header.to_owned()));
    }

    fn start_call(&mut self, call: &UpstreamCall) -> Result<FakeCall, String> {
        self.promises.asked_to_start = self.promises.asked_to_start.wrapping_add(1);
        let refused_in_turn = self.refuses_every > 0
            && self
                .promises
                .asked_to_start
                .is_multiple_of(u32::from(self.refuses_every));
        if self.refuses_calls || refused_in_turn {
            return Err("no healthy upstream".into());
        }
        self.promises.started_here += 1;
        let id = self.promises.started_here;
        self.out.push(id);
        if let Some(bound) = self.max_out {
            assert!(
                self.out.len() <= bound,
                "{} calls out, the bound is {bound}",
                self.out.len()
            );
        }
        if self.quiet {
            return Ok(id);
        }
        self.started.push(Started {
            id,
            method: call.service_and_method().1.to_owned(),
        });
        Ok(id)
    }

    fn reset_call(&mut self, id: FakeCall) {
        assert!(self.out.contains(&id), "call {id} reset, but it is not out");
        self.resets.push(id);
        self.call_gone(id);
    }

    fn publish(&mut self, observed: &Observations) {
        if self.quiet {
            return;
        }
        self.published.push(self.sent.len());
        // What a host renders of it, which must not panic whatever the request was.
        let _ = (observed.samples(), observed.log_fields());
    }

    fn send(&mut self, answer: Answer<'_>) {
        assert!(!self.promises.ended, "sent after the answer ended");
        match answer {
            Answer::Whole(_) => assert!(!self.promises.begun, "a whole answer after one in parts began"),
            Answer::Begin { head, .. } => {
                assert!(
                    self.in_parts && !self.promises.begun,
                    "an answer begun twice, or by a host that cannot"
                );
                assert_eq!((head.status, head.body.len()), (200, 0));
            }
            Answer::Part { .. } => assert!(self.promises.begun, "a part before the answer began"),
        }
        self.promises.begun |= matches!(answer, Answer::Begin { .. });
        self.promises.ended = matches!(answer, Answer::Whole(_) | Answer::Part { last: true, .. });
        if self.quiet {
            return;
        }
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        self.sent.push(match answer {
            Answer::Whole(response) => Sent::Whole(response.status, text(&response.body)),
            Answer::Begin { events, .. } => Sent::Begin(text(events)),
            Answer::Part { data, last } => Sent::Part(text(data), last),
        });
    }

    fn wake_at(&mut self, at: Duration) -> bool {
        self.wake = Some(at);
        !self.cannot_wake
    }

    fn listen_for_cancel(&mut self, key: CancelKey) {
        self.listening = Some(key);
    }

    fn file_cancel(&mut self, key: &CancelKey) {
        self.filed.push(*key);
    }
}

/// A request's headers, as a host reads them.
#[derive(Debug, Clone)]
pub struct FakeHead(Vec<(String, Vec<u8>)>);

impl FakeHead {
    /// A POST to `path` as an MCP client of the `2025-11-25` era sends it, in session `s-1`.
    pub fn post(path: &str) -> FakeHead {
        FakeHead(
            [
                (":method", "POST"),
                (":path", path),
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", "2025-11-25"),
                // What a cancellation names the client by.
                ("mcp-session-id", "s-1"),
            ]
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value.as_bytes().to_vec()))
            .collect(),
        )
    }

    /// The head with `name` set to `value` (in place of any it had).
    pub fn with(self, name: &str, value: impl AsRef<[u8]>) -> FakeHead {
        let mut head = self.without(name);
        head.0.push((name.to_owned(), value.as_ref().to_vec()));
        head
    }

    /// The head without `name`.
    pub fn without(mut self, name: &str) -> FakeHead {
        self.0.retain(|(known, _)| known != name);
        self
    }
}

impl RequestHead for FakeHead {
    fn header(&self, name: &str) -> Option<Vec<u8>> {
        self.0
            .iter()
            .find(|(known, _)| known == name)
            .map(|(_, value)| value.clone())
    }

    fn read_all<R>(&self, read: impl FnOnce(&[HeaderPair<'_>]) -> R) -> R {
        let pairs: Vec<HeaderPair<'_>> = self
            .0
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_slice()))
            .collect();
        read(&pairs)
    }
}

/// Posts `body` in one chunk, as a host would: `head` (with its length), then the body.
pub fn post(server: &Server, host: &mut FakeHost, head: &FakeHead, body: &[u8]) -> (FakeExchange, Step) {
    let mut exchange = FakeExchange::default();
    let head = head.clone().with("content-length", body.len().to_string());
    let step = match exchange.request_headers(server, host, &head, false) {
        Step::ReadBody => exchange.request_body(server, host, body.len(), true, || body.to_vec()),
        step => step,
    };
    (exchange, step)
}

/// A call's answer whole: `:status` 200, the body as it came, then `trailers`.
pub fn whole_answer(body: &[u8], trailers: &[(&str, &[u8])]) -> WholeCallResponse {
    (
        HeaderCopy::from_iter([(":status", "200"), ("content-type", "application/grpc")]),
        body.to_vec(),
        trailers.iter().copied().collect(),
    )
}

/// `message` in a gRPC frame, as an upstream sends it.
pub fn frame(message: &[u8]) -> Vec<u8> {
    grpc_frame(message)
}

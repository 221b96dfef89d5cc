//! What a host with one timer for all its requests keeps for it (proxy-wasm: only the root
//! context ticks, and Envoy's gRPC streams from Wasm take no timeout): the streams its requests
//! have open, each ended at its deadline or when its request is cancelled; the requests
//! waiting to be woken (a task's next poll); and the calls the timer started on a request's
//! behalf, whose answers come back to the timer's context. The host's timer reads it and acts
//! for each request through `R`, its handle on one.

use std::time::Duration;

use crate::cancel::CancelKey;
use crate::reflection::REFRESH_TICK;
use crate::server::Server;
use crate::streams::CallKind;

/// How often a host with one timer looks at its timetable while any request may need it: the
/// precision of a stream's collection window, and how soon a cancellation or a poll takes
/// effect.
pub const TIMETABLE_TICK: Duration = Duration::from_millis(100);

/// How often a host with one timer needs it for `server`: at [`TIMETABLE_TICK`] if a tool
/// streams or runs as a task (deadlines, cancellations, polls), at the refreshes' pace if it
/// only reads reflection (`reflects`), not at all otherwise.
pub fn timer_period(server: &Server, reflects: bool) -> Option<Duration> {
    let keeps_time = server
        .catalog()
        .tools()
        .any(|tool| tool.kind != CallKind::Unary || tool.task.is_some());
    match (keeps_time, reflects) {
        (true, _) => Some(TIMETABLE_TICK),
        (false, true) => Some(REFRESH_TICK),
        (false, false) => None,
    }
}

/// How a host reaches a request from its timer.
pub trait RequestHandle {
    /// The host's id for the request: one wake-up per id.
    fn id(&self) -> u32;
    /// The request has gone (its stream ended): its streams end, its wake-ups are dropped.
    fn is_gone(&self) -> bool;
}

/// A stream that ends at its deadline unless it ends before.
#[derive(Debug)]
pub struct OpenStream<R> {
    /// The host's handle on the stream.
    pub token: u32,
    pub deadline: Duration,
    /// The key its request may be cancelled under, and when the request came.
    pub cancel: Option<(CancelKey, Duration)>,
    pub request: R,
}

/// Why the timer ends a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Its deadline passed (or its request is gone): its call ends with what came so far.
    Deadline,
    /// Its request was cancelled: the request ends with no response.
    Cancelled,
}

/// One host's open streams, wake-ups and calls started from its timer.
#[derive(Debug)]
pub struct Timetable<R> {
    streams: Vec<OpenStream<R>>,
    wakes: Vec<(Duration, R)>,
    /// Calls the timer started, by the host's token, and the request each belongs to.
    adopted: Vec<(u32, R)>,
}

impl<R> Default for Timetable<R> {
    fn default() -> Self {
        Timetable {
            streams: Vec::new(),
            wakes: Vec::new(),
            adopted: Vec::new(),
        }
    }
}

impl<R: RequestHandle> Timetable<R> {
    pub fn open(&mut self, stream: OpenStream<R>) {
        self.streams.push(stream);
    }

    /// The stream under `token` has ended: the timer no longer ends it.
    pub fn close(&mut self, token: u32) {
        self.streams.retain(|stream| stream.token != token);
    }

    /// Takes out the streams to end at `now`: those whose request was cancelled (`cancelled`
    /// says, from its key and when the request came), past their deadline, or whose request
    /// is gone.
    pub fn ending(
        &mut self,
        now: Duration,
        cancelled: impl Fn(&CancelKey, Duration) -> bool,
    ) -> Vec<(OpenStream<R>, Ending)> {
        let mut ending = Vec::new();
        for stream in std::mem::take(&mut self.streams) {
            let cancel = stream
                .cancel
                .as_ref()
                .is_some_and(|(key, since)| cancelled(key, *since));
            if cancel {
                ending.push((stream, Ending::Cancelled));
            } else if stream.deadline <= now || stream.request.is_gone() {
                ending.push((stream, Ending::Deadline));
            } else {
                self.streams.push(stream);
            }
        }
        ending
    }

    /// Wakes `request` at `at`, in place of its earlier wake-up.
    pub fn wake(&mut self, at: Duration, request: R) {
        self.wakes.retain(|(_, known)| known.id() != request.id());
        self.wakes.push((at, request));
    }

    /// Takes out the requests to wake at `now` (a gone one is dropped).
    pub fn due(&mut self, now: Duration) -> Vec<R> {
        let (due, kept) = std::mem::take(&mut self.wakes)
            .into_iter()
            .partition(|(at, request)| *at <= now || request.is_gone());
        self.wakes = kept;
        due.into_iter()
            .filter(|(_, request)| !request.is_gone())
            .map(|(_, request)| request)
            .collect()
    }

    /// The call under `token`, started by the timer, belongs to `request`.
    pub fn adopt(&mut self, token: u32, request: R) {
        self.adopted.push((token, request));
    }

    /// The request a call the timer started belongs to, if `token` is one.
    pub fn adopted(&mut self, token: u32) -> Option<R> {
        let index = self.adopted.iter().position(|(known, _)| *known == token)?;
        Some(self.adopted.swap_remove(index).1)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use serde_json::json;

    use super::*;
    use crate::configure::configure;
    use crate::http::McpHeaders;

    /// A request: its id, and whether it has gone.
    #[derive(Debug, Clone)]
    struct Request(u32, Rc<Cell<bool>>);

    impl RequestHandle for Request {
        fn id(&self) -> u32 {
            self.0
        }

        fn is_gone(&self) -> bool {
            self.1.get()
        }
    }

    fn request(id: u32) -> Request {
        Request(id, Rc::default())
    }

    fn at(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    fn stream(token: u32, deadline: u64, cancel: Option<CancelKey>, request: Request) -> OpenStream<Request> {
        OpenStream {
            token,
            deadline: at(deadline),
            cancel: cancel.map(|key| (key, at(0))),
            request,
        }
    }

    fn tokens(ending: &[(OpenStream<Request>, Ending)]) -> Vec<(u32, Ending)> {
        ending.iter().map(|(stream, why)| (stream.token, *why)).collect()
    }

    #[test]
    fn streams_end_at_their_deadline_when_cancelled_or_when_their_request_goes() {
        let headers = McpHeaders {
            session_id: Some("s".into()),
            ..McpHeaders::default()
        };
        let key = CancelKey::new(&headers, None, &json!(1));
        let gone = request(3);
        let mut table = Timetable::default();
        table.open(stream(1, 100, None, request(1)));
        table.open(stream(2, 500, key, request(2)));
        table.open(stream(3, 500, None, gone.clone()));
        table.open(stream(4, 500, None, request(4)));
        assert!(table.ending(at(50), |_, _| false).is_empty());
        gone.1.set(true);
        let ending = table.ending(at(100), |cancelled, _| Some(*cancelled) == key);
        assert_eq!(
            tokens(&ending),
            [(1, Ending::Deadline), (2, Ending::Cancelled), (3, Ending::Deadline)]
        );
        table.close(4);
        assert!(table.ending(at(1_000), |_, _| true).is_empty(), "closed");
    }

    #[test]
    fn a_request_has_one_wake_up_and_a_gone_one_none() {
        let mut table = Timetable::default();
        table.wake(at(100), request(1));
        table.wake(at(300), request(1));
        table.wake(at(200), request(2));
        let gone = request(3);
        table.wake(at(900), gone.clone());
        gone.1.set(true);
        assert!(table.due(at(150)).is_empty(), "1's wake-up moved to 300");
        let ids = |due: Vec<Request>| due.iter().map(|request| request.0).collect::<Vec<_>>();
        assert_eq!(ids(table.due(at(300))), [1, 2]);
        assert!(table.due(at(1_000)).is_empty(), "the gone request's was dropped");
    }

    #[test]
    fn the_timer_runs_only_as_often_as_the_catalog_needs() {
        let period = |json: &str, reflects| timer_period(&configure(json.as_bytes()).unwrap().server, reflects);
        let users = r#"{"services": {"demo.users.v1.UserService": {"cluster": "users"}}}"#;
        assert_eq!(period(users, false), None);
        assert_eq!(period(users, true), Some(REFRESH_TICK));
        let streams = r#"{"services": {"demo.catalog.v1.CatalogService": {"cluster": "c", "streaming": true}}}"#;
        assert_eq!(period(streams, true), Some(TIMETABLE_TICK));
        let tasks = r#"{"services": {"demo.exports.v1.ExportService": {"cluster": "e", "operations_cluster": "ops"}},
            "tasks": {"keys": ["BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="]}}"#;
        assert_eq!(period(tasks, false), Some(TIMETABLE_TICK));
    }

    #[test]
    fn a_call_the_timer_started_is_handed_back_once() {
        let mut table = Timetable::default();
        table.adopt(7, request(2));
        assert_eq!(table.adopted(8).map(|request| request.0), None);
        assert_eq!(table.adopted(7).map(|request| request.0), Some(2));
        assert!(table.adopted(7).is_none());
    }
}

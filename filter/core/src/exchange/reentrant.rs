//! An exchange for a host that may re-enter it (Envoy's dynamic modules tell a call's answer
//! from inside the host's own call that starts or resets it, while the exchange is in use),
//! and that catches panics: what is told while the exchange is busy is kept, and handed over
//! as soon as it is free; after a panic the exchange is poisoned, and the request gets one
//! answer at most.

use std::cell::{Cell, RefCell};
use std::fmt::Debug;

use super::{Exchange, ExchangeHost, Step};
use crate::grpc::call_end::CallPart;
use crate::grpc::deferred::Deferred;
use crate::http::HttpResponse;
use crate::server::Server;

/// One request's exchange, behind a cell a host's hooks share.
pub struct ReentrantExchange<K> {
    core: RefCell<Exchange<K>>,
    /// What the host told about a call (by its handle) while the exchange was in use.
    deferred: RefCell<Vec<(K, Deferred)>>,
    poisoned: Cell<bool>,
}

/// What a host does for a request whose hook panicked.
#[derive(Debug)]
pub enum AfterPanic {
    /// Nothing was answered yet: answer this (an internal error).
    Answer(HttpResponse),
    /// An answer has gone, at least in part: reset the stream.
    Reset,
}

impl<K> Default for ReentrantExchange<K> {
    fn default() -> Self {
        ReentrantExchange {
            core: RefCell::default(),
            deferred: RefCell::default(),
            poisoned: Cell::new(false),
        }
    }
}

impl<K: Copy + PartialEq + Debug> ReentrantExchange<K> {
    /// Runs `event` on the exchange, then hands over what the host told meanwhile; `None` if
    /// the exchange is in use (the host called in from inside one of its calls).
    pub fn run<H: ExchangeHost<CallHandle = K>, R>(
        &self,
        server: &Server,
        host: &mut H,
        event: impl FnOnce(&mut Exchange<K>, &Server, &mut H) -> R,
    ) -> Option<R> {
        let result = event(&mut *self.core.try_borrow_mut().ok()?, server, host);
        loop {
            let deferred = std::mem::take(&mut *self.deferred.borrow_mut());
            if deferred.is_empty() {
                return Some(result);
            }
            for (call, told) in deferred {
                match told {
                    Deferred::Part(part) => self.call_heard(server, host, call, part.as_part()),
                    Deferred::Ended { reset } => self.call_ended(server, host, call, reset),
                }
            }
        }
    }

    /// [`Exchange::call_heard`], or kept until the exchange is free.
    pub fn call_heard(
        &self,
        server: &Server,
        host: &mut impl ExchangeHost<CallHandle = K>,
        call: K,
        part: CallPart<'_>,
    ) {
        match self.core.try_borrow_mut() {
            Ok(mut core) => core.call_heard(server, host, call, part),
            Err(_) => self.deferred.borrow_mut().push((call, Deferred::from(part))),
        }
    }

    /// [`Exchange::call_ended`], or kept until the exchange is free.
    pub fn call_ended(&self, server: &Server, host: &mut impl ExchangeHost<CallHandle = K>, call: K, reset: bool) {
        match self.core.try_borrow_mut() {
            Ok(mut core) => core.call_ended(server, host, call, reset),
            Err(_) => self.deferred.borrow_mut().push((call, Deferred::Ended { reset })),
        }
    }

    /// Where the request stands; `None` while the exchange is in use.
    pub fn step(&self) -> Option<Step> {
        self.core.try_borrow().ok().map(|core| core.step())
    }

    /// Whether the request was made the call, and the exchange is not in use (a local reply
    /// sent from inside an event runs the response hooks, and is not the call's answer).
    pub fn is_routed(&self) -> bool {
        self.core.try_borrow().is_ok_and(|core| core.is_routed())
    }

    pub fn is_poisoned(&self) -> bool {
        self.poisoned.get()
    }

    /// A hook panicked: from now on the host lets the request be. What it does first, the
    /// first time.
    pub fn poison(&self) -> Option<AfterPanic> {
        if self.poisoned.replace(true) {
            return None;
        }
        // A panic inside the exchange leaves it free again, its guard dropped by the unwinding.
        let answered = self.core.try_borrow().map_or(true, |core| core.has_answered());
        Some(match answered {
            true => AfterPanic::Reset,
            false => AfterPanic::Answer(HttpResponse::internal_error()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake_host::{FakeCall, FakeHead, FakeHost, Sent};
    use super::super::tests::{answered_ok, get_item, server, ITEM};
    use super::*;

    #[test]
    fn what_the_host_tells_while_the_exchange_is_busy_is_handed_over_when_it_is_free() {
        let (server, mut host) = (server(), FakeHost::default());
        let exchange = ReentrantExchange::<FakeCall>::default();
        let body = get_item();
        let head = FakeHead::post("/mcp").with("content-length", body.len().to_string());
        let step = exchange.run(&server, &mut host, |core, server, host| {
            core.request_headers(server, host, &head, false)
        });
        assert_eq!(step, Some(Step::ReadBody));
        let (headers, frame, trailers) = answered_ok(ITEM);
        let step = exchange.run(&server, &mut host, |core, server, host| {
            let step = core.request_body(server, host, body.len(), true, || body.as_bytes().to_vec());
            // Envoy tells the call's whole answer from inside the call that starts it.
            exchange.call_heard(server, host, 1, CallPart::Headers(headers));
            exchange.call_heard(server, host, 1, CallPart::Data(&frame));
            exchange.call_heard(server, host, 1, CallPart::Trailers(trailers));
            exchange.call_ended(server, host, 1, false);
            assert!(host.sent.is_empty(), "kept while the exchange is busy");
            assert_eq!(exchange.step(), None);
            step
        });
        assert_eq!(step, Some(Step::Waiting));
        let [Sent::Whole(200, answer)] = &host.sent[..] else {
            panic!("{:?}", host.sent);
        };
        assert!(answer.contains(r#""name":"pen""#), "{answer}");
        assert_eq!(exchange.step(), Some(Step::Answered));
    }

    #[test]
    fn a_panic_gets_one_internal_error_before_an_answer_and_a_reset_after() {
        let exchange = ReentrantExchange::<FakeCall>::default();
        let Some(AfterPanic::Answer(response)) = exchange.poison() else {
            panic!("nothing was answered yet");
        };
        assert_eq!(response.status, 500);
        assert!(exchange.is_poisoned());
        assert!(exchange.poison().is_none(), "once");

        let (server, mut host) = (server(), FakeHost::default());
        let exchange = ReentrantExchange::<FakeCall>::default();
        let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let head = FakeHead::post("/mcp").with("content-length", ping.len().to_string());
        exchange.run(&server, &mut host, |core, server, host| {
            core.request_headers(server, host, &head, false)
        });
        exchange.run(&server, &mut host, |core, server, host| {
            core.request_body(server, host, ping.len(), true, || ping.as_bytes().to_vec())
        });
        assert_eq!(host.sent.len(), 1);
        assert!(matches!(exchange.poison(), Some(AfterPanic::Reset)));
    }
}

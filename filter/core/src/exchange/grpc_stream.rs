//! A call a host makes as a gRPC stream of its own client (proxy-wasm's), rather than as an
//! HTTP request: its messages come one at a time, sized before they are read, and it closes
//! with a status number and the trailing metadata that came.

use std::fmt::Debug;

use super::{id_of, Exchange, ExchangeHost, State};
use crate::grpc::call_end::CallPart;
use crate::http::{HeaderCopy, HeaderPair};
use crate::server::Server;

impl<K: Copy + PartialEq + Debug> Exchange<K> {
    /// The stream the host knows by `call` has begun its answer (its initial metadata came).
    pub fn stream_began(&mut self, server: &Server, host: &mut impl ExchangeHost<CallHandle = K>, call: K) {
        let headers = HeaderCopy::from_iter([(":status", "200")]);
        self.call_heard(server, host, call, CallPart::Headers(headers));
    }

    /// A message of `size` bytes has come on the stream of the call the host knows by `call`,
    /// not yet read: whether the host is to read it and hand it over. One that would pass a
    /// bound is not read; the call is stopped.
    pub fn message_coming(
        &mut self,
        server: &Server,
        host: &mut impl ExchangeHost<CallHandle = K>,
        call: K,
        size: usize,
    ) -> bool {
        let State::CallingOut(reply) = &mut self.state else {
            return false;
        };
        let Some(id) = id_of(&self.calls, call) else {
            return false;
        };
        if !server.admits_message(reply, id, size).stop {
            return true;
        }
        self.stop_call(server, host, id);
        false
    }

    /// A message of `size` bytes has come on the stream the host knows by `call`: `read` reads
    /// it, unless it would pass a bound (the call is stopped, the message never read).
    pub fn stream_message(
        &mut self,
        server: &Server,
        host: &mut impl ExchangeHost<CallHandle = K>,
        call: K,
        size: usize,
        read: impl FnOnce() -> Vec<u8>,
    ) {
        if self.message_coming(server, host, call, size) {
            self.call_heard(server, host, call, CallPart::Message(&read()));
        }
    }

    /// The stream the host knows by `call` closed with gRPC status `status`; `trailing` is the
    /// trailing metadata that came (`grpc-message` among it, maybe not UTF-8): the call ends.
    pub fn stream_closed<'a>(
        &mut self,
        server: &Server,
        host: &mut impl ExchangeHost<CallHandle = K>,
        call: K,
        status: u32,
        trailing: impl Iterator<Item = HeaderPair<'a>> + Clone,
    ) {
        let mut trailers = HeaderCopy::sized_from(trailing.filter(|&(name, _)| name != "grpc-status"));
        trailers.push(b"grpc-status", status.to_string().as_bytes());
        self.stream_began(server, host, call);
        self.call_heard(server, host, call, CallPart::Trailers(trailers));
        self.call_ended(server, host, call, false);
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::super::fake_host::{FakeExchange, FakeHost};
    use super::super::tests::{json_of, post, server, watch, EVENT};
    use super::*;

    /// A streaming call over a gRPC stream: `messages` messages, then its close.
    fn streamed(
        server: &Server,
        messages: usize,
        status: u32,
        trailing: &[HeaderPair<'_>],
    ) -> (FakeHost, FakeExchange) {
        let mut host = FakeHost::default();
        let (mut exchange, _) = post(server, &mut host, &watch(false));
        exchange.stream_began(server, &mut host, 1);
        for _ in 0..messages {
            exchange.stream_message(server, &mut host, 1, EVENT.len(), || EVENT.to_vec());
        }
        exchange.stream_closed(server, &mut host, 1, status, trailing.iter().copied());
        (host, exchange)
    }

    #[test]
    fn a_stream_closed_ok_ends_its_call_with_the_messages() {
        let server = server();
        let (host, _) = streamed(&server, 2, 0, &[]);
        let answer = json_of(&host.sent[0]);
        let messages = &answer["result"]["structuredContent"]["messages"];
        assert_eq!(messages.as_array().map(Vec::len), Some(2), "{answer}");
    }

    #[test]
    fn a_stream_closed_with_an_error_gives_its_status_and_message_not_a_grpc_status_it_sent() {
        let server = server();
        let trailing: &[HeaderPair<'_>] = &[("grpc-status", b"0"), ("grpc-message", b"the store is gone")];
        let (host, _) = streamed(&server, 0, 14, trailing);
        let answer = json_of(&host.sent[0]).to_string();
        assert!(
            answer.contains("UNAVAILABLE") && answer.contains("the store is gone"),
            "{answer}"
        );
    }

    #[test]
    fn a_message_past_the_bound_is_never_read() {
        let server = Server::from_config_bytes(
            br#"{"limits": {"max_response_bytes": 1000},
                 "services": {"demo.catalog.v1.CatalogService": {"cluster": "catalog", "streaming": true}}}"#,
        )
        .unwrap();
        let mut host = FakeHost::default();
        let (mut exchange, _) = post(&server, &mut host, &watch(false));
        let read = Cell::new(false);
        exchange.stream_message(&server, &mut host, 1, 1001, || {
            read.set(true);
            Vec::new()
        });
        assert!(!read.get());
        assert_eq!(host.resets, [1]);
    }
}

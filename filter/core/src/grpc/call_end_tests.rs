use super::*;
use crate::grpc;
use std::time::Duration;

use crate::grpc::frame::grpc_frame;
use crate::grpc::status::{of_http, UNAVAILABLE};

const OK_HEADERS: &[HeaderPair<'static>] = &[(":status", b"200"), ("content-type", b"application/grpc")];

fn replied(end: CallEnd<'_>) -> GrpcReply<'_> {
    match end {
        CallEnd::Replied(reply) => reply,
        other => panic!("not a reply: {other:?}"),
    }
}

#[test]
fn frames_and_timeouts_are_written_as_grpc_wants_them() {
    assert_eq!(grpc_frame(&[0x08, 7]), [0, 0, 0, 0, 2, 0x08, 7]);
    assert_eq!(grpc_frame(&[]), [0, 0, 0, 0, 0]);
    assert_eq!(grpc::timeout(Duration::from_millis(1500)), "1500m");
    assert_eq!(grpc::timeout(Duration::from_secs(10)), "10000m");
    assert_eq!(grpc::timeout(Duration::from_secs(1_000_000)), "99999999m");
}

#[test]
fn a_success_carries_the_one_message() {
    let reply = replied(call_end(
        OK_HEADERS,
        &[0, 0, 0, 0, 2, 0x08, 7],
        &[("grpc-status", b"0")],
    ));
    assert_eq!(
        (reply.status, reply.body, reply.message, reply.details),
        (0, [0x08, 7].as_slice(), None, None)
    );
    let empty = replied(call_end(OK_HEADERS, &[0, 0, 0, 0, 0], &[("grpc-status", b"0")]));
    assert_eq!((empty.status, empty.body), (0, [].as_slice()));
}

#[test]
fn failures_come_from_the_trailers_or_a_trailers_only_answer() {
    let trailers: &[HeaderPair<'_>] = &[
        ("grpc-status", b"5"),
        ("grpc-message", b"caf\xe9 %41"),
        ("grpc-status-details-bin", b"CAU"),
    ];
    let reply = replied(call_end(OK_HEADERS, &[], trailers));
    assert_eq!(
        (reply.status, reply.message, reply.details),
        (5, Some(b"caf\xe9 %41".as_slice()), Some(b"CAU".as_slice()))
    );
    let trailers_only: &[HeaderPair<'_>] = &[
        (":status", b"200"),
        ("grpc-status", b"14"),
        ("grpc-message", b"no healthy upstream"),
    ];
    let reply = replied(call_end(trailers_only, &[], &[]));
    assert_eq!(
        (reply.status, reply.message),
        (14, Some(b"no healthy upstream".as_slice()))
    );
    // The trailers win over a header of the same name.
    let reply = replied(call_end(
        &[(":status", b"200"), ("grpc-status", b"0")],
        &[],
        &[("grpc-status", b"3")],
    ));
    assert_eq!(reply.status, 3);
}

#[test]
fn envoys_own_timeout_is_the_deadline() {
    let timed_out: &[HeaderPair<'_>] = &[
        (":status", b"200"),
        ("grpc-status", b"14"),
        ("grpc-message", b"upstream request timeout"),
    ];
    assert!(matches!(call_end(timed_out, &[], &[]), CallEnd::DeadlinePassed));
}

#[test]
fn no_response_is_a_reset_and_an_http_error_maps_to_a_grpc_status() {
    assert!(matches!(call_end(&[], &[], &[]), CallEnd::Reset));
    assert!(matches!(
        call_end(&[(":status", b"503")], b"no healthy upstream", &[]),
        CallEnd::HttpError {
            status: 503,
            body: b"no healthy upstream"
        }
    ));
    assert_eq!(of_http(503), UNAVAILABLE);
    assert_eq!(of_http(404), 12);
    assert_eq!(of_http(418), 2);
    // Envoy's router past the route's timeout, for a request that was not gRPC when it came.
    assert!(matches!(
        call_end(&[(":status", b"504")], b"upstream request timeout", &[]),
        CallEnd::DeadlinePassed
    ));
}

#[test]
fn broken_answers_are_malformed() {
    type Case<'a> = (&'a [HeaderPair<'a>], &'a [u8], &'a [HeaderPair<'a>], &'a str);
    let cases: [Case<'_>; 6] = [
        (OK_HEADERS, &[0, 0, 0, 0, 2, 0x08, 7], &[], "no grpc-status"),
        (
            OK_HEADERS,
            &[0, 0, 0, 0, 2, 0x08, 7],
            &[("grpc-status", b"OK")],
            "not a number",
        ),
        (OK_HEADERS, &[], &[("grpc-status", b"0")], "has no message"),
        (
            OK_HEADERS,
            &[0, 0, 0],
            &[("grpc-status", b"0")],
            "ends inside a gRPC frame",
        ),
        (OK_HEADERS, &[1, 0, 0, 0, 1, 9], &[("grpc-status", b"0")], "compressed"),
        (
            OK_HEADERS,
            &[0, 0, 0, 0, 1, 9, 0, 0, 0, 0, 0],
            &[("grpc-status", b"0")],
            "more than one message",
        ),
    ];
    for (headers, body, trailers, expected) in cases {
        match call_end(headers, body, trailers) {
            CallEnd::Malformed { problem } => assert!(problem.contains(expected), "{problem}"),
            other => panic!("{expected}: {other:?}"),
        }
    }
    let truncated = call_end(OK_HEADERS, &[0, 0, 0, 0, 9, 1], &[("grpc-status", b"0")]);
    assert!(matches!(truncated, CallEnd::Malformed { problem } if problem.contains("ends inside")));
}

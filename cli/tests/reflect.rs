//! `config --reflect` against an HTTP/2 server that is not gRPC: a few lines of HTTP/2 on a
//! loopback port answer every request with an error page and no gRPC status, as Envoy's admin
//! port does. The CLI must say so, not report the page as a broken gRPC message.

// Test code: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;

use common::switchblade;

const SETTINGS: u8 = 0x4;
const HEADERS: u8 = 0x1;
const DATA: u8 = 0x0;
const PING: u8 = 0x6;
const ACK: u8 = 0x1;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let length = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut bytes = vec![length[1], length[2], length[3], kind, flags];
    bytes.extend(stream.to_be_bytes());
    bytes.extend(payload);
    bytes
}

/// One connection: the client's preface and settings acknowledged, and every request answered
/// `404` with a `text/plain` page.
fn answer_404_pages(mut connection: TcpStream) {
    let mut preface = [0; 24];
    if connection.read_exact(&mut preface).is_err() {
        return;
    }
    connection.write_all(&frame(SETTINGS, 0, 0, &[])).unwrap();
    let mut head = [0; 9];
    while connection.read_exact(&mut head).is_ok() {
        let length = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let (kind, flags) = (head[3], head[4]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0; length];
        if connection.read_exact(&mut payload).is_err() {
            return;
        }
        let reply = match kind {
            SETTINGS if flags & ACK == 0 => frame(SETTINGS, ACK, 0, &[]),
            PING if flags & ACK == 0 => frame(PING, ACK, 0, &payload),
            HEADERS => {
                // HPACK: `:status: 404` (static index 13), then `content-type: text/plain` (a
                // literal with the static name 31, not indexed).
                let mut block = vec![0x80 | 13, 0x0f, 31 - 15, 10];
                block.extend(b"text/plain");
                let mut reply = frame(HEADERS, END_HEADERS, stream, &block);
                reply.extend(frame(DATA, END_STREAM, stream, b"invalid path. admin commands are:\n"));
                reply
            }
            _ => continue,
        };
        if connection.write_all(&reply).is_err() {
            return;
        }
    }
}

#[test]
fn reflect_says_an_http2_server_that_answers_404_with_a_page_is_not_grpc() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for connection in listener.incoming().flatten() {
            thread::spawn(move || answer_404_pages(connection));
        }
    });
    let error = switchblade(&[
        "config",
        "--reflect",
        &address,
        "--service",
        "acme.inventory.v1.InventoryService=inventory",
    ])
    .error();
    assert_eq!(
        error,
        format!("--reflect {address}: not a gRPC server: it answered HTTP 404 without a gRPC status")
    );
}

use super::*;
use crate::http::HeaderPair;

#[test]
fn another_method_or_a_declared_length_over_the_limit_is_answered_before_the_body() {
    let server = server();
    let get: &[HeaderPair<'_>] = &[(":method", b"GET"), (":path", b"/mcp")];
    assert_eq!(
        server
            .admit_headers("/mcp", get, &mut Observations::default())
            .unwrap_err()
            .status,
        405
    );
    let limit = server.limits().max_request_bytes.to_string();
    let over = (server.limits().max_request_bytes + 1).to_string();
    let at_limit: &[HeaderPair<'_>] = &[(":method", b"POST"), ("content-length", limit.as_bytes())];
    assert!(server
        .admit_headers("/mcp", at_limit, &mut Observations::default())
        .is_ok());
    let too_long: &[HeaderPair<'_>] = &[(":method", b"POST"), ("content-length", over.as_bytes())];
    let refusal = server
        .admit_headers("/mcp?x=1", too_long, &mut Observations::default())
        .unwrap_err();
    assert_eq!(refusal.status, 413);
    assert!(String::from_utf8_lossy(&refusal.body).contains(&over), "{refusal:?}");
}

#[test]
fn the_headers_read_keep_values_that_are_not_utf8_readable() {
    let server = server();
    let pairs: &[HeaderPair<'_>] = &[
        (":method", b"POST"),
        ("content-type", b"application/json"),
        ("mcp-protocol-version", b"2025-11-25"),
        ("x-client-version", b"7.1 \xff"),
        ("x-request-id", b"id-\xfe"),
        ("cookie", b"not forwarded"),
    ];
    let headers = server
        .admit_headers("/mcp", pairs, &mut Observations::default())
        .unwrap();
    assert_eq!(headers.content_type.as_deref(), Some("application/json"));
    assert_eq!(headers.protocol_version.as_deref(), Some("2025-11-25"));
    let forwarded: Vec<&str> = headers.forwarded.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(forwarded, ["x-client-version", "x-request-id"]);
    assert_eq!(headers.forwarded[1].1, "id-\u{fffd}");
}

//! gRPC status codes as names a model (and a human) can read.

/// The canonical name of a gRPC status code, as in `google.rpc.Code`.
pub fn status_name(code: u32) -> &'static str {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    usize::try_from(code)
        .ok()
        .and_then(|index| NAMES.get(index))
        .copied()
        .unwrap_or("UNKNOWN")
}

pub const OK: u32 = 0;
pub const CANCELLED: u32 = 1;
pub const UNKNOWN: u32 = 2;
pub const INVALID_ARGUMENT: u32 = 3;
pub const DEADLINE_EXCEEDED: u32 = 4;
pub const NOT_FOUND: u32 = 5;
pub const PERMISSION_DENIED: u32 = 7;
pub const RESOURCE_EXHAUSTED: u32 = 8;
pub const UNIMPLEMENTED: u32 = 12;
pub const INTERNAL: u32 = 13;
pub const UNAVAILABLE: u32 = 14;
pub const UNAUTHENTICATED: u32 = 16;

/// The readable text of a `grpc-message` as Envoy hands it over: percent-decoded (the gRPC
/// wire form) and without the `{response_code_details}` tag Envoy appends, such as
/// `{via_upstream}`.
pub fn readable_message(raw: &str) -> String {
    let without_details = match raw.rsplit_once('{') {
        Some((message, tag)) if is_details_tag(tag) => message,
        _ => raw,
    };
    percent_encoding::percent_decode_str(without_details)
        .decode_utf8_lossy()
        .trim_end()
        .to_owned()
}

fn is_details_tag(tag: &str) -> bool {
    tag.strip_suffix('}').is_some_and(|inner| {
        !inner.is_empty()
            && inner
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    })
}

/// The gRPC status of an HTTP status, as gRPC clients map them (grpc's
/// doc/http-grpc-status-mapping.md).
pub(crate) fn of_http(http: u32) -> u32 {
    match http {
        400 => INTERNAL,
        401 => UNAUTHENTICATED,
        403 => PERMISSION_DENIED,
        404 => UNIMPLEMENTED,
        429 | 502..=504 => UNAVAILABLE,
        _ => UNKNOWN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_known_and_unknown_codes() {
        assert_eq!(status_name(0), "OK");
        assert_eq!(status_name(5), "NOT_FOUND");
        assert_eq!(status_name(UNAVAILABLE), "UNAVAILABLE");
        assert_eq!(status_name(16), "UNAUTHENTICATED");
        assert_eq!(status_name(17), "UNKNOWN");
        assert_eq!(status_name(u32::MAX), "UNKNOWN");
    }

    #[test]
    fn messages_are_decoded_and_untagged() {
        assert_eq!(
            readable_message("no%20item%20has%20id%2099{via_upstream}"),
            "no item has id 99"
        );
        assert_eq!(readable_message("caf%C3%A9 100%25"), "café 100%");
        assert_eq!(
            readable_message("keeps {braces} and {Tags}"),
            "keeps {braces} and {Tags}"
        );
        assert_eq!(readable_message("bad %zz escape"), "bad %zz escape");
        assert_eq!(readable_message(""), "");
    }
}

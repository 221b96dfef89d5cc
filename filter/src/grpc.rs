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

pub const UNAVAILABLE: u32 = 14;

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
}

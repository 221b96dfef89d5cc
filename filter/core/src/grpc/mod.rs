//! gRPC as it goes over HTTP/2, below every call the filter makes (tool calls and gRPC server
//! reflection alike): frames ([`frame`]), the deadline header, status codes and their names
//! ([`status`]), the error details a status carries ([`details`]), a stream of answers gathered
//! within its bounds ([`stream`]), and how a call ended, read from its response ([`call_end`]).

use std::time::Duration;

pub mod call_end;
pub mod deferred;
pub mod details;
pub(crate) mod frame;
pub mod status;
pub mod stream;

/// `grpc-timeout` in milliseconds (at most 8 digits, as the gRPC spec allows).
pub(crate) fn timeout(timeout: Duration) -> String {
    format!("{}m", timeout.as_millis().min(99_999_999))
}

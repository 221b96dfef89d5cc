//! The progress notifications of a streaming call whose client asked for them: one SSE event
//! per message gathered, then the result as the last event.

use serde_json::{json, Value};

use crate::jsonrpc;

/// The progress notifications of a call whose answer is an SSE stream: one per message
/// gathered, then the result.
#[derive(Debug)]
pub(super) struct Progress {
    pub(super) token: Value,
    /// Messages gathered so far.
    pub(super) count: usize,
    /// Events not yet handed to the host.
    pub(super) events: Vec<u8>,
    /// The host has sent events already, so the answer's head with them.
    pub(super) streamed: bool,
}

impl Progress {
    /// The notification of the next message gathered, as an SSE event.
    pub(super) fn next_event(&mut self) -> Vec<u8> {
        self.count += 1;
        let notification = json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {
                "progressToken": self.token,
                "progress": self.count,
                "message": match self.count {
                    1 => "1 message received".to_owned(),
                    count => format!("{count} messages received"),
                },
            },
        });
        let mut event = Vec::new();
        push_event(&mut event, &jsonrpc::encode(&notification));
        event
    }
}

/// One SSE event that carries a JSON-RPC message.
pub(super) fn push_event(events: &mut Vec<u8>, message: &[u8]) {
    events.extend_from_slice(b"event: message\ndata: ");
    events.extend_from_slice(message);
    events.extend_from_slice(b"\n\n");
}

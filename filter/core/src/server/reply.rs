//! The answer to one POST: one JSON-RPC response per request in the body, filled in as the
//! calls they wait for end, and sent as one object, or as an array for a batch. It also keeps
//! the books of those calls: planned, started under the host's token, ended.

use std::time::Duration;

use serde_json::Value;

use crate::eras::{Era, BATCH_VERSION, MODERN_VERSION};
use crate::http::HttpResponse;
use crate::jsonrpc::{self, RpcError, INVALID_REQUEST};
use crate::upstream::UpstreamCall;

/// One JSON-RPC response, ready to send, and the HTTP status it asks for when alone.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
}

impl Answer {
    /// A success whose result is already JSON text.
    pub(crate) fn raw(id: &Value, result_json: &str) -> Answer {
        Answer {
            status: 200,
            body: jsonrpc::success_raw(id, result_json),
        }
    }

    pub(crate) fn error(era: Era, error: &RpcError) -> Answer {
        Answer {
            status: era.error_status(error.code),
            body: jsonrpc::encode(&error.to_value()),
        }
    }
}

/// The answer to a POST, assembled as its upstream calls return.
#[derive(Debug)]
pub struct Reply {
    batch: bool,
    /// One response per request in the body; `None` while its call is out.
    slots: Vec<Option<Answer>>,
    /// Calls planned, for the host to start.
    to_start: Vec<UpstreamCall>,
    /// Calls out, by the host's token.
    out: Vec<(u64, UpstreamCall)>,
}

impl Reply {
    pub(crate) fn new(batch: bool, capacity: usize) -> Self {
        Reply {
            batch,
            slots: Vec::with_capacity(capacity),
            to_start: Vec::new(),
            out: Vec::new(),
        }
    }

    /// The calls the host is to start; each is then [`started`](Self::started), or filed as
    /// [`NotStarted`](crate::upstream::CallEnd::NotStarted).
    pub fn take_calls_to_start(&mut self) -> Vec<UpstreamCall> {
        std::mem::take(&mut self.to_start)
    }

    /// The host has started `call` under `token`, at `now` on its clock (any epoch, the same
    /// clock as for [`Server::file`](super::Server::file)).
    pub fn started(&mut self, token: u64, mut call: UpstreamCall, now: Duration) {
        call.sent_at = Some(now);
        self.out.push((token, call));
    }

    /// Takes the call under `token` out of the books; `None` once it has ended. Its result is
    /// then filed with [`Server::file`](super::Server::file).
    pub fn take(&mut self, token: u64) -> Option<UpstreamCall> {
        let index = self.out.iter().position(|(known, _)| *known == token)?;
        Some(self.out.swap_remove(index).1)
    }

    /// Whether the POST was a JSON-RPC batch.
    pub fn is_batch(&self) -> bool {
        self.batch
    }

    /// Whether every response is there: no call waits to start or is out.
    pub fn is_complete(&self) -> bool {
        self.to_start.is_empty() && self.out.is_empty() && self.slots.iter().all(Option::is_some)
    }

    /// Where the next response goes.
    pub(crate) fn next_slot(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn answered(&mut self, answer: Answer) {
        self.slots.push(Some(answer));
    }

    /// Keeps the next slot for the result of `call`, which the host is to start.
    pub(crate) fn awaiting(&mut self, call: UpstreamCall) {
        self.slots.push(None);
        self.to_start.push(call);
    }

    /// Whether any call was planned.
    pub(crate) fn has_calls(&self) -> bool {
        !self.to_start.is_empty() || !self.out.is_empty()
    }

    pub(crate) fn fill(&mut self, slot: usize, answer: Answer) {
        if let Some(slot) = self.slots.get_mut(slot) {
            *slot = Some(answer);
        }
    }

    /// The HTTP response: one JSON-RPC response, or a batch array (always 200). Nothing to
    /// say (notifications, client responses) is 202.
    pub fn into_response(self) -> HttpResponse {
        let mut answers = self.slots.into_iter().flatten();
        if !self.batch {
            return match answers.next() {
                Some(answer) => HttpResponse::json(answer.status, answer.body),
                None => HttpResponse::accepted(),
            };
        }
        let mut body = vec![b'['];
        for (index, answer) in answers.enumerate() {
            if index > 0 {
                body.push(b',');
            }
            body.extend_from_slice(&answer.body);
        }
        body.push(b']');
        if body.len() == 2 {
            return HttpResponse::accepted();
        }
        HttpResponse::json(200, body)
    }
}

/// Batches are a 2025-03-26 feature, and never empty.
pub(crate) fn refuse_batch(era: Era, empty: bool) -> Option<RpcError> {
    let message = match era {
        Era::Legacy(BATCH_VERSION) if empty => "Invalid Request: an empty JSON-RPC batch".to_owned(),
        Era::Legacy(BATCH_VERSION) => return None,
        Era::Legacy(version) => format!(
            "Invalid Request: JSON-RPC batches are only allowed in protocol version {BATCH_VERSION}, not {version}"
        ),
        Era::Modern => format!(
            "Invalid Request: JSON-RPC batches are only allowed in protocol version {BATCH_VERSION}, not {MODERN_VERSION}"
        ),
    };
    Some(RpcError::new(&Value::Null, INVALID_REQUEST, message))
}

/// A refusal of the whole POST, before any message is handled.
pub(crate) fn respond_error(status: u16, error: &RpcError) -> super::Outcome {
    super::Outcome::Respond(HttpResponse::rpc_error(status, error))
}

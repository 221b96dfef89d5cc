//! What Envoy told about a call while the state it belongs to was in use (Envoy may answer a
//! call from inside `start_call`), kept to deliver once the start has returned.

use switchblade_core::host_api::{CallPart, HeaderCopy};

pub enum Deferred {
    /// Boxed: a header copy keeps the ends of its first headers in place, and this is rare.
    Part(Box<OwnedPart>),
    Ended {
        reset: bool,
    },
}

/// A part of a call's answer, owned.
pub enum OwnedPart {
    Headers(HeaderCopy),
    Data(Vec<u8>),
    Message(Vec<u8>),
    Trailers(HeaderCopy),
}

impl From<CallPart<'_>> for Deferred {
    fn from(part: CallPart<'_>) -> Self {
        Deferred::Part(Box::new(match part {
            CallPart::Headers(headers) => OwnedPart::Headers(headers),
            CallPart::Data(data) => OwnedPart::Data(data.to_vec()),
            CallPart::Message(message) => OwnedPart::Message(message.to_vec()),
            CallPart::Trailers(trailers) => OwnedPart::Trailers(trailers),
        }))
    }
}

impl OwnedPart {
    /// The part again, to hand over.
    pub fn as_part(&self) -> CallPart<'_> {
        match self {
            OwnedPart::Headers(headers) => CallPart::Headers(headers.clone()),
            OwnedPart::Data(data) => CallPart::Data(data),
            OwnedPart::Message(message) => CallPart::Message(message),
            OwnedPart::Trailers(trailers) => CallPart::Trailers(trailers.clone()),
        }
    }
}

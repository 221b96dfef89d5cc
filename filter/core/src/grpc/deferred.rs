//! What a host heard of a call while the state the call belongs to was in use (Envoy may tell
//! a call's answer from inside the host's own call that starts it), owned, to hand over once
//! that state is free.

use super::call_end::CallPart;
use crate::http::HeaderCopy;

/// A part of a call's answer, or its end, kept for later.
#[derive(Debug)]
pub enum Deferred {
    /// Boxed: a header copy keeps the ends of its first headers in place, and this is rare.
    Part(Box<OwnedPart>),
    /// The call ended (`reset`: without a whole answer).
    Ended { reset: bool },
}

/// A part of a call's answer, owned.
#[derive(Debug)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_kept_is_handed_over_as_it_came() {
        let headers = HeaderCopy::from_iter([(":status", "200")]);
        for part in [
            CallPart::Headers(headers.clone()),
            CallPart::Data(b"frame"),
            CallPart::Message(b"message"),
            CallPart::Trailers(headers),
        ] {
            let before = format!("{part:?}");
            let Deferred::Part(kept) = Deferred::from(part) else {
                panic!("a part is kept as one");
            };
            assert_eq!(format!("{:?}", kept.as_part()), before);
        }
    }
}

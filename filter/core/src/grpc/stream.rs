//! A stream of answers as its bytes come: gRPC frames gathered into messages, in chunks that
//! may split a frame anywhere, within a message bound and a byte bound; and why the stream
//! ended. A bound reached stops it, and the host cancels the upstream stream at once.

use super::frame::FRAME_PREFIX;

/// Why a gathered stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// The upstream ended the stream (with whatever status).
    Complete,
    /// `max_messages` came; the stream was cancelled.
    MaxMessages,
    /// The next message would have passed `limits.max_response_bytes`; the stream was cancelled.
    MaxBytes,
    /// The tool's deadline (its collection window) passed; the stream was cancelled.
    Deadline,
}

impl EndReason {
    pub const ALL: [EndReason; 4] = [
        EndReason::Complete,
        EndReason::MaxMessages,
        EndReason::MaxBytes,
        EndReason::Deadline,
    ];

    pub fn label(self) -> &'static str {
        match self {
            EndReason::Complete => "complete",
            EndReason::MaxMessages => "max_messages",
            EndReason::MaxBytes => "max_bytes",
            EndReason::Deadline => "deadline",
        }
    }
}

/// The messages of an answered stream as its bytes come, in chunks that may split a frame
/// anywhere, kept within the tool's bounds. A bound reached stops it: what comes after is not
/// kept, and the host cancels the upstream stream.
#[derive(Debug)]
pub struct StreamCollector {
    /// The start of a frame whose end has not come yet.
    pending: Vec<u8>,
    messages: Vec<Vec<u8>>,
    /// Bytes of the messages kept.
    bytes: usize,
    max_messages: usize,
    max_bytes: usize,
    stopped: Option<EndReason>,
    /// The stream broke gRPC's framing; nothing more is read.
    broken: Option<&'static str>,
}

impl StreamCollector {
    pub fn new(max_messages: usize, max_bytes: usize) -> Self {
        StreamCollector {
            pending: Vec::new(),
            messages: Vec::new(),
            bytes: 0,
            max_messages,
            max_bytes,
            stopped: None,
            broken: None,
        }
    }

    /// Reads a chunk of the stream's body; how many messages it completed.
    pub fn feed(&mut self, mut chunk: &[u8]) -> usize {
        let before = self.messages.len();
        while !chunk.is_empty() && !self.is_done() {
            // Complete the frame prefix first: it says how long the message is.
            if self.pending.len() < FRAME_PREFIX {
                let wanted = (FRAME_PREFIX - self.pending.len()).min(chunk.len());
                let (head, rest) = chunk.split_at(wanted);
                self.pending.extend_from_slice(head);
                chunk = rest;
                if self.pending.len() < FRAME_PREFIX {
                    break;
                }
                if self.pending[0] != 0 {
                    self.broken = Some("the upstream's answer is compressed, and no compression was offered");
                    break;
                }
                let length = self.declared_length();
                if length > self.room() {
                    self.stopped = Some(EndReason::MaxBytes);
                    break;
                }
                self.pending.reserve(length);
            }
            let missing = FRAME_PREFIX + self.declared_length() - self.pending.len();
            let (body, rest) = chunk.split_at(missing.min(chunk.len()));
            self.pending.extend_from_slice(body);
            chunk = rest;
            if self.pending.len() == FRAME_PREFIX + self.declared_length() {
                let message = self.pending.split_off(FRAME_PREFIX);
                self.pending.clear();
                self.keep(message);
            }
        }
        self.messages.len() - before
    }

    /// Takes one message as a host that reads frames itself hands it over; whether it was kept.
    pub fn push(&mut self, message: &[u8]) -> bool {
        if !self.admits(message.len()) {
            return false;
        }
        self.keep(message.to_vec());
        true
    }

    /// Whether a message of `size` bytes, not yet read, would be kept: a host asks before it
    /// copies a message whose size it knows, and one past the bound stops the stream unread.
    pub fn admits(&mut self, size: usize) -> bool {
        if self.is_done() {
            return false;
        }
        if size > self.room() {
            self.stopped = Some(EndReason::MaxBytes);
            return false;
        }
        true
    }

    /// Spends `bytes` of the bound on something else the answer carries for the stream (its
    /// progress notifications); past the bound, the stream stops there.
    pub fn spend(&mut self, bytes: usize) -> bool {
        if bytes > self.room() {
            self.stopped.get_or_insert(EndReason::MaxBytes);
            return false;
        }
        self.bytes += bytes;
        true
    }

    fn room(&self) -> usize {
        self.max_bytes.saturating_sub(self.bytes)
    }

    fn keep(&mut self, message: Vec<u8>) {
        self.bytes += message.len();
        self.messages.push(message);
        if self.messages.len() >= self.max_messages {
            self.stopped = Some(EndReason::MaxMessages);
        }
    }

    fn declared_length(&self) -> usize {
        let prefix = [self.pending[1], self.pending[2], self.pending[3], self.pending[4]];
        usize::try_from(u32::from_be_bytes(prefix)).unwrap_or(usize::MAX)
    }

    /// Whether nothing more is read: a bound stopped the stream, or it broke.
    pub fn is_done(&self) -> bool {
        self.stopped.is_some() || self.broken.is_some()
    }

    /// The bound that stopped the stream, if one did.
    pub fn stopped(&self) -> Option<EndReason> {
        self.stopped
    }

    /// Why the stream's framing broke, if it did: the stream ended inside a frame counts only
    /// once it has ended ([`Self::end`]).
    pub fn broken(&self) -> Option<&'static str> {
        self.broken
    }

    pub fn messages(&self) -> &[Vec<u8>] {
        &self.messages
    }

    /// How the stream ended once the upstream (or the host, at the deadline) ended it, or
    /// why its bytes are not a stream of messages.
    pub fn end(&self, deadline_passed: bool) -> Result<EndReason, &'static str> {
        if let Some(problem) = self.broken {
            return Err(problem);
        }
        if let Some(reason) = self.stopped {
            return Ok(reason);
        }
        if deadline_passed {
            return Ok(EndReason::Deadline);
        }
        if !self.pending.is_empty() {
            return Err("the upstream's answer ends inside a gRPC frame");
        }
        Ok(EndReason::Complete)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::frame::grpc_frame;

    fn frames(messages: &[&[u8]]) -> Vec<u8> {
        messages.iter().flat_map(|message| grpc_frame(message)).collect()
    }

    #[test]
    fn messages_come_whole_whatever_the_chunks() {
        let messages: [&[u8]; 4] = [b"one", b"", b"three", &[7; 300]];
        let body = frames(&messages);
        for size in 1..=body.len() {
            let mut collector = StreamCollector::new(100, 1 << 20);
            let mut completed = 0;
            for chunk in body.chunks(size) {
                completed += collector.feed(chunk);
            }
            assert_eq!(completed, 4, "chunks of {size}");
            let kept: Vec<&[u8]> = collector.messages().iter().map(Vec::as_slice).collect();
            assert_eq!(kept, messages, "chunks of {size}");
            assert_eq!(collector.end(false), Ok(EndReason::Complete));
        }
    }

    #[test]
    fn a_stream_that_ends_inside_a_frame_is_broken_unless_the_deadline_cut_it() {
        let body = frames(&[b"whole", b"cut"]);
        let mut collector = StreamCollector::new(100, 1 << 20);
        collector.feed(&body[..body.len() - 1]);
        assert_eq!(collector.messages().len(), 1);
        assert_eq!(
            collector.end(false),
            Err("the upstream's answer ends inside a gRPC frame")
        );
        assert_eq!(collector.end(true), Ok(EndReason::Deadline));
    }

    #[test]
    fn the_message_bound_stops_the_stream() {
        let body = frames(&[b"a", b"b", b"c"]);
        let mut collector = StreamCollector::new(2, 1 << 20);
        assert_eq!(collector.feed(&body), 2);
        assert!(collector.is_done());
        assert_eq!(collector.end(false), Ok(EndReason::MaxMessages));
        assert_eq!(collector.feed(&frames(&[b"d"])), 0, "nothing after a bound");
    }

    #[test]
    fn a_message_past_the_byte_bound_is_not_kept_nor_buffered() {
        let mut collector = StreamCollector::new(100, 10);
        assert_eq!(collector.feed(&frames(&[b"12345678"])), 1);
        // Declared 4 GiB: refused from its prefix, before a byte of it is kept.
        let mut huge = vec![0, 0xff, 0xff, 0xff, 0xff];
        huge.extend_from_slice(b"x");
        assert_eq!(collector.feed(&huge), 0);
        assert_eq!(collector.end(false), Ok(EndReason::MaxBytes));
        assert_eq!(collector.messages().len(), 1);
        assert!(collector.pending.len() <= FRAME_PREFIX);
        // Pushed messages (a host that reads frames itself) keep to the same bound.
        let mut pushed = StreamCollector::new(100, 10);
        assert!(pushed.push(b"12345678"));
        assert!(!pushed.push(b"123"));
        assert_eq!(pushed.stopped(), Some(EndReason::MaxBytes));
    }

    #[test]
    fn a_compressed_frame_breaks_the_stream() {
        let mut collector = StreamCollector::new(100, 1 << 20);
        let mut body = frames(&[b"ok"]);
        body.extend_from_slice(&[1, 0, 0, 0, 1, b'z']);
        assert_eq!(collector.feed(&body), 1);
        assert_eq!(
            collector.end(false),
            Err("the upstream's answer is compressed, and no compression was offered")
        );
    }
}

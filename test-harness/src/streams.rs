//! Streaming answers of the demo services. Each runs on a task of its own that sends into a
//! channel tonic reads the response from: the channel closes when tonic drops the response
//! (the client went away or reset the stream), so the task notices that, and the call's
//! deadline (tonic's own timeout only covers the wait for the response's headers), and stops;
//! `Control` counts the streams opened, open and cancelled.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataMap;
use tonic::{Status, Streaming};

use crate::control::{Control, StreamMode, MANY_MESSAGES};

/// The response stream of every streaming method.
pub type ResponseStream<T> = ReceiverStream<Result<T, Status>>;

/// Room for a few messages: enough to keep the client busy, small enough that a client that
/// stops reading holds the sender back.
const BUFFERED_MESSAGES: usize = 16;

/// Why a stream ended before the server finished it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupted {
    /// The client went away, reset the stream, or its request stream broke.
    ClientGone,
    /// The call's deadline (its `grpc-timeout`) passed.
    DeadlinePassed,
}

/// What a server-streaming method does in mode `normal`: `burst` messages at once, then either
/// the end or one more message every so often, forever.
#[derive(Debug, Clone, Copy)]
pub struct Script {
    pub burst: u64,
    pub then: Then,
}

#[derive(Debug, Clone, Copy)]
pub enum Then {
    End,
    Every(Duration),
}

/// A stream counted open from its opening until it is dropped, and cancelled if it is dropped
/// before the server finished it.
struct OpenStream {
    control: Control,
    finished: bool,
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.control.stream_closed(self.finished);
    }
}

/// The sending side of a streaming answer.
pub struct Outbox<T> {
    sender: mpsc::Sender<Result<T, Status>>,
    deadline: Option<Instant>,
    open: OpenStream,
}

impl<T: Send + 'static> Outbox<T> {
    /// Opens a stream that ends at `deadline` if it has not ended before.
    pub fn open(control: &Control, deadline: Option<Instant>) -> (Self, ResponseStream<T>) {
        let (sender, receiver) = mpsc::channel(BUFFERED_MESSAGES);
        control.stream_opened();
        let open = OpenStream {
            control: control.clone(),
            finished: false,
        };
        let outbox = Outbox { sender, deadline, open };
        (outbox, ReceiverStream::new(receiver))
    }

    /// Sends one message, as soon as the client has room for it.
    pub async fn send(&self, message: T) -> Result<(), Interrupted> {
        tokio::select! {
            sent = self.sender.send(Ok(message)) => sent.map_err(|_| Interrupted::ClientGone),
            () = passing(self.deadline) => Err(Interrupted::DeadlinePassed),
        }
    }

    /// Waits `duration`, unless the stream is interrupted before.
    pub async fn pause(&self, duration: Duration) -> Result<(), Interrupted> {
        tokio::select! {
            () = tokio::time::sleep(duration) => Ok(()),
            interrupted = self.interrupted() => Err(interrupted),
        }
    }

    /// Waits until the client goes away or the deadline passes.
    pub async fn interrupted(&self) -> Interrupted {
        tokio::select! {
            () = self.sender.closed() => Interrupted::ClientGone,
            () = passing(self.deadline) => Interrupted::DeadlinePassed,
        }
    }

    /// Ends the stream as the server chose: with OK, or with `status`.
    pub async fn finish(mut self, status: Option<Status>) {
        if let Some(status) = status {
            // A client that went away gets nothing; the stream still ended as the server chose.
            let _ = self.sender.send(Err(status)).await;
        }
        self.open.finished = true;
    }

    /// Ends the stream early, telling the client DEADLINE_EXCEEDED if that is why.
    pub async fn interrupt(self, interrupted: Interrupted) {
        if interrupted == Interrupted::DeadlinePassed {
            let _ = self
                .sender
                .send(Err(Status::deadline_exceeded("the call's deadline passed")))
                .await;
        }
    }
}

/// Resolves at `deadline`, or never without one.
async fn passing(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// When the call's `grpc-timeout` (if any) runs out, counted from now: read it as the call
/// comes in.
pub fn call_deadline(metadata: &MetadataMap) -> Option<Instant> {
    let value = metadata.get("grpc-timeout")?.to_str().ok()?;
    // At most 8 digits and one unit letter, as gRPC over HTTP/2 writes it.
    let split = value.len().checked_sub(1)?;
    let (digits, unit) = value.split_at(split);
    let amount: u64 = digits.parse().ok().filter(|_| digits.len() <= 8)?;
    let timeout = match unit {
        "H" => Duration::from_secs(amount.saturating_mul(3600)),
        "M" => Duration::from_secs(amount.saturating_mul(60)),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    };
    Instant::now().checked_add(timeout)
}

/// Answers a server-streaming call that ends at `deadline` (see `call_deadline`): in mode
/// `normal` as `script` says, in the other modes as the mode says (see `StreamMode`); every
/// message comes from `next`.
pub fn server_stream<T, Next>(
    control: &Control,
    deadline: Option<Instant>,
    script: Script,
    next: Next,
) -> ResponseStream<T>
where
    T: Send + 'static,
    Next: FnMut() -> T + Send + 'static,
{
    let mode = control.stream_mode();
    // A hostile server does not care for the client's deadline.
    let deadline = deadline.filter(|_| mode == StreamMode::Normal);
    let (outbox, stream) = Outbox::open(control, deadline);
    tokio::spawn(async move {
        match play(&outbox, mode, script, next).await {
            Ok(status) => outbox.finish(status).await,
            Err(interrupted) => outbox.interrupt(interrupted).await,
        }
    });
    stream
}

/// Sends what `mode` and `script` say; the status to end with, if not OK.
async fn play<T: Send + 'static>(
    outbox: &Outbox<T>,
    mode: StreamMode,
    script: Script,
    mut next: impl FnMut() -> T,
) -> Result<Option<Status>, Interrupted> {
    let count = match mode {
        StreamMode::Normal => script.burst,
        StreamMode::Many => MANY_MESSAGES,
        StreamMode::Count(count) => count,
        StreamMode::ErrorAfter(count) => count,
        StreamMode::NeverEnd => 1,
    };
    for _ in 0..count {
        outbox.send(next()).await?;
    }
    match (mode, script.then) {
        (StreamMode::Normal, Then::Every(interval)) => loop {
            outbox.pause(interval).await?;
            outbox.send(next()).await?;
        },
        (StreamMode::ErrorAfter(count), _) => Ok(Some(Status::failed_precondition(format!(
            "the upstream's stream mode error_after={count} fails every stream after {count} messages"
        )))),
        (StreamMode::NeverEnd, _) => Err(outbox.interrupted().await),
        _ => Ok(None),
    }
}

/// Answers a bidirectional call that ends at `deadline`: each message received (with its index, from 0) gets the reply
/// `reply` makes of it, or ends the call with the status `reply` gives instead; once the client
/// has sent its last message, `last` (if any) follows, then OK.
pub fn bidi_stream<In, Out, Reply>(
    control: &Control,
    deadline: Option<Instant>,
    inbound: Streaming<In>,
    reply: Reply,
    last: Option<Out>,
) -> ResponseStream<Out>
where
    In: Send + 'static,
    Out: Send + 'static,
    Reply: FnMut(usize, In) -> Result<Out, Status> + Send + 'static,
{
    let (outbox, stream) = Outbox::open(control, deadline);
    tokio::spawn(async move {
        match converse(&outbox, inbound, reply, last).await {
            Ok(status) => outbox.finish(status).await,
            Err(interrupted) => outbox.interrupt(interrupted).await,
        }
    });
    stream
}

/// Replies to each message received, then sends `last`; the status to end with, if not OK.
async fn converse<In, Out: Send + 'static>(
    outbox: &Outbox<Out>,
    mut inbound: Streaming<In>,
    mut reply: impl FnMut(usize, In) -> Result<Out, Status>,
    last: Option<Out>,
) -> Result<Option<Status>, Interrupted> {
    for index in 0_usize.. {
        let received = tokio::select! {
            received = inbound.message() => received,
            interrupted = outbox.interrupted() => return Err(interrupted),
        };
        match received {
            Ok(Some(message)) => match reply(index, message) {
                Ok(answer) => outbox.send(answer).await?,
                Err(status) => return Ok(Some(status)),
            },
            Ok(None) => break,
            // Whatever broke the request stream (most often a reset) may still be news to the
            // client; it is not the server's choice of an end.
            Err(status) => {
                let _ = outbox.sender.send(Err(status)).await;
                return Err(Interrupted::ClientGone);
            }
        }
    }
    if let Some(last) = last {
        outbox.send(last).await?;
    }
    Ok(None)
}

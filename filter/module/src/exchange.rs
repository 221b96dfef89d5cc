//! One MCP request through the module: an adapter from Envoy's stream hooks (over a
//! [`StreamHost`]) to the core's [`Exchange`](switchblade_core::host_api::Exchange), and from
//! what it asks to the stream. The module has what proxy-wasm lacks: a router for calls (a lone
//! `tools/call` becomes the request itself, rewritten into the gRPC call and forwarded by
//! Envoy's router, the route picking the cluster from a header, `routing.cluster_header`; its
//! answer is rewritten into the tool result), answers sent in parts (progress notifications as
//! they come), and timers.
//!
//! Envoy may call this exchange's call hooks from inside a call it makes on the exchange's
//! behalf (`start_call`, `reset_call`): they find the core in use, and what they tell is
//! deferred until it is free. After a hook panicked the exchange is poisoned: the request gets
//! one answer at most, and nothing more is done for it.

use std::cell::{Cell, RefCell};

use switchblade_core::host_api::{self, CallPart, Deferred, HeaderCopy, HttpResponse, Server, Step};

use crate::config::{Config, ServerRef};
use crate::host::{Alarm, Body, HeaderMap, StreamHost};

use adapter::{Adapter, Head};

/// The wake-up that says a routed call's deadline has passed.
pub const DEADLINE_PASSED: u64 = 1;
/// The wake-up that says the client cancelled the request (`notifications/cancelled`, heard on
/// another stream).
pub const CANCELLED: u64 = 2;
/// The wake-up that says a task's next poll is due.
pub const POLL_DUE: u64 = 3;

/// What a hook tells Envoy to do with the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookStatus {
    /// Let it go on.
    Continue,
    /// Hold it (headers: the body still comes to this filter).
    Stop,
    /// Hold it, and keep the body in Envoy's buffer.
    Buffer,
    /// Hold it; the body chunk is not kept (the request was answered, or the chunk was copied
    /// out).
    Drop,
}

/// Where Envoy holds the request body the module read: a routed call's frame takes its place,
/// with no call into Envoy for a part that holds nothing.
#[derive(Debug, Clone, Copy, Default)]
struct HeldBody {
    /// In Envoy's buffer (the chunks before the last, which the module asked it to keep).
    buffered: bool,
    /// In the chunk of the hook that ended the request.
    last_chunk: bool,
}

/// One HTTP request through the module.
pub struct Exchange {
    config: &'static Config,
    /// The configuration's server when the request came.
    server: ServerRef,
    /// The request's exchange; Envoy's callout ids are its call handles.
    core: RefCell<host_api::Exchange<u64>>,
    /// What Envoy told about a call (by Envoy's id) while the core was in use.
    deferred: RefCell<Vec<(u64, Deferred)>>,
    /// Envoy's request header map as an MCP request's headers came (a routed call rewrites it;
    /// it is not copied out of Envoy a second time).
    request_map: RefCell<Option<HeaderCopy>>,
    held: Cell<HeldBody>,
    /// An answer has gone (a local reply, the head of one in parts, or the tool result in
    /// place of the routed call's): after a panic, a second one is never sent.
    answered: Cell<bool>,
    /// A hook panicked: nothing more is done for this request.
    poisoned: Cell<bool>,
    /// The routed call's deadline; dropping it cancels it.
    deadline: RefCell<Option<Alarm>>,
    /// Listens for the cancellation of a streaming call's request; dropping it stops listening.
    cancel_listener: RefCell<Option<Alarm>>,
    /// When a task's next poll is due; dropping it cancels it.
    poll: RefCell<Option<Alarm>>,
}

impl Exchange {
    pub fn new(config: &'static Config) -> Self {
        Exchange {
            config,
            server: config.current(),
            core: RefCell::default(),
            deferred: RefCell::default(),
            request_map: RefCell::new(None),
            held: Cell::default(),
            answered: Cell::new(false),
            poisoned: Cell::new(false),
            deadline: RefCell::new(None),
            cancel_listener: RefCell::new(None),
            poll: RefCell::new(None),
        }
    }

    pub fn config(&self) -> &'static Config {
        self.config
    }

    fn server(&self) -> &Server {
        self.server.get()
    }

    pub fn is_poisoned(&self) -> bool {
        self.poisoned.get()
    }

    /// A hook panicked: the request is answered with an internal error if nothing has been
    /// answered yet, or reset; from now on every hook lets the stream be.
    pub fn poison(&self, host: &impl StreamHost) {
        if self.poisoned.replace(true) {
            return;
        }
        self.stop_alarms();
        self.deadline.replace(None);
        if self.answered.replace(true) {
            host.reset();
            return;
        }
        let response = HttpResponse::internal_error();
        host.send_response(response.status, &response.header_pairs(), &response.body);
    }

    /// Runs `event` on the core with this stream as its host, then delivers what Envoy told
    /// meanwhile; `None` if the core is in use (Envoy called a hook from inside one of the
    /// core's calls).
    fn run<H: StreamHost, R>(
        &self,
        stream: &H,
        event: impl FnOnce(&mut host_api::Exchange<u64>, &Server, &mut Adapter<'_, H>) -> R,
    ) -> Option<R> {
        let result = {
            let mut core = self.core.try_borrow_mut().ok()?;
            event(&mut core, self.server(), &mut Adapter { stream, exchange: self })
        };
        self.deliver_deferred(stream);
        Some(result)
    }

    fn deliver_deferred(&self, stream: &impl StreamHost) {
        loop {
            let deferred = std::mem::take(&mut *self.deferred.borrow_mut());
            if deferred.is_empty() {
                return;
            }
            for (call, event) in deferred {
                match event {
                    Deferred::Part(part) => self.call_heard(stream, call, part.as_part()),
                    Deferred::Ended { reset } => self.call_ended(stream, call, reset),
                }
            }
        }
    }

    /// Where the request stands, as the core last said.
    fn step(&self) -> Option<Step> {
        self.core.try_borrow().ok().map(|core| core.step())
    }

    pub fn request_headers(&self, host: &impl StreamHost, end_of_stream: bool) -> HookStatus {
        let head = Head {
            stream: host,
            map: &self.request_map,
        };
        let step = self.run(host, |core, server, adapter| {
            core.request_headers(server, adapter, &head, end_of_stream)
        });
        match step {
            Some(Step::ReadBody) => HookStatus::Stop,
            step => hook_status(step),
        }
    }

    pub fn request_body(&self, host: &impl StreamHost, end_of_stream: bool) -> HookStatus {
        match self.step() {
            Some(Step::ReadBody) => {}
            step => return hook_status(step),
        }
        let size = host.body_size(Body::BufferedRequest) + host.body_size(Body::ReceivedRequest);
        let step = self.run(host, |core, server, adapter| {
            core.request_body(server, adapter, size, end_of_stream, || self.read_body(host))
        });
        hook_status(step)
    }

    pub fn request_trailers(&self, host: &impl StreamHost) -> HookStatus {
        match self.step() {
            Some(Step::ReadBody) => {}
            Some(Step::Continue) => return HookStatus::Continue,
            _ => return HookStatus::Stop,
        }
        let step = self.run(host, |core, server, adapter| {
            core.request_trailers(server, adapter, || self.read_body(host))
        });
        if step == Some(Step::Routed) {
            // The gRPC call carries nothing of the client's but what the core chose: its
            // trailers would reach the upstream as metadata.
            let trailers = host.headers(HeaderMap::RequestTrailers);
            rewrite::<&[u8]>(host, HeaderMap::RequestTrailers, &trailers, &[]);
        }
        hook_status(step)
    }

    /// The whole request body. One that is all in one place is used as it is: in the last
    /// chunk (Envoy buffered nothing before it), or in Envoy's buffer (HTTP/1.1 ends a body with
    /// an empty chunk).
    fn read_body(&self, host: &impl StreamHost) -> Vec<u8> {
        let buffered = host.body(Body::BufferedRequest);
        let received = host.body(Body::ReceivedRequest);
        let held = HeldBody {
            buffered: !buffered.is_empty(),
            last_chunk: !received.is_empty(),
        };
        self.held.set(held);
        match (held.buffered, held.last_chunk) {
            (false, _) => received,
            (true, false) => buffered,
            (true, true) => [buffered, received].concat(),
        }
    }

    /// A wake-up the exchange asked for.
    pub fn wake(&self, host: &impl StreamHost, event: u64) {
        match event {
            DEADLINE_PASSED => {
                self.deadline.replace(None);
                self.run(host, |core, server, adapter| {
                    core.routed_deadline_passed(server, adapter)
                });
            }
            CANCELLED => {
                self.cancel_listener.replace(None);
                self.run(host, |core, server, adapter| core.cancelled(server, adapter));
            }
            POLL_DUE => {
                self.poll.replace(None);
                self.run(host, |core, server, adapter| core.wake(server, adapter));
            }
            _ => {}
        }
    }

    /// A part of a call's answer (`call`: Envoy's id), or kept until the core is free.
    pub fn call_heard(&self, host: &impl StreamHost, call: u64, part: CallPart<'_>) {
        if self.core.try_borrow_mut().is_err() {
            self.deferred.borrow_mut().push((call, Deferred::from(part)));
            return;
        }
        self.run(host, |core, server, adapter| {
            core.call_heard(server, adapter, call, part)
        });
    }

    /// A call has ended (`reset`: without a whole answer; `call`: Envoy's id), or kept until
    /// the core is free.
    pub fn call_ended(&self, host: &impl StreamHost, call: u64, reset: bool) {
        if self.core.try_borrow_mut().is_err() {
            self.deferred.borrow_mut().push((call, Deferred::Ended { reset }));
            return;
        }
        self.run(host, |core, server, adapter| {
            core.call_ended(server, adapter, call, reset)
        });
    }

    fn stop_alarms(&self) {
        self.cancel_listener.replace(None);
        self.poll.replace(None);
    }
}

/// What a hook returns once the core has said where the request stands (`None`: the core was
/// in use, and the hook holds the stream).
fn hook_status(step: Option<Step>) -> HookStatus {
    match step {
        Some(Step::Continue | Step::Routed) => HookStatus::Continue,
        Some(Step::ReadBody | Step::Waiting) => HookStatus::Buffer,
        Some(Step::Answered) => HookStatus::Drop,
        None => HookStatus::Stop,
    }
}

/// Makes `map`, of which `copy` is Envoy's copy, hold `wanted` and nothing else, with as few
/// calls into Envoy as [`HeaderCopy::changes_to`] finds.
fn rewrite<V: AsRef<[u8]>>(host: &impl StreamHost, map: HeaderMap, copy: &HeaderCopy, wanted: &[(&str, V)]) {
    let changes = copy.changes_to(wanted);
    for name in changes.removals {
        host.remove_header(map, name);
    }
    for index in changes.writes {
        if let Some((name, value)) = wanted.get(index) {
            host.set_header(map, name, value.as_ref());
        }
    }
    for index in changes.appends {
        if let Some((name, value)) = wanted.get(index) {
            host.add_header(map, name, value.as_ref());
        }
    }
}

mod adapter;
mod routed;
#[cfg(test)]
mod tests;

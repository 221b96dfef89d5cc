//! One MCP request through the module: an adapter from Envoy's stream hooks (over a
//! [`StreamHost`]) to the core's [`ReentrantExchange`], which keeps what Envoy tells while it is
//! busy and says what is left to do after a panic. The module has what proxy-wasm lacks: a
//! router for calls ([`routed`]), answers sent in parts, and timers.

use std::cell::{Cell, RefCell};

use switchblade_core::host_api::{
    AfterPanic, CallPart, Exchange as Core, HeaderCopy, ReentrantExchange, Server, ServerRef, Step,
};

use crate::config::Config;
use crate::host::{Alarm, Body, HeaderMap, StreamHost};

use adapter::{Adapter, Head};

/// The wake-ups the exchange asks for, by event id: a routed call's deadline has passed, the
/// client cancelled the request (heard on another stream), a task's next poll is due.
pub const DEADLINE_PASSED: u64 = 0;
pub const CANCELLED: u64 = 1;
pub const POLL_DUE: u64 = 2;

/// What a hook tells Envoy to do with the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookStatus {
    Continue,
    /// Hold it (headers: the body still comes to this filter).
    Stop,
    /// Hold it, and keep the body in Envoy's buffer.
    Buffer,
    /// Hold it; the body chunk is not kept (answered, or copied out).
    Drop,
}

/// Where Envoy holds the request body the module read (its buffer, the last chunk), for a routed
/// call's frame to replace.
#[derive(Debug, Clone, Copy, Default)]
struct HeldBody {
    buffered: bool,
    last_chunk: bool,
}

/// One HTTP request through the module.
pub struct Exchange {
    pub config: &'static Config,
    /// The configuration's server when the request came.
    server: ServerRef<'static>,
    /// Envoy's callout ids are the core's call handles.
    core: ReentrantExchange<u64>,
    /// Envoy's request header map as an MCP request came, for a routed call to rewrite.
    request_map: RefCell<Option<HeaderCopy>>,
    held: Cell<HeldBody>,
    /// The wake-ups asked for, by event id; dropping one cancels it.
    alarms: RefCell<[Option<Alarm>; 3]>,
}

impl Exchange {
    pub fn new(config: &'static Config) -> Self {
        Exchange {
            config,
            server: config.served.current(),
            core: ReentrantExchange::default(),
            request_map: RefCell::default(),
            held: Cell::default(),
            alarms: RefCell::default(),
        }
    }

    pub fn is_poisoned(&self) -> bool {
        self.core.is_poisoned()
    }

    /// A hook panicked: from now on every hook lets the stream be.
    pub fn poison(&self, host: &impl StreamHost) {
        let Some(after) = self.core.poison() else {
            return;
        };
        self.stop_alarms();
        match after {
            AfterPanic::Reset => host.reset(),
            AfterPanic::Answer(response) => {
                host.send_response(response.status, &response.header_pairs(), &response.body)
            }
        }
    }

    /// Runs `event` on the core with this stream as its host; `None` if the core is in use.
    fn run<H: StreamHost, R>(
        &self,
        stream: &H,
        event: impl FnOnce(&mut Core<u64>, &Server, &mut Adapter<'_, H>) -> R,
    ) -> Option<R> {
        self.core.run(&self.server, &mut self.adapter(stream), event)
    }

    pub fn request_headers(&self, host: &impl StreamHost, end_of_stream: bool) -> HookStatus {
        let head = Head {
            stream: host,
            map: &self.request_map,
        };
        match self.run(host, |core, server, adapter| {
            core.request_headers(server, adapter, &head, end_of_stream)
        }) {
            Some(Step::ReadBody) => HookStatus::Stop,
            step => hook_status(step),
        }
    }

    pub fn request_body(&self, host: &impl StreamHost, end_of_stream: bool) -> HookStatus {
        if self.core.step() != Some(Step::ReadBody) {
            return hook_status(self.core.step());
        }
        let size = host.body_size(Body::BufferedRequest) + host.body_size(Body::ReceivedRequest);
        hook_status(self.run(host, |core, server, adapter| {
            core.request_body(server, adapter, size, end_of_stream, || self.read_body(host))
        }))
    }

    pub fn request_trailers(&self, host: &impl StreamHost) -> HookStatus {
        match self.core.step() {
            Some(Step::ReadBody) => {}
            Some(Step::Continue) => return HookStatus::Continue,
            _ => return HookStatus::Stop,
        }
        let step = self.run(host, |core, server, adapter| {
            core.request_trailers(server, adapter, || self.read_body(host))
        });
        if step == Some(Step::Routed) {
            // The client's trailers would reach the upstream as metadata.
            let trailers = host.headers(HeaderMap::RequestTrailers);
            rewrite::<&[u8]>(host, HeaderMap::RequestTrailers, &trailers, &[]);
        }
        hook_status(step)
    }

    /// The whole request body (HTTP/1.1 ends one with an empty chunk).
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
        self.keep_alarm(event, None);
        self.run(host, |core, server, adapter| match event {
            DEADLINE_PASSED => core.routed_deadline_passed(server, adapter),
            CANCELLED => core.cancelled(server, adapter),
            POLL_DUE => core.wake(server, adapter),
            _ => {}
        });
    }

    /// A part of a call's answer (`call`: Envoy's id).
    pub fn call_heard(&self, host: &impl StreamHost, call: u64, part: CallPart<'_>) {
        self.core.call_heard(&self.server, &mut self.adapter(host), call, part);
    }

    /// A call has ended (`reset`: without a whole answer; `call`: Envoy's id).
    pub fn call_ended(&self, host: &impl StreamHost, call: u64, reset: bool) {
        self.core.call_ended(&self.server, &mut self.adapter(host), call, reset);
    }

    /// The stream as the core's host, for one event.
    fn adapter<'a, H: StreamHost>(&'a self, stream: &'a H) -> Adapter<'a, H> {
        Adapter { stream, exchange: self }
    }

    /// Keeps the alarm of wake-up `event`, in place of the one before (which is cancelled).
    fn keep_alarm(&self, event: u64, alarm: Option<Alarm>) {
        let index = usize::try_from(event).unwrap_or(usize::MAX);
        // The one before is dropped (cancelled) once the alarms are no longer borrowed.
        let before = self
            .alarms
            .borrow_mut()
            .get_mut(index)
            .map(|slot| std::mem::replace(slot, alarm));
        drop(before);
    }

    fn stop_alarms(&self) {
        drop(self.alarms.take());
    }
}

/// A hook's status once the core has said where the request stands (`None`: it was in use).
fn hook_status(step: Option<Step>) -> HookStatus {
    match step {
        Some(Step::Continue | Step::Routed) => HookStatus::Continue,
        Some(Step::ReadBody | Step::Waiting) => HookStatus::Buffer,
        Some(Step::Answered) => HookStatus::Drop,
        None => HookStatus::Stop,
    }
}

/// Makes `map` (`copy`: Envoy's copy of it) hold `wanted` and nothing else, in as few calls as
/// [`HeaderCopy::changes_to`] finds.
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

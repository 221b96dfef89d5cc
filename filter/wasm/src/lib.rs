//! Switchblade as a proxy-wasm filter: an adapter that hands each request's callbacks to the
//! core's [`Exchange`](switchblade_core::host_api::Exchange) and does what it asks (the
//! upstream calls, the answer) with host calls. Every decision is the core's.
//!
//! Host calls go through `hostcalls` directly, which return errors instead of panicking as the
//! SDK's trait helpers do: a panic would kill the VM for every later request. Header values are
//! read as bytes: the SDK's string readers panic on a value that is not UTF-8, which a client
//! (any header) or an upstream (`grpc-message`) can send. Maps are read only when the host says
//! they are there: the SDK panics on the status it gets for a missing one.
//!
//! Each unary call is one HTTP callout on the service's cluster: Envoy enforces its timeout
//! and hands back headers, body and trailers in one callback. A streaming call is one of
//! Envoy's gRPC streams ([`exchange`]).

mod exchange;
mod host_io;
mod stats;
#[cfg(test)]
mod tests;
mod tick;

use std::rc::Rc;
use std::sync::Arc;

use log::{error, info, warn};
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{BufferType, ContextType, LogLevel};
use switchblade_core::host_api::{
    configure_with_process_key, serving_line, shared_process_key, timer_period, Configured, ReflectionCall, Refreshed,
    Refresher, Server,
};

use crate::exchange::{Clock, Exchange};
use crate::host_io::{call_out, call_response, now, SharedData};
use crate::stats::Stats;
use crate::tick::{answer_adopted_call, end_streams_due, wake_due_requests};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(Root { server: None, stats: Rc::default(), refresher: None, clock: Rc::default(), shared: None })
    });
}}

/// One per VM and configuration: holds the server every request shares.
struct Root {
    server: Option<Rc<Server>>,
    stats: Rc<Stats>,
    /// Reads the services with `from_reflection`, if there are any.
    refresher: Option<Refresher>,
    /// The deadlines of the VM's open gRPC streams.
    clock: Clock,
    /// This plugin's shared data (the rate limits' counters, cancellations), shared with the
    /// other workers' VMs; set when configured.
    shared: Option<Arc<SharedData>>,
}

impl Context for Root {
    fn on_http_call_response(&mut self, token: u32, headers: usize, body_size: usize, trailers: usize) {
        if answer_adopted_call(&self.clock, token, headers, body_size, trailers) {
            return;
        }
        let Some(refresher) = self.refresher.as_mut() else {
            return;
        };
        let read = || call_response(headers, body_size, trailers);
        let refreshed = refresher.answered(u64::from(token), body_size, read, now(), start_reflection_call);
        self.refreshed(refreshed);
    }
}

impl Root {
    /// Starts a reflection refresh if one is due.
    fn refresh_if_due(&mut self) {
        let refreshed = self
            .refresher
            .as_mut()
            .and_then(|refresher| refresher.tick(now(), start_reflection_call));
        self.refreshed(refreshed);
    }

    /// A refresh ended: count it, log it, and serve its server if the API changed.
    fn refreshed(&mut self, refreshed: Option<Refreshed>) {
        let Some(refreshed) = refreshed else {
            return;
        };
        self.stats.add(&refreshed.sample());
        refreshed.log(self.server.as_ref().map_or(0, |server| server.catalog().tool_count()));
        if let Refreshed::Changed { server, .. } = refreshed {
            // Requests already in flight keep the server they started with.
            self.server = Some(Rc::from(server));
        }
    }
}

/// Starts a reflection call as a callout; its answer comes to the root context.
fn start_reflection_call(call: &ReflectionCall) -> Result<u64, String> {
    call_out(call.cluster(), &call.http_headers(), call.http_body(), call.timeout())
        .map(u64::from)
        .map_err(|status| format!("{status:?}"))
}

impl RootContext for Root {
    fn on_configure(&mut self, _configuration_size: usize) -> bool {
        let bytes = match hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX) {
            Ok(bytes) => bytes.unwrap_or_default(),
            Err(status) => {
                error!("cannot read the plugin configuration: {status:?}");
                return false;
            }
        };
        let started = hostcalls::get_current_time().ok();
        let shared = Arc::new(SharedData::of_this_plugin());
        let configured = configure_with_process_key(&bytes, shared_process_key(&*shared));
        self.shared = Some(shared);
        match configured {
            Ok(Configured { server, refresher }) => {
                let took = started
                    .zip(hostcalls::get_current_time().ok())
                    .and_then(|(start, end)| end.duration_since(start).ok());
                info!("{}", serving_line(&server, took, false));
                // The tick reads reflection when due, and keeps the VM's timetable (streams'
                // deadlines and cancellations, tasks' polls).
                if let Some(period) = timer_period(&server, refresher.is_some()) {
                    if let Err(status) = hostcalls::set_tick_period(period) {
                        warn!("cannot set the tick period, so reflection is read once and streams end only with the upstream: {status:?}");
                    }
                }
                self.server = Some(Rc::new(server));
                self.refresher = refresher;
                self.stats = Rc::new(Stats::define());
                self.stats.record_memory();
                self.refresh_if_due();
                true
            }
            Err(problem) => {
                error!("invalid plugin configuration: {problem}");
                false
            }
        }
    }

    fn on_tick(&mut self) {
        self.refresh_if_due();
        if let Some(shared) = &self.shared {
            end_streams_due(&self.clock, shared);
        }
        wake_due_requests(&self.clock);
    }

    fn create_http_context(&self, context_id: u32) -> Option<Box<dyn HttpContext>> {
        let server = self.server.clone()?;
        let shared = Arc::clone(self.shared.as_ref()?);
        Some(Box::new(Exchange::new(
            context_id,
            server,
            Rc::clone(&self.stats),
            shared,
            Rc::clone(&self.clock),
        )))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

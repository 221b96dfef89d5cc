//! Switchblade as a proxy-wasm filter: an adapter that hands each request's callbacks to the
//! core's [`Exchange`](switchblade_core::host_api::Exchange) and does what it asks with host
//! calls ([`exchange`]). Every decision is the core's.
//!
//! A panic would kill the VM for every later request, so host calls go through `hostcalls`,
//! which return errors where the SDK's helpers panic; header values are read as bytes (the SDK's
//! string readers panic on one that is not UTF-8); a map is read only when the host says it is
//! there (the SDK panics on a missing one).

mod exchange;
mod host_io;
mod stats;
#[cfg(test)]
mod tests;
mod tick;

use std::rc::Rc;
use std::sync::Arc;

use log::{error, warn};
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{BufferType, ContextType, LogLevel};
use switchblade_core::host_api::{
    shared_process_key, timer_period, Build, Counters, ReflectionCall, Sample, ServedServer,
};

use crate::exchange::{Clock, Exchange, Handle, Vm};
use crate::host_io::{call_out, call_response, now, SharedData};
use crate::stats::Stats;
use crate::tick::{act_for, tick};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(Root { served: None, vm: None })
    });
}}

/// One per VM and configuration.
struct Root {
    served: Option<ServedServer>,
    /// What the VM's requests share; set when configured.
    vm: Option<Vm>,
}

impl Context for Root {
    /// A callout the tick started for a request (a task's poll) is answered to the request;
    /// any other is reflection's.
    fn on_http_call_response(&mut self, token: u32, headers: usize, body_size: usize, trailers: usize) {
        let (Some(served), Some(vm)) = (&self.served, &self.vm) else {
            return;
        };
        let read = || call_response(headers, body_size, trailers);
        let adopted = vm.clock.borrow_mut().adopted(token);
        if let Some(request) = adopted {
            let call = Handle::Callout(token);
            act_for(&request, |exchange, server, host| {
                exchange.call_answered(server, host, call, body_size, read)
            });
            return;
        }
        let ended = served.answered(u64::from(token), body_size, read, now(), start_reflection_call);
        self.count_refresh(ended);
    }
}

impl Root {
    /// Starts a reflection refresh if one is due.
    fn refresh_if_due(&mut self) {
        let ended = self
            .served
            .as_ref()
            .and_then(|served| served.tick(now(), start_reflection_call));
        self.count_refresh(ended);
    }

    fn count_refresh(&self, ended: Option<Sample<'_>>) {
        if let (Some(sample), Some(vm)) = (ended, &self.vm) {
            vm.stats.add(&sample);
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
        let counters: Counters = Arc::new(SharedData::of_this_plugin());
        match ServedServer::load(&bytes, shared_process_key(&*counters), Build::ProxyWasm, now) {
            Ok(served) => {
                let server = served.current();
                // The tick refreshes reflection and keeps the VM's timetable.
                if let Some(period) = timer_period(&server, served.refresh_period().is_some()) {
                    if let Err(status) = hostcalls::set_tick_period(period) {
                        warn!("cannot set the tick period, so reflection is read once and streams end only with the upstream: {status:?}");
                    }
                }
                drop(server);
                let stats = Rc::new(Stats::define());
                stats.record_memory();
                self.served = Some(served);
                self.vm = Some(Vm {
                    stats,
                    counters,
                    clock: Clock::default(),
                });
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
        if let Some(vm) = &self.vm {
            tick(&vm.clock, &*vm.counters);
        }
    }

    fn create_http_context(&self, context_id: u32) -> Option<Box<dyn HttpContext>> {
        let server = self.served.as_ref()?.shared();
        Some(Box::new(Exchange::new(context_id, server, self.vm.clone()?)))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

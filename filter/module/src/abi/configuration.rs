//! A configuration's own handles on Envoy: its stats while it is made, its calls and counters
//! in its main-thread hooks; and Envoy's logger, for the `log` macros.

use switchblade_core::host_api::MetricKind;

use super::bindings::*;
use crate::host::StatsHost;

/// The configuration being made, for the one moment Envoy lets a module define its stats
/// (during `on_http_filter_config_new`).
pub struct ConfigStats {
    pub(super) config: HttpFilterConfigEnvoyPtr,
}

impl StatsHost for ConfigStats {
    fn define(&self, kind: MetricKind, name: &str, label_names: &[&str]) -> Option<usize> {
        let mut labels: Vec<ModuleBuffer> = label_names
            .iter()
            .map(|label| ModuleBuffer::of(label.as_bytes()))
            .collect();
        let mut id = 0usize;
        let define = match kind {
            MetricKind::Counter => envoy_dynamic_module_callback_http_filter_config_define_counter,
            MetricKind::Histogram => envoy_dynamic_module_callback_http_filter_config_define_histogram,
        };
        // SAFETY: inside `on_http_filter_config_new`, with its config pointer; every buffer is
        // module memory for the call (rule 2); `id` is written on success.
        let result = unsafe {
            define(
                self.config,
                ModuleBuffer::of(name.as_bytes()),
                labels.as_mut_ptr(),
                labels.len(),
                &mut id,
            )
        };
        (result == METRICS_SUCCESS).then_some(id)
    }
}

/// The configuration's own handle on Envoy, in one of its main-thread hooks (rule 7).
pub struct ConfigHost {
    pub(super) config: HttpFilterConfigEnvoyPtr,
}

impl ConfigHost {
    /// Starts an HTTP request to `cluster` from the configuration, sent whole: its answer comes
    /// to the `on_http_filter_config_http_stream_*` hooks under the id returned.
    pub fn start_call(
        &self,
        cluster: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        timeout_ms: u64,
    ) -> Result<u64, u32> {
        // SAFETY: the config pointer on the main thread, in one of its hooks (rule 7).
        unsafe {
            start_stream(
                envoy_dynamic_module_callback_http_filter_config_start_http_stream,
                self.config,
                cluster,
                headers,
                body,
                timeout_ms,
            )
        }
    }

    /// Adds to a labeled counter defined for this configuration.
    pub fn increment(&self, id: usize, label_values: &[&str], value: u64) -> bool {
        let mut labels: Vec<ModuleBuffer> = label_values
            .iter()
            .map(|label| ModuleBuffer::of(label.as_bytes()))
            .collect();
        // SAFETY: as above (rules 2 and 7).
        let result = unsafe {
            envoy_dynamic_module_callback_http_filter_config_increment_counter(
                self.config,
                id,
                labels.as_mut_ptr(),
                labels.len(),
                value,
            )
        };
        result == METRICS_SUCCESS
    }
}

/// Envoy's logger (the `dynamic_modules` component), for the `log` macros.
pub(super) struct EnvoyLog;

pub(super) static LOGGER: EnvoyLog = EnvoyLog;

impl log::Log for EnvoyLog {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Info
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = LOG_LEVELS
            .iter()
            .position(|level| *level == record.level())
            .unwrap_or(2);
        let message = format!("switchblade: {}", record.args());
        // SAFETY: the message is module memory that lives through the call (rule 2).
        unsafe { envoy_dynamic_module_callback_log(level as u32, ModuleBuffer::of(message.as_bytes())) };
    }

    fn flush(&self) {}
}

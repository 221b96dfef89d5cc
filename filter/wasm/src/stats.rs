//! The Wasm filter's Envoy stats: what each request told, and the VM's memory. Proxy-wasm stats
//! have no labels: each label set is a stat of its own, its labels in the name, which Envoy's
//! tag extraction (`stats_tags` in `envoy/`) turns back into labels.

use std::cell::{Cell, RefCell};

use log::warn;
use proxy_wasm::hostcalls;
use proxy_wasm::types::MetricType;
use switchblade_core::host_api::{MetricKind, Sample, StatIds, STAT_PREFIX};

/// One VM's stats.
#[derive(Default)]
pub(crate) struct Stats {
    /// `switchblade.vm_memory_bytes`: this VM's linear memory, which Envoy does not report.
    memory: Option<u32>,
    memory_recorded: Cell<usize>,
    /// Each label set's stat, defined on first use; as many as the catalog's label values.
    ids: RefCell<StatIds<u32>>,
    name: RefCell<String>,
}

impl Stats {
    pub(crate) fn define() -> Self {
        let name = format!("{STAT_PREFIX}.vm_memory_bytes");
        Stats {
            memory: hostcalls::define_metric(MetricType::Gauge, &name).ok(),
            ..Stats::default()
        }
    }

    /// Records the VM's memory, read without a host call, if it has changed.
    pub(crate) fn record_memory(&self) {
        let bytes = linear_memory_bytes();
        if let (Some(metric), true) = (self.memory, bytes != self.memory_recorded.get()) {
            self.memory_recorded.set(bytes);
            let _ = hostcalls::record_metric(metric, u64::try_from(bytes).unwrap_or(u64::MAX));
        }
    }

    /// Adds one sample, defining its stat on first use.
    pub(crate) fn add(&self, sample: &Sample<'_>) {
        let (Ok(mut ids), Ok(mut name)) = (self.ids.try_borrow_mut(), self.name.try_borrow_mut()) else {
            return;
        };
        let define = |kind, name: &str| {
            let metric_type = match kind {
                MetricKind::Counter => MetricType::Counter,
                MetricKind::Histogram => MetricType::Histogram,
            };
            let name = format!("{STAT_PREFIX}.{name}");
            hostcalls::define_metric(metric_type, &name)
                .map_err(|status| warn!("cannot define the stat {name}: {status:?}"))
                .ok()
        };
        let Some(id) = ids.of_or_define(sample, &mut name, define) else {
            return;
        };
        let recorded = match sample.metric.kind() {
            MetricKind::Counter => hostcalls::increment_metric(id, i64::try_from(sample.value).unwrap_or(i64::MAX)),
            MetricKind::Histogram => hostcalls::record_metric(id, sample.value),
        };
        if let Err(status) = recorded {
            warn!("cannot record the stat {id}: {status:?}");
        }
    }
}

/// The VM's linear memory (natively, in the tests, none).
fn linear_memory_bytes() -> usize {
    #[cfg(target_arch = "wasm32")]
    return core::arch::wasm32::memory_size(0) * 65536;
    #[cfg(not(target_arch = "wasm32"))]
    0
}

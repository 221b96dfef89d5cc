//! Where each sample a request tells goes among a host's stats, whose ids the host defines
//! (Envoy's, in both builds). The label sets most requests use ([`predefined_samples`]) get a
//! stat of their own, by name, when the configuration loads: a labeled stat costs Envoy a name
//! lookup at each use, a named one an add. Any other sample goes to its metric with labels,
//! where the host's stats take labels (the module), or to a stat of its own defined on its
//! first use, where they do not (proxy-wasm, whose names carry the labels for Envoy's tag
//! extraction to take back).

use std::collections::HashMap;

use super::stats::{predefined_samples, Metric, MetricKind, Sample};

/// Room for a sample's name at once, for the buffer [`StatIds::of`] writes it in: the longest a
/// request usually writes is a tool's call counter,
/// `tool_calls.tool.<tool>.outcome.success.grpc_status.OK`, 49 bytes and the tool's name.
pub const STAT_NAME_BYTES: usize = 128;

/// One configuration's stat ids, of the host's type `Id`.
#[derive(Debug)]
pub struct StatIds<Id> {
    /// Stats by their name in the namespace (labels written in).
    named: HashMap<String, Id, foldhash::fast::RandomState>,
    /// Each of [`Metric::ALL`] with labels, in order, for a host whose stats take labels;
    /// `None` where the host refused it.
    labelled: Vec<Option<Id>>,
}

/// For a host whose stats take no labels: each label set is a stat of its own, defined on first
/// use ([`StatIds::of_or_define`]).
impl<Id> Default for StatIds<Id> {
    fn default() -> Self {
        StatIds {
            named: HashMap::default(),
            labelled: Vec::new(),
        }
    }
}

impl<Id: Copy> StatIds<Id> {
    /// For a host whose stats take labels: every metric with its label names, and the label
    /// sets of the catalog's `tools` most requests use, by name (`define` gets a stat's kind,
    /// name in the namespace and label names; `None` where the host refuses it).
    pub fn labelled(tools: &[&str], mut define: impl FnMut(MetricKind, &str, &[&str]) -> Option<Id>) -> Self {
        let labelled = Metric::ALL
            .iter()
            .map(|metric| {
                let id = define(metric.kind(), metric.name(), metric.label_names());
                if id.is_none() {
                    log::warn!("the host refused the stat {}; it is not recorded", metric.name());
                }
                id
            })
            .collect();
        let named = predefined_samples(tools)
            .iter()
            .filter_map(|sample| {
                let name = sample.name_in_namespace();
                let id = define(sample.metric.kind(), &name, &[])?;
                Some((name, id))
            })
            .collect();
        StatIds { named, labelled }
    }

    /// Where `sample` goes: its label set's own stat, or its metric with the labels. `name` is a
    /// buffer for the sample's name, reused across a request's samples.
    pub fn of<'s>(&self, sample: &'s Sample<'_>, name: &mut String) -> Option<(Id, &'s [&'s str])> {
        sample.write_name_in_namespace(name);
        if let Some(id) = self.named.get(name.as_str()) {
            return Some((*id, &[]));
        }
        let index = Metric::ALL.iter().position(|known| *known == sample.metric)?;
        let id = self.labelled.get(index).copied().flatten()?;
        Some((id, &*sample.labels))
    }

    /// For a host whose stats take no labels: the stat of `sample`'s label set, defined now
    /// with `define` (given its kind and name in the namespace) if it has none yet.
    pub fn of_or_define(
        &mut self,
        sample: &Sample<'_>,
        name: &mut String,
        define: impl FnOnce(MetricKind, &str) -> Option<Id>,
    ) -> Option<Id> {
        sample.write_name_in_namespace(name);
        if let Some(id) = self.named.get(name.as_str()) {
            return Some(*id);
        }
        let id = define(sample.metric.kind(), name)?;
        self.named.insert(name.clone(), id);
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use smallvec::smallvec;

    use super::*;

    fn sample(metric: Metric, labels: &[&'static str]) -> Sample<'static> {
        Sample {
            metric,
            labels: labels.iter().copied().collect(),
            value: 1,
        }
    }

    #[test]
    fn a_label_set_most_requests_use_has_a_stat_of_its_own_and_any_other_its_metric() {
        let mut defined = Vec::new();
        let ids = StatIds::labelled(&["UserService_GetUser"], |_, name, labels| {
            defined.push((name.to_owned(), labels.len()));
            Some(defined.len())
        });
        let mut name = String::new();
        let success = sample(Metric::ToolCalls, &["UserService_GetUser", "success", "OK"]);
        let (id, labels) = ids.of(&success, &mut name).unwrap();
        assert_eq!(
            defined[id - 1],
            (
                "tool_calls.tool.UserService_GetUser.outcome.success.grpc_status.OK".into(),
                0
            )
        );
        assert!(labels.is_empty());
        let error = Sample {
            metric: Metric::ToolCalls,
            labels: smallvec!["UserService_GetUser", "tool_error", "NOT_FOUND"],
            value: 1,
        };
        let (id, labels) = ids.of(&error, &mut name).unwrap();
        assert_eq!(defined[id - 1], ("tool_calls".into(), 3));
        assert_eq!(labels, ["UserService_GetUser", "tool_error", "NOT_FOUND"]);
    }

    #[test]
    fn a_metric_the_host_refused_is_not_recorded() {
        let ids = StatIds::labelled(&[], |_, name, labels| {
            (name != "tool_calls" || labels.is_empty()).then_some(1)
        });
        let error = sample(Metric::ToolCalls, &["T", "tool_error", "NOT_FOUND"]);
        assert!(ids.of(&error, &mut String::new()).is_none());
    }

    #[test]
    fn without_labels_each_label_set_is_defined_once_on_first_use() {
        let mut ids = StatIds::default();
        let mut defined = Vec::new();
        let mut name = String::new();
        let error = sample(Metric::ToolCalls, &["T", "tool_error", "NOT_FOUND"]);
        for _ in 0..3 {
            let id = ids.of_or_define(&error, &mut name, |kind, name| {
                defined.push((kind, name.to_owned()));
                Some(7)
            });
            assert_eq!(id, Some(7));
        }
        assert_eq!(
            defined,
            [(
                MetricKind::Counter,
                "tool_calls.tool.T.outcome.tool_error.grpc_status.NOT_FOUND".to_owned()
            )]
        );
        // A refused one is asked again next time, and not recorded meanwhile.
        let other = sample(Metric::ToolCalls, &["U", "tool_error", "NOT_FOUND"]);
        assert_eq!(ids.of_or_define(&other, &mut name, |_, _| None), None);
        assert_eq!(ids.of_or_define(&other, &mut name, |_, _| Some(8)), Some(8));
    }
}

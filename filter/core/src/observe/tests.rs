use regex::Regex;

use super::*;

/// The tags Envoy would extract from `name` with [`tag_extraction_rules`], and the name left.
fn extract(name: &str) -> (String, Vec<(&'static str, String)>) {
    let mut cut: Vec<std::ops::Range<usize>> = Vec::new();
    let mut tags = Vec::new();
    for (tag, rule) in tag_extraction_rules() {
        let regex = Regex::new(&rule).unwrap();
        if let Some(captures) = regex.captures(name) {
            cut.push(captures.get(1).unwrap().range());
            tags.push((tag, captures.get(2).unwrap().as_str().to_owned()));
        }
    }
    let left = name
        .char_indices()
        .filter(|(index, _)| !cut.iter().any(|range| range.contains(index)))
        .map(|(_, c)| c)
        .collect();
    (left, tags)
}

#[test]
fn tagged_names_come_back_as_one_metric_name_with_labels() {
    let sample = Sample {
        metric: Metric::ToolCalls,
        labels: smallvec!["UserService_GetUser", "tool_error", "NOT_FOUND"],
        value: 1,
    };
    let name = format!("wasmcustom.{}", sample.tagged_name());
    assert_eq!(
        name,
        "wasmcustom.switchblade.tool_calls.tool.UserService_GetUser.outcome.tool_error.grpc_status.NOT_FOUND"
    );
    let (left, tags) = extract(&name);
    assert_eq!(left, "wasmcustom.switchblade.tool_calls");
    assert_eq!(
        tags,
        [
            ("tool", "UserService_GetUser".to_owned()),
            ("outcome", "tool_error".to_owned()),
            ("grpc_status", "NOT_FOUND".to_owned()),
        ]
    );
}

#[test]
fn a_value_that_spells_a_label_name_stays_a_value() {
    let sample = Sample {
        metric: Metric::ToolCalls,
        labels: smallvec!["outcome", "success", "OK"],
        value: 1,
    };
    let (left, tags) = extract(&format!("wasmcustom.{}", sample.tagged_name()));
    assert_eq!(left, "wasmcustom.switchblade.tool_calls");
    assert_eq!(
        tags,
        [
            ("tool", "outcome".to_owned()),
            ("outcome", "success".to_owned()),
            ("grpc_status", "OK".to_owned()),
        ]
    );
    let method = Sample {
        metric: Metric::Requests,
        labels: smallvec!["tools/call", "2025-06-18"],
        value: 1,
    };
    let (left, tags) = extract(&format!("wasmcustom.{}", method.tagged_name()));
    assert_eq!(left, "wasmcustom.switchblade.requests");
    assert_eq!(
        tags,
        [
            ("method", "tools/call".to_owned()),
            ("protocol_version", "2025-06-18".to_owned()),
        ]
    );
}

#[test]
fn the_modules_names_come_back_the_same() {
    let sample = Sample {
        metric: Metric::ToolUpstreamMs,
        labels: smallvec!["CatalogService_GetItem"],
        value: 3,
    };
    let name = format!("{STAT_PREFIX}.{}", sample.name_in_namespace());
    assert_eq!(name, sample.tagged_name());
    let (left, tags) = extract(&name);
    assert_eq!(left, "switchblade.tool_upstream_ms");
    assert_eq!(tags, [("tool", "CatalogService_GetItem".to_owned())]);
    // Written over a buffer that held a longer name, and a dot in a value never splits it.
    let mut buffer = "x".repeat(100);
    sample.write_name_in_namespace(&mut buffer);
    assert_eq!(buffer, sample.name_in_namespace());
    let dotted = Sample {
        metric: Metric::ToolUpstreamMs,
        labels: smallvec!["a.b"],
        value: 1,
    };
    dotted.write_name_in_namespace(&mut buffer);
    assert_eq!(buffer, "tool_upstream_ms.tool.a_b");
}

#[test]
fn predefined_label_sets_cover_each_method_version_refusal_and_tool_success() {
    let samples = predefined_samples(&["A", "B"]);
    let count = |metric| samples.iter().filter(|sample| sample.metric == metric).count();
    assert_eq!(count(Metric::Requests), 9 * 5);
    assert_eq!(count(Metric::HttpRefusals), Refusal::ALL.len());
    assert_eq!(count(Metric::ToolCalls), 2);
    assert_eq!(count(Metric::ToolUpstreamMs), 2);
    assert!(samples.contains(&Sample {
        metric: Metric::ToolCalls,
        labels: smallvec!["B", "success", "OK"],
        value: 0
    }));
    let names: std::collections::BTreeSet<String> = samples.iter().map(Sample::tagged_name).collect();
    assert_eq!(names.len(), samples.len(), "no two share a name");
}

#[test]
fn envoys_own_stats_are_left_alone() {
    for name in [
        "cluster.tool.upstream_rq_200",
        "http.ingress.tool.outcome.x",
        "wasmcustom.other.tool_calls.tool.x",
        "listener.switchblade.tool.x",
        "switchblade",
        "wasmcustom.switchblade.vm_memory_bytes",
    ] {
        assert_eq!(extract(name), (name.to_owned(), Vec::new()), "{name}");
    }
}

#[test]
fn outcomes_follow_the_grpc_status() {
    assert_eq!(CallOutcome::of_status(0), CallOutcome::Success);
    assert_eq!(CallOutcome::of_status(14), CallOutcome::Unavailable);
    assert_eq!(CallOutcome::of_status(4), CallOutcome::DeadlineExceeded);
    for status in [1, 2, 3, 5, 7, 8, 13, 16, 99] {
        assert_eq!(CallOutcome::of_status(status), CallOutcome::ToolError, "{status}");
    }
}

#[test]
fn methods_are_counted_by_a_fixed_list() {
    let mut observed = Observations::default();
    observed.era(Era::Legacy("2025-06-18"));
    observed.request("tools/call");
    observed.request("made/up/by/a/client");
    let samples = observed.samples();
    let labels: Vec<_> = samples.iter().map(|sample| sample.labels.to_vec()).collect();
    assert_eq!(labels, [["tools/call", "2025-06-18"], ["other", "2025-06-18"]]);
}

#[test]
fn log_values_are_cut_and_joined() {
    assert_eq!(cut("short".into()), "short");
    let long = "é".repeat(300);
    let kept = cut(long.into());
    assert_eq!(kept.chars().count(), MAX_LOG_VALUE_CHARS + 1);
    assert!(kept.ends_with('…'));
    // A client's key cannot break a log line or forge one.
    assert_eq!(
        cut("a\n{\"forged\":1}\u{1b}[2J\\".into()),
        r#"a\n{\"forged\":1}\u{1b}[2J\\"#
    );
    let escapes = "\n".repeat(200);
    assert_eq!(cut(escapes.into()).chars().count(), MAX_LOG_VALUE_CHARS + 1);
    // Quotes alone are escaped too, and a long plain value is cut.
    assert_eq!(cut("it's \"x\"".into()), r#"it\'s \"x\""#);
    assert_eq!(cut("a".repeat(300).into()).chars().count(), MAX_LOG_VALUE_CHARS + 1);
    let mut observed = Observations::default();
    observed.refused(Refusal::Batch);
    assert_eq!(observed.log_fields(), [("refusal", "batch".to_owned())]);
    assert_eq!(
        observed.log_entries().collect::<Vec<_>>(),
        [("switchblade.refusal", Cow::Borrowed("batch"))]
    );
    // A lone value that needs no cut is lent; several are joined in order.
    assert!(matches!(
        log_value(["UserService_GetUser"]),
        Some(Cow::Borrowed("UserService_GetUser"))
    ));
    assert_eq!(log_value(["a", "b", "c"]).as_deref(), Some("a,b,c"));
    assert_eq!(log_value(["", ""]).as_deref(), Some(","));
    assert_eq!(log_value([""]), None);
    assert_eq!(log_value([]), None);
    assert_eq!(
        observed.samples().as_slice(),
        [Sample {
            metric: Metric::HttpRefusals,
            labels: smallvec!["batch"],
            value: 1
        }]
    );
}

#[test]
fn every_label_is_named_once_and_fits_envoy_tags() {
    let names = label_names();
    assert_eq!(
        names,
        ["tool", "outcome", "grpc_status", "method", "protocol_version", "reason"]
    );
    for metric in Metric::ALL {
        assert!(metric.name().chars().all(|c| c.is_ascii_lowercase() || c == '_'));
    }
}

#[test]
fn each_log_field_has_its_key_in_the_namespace() {
    for field in &LOG_FIELDS {
        assert_eq!(field.key, format!("{LOG_NAMESPACE}.{}", field.name));
    }
}

//! What is generated from definitions, checked against the committed copies: the plugin
//! configuration's JSON Schema (docs/config.schema.json, and the reference table of
//! docs/configuration.md), the manual pages (docs/man) and the shell completions.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;

use common::{repo, scratch, switchblade};
use serde_json::Value;

/// The configuration reference: its example and its table of keys.
const REFERENCE: &str = "docs/configuration.md";

#[test]
fn the_published_schema_is_the_one_the_cli_prints() {
    let printed = switchblade(&["schema"]).ok();
    let published = std::fs::read_to_string(repo().join("docs/config.schema.json")).unwrap();
    assert!(
        printed == published,
        "docs/config.schema.json is out of date: run `switchblade schema > docs/config.schema.json`"
    );
}

/// Every plugin configuration inside `value`: a string that is a JSON object with `services`.
fn configurations_in(value: &Value, found: &mut Vec<Value>) {
    match value {
        Value::String(text) => {
            if let Ok(config @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
                if config.get("services").is_some() {
                    found.push(config);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| configurations_in(item, found)),
        Value::Object(map) => map.values().for_each(|item| configurations_in(item, found)),
        _ => {}
    }
}

/// The plugin configurations of the repository's Envoy files, and the reference's example.
fn repository_configurations() -> Vec<(String, Value)> {
    let mut found = Vec::new();
    for file in [
        "envoy/ecds/demo.yaml",
        "envoy/module.yaml",
        "envoy/auth.yaml",
        "envoy/docker.yaml",
    ] {
        let text = std::fs::read_to_string(repo().join(file)).unwrap();
        let mut configurations = Vec::new();
        configurations_in(&yaml_serde::from_str(&text).unwrap(), &mut configurations);
        assert_eq!(configurations.len(), 1, "{file}");
        found.push((file.to_owned(), configurations.remove(0)));
    }
    let reference = std::fs::read_to_string(repo().join(REFERENCE)).unwrap();
    let section = reference.split("\n## Plugin configuration\n").nth(1).unwrap();
    let example = section
        .split("```json\n")
        .nth(1)
        .unwrap()
        .split("\n```")
        .next()
        .unwrap();
    found.push((REFERENCE.to_owned(), serde_json::from_str(example).unwrap()));
    found
}

#[test]
fn the_schema_accepts_the_repositorys_configurations_and_refuses_unknown_keys() {
    let schema: Value = serde_json::from_str(&switchblade(&["schema"]).ok()).unwrap();
    assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
    let validator = jsonschema::draft202012::new(&schema).unwrap();
    let configurations = repository_configurations();
    assert_eq!(configurations.len(), 5);
    for (file, configuration) in &configurations {
        let errors: Vec<String> = validator.iter_errors(configuration).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{file}: {errors:?}");
    }
    let mut wrong = configurations[0].1.clone();
    wrong["services"]["demo.catalog.v1.CatalogService"]["timout_ms"] = Value::from(5);
    assert!(!validator.is_valid(&wrong));
    wrong = serde_json::json!({"services": {"a.B": {"cluster": "c", "expose": "some"}}});
    assert!(!validator.is_valid(&wrong));
}

/// Every key of a schema: `a.b` for a property of a property, `a.S.b` for a property of an
/// object's values (`services.S.cluster`), with `S`, `M` as the reference writes them.
fn schema_keys(schema: &Value, node: &Value, prefix: &str, keys: &mut BTreeSet<String>) {
    let node = resolve(schema, node);
    if let Some(properties) = node.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            let key = format!("{prefix}{name}");
            keys.insert(key.clone());
            schema_keys(schema, property, &format!("{key}."), keys);
        }
    }
    if let Some(values) = node.get("additionalProperties").filter(|values| values.is_object()) {
        let placeholder = match prefix {
            "services." => "S.",
            "tools." => "M.",
            _ => "*.",
        };
        schema_keys(schema, values, &format!("{prefix}{placeholder}"), keys);
    }
    // An optional section (`authorization`) is `anyOf` itself or null.
    for branch in node.get("anyOf").and_then(Value::as_array).into_iter().flatten() {
        schema_keys(schema, branch, prefix, keys);
    }
}

fn resolve<'a>(schema: &'a Value, node: &'a Value) -> &'a Value {
    match node.get("$ref").and_then(Value::as_str) {
        Some(reference) => schema.pointer(reference.trim_start_matches('#')).unwrap(),
        None => node,
    }
}

/// The keys of the reference's "Plugin configuration" table.
fn reference_keys() -> BTreeSet<String> {
    let reference = std::fs::read_to_string(repo().join(REFERENCE)).unwrap();
    let section = reference.split("\n## Plugin configuration\n").nth(1).unwrap();
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|line| line.split_once('`'))
        .map(|(key, _)| key.to_owned())
        .collect()
}

#[test]
fn the_reference_table_and_the_schema_name_the_same_keys() {
    let schema: Value = serde_json::from_str(&switchblade(&["schema"]).ok()).unwrap();
    let mut in_schema = BTreeSet::new();
    schema_keys(&schema, &schema, "", &mut in_schema);
    let in_reference = reference_keys();
    assert!(in_reference.len() > 30, "{in_reference:?}");
    let unknown: Vec<&String> = in_reference.difference(&in_schema).collect();
    assert!(
        unknown.is_empty(),
        "the reference documents keys the configuration does not have: {unknown:?}"
    );
    // A key is documented if it or a section it belongs to has a row (`tools.M.annotations`
    // covers its hints), or if it is a section whose keys all do (`limits`).
    let documented = |key: &String| {
        let mut prefix = key.as_str();
        loop {
            if in_reference.contains(prefix) {
                return true;
            }
            match prefix.rsplit_once('.') {
                Some((parent, _)) => prefix = parent,
                None => break,
            }
        }
        in_reference.iter().any(|row| row.starts_with(&format!("{key}.")))
    };
    let undocumented: Vec<&String> = in_schema.iter().filter(|key| !documented(key)).collect();
    assert!(
        undocumented.is_empty(),
        "keys missing from the reference's table: {undocumented:?}"
    );
}

#[test]
fn the_manual_pages_are_the_ones_the_cli_writes() {
    let dir = scratch("man");
    let written = switchblade(&["man", "--out-dir", dir.to_str().unwrap()]).ok();
    let mut pages: Vec<String> = written
        .lines()
        .map(|path| path.rsplit('/').next().unwrap().to_owned())
        .collect();
    pages.sort();
    assert_eq!(
        pages,
        [
            "switchblade-check.1",
            "switchblade-completions.1",
            "switchblade-config.1",
            "switchblade-man.1",
            "switchblade-schema.1",
            "switchblade-tools.1",
            "switchblade.1"
        ]
    );
    for page in &pages {
        let fresh = std::fs::read_to_string(dir.join(page)).unwrap();
        let committed = std::fs::read_to_string(repo().join("docs/man").join(page)).unwrap_or_default();
        assert!(
            fresh == committed,
            "docs/man/{page} is out of date: run `switchblade man --out-dir docs/man`"
        );
    }
    let committed = std::fs::read_dir(repo().join("docs/man")).unwrap().count();
    assert_eq!(
        committed,
        pages.len(),
        "docs/man holds a page of a command that is gone"
    );
    // Without a directory: the main page.
    assert!(switchblade(&["man"]).ok().contains(".TH switchblade 1"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn completions_cover_every_command_in_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let script = switchblade(&["completions", shell]).ok();
        for word in [
            "config",
            "check",
            "tools",
            "schema",
            "completions",
            "--descriptor-set",
            "envoy-gateway",
        ] {
            assert!(script.contains(word), "{shell}: {word}");
        }
    }
    let usage = switchblade(&["completions", "tcsh"]);
    assert_eq!(usage.code, 2);
    assert!(usage.stderr.contains("invalid value 'tcsh'"), "{}", usage.stderr);
}

/// A configuration of the embedded demo that sets a value of every numeric key's object, so
/// that each bound can be tried on its own: every other key stays valid.
fn bounds_base() -> Value {
    serde_json::json!({
        "services": {"demo.catalog.v1.CatalogService": {"cluster": "c"}},
        "tools": {"demo.catalog.v1.CatalogService/GetItem": {}},
        "limits": {
            "rules": [{"match": "demo.catalog.v1.CatalogService/GetItem", "requests_per_second": 1}],
            "rate_limit_service": {"cluster": "rls", "domain": "d"}
        }
    })
}

/// Every numeric key of the schema: its path (`*` for a map's key, `[]` for an array's first
/// item) and its schema.
fn numeric_keys(schema: &Value, defs: &Value, path: Vec<String>, found: &mut Vec<(Vec<String>, Value)>) {
    if let Some(Value::String(reference)) = schema.get("$ref") {
        let name = reference.rsplit('/').next().unwrap();
        return numeric_keys(&defs[name], defs, path, found);
    }
    for combined in ["anyOf", "oneOf"] {
        for option in schema.get(combined).and_then(Value::as_array).into_iter().flatten() {
            numeric_keys(option, defs, path.clone(), found);
        }
    }
    let types = match &schema["type"] {
        Value::String(one) => vec![one.as_str()],
        Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    if types.contains(&"integer") || types.contains(&"number") {
        found.push((path.clone(), schema.clone()));
    }
    for (key, property) in schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let mut below = path.clone();
        below.push(key.clone());
        numeric_keys(property, defs, below, found);
    }
    for (key, inner) in [("additionalProperties", "*"), ("items", "[]")] {
        if let Some(inner_schema @ Value::Object(_)) = schema.get(key) {
            let mut below = path.clone();
            below.push(inner.to_owned());
            numeric_keys(inner_schema, defs, below, found);
        }
    }
}

/// `base` with `value` at `path`, a map's key being the one `base` has there.
fn with_value(base: &Value, path: &[String], value: Value) -> Value {
    let mut config = base.clone();
    let mut here = &mut config;
    for (depth, key) in path.iter().enumerate() {
        let last = depth + 1 == path.len();
        here = match key.as_str() {
            "*" => {
                let map = here.as_object_mut().unwrap();
                let first = map.keys().next().unwrap().clone();
                map.get_mut(&first).unwrap()
            }
            "[]" => &mut here.as_array_mut().unwrap()[0],
            _ if last => {
                here[key.as_str()] = value;
                return config;
            }
            _ => {
                if here.get(key.as_str()).is_none() {
                    here[key.as_str()] = serde_json::json!({});
                }
                here.get_mut(key.as_str()).unwrap()
            }
        };
    }
    config
}

#[test]
fn the_schemas_bounds_are_the_filters_at_and_past_each_one() {
    let schema: Value = serde_json::from_str(&switchblade(&["schema"]).ok()).unwrap();
    let validator = jsonschema::draft202012::new(&schema).unwrap();
    let accepts = |config: &Value| {
        switchblade_core::server::Server::from_config_bytes(config.to_string().as_bytes()).map_err(|error| error.0)
    };
    let base = bounds_base();
    assert!(
        validator.is_valid(&base) && accepts(&base).is_ok(),
        "{:?}",
        accepts(&base).err()
    );
    let mut keys = Vec::new();
    numeric_keys(&schema, &schema["$defs"], Vec::new(), &mut keys);
    assert!(keys.len() >= 25, "{keys:?}");
    let mut tried = 0;
    for (path, key_schema) in &keys {
        let number = |name: &str| key_schema.get(name).and_then(Value::as_f64);
        let integer = key_schema["type"].as_str() == Some("integer")
            || key_schema["type"]
                .as_array()
                .is_some_and(|types| types.iter().any(|t| t == "integer"));
        let step = if integer { 1.0 } else { 0.5 };
        let mut candidates = Vec::new();
        if let Some(minimum) = number("minimum") {
            candidates.extend([(minimum, true), (minimum - step, false)]);
        }
        if let Some(minimum) = number("exclusiveMinimum") {
            candidates.extend([(minimum, false), (minimum + step, true)]);
        }
        if let Some(maximum) = number("maximum") {
            candidates.extend([(maximum, true), (maximum + step, false)]);
        }
        assert!(!candidates.is_empty(), "{}: no bound in the schema", path.join("."));
        for (value, within) in candidates {
            let json_value = if integer {
                Value::from(value as i64)
            } else {
                Value::from(value)
            };
            let config = with_value(&base, path, json_value.clone());
            let (schema_says, filter_says) = (validator.is_valid(&config), accepts(&config));
            assert_eq!(
                (schema_says, filter_says.is_ok()),
                (within, within),
                "`{}` = {json_value}: the schema {}, the filter {:?}",
                path.join("."),
                if schema_says { "accepts" } else { "refuses" },
                filter_says
            );
            tried += 1;
        }
    }
    assert!(tried >= 50, "{tried}");
}

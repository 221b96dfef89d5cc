//! `switchblade check FILE...`: every file given, each configuration in it checked with the
//! filter's own validation and reported on a line of its own, ok or why not.
//!
//! A file with no Switchblade configuration is reported as such and does not fail the check
//! (so that `switchblade check envoy/*.yaml` can cover bootstraps without the filter), unless
//! no file given has one. A filter configured through ECDS from a file is followed to that file,
//! as Envoy reads it (relative to the working directory); an ECDS file that is not there yet is
//! reported and does not fail the check: it is often written later, by a deploy step.

use std::path::Path;

use serde_json::Value;

use crate::manifests::{self, Discovery, Embedded};
use crate::Output;

/// What checking one thing came to: a line for standard output, one for standard error, or a
/// file without any configuration (which fails only if no file has one).
enum Line {
    Ok(String),
    Failed(String),
    Without(String),
}

pub fn run(files: &[String]) -> Output {
    let mut lines = Vec::new();
    for file in files {
        match read(file) {
            Ok(text) => check_text(file, &text, &mut lines),
            Err(error) => lines.push(Line::Failed(format!("{file}: {error}"))),
        }
    }
    let none_anywhere = lines.iter().all(|line| matches!(line, Line::Without(_)));
    let mut output = Output::default();
    for line in lines {
        match line {
            Line::Ok(text) => output.stdout_line(&text),
            Line::Without(file) if !none_anywhere => {
                output.stdout_line(&format!("{file}: no Switchblade plugin configuration found (skipped)"))
            }
            Line::Without(file) => {
                output.failed = true;
                output
                    .notes
                    .push(format!("{file}: no Switchblade plugin configuration found"));
            }
            Line::Failed(text) => {
                output.failed = true;
                output.notes.push(text);
            }
        }
    }
    output
}

/// A file's text; `-` is standard input.
pub fn read(file: &str) -> Result<String, String> {
    if file == "-" {
        return std::io::read_to_string(std::io::stdin()).map_err(|error| format!("standard input: {error}"));
    }
    std::fs::read_to_string(file).map_err(|error| error.to_string())
}

fn check_text(file: &str, text: &str, lines: &mut Vec<Line>) {
    // A bare JSON configuration is checked as the filter reads it, byte for byte (a key given
    // twice, for one, is refused there and would be lost in a round trip).
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        if manifests::is_bare_plugin_config(&value) {
            let embedded = Embedded {
                place: "the plugin configuration".into(),
                config: text.to_owned(),
            };
            lines.push(check_one(file, &embedded));
            return;
        }
    }
    let found = match manifests::embedded_configs(text) {
        Ok(found) => found,
        Err(error) => {
            lines.push(Line::Failed(format!("{file}: {error}")));
            return;
        }
    };
    if found.is_empty() {
        lines.push(Line::Without(file.to_owned()));
        return;
    }
    lines.extend(found.configs.iter().map(|embedded| check_one(file, embedded)));
    for discovered in &found.discovered {
        lines.extend(follow(file, discovered));
    }
}

fn check_one(file: &str, embedded: &Embedded) -> Line {
    match manifests::check(embedded) {
        Ok(1) => Line::Ok(format!("{file}: {}: 1 tool", embedded.place)),
        Ok(tools) => Line::Ok(format!("{file}: {}: {tools} tools", embedded.place)),
        Err(error) => Line::Failed(format!(
            "{file}: {}: invalid plugin configuration: {error}",
            embedded.place
        )),
    }
}

/// The configurations of the ECDS file a filter reads.
fn follow(file: &str, discovered: &Discovery) -> Vec<Line> {
    let place = &discovered.place;
    let Some(path) = &discovered.path else {
        return vec![Line::Ok(format!(
            "{file}: {place}: from a control plane, not a file: nothing to check here"
        ))];
    };
    if !Path::new(path).exists() {
        return vec![Line::Ok(format!(
            "{file}: {place}: {path} does not exist (yet), so it was not checked; Envoy reads it \
             relative to its working directory (check it with `switchblade check {path}` once written)"
        ))];
    }
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) => return vec![Line::Failed(format!("{file}: {place}: {path}: {error}"))],
    };
    let found = match manifests::embedded_configs(&text) {
        Ok(found) => found,
        Err(error) => return vec![Line::Failed(format!("{file}: {place}: {path}: {error}"))],
    };
    if found.configs.is_empty() {
        return vec![Line::Failed(format!(
            "{file}: {place}: {path}: no Switchblade plugin configuration found"
        ))];
    }
    found
        .configs
        .iter()
        .map(|embedded| {
            let followed = Embedded {
                place: format!("{place}: {path}: {}", embedded.place),
                config: embedded.config.clone(),
            };
            check_one(file, &followed)
        })
        .collect()
}

//! The hosts' code sees the core through `switchblade_core::host_api` alone: a path into any
//! other module of the core, outside a host's tests, fails here with its file and line.

// Test code: a failed expectation is a failed test.
#![allow(clippy::expect_used, clippy::panic)]

use std::fs;
use std::path::{Path, PathBuf};

const HOSTS: [&str; 2] = ["../wasm/src", "../module/src"];
const CORE: &str = "switchblade_core::";
const DOOR: &str = "switchblade_core::host_api";

fn sources(folder: &Path, found: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(folder).unwrap_or_else(|error| panic!("{}: {error}", folder.display()));
    for entry in entries {
        let path = entry.expect("a readable folder entry").path();
        let is_tests = path.file_stem().is_some_and(|stem| stem == "tests");
        if path.is_dir() && !is_tests {
            sources(&path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") && !is_tests {
            found.push(path);
        }
    }
}

/// Each use of the core's paths in `text` that does not go through the door, as `line: text`.
fn past_the_door(text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .filter(|(_, line)| line.match_indices(CORE).any(|(at, _)| !line[at..].starts_with(DOOR)))
        .map(|(index, line)| format!("{}: {}", index + 1, line.trim()))
        .collect()
}

#[test]
fn the_hosts_import_the_core_through_host_api_alone() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for host in HOSTS {
        sources(&root.join(host), &mut files);
    }
    assert!(files.len() > 10, "the hosts' sources were not found: {files:?}");
    let mut strays = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).unwrap_or_else(|error| panic!("{}: {error}", file.display()));
        strays.extend(
            past_the_door(&text)
                .into_iter()
                .map(|stray| format!("{}:{stray}", file.display())),
        );
    }
    assert!(
        strays.is_empty(),
        "imports of the core past switchblade_core::host_api:\n{}",
        strays.join("\n")
    );
}

#[test]
fn a_path_past_the_door_is_found() {
    assert_eq!(
        past_the_door("use switchblade_core::host_api::Server;\n// switchblade_core::server\nuse switchblade_core::server::Server;\n"),
        ["3: use switchblade_core::server::Server;"]
    );
    assert_eq!(
        past_the_door("shared::<switchblade_core::host_api::Server>(), switchblade_core::quota::X"),
        ["1: shared::<switchblade_core::host_api::Server>(), switchblade_core::quota::X"]
    );
}

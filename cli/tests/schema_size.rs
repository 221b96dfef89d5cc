//! `switchblade config` and `switchblade tools` on .proto files whose message tree is
//! exponential (each message holds four fields of the next): they finish, and the schemas
//! write each message once under `$defs`. A schema too large even so is refused, naming the
//! method and the bound.

// Test code: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Longer than any of these runs takes by far; without the shared layout they ran for minutes,
/// or until memory ran out.
const PATIENCE: Duration = Duration::from_secs(60);

/// A directory of this test's own.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchblade-cli-schema-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `switchblade ARGS`, killed if it runs past [`PATIENCE`].
fn switchblade(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchblade"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    // Output is read at the end: a run that fills the pipe first is far past any output
    // these tests expect, and times out like a run that never ends.
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > PATIENCE {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("switchblade {args:?} still ran after {PATIENCE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    eprintln!("switchblade {} took {:?}", args[0], started.elapsed());
    output
}

/// `deep.proto`: service `deep.v1.Deep` with `Grow(Level0) returns (Level0)`, and `levels`
/// messages each holding fields `a` to `d` of the next.
fn deep_proto(dir: &Path, levels: usize) {
    let mut source = String::from(
        "syntax = \"proto3\";\npackage deep.v1;\n\nservice Deep { rpc Grow(Level0) returns (Level0); }\n\n",
    );
    for level in 0..levels {
        if level + 1 < levels {
            let next = format!("Level{}", level + 1);
            source.push_str(&format!(
                "// Level {level}.\nmessage Level{level} {{ {next} a = 1; {next} b = 2; {next} c = 3; {next} d = 4; }}\n"
            ));
        } else {
            source.push_str(&format!("message Level{level} {{ string value = 1; }}\n"));
        }
    }
    std::fs::write(dir.join("deep.proto"), source).unwrap();
}

fn config_of(dir: &Path, service: &str) -> Output {
    switchblade(&[
        "config",
        "-I",
        dir.to_str().unwrap(),
        "deep.proto",
        "--service",
        &format!("{service}=deep"),
    ])
}

#[test]
fn config_and_tools_finish_on_an_exponential_tree_and_share_each_message() {
    for levels in [16, 40] {
        let dir = scratch(&format!("deep{levels}"));
        deep_proto(&dir, levels);
        let config = config_of(&dir, "deep.v1.Deep");
        assert!(config.status.success(), "{}", String::from_utf8_lossy(&config.stderr));
        let path = dir.join("plugin.json");
        std::fs::write(&path, &config.stdout).unwrap();
        let tools = switchblade(&["tools", path.to_str().unwrap()]);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(tools.status.success(), "{}", String::from_utf8_lossy(&tools.stderr));
        let listed: Value = serde_json::from_slice(&tools.stdout).unwrap();
        let grow = &listed["tools"][0];
        assert_eq!(grow["name"], "Deep_Grow");
        for side in ["inputSchema", "outputSchema"] {
            let schema = &grow[side];
            assert_eq!(schema["properties"]["d"]["$ref"], "#/$defs/deep.v1.Level1");
            let defs = schema["$defs"].as_object().unwrap();
            assert_eq!(defs.len(), levels - 1, "{side}: each message but the root, once");
            let last = format!("deep.v1.Level{}", levels - 1);
            assert_eq!(defs[&last]["properties"]["value"]["type"], "string");
            assert_eq!(defs["deep.v1.Level1"]["description"], "Level 1.");
        }
        // The whole list grows with the messages: each is written once in each schema.
        assert!(tools.stdout.len() < 1_500 * levels, "{} bytes", tools.stdout.len());
    }
}

#[test]
fn a_schema_too_large_even_shared_is_refused_with_the_method_and_the_bound() {
    let dir = scratch("huge");
    let values: Vec<String> = (0..2_000)
        .map(|value| format!("  MANY_VALUE_{value:05} = {value};"))
        .collect();
    let fields: Vec<String> = (1..=100)
        .map(|number| format!("  Many f{number} = {number};"))
        .collect();
    let source = format!(
        "syntax = \"proto3\";\npackage huge.v1;\n\nservice Huge {{ rpc Take(Wide) returns (Wide); }}\n\n\
         enum Many {{\n{}\n}}\n\nmessage Wide {{\n{}\n}}\n",
        values.join("\n"),
        fields.join("\n")
    );
    std::fs::write(dir.join("deep.proto"), source).unwrap();
    let config = config_of(&dir, "huge.v1.Huge");
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!config.status.success());
    assert_eq!(
        String::from_utf8_lossy(&config.stderr),
        "switchblade: the configuration would be refused: at `services.huge.v1.Huge`: the input schema of \
         huge.v1.Huge/Take (message huge.v1.Wide) would be larger than 1048576 bytes of JSON, even with each message \
         that occurs more than once written once under `$defs`; leave the method out (`expose: selected`) or give it \
         a smaller message\n"
    );
}

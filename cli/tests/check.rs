//! `switchblade check`: every file given is reported, ECDS is followed, bare configurations
//! and standard input are read, and the exit status says whether any configuration failed.
//! And `switchblade tools` on standard input, and on a file that is not a bare configuration.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{repo, scratch, switchblade, switchblade_in};

/// The repository's Envoy files and manifests, as absolute paths (`check` runs elsewhere).
fn repository_files() -> Vec<String> {
    let mut files = Vec::new();
    for directory in ["envoy", "deploy/envoy-gateway", "deploy/istio", "envoy/ecds"] {
        let mut here: Vec<String> = std::fs::read_dir(repo().join(directory))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
            .map(|path| path.to_str().unwrap().to_owned())
            .collect();
        here.sort();
        files.extend(here);
    }
    files
}

/// The report's lines with the repository's path left out.
fn lines(text: &str) -> Vec<String> {
    let root = format!("{}/", repo().display());
    text.lines().map(|line| line.replace(&root, "")).collect()
}

#[test]
fn every_file_of_the_repository_passes_and_ecds_is_followed() {
    let dir = scratch("check-repository");
    let files = repository_files();
    let mut args = vec!["check"];
    args.extend(files.iter().map(String::as_str));
    let run = switchblade_in(&dir, &args, "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        lines(&run.stdout),
        [
            "envoy/auth.yaml: document 1, the Wasm filter: 3 tools",
            "envoy/demo.yaml: document 1, the Wasm filter `switchblade` through ECDS: .work/ecds/switchblade.yaml does \
             not exist (yet), so it was not checked; Envoy reads it relative to its working directory (check it with \
             `switchblade check .work/ecds/switchblade.yaml` once written)",
            "envoy/docker.yaml: document 1, the Wasm filter: 3 tools",
            "envoy/module.yaml: document 1, the dynamic module: 3 tools",
            "deploy/envoy-gateway/switchblade.yaml: EnvoyExtensionPolicy switchblade/switchblade: 3 tools",
            "deploy/istio/switchblade.yaml: WasmPlugin istio-system/switchblade: 3 tools",
            "envoy/ecds/demo.yaml: document 1, the Wasm filter: 3 tools",
        ]
    );
    // Once the ECDS file is there (as scripts/demo seeds it), its configuration is checked.
    let ecds = dir.join(".work/ecds");
    std::fs::create_dir_all(&ecds).unwrap();
    std::fs::copy(repo().join("envoy/ecds/demo.yaml"), ecds.join("switchblade.yaml")).unwrap();
    let demo = repo().join("envoy/demo.yaml");
    let run = switchblade_in(&dir, &["check", demo.to_str().unwrap()], "");
    assert_eq!(
        lines(&run.ok()),
        [
            "envoy/demo.yaml: document 1, the Wasm filter `switchblade` through ECDS: .work/ecds/switchblade.yaml: \
          document 1, the Wasm filter: 3 tools"
        ]
    );
    // A wrong one there fails the bootstrap's check.
    let broken = std::fs::read_to_string(repo().join("envoy/ecds/demo.yaml"))
        .unwrap()
        .replace("\"timeout_ms\": 5000}", "\"timout_ms\": 5000}");
    std::fs::write(ecds.join("switchblade.yaml"), broken).unwrap();
    let run = switchblade_in(&dir, &["check", demo.to_str().unwrap()], "");
    assert_eq!(run.code, 1);
    assert!(
        lines(&run.stderr)[0].starts_with(
            "switchblade: envoy/demo.yaml: document 1, the Wasm filter `switchblade` through ECDS: \
             .work/ecds/switchblade.yaml: document 1, the Wasm filter: invalid plugin configuration: at \
             `services.demo.catalog.v1.CatalogService.timout_ms`: unknown field `timout_ms`"
        ),
        "{}",
        run.stderr
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn each_file_is_reported_and_any_failure_fails_the_check() {
    let dir = scratch("check-each");
    let broken = std::fs::read_to_string(repo().join("deploy/istio/switchblade.yaml"))
        .unwrap()
        .replace("timeout_ms: 5000", "timout_ms: 5000");
    common::write(
        &dir,
        &[
            ("broken.yaml", &broken),
            ("no-filter.yaml", "static_resources: {clusters: []}\n"),
            ("not-yaml.yaml", "a: [unclosed\n"),
        ],
    );
    let istio = repo().join("deploy/istio/switchblade.yaml");
    let run = switchblade_in(
        &dir,
        &[
            "check",
            "broken.yaml",
            "no-filter.yaml",
            istio.to_str().unwrap(),
            "not-yaml.yaml",
            "missing.yaml",
        ],
        "",
    );
    assert_eq!(run.code, 1);
    assert_eq!(
        lines(&run.stdout),
        [
            "no-filter.yaml: no Switchblade plugin configuration found (skipped)",
            "deploy/istio/switchblade.yaml: WasmPlugin istio-system/switchblade: 3 tools",
        ]
    );
    let errors = lines(&run.stderr);
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].starts_with(
        "switchblade: broken.yaml: WasmPlugin istio-system/switchblade: invalid plugin configuration: at \
         `services.demo.catalog.v1.CatalogService.timout_ms`: unknown field `timout_ms`"
    ));
    assert!(
        errors[1].starts_with("switchblade: not-yaml.yaml: document 1: "),
        "{}",
        errors[1]
    );
    assert_eq!(
        errors[2],
        "switchblade: missing.yaml: No such file or directory (os error 2)"
    );
    // A file without Switchblade fails only when no file has it.
    let alone = switchblade_in(&dir, &["check", "no-filter.yaml"], "");
    assert_eq!(alone.code, 1);
    assert_eq!(
        alone.stderr,
        "switchblade: no-filter.yaml: no Switchblade plugin configuration found\n"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bare_configurations_and_standard_input_are_read() {
    let config = r#"{"services": {"demo.users.v1.UserService": {"cluster": "users"}}}"#;
    assert_eq!(
        switchblade_in(&repo(), &["check", "-"], config).ok(),
        "-: the plugin configuration: 1 tool\n"
    );
    let yaml = "services:\n  demo.users.v1.UserService: {cluster: users}\n";
    assert_eq!(
        switchblade_in(&repo(), &["check", "-"], yaml).ok(),
        "-: document 1, the plugin configuration: 1 tool\n"
    );
    // Read byte for byte: a key given twice is refused, as the filter refuses it.
    let twice = r#"{"services": {"demo.users.v1.UserService": {"cluster": "a"}, "demo.users.v1.UserService": {"cluster": "b"}}}"#;
    let run = switchblade_in(&repo(), &["check", "-"], twice);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "switchblade: -: the plugin configuration: invalid plugin configuration: at `services`: \
         demo.users.v1.UserService is listed twice at line 1 column 88\n"
    );
}

#[test]
fn tools_reads_standard_input_and_points_yaml_to_check() {
    let config = r#"{"services": {"demo.users.v1.UserService": {"cluster": "users"}}}"#;
    let listed: serde_json::Value =
        serde_json::from_str(&switchblade_in(&repo(), &["tools", "-"], config).ok()).unwrap();
    assert_eq!(listed["tools"][0]["name"], "UserService_GetUser");
    assert_eq!(listed["kinds"]["UserService_GetUser"], "unary");
    let error = switchblade(&["tools", "envoy/module.yaml"]).error();
    assert_eq!(
        error,
        "invalid plugin configuration: the configuration is not valid JSON for this filter: expected value at line 1 \
         column 1; this looks like YAML (an Envoy, ECDS or Kubernetes file?): `switchblade check FILE` finds the \
         plugin configurations inside such files and checks them"
    );
    assert_eq!(
        switchblade(&["tools", "nope.json"]).error(),
        "nope.json: No such file or directory (os error 2)"
    );
}

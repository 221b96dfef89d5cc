//! `switchblade`: turns your `.proto` files into a Switchblade plugin configuration, with no
//! `protoc` and no rebuild of the filter, and shows the tools the filter would serve.

mod manifests;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use base64::Engine;
use clap::{Parser, Subcommand, ValueEnum};
use prost::Message;
use prost_types::FileDescriptorProto;
use serde_json::{json, Map, Value};
use switchblade_core::config::parse_selector;
use switchblade_core::observe::tag_extraction_rules;
use switchblade_core::server::Server;

#[derive(Parser)]
#[command(name = "switchblade", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compile .proto files and print the plugin configuration that exposes their services.
    Config(ConfigArgs),
    /// Print the tools/list answer the filter would serve for a plugin configuration.
    Tools {
        /// The plugin configuration (JSON), as printed by `switchblade config`.
        config: PathBuf,
    },
    /// Check the plugin configurations inside deployment files with the filter's own validation:
    /// Envoy bootstraps and ECDS files, Istio WasmPlugins, Envoy Gateway EnvoyExtensionPolicies.
    Check {
        /// YAML files (several documents each, as `kubectl apply -f` takes them).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

#[derive(clap::Args)]
struct ConfigArgs {
    /// The .proto files that define the services (relative to an include directory).
    #[arg(required = true)]
    protos: Vec<PathBuf>,
    /// Directories to find .proto files and their imports in.
    #[arg(short = 'I', long = "include", default_value = ".")]
    includes: Vec<PathBuf>,
    /// A service to expose and the Envoy cluster that serves it: `package.Service=cluster`.
    #[arg(long = "service", required = true, value_parser = parse_service)]
    services: Vec<(String, String)>,
    /// Expose only these methods (`package.Service/Method`); a service without any is exposed whole.
    #[arg(long = "method")]
    methods: Vec<String>,
    /// Request headers to forward upstream as gRPC metadata.
    #[arg(long = "forward-header")]
    forward_headers: Vec<String>,
    /// Print the JSON alone; the Envoy HTTP filters to paste under `http_filters`; or an ECDS
    /// resource file for a filter with `config_discovery` (replace the file to hot-reload).
    #[arg(long, value_enum, default_value_t = Format::Json)]
    format: Format,
    /// Where Envoy finds the filter (for `--format envoy` and `--format ecds`).
    #[arg(long, default_value = "switchblade_filter.wasm")]
    wasm: String,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Json,
    Envoy,
    Ecds,
}

fn parse_service(value: &str) -> Result<(String, String), String> {
    match value.split_once('=') {
        Some((service, cluster)) if !service.is_empty() && !cluster.is_empty() => {
            Ok((service.to_owned(), cluster.to_owned()))
        }
        _ => Err(format!("{value:?}: write package.Service=cluster")),
    }
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Config(args) => config(&args),
        Command::Tools { config } => tools(&config),
        Command::Check { files } => check(&files),
    };
    match result {
        Ok(output) => match writeln!(std::io::stdout().lock(), "{output}") {
            Ok(()) => ExitCode::SUCCESS,
            // A closed pipe (`| head`) is not worth a panic.
            Err(_) => ExitCode::FAILURE,
        },
        Err(error) => {
            eprintln!("switchblade: {error}");
            ExitCode::FAILURE
        }
    }
}

fn config(args: &ConfigArgs) -> Result<String, String> {
    let descriptor_set = compile(&args.protos, &args.includes)?;
    let plugin = plugin_config(args, &descriptor_set)?;
    let text = serde_json::to_string_pretty(&plugin).map_err(|error| error.to_string())?;
    // The filter's own checks, so a configuration printed here is one Envoy will accept.
    Server::from_config_bytes(text.as_bytes())
        .map_err(|error| format!("the configuration would be refused: {error}"))?;
    Ok(match args.format {
        Format::Json => text,
        Format::Envoy => envoy_filters(&text, &args.wasm),
        Format::Ecds => ecds_resource(&text, &args.wasm),
    })
}

fn compile(protos: &[PathBuf], includes: &[PathBuf]) -> Result<Vec<u8>, String> {
    let mut compiler = protox::Compiler::new(includes).map_err(|error| error.to_string())?;
    compiler.include_source_info(true).include_imports(true);
    compiler.open_files(protos).map_err(|error| error.to_string())?;
    let mut set = compiler.file_descriptor_set();
    set.file.iter_mut().for_each(keep_only_comments);
    Ok(set.encode_to_vec())
}

/// The filter reads one thing from source info: the comments, which become descriptions. The
/// spans of every element, commented or not, are most of a set's size, and every Wasm VM
/// would hold them decoded (about 13 MB for 2,400 messages; see test-harness/BENCHMARKS.md).
fn keep_only_comments(file: &mut FileDescriptorProto) {
    if let Some(info) = &mut file.source_code_info {
        info.location
            .retain(|location| location.leading_comments.is_some() || location.trailing_comments.is_some());
        for location in &mut info.location {
            location.span.clear();
            location.leading_detached_comments.clear();
        }
    }
}

fn plugin_config(args: &ConfigArgs, descriptor_set: &[u8]) -> Result<Value, String> {
    let mut services = Map::new();
    for (service, cluster) in &args.services {
        let selected: Vec<&String> = args
            .methods
            .iter()
            .filter(|selector| parse_selector(selector).is_some_and(|(owner, _)| owner == service))
            .collect();
        let entry = if selected.is_empty() {
            json!({"cluster": cluster})
        } else {
            json!({"cluster": cluster, "expose": "selected", "methods": selected})
        };
        services.insert(service.clone(), entry);
    }
    if let Some(orphan) = args.methods.iter().find(|selector| {
        !args
            .services
            .iter()
            .any(|(service, _)| parse_selector(selector).is_some_and(|(owner, _)| owner == service))
    }) {
        return Err(format!(
            "--method {orphan}: not a method of any --service (write package.Service/Method)"
        ));
    }
    let mut config = Map::new();
    config.insert(
        "descriptor_set".into(),
        json!(base64::engine::general_purpose::STANDARD.encode(descriptor_set)),
    );
    config.insert("services".into(), Value::Object(services));
    if !args.forward_headers.is_empty() {
        config.insert("forward_headers".into(), json!(args.forward_headers));
    }
    Ok(Value::Object(config))
}

/// The Wasm filter's `typed_config`, each line indented by `indent` spaces.
fn wasm_typed_config(config_json: &str, wasm: &str, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut text = String::new();
    let lines = [
        "\"@type\": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm".to_owned(),
        "config:".to_owned(),
        "  name: switchblade".to_owned(),
        "  root_id: switchblade".to_owned(),
        "  vm_config:".to_owned(),
        "    vm_id: switchblade".to_owned(),
        "    runtime: envoy.wasm.runtime.v8".to_owned(),
        "    code:".to_owned(),
        "      local:".to_owned(),
        format!("        filename: {wasm}"),
        "  configuration:".to_owned(),
        "    \"@type\": type.googleapis.com/google.protobuf.StringValue".to_owned(),
        "    value: |".to_owned(),
    ];
    for line in &lines {
        text.push_str(&format!("{pad}{line}\n"));
    }
    // The JSON is the block scalar's content, indented under `value: |`.
    for line in config_json.lines() {
        text.push_str(&format!("{pad}      {line}\n"));
    }
    text
}

/// An ECDS resource file: what a filter with `config_discovery` and a `path_config_source`
/// reads. Replacing the file (write, then rename over it) hot-reloads the configuration.
fn ecds_resource(config_json: &str, wasm: &str) -> String {
    format!(
        "# ECDS resource for the switchblade filter. Write it beside the watched file, then rename it\n\
         # over that file: Envoy swaps the configuration without a restart.\n\
         resources:\n\
         - \"@type\": type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig\n  \
         name: switchblade\n  \
         typed_config:\n{}",
        wasm_typed_config(config_json, wasm, 4)
    )
}

/// The two HTTP filters Switchblade needs, with the configuration inlined, then the bootstrap's
/// tag extraction for the filter's stats.
fn envoy_filters(config_json: &str, wasm: &str) -> String {
    let filters = format!(
        "# Paste under the HTTP connection manager's http_filters, before the router, and enable\n\
         # the buffer filter on the MCP route (typed_per_filter_config; see the README).\n\
         - name: switchblade\n  \
         typed_config:\n{}\
         - name: envoy.filters.http.buffer\n  \
         disabled: true\n  \
         typed_config:\n    \
         \"@type\": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer\n    \
         max_request_bytes: 1048576",
        wasm_typed_config(config_json, wasm, 4)
    );
    format!(
        "{filters}\n\n\
         # And at the top level of the bootstrap: Envoy's tag extraction, which turns the labels\n\
         # the filter writes into its stat names back into labels (see the README's Observability).\n\
         {}",
        stats_config()
    )
}

/// The bootstrap's `stats_config`: one tag extraction rule per label of the filter's stats.
/// Single-quoted YAML keeps each regex's backslashes as they are.
fn stats_config() -> String {
    let mut text = "stats_config:\n  stats_tags:".to_owned();
    for (tag, regex) in tag_extraction_rules() {
        text.push_str(&format!("\n  - tag_name: {tag}\n    regex: '{regex}'"));
    }
    text
}

/// One line per configuration found, with its tool count; the first file with a configuration
/// the filter would refuse (or none at all) is an error.
fn check(files: &[PathBuf]) -> Result<String, String> {
    let mut report = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(path).map_err(|error| format!("{}: {error}", path.display()))?;
        let found = manifests::embedded_configs(&text).map_err(|error| format!("{}: {error}", path.display()))?;
        if found.is_empty() {
            return Err(format!("{}: no Switchblade plugin configuration found", path.display()));
        }
        for embedded in &found {
            let tools = manifests::check(embedded).map_err(|error| {
                format!(
                    "{}: {}: invalid plugin configuration: {error}",
                    path.display(),
                    embedded.place
                )
            })?;
            report.push(format!("{}: {}: {tools} tools", path.display(), embedded.place));
        }
    }
    Ok(report.join("\n"))
}

fn tools(path: &PathBuf) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|error| format!("{}: {error}", path.display()))?;
    let server = Server::from_config_bytes(&bytes).map_err(|error| format!("invalid plugin configuration: {error}"))?;
    let tools: Vec<&Value> = server.catalog().tools().map(|tool| &tool.definition).collect();
    serde_json::to_string_pretty(&json!({ "tools": tools })).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users_args(format: Format) -> ConfigArgs {
        ConfigArgs {
            protos: vec!["demo/users/v1/users.proto".into()],
            includes: vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../proto")],
            services: vec![("demo.users.v1.UserService".into(), "users".into())],
            methods: vec!["demo.users.v1.UserService/GetUser".into()],
            forward_headers: vec!["authorization".into()],
            format,
            wasm: "x.wasm".into(),
        }
    }

    #[test]
    fn services_are_written_service_equals_cluster() {
        assert_eq!(parse_service("a.B=c"), Ok(("a.B".to_owned(), "c".to_owned())));
        assert!(parse_service("a.B").is_err());
        assert!(parse_service("=c").is_err());
    }

    #[test]
    fn protos_become_a_configuration_the_filter_accepts() {
        let value: Value = serde_json::from_str(&config(&users_args(Format::Json)).unwrap()).unwrap();
        assert_eq!(value["services"]["demo.users.v1.UserService"]["expose"], "selected");
        assert_eq!(value["forward_headers"], json!(["authorization"]));
        let orphan = ConfigArgs {
            methods: vec!["other.Svc/M".into()],
            ..users_args(Format::Json)
        };
        assert!(config(&orphan)
            .unwrap_err()
            .contains("--method other.Svc/M: not a method of any --service"));
    }

    #[test]
    fn source_info_keeps_the_comments_only() {
        let args = users_args(Format::Json);
        let set =
            prost_types::FileDescriptorSet::decode(compile(&args.protos, &args.includes).unwrap().as_slice()).unwrap();
        let users = set
            .file
            .iter()
            .find(|file| file.name() == "demo/users/v1/users.proto")
            .unwrap();
        let locations = &users.source_code_info.as_ref().unwrap().location;
        assert!(locations.len() > 10, "the comments are kept");
        assert!(locations
            .iter()
            .all(|location| location.span.is_empty() && location.leading_detached_comments.is_empty()));
        assert!(locations
            .iter()
            .all(|location| location.leading_comments.is_some() || location.trailing_comments.is_some()));
        // And they still describe the tools.
        let server = Server::from_config_bytes(config(&args).unwrap().as_bytes()).unwrap();
        let tool = server.catalog().get("UserService_GetUser").unwrap();
        assert!(tool.definition["description"]
            .as_str()
            .is_some_and(|text| !text.is_empty()));
    }

    #[test]
    fn ecds_and_envoy_formats_embed_the_configuration() {
        let ecds = config(&users_args(Format::Ecds)).unwrap();
        assert!(ecds.contains("name: switchblade\n  typed_config:\n    \"@type\": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm"));
        assert!(ecds.contains("            filename: x.wasm\n"));
        assert!(ecds.contains("          \"descriptor_set\": "));
        let envoy = config(&users_args(Format::Envoy)).unwrap();
        assert!(envoy.contains("- name: envoy.filters.http.buffer\n  disabled: true"));
        assert!(envoy.contains(
            "stats_config:\n  stats_tags:\n  - tag_name: tool\n    regex: '^(?:wasmcustom\\.)?switchblade\\."
        ));
    }
}

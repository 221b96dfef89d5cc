//! `switchblade`: turns your `.proto` files (or a descriptor set that buf or protoc built, or a
//! live server's gRPC reflection) into a Switchblade plugin configuration, with no `protoc` and
//! no rebuild of the filter, and shows the tools the filter would serve.

mod descriptor_sets;
mod manifests;
mod reflection;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use base64::Engine;
use clap::{Parser, Subcommand, ValueEnum};
use protox::file::{ChainFileResolver, GoogleFileResolver, IncludeFileResolver};
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
    /// Print the plugin configuration that exposes services described by .proto files, a
    /// descriptor set (--descriptor-set) or a server's gRPC reflection (--reflect).
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
#[command(group = clap::ArgGroup::new("source").required(true).args(["protos", "descriptor_set", "reflect"]))]
struct ConfigArgs {
    /// The .proto files that define the services (relative to an include directory).
    protos: Vec<PathBuf>,
    /// Directories to find .proto files and their imports in.
    #[arg(short = 'I', long = "include", default_value = ".", conflicts_with_all = ["descriptor_set", "reflect"])]
    includes: Vec<PathBuf>,
    /// Instead of .proto files: a binary FileDescriptorSet with its imports, as `buf build -o
    /// set.binpb` or `protoc --include_imports --descriptor_set_out=set.pb` writes it (the
    /// well-known google/protobuf imports it lacks are filled in).
    #[arg(long = "descriptor-set", value_name = "FILE")]
    descriptor_set: Option<PathBuf>,
    /// Instead of .proto files: ask the gRPC server at HOST:PORT for the services' descriptors
    /// (gRPC server reflection, v1 or v1alpha).
    #[arg(long, value_name = "HOST:PORT")]
    reflect: Option<String>,
    /// Reach the --reflect server over TLS, trusting the system's root certificates.
    #[arg(long = "reflect-tls", requires = "reflect", conflicts_with_all = ["protos", "descriptor_set"])]
    reflect_tls: bool,
    /// Reach the --reflect server over TLS, trusting this CA certificate (PEM) instead.
    #[arg(long = "reflect-ca", value_name = "FILE", requires = "reflect", conflicts_with_all = ["protos", "descriptor_set"])]
    reflect_ca: Option<PathBuf>,
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
    let descriptor_set = descriptors(args)?;
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

/// The encoded descriptor set of the configuration, from whichever source the arguments name.
fn descriptors(args: &ConfigArgs) -> Result<Vec<u8>, String> {
    if let Some(path) = &args.descriptor_set {
        return descriptor_sets::read(path);
    }
    if let Some(address) = &args.reflect {
        let target = reflection::Target {
            address: address.clone(),
            tls: args.reflect_tls,
            ca: args.reflect_ca.clone(),
        };
        let services: Vec<String> = args.services.iter().map(|(service, _)| service.clone()).collect();
        return reflection::fetch(&target, &services).and_then(descriptor_sets::encode);
    }
    compile(&args.protos, &args.includes)
}

/// The .proto route: the include paths, then Switchblade's `buf/validate/validate.proto`, then
/// the well-known files.
fn compile(protos: &[PathBuf], includes: &[PathBuf]) -> Result<Vec<u8>, String> {
    let mut resolver = ChainFileResolver::new();
    for include in includes {
        resolver.add(IncludeFileResolver::new(include.clone()));
    }
    resolver.add(descriptor_sets::BundledFiles);
    resolver.add(GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler.include_source_info(true).include_imports(true);
    compiler.open_files(protos).map_err(|error| error.to_string())?;
    // Encoded by protox itself, which keeps custom options (its decoded set would not).
    let files = descriptor_sets::files_of_set(&compiler.encode_file_descriptor_set())?;
    descriptor_sets::encode(files)
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
    use descriptor_sets::File;
    use prost::Message;
    use std::path::Path;

    fn users_args(format: Format) -> ConfigArgs {
        ConfigArgs {
            protos: vec!["demo/users/v1/users.proto".into()],
            includes: vec![proto_dir()],
            descriptor_set: None,
            reflect: None,
            reflect_tls: false,
            reflect_ca: None,
            services: vec![("demo.users.v1.UserService".into(), "users".into())],
            methods: vec!["demo.users.v1.UserService/GetUser".into()],
            forward_headers: vec!["authorization".into()],
            format,
            wasm: "x.wasm".into(),
        }
    }

    fn proto_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../proto")
    }

    /// `bytes` in a file of this test run's own, for --descriptor-set.
    fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
        let path = std::env::temp_dir().join(format!("switchblade-cli-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// What protox writes for `files` (as `protoc --include_imports --include_source_info`
    /// would: every span and comment), the files of `drop` left out.
    fn protox_set(files: &[&str], drop: &[&str]) -> Vec<u8> {
        let mut set = protox::compile(files, [proto_dir()]).unwrap();
        set.file.retain(|file| !drop.contains(&file.name()));
        set.encode_to_vec()
    }

    fn set_args(service: &str, path: PathBuf) -> ConfigArgs {
        ConfigArgs {
            protos: vec![],
            includes: vec![],
            descriptor_set: Some(path),
            services: vec![(service.into(), "c".into())],
            methods: vec![],
            forward_headers: vec![],
            ..users_args(Format::Json)
        }
    }

    fn tool_list(config_json: &str) -> Vec<Value> {
        let server = Server::from_config_bytes(config_json.as_bytes()).unwrap();
        server.catalog().tools().map(|tool| tool.definition.clone()).collect()
    }

    #[test]
    fn a_descriptor_set_serves_the_tools_its_protos_do() {
        let catalog = "demo/catalog/v1/catalog.proto";
        let path = temp_file("catalog.binpb", &protox_set(&[catalog], &[]));
        let from_set = config(&set_args("demo.catalog.v1.CatalogService", path.clone())).unwrap();
        let from_protos = config(&ConfigArgs {
            protos: vec![catalog.into()],
            includes: vec![proto_dir()],
            descriptor_set: None,
            ..set_args("demo.catalog.v1.CatalogService", path.clone())
        })
        .unwrap();
        std::fs::remove_file(path).unwrap();
        assert_eq!(tool_list(&from_set), tool_list(&from_protos));
        assert!(!tool_list(&from_set).is_empty());
        // The spans are gone, as from .proto files.
        assert_eq!(from_set.len(), from_protos.len());
    }

    /// The kitchen sink's Echo takes `must` with `(google.api.field_behavior) = REQUIRED`: a
    /// custom option, which a set decoded into prost_types and encoded again would have lost.
    fn echo_required(config_json: &str) -> Value {
        let tools = tool_list(config_json);
        let echo = tools
            .iter()
            .find(|tool| tool["name"] == "KitchenSinkService_Echo")
            .unwrap();
        echo["inputSchema"]["required"].clone()
    }

    #[test]
    fn custom_options_survive_the_proto_route_and_a_descriptor_set() {
        let sink = "test/kitchensink/v1/kitchen_sink.proto";
        let service = "test.kitchensink.v1.KitchenSinkService";
        let mut compiler = protox::Compiler::new([proto_dir()]).unwrap();
        compiler
            .include_source_info(true)
            .include_imports(true)
            .open_files([sink])
            .unwrap();
        let path = temp_file("sink-options.binpb", &compiler.encode_file_descriptor_set());
        let from_set = config(&set_args(service, path.clone())).unwrap();
        std::fs::remove_file(path).unwrap();
        let from_protos = config(&ConfigArgs {
            protos: vec![sink.into()],
            includes: vec![proto_dir()],
            descriptor_set: None,
            ..set_args(service, PathBuf::new())
        })
        .unwrap();
        assert_eq!(echo_required(&from_protos), json!(["must"]));
        assert_eq!(echo_required(&from_set), json!(["must"]));
    }

    /// A user's .proto that imports `buf/validate/validate.proto`, in a directory of its own.
    const RULED_PROTO: &str = r#"syntax = "proto3";
package acme.shop.v1;
import "buf/validate/validate.proto";
service Shop { rpc Buy(BuyRequest) returns (BuyRequest); }
message BuyRequest {
  string sku = 1 [(buf.validate.field).string = {min_len: 3, pattern: "^[A-Z]+$"}];
  int32 count = 2 [(buf.validate.field).int32.gt = 0];
}
"#;

    /// A directory of this test run's own holding `shop.proto`.
    fn shop_dir(name: &str, source: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("switchblade-cli-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("shop.proto"), source).unwrap();
        dir
    }

    /// `switchblade config` of the shop in `dir`, with `dir` as the only include path.
    fn shop_config(dir: &Path) -> Result<String, String> {
        config(&ConfigArgs {
            protos: vec!["shop.proto".into()],
            includes: vec![dir.to_owned()],
            descriptor_set: None,
            ..set_args("acme.shop.v1.Shop", PathBuf::new())
        })
    }

    fn buy_schema(config_json: &str) -> Value {
        tool_list(config_json)
            .into_iter()
            .find(|tool| tool["name"] == "Shop_Buy")
            .unwrap()["inputSchema"]
            .clone()
    }

    #[test]
    fn buf_validate_imports_need_no_extra_step() {
        let dir = shop_dir("ruled", RULED_PROTO);
        // The .proto route: no include path holds buf/validate/validate.proto.
        let from_protos = shop_config(&dir).unwrap();
        let schema = buy_schema(&from_protos);
        assert_eq!(schema["properties"]["sku"]["minLength"], 3);
        assert_eq!(schema["properties"]["count"]["exclusiveMinimum"], 0);
        // A set that imports it without carrying it (as `buf build --exclude-imports` writes).
        let mut compiler = protox::Compiler::new([dir.clone(), proto_dir()]).unwrap();
        compiler.include_imports(true).open_files(["shop.proto"]).unwrap();
        // Encoded by protox, byte for byte: a decoded set would have lost the options.
        let whole = compiler.encode_file_descriptor_set();
        let files = switchblade_core::descriptors::set_files(&whole).unwrap();
        let shop = files
            .into_iter()
            .filter(|file| File::decode(file.to_vec()).unwrap().name() == "shop.proto");
        let path = temp_file("shop.binpb", &switchblade_core::descriptors::encode_set(shop));
        let from_set = config(&set_args("acme.shop.v1.Shop", path.clone())).unwrap();
        std::fs::remove_file(path).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
        assert_eq!(buy_schema(&from_set), schema);
    }

    #[test]
    /// `switchblade config` refuses them as the filter would, naming the field.
    fn rules_that_cannot_be_enforced_as_written_are_refused_at_load() {
        let cases = [
            (
                r#"string sku = 1 [(buf.validate.field).string.pattern = "(unclosed"];"#,
                "the configuration would be refused: in the descriptor set: the buf.validate rules of field \
                 acme.shop.v1.BuyRequest.sku: the pattern `(unclosed` does not compile",
            ),
            (
                r#"int32 count = 1 [(buf.validate.field).string.min_len = 1];"#,
                "the configuration would be refused: in the descriptor set: the buf.validate rules of field \
                 acme.shop.v1.BuyRequest.count: `string` rules on a field that takes `int32` rules",
            ),
            (
                r#"repeated int32 counts = 1 [(buf.validate.field).int32.gt = 1];"#,
                "the configuration would be refused: in the descriptor set: the buf.validate rules of field \
                 acme.shop.v1.BuyRequest.counts: `int32` rules on a field that takes `repeated` rules",
            ),
        ];
        for (field, expected) in cases {
            let source = RULED_PROTO.replace(
                r#"  string sku = 1 [(buf.validate.field).string = {min_len: 3, pattern: "^[A-Z]+$"}];
  int32 count = 2 [(buf.validate.field).int32.gt = 0];"#,
                &format!("  {field}"),
            );
            let dir = shop_dir("bad-rules", &source);
            let error = shop_config(&dir).unwrap_err();
            std::fs::remove_dir_all(dir).unwrap();
            assert!(error.starts_with(expected), "{error}");
        }
    }

    #[test]
    fn a_descriptor_set_without_its_imports_names_what_it_lacks() {
        let sink = "test/kitchensink/v1/kitchen_sink.proto";
        let all = prost_types::FileDescriptorSet::decode(protox_set(&[sink], &[]).as_slice()).unwrap();
        let others: Vec<&str> = all
            .file
            .iter()
            .map(|file| file.name())
            .filter(|name| *name != sink)
            .collect();
        let path = temp_file("sink.binpb", &protox_set(&[sink], &others));
        let error = config(&set_args("test.kitchensink.v1.KitchenSinkService", path.clone())).unwrap_err();
        std::fs::remove_file(path).unwrap();
        assert!(
            error.contains(
                "the descriptor set lacks `google/api/field_behavior.proto`, imported by \
                 `test/kitchensink/v1/kitchen_sink.proto`, and `test/kitchensink/v1/legacy.proto`, imported by \
                 `test/kitchensink/v1/kitchen_sink.proto`; build it with --include_imports (protoc) or without \
                 --exclude-imports (buf)"
            ),
            "{error}"
        );
        // The well-known imports alone are filled in.
        let catalog = "demo/catalog/v1/catalog.proto";
        let path = temp_file(
            "bare-catalog.binpb",
            &protox_set(&[catalog], &["google/protobuf/timestamp.proto"]),
        );
        let filled = config(&set_args("demo.catalog.v1.CatalogService", path.clone()));
        std::fs::remove_file(path).unwrap();
        assert!(!tool_list(&filled.unwrap()).is_empty());
    }

    #[test]
    fn what_is_not_a_descriptor_set_is_refused() {
        let source = std::fs::read(proto_dir().join("demo/users/v1/users.proto")).unwrap();
        let path = temp_file("users.proto", &source);
        let error = config(&set_args("demo.users.v1.UserService", path.clone())).unwrap_err();
        std::fs::remove_file(path).unwrap();
        assert!(
            error.contains("users.proto: not a binary FileDescriptorSet ("),
            "{error}"
        );
        assert!(error.contains("write one with `buf build -o set.binpb`"), "{error}");
    }

    #[test]
    fn exactly_one_source_is_given() {
        let parse = |extra: &[&str]| {
            let args = [&["switchblade", "config", "--service", "a.B=c"], extra].concat();
            Cli::try_parse_from(args).map(|_| ())
        };
        assert!(parse(&["a.proto", "-I", "x"]).is_ok());
        assert!(parse(&["--descriptor-set", "s.pb"]).is_ok());
        assert!(parse(&["--reflect", "h:1", "--reflect-tls", "--reflect-ca", "ca.pem"]).is_ok());
        assert!(parse(&[]).is_err());
        assert!(parse(&["a.proto", "--reflect", "h:1"]).is_err());
        assert!(parse(&["--descriptor-set", "s.pb", "--reflect", "h:1"]).is_err());
        assert!(parse(&["--descriptor-set", "s.pb", "-I", "x"]).is_err());
        assert!(parse(&["a.proto", "--reflect-tls"]).is_err());
        assert!(parse(&["--descriptor-set", "s.pb", "--reflect-ca", "ca.pem"]).is_err());
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

//! The arguments of `switchblade config`, and how each flag's value is read: what the user
//! asks for, before anything is built from it.

use std::path::PathBuf;

use switchblade_core::config::parse_selector;

use crate::formats::Format;

/// Where the Wasm filter's build writes it, relative to the repository root.
pub const DEFAULT_WASM: &str = "target/wasm32-wasip1/release/switchblade_filter.wasm";
/// The image name of the README's `scripts/wasm-image --push` example, to be replaced.
pub const DEFAULT_IMAGE: &str = "registry.example.com/switchblade/filter:0.1.0";

#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("source").required(true).args(["protos", "descriptor_set", "reflect"]))]
pub struct ConfigArgs {
    /// The .proto files that define the services, relative to an include directory (or a path
    /// inside one).
    pub protos: Vec<PathBuf>,
    /// A directory to find .proto files and their imports in (repeatable). Google's common
    /// protos (google/api, google/rpc, google/type, google/longrunning), the well-known
    /// google/protobuf files and buf/validate/validate.proto are built in; a copy here wins.
    #[arg(short = 'I', long = "include", value_name = "DIR", default_value = ".", conflicts_with_all = ["descriptor_set", "reflect"])]
    pub includes: Vec<PathBuf>,
    /// Instead of .proto files: a binary FileDescriptorSet with its imports, as `buf build -o
    /// set.binpb` or `protoc --include_imports --include_source_info --descriptor_set_out=set.binpb`
    /// writes it (the built-in imports it lacks are filled in).
    #[arg(long = "descriptor-set", value_name = "FILE")]
    pub descriptor_set: Option<PathBuf>,
    /// Instead of .proto files: ask the gRPC server at HOST:PORT for the services' descriptors
    /// (gRPC server reflection, v1 or v1alpha).
    #[arg(long, value_name = "HOST:PORT")]
    pub reflect: Option<String>,
    /// Reach the --reflect server over TLS, trusting the system's root certificates.
    #[arg(long = "reflect-tls", requires = "reflect", conflicts_with_all = ["protos", "descriptor_set"])]
    pub reflect_tls: bool,
    /// Reach the --reflect server over TLS, trusting this CA certificate (PEM) instead.
    #[arg(long = "reflect-ca", value_name = "FILE", requires = "reflect", conflicts_with_all = ["protos", "descriptor_set"])]
    pub reflect_ca: Option<PathBuf>,
    /// A service to expose and the Envoy cluster that serves it: `package.Service=cluster`
    /// (repeatable, each service once).
    #[arg(long = "service", value_name = "SERVICE=CLUSTER", required = true, value_parser = parse_service)]
    pub services: Vec<(String, String)>,
    /// Expose only these methods (`package.Service/Method`, repeatable); a service without any
    /// is exposed whole (its streaming methods are skipped, and listed on standard error).
    #[arg(long = "method", value_name = "SERVICE/METHOD")]
    pub methods: Vec<String>,
    /// A tool's name instead of `Service_Method`: `package.Service/Method=name` (repeatable), for
    /// example when two services of different packages share a short name.
    #[arg(long = "tool-name", value_name = "SERVICE/METHOD=NAME", value_parser = parse_tool_name)]
    pub tool_names: Vec<(String, String)>,
    /// The calls' deadline in milliseconds: `MS` for every service, `package.Service=MS` for one
    /// service, `package.Service/Method=MS` for one tool (repeatable). Default 10000.
    #[arg(long = "timeout-ms", value_name = "[TARGET=]MS", value_parser = parse_timeout)]
    pub timeouts: Vec<Timeout>,
    /// Expose the streaming methods (server-streaming, client-streaming, bidirectional) of the
    /// services given whole as tools too (`streaming: true`); without it they are skipped.
    #[arg(long)]
    pub streaming: bool,
    /// gRPC metadata sent with every call of a service or one tool:
    /// `package.Service:NAME=VALUE` or `package.Service/Method:NAME=VALUE` (repeatable), like
    /// `containerd.services.version.v1.Version:containerd-namespace=default`. A tool's VALUE
    /// may take a field of the call's arguments, `{field}` (percent-encoded).
    #[arg(long = "metadata", value_name = "TARGET:NAME=VALUE", value_parser = parse_metadata)]
    pub metadata: Vec<Metadata>,
    /// How agents find the tools: `list` (tools/list shows every tool) or `search` (two tools
    /// whatever the catalog's size: a search in words, and a call of a tool it found).
    #[arg(long, value_enum, default_value_t = DiscoveryArg::List)]
    pub discovery: DiscoveryArg,
    /// A request header to forward upstream as gRPC metadata (repeatable; written in lowercase).
    #[arg(long = "forward-header", value_name = "NAME")]
    pub forward_headers: Vec<String>,
    /// A browser origin allowed to call (`https://chat.example.com`, repeatable): the
    /// configuration's `allowed_origins`, and in the bootstraps Envoy's CORS filter for the
    /// same origins, so that a browser-based MCP client's preflights are answered.
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    pub allowed_origins: Vec<String>,
    /// This MCP endpoint's URL as clients reach it (`https://mcp.example.com/mcp`): an
    /// authenticated configuration. Tokens must be issued for this resource, OAuth clients
    /// find the authorization server in its protected resource metadata (RFC 9728), and
    /// `--format envoy` and `module` put jwt_authn in front.
    #[arg(long, value_name = "URL", requires = "authorization_servers")]
    pub resource: Option<String>,
    /// The issuer URL of an authorization server that issues tokens for --resource
    /// (repeatable; jwt_authn verifies the first one's tokens).
    #[arg(long = "authorization-server", value_name = "ISSUER", requires = "resource")]
    pub authorization_servers: Vec<String>,
    /// Where jwt_authn fetches the first authorization server's signing keys (its `jwks_uri`);
    /// needed by `--format envoy` and `module` with --resource.
    #[arg(long = "jwks-uri", value_name = "URL", requires = "resource")]
    pub jwks_uri: Option<String>,
    /// A scope a service or a tool requires: `package.Service=SCOPE` or
    /// `package.Service/Method=SCOPE` (repeatable; a target given several scopes requires them
    /// all, and a method's replaces its service's). With none, any caller with a token for
    /// --resource may call every tool; with some, a tool no --scope names is closed.
    #[arg(long = "scope", value_name = "TARGET=SCOPE", requires = "resource", value_parser = parse_scope)]
    pub scopes: Vec<(String, String)>,
    /// gRPC metadata that tells the upstream on whose behalf a call is made:
    /// `NAME=CLAIM`, a claim of the verified token (repeatable), like `x-caller-sub=sub`.
    #[arg(long = "caller-metadata", value_name = "NAME=CLAIM", requires = "resource", value_parser = parse_caller_metadata)]
    pub caller_metadata: Vec<(String, String)>,
    /// What to print: the plugin configuration's JSON; a complete Envoy bootstrap with the Wasm
    /// filter (`envoy`) or the dynamic module (`module`) to run or paste from; an ECDS resource
    /// file for a filter with `config_discovery` (replace the file to hot-reload); Istio's
    /// WasmPlugin and EnvoyFilter; or Envoy Gateway's EnvoyExtensionPolicy, BackendTrafficPolicy
    /// and EnvoyProxy.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
    /// Where Envoy finds the .wasm (`envoy`, `ecds`), relative to Envoy's working directory or
    /// absolute.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_WASM)]
    pub wasm: String,
    /// The filter's OCI image (`istio`, `envoy-gateway`), as `scripts/wasm-image --push` pushed it.
    #[arg(long, value_name = "REFERENCE", default_value = DEFAULT_IMAGE)]
    pub image: String,
}

/// `--discovery`: the configuration's `discovery`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DiscoveryArg {
    List,
    Search,
}

/// A `--metadata`: one entry of a service's or a tool's `metadata`.
#[derive(Clone, Debug, PartialEq)]
pub struct Metadata {
    pub target: String,
    pub name: String,
    pub value: String,
}

/// A `--timeout-ms`: for every service, one service, or one tool.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeout {
    pub target: Option<String>,
    pub ms: u64,
}

pub fn parse_service(value: &str) -> Result<(String, String), String> {
    match value.split_once('=') {
        Some((service, cluster)) if !service.is_empty() && !cluster.is_empty() => {
            Ok((service.to_owned(), cluster.to_owned()))
        }
        _ => Err(format!("{value:?}: write package.Service=cluster")),
    }
}

fn parse_tool_name(value: &str) -> Result<(String, String), String> {
    match value.split_once('=') {
        Some((selector, name)) if parse_selector(selector).is_some() && !name.is_empty() => {
            Ok((selector.to_owned(), name.to_owned()))
        }
        _ => Err(format!("{value:?}: write package.Service/Method=name")),
    }
}

fn parse_scope(value: &str) -> Result<(String, String), String> {
    match value.split_once('=') {
        Some((target, scope)) if !target.is_empty() && !scope.is_empty() && !scope.contains(' ') => {
            Ok((target.to_owned(), scope.to_owned()))
        }
        _ => Err(format!(
            "{value:?}: write package.Service=SCOPE or package.Service/Method=SCOPE, one scope each"
        )),
    }
}

fn parse_caller_metadata(value: &str) -> Result<(String, String), String> {
    match value.split_once('=') {
        Some((name, claim)) if !name.is_empty() && !claim.is_empty() => Ok((name.to_owned(), claim.to_owned())),
        _ => Err(format!("{value:?}: write NAME=CLAIM, like x-caller-sub=sub")),
    }
}

pub(super) fn parse_metadata(value: &str) -> Result<Metadata, String> {
    let entry = value
        .split_once(':')
        .and_then(|(target, entry)| Some((target, entry.split_once('=')?)));
    match entry {
        Some((target, (name, metadata_value))) if !target.is_empty() && !name.is_empty() => Ok(Metadata {
            target: target.to_owned(),
            name: name.to_owned(),
            value: metadata_value.to_owned(),
        }),
        _ => Err(format!(
            "{value:?}: write package.Service:NAME=VALUE or package.Service/Method:NAME=VALUE"
        )),
    }
}

fn parse_timeout(value: &str) -> Result<Timeout, String> {
    let (target, ms) = match value.split_once('=') {
        Some((target, ms)) if !target.is_empty() => (Some(target.to_owned()), ms),
        Some(_) => {
            return Err(format!(
                "{value:?}: write MS, package.Service=MS or package.Service/Method=MS"
            ))
        }
        None => (None, value),
    };
    match ms.parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Timeout { target, ms }),
        _ => Err(format!("{value:?}: the milliseconds must be a whole number above 0")),
    }
}

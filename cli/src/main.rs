//! `switchblade`: turns your `.proto` files (or a descriptor set that buf or protoc built, or a
//! live server's gRPC reflection) into a Switchblade plugin configuration, with no `protoc` and
//! no rebuild of the filter, wired into Envoy, Istio or Envoy Gateway; checks the configurations
//! in deployment files; and shows the tools the filter would serve.

mod check;
mod config;
mod descriptor_sets;
mod formats;
mod manifests;
mod protos;
mod reference;
mod reflection;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde_json::{json, Value};
use switchblade_core::config::DiscoveryTools;
use switchblade_core::search::{Query, ToolSearch};
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
    /// descriptor set (--descriptor-set) or a server's gRPC reflection (--reflect), as JSON or
    /// wired for Envoy, the dynamic module, Istio or Envoy Gateway (--format).
    Config(Box<config::ConfigArgs>),
    /// Print the tools/list answer the filter would serve for a plugin configuration, or what
    /// tool search finds in it (--search).
    Tools {
        /// The plugin configuration (JSON), as printed by `switchblade config`; `-` reads
        /// standard input.
        config: String,
        /// Print instead the names of the tools the search tool answers this request in words
        /// with, best first (repeatable; whatever `discovery` says): how an agent finds
        /// the catalog's tools.
        #[arg(long = "search", value_name = "WORDS")]
        searches: Vec<String>,
        /// How many tools each --search answers with.
        #[arg(long, default_value_t = 5, requires = "searches", value_parser = clap::value_parser!(u8).range(1..=20))]
        limit: u8,
    },
    /// Check the plugin configurations inside deployment files with the filter's own
    /// validation: Envoy bootstraps (and the ECDS files they read), ECDS files, Istio
    /// WasmPlugins, Envoy Gateway EnvoyExtensionPolicies and bare plugin configurations. Each
    /// file is reported; the exit status is 1 if any configuration is refused.
    Check {
        /// YAML or JSON files (several documents each, as `kubectl apply -f` takes them); `-`
        /// reads standard input.
        #[arg(required = true)]
        files: Vec<String>,
    },
    /// Print the JSON Schema (2020-12) of the plugin configuration (docs/config.schema.json).
    Schema,
    /// Print the shell completion script for SHELL (for example `switchblade completions bash
    /// > /etc/bash_completion.d/switchblade`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), or write one per command into a directory.
    Man {
        /// Write switchblade.1 and switchblade-COMMAND.1 here instead (docs/man holds them).
        #[arg(long = "out-dir", value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}

/// What a command prints: text for standard output, lines for standard error (notes, or the
/// failures of a command that goes on past them), and whether it failed.
#[derive(Default)]
pub struct Output {
    pub stdout: String,
    pub notes: Vec<String>,
    pub failed: bool,
}

impl Output {
    pub fn text(stdout: String) -> Output {
        Output {
            stdout,
            ..Output::default()
        }
    }

    pub fn stdout_line(&mut self, line: &str) {
        if !self.stdout.is_empty() {
            self.stdout.push('\n');
        }
        self.stdout.push_str(line);
    }
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Config(args) => config::run(&args),
        Command::Tools {
            config,
            searches,
            limit,
        } => tools(&config, &searches, usize::from(limit)),
        Command::Check { files } => Ok(check::run(&files)),
        Command::Schema => reference::schema(),
        Command::Completions { shell } => reference::completions(shell),
        Command::Man { out_dir } => reference::man(out_dir.as_deref()),
    };
    let output = match result {
        Ok(output) => output,
        Err(error) => {
            eprintln!("switchblade: {error}");
            return ExitCode::FAILURE;
        }
    };
    if !output.stdout.is_empty() && writeln!(std::io::stdout().lock(), "{}", output.stdout).is_err() {
        // A closed pipe (`| head`) is not worth a panic.
        return ExitCode::FAILURE;
    }
    for note in &output.notes {
        eprintln!("switchblade: {note}");
    }
    if output.failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn tools(file: &str, searches: &[String], limit: usize) -> Result<Output, String> {
    let text = check::read(file).map_err(|error| format!("{file}: {error}"))?;
    let server = Server::from_config_bytes(text.as_bytes()).map_err(|error| {
        let hint = if looks_like_yaml(&text) {
            "; this looks like YAML (an Envoy, ECDS or Kubernetes file?): `switchblade check FILE` finds the \
             plugin configurations inside such files and checks them"
        } else {
            ""
        };
        format!("invalid plugin configuration: {error}{hint}")
    })?;
    if !searches.is_empty() {
        return search(&server, searches, limit);
    }
    let tools: Vec<Value> = server.catalog().tools().map(|tool| tool.definition_value()).collect();
    // Not part of `tools/list`: how each tool's method streams, for the person reading.
    let kinds: serde_json::Map<String, Value> = server
        .catalog()
        .tools()
        .map(|tool| (tool.name.clone(), json!(tool.kind.label())))
        .collect();
    serde_json::to_string_pretty(&json!({ "tools": tools, "kinds": kinds }))
        .map(Output::text)
        .map_err(|error| error.to_string())
}

/// What tool search finds in the server's catalog for each request: the names, best first.
fn search(server: &Server, searches: &[String], limit: usize) -> Result<Output, String> {
    let catalog = server.catalog();
    let index = ToolSearch::build(catalog, &DiscoveryTools::default());
    let mut answers = Vec::new();
    for text in searches {
        let arguments = json!({"query": text, "limit": limit});
        let query = Query::read(&arguments).map_err(|problem| format!("--search {text:?}: {problem}"))?;
        let found: Value =
            serde_json::from_str(&index.answer(catalog, &query, |_| true)).map_err(|error| error.to_string())?;
        let names: Vec<&Value> = found["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|tool| &tool["name"])
            .collect();
        answers.push(json!({"query": text, "tools": names}));
    }
    serde_json::to_string_pretty(&answers)
        .map(Output::text)
        .map_err(|error| error.to_string())
}

/// Not JSON, but a YAML mapping.
fn looks_like_yaml(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_err()
        && yaml_serde::from_str::<Value>(text).is_ok_and(|value| value.is_object())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

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
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn yaml_is_told_from_json() {
        assert!(looks_like_yaml("static_resources:\n  clusters: []\n"));
        assert!(!looks_like_yaml("{\"services\": {}}"));
        assert!(!looks_like_yaml("not: [valid"));
    }
}

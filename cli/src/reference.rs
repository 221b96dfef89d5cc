//! What the CLI says about itself and the configuration: `switchblade schema` (the plugin
//! configuration's JSON Schema, from the core's configuration types), `switchblade completions`
//! and `switchblade man` (from the command line's own definition).

use std::path::Path;

use clap::CommandFactory;

use crate::{Cli, Output};

/// The JSON Schema (2020-12) of the plugin configuration; `docs/config.schema.json` is this.
pub fn schema() -> Result<Output, String> {
    let schema = switchblade_core::config::json_schema();
    let text = serde_json::to_string_pretty(&schema).map_err(|error| error.to_string())?;
    Ok(Output::text(text))
}

/// The completion script of `shell`.
pub fn completions(shell: clap_complete::Shell) -> Result<Output, String> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "switchblade", &mut script);
    let text = String::from_utf8(script).map_err(|error| error.to_string())?;
    Ok(Output::text(text.trim_end().to_owned()))
}

/// The manual page of `switchblade` (standard output), or of it and each of its commands
/// (`switchblade-config.1`, …) written into `directory`.
pub fn man(directory: Option<&Path>) -> Result<Output, String> {
    let command = Cli::command();
    let Some(directory) = directory else {
        return Ok(Output::text(page(&command)?.trim_end().to_owned()));
    };
    std::fs::create_dir_all(directory).map_err(|error| format!("{}: {error}", directory.display()))?;
    let mut written = Vec::new();
    let commands =
        std::iter::once(command.clone()).chain(command.get_subcommands().filter(|sub| sub.get_name() != "help").map(
            |sub| {
                sub.clone()
                    .version(env!("CARGO_PKG_VERSION"))
                    .display_name(format!("switchblade-{}", sub.get_name()))
                    .bin_name(format!("switchblade {}", sub.get_name()))
            },
        ));
    for page_command in commands {
        let name = page_command.get_display_name().unwrap_or(page_command.get_name());
        let path = directory.join(format!("{name}.1"));
        std::fs::write(&path, page(&page_command)?).map_err(|error| format!("{}: {error}", path.display()))?;
        written.push(path.display().to_string());
    }
    Ok(Output::text(written.join("\n")))
}

fn page(command: &clap::Command) -> Result<String, String> {
    let mut roff = Vec::new();
    clap_mangen::Man::new(command.clone())
        .render(&mut roff)
        .map_err(|error| error.to_string())?;
    String::from_utf8(roff).map_err(|error| error.to_string())
}

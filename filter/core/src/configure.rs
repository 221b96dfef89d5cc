//! What a host does with its plugin configuration bytes: the server every request gets and,
//! when services are read through gRPC server reflection, the refresher that keeps it current.
//! Above both the server and live discovery, which builds servers of its own.

use std::sync::OnceLock;
use std::time::Duration;

use crate::config::{ConfigError, PluginConfig, ProcessKey};
use crate::descriptors::configured_pool;
use crate::quota::counters::{Expect, SharedCounters};
use crate::reflection::{Discovery, Refresher};
use crate::server::Server;

mod served;
pub use served::{Build, ServedServer, ServerRef};

/// A configuration, ready to serve.
#[derive(Debug)]
pub struct Configured {
    pub server: Server,
    /// Reads the services with `from_reflection`, if there are any (their tools are pending
    /// until it has read them).
    pub refresher: Option<Refresher>,
}

/// The server of the plugin configuration bytes, and the refresher of its reflected services.
/// Task ids are signed with `tasks.keys`; a configuration without keys has none to sign with
/// (a check, say): hosts that serve use [`configure_with_process_key`].
pub fn configure(bytes: &[u8]) -> Result<Configured, ConfigError> {
    configure_with_process_key(bytes, None)
}

/// [`configure`], with the key this process signs task ids with when `tasks.keys` is empty: one
/// per Envoy (every worker the same), so that a poll reaching another Envoy is refused, which
/// the log says when the configuration has task tools.
pub fn configure_with_process_key(bytes: &[u8], process_key: Option<[u8; 32]>) -> Result<Configured, ConfigError> {
    let mut config = PluginConfig::parse(bytes)?;
    config.tasks.process_key = process_key.map(ProcessKey);
    let pool = configured_pool(config.descriptor_set.as_deref())?;
    let server = Server::new(&config, &pool)?;
    if config.tasks.keys.is_empty() && server.catalog().tools().any(|tool| tool.task.is_some()) {
        log::warn!(
            "tasks.keys is not set: the task ids of this configuration's task tools are signed with a key of this Envoy's own, \
             and a poll that reaches another Envoy is refused; set tasks.keys to the same key on every Envoy (switchblade config writes one)"
        );
    }
    if let Some(quota) = server.quota() {
        log::info!("rate limits: {}", quota.describe_callers());
    }
    let refresher = Discovery::new(&config, &pool).map(Refresher::new);
    Ok(Configured { server, refresher })
}

/// The line a host logs once it serves `server`: its tools and path, how long the catalog took
/// to build (`took`, if the host could tell), and for a host that can route calls
/// (`host_routes`) how tool calls go.
pub fn serving_line(server: &Server, took: Option<Duration>, host_routes: bool) -> String {
    let mut notes = Vec::new();
    if let Some(took) = took {
        notes.push(format!("catalog built in {} ms", took.as_millis()));
    }
    if host_routes {
        notes.push(match server.routing().cluster_header.as_deref() {
            Some(header) => format!("tool calls through Envoy's router, cluster in header {header}"),
            None => "tool calls as HTTP callouts".to_owned(),
        });
    }
    let notes = match notes.is_empty() {
        true => String::new(),
        false => format!(" ({})", notes.join("; ")),
    };
    format!(
        "serving {} tools at {}{notes}",
        server.catalog().tool_count(),
        server.mcp_path()
    )
}

/// A fresh key for this Envoy: it signs task ids when `tasks.keys` is empty, and keys the rate
/// limits' table of callers. `None`, logged, where the system has no randomness to make one.
pub fn fresh_process_key() -> Option<[u8; 32]> {
    let mut key = [0; 32];
    match getrandom::fill(&mut key) {
        Ok(()) => Some(key),
        Err(error) => {
            log::error!("cannot make this Envoy's task key: {error}; set tasks.keys");
            None
        }
    }
}

/// The key of this process, made on first use and kept for every configuration after it (a
/// swapped configuration keeps honouring the ids of the one before), for a host whose workers
/// share the process's memory (the dynamic module). Each Wasm VM has memory of its own: the
/// Wasm filter's VMs agree on one key through shared data ([`shared_process_key`]).
pub fn process_key() -> Option<[u8; 32]> {
    static KEY: OnceLock<Option<[u8; 32]>> = OnceLock::new();
    *KEY.get_or_init(fresh_process_key)
}

/// The key of this Envoy for a host whose workers share no memory but a store (the Wasm
/// filter's VMs, through proxy-wasm's shared data, where a poll may reach any of them): the
/// first worker to look makes it and puts it there, every other reads it.
pub fn shared_process_key(store: &dyn SharedCounters) -> Option<[u8; 32]> {
    const KEY: &str = "tasks/process_key";
    let stored = || store.get(KEY).and_then(|(bytes, _)| bytes.try_into().ok());
    if let Some(key) = stored() {
        return Some(key);
    }
    let fresh = fresh_process_key()?;
    // Written only where no worker wrote one first; whoever won, its key is the one used.
    let _ = store.set(KEY, &fresh, Expect::Absent);
    stored().or_else(|| {
        log::warn!(
            "this Envoy's task key is not in the workers' shared data: this worker signs with a key of its own; set tasks.keys"
        );
        Some(fresh)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::counters::MemoryCounters;

    #[test]
    fn the_serving_line_says_what_the_host_does() {
        let users = r#"{"services": {"demo.users.v1.UserService": {"cluster": "users"}}}"#;
        let server = configure(users.as_bytes()).unwrap().server;
        let took = Some(Duration::from_millis(12));
        assert_eq!(serving_line(&server, None, false), "serving 1 tools at /mcp");
        assert_eq!(
            serving_line(&server, took, true),
            "serving 1 tools at /mcp (catalog built in 12 ms; tool calls as HTTP callouts)"
        );
    }

    #[test]
    fn workers_sharing_a_store_agree_on_one_key() {
        let store = MemoryCounters::default();
        let first = shared_process_key(&store);
        assert!(first.is_some());
        assert_eq!(shared_process_key(&store), first, "read, not made again");
        let elsewhere = MemoryCounters::default();
        assert_ne!(shared_process_key(&elsewhere), first, "another Envoy's own");
    }
}

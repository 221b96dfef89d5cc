//! What a host does with its plugin configuration bytes: the server every request gets and,
//! when services are read through gRPC server reflection, the refresher that keeps it current.
//! Above both the server and live discovery, which builds servers of its own.

use crate::config::{ConfigError, PluginConfig};
use crate::descriptors::configured_pool;
use crate::reflection::{Discovery, Refresher};
use crate::server::Server;

/// A configuration, ready to serve.
#[derive(Debug)]
pub struct Configured {
    pub server: Server,
    /// Reads the services with `from_reflection`, if there are any (their tools are pending
    /// until it has read them).
    pub refresher: Option<Refresher>,
}

/// The server of the plugin configuration bytes, and the refresher of its reflected services.
pub fn configure(bytes: &[u8]) -> Result<Configured, ConfigError> {
    let config = PluginConfig::parse(bytes)?;
    let pool = configured_pool(config.descriptor_set.as_deref())?;
    let server = Server::new(&config, &pool)?;
    let refresher = Discovery::new(&config, &pool).map(Refresher::new);
    Ok(Configured { server, refresher })
}

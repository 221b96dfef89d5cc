//! The server a configuration serves to new requests: fixed for its life, or swapped when live
//! reflection finds the services' API changed. Requests in flight keep the server they began
//! with. Shared by every thread of the host that may touch it, and safe to re-enter (see
//! [`SharedRefresher`]).

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use super::{configure_with_process_key, serving_line, Configured};
use crate::config::{ConfigError, TokenPayloadSource};
use crate::grpc::call_end::{CallPart, WholeCallResponse};
use crate::observe::Sample;
use crate::reflection::{ReflectionCall, Refreshed, SharedRefresher, REFRESH_TICK};
use crate::server::Server;

/// A configuration's server, and the refreshes that replace it.
#[derive(Debug)]
pub struct ServedServer {
    slot: Slot,
    live: Option<SharedRefresher>,
}

#[derive(Debug)]
enum Slot {
    Fixed(Arc<Server>),
    Live(RwLock<Arc<Server>>),
}

/// The build that serves a configuration: what it can read decides what the configuration may
/// ask of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Build {
    ProxyWasm,
    /// Has a router for calls; reads no metadata object (Envoy 1.40's module ABI reads only
    /// top-level metadata values).
    DynamicModule,
}

/// A request's server: borrowed from a fixed slot (no count to keep per request), or a share of
/// the live one.
pub enum ServerRef<'a> {
    Fixed(&'a Server),
    Live(Arc<Server>),
}

impl std::ops::Deref for ServerRef<'_> {
    type Target = Server;

    fn deref(&self) -> &Server {
        match self {
            ServerRef::Fixed(server) => server,
            ServerRef::Live(server) => server,
        }
    }
}

impl From<Configured> for ServedServer {
    fn from(Configured { server, refresher }: Configured) -> Self {
        let server = Arc::new(server);
        ServedServer {
            slot: match refresher {
                Some(_) => Slot::Live(RwLock::new(server)),
                None => Slot::Fixed(server),
            },
            live: refresher.map(SharedRefresher::new),
        }
    }
}

impl ServedServer {
    /// The server of the plugin configuration `bytes` for `build` (task ids signed with
    /// `process_key` where `tasks.keys` is empty), logged as served; `now` is the host's clock,
    /// for how long the catalog took to build.
    pub fn load(
        bytes: &[u8],
        process_key: Option<[u8; 32]>,
        build: Build,
        now: impl Fn() -> Duration,
    ) -> Result<Self, ConfigError> {
        let started = now();
        let configured = configure_with_process_key(bytes, process_key)?;
        let took = now().saturating_sub(started);
        let source = configured.server.access().map(|policy| policy.source());
        if let (Build::DynamicModule, Some(TokenPayloadSource::Metadata { namespace, key })) = (build, source) {
            return Err(ConfigError(format!(
                "at `authorization.token_payload`: the dynamic module cannot read dynamic metadata `{namespace}` key `{key}`: \
                 Envoy 1.40's module ABI reads only top-level metadata strings, numbers and lists, and jwt_authn writes the payload as an object. \
                 Copy it into filter state with envoy.filters.http.set_filter_state before this filter \
                 (object_key \"switchblade.token_payload\", factory_key \"envoy.string\", format %DYNAMIC_METADATA({namespace}:{key})%) \
                 and set `token_payload` to {{\"filter_state\": \"switchblade.token_payload\"}}; see docs/authorization.md"
            )));
        }
        log::info!(
            "{}",
            serving_line(&configured.server, Some(took), build == Build::DynamicModule)
        );
        Ok(ServedServer::from(configured))
    }

    /// The server for a new request, borrowed where it is fixed.
    pub fn current(&self) -> ServerRef<'_> {
        match &self.slot {
            Slot::Fixed(server) => ServerRef::Fixed(server),
            Slot::Live(_) => ServerRef::Live(self.shared()),
        }
    }

    /// The server for a new request, as a share (for a host whose requests outlive a borrow).
    pub fn shared(&self) -> Arc<Server> {
        match &self.slot {
            Slot::Fixed(server) => Arc::clone(server),
            Slot::Live(slot) => Arc::clone(&slot.read().unwrap_or_else(PoisonError::into_inner)),
        }
    }

    /// How often the host's clock is to call [`Self::tick`]: only if the services are read
    /// through reflection.
    pub fn refresh_period(&self) -> Option<Duration> {
        self.live.as_ref().map(|_| REFRESH_TICK)
    }

    /// The clock ticked: a refresh starts if one is due (`start`: the host's way to start a
    /// call, its handle or why not). A refresh that ended comes back as the sample to count.
    pub fn tick(
        &self,
        now: Duration,
        start: impl FnMut(&ReflectionCall) -> Result<u64, String>,
    ) -> Option<Sample<'static>> {
        let refreshed = self.live.as_ref()?.tick(now, start)?;
        Some(self.refreshed(refreshed))
    }

    /// A part of the answer to the refresh's call under `call`.
    pub fn heard(&self, call: u64, part: CallPart<'_>) {
        if let Some(live) = &self.live {
            live.heard(call, part);
        }
    }

    /// The refresh's call under `call` has ended (`reset`: without a whole answer).
    pub fn ended(
        &self,
        call: u64,
        reset: bool,
        now: Duration,
        start: impl FnMut(&ReflectionCall) -> Result<u64, String>,
    ) -> Option<Sample<'static>> {
        let refreshed = self.live.as_ref()?.ended(call, reset, now, start)?;
        Some(self.refreshed(refreshed))
    }

    /// The refresh's call under `call` was answered whole, with a body of `body_size` bytes.
    pub fn answered(
        &self,
        call: u64,
        body_size: usize,
        read: impl FnOnce() -> WholeCallResponse,
        now: Duration,
        start: impl FnMut(&ReflectionCall) -> Result<u64, String>,
    ) -> Option<Sample<'static>> {
        let refreshed = self.live.as_ref()?.answered(call, body_size, read, now, start)?;
        Some(self.refreshed(refreshed))
    }

    /// A refresh ended: it is logged, and its server served if the API changed.
    fn refreshed(&self, refreshed: Refreshed) -> Sample<'static> {
        let sample = refreshed.sample();
        refreshed.log(self.shared().catalog().tool_count());
        if let (Refreshed::Changed { server, .. }, Slot::Live(slot)) = (refreshed, &self.slot) {
            *slot.write().unwrap_or_else(PoisonError::into_inner) = Arc::from(server);
        }
        sample
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configure::configure;

    const USERS: &str = r#"{"services": {"demo.users.v1.UserService": {"cluster": "users"}}}"#;

    #[test]
    fn a_configuration_without_reflection_serves_one_server_borrowed() {
        let served = ServedServer::from(configure(USERS.as_bytes()).unwrap());
        assert!(matches!(served.current(), ServerRef::Fixed(_)));
        assert!(Arc::ptr_eq(&served.shared(), &served.shared()));
        assert_eq!(served.refresh_period(), None);
        let never = |_: &ReflectionCall| -> Result<u64, String> { panic!("no refresh to start") };
        assert!(served.tick(Duration::from_secs(3600), never).is_none());
    }

    #[test]
    fn the_module_refuses_a_token_payload_in_metadata() {
        let jwt = r#"{"services": {"demo.users.v1.UserService": {"cluster": "users"}},
            "authorization": {"token_payload": {"metadata": {"namespace": "envoy.filters.http.jwt_authn", "key": "jwt_payload"}},
                              "claim": "scope", "rules": {"demo.users.v1.UserService": ["users:read"]}}}"#;
        let clock = || Duration::ZERO;
        assert!(ServedServer::load(jwt.as_bytes(), None, Build::ProxyWasm, clock).is_ok());
        let refused = ServedServer::load(jwt.as_bytes(), None, Build::DynamicModule, clock).unwrap_err();
        assert!(refused.0.starts_with(
            "at `authorization.token_payload`: the dynamic module cannot read dynamic metadata `envoy.filters.http.jwt_authn` key `jwt_payload`"
        ), "{refused}");
    }

    #[test]
    fn a_refresh_that_cannot_call_keeps_the_server_and_is_counted_failed() {
        let reflected = r#"{"services": {"demo.users.v1.UserService": {"cluster": "users", "from_reflection": true}}}"#;
        let served = ServedServer::from(configure(reflected.as_bytes()).unwrap());
        assert_eq!(served.refresh_period(), Some(REFRESH_TICK));
        let before = served.shared();
        let sample = served.tick(Duration::ZERO, |_: &ReflectionCall| Err("no cluster".to_owned()));
        assert_eq!(sample.map(|sample| sample.labels.to_vec()), Some(vec!["failed"]));
        assert!(matches!(served.current(), ServerRef::Live(_)));
        assert!(Arc::ptr_eq(&served.shared(), &before), "the last good server stays");
    }
}

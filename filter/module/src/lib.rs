//! Switchblade as an Envoy 1.40 dynamic module: the Wasm filter's core, native. Envoy calls
//! the hooks in [`abi`], the only place with `unsafe`; [`config`] is one filter configuration,
//! shared by Envoy's workers; [`exchange`] adapts one request's hooks to the core, over the
//! [`host`] trait that the ABI implements and the tests fake. A crash here is Envoy's crash:
//! every hook catches panics, so the crate is built to unwind (`--profile module`).

// A panic that aborts cannot be caught: it would take Envoy down with it.
#[cfg(panic = "abort")]
compile_error!(
    "switchblade-module must unwind on panic, so that each hook can catch one: build it with `--profile module`, not `--release`"
);

mod abi;
mod clock;
mod config;
mod exchange;
mod host;

/// What Envoy's worker threads share must be `Send + Sync`: the core's server, and the
/// configuration around it.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<switchblade_core::host_api::Server>();
    shared::<config::Config>();
    shared::<switchblade_core::host_api::MemoryCounters>();
};

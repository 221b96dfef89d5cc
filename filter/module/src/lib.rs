//! Switchblade as an Envoy dynamic module: the same core as the Wasm filter, native, for
//! Envoy 1.40. Envoy loads `libswitchblade_module.so` through `envoy.filters.http.dynamic_modules`
//! and calls the hooks in [`abi`], the only place with `unsafe`. Above it, in safe Rust:
//! [`config`] is one filter configuration, shared by Envoy's workers; [`exchange`] adapts one
//! request's hooks to the core's exchange, over the small [`host`] trait that the ABI
//! implements and the tests fake.
//!
//! A module runs in Envoy's process with no sandbox: a crash is Envoy's crash. So the core it
//! runs is the one the Wasm build runs (fuzzed, and tested through a real Envoy), every hook
//! catches panics, and the crate is built with unwinding (`--profile module`) so that one can.

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

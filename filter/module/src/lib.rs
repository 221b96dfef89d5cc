//! Switchblade as an Envoy dynamic module: the same core as the Wasm filter, native, for
//! Envoy 1.40. Envoy loads `libswitchblade_module.so` through `envoy.filters.http.dynamic_modules`
//! and calls the hooks in [`abi`], the only place with `unsafe`; [`filter`] is the per-request
//! logic, in safe Rust.
//!
//! A module runs in Envoy's process with no sandbox: a crash is Envoy's crash. So the core it
//! runs is the one the Wasm build runs (fuzzed, and tested through a real Envoy), every hook
//! catches panics, and the crate is built with unwinding (`--profile module`) so that one can.

mod abi;
mod discovery;
mod filter;

/// The core's server is shared by Envoy's worker threads: it must be `Send + Sync`.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<switchblade_core::server::Server>();
};

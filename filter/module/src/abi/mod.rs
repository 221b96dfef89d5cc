//! Envoy's dynamic-module C ABI, as far as this module uses it, and every `unsafe` of the
//! crate: [`bindings`] declares the callbacks Envoy exports; [`stream`], [`configuration`] and
//! [`clocks`] wrap them in safe types (a stream, a configuration's handles, the ticker and the
//! wake-ups); [`hooks`] exports the functions Envoy calls and hands each to the safe code
//! above. Written from
//! `source/extensions/dynamic_modules/abi/abi.h` of Envoy's 1.40 cycle (ABI version "v0.2.0");
//! the symbols referenced here are all present in the 1.40.0 binary, which loads modules with
//! `RTLD_NOW`, so a missing one would refuse the module at load.
//!
//! Written by hand, not generated (bindgen): Envoy's Rust SDK and its generated bindings live in
//! Envoy's repository, not in a registry this project can build from, and bindgen would need
//! libclang and the header at build time. The module uses a few dozen of the header's several
//! hundred callbacks; each declaration here is checked against the header, and the tests load
//! the module into Envoy 1.40.0, which refuses it at load if a symbol is missing.
//!
//! Above this module the crate is safe Rust: the exported hooks turn Envoy's pointers into a
//! `Stream` (one HTTP stream, valid for one hook) and the filter's own state, and catch
//! panics, which must not cross the C boundary (one would take Envoy down).
//!
//! The rules the `unsafe` code relies on, from the ABI's documentation:
//! 1. Envoy-owned memory a callback hands out (`EnvoyBuffer`, `EnvoyHttpHeader`) is valid
//!    until the hook returns or the same map or buffer is changed; it is copied at once.
//! 2. Module memory passed in (`ModuleBuffer`, `ModuleHttpHeader`) is copied by Envoy during
//!    the call; it need only outlive the call.
//! 3. Arrays Envoy fills are sized by the matching `*_size` call in the same hook, just before.
//! 4. `HttpFilterEnvoyPtr` is valid from `on_http_filter_new` to `on_http_filter_destroy`, on
//!    the stream's worker thread only; it never leaves a hook.
//! 5. The pointer returned by `on_http_filter_config_new` is ours until
//!    `on_http_filter_config_destroy`, which Envoy calls after every filter made from it is
//!    destroyed; the one returned by `on_http_filter_new` likewise until
//!    `on_http_filter_destroy`. Both are `Box`es turned into pointers, and back exactly once.
//! 6. The hooks of one stream run on one thread, never at the same time, but may nest (a local
//!    reply runs other filters inline; starting a call may deliver its answer inline). The
//!    stream's state is borrowed only for the length of a hook's own work, never across a
//!    callback that can call back, except while starting calls: then the nested hooks find the
//!    state in use and keep what they heard for later (`RefCell::try_borrow_mut`, never a
//!    second `borrow_mut`).
//! 7. `HttpFilterConfigEnvoyPtr` is valid from `on_http_filter_config_new` to
//!    `on_http_filter_config_destroy`, on the main thread only: the configuration's own calls
//!    (streams, counters) are made from its hooks there (`config_new`, `config_scheduled`, the
//!    `config_http_stream_*` hooks). A config scheduler may be committed from any thread until
//!    it is deleted; the thread that commits is joined before it is.
//! 8. A stream's scheduler (`http_filter_scheduler_new`) may be committed from any thread until
//!    it is deleted, and holds the stream weakly (a commit after the stream is gone does
//!    nothing). It is committed only while it is filed in its configuration's wake-ups (a
//!    queued deadline, or a listener for a cancellation), under their lock, by the deadline
//!    thread or by the worker that heard the cancellation; the stream's worker takes it out,
//!    under that lock, before it deletes the scheduler. The deadline thread is joined when its
//!    configuration goes, after every stream made from it.

#![allow(unsafe_code)]

mod bindings;
mod clocks;
mod configuration;
mod hooks;
mod stream;

pub use clocks::{Ticker, Wakeups};
pub use configuration::ConfigHost;

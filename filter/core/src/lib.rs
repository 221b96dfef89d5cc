//! Switchblade's core: everything the filter does, with no host calls. It reads the plugin
//! configuration, builds the tool catalog and its JSON Schemas, answers MCP JSON-RPC in both
//! protocol eras, checks and transcodes tool arguments, and turns upstream gRPC replies into
//! tool results. A host (the proxy-wasm filter in `filter/wasm`, the dynamic module in
//! `filter/module`) moves bytes between Envoy and an [`exchange::Exchange`], and does what it
//! asks; it sees the core through [`host_api`] alone. Where to edit what: docs/architecture.md.

pub mod access;
pub mod cancel;
pub mod catalog;
pub mod config;
pub mod configure;
pub mod descriptors;
pub mod docs;
pub mod exchange;
pub mod grpc;
pub mod host_api;
pub mod http;
pub mod observe;
pub mod proto_json;
pub mod quota;
pub mod reflection;
pub mod search;
pub mod server;
pub mod session;
pub mod streams;
pub mod tasks;
pub mod upstream;

mod eras;
mod fingerprint;
mod jsonrpc;
mod tool_name;
mod tools_list;
mod unique_keys;
mod wrapped_root;

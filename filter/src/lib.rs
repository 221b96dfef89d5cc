//! Switchblade: an Envoy proxy-wasm filter that serves the methods of gRPC services as
//! Model Context Protocol tools.
//!
//! Everything but [`adapter`] is pure logic with no host calls, unit-tested natively. The
//! adapter (compiled for wasm32 only) moves bytes between Envoy and [`server::Server`].

pub mod catalog;
pub mod config;
pub mod descriptors;
pub mod docs;
pub mod explain;
pub mod grpc;
pub mod http;
pub mod jsonrpc;
pub mod protocol;
pub mod schema;
pub mod server;
pub mod status_details;
pub mod strict;
pub mod strict_json;
pub mod tools_list;
pub mod transcode;

#[cfg(target_arch = "wasm32")]
mod adapter;

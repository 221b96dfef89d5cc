//! Demo gRPC services for Switchblade's demo and tests: deterministic data, and a count of
//! every call received so tests can prove that refused input never reached the upstream.

pub mod catalog;
pub mod control;
pub mod exports;
pub mod inventory;
pub mod kitchen_sink;
pub mod lying_reflection;
pub mod ratelimit;
pub mod reflection;
pub mod rules;
pub mod serving;
pub mod streams;
pub mod users;

pub mod proto {
    /// The encoded `FileDescriptorSet` of every service above, with imports and comments: what
    /// the demo upstream's gRPC server reflection serves.
    pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/demo_descriptors.binpb"));

    pub mod catalog {
        tonic::include_proto!("demo.catalog.v1");
    }
    pub mod users {
        tonic::include_proto!("demo.users.v1");
    }
    pub mod inventory {
        tonic::include_proto!("acme.inventory.v1");
    }
    pub mod kitchen_sink {
        tonic::include_proto!("test.kitchensink.v1");
    }
    pub mod rules {
        tonic::include_proto!("test.rules.v1");
    }
    /// Envoy's rate limit service, as far as `ratelimit-peer` serves it.
    pub mod ratelimit {
        tonic::include_proto!("envoy.service.ratelimit.v3");
    }

    /// `demo.exports.v1` and the Google packages it uses, in modules that mirror their
    /// packages: the generated code names another package's messages by relative paths.
    pub mod packages {
        pub mod demo {
            pub mod exports {
                pub mod v1 {
                    tonic::include_proto!("demo.exports.v1");
                }
            }
        }
        pub mod google {
            pub mod longrunning {
                tonic::include_proto!("google.longrunning");
            }
            pub mod rpc {
                tonic::include_proto!("google.rpc");
            }
        }
    }
    pub use packages::demo::exports::v1 as exports;
    pub use packages::google::{longrunning, rpc};
}

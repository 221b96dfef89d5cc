//! The descriptor set compiled from `proto/` at build time and embedded in the filter.

use prost_reflect::{DescriptorError, DescriptorPool};

/// `FileDescriptorSet` bytes of every proto under `proto/`, with comments (source info).
pub static EMBEDDED_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/switchblade_descriptors.bin"));

/// Decodes the embedded descriptor set into a pool.
pub fn embedded_pool() -> Result<DescriptorPool, DescriptorError> {
    DescriptorPool::decode(EMBEDDED_DESCRIPTOR_SET)
}

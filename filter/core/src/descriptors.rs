//! The descriptor set compiled from `proto/` at build time and embedded in the filter.

use base64::Engine;
use prost_reflect::{DescriptorError, DescriptorPool};

use crate::config::ConfigError;

/// `FileDescriptorSet` bytes of every proto under `proto/`, with comments (source info).
pub static EMBEDDED_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/switchblade_descriptors.bin"));

/// Decodes the embedded descriptor set into a pool.
pub fn embedded_pool() -> Result<DescriptorPool, DescriptorError> {
    DescriptorPool::decode(EMBEDDED_DESCRIPTOR_SET)
}

/// The pool of a configuration: its own base64 `FileDescriptorSet`, or the embedded one.
pub fn configured_pool(descriptor_set: Option<&str>) -> Result<DescriptorPool, ConfigError> {
    let Some(encoded) = descriptor_set else {
        return embedded_pool()
            .map_err(|error| ConfigError(format!("the embedded descriptor set does not load: {error}")));
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|error| {
            ConfigError(format!(
                "at `descriptor_set`: not base64 ({error}); encode the FileDescriptorSet file with `base64 -w0`"
            ))
        })?;
    DescriptorPool::decode(bytes.as_slice()).map_err(|error| {
        ConfigError(format!(
            "at `descriptor_set`: not a usable FileDescriptorSet ({error}); build it with imports included (`switchblade config` or `protoc --include_imports`)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_descriptor_sets_are_decoded_and_checked() {
        let encoded = base64::engine::general_purpose::STANDARD.encode(EMBEDDED_DESCRIPTOR_SET);
        let pool = configured_pool(Some(&encoded)).unwrap();
        assert!(pool.get_service_by_name("demo.users.v1.UserService").is_some());
        assert!(configured_pool(None)
            .unwrap()
            .get_service_by_name("demo.users.v1.UserService")
            .is_some());
        let error = configured_pool(Some("***")).unwrap_err().0;
        assert!(error.starts_with("at `descriptor_set`: not base64"), "{error}");
        let garbage = base64::engine::general_purpose::STANDARD.encode([0xff, 0xff, 0xff]);
        let error = configured_pool(Some(&garbage)).unwrap_err().0;
        assert!(
            error.starts_with("at `descriptor_set`: not a usable FileDescriptorSet"),
            "{error}"
        );
    }
}

//! Google's common protos (`third_party/googleapis`: `google/api`, `google/rpc`, `google/type`,
//! `google/longrunning`), compiled at build time into a descriptor set of their own, apart from
//! the embedded one: each Wasm VM would hold them, so only builds that enable the `googleapis`
//! feature carry them (the CLI, to resolve the imports of users' protos).

use std::sync::OnceLock;

use prost::Message;
use prost_reflect::DescriptorPool;
use prost_types::FileDescriptorProto;

use super::set_files;

/// `FileDescriptorSet` bytes of every file under `third_party/googleapis`, with their comments
/// (source info) and the well-known `google/protobuf` files they import.
pub static GOOGLEAPIS_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/googleapis_descriptors.bin"));

/// The import paths the set provides, as prefixes.
pub const GOOGLEAPIS_DIRECTORIES: [&str; 4] = ["google/api/", "google/rpc/", "google/type/", "google/longrunning/"];

/// Whether `name` is an import path under one of [`GOOGLEAPIS_DIRECTORIES`] (whether or not the
/// set has such a file).
pub fn covers(name: &str) -> bool {
    GOOGLEAPIS_DIRECTORIES
        .iter()
        .any(|directory| name.starts_with(directory))
}

/// The encoded `FileDescriptorProto` of `name` (`google/api/annotations.proto`), byte for byte
/// as compiled, custom options included; `None` for a file the set does not provide.
pub fn file(name: &str) -> Option<&'static [u8]> {
    if !covers(name) {
        return None;
    }
    set_files(GOOGLEAPIS_DESCRIPTOR_SET)
        .ok()?
        .into_iter()
        .find(|bytes| FileDescriptorProto::decode(*bytes).is_ok_and(|file| file.name() == name))
}

/// The set as a pool, built once, on first use.
pub fn pool() -> Result<&'static DescriptorPool, String> {
    static POOL: OnceLock<Result<DescriptorPool, String>> = OnceLock::new();
    POOL.get_or_init(|| DescriptorPool::decode(GOOGLEAPIS_DESCRIPTOR_SET).map_err(|error| error.to_string()))
        .as_ref()
        .map_err(Clone::clone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_protos_are_there_with_their_options_and_comments() {
        let pool = pool().unwrap();
        for message in [
            "google.longrunning.Operation",
            "google.rpc.Status",
            "google.type.Money",
            "google.api.HttpRule",
        ] {
            assert!(pool.get_message_by_name(message).is_some(), "{message}");
        }
        // google.longrunning's `operation_info` method option, and the comments.
        assert!(pool
            .get_extension_by_name("google.longrunning.operation_info")
            .is_some());
        let money = pool.get_message_by_name("google.type.Money").unwrap();
        let comments = money
            .parent_file()
            .file_descriptor_proto()
            .source_code_info
            .clone()
            .unwrap();
        assert!(comments.location.iter().any(|location| location
            .leading_comments
            .as_deref()
            .is_some_and(|text| text.contains("amount of money"))));
    }

    #[test]
    fn files_are_found_by_import_path() {
        let annotations = FileDescriptorProto::decode(file("google/api/annotations.proto").unwrap()).unwrap();
        assert_eq!(
            annotations.dependency,
            ["google/api/http.proto", "google/protobuf/descriptor.proto"]
        );
        assert!(file("google/longrunning/operations.proto").is_some());
        assert!(file("google/api/nope.proto").is_none());
        // The well-known files come with the set, but are not its to give.
        assert!(file("google/protobuf/any.proto").is_none());
        assert!(covers("google/type/date.proto") && !covers("google/cloud/x.proto"));
    }
}

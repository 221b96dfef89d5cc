//! The descriptor set compiled from `proto/` at build time and embedded in the filter.

use base64::Engine;
use prost::encoding::{self, DecodeContext, WireType};
use prost::Message;
use prost_reflect::{DescriptorError, DescriptorPool};
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorProto, SourceCodeInfo};

use crate::config::ConfigError;

#[cfg(feature = "googleapis")]
pub mod googleapis;

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
    let mut pool = DescriptorPool::new();
    add_set(&mut pool, &bytes).map_err(|error| {
        ConfigError(format!(
            "at `descriptor_set`: not a usable FileDescriptorSet ({error}); build it with imports included (`switchblade config` or `protoc --include_imports`)"
        ))
    })?;
    Ok(pool)
}

/// Adds the files of an encoded `FileDescriptorSet` to `pool`. Every set from outside the
/// filter (a configuration's, a reflection server's) goes through here.
pub fn add_set(pool: &mut DescriptorPool, set: &[u8]) -> Result<(), String> {
    for file in set_files(set)? {
        check_file(file)?;
    }
    pool.decode_file_descriptor_set(set).map_err(|error| error.to_string())
}

/// Refuses, before prost-reflect reads it, a file that prost-reflect 0.16.5 accepts and then
/// panics on (a panic kills the Wasm VM; both were found by the reflection fuzz target):
/// - a `syntax` neither proto2 nor proto3: it names the file in its error by an index it has
///   not filled yet. Editions (`"editions"`) are the real case.
/// - a message marked as a map entry without the key and value fields protoc writes: it
///   expects them wherever a map is read.
fn check_file(bytes: &[u8]) -> Result<(), String> {
    let file = FileDescriptorProto::decode(bytes).map_err(|error| format!("a file does not decode: {error}"))?;
    if let Some(syntax) = file
        .syntax
        .as_deref()
        .filter(|syntax| !matches!(*syntax, "proto2" | "proto3"))
    {
        return Err(format!(
            "`{}` declares syntax \"{syntax}\": only proto2 and proto3 descriptors are supported, not editions",
            file.name()
        ));
    }
    let mut messages: Vec<(String, &DescriptorProto)> = file
        .message_type
        .iter()
        .map(|message| (format!("{}.{}", file.package(), message.name()), message))
        .collect();
    while let Some((name, message)) = messages.pop() {
        if message.options.as_ref().and_then(|options| options.map_entry) == Some(true) && !is_map_entry(message) {
            return Err(format!(
                "`{}`: `{name}` is marked as a map entry, but its fields are not a map's (an optional key numbered 1 of an integer, bool or string type, and an optional value numbered 2)",
                file.name()
            ));
        }
        messages.extend(
            message
                .nested_type
                .iter()
                .map(|nested| (format!("{name}.{}", nested.name()), nested)),
        );
    }
    Ok(())
}

/// Whether a map entry's fields are those protoc writes for `map<K, V>`.
fn is_map_entry(entry: &DescriptorProto) -> bool {
    let field = |number| {
        entry
            .field
            .iter()
            .find(|field| field.number() == number && field.label() != Label::Repeated)
    };
    let key_type_allowed = |key: &FieldDescriptorProto| {
        !matches!(
            key.r#type(),
            Type::Double | Type::Float | Type::Bytes | Type::Enum | Type::Message | Type::Group
        )
    };
    field(1).is_some_and(key_type_allowed) && field(2).is_some()
}

/// `FileDescriptorSet.file` and `FileDescriptorProto.source_code_info`.
const SET_FILE: u32 = 1;
const FILE_SOURCE_CODE_INFO: u32 = 9;

/// The files of an encoded `FileDescriptorSet`, each its own encoded `FileDescriptorProto`,
/// byte for byte. Decoding into `prost_types` would drop every custom option
/// (`google.api.field_behavior`, `buf.validate`), which prost keeps nowhere.
pub fn set_files(set: &[u8]) -> Result<Vec<&[u8]>, String> {
    Ok(fields(set)?
        .into_iter()
        .filter(|field| field.tag == SET_FILE)
        .filter_map(|field| field.payload)
        .collect())
}

/// An encoded `FileDescriptorSet` of encoded files.
pub fn encode_set<'a>(files: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut set = Vec::new();
    for file in files {
        encoding::encode_key(SET_FILE, WireType::LengthDelimited, &mut set);
        encoding::encode_varint(file.len() as u64, &mut set);
        set.extend_from_slice(file);
    }
    set
}

/// An encoded file with only the comments of its source info, every other byte as it was.
/// The filter reads one thing from source info: the comments, which become descriptions. The
/// spans of every element, commented or not, are most of a set's size, and every Wasm VM
/// would hold them decoded (about 13 MB for 2,400 messages; see docs/benchmarks/scale-and-memory.md).
pub fn keep_only_comments(file: &[u8]) -> Result<Vec<u8>, String> {
    let mut kept = Vec::with_capacity(file.len());
    for field in fields(file)? {
        match (field.tag, field.payload) {
            (FILE_SOURCE_CODE_INFO, Some(payload)) => {
                let mut info = SourceCodeInfo::decode(payload).map_err(|error| error.to_string())?;
                info.location
                    .retain(|location| location.leading_comments.is_some() || location.trailing_comments.is_some());
                for location in &mut info.location {
                    location.span.clear();
                    location.leading_detached_comments.clear();
                }
                encoding::message::encode(FILE_SOURCE_CODE_INFO, &info, &mut kept);
            }
            _ => kept.extend_from_slice(field.bytes),
        }
    }
    Ok(kept)
}

/// Whether two encoded files are the same field for field, their source info (comments and
/// spans) aside: two servers built from one `.proto` agree on everything else, but seldom on
/// the comments kept.
pub fn same_but_for_source_info(file: &[u8], other: &[u8]) -> bool {
    let without_source_info = |file| {
        fields(file).map(|fields| {
            fields
                .into_iter()
                .filter(|field| field.tag != FILE_SOURCE_CODE_INFO)
                .map(|field| field.bytes)
                .collect::<Vec<_>>()
        })
    };
    matches!((without_source_info(file), without_source_info(other)), (Ok(one), Ok(other)) if one == other)
}

/// One field of an encoded message: its tag, its whole encoding, and its payload if it is
/// length-delimited.
struct Field<'a> {
    tag: u32,
    bytes: &'a [u8],
    payload: Option<&'a [u8]>,
}

fn fields(message: &[u8]) -> Result<Vec<Field<'_>>, String> {
    let mut fields = Vec::new();
    let mut rest = message;
    while !rest.is_empty() {
        let start = message.len() - rest.len();
        let (tag, wire_type) = encoding::decode_key(&mut rest).map_err(|error| error.to_string())?;
        let payload = if wire_type == WireType::LengthDelimited {
            let length = encoding::decode_varint(&mut rest).map_err(|error| error.to_string())?;
            let length = usize::try_from(length).unwrap_or(usize::MAX);
            let Some((payload, after)) = rest.split_at_checked(length) else {
                return Err("a field runs past the end of the message".to_owned());
            };
            rest = after;
            Some(payload)
        } else {
            encoding::skip_field(wire_type, tag, &mut rest, DecodeContext::default())
                .map_err(|error| error.to_string())?;
            None
        };
        let end = message.len() - rest.len();
        fields.push(Field {
            tag,
            bytes: &message[start..end],
            payload,
        });
    }
    Ok(fields)
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

    #[test]
    fn a_file_in_neither_proto2_nor_proto3_is_refused_without_a_panic() {
        // prost-reflect 0.16.5 panics on this set (found by the reflection fuzz target).
        let editions = prost_types::FileDescriptorProto {
            name: Some("edition.proto".to_owned()),
            syntax: Some("editions".to_owned()),
            ..Default::default()
        };
        let set = prost_types::FileDescriptorSet { file: vec![editions] }.encode_to_vec();
        let error = add_set(&mut DescriptorPool::new(), &set).unwrap_err();
        assert_eq!(
            error,
            "`edition.proto` declares syntax \"editions\": only proto2 and proto3 descriptors are supported, not editions"
        );
        let encoded = base64::engine::general_purpose::STANDARD.encode(&set);
        let error = configured_pool(Some(&encoded)).unwrap_err().0;
        assert!(error.contains("declares syntax \"editions\""), "{error}");
        // An empty syntax is not proto2's absent one: prost-reflect panics on it too.
        let empty = prost_types::FileDescriptorProto {
            name: Some("empty.proto".to_owned()),
            syntax: Some(String::new()),
            ..Default::default()
        };
        let set = prost_types::FileDescriptorSet { file: vec![empty] }.encode_to_vec();
        assert!(add_set(&mut DescriptorPool::new(), &set).is_err());
        // The syntaxes prost-reflect reads pass.
        for syntax in [None, Some("proto2"), Some("proto3")] {
            let file = prost_types::FileDescriptorProto {
                name: Some("plain.proto".to_owned()),
                syntax: syntax.map(str::to_owned),
                ..Default::default()
            };
            let set = prost_types::FileDescriptorSet { file: vec![file] }.encode_to_vec();
            add_set(&mut DescriptorPool::new(), &set).unwrap();
        }
    }

    #[test]
    fn a_map_entry_without_a_maps_fields_is_refused_without_a_panic() {
        use prost_types::{FieldDescriptorProto, MessageOptions};
        // prost-reflect 0.16.5 builds this pool, then panics when the map is read (found by the
        // reflection fuzz target, in the tool's schema).
        let field = |name: &str, number, r#type: Type, label: Label, type_name: Option<&str>| FieldDescriptorProto {
            name: Some(name.to_owned()),
            number: Some(number),
            r#type: Some(r#type as i32),
            label: Some(label as i32),
            type_name: type_name.map(str::to_owned),
            ..Default::default()
        };
        let set = |entry_fields: Vec<FieldDescriptorProto>| {
            let entry = DescriptorProto {
                name: Some("LabelsEntry".to_owned()),
                field: entry_fields,
                options: Some(MessageOptions {
                    map_entry: Some(true),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let message = DescriptorProto {
                name: Some("Item".to_owned()),
                field: vec![field(
                    "labels",
                    1,
                    Type::Message,
                    Label::Repeated,
                    Some(".shop.v1.Item.LabelsEntry"),
                )],
                nested_type: vec![entry],
                ..Default::default()
            };
            let file = FileDescriptorProto {
                name: Some("shop.proto".to_owned()),
                package: Some("shop.v1".to_owned()),
                syntax: Some("proto3".to_owned()),
                message_type: vec![message],
                ..Default::default()
            };
            prost_types::FileDescriptorSet { file: vec![file] }.encode_to_vec()
        };
        let key = field("key", 1, Type::String, Label::Optional, None);
        let value = field("value", 2, Type::Int32, Label::Optional, None);
        let refused = [
            vec![key.clone()],
            vec![value.clone()],
            vec![field("key", 1, Type::Double, Label::Optional, None), value.clone()],
            vec![field("key", 1, Type::String, Label::Repeated, None), value.clone()],
        ];
        for fields in refused {
            let error = add_set(&mut DescriptorPool::new(), &set(fields.clone())).unwrap_err();
            assert!(
                error.starts_with(
                    "`shop.proto`: `shop.v1.Item.LabelsEntry` is marked as a map entry, but its fields are not a map's"
                ),
                "{fields:?}: {error}"
            );
        }
        let mut pool = DescriptorPool::new();
        add_set(&mut pool, &set(vec![key, value])).unwrap();
        let labels = pool
            .get_message_by_name("shop.v1.Item")
            .unwrap()
            .get_field_by_name("labels")
            .unwrap();
        assert!(labels.is_map());
    }

    #[test]
    fn files_keep_their_custom_options_and_only_the_comments_of_their_source_info() {
        let files = set_files(EMBEDDED_DESCRIPTOR_SET).unwrap();
        let stripped: Vec<Vec<u8>> = files.iter().map(|file| keep_only_comments(file).unwrap()).collect();
        let set = encode_set(stripped.iter().map(Vec::as_slice));
        assert!(set.len() < EMBEDDED_DESCRIPTOR_SET.len());
        let pool = DescriptorPool::decode(set.as_slice()).unwrap();
        let must = pool
            .get_message_by_name("test.kitchensink.v1.Everything")
            .and_then(|message| message.get_field_by_name("must"))
            .unwrap();
        // google.api.field_behavior = REQUIRED is still there.
        let behavior = pool.get_extension_by_name("google.api.field_behavior").unwrap();
        assert!(must.options().has_extension(&behavior));
        // So are the comments.
        let service = pool.get_service_by_name("demo.users.v1.UserService").unwrap();
        assert!(!service
            .parent_file()
            .file_descriptor_proto()
            .source_code_info
            .as_ref()
            .unwrap()
            .location
            .is_empty());
        assert!(set_files(&[0x0a, 0x05, 1]).is_err());
    }
}

//! Descriptor sets from elsewhere than `.proto` sources: a `FileDescriptorSet` file (what
//! `buf build` and `protoc --descriptor_set_out` write), or the files a server's reflection
//! gives. Either must be closed under imports before the filter can load it.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use prost::Message;
use prost_types::{FileDescriptorProto, FileDescriptorSet};
use protox::file::{FileResolver, GoogleFileResolver};
use switchblade_core::descriptors::googleapis::{self, GOOGLEAPIS_DIRECTORIES};
use switchblade_core::descriptors::{encode_set, keep_only_comments, set_files, EMBEDDED_DESCRIPTOR_SET};

/// Switchblade's declaration of the `buf.validate` options (`proto/buf/validate/validate.proto`,
/// the same wire numbers as protovalidate's file), for sets and sources that import it without
/// carrying it. A copy the user provides is used first.
pub const VALIDATE_PROTO: &str = "buf/validate/validate.proto";
pub const VALIDATE_PROTO_SOURCE: &str = include_str!("../../proto/buf/validate/validate.proto");

/// The files the CLI has built in, for people: what an import can name without `-I`.
pub fn built_in_description() -> String {
    let directories: Vec<String> = ["google/protobuf/"]
        .into_iter()
        .chain(GOOGLEAPIS_DIRECTORIES)
        .map(|directory| format!("{directory}*"))
        .collect();
    format!("{}, {VALIDATE_PROTO}", directories.join(", "))
}

/// Resolves the files the CLI has built in, after the include paths (a copy on an include path
/// wins): the well-known `google/protobuf/*.proto`, Google's common protos
/// (`third_party/googleapis`: `google/api`, `google/rpc`, `google/type`, `google/longrunning`)
/// and `buf/validate/validate.proto`.
pub struct BuiltInFiles;

impl FileResolver for BuiltInFiles {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        if name == VALIDATE_PROTO {
            return protox::file::File::from_source(name, VALIDATE_PROTO_SOURCE);
        }
        if let Some(bytes) = googleapis::file(name) {
            // Decoded with its bytes kept: the custom options (`google.api.http`,
            // `google.api.field_behavior`) survive into the set the CLI writes.
            return protox::file::File::decode_file_descriptor_proto(bytes).map_err(protox::Error::new);
        }
        GoogleFileResolver::new().open_file(name)
    }
}

/// One file of a set: decoded, for its name and imports, and as it was encoded, for the rest.
/// Decoding drops custom options (`google.api.field_behavior`, `buf.validate`), which the
/// filter reads; the encoded bytes keep them.
#[derive(Debug)]
pub struct File {
    pub proto: FileDescriptorProto,
    pub bytes: Vec<u8>,
}

impl File {
    /// A file as encoded; `None` if it does not decode.
    pub fn decode(bytes: Vec<u8>) -> Result<File, prost::DecodeError> {
        let proto = FileDescriptorProto::decode(bytes.as_slice())?;
        Ok(File { proto, bytes })
    }

    pub fn name(&self) -> &str {
        self.proto.name()
    }
}

/// The files of an encoded set, each with its bytes.
pub fn files_of_set(set: &[u8]) -> Result<Vec<File>, String> {
    set_files(set)?
        .into_iter()
        .map(|bytes| File::decode(bytes.to_vec()).map_err(|error| error.to_string()))
        .collect()
}

/// How protoc writes a set that `--descriptor-set` takes: with the imports, and with the
/// comments, which become the tools' descriptions.
pub const PROTOC_COMMAND: &str =
    "protoc --include_imports --include_source_info --descriptor_set_out=set.binpb -I DIR FILE.proto";

/// Whether no file of the set that defines a service has comments: the tools would have no
/// descriptions (protoc leaves source info out unless told).
pub fn services_lack_comments(set: &[u8]) -> bool {
    FileDescriptorSet::decode(set).is_ok_and(|set| {
        set.file.iter().filter(|file| !file.service.is_empty()).all(|file| {
            file.source_code_info
                .as_ref()
                .is_none_or(|info| info.location.is_empty())
        })
    })
}

/// How to write a set that holds its imports, for the errors that find one that does not.
const WITH_IMPORTS: &str = "build it with --include_imports (protoc) or without --exclude-imports (buf)";

/// A `--descriptor-set` file, closed under imports (the built-in files it lacks, see
/// [`well_known`], are filled in), in import order, with only the comments of its source info:
/// the `descriptor_set` of a plugin configuration.
pub fn read(path: &Path) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(path).map_err(|error| format!("--descriptor-set {}: {error}", path.display()))?;
    let not_a_set = |why: String| {
        format!(
            "--descriptor-set {}: not a binary FileDescriptorSet ({why}); write one with `buf build -o set.binpb` \
             or `{PROTOC_COMMAND}`",
            path.display()
        )
    };
    decode(&bytes).map_err(not_a_set)?;
    let mut files = files_of_set(&bytes).map_err(not_a_set)?;
    loop {
        let missing = missing_imports(&files);
        if missing.is_empty() {
            break;
        }
        let (known, unknown): (Vec<_>, Vec<_>) = missing.into_iter().partition(|(name, _)| well_known(name).is_some());
        if !unknown.is_empty() {
            let lacks: Vec<String> = unknown
                .iter()
                .map(|(name, importer)| format!("`{name}`, imported by `{importer}`"))
                .collect();
            return Err(format!(
                "--descriptor-set {}: the descriptor set lacks {}; {WITH_IMPORTS}",
                path.display(),
                lacks.join(", and ")
            ));
        }
        files.extend(known.iter().filter_map(|(name, _)| well_known(name)));
    }
    encode(files)
}

/// The set in `bytes`, or why it is not one. Protobuf's wire format is not self-describing,
/// so this also checks what any real set has: files, each with a name.
fn decode(bytes: &[u8]) -> Result<FileDescriptorSet, String> {
    if bytes.is_empty() {
        return Err("the file is empty".into());
    }
    let text_hint = || {
        if std::str::from_utf8(bytes).is_ok() {
            "; it is text: a descriptor set is binary, and .proto files go without --descriptor-set"
        } else {
            ""
        }
    };
    let set = FileDescriptorSet::decode(bytes).map_err(|error| format!("{error}{}", text_hint()))?;
    if set.file.is_empty() {
        return Err(format!("it holds no files{}", text_hint()));
    }
    if set.file.iter().any(|file| file.name().is_empty()) {
        return Err(format!("it holds a file without a name{}", text_hint()));
    }
    Ok(set)
}

/// Each import that no file of `files` provides, once, with the first file that imports it.
pub fn missing_imports(files: &[File]) -> Vec<(String, String)> {
    let present: HashSet<&str> = files.iter().map(File::name).collect();
    let mut missing: Vec<(String, String)> = Vec::new();
    for file in files {
        for import in &file.proto.dependency {
            if !present.contains(import.as_str()) && !missing.iter().any(|(name, _)| name == import) {
                missing.push((import.clone(), file.name().to_owned()));
            }
        }
    }
    missing
}

/// A file the CLI has built in (see [`BuiltInFiles`]), for a set or a server's reflection that
/// imports it without carrying it: a well-known `google/protobuf/*.proto` file from protox's
/// copies (the ones the `.proto` route compiles against, without comments), one of Google's
/// common protos, or `buf/validate/validate.proto` from the filter's embedded set.
pub fn well_known(name: &str) -> Option<File> {
    if name == VALIDATE_PROTO {
        return set_files(EMBEDDED_DESCRIPTOR_SET)
            .ok()?
            .into_iter()
            .filter_map(|bytes| File::decode(bytes.to_vec()).ok())
            .find(|file| file.name() == VALIDATE_PROTO);
    }
    if let Some(bytes) = googleapis::file(name) {
        return File::decode(bytes.to_vec()).ok();
    }
    if !name.starts_with("google/protobuf/") {
        return None;
    }
    let proto = GoogleFileResolver::new()
        .open_file(name)
        .ok()?
        .file_descriptor_proto()
        .clone();
    // The well-known files carry no custom options: encoding the decoded form loses nothing.
    let bytes = proto.encode_to_vec();
    Some(File { proto, bytes })
}

/// The encoded set of `files` (closed under imports): each file once, after the files it
/// imports (as protoc writes a set), as encoded but with only the comments of its source info.
pub fn encode(files: Vec<File>) -> Result<Vec<u8>, String> {
    let kept = in_import_order(files)
        .iter()
        .map(|file| keep_only_comments(&file.bytes))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(encode_set(kept.iter().map(Vec::as_slice)))
}

/// Each file once (the first of a name), every file after its imports, otherwise in the
/// order given: a set already in order stays as it is.
fn in_import_order(files: Vec<File>) -> Vec<File> {
    let mut names = Vec::new();
    let mut by_name = HashMap::new();
    for file in files {
        if !by_name.contains_key(file.name()) {
            names.push(file.name().to_owned());
            by_name.insert(file.name().to_owned(), file);
        }
    }
    let mut ordered = Vec::with_capacity(names.len());
    for name in &names {
        place(name, &mut by_name, &mut ordered);
    }
    ordered
}

fn place(name: &str, unplaced: &mut HashMap<String, File>, ordered: &mut Vec<File>) {
    // Removed before its imports are placed, so an import cycle (which protobuf forbids, and
    // the filter refuses) cannot recurse for ever.
    let Some(file) = unplaced.remove(name) else {
        return;
    };
    for import in &file.proto.dependency {
        place(import, unplaced, ordered);
    }
    ordered.push(file);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, imports: &[&str]) -> File {
        let proto = FileDescriptorProto {
            name: Some(name.into()),
            dependency: imports.iter().map(|import| (*import).to_owned()).collect(),
            ..Default::default()
        };
        let bytes = proto.encode_to_vec();
        File { proto, bytes }
    }

    fn names(files: &[File]) -> Vec<&str> {
        files.iter().map(File::name).collect()
    }

    #[test]
    fn files_come_after_their_imports_each_once() {
        let files = vec![
            file("a.proto", &["b.proto", "c.proto"]),
            file("c.proto", &[]),
            file("b.proto", &["c.proto"]),
            file("a.proto", &[]),
        ];
        assert_eq!(names(&in_import_order(files)), ["c.proto", "b.proto", "a.proto"]);
        let ordered = vec![file("c.proto", &[]), file("b.proto", &["c.proto"])];
        assert_eq!(names(&in_import_order(ordered)), ["c.proto", "b.proto"]);
        // A cycle ends.
        let cycle = vec![file("x.proto", &["y.proto"]), file("y.proto", &["x.proto"])];
        assert_eq!(names(&in_import_order(cycle)), ["y.proto", "x.proto"]);
    }

    #[test]
    fn missing_imports_are_named_with_an_importer() {
        let files = vec![
            file("a.proto", &["b.proto", "google/protobuf/empty.proto"]),
            file("b.proto", &["google/protobuf/empty.proto"]),
        ];
        assert_eq!(
            missing_imports(&files),
            [("google/protobuf/empty.proto".to_owned(), "a.proto".to_owned())]
        );
        assert!(well_known("google/protobuf/empty.proto").is_some());
        assert!(well_known("google/protobuf/nope.proto").is_none());
        assert!(well_known("google/api/field_behavior.proto").is_some());
        assert!(well_known("google/longrunning/operations.proto").is_some());
        assert!(well_known("google/cloud/location/locations.proto").is_none());
        assert_eq!(well_known(VALIDATE_PROTO).unwrap().name(), VALIDATE_PROTO);
    }

    #[test]
    fn what_is_not_a_set_is_refused() {
        assert_eq!(decode(b"").unwrap_err(), "the file is empty");
        let text = decode(b"syntax = \"proto3\";\npackage a;\n").unwrap_err();
        assert!(
            text.ends_with("; it is text: a descriptor set is binary, and .proto files go without --descriptor-set"),
            "{text}"
        );
        // A lone FileDescriptorProto: its name (field 1) is no file.
        let lone = file("a.proto", &[]).bytes;
        assert!(decode(&lone).is_err());
        // An unknown field alone.
        assert!(decode(&[0x10, 0x01]).unwrap_err().starts_with("it holds no files"));
    }
}

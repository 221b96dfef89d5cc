//! Sets of file descriptors as reflection answers, through a refresh: files under the names of
//! well-known, configured and reflected files, real or made up, with import cycles, missing
//! imports, duplicate names and redeclared symbols, in any answer of any round. Checks that
//! nothing panics, and that a refresh that serves never serves a reflected copy of a file the
//! configuration or the filter supplies.
//!
//! The input is read a byte per choice (0 once it runs out), so that seeds can be written by
//! hand: the number of candidate files; each candidate (a real file of the embedded set, or
//! one made up: name, package, imports, messages and their fields, a service and its
//! methods); then, for each call the refresh makes, its answer frames, each an error or a
//! list of candidates.
#![no_main]

use std::collections::BTreeMap;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use prost::Message;
use prost_reflect::DescriptorPool;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{
    DescriptorProto, FieldDescriptorProto, FileDescriptorProto, MethodDescriptorProto, ServiceDescriptorProto,
};
use switchblade_core::config::PluginConfig;
use switchblade_core::descriptors::embedded_pool;
use switchblade_core::reflection::{Discovery, ReflectionCallEnd, Refreshed, Step};

/// Read through reflection: the catalog (cluster `c`) and the kitchen sink (cluster `k`);
/// served from the configuration: the users.
const CONFIG: &[u8] = br#"{"services":{
    "demo.catalog.v1.CatalogService":{"cluster":"c","from_reflection":true},
    "test.kitchensink.v1.KitchenSinkService":{"cluster":"k","from_reflection":true},
    "demo.users.v1.UserService":{"cluster":"u"}}}"#;
/// The embedded files reflection may supply for this configuration: the reflected services'
/// own, and what only they import. Every other embedded file is protected.
const REFLECTABLE: [&str; 4] = [
    "demo/catalog/v1/catalog.proto",
    "test/kitchensink/v1/kitchen_sink.proto",
    "test/kitchensink/v1/legacy.proto",
    "google/api/field_behavior.proto",
];
/// Names a candidate may take: protected ones, reflectable ones, and new ones.
const NAMES: [&str; 13] = [
    "google/protobuf/timestamp.proto",
    "buf/validate/validate.proto",
    "demo/users/v1/users.proto",
    "demo/catalog/v1/catalog.proto",
    "test/kitchensink/v1/kitchen_sink.proto",
    "test/kitchensink/v1/legacy.proto",
    "google/api/field_behavior.proto",
    "google/protobuf/descriptor.proto",
    "test/rules/v1/rules.proto",
    "a.proto",
    "b.proto",
    "google/protobuf/not_there.proto",
    "",
];
const PACKAGES: [&str; 6] = [
    "demo.catalog.v1",
    "google.protobuf",
    "demo.users.v1",
    "test.kitchensink.v1",
    "a",
    "",
];
const MESSAGES: [&str; 6] = ["Item", "Timestamp", "GetUserRequest", "User", "M", "SearchRequest"];
const SERVICES: [&str; 4] = ["CatalogService", "KitchenSinkService", "UserService", "S"];
const METHODS: [&str; 3] = ["GetItem", "Echo", "GetUser"];
const FIELDS: [&str; 4] = ["seconds", "nanos", "id", "user_id"];
const SCALARS: [Type; 4] = [Type::Int64, Type::Int32, Type::String, Type::Bool];
/// Calls a refresh may make here before the fuzzer stops answering.
const MAX_CALLS: usize = 32;

struct Setup {
    config: PluginConfig,
    pool: DescriptorPool,
    /// Every protected file, encoded as the filter holds it.
    protected: BTreeMap<String, Vec<u8>>,
}

thread_local! {
    static SETUP: Setup = {
        let pool = embedded_pool().expect("the embedded descriptors load");
        let protected = pool
            .files()
            .filter(|file| !REFLECTABLE.contains(&file.name()))
            .map(|file| (file.name().to_owned(), file.encode_to_vec()))
            .collect();
        Setup { config: PluginConfig::parse(CONFIG).expect("the fuzz configuration is valid"), pool, protected }
    };
}

/// The input, a byte per choice.
struct Choices<'a>(std::slice::Iter<'a, u8>);

impl Choices<'_> {
    fn byte(&mut self) -> u8 {
        self.0.next().copied().unwrap_or(0)
    }

    fn below(&mut self, count: usize) -> usize {
        usize::from(self.byte()) % count.max(1)
    }

    fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[self.below(from.len())]
    }
}

fn candidate(choices: &mut Choices<'_>, pool: &DescriptorPool) -> Vec<u8> {
    if choices.byte() % 4 == 0 {
        // A real file: the embedded one of a name, if it has one.
        let name = choices.pick(&NAMES);
        if let Some(file) = pool.get_file_by_name(name) {
            return file.encode_to_vec();
        }
    }
    let package = *choices.pick(&PACKAGES);
    let type_name = |choices: &mut Choices<'_>| format!(".{}.{}", choices.pick(&PACKAGES), choices.pick(&MESSAGES));
    let dependency = (0..choices.below(4))
        .map(|_| choices.pick(&NAMES).to_string())
        .collect();
    let message_type = (0..choices.below(3))
        .map(|_| DescriptorProto {
            name: Some(choices.pick(&MESSAGES).to_string()),
            field: (0..choices.below(3))
                .map(|_| {
                    let name = choices.pick(&FIELDS).to_string();
                    let number = 1 + choices.below(4) as i32;
                    let kind = choices.below(SCALARS.len() + 1);
                    let (r#type, type_name) = match SCALARS.get(kind) {
                        Some(scalar) => (*scalar, None),
                        None => (Type::Message, Some(type_name(choices))),
                    };
                    FieldDescriptorProto {
                        name: Some(name),
                        number: Some(number),
                        label: Some(Label::Optional.into()),
                        r#type: Some(r#type.into()),
                        type_name,
                        ..FieldDescriptorProto::default()
                    }
                })
                .collect(),
            ..DescriptorProto::default()
        })
        .collect();
    let service = (0..choices.below(2))
        .map(|_| ServiceDescriptorProto {
            name: Some(choices.pick(&SERVICES).to_string()),
            method: (0..choices.below(3))
                .map(|_| MethodDescriptorProto {
                    name: Some(choices.pick(&METHODS).to_string()),
                    input_type: Some(type_name(choices)),
                    output_type: Some(type_name(choices)),
                    ..MethodDescriptorProto::default()
                })
                .collect(),
            ..ServiceDescriptorProto::default()
        })
        .collect();
    FileDescriptorProto {
        name: Some(choices.pick(&NAMES).to_string()),
        package: Some(package.to_owned()),
        dependency,
        message_type,
        service,
        syntax: Some("proto3".into()),
        ..FileDescriptorProto::default()
    }
    .encode_to_vec()
}

/// `grpc.reflection.v1.ServerReflectionResponse` with `files`, or a NOT_FOUND error, framed.
fn frame(files: Option<&[&[u8]]>) -> Vec<u8> {
    let mut answer = Vec::new();
    match files {
        Some(files) => {
            let mut list = Vec::new();
            for file in files {
                prost::encoding::bytes::encode(1, &file.to_vec(), &mut list);
            }
            prost::encoding::bytes::encode(4, &list, &mut answer);
        }
        None => {
            let mut error = Vec::new();
            prost::encoding::int32::encode(1, &5, &mut error);
            prost::encoding::bytes::encode(7, &error, &mut answer);
        }
    }
    let mut framed = vec![0];
    framed.extend_from_slice(&u32::try_from(answer.len()).unwrap_or(u32::MAX).to_be_bytes());
    framed.extend_from_slice(&answer);
    framed
}

fuzz_target!(|data: &[u8]| {
    SETUP.with(|setup| {
        let Some(mut discovery) = Discovery::new(&setup.config, &setup.pool) else {
            return;
        };
        let mut choices = Choices(data.iter());
        let candidates: Vec<Vec<u8>> = (0..1 + choices.below(8))
            .map(|_| candidate(&mut choices, &setup.pool))
            .collect();
        let headers: [(&str, &[u8]); 1] = [(":status", b"200")];
        let trailers: [(&str, &[u8]); 1] = [("grpc-status", b"0")];
        let mut calls = discovery.start(Duration::ZERO);
        for _ in 0..MAX_CALLS {
            let Some(call) = calls.pop() else { return };
            let mut body = Vec::new();
            for _ in 0..1 + choices.below(3) {
                if choices.byte() % 8 == 7 {
                    body.extend(frame(None));
                    continue;
                }
                let files: Vec<&[u8]> = (0..choices.below(6))
                    .map(|_| choices.pick(&candidates).as_slice())
                    .collect();
                body.extend(frame(Some(&files)));
            }
            let answer = ReflectionCallEnd::Http {
                headers: &headers,
                body: &body,
                trailers: &trailers,
            };
            match discovery.file(call.id, answer, Duration::ZERO) {
                Step::Call(more) => calls.extend(more),
                Step::Wait => {}
                Step::Done(Refreshed::Changed { server, .. }) => {
                    let tool = server
                        .catalog()
                        .tools()
                        .next()
                        .expect("the configured service's tool is served");
                    let served = tool.method.parent_pool();
                    for (name, kept) in &setup.protected {
                        let file = served.get_file_by_name(name).map(|file| file.encode_to_vec());
                        assert_eq!(file.as_ref(), Some(kept), "{name} was replaced or dropped");
                    }
                    return;
                }
                Step::Done(_) => return,
            }
        }
    });
});

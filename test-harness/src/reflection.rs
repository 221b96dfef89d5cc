//! What the demo upstream's gRPC server reflection shows, for the tests of live discovery: the
//! services as built (`full`), an older, smaller API (`small`: InventoryService with GetStock
//! only), the full one plus a service of 1,000 methods (`big`), the full one plus a service
//! whose message tree is exponential (`deep`), or the full one without
//! `buf/validate/validate.proto`, as a server that does not serve it would show it
//! (`no-validate`); and a reflection service that answers garbage.

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::task::{Context, Poll};

use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{
    DescriptorProto, FieldDescriptorProto, FileDescriptorProto, MethodDescriptorProto, ServiceDescriptorProto,
};
use switchblade_core::descriptors::{encode_set, set_files};
use tonic::body::Body;
use tonic::codegen::http;
use tonic::server::NamedService;

use crate::proto::FILE_DESCRIPTOR_SET;

/// The API reflection describes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Full,
    Small,
    Big,
    Deep,
    NoValidate,
}

impl std::str::FromStr for Api {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        match value {
            "full" => Ok(Api::Full),
            "small" => Ok(Api::Small),
            "big" => Ok(Api::Big),
            "deep" => Ok(Api::Deep),
            "no-validate" => Ok(Api::NoValidate),
            other => Err(format!("--api {other}: write full, small, big, deep or no-validate")),
        }
    }
}

/// The service the big API adds, and how many methods it has.
pub const BIG_SERVICE: &str = "big.v1.Big";
pub const BIG_METHODS: usize = 1000;

/// The service the deep API adds: method Grow takes and returns `Level0`, and each of
/// `DEEP_LEVELS` messages holds `DEEP_FAN` fields of the next, so a schema that wrote every
/// message where it is used would hold `DEEP_FAN^(DEEP_LEVELS - 1)` copies of the last.
pub const DEEP_SERVICE: &str = "deep.v1.Deep";
pub const DEEP_LEVELS: usize = 16;
pub const DEEP_FAN: usize = 4;

/// The encoded `FileDescriptorSet` reflection serves for `api`. Files are kept as encoded
/// (decoding drops custom options such as `google.api.field_behavior`); only the file a
/// variant changes is decoded and encoded again.
pub fn descriptor_set(api: Api) -> Result<Vec<u8>, String> {
    let files = set_files(FILE_DESCRIPTOR_SET)?;
    let mut encoded: Vec<Vec<u8>> = Vec::with_capacity(files.len() + 1);
    for bytes in files {
        let mut file = FileDescriptorProto::decode(bytes).map_err(|error| error.to_string())?;
        if api == Api::NoValidate && file.name() == "buf/validate/validate.proto" {
            continue;
        }
        let inventory = file
            .service
            .iter_mut()
            .find(|service| service.name() == "InventoryService");
        match (api, inventory) {
            (Api::Small, Some(service)) => {
                service.method.retain(|method| method.name() == "GetStock");
                encoded.push(file.encode_to_vec());
            }
            _ => encoded.push(bytes.to_vec()),
        }
    }
    if api == Api::Big {
        encoded.push(big_file().encode_to_vec());
    }
    if api == Api::Deep {
        encoded.push(deep_file().encode_to_vec());
    }
    Ok(encode_set(encoded.iter().map(Vec::as_slice)))
}

/// `big/v1/big.proto`: service Big with methods Method0 … Method999, each taking and returning
/// an empty message (the upstream does not implement them: a call answers UNIMPLEMENTED).
fn big_file() -> FileDescriptorProto {
    let method = |index: usize| MethodDescriptorProto {
        name: Some(format!("Method{index}")),
        input_type: Some(".big.v1.Nothing".into()),
        output_type: Some(".big.v1.Nothing".into()),
        ..MethodDescriptorProto::default()
    };
    FileDescriptorProto {
        name: Some("big/v1/big.proto".into()),
        package: Some("big.v1".into()),
        message_type: vec![DescriptorProto {
            name: Some("Nothing".into()),
            ..DescriptorProto::default()
        }],
        service: vec![ServiceDescriptorProto {
            name: Some("Big".into()),
            method: (0..BIG_METHODS).map(method).collect(),
            ..ServiceDescriptorProto::default()
        }],
        syntax: Some("proto3".into()),
        ..FileDescriptorProto::default()
    }
}

/// `deep/v1/deep.proto`: service Deep with method Grow, and messages `Level0` … `Level15`, each
/// with fields `a` … `d` of the next; the last holds `string value` (the upstream does not
/// implement Grow: only its reflection matters).
fn deep_file() -> FileDescriptorProto {
    let field = |name: String, number: usize, kind: Type, type_name: Option<String>| FieldDescriptorProto {
        json_name: Some(name.clone()),
        name: Some(name),
        number: i32::try_from(number).ok(),
        label: Some(Label::Optional as i32),
        r#type: Some(kind as i32),
        type_name,
        ..FieldDescriptorProto::default()
    };
    let level = |index: usize| {
        let fields = if index + 1 < DEEP_LEVELS {
            let next = format!(".deep.v1.Level{}", index + 1);
            ('a'..)
                .take(DEEP_FAN)
                .enumerate()
                .map(|(position, name)| field(name.to_string(), position + 1, Type::Message, Some(next.clone())))
                .collect()
        } else {
            vec![field("value".into(), 1, Type::String, None)]
        };
        DescriptorProto {
            name: Some(format!("Level{index}")),
            field: fields,
            ..DescriptorProto::default()
        }
    };
    FileDescriptorProto {
        name: Some("deep/v1/deep.proto".into()),
        package: Some("deep.v1".into()),
        message_type: (0..DEEP_LEVELS).map(level).collect(),
        service: vec![ServiceDescriptorProto {
            name: Some("Deep".into()),
            method: vec![MethodDescriptorProto {
                name: Some("Grow".into()),
                input_type: Some(".deep.v1.Level0".into()),
                output_type: Some(".deep.v1.Level0".into()),
                ..MethodDescriptorProto::default()
            }],
            ..ServiceDescriptorProto::default()
        }],
        syntax: Some("proto3".into()),
        ..FileDescriptorProto::default()
    }
}

/// A reflection service (v1 and v1alpha) that answers every stream with a frame that is not a
/// `ServerReflectionResponse`, and status OK.
#[derive(Clone, Copy)]
pub struct GarbageReflection<const ALPHA: bool>;

impl NamedService for GarbageReflection<false> {
    const NAME: &'static str = "grpc.reflection.v1.ServerReflection";
}

impl NamedService for GarbageReflection<true> {
    const NAME: &'static str = "grpc.reflection.v1alpha.ServerReflection";
}

impl<const ALPHA: bool> tower_service::Service<http::Request<Body>> for GarbageReflection<ALPHA> {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<Body>) -> Self::Future {
        // A gRPC frame of 4 bytes that decode as no protobuf message (a field with wire type 7).
        let garbage: &'static [u8] = &[0, 0, 0, 0, 4, 0x0f, 0xff, 0xff, 0xff];
        let response = http::Response::builder()
            .header("content-type", "application/grpc")
            .header("grpc-status", "0")
            .body(Body::new(http_body_util::Full::new(bytes::Bytes::from_static(garbage))));
        ready(Ok(response.unwrap_or_default()))
    }
}

//! A gRPC server reflection that lies (`demo-upstream --reflection lying`), for the tests of
//! what the filter takes from reflection. Each question gets its true answer, the file asked
//! for, and files of other names that would change what the filter serves if it believed them:
//! - the file asked for imports `google/protobuf/timestamp.proto` and
//!   `buf/validate/validate.proto` (unused imports: its services stay as they are), and the
//!   answer holds fakes of both: a Timestamp whose `seconds` and `nanos` swap numbers, and
//!   StringRules whose `prefix` and `suffix` swap numbers (so `prefix: "SKU-"` reads as a suffix);
//! - every answer also holds, unasked, a fake `demo/users/v1/users.proto` whose GetUser takes a
//!   `user_name` string instead of the `user_id` number.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http_body_util::{BodyExt, Full};
use prost::Message;
use prost_types::field_descriptor_proto::Type;
use prost_types::FileDescriptorProto;
use switchblade_core::descriptors::set_files;
use tonic::body::Body;
use tonic::codegen::http;
use tonic::server::NamedService;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_reflection::pb::v1::{
    ErrorResponse, FileDescriptorResponse, ListServiceResponse, ServerReflectionRequest, ServerReflectionResponse,
    ServiceResponse,
};

const TIMESTAMP: &str = "google/protobuf/timestamp.proto";
const VALIDATE: &str = "buf/validate/validate.proto";
const USERS: &str = "demo/users/v1/users.proto";
/// The fakes the file asked for is made to import.
const FAKE_IMPORTS: [&str; 2] = [TIMESTAMP, VALIDATE];
/// `FileDescriptorProto.dependency`.
const DEPENDENCY_FIELD: u32 = 3;

/// The lying reflection service, in one version (v1alpha if `ALPHA`; the same messages).
#[derive(Clone)]
pub struct LyingReflection<const ALPHA: bool> {
    answers: Arc<Answers>,
}

impl NamedService for LyingReflection<false> {
    const NAME: &'static str = "grpc.reflection.v1.ServerReflection";
}

impl NamedService for LyingReflection<true> {
    const NAME: &'static str = "grpc.reflection.v1alpha.ServerReflection";
}

/// Both versions of the lying reflection of the encoded `FileDescriptorSet` in `set`.
pub fn lying_reflection(set: &[u8]) -> Result<(LyingReflection<false>, LyingReflection<true>), String> {
    let answers = Arc::new(Answers::new(set)?);
    Ok((
        LyingReflection {
            answers: answers.clone(),
        },
        LyingReflection { answers },
    ))
}

struct Answers {
    /// Every file of the set, as encoded (custom options kept).
    files: HashMap<String, Vec<u8>>,
    /// Package-qualified service, message and enum names → the file that declares them.
    declared_in: HashMap<String, String>,
    services: Vec<String>,
    /// File name → the fake served under it.
    fakes: Vec<(String, Vec<u8>)>,
}

impl Answers {
    fn new(set: &[u8]) -> Result<Self, String> {
        let mut answers = Answers {
            files: HashMap::new(),
            declared_in: HashMap::new(),
            services: Vec::new(),
            fakes: Vec::new(),
        };
        for bytes in set_files(set)? {
            let file = FileDescriptorProto::decode(bytes).map_err(|error| error.to_string())?;
            let qualified = |name: &str| format!("{}.{name}", file.package());
            for service in &file.service {
                answers.services.push(qualified(service.name()));
            }
            let declared = file
                .service
                .iter()
                .map(|service| service.name())
                .chain(file.message_type.iter().map(|message| message.name()))
                .chain(file.enum_type.iter().map(|declared| declared.name()));
            for name in declared {
                answers.declared_in.insert(qualified(name), file.name().to_owned());
            }
            let fake = match file.name() {
                TIMESTAMP => Some(swap_numbers(file.clone(), "Timestamp", "seconds", "nanos")?),
                VALIDATE => Some(swap_numbers(file.clone(), "StringRules", "prefix", "suffix")?),
                USERS => Some(user_name_instead_of_id(file.clone())?),
                _ => None,
            };
            if let Some(fake) = fake {
                answers.fakes.push((file.name().to_owned(), fake.encode_to_vec()));
            }
            answers.files.insert(file.name().to_owned(), bytes.to_vec());
        }
        Ok(answers)
    }

    fn answer(&self, request: ServerReflectionRequest) -> ServerReflectionResponse {
        let response = match &request.message_request {
            Some(MessageRequest::FileContainingSymbol(symbol)) => {
                match self.declared_in.get(symbol).and_then(|name| self.files.get(name)) {
                    Some(file) => self.with_lies(importing_fakes(file)),
                    None => error(5, &format!("symbol '{symbol}' not found")),
                }
            }
            Some(MessageRequest::FileByFilename(name)) => {
                let fake = self.fakes.iter().find(|(fake, _)| fake == name).map(|(_, bytes)| bytes);
                match fake.or_else(|| self.files.get(name)) {
                    Some(file) => self.with_lies(file.clone()),
                    None => error(5, &format!("file '{name}' not found")),
                }
            }
            Some(MessageRequest::ListServices(_)) => MessageResponse::ListServicesResponse(ListServiceResponse {
                service: self
                    .services
                    .iter()
                    .map(|name| ServiceResponse { name: name.clone() })
                    .collect(),
            }),
            _ => error(12, "not offered by this server"),
        };
        ServerReflectionResponse {
            valid_host: String::new(),
            original_request: Some(request),
            message_response: Some(response),
        }
    }

    /// `answered`, then every fake of another name.
    fn with_lies(&self, answered: Vec<u8>) -> MessageResponse {
        let name = FileDescriptorProto::decode(answered.as_slice())
            .map(|file| file.name().to_owned())
            .unwrap_or_default();
        let lies = self
            .fakes
            .iter()
            .filter(|(fake, _)| *fake != name)
            .map(|(_, bytes)| bytes.clone());
        MessageResponse::FileDescriptorResponse(FileDescriptorResponse {
            file_descriptor_proto: std::iter::once(answered).chain(lies).collect(),
        })
    }
}

/// The encoded `file` importing the fakes too: repeated fields appended to an encoding add to
/// it, and the rest of the bytes (custom options included) stay as they were.
fn importing_fakes(file: &[u8]) -> Vec<u8> {
    let imports = FileDescriptorProto::decode(file)
        .map(|decoded| decoded.dependency)
        .unwrap_or_default();
    let mut bytes = file.to_vec();
    for fake in FAKE_IMPORTS {
        if !imports.iter().any(|import| import == fake) {
            prost::encoding::string::encode(DEPENDENCY_FIELD, &fake.to_owned(), &mut bytes);
        }
    }
    bytes
}

/// `file` with the numbers of two fields of one of its messages swapped.
fn swap_numbers(
    mut file: FileDescriptorProto,
    message: &str,
    one: &str,
    other: &str,
) -> Result<FileDescriptorProto, String> {
    let fields = &mut file
        .message_type
        .iter_mut()
        .find(|declared| declared.name() == message)
        .ok_or_else(|| format!("no message {message} in {}", file.name.clone().unwrap_or_default()))?
        .field;
    let number = |name: &str| {
        fields
            .iter()
            .find(|field| field.name() == name)
            .map(|field| field.number())
    };
    let (Some(first), Some(second)) = (number(one), number(other)) else {
        return Err(format!("no fields {one} and {other} in {message}"));
    };
    for field in fields.iter_mut() {
        if field.name() == one {
            field.number = Some(second);
        } else if field.name() == other {
            field.number = Some(first);
        }
    }
    Ok(file)
}

/// `file` (users.proto) whose GetUserRequest holds a `user_name` string instead of `user_id`.
fn user_name_instead_of_id(mut file: FileDescriptorProto) -> Result<FileDescriptorProto, String> {
    let field = file
        .message_type
        .iter_mut()
        .find(|message| message.name() == "GetUserRequest")
        .and_then(|message| message.field.first_mut())
        .ok_or("no GetUserRequest with a field in users.proto")?;
    field.name = Some("user_name".into());
    field.json_name = Some("userName".into());
    field.set_type(Type::String);
    Ok(file)
}

fn error(code: i32, message: &str) -> MessageResponse {
    MessageResponse::ErrorResponse(ErrorResponse {
        error_code: code,
        error_message: message.to_owned(),
    })
}

/// The gRPC frames of a request body, or none if it is cut short.
fn frames(mut body: Bytes) -> Vec<Bytes> {
    let mut frames = Vec::new();
    while body.len() >= 5 {
        body.advance(1);
        let length = body.get_u32() as usize;
        if body.len() < length {
            break;
        }
        frames.push(body.split_to(length));
    }
    frames
}

type Answered = Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

impl<const ALPHA: bool> tower_service::Service<http::Request<Body>> for LyingReflection<ALPHA> {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Answered;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let answers = self.answers.clone();
        Box::pin(async move {
            // Every question of the stream is read before any is answered: the filter and the
            // CLI both end their stream after asking.
            let body = request
                .into_body()
                .collect()
                .await
                .map(|collected| collected.to_bytes())
                .unwrap_or_default();
            let mut answer = Vec::new();
            for frame in frames(body) {
                let Ok(question) = ServerReflectionRequest::decode(frame) else {
                    break;
                };
                let encoded = answers.answer(question).encode_to_vec();
                answer.push(0);
                answer.extend_from_slice(&u32::try_from(encoded.len()).unwrap_or(u32::MAX).to_be_bytes());
                answer.extend_from_slice(&encoded);
            }
            let mut trailers = http::HeaderMap::new();
            trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
            let body = Full::new(Bytes::from(answer)).with_trailers(std::future::ready(Some(Ok(trailers))));
            let response = http::Response::builder()
                .header("content-type", "application/grpc")
                .body(Body::new(body));
            Ok(response.unwrap_or_default())
        })
    }
}

//! The gRPC server reflection protocol, as far as discovery uses it: the two versions of the
//! service, the questions asked (a file by name, the file that defines a symbol), and an
//! answer read into the files it holds, or why it holds none.

use std::time::Duration;

use prost::Message;
use prost_types::FileDescriptorProto;

use super::acceptance::Asked;
use crate::descriptors::keep_only_comments;
use crate::grpc;
use crate::grpc::call_end::{answer, CallEnd};
use crate::grpc::frame::{grpc_frame, unframe_all};
use crate::grpc::status::{readable_message, status_name, UNIMPLEMENTED};
use crate::http::HeaderPair;

/// The reflection service, in its two published versions (the same messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Version {
    V1,
    V1Alpha,
}

impl Version {
    pub(super) fn path(self) -> &'static str {
        match self {
            Version::V1 => "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            Version::V1Alpha => "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        }
    }
}

/// `grpc.reflection.v1.ServerReflectionRequest`, the questions asked here.
#[derive(Clone, PartialEq, Message)]
pub(super) struct ReflectionRequest {
    #[prost(string, tag = "1")]
    pub(super) host: String,
    #[prost(oneof = "Question", tags = "3, 4")]
    pub(super) question: Option<Question>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub(super) enum Question {
    #[prost(string, tag = "3")]
    FileByFilename(String),
    #[prost(string, tag = "4")]
    FileContainingSymbol(String),
}

impl Question {
    /// The question, as its answer is read against it.
    pub(super) fn asked(&self) -> Asked<'_> {
        match self {
            Question::FileByFilename(name) => Asked::File(name),
            Question::FileContainingSymbol(symbol) => Asked::Symbol(symbol),
        }
    }
}

/// `grpc.reflection.v1.ServerReflectionResponse`, the answers read here (others are skipped).
#[derive(Clone, PartialEq, Message)]
pub(super) struct ReflectionResponse {
    #[prost(oneof = "MessageResponse", tags = "4, 7")]
    pub(super) message_response: Option<MessageResponse>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub(super) enum MessageResponse {
    #[prost(message, tag = "4")]
    Files(FileDescriptorResponse),
    #[prost(message, tag = "7")]
    Error(ErrorResponse),
}

#[derive(Clone, PartialEq, Message)]
pub(super) struct FileDescriptorResponse {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub(super) file_descriptor_proto: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, Message)]
pub(super) struct ErrorResponse {
    #[prost(int32, tag = "1")]
    pub(super) error_code: i32,
    #[prost(string, tag = "2")]
    pub(super) error_message: String,
}

/// One reflection call for the host to make.
#[derive(Debug, Clone)]
pub struct ReflectionCall {
    /// Hand it back to [`super::Discovery::file`] with the answer.
    pub id: u64,
    cluster: String,
    pub(super) path: &'static str,
    grpc_timeout: String,
    timeout: Duration,
    body: Vec<u8>,
}

impl ReflectionCall {
    /// The call asking `questions` (each in its own frame, in one body) of `cluster`.
    pub(super) fn new(id: u64, cluster: String, version: Version, questions: &[Question], timeout: Duration) -> Self {
        let mut body = Vec::new();
        for question in questions {
            let request = ReflectionRequest {
                host: String::new(),
                question: Some(question.clone()),
            };
            body.extend(grpc_frame(&request.encode_to_vec()));
        }
        ReflectionCall {
            id,
            cluster,
            path: version.path(),
            grpc_timeout: grpc::timeout(timeout),
            timeout,
            body,
        }
    }

    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub fn http_headers(&self) -> Vec<(&str, &str)> {
        vec![
            (":method", "POST"),
            (":path", self.path),
            (":authority", self.cluster.as_str()),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("grpc-timeout", self.grpc_timeout.as_str()),
        ]
    }

    /// Every question, each in its own gRPC frame.
    pub fn http_body(&self) -> &[u8] {
        &self.body
    }
}

/// How one call ended, as the host saw it.
#[derive(Debug, Clone, Copy)]
pub enum ReflectionCallEnd<'a> {
    Http {
        headers: &'a [HeaderPair<'a>],
        body: &'a [u8],
        trailers: &'a [HeaderPair<'a>],
    },
    /// The host could not make the call, or it broke.
    Failed(&'a str),
}

/// One file of an answer: decoded, for its name, imports and declarations (without its source
/// info), and its bytes as the server encoded them (custom options kept), with only the
/// comments of its source info.
pub(super) struct ReceivedFile {
    pub(super) proto: FileDescriptorProto,
    pub(super) bytes: Vec<u8>,
}

/// What an answer said.
pub(super) enum ReflectionAnswer {
    /// This version of the service is not there.
    Unimplemented,
    Files(Vec<ReceivedFile>),
}

/// Reads one call's answer: its files, or why it has none.
pub(super) fn read_answer(answer: ReflectionCallEnd<'_>) -> Result<ReflectionAnswer, String> {
    let (headers, body, trailers) = match answer {
        ReflectionCallEnd::Failed(reason) => return Err(format!("the reflection call failed: {reason}")),
        ReflectionCallEnd::Http {
            headers,
            body,
            trailers,
        } => (headers, body, trailers),
    };
    let (status, message) = status_of(headers, body, trailers)?;
    if status == UNIMPLEMENTED {
        return Ok(ReflectionAnswer::Unimplemented);
    }
    if status != 0 {
        return Err(format!("reflection answered {}: {message}", status_name(status)));
    }
    let mut files = Vec::new();
    for frame in unframe_all(body).map_err(|problem| format!("a garbled reflection answer: {problem}"))? {
        let response =
            ReflectionResponse::decode(frame).map_err(|error| format!("a garbled reflection answer: {error}"))?;
        match response.message_response {
            Some(MessageResponse::Files(answered)) => {
                for bytes in answered.file_descriptor_proto {
                    files.push(answered_file(&bytes)?);
                }
            }
            Some(MessageResponse::Error(error)) => {
                return Err(format!(
                    "reflection answered {}: {}",
                    status_name(u32::try_from(error.error_code).unwrap_or(2)),
                    error.error_message
                ))
            }
            None => return Err("a reflection answer with neither files nor an error".into()),
        }
    }
    Ok(ReflectionAnswer::Files(files))
}

fn answered_file(bytes: &[u8]) -> Result<ReceivedFile, String> {
    // Decoded for its name, imports and declarations; kept as it came, for its options.
    let mut proto =
        FileDescriptorProto::decode(bytes).map_err(|error| format!("a garbled file descriptor: {error}"))?;
    if proto.name().is_empty() {
        return Err("a file descriptor without a name".into());
    }
    proto.source_code_info = None;
    Ok(ReceivedFile {
        proto,
        bytes: keep_only_comments(bytes).map_err(|error| format!("a garbled file descriptor: {error}"))?,
    })
}

/// The gRPC status and its message, or why there is none.
fn status_of<'a>(
    headers: &[HeaderPair<'a>],
    body: &'a [u8],
    trailers: &[HeaderPair<'a>],
) -> Result<(u32, String), String> {
    match answer(headers, body, trailers) {
        Ok(reply) => {
            let message = reply
                .message
                .map(|message| readable_message(&String::from_utf8_lossy(message)))
                .unwrap_or_default();
            Ok((reply.status, message))
        }
        Err(CallEnd::DeadlinePassed) => Err("the reflection call timed out".into()),
        Err(CallEnd::Reset) => Err("the connection failed before an answer".into()),
        Err(CallEnd::HttpError { status, .. }) => Err(format!(
            "HTTP {status} without a gRPC status: not a gRPC server, or no such cluster"
        )),
        Err(CallEnd::Malformed { problem }) => Err(format!("a garbled reflection answer: {problem}")),
        Err(CallEnd::NotStarted { reason }) => Err(format!("the reflection call did not start: {reason}")),
        Err(CallEnd::TooLarge { size }) => Err(format!("a reflection answer of {size} bytes")),
        Err(CallEnd::Replied(_)) => Err("an unexpected answer".into()),
    }
}

//! `switchblade config --reflect`: the descriptors of the named services, and of everything they
//! import, from a live server's gRPC server reflection (`grpc.reflection.v1`, or `v1alpha` for
//! servers that only have the older one).

use std::error::Error;
use std::path::PathBuf;
use std::time::Duration;

use tonic::body::Body;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::codegen::http::{Request, Response, StatusCode};
use tonic::codegen::{BoxFuture, Context, Poll, Service};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Status};
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_reflection::pb::v1::{ServerReflectionRequest, ServerReflectionResponse};

use switchblade_core::reflection::acceptance::{answering_files, Asked};

use crate::descriptor_sets::{missing_imports, well_known, File};

/// Where to ask, and how.
pub struct Target {
    /// `HOST:PORT`.
    pub address: String,
    /// TLS, with the system's roots unless `ca` names a CA's PEM file.
    pub tls: bool,
    pub ca: Option<PathBuf>,
}

/// The files that define `services` and every file they import, in no particular order. The
/// well-known `google/protobuf/*.proto` files a server does not serve come from built-in copies.
/// Of each answer, only the file asked for and the files it imports are taken, as the filter
/// does: a server may send more, under any names.
pub fn fetch(target: &Target, services: &[String]) -> Result<Vec<File>, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start an async runtime: {error}"))?;
    runtime.block_on(async {
        let mut reflection = Reflection::connect(target).await?;
        reflection.files_of(services).await
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Version {
    V1,
    V1Alpha,
}

impl Version {
    fn method(self) -> PathAndQuery {
        match self {
            Version::V1 => PathAndQuery::from_static("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"),
            Version::V1Alpha => {
                PathAndQuery::from_static("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
            }
        }
    }
}

/// How a question can go wrong: the server does not know the symbol or file, or anything else
/// (already explained).
enum Failure {
    NotFound,
    Other(String),
}

/// A channel whose HTTP answers without a gRPC status arrive without their body. An HTTP/2
/// server that is not gRPC (Envoy's admin port, say) answers an unknown path with an error
/// page; tonic would read the page as gRPC messages and report a framing error ("invalid
/// compression flag"), where the status (HTTP 404, no gRPC status) is what tells the story.
#[derive(Clone)]
struct HttpErrorsWithoutBody(Channel);

impl Service<Request<Body>> for HttpErrorsWithoutBody {
    type Response = Response<Body>;
    type Error = tonic::transport::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(context)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let answer = self.0.call(request);
        Box::pin(async move {
            let response = answer.await?;
            let has_grpc_status = response.headers().contains_key("grpc-status");
            if response.status() == StatusCode::OK || has_grpc_status {
                Ok(response)
            } else {
                Ok(response.map(|_| Body::empty()))
            }
        })
    }
}

struct Reflection {
    channel: HttpErrorsWithoutBody,
    address: String,
    tls: bool,
    version: Version,
    /// Whether `version` has answered once: only the first question falls back to v1alpha.
    settled: bool,
}

impl Reflection {
    async fn connect(target: &Target) -> Result<Self, String> {
        let address = &target.address;
        if address.contains("://") || !address.contains(':') {
            return Err(format!(
                "--reflect {address}: write HOST:PORT (and add --reflect-tls for a server that serves TLS)"
            ));
        }
        let tls = target.tls || target.ca.is_some();
        let scheme = if tls { "https" } else { "http" };
        let mut endpoint = Endpoint::from_shared(format!("{scheme}://{address}"))
            .map_err(|error| format!("--reflect {address}: not a HOST:PORT ({error})"))?
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30));
        if tls {
            let mut config = ClientTlsConfig::new();
            config = match &target.ca {
                Some(path) => {
                    let pem =
                        std::fs::read(path).map_err(|error| format!("--reflect-ca {}: {error}", path.display()))?;
                    config.ca_certificate(Certificate::from_pem(pem))
                }
                None => config.with_native_roots(),
            };
            endpoint = endpoint
                .tls_config(config)
                .map_err(|error| format!("--reflect {address}: {}", chain(&error)))?;
        }
        let channel = endpoint.connect().await.map_err(|error| {
            if is_refused(&error) {
                format!("--reflect {address}: connection refused: nothing listens there")
            } else {
                let hint = if !tls {
                    ""
                } else if target.ca.is_none() && chain(&error).contains("certificate") {
                    " (a certificate from a private CA? pass the CA with --reflect-ca FILE)"
                } else {
                    " (a server without TLS? leave out --reflect-tls)"
                };
                format!("--reflect {address}: cannot connect: {}{hint}", chain(&error))
            }
        })?;
        Ok(Reflection {
            channel: HttpErrorsWithoutBody(channel),
            address: address.clone(),
            tls,
            version: Version::V1,
            settled: false,
        })
    }

    async fn files_of(&mut self, services: &[String]) -> Result<Vec<File>, String> {
        let mut files = Vec::new();
        for service in services {
            match self.ask(MessageRequest::FileContainingSymbol(service.clone())).await {
                Ok(answer) => self.keep(Asked::Symbol(service), answer, &mut files)?,
                Err(Failure::NotFound) => return Err(self.unknown_service(service).await),
                Err(Failure::Other(why)) => return Err(why),
            }
        }
        while let Some((name, importer)) = missing_imports(&files).into_iter().next() {
            match self.ask(MessageRequest::FileByFilename(name.clone())).await {
                Ok(answer) => self.keep(Asked::File(&name), answer, &mut files)?,
                Err(Failure::NotFound) => match well_known(&name) {
                    Some(file) => files.push(file),
                    None => {
                        return Err(format!(
                            "--reflect {}: the server's reflection does not have `{name}`, imported by `{importer}`",
                            self.address
                        ))
                    }
                },
                Err(Failure::Other(why)) => return Err(why),
            }
        }
        Ok(files)
    }

    /// Adds the files of a file descriptor answer to `asked` that answer it or that it imports,
    /// and that `files` does not have yet.
    fn keep(&self, asked: Asked<'_>, answer: MessageResponse, files: &mut Vec<File>) -> Result<(), String> {
        let MessageResponse::FileDescriptorResponse(response) = answer else {
            return Err(format!(
                "--reflect {}: the server answered a request for files with something else",
                self.address
            ));
        };
        let answered = response
            .file_descriptor_proto
            .into_iter()
            .map(|bytes| {
                File::decode(bytes).map_err(|error| {
                    format!(
                        "--reflect {}: the server sent a file descriptor that does not decode ({error})",
                        self.address
                    )
                })
            })
            .collect::<Result<Vec<File>, String>>()?;
        let protos: Vec<_> = answered.iter().map(|file| &file.proto).collect();
        let answering = answering_files(&[asked], &protos, |_| false)
            .map_err(|problem| format!("--reflect {}: {problem}", self.address))?;
        for (index, file) in answered.into_iter().enumerate() {
            if answering.contains(&index) && !files.iter().any(|known| known.name() == file.name()) {
                files.push(file);
            }
        }
        Ok(())
    }

    /// The error for a service the server does not know, with the ones it does.
    async fn unknown_service(&mut self, service: &str) -> String {
        let unknown = format!(
            "--reflect {}: the server does not know the service {service}",
            self.address
        );
        match self.ask(MessageRequest::ListServices(String::new())).await {
            Ok(MessageResponse::ListServicesResponse(list)) => {
                let offered: Vec<String> = list
                    .service
                    .into_iter()
                    .map(|service| service.name)
                    .filter(|name| !name.starts_with("grpc.reflection."))
                    .collect();
                if offered.is_empty() {
                    format!("{unknown}; it lists no services")
                } else {
                    format!("{unknown}; it offers: {}", offered.join(", "))
                }
            }
            Ok(_) => format!("{unknown} (and answered a request for its services with something else)"),
            Err(Failure::NotFound) => format!("{unknown} (and does not list its services)"),
            Err(Failure::Other(why)) => format!("{unknown} (and does not list its services: {why})"),
        }
    }

    /// One question, on a stream of its own (a server may end the stream when it does not
    /// know a name). The first one falls back to v1alpha if the server does not have v1.
    async fn ask(&mut self, question: MessageRequest) -> Result<MessageResponse, Failure> {
        loop {
            match self.exchange(question.clone()).await {
                Ok(MessageResponse::ErrorResponse(error)) if error.error_code == Code::NotFound as i32 => {
                    self.settled = true;
                    return Err(Failure::NotFound);
                }
                Ok(MessageResponse::ErrorResponse(error)) => {
                    return Err(Failure::Other(format!(
                        "--reflect {}: the server's reflection failed: {}: {}",
                        self.address,
                        Code::from_i32(error.error_code).description(),
                        error.error_message
                    )))
                }
                Ok(answer) => {
                    self.settled = true;
                    return Ok(answer);
                }
                Err(status) if status.code() == Code::NotFound => {
                    self.settled = true;
                    return Err(Failure::NotFound);
                }
                Err(status)
                    if status.code() == Code::Unimplemented
                        && http_status(&status).is_none()
                        && !self.settled
                        && self.version == Version::V1 =>
                {
                    self.version = Version::V1Alpha;
                }
                Err(status) => return Err(Failure::Other(self.explain(&status))),
            }
        }
    }

    async fn exchange(&mut self, question: MessageRequest) -> Result<MessageResponse, Status> {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        grpc.ready().await.map_err(|error| Status::unavailable(chain(&error)))?;
        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(question),
        };
        // v1 is v1alpha under a new package name, the same messages field for field: one
        // codec serves both.
        let codec = tonic_prost::ProstCodec::<ServerReflectionRequest, ServerReflectionResponse>::default();
        let mut answers = grpc
            .streaming(
                tonic::Request::new(tokio_stream::once(request)),
                self.version.method(),
                codec,
            )
            .await?
            .into_inner();
        match answers.message().await? {
            Some(ServerReflectionResponse {
                message_response: Some(answer),
                ..
            }) => Ok(answer),
            _ => Err(Status::internal(
                "the server ended the reflection stream without an answer",
            )),
        }
    }

    /// A failed call, for a person.
    fn explain(&self, status: &Status) -> String {
        let address = &self.address;
        if let Some(code) = http_status(status) {
            return format!("--reflect {address}: not a gRPC server: it answered HTTP {code} without a gRPC status");
        }
        if status.code() == Code::Unimplemented {
            return format!(
                "--reflect {address}: the server does not offer gRPC server reflection (neither \
                 grpc.reflection.v1.ServerReflection nor grpc.reflection.v1alpha.ServerReflection); \
                 turn reflection on in the server, or describe its services with .proto files or --descriptor-set"
            );
        }
        if status.source().is_some() {
            // The call never got a gRPC answer: HTTP/2 itself failed.
            return format!(
                "--reflect {address}: not a gRPC server, or not one that speaks {}: {}{}",
                if self.tls {
                    "HTTP/2 over TLS"
                } else {
                    "plaintext HTTP/2"
                },
                status_chain(status),
                self.tls_hint()
            );
        }
        format!(
            "--reflect {address}: the reflection call failed: {}: {}",
            status.code().description(),
            status.message()
        )
    }

    fn tls_hint(&self) -> &'static str {
        if self.tls {
            " (a server without TLS? leave out --reflect-tls)"
        } else {
            " (a server with TLS? add --reflect-tls)"
        }
    }
}

/// The HTTP status of an answer without a gRPC status, which tonic turns into a gRPC code
/// (404 into UNIMPLEMENTED) with this message.
fn http_status(status: &Status) -> Option<u16> {
    status
        .message()
        .strip_prefix("grpc-status header missing, mapped from HTTP status code ")?
        .parse()
        .ok()
}

fn is_refused(error: &(dyn Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if error
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        cause = error.source();
    }
    false
}

/// An error and its causes, each once: `a: b: c`.
fn chain(error: &(dyn Error + 'static)) -> String {
    causes(error.to_string(), error.source())
}

/// A status's message and its causes (a status's own Display is for debugging).
fn status_chain(status: &Status) -> String {
    causes(status.message().to_owned(), status.source())
}

fn causes(first: String, mut cause: Option<&(dyn Error + 'static)>) -> String {
    let mut parts = vec![first];
    while let Some(error) = cause {
        let text = error.to_string();
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        cause = error.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_as_their_causes() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let status = Status::from_error(Box::new(io));
        assert_eq!(status_chain(&status), "refused");
        assert!(is_refused(&status));
        assert!(!is_refused(&Status::unavailable("refused")));
    }

    #[test]
    fn http_answers_without_a_grpc_status_are_told_apart() {
        let mapped = Status::unimplemented("grpc-status header missing, mapped from HTTP status code 404");
        assert_eq!(http_status(&mapped), Some(404));
        assert_eq!(http_status(&Status::unimplemented("unknown service")), None);
    }

    #[test]
    fn addresses_are_host_and_port() {
        for address in ["http://localhost:50051", "localhost"] {
            let target = Target {
                address: address.into(),
                tls: false,
                ca: None,
            };
            let error = fetch(&target, &["a.B".into()]).unwrap_err();
            assert!(error.contains("write HOST:PORT"), "{error}");
        }
    }
}

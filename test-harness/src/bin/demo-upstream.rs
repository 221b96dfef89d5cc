//! The demo gRPC upstream:
//! `demo-upstream [--grpc ADDR] [--control ADDR] [--reflection WHICH] [--api WHICH]`.
//!
//! Serves the demo CatalogService, UserService and ExportService (whose jobs are long-running
//! operations, followed with google.longrunning.Operations on the same server), and
//! acme.inventory.v1.InventoryService (a service the filter does not embed), over HTTP/2 on `--grpc` (default 127.0.0.1:50051),
//! with gRPC server reflection for all of them (`--reflection`: `both` versions, the default;
//! `v1` or `v1alpha` alone; `off`; `garbage`, answers that are not reflection's; `lying`,
//! true answers with fake files beside them, see `switchblade_test_harness::lying_reflection`;
//! or `editions`, true answers but for each file declaring syntax `"editions"`),
//! describing the API `--api` names (`full`, the default; `small`, `big`, `deep` or
//! `no-validate`, see
//! `switchblade_test_harness::reflection`), and a control API over HTTP/1.1 on `--control`
//! (default 127.0.0.1:50052):
//! `GET /calls` returns the per-method call counts as JSON, `GET /metadata` the gRPC metadata
//! of each method's last call, `GET /in_flight` the most calls that were delayed at once,
//! `GET /streams` the server-streaming and bidirectional answers `open` now, and `opened` and
//! `cancelled` (ended by the client, a broken request stream or the deadline) since the reset,
//! `POST /delay?ms=N` delays every later answer by N milliseconds, `POST /stream?mode=M` makes
//! every later server-streaming answer `normal`, `many` (10,000 messages at once, then OK),
//! `count=N` (N messages at once, then OK), `error_after=N` (N messages, then FAILED_PRECONDITION) or `never_end` (one message, then
//! silence, whatever the deadline), `POST /reset` clears the counts, the delay and the mode.

use std::error::Error;
use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::Query;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use switchblade_core::descriptors::{encode_set, set_files};
use switchblade_test_harness::catalog::Catalog;
use switchblade_test_harness::control::{Control, StreamMode};
use switchblade_test_harness::exports::Jobs;
use switchblade_test_harness::inventory::Inventory;
use switchblade_test_harness::kitchen_sink::KitchenSink;
use switchblade_test_harness::lying_reflection::lying_reflection;
use switchblade_test_harness::proto::catalog::catalog_service_server::CatalogServiceServer;
use switchblade_test_harness::proto::exports::export_service_server::ExportServiceServer;
use switchblade_test_harness::proto::inventory::inventory_service_server::InventoryServiceServer;
use switchblade_test_harness::proto::kitchen_sink::kitchen_sink_service_server::KitchenSinkServiceServer;
use switchblade_test_harness::proto::longrunning::operations_server::OperationsServer;
use switchblade_test_harness::proto::rules::rules_service_server::RulesServiceServer;
use switchblade_test_harness::proto::users::user_service_server::UserServiceServer;
use switchblade_test_harness::reflection::{descriptor_set, Api, GarbageReflection};
use switchblade_test_harness::rules::Rules;
use switchblade_test_harness::serving::{incoming, shutdown};
use switchblade_test_harness::users::Users;

struct Options {
    grpc: SocketAddr,
    control: SocketAddr,
    reflection: Reflection,
    api: Api,
}

/// Which versions of gRPC server reflection to serve.
#[derive(Clone, Copy, PartialEq)]
enum Reflection {
    Both,
    V1,
    V1Alpha,
    Off,
    /// Both versions, answering garbage.
    Garbage,
    /// Both versions, answering each question with fake files beside the true answer.
    Lying,
    /// Both versions, true answers but for each file's syntax: `"editions"`, which the filter
    /// does not read.
    Editions,
}

impl std::str::FromStr for Reflection {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        match value {
            "both" => Ok(Reflection::Both),
            "v1" => Ok(Reflection::V1),
            "v1alpha" => Ok(Reflection::V1Alpha),
            "off" => Ok(Reflection::Off),
            "garbage" => Ok(Reflection::Garbage),
            "lying" => Ok(Reflection::Lying),
            "editions" => Ok(Reflection::Editions),
            other => Err(format!(
                "--reflection {other}: write both, v1, v1alpha, off, garbage, lying or editions"
            )),
        }
    }
}

const USAGE: &str =
    "usage: demo-upstream [--grpc ADDR] [--control ADDR] [--reflection both|v1|v1alpha|off|garbage|lying|editions] [--api full|small|big|deep|no-validate]";

fn options() -> Result<Options, Box<dyn Error>> {
    let mut options = Options {
        grpc: "127.0.0.1:50051".parse()?,
        control: "127.0.0.1:50052".parse()?,
        reflection: Reflection::Both,
        api: Api::Full,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--grpc" => options.grpc = value.parse()?,
            "--control" => options.control = value.parse()?,
            "--reflection" => options.reflection = value.parse()?,
            "--api" => options.api = value.parse()?,
            other => return Err(format!("unknown flag {other}; {USAGE}").into()),
        }
    }
    Ok(options)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let options = options()?;
    let control = Control::default();
    // ExportService starts the jobs that Operations, on the same server, follows.
    let jobs = Jobs::new(control.clone());

    let control_listener = tokio::net::TcpListener::bind(options.control).await?;
    let grpc_listener = tokio::net::TcpListener::bind(options.grpc).await?;
    println!(
        "demo-upstream: gRPC on {}, control on http://{}",
        grpc_listener.local_addr()?,
        control_listener.local_addr()?
    );

    let control_server = axum::serve(control_listener, control_api(control.clone())).with_graceful_shutdown(shutdown());
    // Reflection from the descriptor set the services were generated from (or the API the
    // tests ask for); it lives as long as the process.
    let mut set = descriptor_set(options.api)?;
    if options.reflection == Reflection::Editions {
        set = declaring_editions(&set)?;
    }
    let described: &'static [u8] = Box::leak(set.into_boxed_slice());
    let reflection = || tonic_reflection::server::Builder::configure().register_encoded_file_descriptor_set(described);
    let v1 = [Reflection::Both, Reflection::V1, Reflection::Editions].contains(&options.reflection);
    let v1alpha = [Reflection::Both, Reflection::V1Alpha, Reflection::Editions].contains(&options.reflection);
    let garbage = options.reflection == Reflection::Garbage;
    let (lying_v1, lying_v1alpha) = match options.reflection {
        Reflection::Lying => {
            let (v1, v1alpha) = lying_reflection(described)?;
            (Some(v1), Some(v1alpha))
        }
        _ => (None, None),
    };
    let grpc_server = tonic::transport::Server::builder()
        .add_optional_service(v1.then(|| reflection().build_v1()).transpose()?)
        .add_optional_service(v1alpha.then(|| reflection().build_v1alpha()).transpose()?)
        .add_optional_service(garbage.then_some(GarbageReflection::<false>))
        .add_optional_service(garbage.then_some(GarbageReflection::<true>))
        .add_optional_service(lying_v1)
        .add_optional_service(lying_v1alpha)
        .add_service(CatalogServiceServer::new(Catalog {
            control: control.clone(),
        }))
        .add_service(UserServiceServer::new(Users {
            control: control.clone(),
        }))
        .add_service(InventoryServiceServer::new(Inventory {
            control: control.clone(),
        }))
        .add_service(KitchenSinkServiceServer::new(KitchenSink {
            control: control.clone(),
        }))
        .add_service(RulesServiceServer::new(Rules {
            control: control.clone(),
        }))
        .add_service(ExportServiceServer::new(jobs.clone()))
        .add_service(OperationsServer::new(jobs))
        .serve_with_incoming_shutdown(incoming(grpc_listener), shutdown());
    let (grpc, control) = tokio::join!(grpc_server, control_server);
    grpc?;
    control?;
    Ok(())
}

#[derive(Deserialize)]
struct Delay {
    ms: u64,
}

#[derive(Deserialize)]
struct Mode {
    mode: String,
}

fn control_api(control: Control) -> Router {
    let calls = control.clone();
    let metadata = control.clone();
    let delay = control.clone();
    let in_flight = control.clone();
    let streams = control.clone();
    let stream_mode = control.clone();
    Router::new()
        .route("/calls", get(move || async move { Json(calls.counts()) }))
        .route(
            "/in_flight",
            get(move || async move { Json(in_flight.most_in_flight()) }),
        )
        .route("/metadata", get(move || async move { Json(metadata.metadata()) }))
        .route(
            "/delay",
            post(move |Query(Delay { ms }): Query<Delay>| async move { delay.set_delay(Duration::from_millis(ms)) }),
        )
        .route("/streams", get(move || async move { Json(streams.streams()) }))
        .route(
            "/stream",
            post(move |Query(Mode { mode }): Query<Mode>| async move {
                let mode: StreamMode = mode.parse().map_err(|error| (StatusCode::BAD_REQUEST, error))?;
                stream_mode.set_stream_mode(mode);
                Ok::<(), (StatusCode, String)>(())
            }),
        )
        .route("/reset", post(move || async move { control.reset() }))
}

/// `FileDescriptorProto.syntax`.
const SYNTAX_FIELD: u32 = 12;

/// The set with every file declaring syntax `"editions"`: a string field appended to an
/// encoding replaces the one before it, and every other byte stays as it was.
fn declaring_editions(set: &[u8]) -> Result<Vec<u8>, String> {
    let files: Vec<Vec<u8>> = set_files(set)?
        .into_iter()
        .map(|file| {
            let mut file = file.to_vec();
            prost::encoding::string::encode(SYNTAX_FIELD, &"editions".to_owned(), &mut file);
            file
        })
        .collect();
    Ok(encode_set(files.iter().map(Vec::as_slice)))
}

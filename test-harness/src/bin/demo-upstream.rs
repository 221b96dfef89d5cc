//! The demo gRPC upstream: `demo-upstream [--grpc ADDR] [--control ADDR]`.
//!
//! Serves CatalogService and UserService over HTTP/2 on `--grpc` (default 127.0.0.1:50051)
//! and a control API over HTTP/1.1 on `--control` (default 127.0.0.1:50052):
//! `GET /calls` returns the per-method call counts as JSON, `POST /reset` clears them.

use std::error::Error;
use std::net::SocketAddr;

use axum::routing::{get, post};
use axum::{Json, Router};
use switchblade_test_harness::calls::CallLog;
use switchblade_test_harness::catalog::Catalog;
use switchblade_test_harness::proto::catalog::catalog_service_server::CatalogServiceServer;
use switchblade_test_harness::proto::users::user_service_server::UserServiceServer;
use switchblade_test_harness::users::Users;

struct Options {
    grpc: SocketAddr,
    control: SocketAddr,
}

fn options() -> Result<Options, Box<dyn Error>> {
    let mut options = Options {
        grpc: "127.0.0.1:50051".parse()?,
        control: "127.0.0.1:50052".parse()?,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--grpc" => options.grpc = value.parse()?,
            "--control" => options.control = value.parse()?,
            other => {
                return Err(format!(
                    "unknown flag {other}; usage: demo-upstream [--grpc ADDR] [--control ADDR]"
                )
                .into())
            }
        }
    }
    Ok(options)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let options = options()?;
    let calls = CallLog::default();

    let control = Router::new()
        .route(
            "/calls",
            get({
                let calls = calls.clone();
                move || async move { Json(calls.snapshot()) }
            }),
        )
        .route(
            "/reset",
            post({
                let calls = calls.clone();
                move || async move { calls.reset() }
            }),
        );
    let control_listener = tokio::net::TcpListener::bind(options.control).await?;
    let grpc_listener = tokio::net::TcpListener::bind(options.grpc).await?;
    println!(
        "demo-upstream: gRPC on {}, control on http://{}",
        grpc_listener.local_addr()?,
        control_listener.local_addr()?
    );

    let grpc = tonic::transport::Server::builder()
        .add_service(CatalogServiceServer::new(Catalog {
            calls: calls.clone(),
        }))
        .add_service(UserServiceServer::new(Users { calls }))
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(grpc_listener),
            shutdown(),
        );
    let control = axum::serve(control_listener, control).with_graceful_shutdown(shutdown());
    let (grpc, control) = tokio::join!(grpc, control);
    grpc?;
    control?;
    Ok(())
}

async fn shutdown() {
    let _ = tokio::signal::ctrl_c().await;
}

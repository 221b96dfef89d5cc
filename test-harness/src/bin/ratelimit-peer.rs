//! A rate limit service for the tests (see `switchblade_test_harness::ratelimit`):
//! `ratelimit-peer --grpc ADDR --control ADDR --config FILE`.
//!
//! Serves `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` over HTTP/2 on
//! `--grpc`, with the limits of the JSON file `--config`, and a control API over HTTP/1.1 on
//! `--control`: `GET /requests` returns how many checks it answered, `POST /delay?ms=N`
//! delays every later answer by N milliseconds (a slow service), `POST /reset` clears the
//! counters, the count and the delay.

use std::error::Error;
use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::Query;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use switchblade_test_harness::proto::ratelimit::rate_limit_service_server::RateLimitServiceServer;
use switchblade_test_harness::ratelimit::{Config, RateLimiter, State};
use switchblade_test_harness::serving::{incoming, shutdown};

const USAGE: &str = "usage: ratelimit-peer --grpc ADDR --control ADDR --config FILE";

struct Options {
    grpc: SocketAddr,
    control: SocketAddr,
    config: Config,
}

fn options() -> Result<Options, Box<dyn Error>> {
    let (mut grpc, mut control, mut config) = (None, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value; {USAGE}"))?;
        match flag.as_str() {
            "--grpc" => grpc = Some(value.parse()?),
            "--control" => control = Some(value.parse()?),
            "--config" => {
                let text = std::fs::read_to_string(&value).map_err(|error| format!("{value}: {error}"))?;
                config = Some(serde_json::from_str(&text).map_err(|error| format!("{value}: {error}"))?);
            }
            other => return Err(format!("unknown flag {other}; {USAGE}").into()),
        }
    }
    match (grpc, control, config) {
        (Some(grpc), Some(control), Some(config)) => Ok(Options { grpc, control, config }),
        _ => Err(USAGE.into()),
    }
}

#[derive(Deserialize)]
struct Delay {
    ms: u64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let options = options()?;
    let limiter = RateLimiter::new(options.config);
    let grpc_listener = tokio::net::TcpListener::bind(options.grpc).await?;
    let control_listener = tokio::net::TcpListener::bind(options.control).await?;
    println!(
        "ratelimit-peer: gRPC on {}, control on http://{}",
        grpc_listener.local_addr()?,
        control_listener.local_addr()?
    );
    let (requests, delay, reset) = (limiter.clone(), limiter.clone(), limiter.clone());
    let control = Router::new()
        .route("/requests", get(move || async move { Json(requests.lock().requests) }))
        .route(
            "/delay",
            post(move |Query(Delay { ms }): Query<Delay>| async move {
                delay.lock().delay = Duration::from_millis(ms);
            }),
        )
        .route(
            "/reset",
            post(move || async move {
                *reset.lock() = State::default();
            }),
        );
    let control_server = axum::serve(control_listener, control).with_graceful_shutdown(shutdown());
    let grpc_server = tonic::transport::Server::builder()
        .add_service(RateLimitServiceServer::new(limiter))
        .serve_with_incoming_shutdown(incoming(grpc_listener), shutdown());
    let (grpc, control) = tokio::join!(grpc_server, control_server);
    grpc?;
    control?;
    Ok(())
}

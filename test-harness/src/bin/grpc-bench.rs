//! The gRPC load client of the benchmark (systems "direct gRPC" and "Envoy gRPC proxy"):
//! `grpc-bench --target URL [--connections N] [--seconds S] [--id ID]`.
//!
//! Opens N HTTP/2 connections, keeps one `CatalogService/GetItem` call in flight on each, as
//! wrk does with its connections, for S seconds, and prints one JSON line: requests, errors,
//! seconds, and latency percentiles in microseconds. One thread, like `wrk -t 1`, so the client
//! costs the same core in every system the benchmark compares.

use std::error::Error;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use switchblade_test_harness::proto::catalog::catalog_service_client::CatalogServiceClient;
use switchblade_test_harness::proto::catalog::GetItemRequest;
use tonic::transport::{Channel, Endpoint};

struct Options {
    target: String,
    connections: usize,
    seconds: f64,
    id: i64,
}

const USAGE: &str = "usage: grpc-bench --target URL [--connections N] [--seconds S] [--id ID]";

fn options() -> Result<Options, Box<dyn Error>> {
    let mut options = Options {
        target: String::new(),
        connections: 1,
        seconds: 10.0,
        id: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value; {USAGE}"))?;
        match flag.as_str() {
            "--target" => options.target = value,
            "--connections" => options.connections = value.parse()?,
            "--seconds" => options.seconds = value.parse()?,
            "--id" => options.id = value.parse()?,
            other => return Err(format!("unknown flag {other}; {USAGE}").into()),
        }
    }
    if options.target.is_empty() || options.connections == 0 {
        return Err(USAGE.into());
    }
    Ok(options)
}

/// What one connection saw: latencies of the calls that succeeded, and how many failed.
struct Tally {
    latencies: Histogram<u64>,
    errors: u64,
}

async fn drive(channel: Channel, id: i64, until: Instant) -> Result<Tally, Box<dyn Error + Send + Sync>> {
    let mut client = CatalogServiceClient::new(channel);
    // 1 µs to 60 s at 3 significant digits, the precision wrk reports.
    let mut tally = Tally {
        latencies: Histogram::new_with_bounds(1, 60_000_000, 3)?,
        errors: 0,
    };
    while Instant::now() < until {
        let started = Instant::now();
        match client.get_item(GetItemRequest { id }).await {
            Ok(_) => {
                let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                tally.latencies.saturating_record(micros.max(1));
            }
            Err(_) => tally.errors += 1,
        }
    }
    Ok(tally)
}

async fn run(options: Options) -> Result<String, Box<dyn Error + Send + Sync>> {
    let endpoint = Endpoint::from_shared(options.target.clone())?;
    let mut channels = Vec::with_capacity(options.connections);
    for _ in 0..options.connections {
        // One Channel per connection: tonic multiplexes calls on a Channel's single connection.
        channels.push(endpoint.connect().await?);
    }
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(options.seconds);
    let tasks: Vec<_> = channels
        .into_iter()
        .map(|channel| tokio::spawn(drive(channel, options.id, until)))
        .collect();
    let mut latencies = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let mut errors = 0;
    for task in tasks {
        let tally = task.await??;
        latencies.add(&tally.latencies)?;
        errors += tally.errors;
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(format!(
        "{{\"requests\":{},\"errors\":{},\"seconds\":{:.3},\"p50_us\":{},\"p99_us\":{}}}",
        latencies.len(),
        errors,
        seconds,
        latencies.value_at_quantile(0.50),
        latencies.value_at_quantile(0.99)
    ))
}

fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    let options = options().map_err(|error| error.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    println!("{}", runtime.block_on(run(options))?);
    Ok(())
}

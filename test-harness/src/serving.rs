//! What every gRPC test peer's server does the same way.

use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;

/// The connections of `listener`, each without Nagle's delay: every gRPC server a real
/// deployment runs (grpc-go, grpc-java, grpcio) sends that way, and tonic does so only for
/// listeners it binds itself.
pub fn incoming(listener: TcpListener) -> TcpIncoming {
    TcpIncoming::from(listener).with_nodelay(Some(true))
}

/// Resolves when the process is asked to stop (Ctrl-C, or SIGINT from the tests).
pub async fn shutdown() {
    let _ = tokio::signal::ctrl_c().await;
}

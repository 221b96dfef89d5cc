//! `test.kitchensink.v1.KitchenSinkService`: echoes every message back unchanged, so tests can
//! check that what goes in as JSON comes back out as the same JSON, streams included.

use tonic::{Request, Response, Status, Streaming};

use crate::control::Control;
use crate::proto::kitchen_sink::kitchen_sink_service_server::KitchenSinkService;
use crate::proto::kitchen_sink::{Everything, Forest, Stamp, Tree};
use crate::streams::{bidi_stream, call_deadline, server_stream, ResponseStream, Script, Then};

/// How many times EchoStream sends its message back.
pub const ECHO_STREAM_COPIES: u64 = 3;

#[derive(Debug, Clone)]
pub struct KitchenSink {
    pub control: Control,
}

#[tonic::async_trait]
impl KitchenSinkService for KitchenSink {
    async fn echo(&self, request: Request<Everything>) -> Result<Response<Everything>, Status> {
        self.control
            .enter("/test.kitchensink.v1.KitchenSinkService/Echo", request.metadata())
            .await;
        Ok(Response::new(request.into_inner()))
    }

    async fn echo_tree(&self, request: Request<Tree>) -> Result<Response<Tree>, Status> {
        self.control
            .enter("/test.kitchensink.v1.KitchenSinkService/EchoTree", request.metadata())
            .await;
        Ok(Response::new(request.into_inner()))
    }

    async fn echo_time(&self, request: Request<Stamp>) -> Result<Response<prost_types::Timestamp>, Status> {
        self.control
            .enter("/test.kitchensink.v1.KitchenSinkService/EchoTime", request.metadata())
            .await;
        Ok(Response::new(request.into_inner().at.unwrap_or_default()))
    }

    async fn ping(&self, request: Request<()>) -> Result<Response<()>, Status> {
        self.control
            .enter("/test.kitchensink.v1.KitchenSinkService/Ping", request.metadata())
            .await;
        Ok(Response::new(()))
    }

    type EchoStreamStream = ResponseStream<Everything>;

    async fn echo_stream(&self, request: Request<Everything>) -> Result<Response<Self::EchoStreamStream>, Status> {
        // Read before the upstream's artificial delay, which counts against it.
        let deadline = call_deadline(request.metadata());
        self.control
            .enter("/test.kitchensink.v1.KitchenSinkService/EchoStream", request.metadata())
            .await;
        let message = request.into_inner();
        let script = Script {
            burst: ECHO_STREAM_COPIES,
            then: Then::End,
        };
        Ok(Response::new(server_stream(
            &self.control,
            deadline,
            script,
            move || message.clone(),
        )))
    }

    async fn collect_trees(&self, request: Request<Streaming<Tree>>) -> Result<Response<Forest>, Status> {
        self.control
            .enter(
                "/test.kitchensink.v1.KitchenSinkService/CollectTrees",
                request.metadata(),
            )
            .await;
        let mut trees = request.into_inner();
        let mut forest = Forest::default();
        while let Some(tree) = trees.message().await? {
            forest.trees.push(tree);
        }
        Ok(Response::new(forest))
    }

    type EchoEachStream = ResponseStream<Everything>;

    async fn echo_each(
        &self,
        request: Request<Streaming<Everything>>,
    ) -> Result<Response<Self::EchoEachStream>, Status> {
        // Read before the upstream's artificial delay, which counts against it.
        let deadline = call_deadline(request.metadata());
        self.control
            .enter("/test.kitchensink.v1.KitchenSinkService/EchoEach", request.metadata())
            .await;
        Ok(Response::new(bidi_stream(
            &self.control,
            deadline,
            request.into_inner(),
            |_, message| Ok(message),
            None,
        )))
    }
}

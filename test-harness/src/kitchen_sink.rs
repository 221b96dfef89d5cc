//! `test.kitchensink.v1.KitchenSinkService`: echoes every message back unchanged, so tests can
//! check that what goes in as JSON comes back out as the same JSON.

use tonic::{Request, Response, Status};

use crate::control::Control;
use crate::proto::kitchen_sink::kitchen_sink_service_server::KitchenSinkService;
use crate::proto::kitchen_sink::{Everything, Stamp, Tree};

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
}

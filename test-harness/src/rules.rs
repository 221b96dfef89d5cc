//! `test.rules.v1.RulesService`: echoes every request, so a test can see that what passed the
//! gate's buf.validate rules arrived unchanged, and count that what broke one never came.

use tonic::{Request, Response, Status};

use crate::control::Control;
use crate::proto::rules::rules_service_server::RulesService;
use crate::proto::rules::{Level, Order};

#[derive(Debug, Clone)]
pub struct Rules {
    pub control: Control,
}

#[tonic::async_trait]
impl RulesService for Rules {
    async fn place_order(&self, request: Request<Order>) -> Result<Response<Order>, Status> {
        self.control
            .enter("/test.rules.v1.RulesService/PlaceOrder", request.metadata())
            .await;
        Ok(Response::new(request.into_inner()))
    }

    async fn set_level(&self, request: Request<Level>) -> Result<Response<Level>, Status> {
        self.control
            .enter("/test.rules.v1.RulesService/SetLevel", request.metadata())
            .await;
        Ok(Response::new(request.into_inner()))
    }
}

//! `acme.inventory.v1.InventoryService`: fixed stock at two warehouses.

use tonic::{Request, Response, Status};

use crate::control::Control;
use crate::proto::inventory::inventory_service_server::InventoryService;
use crate::proto::inventory::{
    GetStockRequest, ListWarehousesRequest, ListWarehousesResponse, Reservation, ReserveRequest, Stock,
};

#[derive(Debug, Clone)]
pub struct Inventory {
    pub control: Control,
}

const WAREHOUSES: [&str; 2] = ["BER", "LIS"];

fn on_hand(sku: &str, warehouse: &str) -> Option<u32> {
    match (sku, warehouse) {
        ("SKU-0001", "BER") => Some(12),
        ("SKU-0001", "LIS") => Some(3),
        ("SKU-0004", "BER") => Some(30),
        (_, warehouse) if WAREHOUSES.contains(&warehouse) => Some(0),
        _ => None,
    }
}

fn unknown_warehouse(warehouse: &str) -> Status {
    Status::not_found(format!(
        "no warehouse has code {warehouse:?}; known: {}",
        WAREHOUSES.join(", ")
    ))
}

#[tonic::async_trait]
impl InventoryService for Inventory {
    async fn get_stock(&self, request: Request<GetStockRequest>) -> Result<Response<Stock>, Status> {
        self.control
            .enter("/acme.inventory.v1.InventoryService/GetStock", request.metadata())
            .await;
        let request = request.into_inner();
        let on_hand = on_hand(&request.sku, &request.warehouse).ok_or_else(|| unknown_warehouse(&request.warehouse))?;
        Ok(Response::new(Stock {
            sku: request.sku,
            warehouse: request.warehouse,
            on_hand,
            reserved: 0,
        }))
    }

    async fn reserve(&self, request: Request<ReserveRequest>) -> Result<Response<Reservation>, Status> {
        self.control
            .enter("/acme.inventory.v1.InventoryService/Reserve", request.metadata())
            .await;
        let request = request.into_inner();
        let on_hand = on_hand(&request.sku, &request.warehouse).ok_or_else(|| unknown_warehouse(&request.warehouse))?;
        if request.quantity == 0 {
            return Err(Status::invalid_argument("quantity must be at least 1"));
        }
        if request.quantity > on_hand {
            return Err(Status::failed_precondition(format!(
                "only {on_hand} units of {} at {}",
                request.sku, request.warehouse
            )));
        }
        Ok(Response::new(Reservation {
            reservation_id: format!("R-{}-{}-{}", request.warehouse, request.sku, request.quantity),
            quantity: request.quantity,
        }))
    }

    async fn list_warehouses(
        &self,
        request: Request<ListWarehousesRequest>,
    ) -> Result<Response<ListWarehousesResponse>, Status> {
        self.control
            .enter("/acme.inventory.v1.InventoryService/ListWarehouses", request.metadata())
            .await;
        Ok(Response::new(ListWarehousesResponse {
            codes: WAREHOUSES.iter().map(|c| (*c).to_owned()).collect(),
        }))
    }
}

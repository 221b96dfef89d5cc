//! `demo.catalog.v1.CatalogService`: a fixed inventory with text search and paging.

use std::pin::Pin;

use prost_types::Timestamp;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::control::Control;
use crate::proto::catalog::catalog_service_server::CatalogService;
use crate::proto::catalog::{
    Category, GetItemRequest, Item, ItemEvent, Money, SearchRequest, SearchResponse, WatchItemsRequest,
};

#[derive(Debug, Clone)]
pub struct Catalog {
    pub control: Control,
}

/// 2026-01-01T00:00:00Z, so every run renders the same timestamps.
const EPOCH_2026: i64 = 1_767_225_600;

fn item(
    id: i64,
    name: &str,
    description: &str,
    category: Category,
    price_minor: i64,
    stock: u32,
    tags: &[&str],
) -> Item {
    Item {
        id,
        name: name.into(),
        description: description.into(),
        category: category as i32,
        price: Some(Money {
            currency_code: "EUR".into(),
            amount_minor: price_minor,
        }),
        stock,
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        attributes: [("sku".to_owned(), format!("SKU-{id:04}"))].into_iter().collect(),
        updated_at: Some(Timestamp {
            seconds: EPOCH_2026 + id * 3600,
            nanos: 0,
        }),
    }
}

pub fn inventory() -> Vec<Item> {
    vec![
        item(
            1,
            "Switchblade multitool",
            "A folding knife with eleven tools",
            Category::Hardware,
            4_999,
            12,
            &["edc", "steel"],
        ),
        item(
            2,
            "Camping stove",
            "A compact gas stove for two",
            Category::Outdoor,
            3_450,
            0,
            &["camping"],
        ),
        item(
            3,
            "The Pragmatic Programmer",
            "A book about the craft of software",
            Category::Books,
            3_990,
            5,
            &["software"],
        ),
        item(
            4,
            "Pocket knife sharpener",
            "Ceramic rods for keeping a blade keen",
            Category::Hardware,
            1_250,
            30,
            &["edc"],
        ),
        item(
            5,
            "Trail knife",
            "A fixed-blade knife for the outdoors",
            Category::Outdoor,
            6_900,
            3,
            &["camping", "steel"],
        ),
    ]
}

/// INVALID_ARGUMENT with the standard details a client can act on.
fn page_size_error(size: i32) -> Status {
    let mut details =
        ErrorDetails::with_bad_request_violation("page_size", format!("must be between 1 and 50, got {size}"));
    details.set_error_info(
        "PAGE_SIZE_OUT_OF_RANGE",
        "catalog.demo",
        [("max".to_owned(), "50".to_owned())],
    );
    Status::with_error_details(
        tonic::Code::InvalidArgument,
        format!("page_size must be between 1 and 50, got {size}"),
        details,
    )
}

fn item_not_found(id: i64) -> Status {
    let mut details = ErrorDetails::new();
    details.set_resource_info("demo.catalog.v1.Item", id.to_string(), "catalog", "no such item");
    Status::with_error_details(tonic::Code::NotFound, format!("no item has id {id}"), details)
}

fn matches(item: &Item, request: &SearchRequest) -> bool {
    let query = request.query.to_lowercase();
    let text_matches = query.is_empty()
        || item.name.to_lowercase().contains(&query)
        || item.description.to_lowercase().contains(&query);
    let Some(filters) = &request.filters else {
        return text_matches;
    };
    let category_matches = filters.category == Category::Unspecified as i32 || filters.category == item.category;
    let price = item.price.as_ref().map_or(0, |p| p.amount_minor);
    let price_matches = filters.max_price_minor.is_none_or(|max| price <= max);
    let stock_matches = !filters.in_stock_only || item.stock > 0;
    text_matches && category_matches && price_matches && stock_matches
}

#[tonic::async_trait]
impl CatalogService for Catalog {
    async fn search(&self, request: Request<SearchRequest>) -> Result<Response<SearchResponse>, Status> {
        self.control
            .enter("/demo.catalog.v1.CatalogService/Search", request.metadata())
            .await;
        let request = request.into_inner();
        let page_size = match request.page_size {
            0 => 10,
            size @ 1..=50 => size as usize,
            size => return Err(page_size_error(size)),
        };
        let offset = match request.page_token.as_str() {
            "" => 0,
            token => token.parse::<usize>().map_err(|_| {
                Status::invalid_argument(format!("page_token {token:?} did not come from a previous response"))
            })?,
        };
        let matching: Vec<Item> = inventory().into_iter().filter(|item| matches(item, &request)).collect();
        let total_size = matching.len() as i32;
        let items: Vec<Item> = matching.into_iter().skip(offset).take(page_size).collect();
        let next = offset + items.len();
        let next_page_token = if (next as i32) < total_size {
            next.to_string()
        } else {
            String::new()
        };
        Ok(Response::new(SearchResponse {
            items,
            next_page_token,
            total_size,
        }))
    }

    async fn get_item(&self, request: Request<GetItemRequest>) -> Result<Response<Item>, Status> {
        self.control
            .enter("/demo.catalog.v1.CatalogService/GetItem", request.metadata())
            .await;
        let id = request.into_inner().id;
        inventory()
            .into_iter()
            .find(|item| item.id == id)
            .map(Response::new)
            .ok_or_else(|| item_not_found(id))
    }

    type WatchItemsStream = Pin<Box<dyn Stream<Item = Result<ItemEvent, Status>> + Send>>;

    async fn watch_items(
        &self,
        request: Request<WatchItemsRequest>,
    ) -> Result<Response<Self::WatchItemsStream>, Status> {
        self.control
            .enter("/demo.catalog.v1.CatalogService/WatchItems", request.metadata())
            .await;
        let ids = request.into_inner().ids;
        let events: Vec<Result<ItemEvent, Status>> = inventory()
            .into_iter()
            .filter(|item| ids.is_empty() || ids.contains(&item.id))
            .map(|item| Ok(ItemEvent { item: Some(item) }))
            .collect();
        Ok(Response::new(Box::pin(tokio_stream::iter(events))))
    }
}

//! `demo.catalog.v1.CatalogService`: a fixed inventory with text search and paging, a watch
//! whose stock changes on a timer, and an import that checks and tallies (the inventory stays
//! as it is).

use std::time::Duration;

use prost_types::Timestamp;
use tonic::{Request, Response, Status, Streaming};
use tonic_types::{ErrorDetails, StatusExt};

use crate::control::Control;
use crate::proto::catalog::catalog_service_server::CatalogService;
use crate::proto::catalog::{
    Category, GetItemRequest, ImportItemRequest, ImportSummary, Item, ItemEvent, Money, SearchRequest, SearchResponse,
    WatchItemsRequest,
};
use crate::streams::{call_deadline, server_stream, ResponseStream, Script, Then};

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

/// INVALID_ARGUMENT for a request field out of its range, naming the field.
fn field_error(field: &str, problem: String) -> Status {
    let details = ErrorDetails::with_bad_request_violation(field, problem.clone());
    Status::with_error_details(tonic::Code::InvalidArgument, format!("{field} {problem}"), details)
}

/// INVALID_ARGUMENT for the import's item at `index` (from 0), naming the index and the field.
fn refused_item(index: usize, field: &str, problem: String) -> Status {
    let mut details = ErrorDetails::with_bad_request_violation(field, format!("item {index}: {problem}"));
    details.set_error_info(
        "IMPORT_ITEM_REFUSED",
        "catalog.demo",
        [("index".to_owned(), index.to_string())],
    );
    Status::with_error_details(
        tonic::Code::InvalidArgument,
        format!("item {index}: {field} {problem}; nothing was imported"),
        details,
    )
}

/// The events of one watch: each watched item as it is, then one stock change at a time, to
/// each watched item in turn.
struct Watch {
    items: Vec<Item>,
    sent: u32,
}

/// Stock an item that ran out gets back in a change.
const RESTOCK: u32 = 10;

impl Watch {
    fn next_event(&mut self) -> ItemEvent {
        let position = self.sent as usize;
        self.sent = self.sent.saturating_add(1);
        let initial = position < self.items.len();
        let item = position
            .checked_rem(self.items.len())
            .and_then(|index| self.items.get_mut(index))
            .map(|item| {
                if !initial {
                    item.stock = item.stock.checked_sub(1).unwrap_or(RESTOCK);
                    if let Some(updated_at) = &mut item.updated_at {
                        updated_at.seconds += 60;
                    }
                }
                item.clone()
            });
        ItemEvent {
            item,
            initial,
            sequence: self.sent,
        }
    }
}

/// Milliseconds between two changes of a watch, when the request does not say.
const DEFAULT_WATCH_INTERVAL_MS: u32 = 200;
const MAX_WATCH_INTERVAL_MS: u32 = 60_000;

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

    type WatchItemsStream = ResponseStream<ItemEvent>;

    async fn watch_items(
        &self,
        request: Request<WatchItemsRequest>,
    ) -> Result<Response<Self::WatchItemsStream>, Status> {
        // Read before the upstream's artificial delay, which counts against it.
        let deadline = call_deadline(request.metadata());
        self.control
            .enter("/demo.catalog.v1.CatalogService/WatchItems", request.metadata())
            .await;
        let WatchItemsRequest { ids, interval_ms } = request.into_inner();
        let interval_ms = interval_ms.unwrap_or(DEFAULT_WATCH_INTERVAL_MS);
        if !(1..=MAX_WATCH_INTERVAL_MS).contains(&interval_ms) {
            return Err(field_error(
                "interval_ms",
                format!("must be between 1 and {MAX_WATCH_INTERVAL_MS}, got {interval_ms}"),
            ));
        }
        let everything = inventory();
        if let Some(unknown) = ids.iter().find(|id| !everything.iter().any(|item| item.id == **id)) {
            return Err(item_not_found(*unknown));
        }
        let items: Vec<Item> = everything
            .into_iter()
            .filter(|item| ids.is_empty() || ids.contains(&item.id))
            .collect();
        let script = Script {
            burst: items.len() as u64,
            then: Then::Every(Duration::from_millis(interval_ms.into())),
        };
        let mut watch = Watch { items, sent: 0 };
        Ok(Response::new(server_stream(
            &self.control,
            deadline,
            script,
            move || watch.next_event(),
        )))
    }

    async fn import_items(
        &self,
        request: Request<Streaming<ImportItemRequest>>,
    ) -> Result<Response<ImportSummary>, Status> {
        self.control
            .enter("/demo.catalog.v1.CatalogService/ImportItems", request.metadata())
            .await;
        let mut items = request.into_inner();
        let mut summary = ImportSummary::default();
        let mut index = 0_usize;
        while let Some(item) = items.message().await? {
            if item.name.is_empty() {
                return Err(refused_item(index, "name", "must not be empty".into()));
            }
            if item.price_minor <= 0 {
                return Err(refused_item(
                    index,
                    "price_minor",
                    format!("must be positive, got {}", item.price_minor),
                ));
            }
            summary.imported_count = summary.imported_count.saturating_add(1);
            summary.total_stock = summary.total_stock.saturating_add(item.stock.into());
            summary.total_value_minor = summary
                .total_value_minor
                .saturating_add(item.price_minor.saturating_mul(item.stock.into()));
            index += 1;
        }
        Ok(Response::new(summary))
    }
}

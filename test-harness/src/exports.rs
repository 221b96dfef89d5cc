//! `demo.exports.v1.ExportService` and `google.longrunning.Operations` on the same server: slow
//! jobs answered as long-running operations, the way Google's APIs answer them. A job is done
//! once its operation has been polled (GetOperation) as many times as its `steps`; the state
//! is the upstream's, in memory, so any number of gateways may poll it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use prost::Message;
use tonic::{Request, Response, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::catalog::inventory;
use crate::control::Control;
use crate::proto::exports::export_service_server::ExportService;
use crate::proto::exports::{
    ExportCatalogRequest, ExportCatalogResponse, JobProgress, PurgeCachesRequest, PurgeCachesResponse,
    RebuildIndexRequest, RebuildIndexResponse, RepriceCatalogRequest,
};
use crate::proto::longrunning::operations_server::Operations;
use crate::proto::longrunning::{
    operation, CancelOperationRequest, DeleteOperationRequest, GetOperationRequest, ListOperationsRequest,
    ListOperationsResponse, Operation, WaitOperationRequest,
};

/// The jobs of both services: ExportService starts them, Operations follows them.
#[derive(Debug, Clone, Default)]
pub struct Jobs {
    pub control: Control,
    jobs: Arc<Mutex<Ledger>>,
}

impl Jobs {
    pub fn new(control: Control) -> Self {
        Jobs {
            control,
            jobs: Arc::default(),
        }
    }
}

#[derive(Debug, Default)]
struct Ledger {
    next: u64,
    jobs: HashMap<String, Job>,
}

#[derive(Debug, Clone)]
struct Job {
    kind: Kind,
    /// Polls seen so far.
    polls: i32,
    /// Polls it takes.
    steps: i32,
    cancelled: bool,
}

#[derive(Debug, Clone)]
enum Kind {
    Export { query: String },
    Reprice { currency_code: String },
    Rebuild,
    Purge { prefix: String },
}

impl Kind {
    fn stage(&self) -> &'static str {
        match self {
            Kind::Export { .. } => "exporting",
            Kind::Reprice { .. } => "repricing",
            Kind::Rebuild => "indexing",
            Kind::Purge { .. } => "purging",
        }
    }

    fn prefix(&self) -> &'static str {
        match self {
            Kind::Export { .. } => "export",
            Kind::Reprice { .. } => "reprice",
            Kind::Rebuild => "rebuild",
            Kind::Purge { .. } => "purge",
        }
    }
}

fn any<M: Message>(name: &str, message: &M) -> prost_types::Any {
    prost_types::Any {
        type_url: format!("type.googleapis.com/{name}"),
        value: message.encode_to_vec(),
    }
}

/// `steps` within `range`, or INVALID_ARGUMENT naming the field.
fn steps(given: Option<i32>, default: i32, range: std::ops::RangeInclusive<i32>) -> Result<i32, Status> {
    let steps = given.unwrap_or(default);
    if range.contains(&steps) {
        return Ok(steps);
    }
    let words = format!("steps must be from {} to {}, got {steps}", range.start(), range.end());
    Err(Status::with_error_details(
        tonic::Code::InvalidArgument,
        words.clone(),
        ErrorDetails::with_bad_request_violation("steps", words),
    ))
}

impl Jobs {
    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a job and answers its operation as it is now.
    fn start(&self, kind: Kind, steps: i32) -> Operation {
        let mut ledger = self.ledger();
        ledger.next += 1;
        let name = format!("operations/{}-{}", kind.prefix(), ledger.next);
        let job = Job {
            kind,
            polls: 0,
            steps,
            cancelled: false,
        };
        let operation = operation_of(&name, &job);
        ledger.jobs.insert(name, job);
        operation
    }
}

/// A job's operation: running with its progress, or done with its response or error.
fn operation_of(name: &str, job: &Job) -> Operation {
    let done = job.cancelled || job.polls >= job.steps;
    let progress = JobProgress {
        stage: if done { "done".into() } else { job.kind.stage().into() },
        steps_done: job.polls.min(job.steps),
        steps_total: job.steps,
    };
    let result = match (done, &job.kind) {
        (false, _) => None,
        (true, _) if job.cancelled => Some(operation::Result::Error(status(
            tonic::Code::Cancelled,
            "the job was cancelled",
            ErrorDetails::new(),
        ))),
        (true, Kind::Export { query }) => {
            let items: Vec<String> = inventory()
                .into_iter()
                .filter(|item| query.is_empty() || item.name.to_lowercase().contains(&query.to_lowercase()))
                .map(|item| item.id.to_string())
                .collect();
            let response = ExportCatalogResponse {
                uri: format!("file:///exports/{}.jsonl", name.trim_start_matches("operations/")),
                item_count: i32::try_from(items.len()).unwrap_or(i32::MAX),
                item_ids: items,
            };
            Some(operation::Result::Response(any(
                "demo.exports.v1.ExportCatalogResponse",
                &response,
            )))
        }
        (true, Kind::Reprice { currency_code }) => {
            let mut details = ErrorDetails::new();
            details.set_error_info(
                "NO_EXCHANGE_RATES",
                "exports.demo",
                [("currency_code".to_owned(), currency_code.clone())],
            );
            Some(operation::Result::Error(status(
                tonic::Code::FailedPrecondition,
                &format!("no exchange rates from EUR to {currency_code}"),
                details,
            )))
        }
        (true, Kind::Rebuild) => Some(operation::Result::Response(any(
            "demo.exports.v1.RebuildIndexResponse",
            &RebuildIndexResponse {
                documents: i32::try_from(inventory().len()).unwrap_or(i32::MAX),
            },
        ))),
        (true, Kind::Purge { prefix }) => Some(operation::Result::Response(any(
            "demo.exports.v1.PurgeCachesResponse",
            &PurgeCachesResponse {
                purged: if prefix.is_empty() { 3 } else { 1 },
            },
        ))),
    };
    Operation {
        name: name.to_owned(),
        metadata: Some(any("demo.exports.v1.JobProgress", &progress)),
        done,
        result,
    }
}

/// A `google.rpc.Status` for an operation's `error`, with its details.
fn status(code: tonic::Code, message: &str, details: ErrorDetails) -> crate::proto::rpc::Status {
    let with_details = Status::with_error_details(code, message, details);
    crate::proto::rpc::Status::decode(with_details.details()).unwrap_or(crate::proto::rpc::Status {
        code: code as i32,
        message: message.to_owned(),
        details: Vec::new(),
    })
}

#[tonic::async_trait]
impl ExportService for Jobs {
    async fn export_catalog(&self, request: Request<ExportCatalogRequest>) -> Result<Response<Operation>, Status> {
        self.control
            .enter("/demo.exports.v1.ExportService/ExportCatalog", request.metadata())
            .await;
        let request = request.into_inner();
        let steps = steps(request.steps, 3, 0..=20)?;
        Ok(Response::new(self.start(Kind::Export { query: request.query }, steps)))
    }

    async fn reprice_catalog(&self, request: Request<RepriceCatalogRequest>) -> Result<Response<Operation>, Status> {
        self.control
            .enter("/demo.exports.v1.ExportService/RepriceCatalog", request.metadata())
            .await;
        let request = request.into_inner();
        let steps = steps(request.steps, 2, 0..=20)?;
        let kind = Kind::Reprice {
            currency_code: request.currency_code,
        };
        Ok(Response::new(self.start(kind, steps)))
    }

    async fn rebuild_index(&self, request: Request<RebuildIndexRequest>) -> Result<Response<Operation>, Status> {
        self.control
            .enter("/demo.exports.v1.ExportService/RebuildIndex", request.metadata())
            .await;
        let steps = steps(request.into_inner().steps, 1000, 1..=100_000)?;
        Ok(Response::new(self.start(Kind::Rebuild, steps)))
    }

    async fn purge_caches(&self, request: Request<PurgeCachesRequest>) -> Result<Response<Operation>, Status> {
        self.control
            .enter("/demo.exports.v1.ExportService/PurgeCaches", request.metadata())
            .await;
        let prefix = request.into_inner().prefix;
        Ok(Response::new(self.start(Kind::Purge { prefix }, 1)))
    }
}

fn not_found(name: &str) -> Status {
    Status::not_found(format!("no operation {name:?}"))
}

#[tonic::async_trait]
impl Operations for Jobs {
    async fn list_operations(
        &self,
        request: Request<ListOperationsRequest>,
    ) -> Result<Response<ListOperationsResponse>, Status> {
        self.control
            .enter("/google.longrunning.Operations/ListOperations", request.metadata())
            .await;
        Err(Status::unimplemented("the demo does not list operations"))
    }

    /// Each poll of a running job moves it one step on.
    async fn get_operation(&self, request: Request<GetOperationRequest>) -> Result<Response<Operation>, Status> {
        self.control
            .enter("/google.longrunning.Operations/GetOperation", request.metadata())
            .await;
        let name = request.into_inner().name;
        let mut ledger = self.ledger();
        let job = ledger.jobs.get_mut(&name).ok_or_else(|| not_found(&name))?;
        if !job.cancelled && job.polls < job.steps {
            job.polls += 1;
        }
        Ok(Response::new(operation_of(&name, job)))
    }

    async fn delete_operation(&self, request: Request<DeleteOperationRequest>) -> Result<Response<()>, Status> {
        self.control
            .enter("/google.longrunning.Operations/DeleteOperation", request.metadata())
            .await;
        let name = request.into_inner().name;
        match self.ledger().jobs.remove(&name) {
            Some(_) => Ok(Response::new(())),
            None => Err(not_found(&name)),
        }
    }

    /// Cancels a running job (it is then done with CANCELLED); a done one stays as it is.
    async fn cancel_operation(&self, request: Request<CancelOperationRequest>) -> Result<Response<()>, Status> {
        self.control
            .enter("/google.longrunning.Operations/CancelOperation", request.metadata())
            .await;
        let name = request.into_inner().name;
        let mut ledger = self.ledger();
        let job = ledger.jobs.get_mut(&name).ok_or_else(|| not_found(&name))?;
        if job.polls < job.steps {
            job.cancelled = true;
        }
        Ok(Response::new(()))
    }

    async fn wait_operation(&self, request: Request<WaitOperationRequest>) -> Result<Response<Operation>, Status> {
        self.control
            .enter("/google.longrunning.Operations/WaitOperation", request.metadata())
            .await;
        Err(Status::unimplemented(
            "the demo does not wait on operations; poll GetOperation",
        ))
    }
}

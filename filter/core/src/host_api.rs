//! Everything a host (the proxy-wasm filter in `filter/wasm`, the dynamic module in
//! `filter/module`) uses of the core, and the only path its code imports the core by
//! (`tests/host_api.rs` fails on any other; a host's tests may read deeper). Its breadth is
//! the seam's: narrowing the seam means taking a name out of here.

// One request's life: the events a host hands in, what it asks of the host.
pub use crate::exchange::{AfterPanic, Answer, Exchange, ExchangeHost, ReentrantExchange, RequestHead, Step};
// For a host with one timer for all its requests: what it keeps for them.
pub use crate::exchange::{timer_period, Ending, OpenStream, RequestHandle, Timetable};

// The configuration: read once per plugin configuration, shared by its requests.
pub use crate::config::{ConfigError, TokenPayloadSource};
pub use crate::configure::{process_key, shared_process_key, Build, ServedServer, ServerRef};
pub use crate::server::{RequestFacts, Server};

// A call the core starts, and what the host hears of it.
pub use crate::grpc::call_end::{CallPart, WholeCallResponse};
pub use crate::streams::CallKind;
pub use crate::upstream::{UpstreamCall, ROUTED_CALL_FILTER_STATE};

// Headers as the host hands them in and writes them out.
pub use crate::http::{HeaderCopy, HeaderList, HeaderPair};

// Cancellations: the key a request listens on and a cancel is filed under.
pub use crate::cancel::CancelKey;

// Live discovery: the reflection rounds a host runs for the configuration.
pub use crate::reflection::ReflectionCall;

// The rate limits' counters, shared between workers through the host.
pub use crate::quota::counters::{Conflict, Counters, Expect, MemoryCounters, SharedCounters};

// Stats and access-log fields, as each request and configuration tells them.
pub use crate::observe::{MetricKind, Observations, Sample, StatIds, STAT_NAME_BYTES, STAT_PREFIX};

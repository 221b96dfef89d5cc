//! A call in a task's life: what the request it serves asked for, which Operations call it
//! is, and what the task knows so far. Carried by the call itself ([`crate::upstream`]), so that
//! nothing about a task is kept between requests.

use std::time::Duration;

use super::EpochMs;

/// A call in a task's life, and what its end leads to.
#[derive(Debug)]
pub(crate) struct TaskStep {
    pub(crate) purpose: Purpose,
    pub(crate) stage: Stage,
    /// The operation, once known: from the task id, or the method's answer.
    pub(crate) operation: Option<String>,
    /// The task id and its creation time, when the request named one.
    pub(crate) task: Option<(String, EpochMs)>,
    /// When waiting ends, on the host's clock (set by the first call's end).
    pub(crate) until: Option<Duration>,
    /// The identity of the caller, for the id of the task it makes.
    pub(crate) identity: Vec<u8>,
}

/// What the request a step serves asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// `tools/call` from a caller that declared tasks: the task, at once (`modern`: the
    /// 2026-07-28 extension's `resultType: "task"`; else 2025-11-25's `CreateTaskResult`).
    Create { modern: bool },
    /// `tools/call` from a caller that did not: the result, once the operation is done, within
    /// the tool's deadline.
    Wait,
    /// `tasks/get`.
    Get { modern: bool },
    /// `tasks/result` (2025-11-25): the result, once the operation is done, within the tool's
    /// deadline.
    Result,
    /// `tasks/cancel`. 2026-07-28 (`modern`) acknowledges a `CancelOperation`; 2025-11-25 must
    /// refuse a task that is done already, so it reads the operation first.
    Cancel { modern: bool },
}

impl Purpose {
    /// The MCP method the step serves, for the stats.
    pub(crate) fn method(self) -> &'static str {
        match self {
            Purpose::Create { .. } | Purpose::Wait => "tools/call",
            Purpose::Get { .. } => "tasks/get",
            Purpose::Result => "tasks/result",
            Purpose::Cancel { .. } => "tasks/cancel",
        }
    }
}

/// Which call a step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The task tool's own method, which answers the Operation it started.
    Start,
    GetOperation,
    CancelOperation,
}

impl Stage {
    pub(crate) fn method(self) -> &'static str {
        match self {
            Stage::Start => "",
            Stage::GetOperation => "GetOperation",
            Stage::CancelOperation => "CancelOperation",
        }
    }

    pub(crate) fn path(self) -> &'static str {
        match self {
            Stage::Start => "",
            Stage::GetOperation => "/google.longrunning.Operations/GetOperation",
            Stage::CancelOperation => "/google.longrunning.Operations/CancelOperation",
        }
    }
}

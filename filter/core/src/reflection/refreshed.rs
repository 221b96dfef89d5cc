//! How a refresh ends, and what the host does after each answer it files.

use smallvec::smallvec;

use super::ReflectionCall;
use crate::observe::{Metric, Sample};
use crate::server::Server;

/// How a refresh ended.
#[derive(Debug)]
pub enum Refreshed {
    /// The services' API differs from the last good one: serve this server from now on.
    Changed { server: Box<Server>, declined: Declined },
    /// The same descriptors as the last good refresh.
    Unchanged,
    /// Nothing usable came; the last good server stays. Says why.
    Failed(String),
}

impl Refreshed {
    /// One count of this outcome, for the host's stats.
    pub fn sample(&self) -> Sample<'static> {
        Sample {
            metric: Metric::ReflectionRefreshes,
            labels: smallvec![self.label()],
            value: 1,
        }
    }

    /// The `outcome` label of the refresh counter.
    pub fn label(&self) -> &'static str {
        match self {
            Refreshed::Changed { .. } => "changed",
            Refreshed::Unchanged => "unchanged",
            Refreshed::Failed(_) => "failed",
        }
    }

    /// Logs how the refresh ended, for a host whose current server has `before` tools.
    pub fn log(&self, before: usize) {
        match self {
            Refreshed::Changed { server, declined } => {
                log::info!(
                    "gRPC server reflection: serving {} tools (before: {before}){}",
                    server.catalog().tool_count(),
                    declined.unasked_note()
                );
                if !declined.replacements.is_empty() {
                    log::warn!("gRPC server reflection: {}", declined.replacements.join("; "));
                }
            }
            Refreshed::Unchanged => {}
            Refreshed::Failed(why) => {
                log::warn!("gRPC server reflection failed, keeping the last good catalog ({before} tools): {why}")
            }
        }
    }
}

/// What a refresh's answers held that it does not serve.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Declined {
    /// Files beyond the ones asked for and their imports.
    pub unasked: usize,
    /// Files that would have replaced a different file of the same name (one the
    /// configuration or the filter supplies, or another cluster gave first): which copy was
    /// kept, in words.
    pub replacements: Vec<String>,
}

impl Declined {
    /// A few words for the refresh's log line, if any file was left out unasked.
    fn unasked_note(&self) -> String {
        match self.unasked {
            0 => String::new(),
            1 => "; ignored 1 file sent unasked".to_owned(),
            count => format!("; ignored {count} files sent unasked"),
        }
    }
}

/// What the host does after filing an answer.
#[derive(Debug)]
pub enum Step {
    /// Make these calls (the next round), then wait for them.
    Call(Vec<ReflectionCall>),
    /// Other calls of this round are still out.
    Wait,
    Done(Refreshed),
}

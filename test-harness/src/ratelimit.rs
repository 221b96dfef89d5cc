//! A rate limit service for the tests: Envoy's `ShouldRateLimit` protocol over one shared
//! counter per limit and time window, with the configuration and matching rules of
//! envoyproxy/ratelimit (a domain, a tree of descriptor keys and values, a limit per leaf,
//! fixed windows of a second, a minute, an hour or a day). It stands in for that service,
//! which is written in Go and cannot be built here; several Envoys pointed at one peer share
//! one budget, as they would through envoyproxy/ratelimit and its Redis.
//!
//! The configuration, as JSON, in the shape of envoyproxy/ratelimit's YAML:
//!
//! ```json
//! {"domain": "switchblade", "descriptors": [
//!   {"key": "tool", "value": "UserService_GetUser",
//!    "descriptors": [{"key": "caller", "rate_limit": {"unit": "second", "requests_per_unit": 2}}]},
//!   {"key": "caller", "rate_limit": {"unit": "minute", "requests_per_unit": 100}}]}
//! ```
//!
//! A descriptor of the request matches when each of its entries, in order, finds a node with
//! its key and value, or else with its key and no value (then each value counts apart), and
//! the last node has a limit; any other descriptor is not limited. Every descriptor of a
//! request is counted, even when another is over its limit, as envoyproxy/ratelimit does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use tonic::{Request, Response, Status};

use crate::proto::ratelimit::rate_limit_response::{rate_limit::Unit, Code, DescriptorStatus, RateLimit};
use crate::proto::ratelimit::rate_limit_service_server::RateLimitService;
use crate::proto::ratelimit::{RateLimitDescriptor, RateLimitRequest, RateLimitResponse};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub domain: String,
    #[serde(default)]
    pub descriptors: Vec<Node>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub key: String,
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub rate_limit: Option<Limit>,
    #[serde(default)]
    pub descriptors: Vec<Node>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    pub unit: TimeUnit,
    pub requests_per_unit: u32,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeUnit {
    Second,
    Minute,
    Hour,
    Day,
}

impl TimeUnit {
    fn seconds(self) -> u64 {
        match self {
            TimeUnit::Second => 1,
            TimeUnit::Minute => 60,
            TimeUnit::Hour => 3600,
            TimeUnit::Day => 86_400,
        }
    }

    fn wire(self) -> Unit {
        match self {
            TimeUnit::Second => Unit::Second,
            TimeUnit::Minute => Unit::Minute,
            TimeUnit::Hour => Unit::Hour,
            TimeUnit::Day => Unit::Day,
        }
    }
}

/// What the peer has seen and how it behaves, shared with its control API.
#[derive(Debug, Default)]
pub struct State {
    /// Hits per counter (the descriptor's path and its window).
    counters: HashMap<String, u64>,
    /// `ShouldRateLimit` calls received.
    pub requests: u64,
    /// How long each answer waits (a slow service).
    pub delay: Duration,
}

#[derive(Clone)]
pub struct RateLimiter {
    config: Arc<Config>,
    pub state: Arc<Mutex<State>>,
}

impl RateLimiter {
    pub fn new(config: Config) -> Self {
        RateLimiter {
            config: Arc::new(config),
            state: Arc::default(),
        }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The answer to one request at `now` (since the Unix epoch), counted.
    pub fn answer(&self, request: &RateLimitRequest, now: Duration) -> RateLimitResponse {
        let hits = u64::from(request.hits_addend.max(1));
        let mut state = self.lock();
        state.requests += 1;
        let statuses: Vec<DescriptorStatus> = request
            .descriptors
            .iter()
            .map(|descriptor| {
                let matched = (request.domain == self.config.domain)
                    .then(|| find(&self.config.descriptors, descriptor))
                    .flatten();
                let Some((path, limit)) = matched else {
                    return DescriptorStatus {
                        code: Code::Ok.into(),
                        ..DescriptorStatus::default()
                    };
                };
                let unit = limit.unit.seconds();
                let window = now.as_secs() - now.as_secs() % unit;
                let counter = state
                    .counters
                    .entry(format!("{}|{path}|{window}", request.domain))
                    .or_default();
                *counter += hits;
                let allowed = u64::from(limit.requests_per_unit);
                let reset = Duration::from_secs(window + unit).saturating_sub(now);
                DescriptorStatus {
                    code: if *counter > allowed { Code::OverLimit } else { Code::Ok }.into(),
                    current_limit: Some(RateLimit {
                        requests_per_unit: limit.requests_per_unit,
                        unit: limit.unit.wire().into(),
                        name: String::new(),
                    }),
                    limit_remaining: u32::try_from(allowed.saturating_sub(*counter)).unwrap_or(u32::MAX),
                    duration_until_reset: prost_types::Duration::try_from(reset).ok(),
                }
            })
            .collect();
        let over = statuses.iter().any(|status| status.code == i32::from(Code::OverLimit));
        RateLimitResponse {
            overall_code: if over { Code::OverLimit } else { Code::Ok }.into(),
            statuses,
        }
    }
}

/// The limit a descriptor matches, and the path of keys and values its counter is kept under.
fn find<'a>(nodes: &'a [Node], descriptor: &RateLimitDescriptor) -> Option<(String, &'a Limit)> {
    let mut level = nodes;
    let mut path = Vec::new();
    let mut last = None;
    for entry in &descriptor.entries {
        let node = level
            .iter()
            .find(|node| node.key == entry.key && node.value.as_deref() == Some(entry.value.as_str()))
            .or_else(|| level.iter().find(|node| node.key == entry.key && node.value.is_none()))?;
        path.push(format!("{}={}", entry.key, entry.value));
        level = &node.descriptors;
        last = Some(node);
    }
    let limit = last?.rate_limit.as_ref()?;
    Some((path.join(","), limit))
}

#[tonic::async_trait]
impl RateLimitService for RateLimiter {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let delay = self.lock().delay;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Ok(Response::new(self.answer(request.get_ref(), now)))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::proto::ratelimit::rate_limit_descriptor::Entry;

    fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
        RateLimitDescriptor {
            entries: entries
                .iter()
                .map(|(key, value)| Entry {
                    key: (*key).into(),
                    value: (*value).into(),
                })
                .collect(),
        }
    }

    fn limiter() -> RateLimiter {
        RateLimiter::new(
            serde_json::from_str(
                r#"{"domain": "d", "descriptors": [
                    {"key": "tool", "value": "T", "descriptors": [{"key": "caller", "rate_limit": {"unit": "second", "requests_per_unit": 2}}]},
                    {"key": "caller", "value": "vip"}]}"#,
            )
            .unwrap(),
        )
    }

    #[test]
    fn each_value_of_a_key_without_a_value_counts_apart_in_its_window() {
        let limiter = limiter();
        let request = |caller: &str| RateLimitRequest {
            domain: "d".into(),
            descriptors: vec![
                descriptor(&[("caller", caller)]),
                descriptor(&[("tool", "T"), ("caller", caller)]),
            ],
            hits_addend: 0,
        };
        let at = Duration::from_millis(10_250);
        let codes = |response: RateLimitResponse| response.statuses.iter().map(|s| s.code).collect::<Vec<_>>();
        assert_eq!(codes(limiter.answer(&request("a"), at)), [1, 1]);
        assert_eq!(codes(limiter.answer(&request("a"), at)), [1, 1]);
        let over = limiter.answer(&request("a"), at);
        assert_eq!(over.overall_code, 2);
        assert_eq!(codes(over.clone()), [1, 2]);
        assert_eq!(
            over.statuses[1].duration_until_reset,
            Some(prost_types::Duration {
                seconds: 0,
                nanos: 750_000_000
            })
        );
        assert_eq!(limiter.answer(&request("b"), at).overall_code, 1, "another caller");
        assert_eq!(
            limiter.answer(&request("a"), Duration::from_secs(11)).overall_code,
            1,
            "the next window"
        );
        let other_domain = RateLimitRequest {
            domain: "x".into(),
            ..request("a")
        };
        assert_eq!(limiter.answer(&other_domain, at).overall_code, 1);
        assert_eq!(limiter.lock().requests, 6);
    }
}

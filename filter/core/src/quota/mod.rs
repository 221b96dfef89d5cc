//! Rate limits and concurrency caps per tool and caller (`limits.rules`), resolved against
//! the catalog, and the checks a call passes before it reaches the upstream: the caller's
//! rate across every tool (`*`), the rate of its method or service rule, that rule's calls in
//! flight, and the rate limit service a fleet shares (`limits.rate_limit_service`).
//!
//! The state is bytes under keys in counters every worker shares ([`counters`]); the
//! arithmetic on them is here ([`bucket`], [`in_flight`]), host-free, on the host's clock.

pub mod bucket;
pub(crate) mod callers;
pub mod counters;
pub mod in_flight;
pub mod rls;

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use prost::Message;

use crate::access::Caller;
use crate::catalog::{Catalog, Tool};
use crate::config::quota::EVERY_TOOL;
use crate::config::{
    parse_selector, AddressPrefix, CallerSource, ConfigError, LimitRule, PluginConfig, RateLimitService,
};
use crate::grpc::frame::grpc_frame;
use crate::http::retry_after_ms;
use bucket::{Bucket, Take};
pub use callers::CallerKey;
use callers::Places;
use counters::{update, Contended, Counters, Lease};
use in_flight::Acquired;

/// How long after a call's deadline its place in flight lapses if nobody gave it back (a Wasm
/// VM that died with calls out): past the deadline, and past the module's router timeout.
const LEASE_GRACE: Duration = Duration::from_secs(5);
/// When to retry where no time is known: a call in flight ending, a service that failed.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);
/// The caller's key when the host gave no client address, or the token lacks the claim:
/// such callers share one budget.
pub const UNKNOWN_CALLER: &str = "(unknown)";

/// The limits of a configuration, resolved against its catalog.
#[derive(Debug)]
pub struct Quota {
    rules: Vec<Rule>,
    /// Tool name → its method's rule, or else its service's (an index into `rules`).
    by_tool: HashMap<String, usize>,
    /// The `*` rule (an index into `rules`).
    every_tool: Option<usize>,
    caller: CallerSource,
    address_prefix: AddressPrefix,
    /// Where callers' buckets live: `limits.max_callers` places per rate rule.
    places: Places,
    service: Option<RateLimitService>,
}

#[derive(Debug)]
struct Rule {
    /// Where it is in `limits.rules`, for the words of a refusal.
    index: usize,
    selector: String,
    rate: Option<Rate>,
    max_in_flight: Option<u32>,
}

#[derive(Debug, Clone, Copy)]
struct Rate {
    bucket: Bucket,
    per_second: f64,
    burst: u32,
}

/// A call, or a request, over a limit: the words a client reads, and when to retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limited {
    pub message: String,
    pub retry_after: Duration,
}

impl Quota {
    /// The configuration's limits, if it has any; a rule whose `match` names no configured
    /// service and no exposed tool's method is refused, since a typo would limit nothing.
    pub fn build(config: &PluginConfig, catalog: &Catalog) -> Result<Option<Self>, ConfigError> {
        let limits = &config.limits;
        if limits.rules.is_empty() && limits.rate_limit_service.is_none() {
            return Ok(None);
        }
        let mut rules = Vec::with_capacity(limits.rules.len());
        for (index, rule) in limits.rules.iter().enumerate() {
            check_selector(index, rule, config, catalog)?;
            let rate = rule
                .requests_per_second
                .zip(rule.burst_size())
                .map(|(per_second, burst)| Rate {
                    bucket: Bucket::new(per_second, burst),
                    per_second,
                    burst,
                });
            rules.push(Rule {
                index,
                selector: rule.selector.clone(),
                rate,
                max_in_flight: rule.max_in_flight,
            });
        }
        let position = |selector: &str| rules.iter().position(|rule| rule.selector == selector);
        let by_tool = catalog
            .tools()
            .filter_map(|tool| {
                let method = format!("{}/{}", tool.service_name(), tool.method_name());
                let rule = position(&method).or_else(|| position(tool.service_name()))?;
                Some((tool.name.clone(), rule))
            })
            .collect();
        Ok(Some(Quota {
            every_tool: position(EVERY_TOOL),
            by_tool,
            rules,
            caller: config.caller_source(),
            address_prefix: limits.client_address_prefix,
            places: Places::new(config.tasks.process_key.as_ref().map(|key| &key.0), limits.max_callers),
            service: limits.rate_limit_service.clone(),
        }))
    }

    /// What the limits count a caller by, in words for the log at load: where the address
    /// comes from matters, since a client that Envoy lets name its own address names its own
    /// bucket.
    pub fn describe_callers(&self) -> String {
        match &self.caller {
            CallerSource::Claim(claim) => format!(
                "callers are counted by the verified token's claim {:?}",
                claim.names().join(".")
            ),
            CallerSource::ClientAddress => format!(
                "callers are counted by Envoy's downstream address (source.address), IPv4 by /{} and IPv6 by /{}: \
                 the connection's peer when the HTTP connection manager sets use_remote_address: true \
                 (or, behind trusted proxies, the X-Forwarded-For entry xff_num_trusted_hops names); \
                 without use_remote_address it is the last X-Forwarded-For entry, which a client writes itself \
                 (docs/rate-limits.md, \"Who is a caller, by address\")",
                self.address_prefix.ipv4, self.address_prefix.ipv6
            ),
        }
    }

    /// Whether the caller's key is its address, which the host then reads (`source.address`).
    pub fn reads_client_address(&self) -> bool {
        self.caller == CallerSource::ClientAddress
    }

    /// The rate limit service every call is checked with, if one is configured.
    pub fn service(&self) -> Option<&RateLimitService> {
        self.service.as_ref()
    }

    /// The key a caller is counted under: the verified token's claim, or the client's
    /// address (the host's `source.address`; a port after it is cut, and the address is cut to
    /// `limits.client_address_prefix`).
    pub fn caller_key(&self, caller: &Caller, client_address: Option<&str>) -> CallerKey {
        let key = match (&self.caller, caller) {
            (CallerSource::Claim(_), Caller::Verified { key, .. }) => key.clone(),
            (CallerSource::Claim(_), _) => None,
            (CallerSource::ClientAddress, _) => client_address.map(|address| address_key(address, self.address_prefix)),
        };
        let text = key
            .filter(|key| !key.is_empty())
            .unwrap_or_else(|| UNKNOWN_CALLER.to_owned());
        self.places.key(text)
    }

    /// Takes `count` calls from the caller's rate across every tool (the `*` rule), all or
    /// none.
    pub fn take_every_tool(
        &self,
        counters: &Counters,
        caller: &CallerKey,
        count: usize,
        now: Duration,
    ) -> Result<(), Limited> {
        let Some(rule) = self.every_tool.and_then(|index| self.rules.get(index)) else {
            return Ok(());
        };
        let Some(rate) = rule.rate else {
            return Ok(());
        };
        let count = u32::try_from(count).unwrap_or(u32::MAX);
        match callers::take(&**counters, &rule.selector, caller, rate.bucket, count, now) {
            Ok(Take::Taken) => Ok(()),
            Err(Contended) => Err(contended(
                "Too Many Requests: this caller's calls across every tool",
                rule,
                "",
            )),
            Ok(Take::Refused { retry_after }) => {
                let retry_after = retry_after.unwrap_or_else(|| full_refill(rate));
                let batch = match count {
                    1 => String::new(),
                    count if count > rate.burst => format!(
                        "; this request has {count} calls, more than it may ever make at once: send at most {} per request",
                        rate.burst
                    ),
                    count => format!("; this request has {count} calls"),
                };
                let message = format!(
                    "Too Many Requests: this caller may make {} tool calls per second across every tool, {} at once ({}){batch}; retry after {} ms",
                    rate.per_second,
                    rate.burst,
                    rule.names(),
                    retry_after_ms(retry_after)
                );
                Err(Limited { message, retry_after })
            }
        }
    }

    /// Takes one call from the caller's rate under the tool's method or service rule.
    pub fn take_tool(
        &self,
        counters: &Counters,
        caller: &CallerKey,
        tool: &Tool,
        now: Duration,
    ) -> Result<(), Limited> {
        let Some(rule) = self.rule_of(tool) else {
            return Ok(());
        };
        let Some(rate) = rule.rate else {
            return Ok(());
        };
        match callers::take(&**counters, &rule.selector, caller, rate.bucket, 1, now) {
            Ok(Take::Taken) => Ok(()),
            Err(Contended) => Err(contended(
                &format!("Rate limited: {}'s calls", tool.name),
                rule,
                " The call was not sent.",
            )),
            Ok(Take::Refused { retry_after }) => {
                let retry_after = retry_after.unwrap_or_else(|| full_refill(rate));
                let message = format!(
                    "Rate limited: {} allows each caller {} calls per second, {} at once ({}); retry after {} ms. The call was not sent.",
                    tool.name,
                    rate.per_second,
                    rate.burst,
                    rule.names(),
                    retry_after_ms(retry_after)
                );
                Err(Limited { message, retry_after })
            }
        }
    }

    /// A place among the calls in flight of the tool's rule, held until the call is dropped;
    /// `None` when the rule caps none.
    pub fn lease(&self, counters: &Counters, tool: &Tool, now: Duration) -> Result<Option<Lease>, Limited> {
        let Some(rule) = self.rule_of(tool) else {
            return Ok(None);
        };
        let Some(max) = rule.max_in_flight else {
            return Ok(None);
        };
        let key = in_flight_key(&rule.selector);
        let until = now + tool.timeout + LEASE_GRACE;
        let acquired = update(&**counters, &key, |bytes| in_flight::acquire(bytes, now, until, max));
        match acquired {
            Ok(Acquired::Leased(id)) => Ok(Some(Lease::new(std::sync::Arc::clone(counters), key, id))),
            Ok(Acquired::Full) => Err(Limited {
                message: format!(
                    "Rate limited: {} allows {max} calls in flight at once, and {max} are out ({}); retry after {} ms. The call was not sent.",
                    tool.name,
                    rule.names(),
                    retry_after_ms(DEFAULT_RETRY_AFTER)
                ),
                retry_after: DEFAULT_RETRY_AFTER,
            }),
            Err(Contended) => Err(contended(
                &format!("Rate limited: {}'s calls in flight", tool.name),
                rule,
                " The call was not sent.",
            )),
        }
    }

    /// The gRPC frame of the rate limit service check of one call (none without a service).
    pub fn check_frame(&self, caller: &CallerKey, tool: &Tool) -> Option<Vec<u8>> {
        let service = self.service.as_ref()?;
        let rule = self.rule_of(tool).map(|rule| rule.selector.as_str());
        let request = rls::RateLimitRequest {
            domain: service.domain.clone(),
            descriptors: rls::descriptors(&caller.text, &tool.name, rule),
            hits_addend: 0,
        };
        Some(grpc_frame(&request.encode_to_vec()))
    }

    fn rule_of(&self, tool: &Tool) -> Option<&Rule> {
        self.by_tool.get(&tool.name).and_then(|index| self.rules.get(*index))
    }
}

impl Rule {
    /// `limits.rules[1], match "demo.catalog.v1.CatalogService"`.
    fn names(&self) -> String {
        format!("limits.rules[{}], match {:?}", self.index, self.selector)
    }
}

/// A limit whose shared counters other workers kept writing, try after try: the call is
/// refused (a limit that cannot be counted is not let through), to be retried shortly.
fn contended(what: &str, rule: &Rule, sent: &str) -> Limited {
    log::warn!("the counters of {} stayed contended; a call was refused", rule.names());
    Limited {
        message: format!(
            "{what} came faster than their limit could be counted ({}); retry after {} ms.{sent}",
            rule.names(),
            retry_after_ms(DEFAULT_RETRY_AFTER)
        ),
        retry_after: DEFAULT_RETRY_AFTER,
    }
}

fn in_flight_key(selector: &str) -> String {
    format!("quota/in_flight/{selector}")
}

/// The time an empty bucket takes to fill.
fn full_refill(rate: Rate) -> Duration {
    Duration::from_secs_f64(f64::from(rate.burst) / rate.per_second)
}

/// The caller an address is: without its port, and cut to the configured prefix
/// (`2001:db8:1:2::9` → `2001:db8:1:2::/64`; an IPv4-mapped IPv6 address is IPv4). What is not
/// an IP address (a pipe's path) stays as it is.
fn address_key(address: &str, prefix: AddressPrefix) -> String {
    let host = without_port(address);
    let Ok(ip) = host.parse::<IpAddr>() else {
        return host.to_owned();
    };
    match ip.to_canonical() {
        IpAddr::V4(ip) if prefix.ipv4 >= 32 => ip.to_string(),
        IpAddr::V4(ip) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix.ipv4)).unwrap_or(0);
            format!("{}/{}", std::net::Ipv4Addr::from(u32::from(ip) & mask), prefix.ipv4)
        }
        IpAddr::V6(ip) if prefix.ipv6 >= 128 => ip.to_string(),
        IpAddr::V6(ip) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix.ipv6)).unwrap_or(0);
            format!("{}/{}", std::net::Ipv6Addr::from(u128::from(ip) & mask), prefix.ipv6)
        }
    }
}

/// `127.0.0.1:5432` → `127.0.0.1`, `[::1]:5432` → `::1`; an address without a port stays.
fn without_port(address: &str) -> &str {
    if let Some(rest) = address.strip_prefix('[') {
        if let Some((host, _)) = rest.split_once(']') {
            return host;
        }
    }
    match address.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => address,
    }
}

fn check_selector(index: usize, rule: &LimitRule, config: &PluginConfig, catalog: &Catalog) -> Result<(), ConfigError> {
    let name = rule.selector.as_str();
    if name == EVERY_TOOL {
        return Ok(());
    }
    let known = catalog.is_pending(name)
        || match parse_selector(name) {
            Some((service, method)) => {
                catalog.is_pending(service)
                    || catalog
                        .tools()
                        .any(|tool| tool.service_name() == service && tool.method_name() == method)
            }
            None => config.services.iter().any(|(service, _)| service == name),
        };
    if known {
        return Ok(());
    }
    let services: Vec<&str> = config.services.iter().map(|(service, _)| service).collect();
    Err(ConfigError(format!(
        "at `limits.rules[{index}].match`: {name:?} names no configured service and no exposed tool's method; write a service from `services` ({}), `package.Service/Method` of a tool, or \"*\" for every tool",
        services.join(", ")
    )))
}

#[cfg(test)]
mod tests;

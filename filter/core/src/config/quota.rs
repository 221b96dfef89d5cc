//! `limits.caller`, `limits.rules` and `limits.rate_limit_service`: who the rate limits count,
//! the limits of each tool, service and caller, and the rate limit service a fleet shares.
//! Checked here as far as no descriptors are needed; whether a rule's `match` names a tool is
//! checked against the catalog ([`crate::quota`]).

use serde::Deserialize;

use super::{ClaimPath, ConfigError, PluginConfig};

/// The selector of the rule that covers a caller's calls to every tool.
pub const EVERY_TOOL: &str = "*";
pub const DEFAULT_RATE_LIMIT_TIMEOUT_MS: u64 = 100;
/// Past this many tokens a second, a bucket's arithmetic (in millionths of a token) would
/// overflow in a day of refill; no upstream needs more from one caller.
pub const MAX_REQUESTS_PER_SECOND: f64 = 1_000_000.0;

/// Who the rate limits count.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum CallerSource {
    /// The client's address (Envoy's `source.address`, without the port).
    ClientAddress,
    /// A claim of the verified token (`authorization` reads the token): a name, or a path of
    /// names into nested objects.
    Claim(ClaimPath),
}

/// The callers whose rates are held at once, per rate rule, unless configured: about 32 bytes
/// of state and its key each, in shared data (Wasm) or memory (module).
pub const DEFAULT_MAX_CALLERS: u32 = 10_000;
/// Past this, the table of callers is a memory cost no Envoy should pay unasked.
pub const MAX_MAX_CALLERS: u32 = 1_000_000;

/// How many addresses one caller is, when callers are counted by address.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AddressPrefix {
    /// The prefix length an IPv4 caller is counted by (32: each address).
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 32)))]
    pub ipv4: u8,
    /// The prefix length an IPv6 caller is counted by (64: each host's network, which it may
    /// rotate addresses through).
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 128)))]
    pub ipv6: u8,
}

impl Default for AddressPrefix {
    fn default() -> Self {
        AddressPrefix { ipv4: 32, ipv6: 64 }
    }
}

/// One limit: a token bucket per caller, a cap on calls in flight, or both.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LimitRule {
    /// A method (`package.Service/Method`), a service (`package.Service`), or `*`: a caller's
    /// calls to every tool. A call passes its method's rule if there is one, else its
    /// service's; and the `*` rule.
    #[serde(rename = "match")]
    pub selector: String,
    /// Calls each caller may make per second under this rule, on average (a token bucket per
    /// caller and rule, refilled at this rate).
    #[cfg_attr(feature = "schema", schemars(extend("exclusiveMinimum" = 0, "maximum" = MAX_REQUESTS_PER_SECOND)))]
    pub requests_per_second: Option<f64>,
    /// Calls a caller may make at once after a quiet spell (the bucket's size); unset: the
    /// rate rounded up, and at least 1.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub burst: Option<u32>,
    /// Calls under this rule out to the upstream at once, from every caller together (a
    /// method or service rule only).
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_in_flight: Option<u32>,
}

impl LimitRule {
    /// The bucket's size, for a rule with a rate.
    pub fn burst_size(&self) -> Option<u32> {
        let rate = self.requests_per_second?;
        // The rate is checked to be at most a million: the cast cannot truncate.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let rounded = rate.ceil().max(1.0) as u32;
        Some(self.burst.unwrap_or(rounded))
    }
}

/// A rate limit service that speaks Envoy's `envoy.service.ratelimit.v3.RateLimitService`
/// (envoyproxy/ratelimit, for one).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RateLimitService {
    /// The Envoy cluster (HTTP/2) of the service.
    pub cluster: String,
    /// The domain of every request: the service's configuration for these limits.
    pub domain: String,
    /// How long a check may take before `failure_mode` decides.
    #[serde(default = "default_rate_limit_timeout_ms")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub timeout_ms: u64,
    /// What a call gets when the service fails to answer in time: `allow` (go on) or `deny`
    /// (a rate-limited tool error).
    #[serde(default)]
    pub failure_mode: FailureMode,
}

/// What a call gets when the rate limit service is down or slow.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum FailureMode {
    /// The call goes on, limited by the local rules alone (Envoy's rate limit filter's
    /// default too).
    #[default]
    Allow,
    /// The call is refused, as over a limit.
    Deny,
}

impl FailureMode {
    pub fn label(self) -> &'static str {
        match self {
            FailureMode::Allow => "allow",
            FailureMode::Deny => "deny",
        }
    }
}

impl PluginConfig {
    /// Who the rate limits count: `limits.caller`, or by default the token's `sub` under
    /// `authorization` and the client's address without it.
    pub fn caller_source(&self) -> CallerSource {
        match (&self.limits.caller, &self.authorization) {
            (Some(source), _) => source.clone(),
            (None, Some(_)) => CallerSource::Claim(ClaimPath::Name(DEFAULT_CALLER_CLAIM.to_owned())),
            (None, None) => CallerSource::ClientAddress,
        }
    }
}

/// The claim callers are counted by under `authorization`, unless `limits.caller` says: the
/// token's subject.
pub const DEFAULT_CALLER_CLAIM: &str = "sub";

fn default_rate_limit_timeout_ms() -> u64 {
    DEFAULT_RATE_LIMIT_TIMEOUT_MS
}

/// The checks of `limits.caller`, `limits.rules` and `limits.rate_limit_service` that need no
/// descriptors.
pub(super) fn check(config: &PluginConfig) -> Result<(), ConfigError> {
    let limits = &config.limits;
    if let Some(CallerSource::Claim(claim)) = &limits.caller {
        let names = claim.names();
        if names.is_empty() || names.iter().any(String::is_empty) {
            return Err(ConfigError(
                "at `limits.caller.claim`: a claim name must not be empty; write a name like \"sub\", or a path like [\"client\", \"id\"]".into(),
            ));
        }
        if config.authorization.is_none() {
            return Err(ConfigError(format!(
                "at `limits.caller`: the claim {:?} is read from the verified token, and `authorization` (which reads the token) is not configured; \
                 configure `authorization`, or count callers by \"client_address\"",
                names.join(".")
            )));
        }
    }
    let prefix = limits.client_address_prefix;
    if !(1..=32).contains(&prefix.ipv4) {
        return Err(ConfigError(format!(
            "at `limits.client_address_prefix.ipv4`: {} is not a prefix length between 1 and 32",
            prefix.ipv4
        )));
    }
    if !(1..=128).contains(&prefix.ipv6) {
        return Err(ConfigError(format!(
            "at `limits.client_address_prefix.ipv6`: {} is not a prefix length between 1 and 128",
            prefix.ipv6
        )));
    }
    if !(1..=MAX_MAX_CALLERS).contains(&limits.max_callers) {
        return Err(ConfigError(format!(
            "at `limits.max_callers`: {} is not between 1 and {MAX_MAX_CALLERS}",
            limits.max_callers
        )));
    }
    for (index, rule) in limits.rules.iter().enumerate() {
        check_rule(index, rule)?;
        if let Some(first) = limits.rules[..index]
            .iter()
            .position(|earlier| earlier.selector == rule.selector)
        {
            return Err(ConfigError(format!(
                "at `limits.rules[{index}].match`: {:?} is matched by `limits.rules[{first}]` already; write one rule per match",
                rule.selector
            )));
        }
    }
    if let Some(service) = &limits.rate_limit_service {
        let at = |key: &str| format!("at `limits.rate_limit_service.{key}`");
        if service.cluster.trim().is_empty() {
            return Err(ConfigError(format!(
                "{}: empty; give the Envoy cluster (HTTP/2) of the rate limit service",
                at("cluster")
            )));
        }
        if service.domain.trim().is_empty() {
            return Err(ConfigError(format!(
                "{}: empty; give the domain of the rate limit service's configuration for these limits",
                at("domain")
            )));
        }
        if service.timeout_ms == 0 {
            return Err(ConfigError(format!("{}: must be greater than 0", at("timeout_ms"))));
        }
    }
    Ok(())
}

fn check_rule(index: usize, rule: &LimitRule) -> Result<(), ConfigError> {
    let at = |key: &str| format!("at `limits.rules[{index}].{key}`");
    if rule.selector.trim().is_empty() {
        return Err(ConfigError(format!(
            "{}: empty; write a method (package.Service/Method), a service (package.Service) or \"*\"",
            at("match")
        )));
    }
    if let Some(rate) = rule.requests_per_second {
        if !(rate > 0.0 && rate <= MAX_REQUESTS_PER_SECOND) {
            return Err(ConfigError(format!(
                "{}: {rate} is not a rate; write a number of calls per second greater than 0 and at most {MAX_REQUESTS_PER_SECOND}, like 2 or 0.5",
                at("requests_per_second")
            )));
        }
    }
    match (rule.burst, rule.requests_per_second) {
        (Some(0), _) => return Err(ConfigError(format!("{}: must be at least 1", at("burst")))),
        (Some(_), None) => {
            return Err(ConfigError(format!(
                "{}: a burst is the size of a rate's bucket; set `requests_per_second` too",
                at("burst")
            )))
        }
        _ => {}
    }
    if rule.max_in_flight == Some(0) {
        return Err(ConfigError(format!("{}: must be greater than 0", at("max_in_flight"))));
    }
    if rule.requests_per_second.is_none() && rule.max_in_flight.is_none() {
        return Err(ConfigError(format!(
            "at `limits.rules[{index}]`: the rule limits nothing; give it `requests_per_second` (and a `burst`), `max_in_flight`, or both"
        )));
    }
    if rule.selector == EVERY_TOOL && rule.max_in_flight.is_some() {
        return Err(ConfigError(format!(
            "{}: the \"*\" rule is each caller's rate across every tool; `max_in_flight` caps the calls a method or service has at the upstream, so give it a method or service rule",
            at("max_in_flight")
        )));
    }
    Ok(())
}

//! Envoy's rate limit service protocol, as far as a check needs it:
//! `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`, one unary gRPC call per tool
//! call, with a descriptor for the caller across every tool, one for the tool and the caller,
//! and one for the matched rule and the caller. Written from the protocol's field numbers
//! (`envoy/service/ratelimit/v3/rls.proto`, `envoy/extensions/common/ratelimit/v3/ratelimit.proto`
//! in Envoy's API); fields this filter does not read are left out, and are skipped when they
//! come.

use std::time::Duration;

use prost::Message;

use crate::grpc::call_end::CallEnd;
use crate::grpc::status::{status_name, OK};

/// The service and method, as a gRPC client names them, and the method's HTTP/2 path.
pub const RATE_LIMIT_SERVICE: &str = "envoy.service.ratelimit.v3.RateLimitService";
pub const SHOULD_RATE_LIMIT: &str = "ShouldRateLimit";
pub const SHOULD_RATE_LIMIT_PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// The descriptor keys (see the fleet recipe in docs/rate-limits.md).
pub const CALLER_KEY: &str = "caller";
pub const TOOL_KEY: &str = "tool";
pub const RULE_KEY: &str = "rule";

#[derive(Clone, PartialEq, Message)]
pub struct RateLimitRequest {
    #[prost(string, tag = "1")]
    pub domain: String,
    #[prost(message, repeated, tag = "2")]
    pub descriptors: Vec<RateLimitDescriptor>,
    #[prost(uint32, tag = "3")]
    pub hits_addend: u32,
}

#[derive(Clone, PartialEq, Message)]
pub struct RateLimitDescriptor {
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<Entry>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Entry {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct RateLimitResponse {
    #[prost(int32, tag = "1")]
    pub overall_code: i32,
    #[prost(message, repeated, tag = "2")]
    pub statuses: Vec<DescriptorStatus>,
}

#[derive(Clone, PartialEq, Message)]
pub struct DescriptorStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(message, optional, tag = "2")]
    pub current_limit: Option<RateLimit>,
    #[prost(uint32, tag = "3")]
    pub limit_remaining: u32,
    #[prost(message, optional, tag = "4")]
    pub duration_until_reset: Option<prost_types::Duration>,
}

#[derive(Clone, PartialEq, Message)]
pub struct RateLimit {
    #[prost(uint32, tag = "1")]
    pub requests_per_unit: u32,
    #[prost(int32, tag = "2")]
    pub unit: i32,
    #[prost(string, tag = "3")]
    pub name: String,
}

/// `RateLimitResponse.Code`.
pub const CODE_OK: i32 = 1;
pub const CODE_OVER_LIMIT: i32 = 2;

/// The descriptors of one tool call, in the order the answer's statuses follow: the caller
/// across every tool, the tool and the caller, then the matched method or service rule and
/// the caller (when one matched).
pub fn descriptors(caller: &str, tool: &str, rule: Option<&str>) -> Vec<RateLimitDescriptor> {
    let entry = |key: &str, value: &str| Entry {
        key: key.to_owned(),
        value: value.to_owned(),
    };
    let mut descriptors = vec![
        RateLimitDescriptor {
            entries: vec![entry(CALLER_KEY, caller)],
        },
        RateLimitDescriptor {
            entries: vec![entry(TOOL_KEY, tool), entry(CALLER_KEY, caller)],
        },
    ];
    if let Some(rule) = rule {
        descriptors.push(RateLimitDescriptor {
            entries: vec![entry(RULE_KEY, rule), entry(CALLER_KEY, caller)],
        });
    }
    descriptors
}

/// The index of the caller's descriptor (every tool) in [`descriptors`].
const CALLER_DESCRIPTOR: usize = 0;

/// What the rate limit service said of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    /// Over the caller's limit across every tool.
    CallerOver {
        retry_after: Option<Duration>,
        limit: Option<String>,
    },
    /// Over the tool's or its rule's limit for this caller.
    ToolOver {
        retry_after: Option<Duration>,
        limit: Option<String>,
    },
    /// No usable answer: `failure_mode` decides.
    Failed(String),
}

/// The verdict of a check that ended as `end`.
pub(crate) fn verdict(end: &CallEnd<'_>) -> Verdict {
    let grpc = match end {
        CallEnd::Replied(grpc) => grpc,
        CallEnd::DeadlinePassed => return Verdict::Failed("no answer within its timeout".into()),
        CallEnd::NotStarted { reason } => return Verdict::Failed(format!("the call could not be started: {reason}")),
        CallEnd::Reset => return Verdict::Failed("the connection failed or was reset".into()),
        CallEnd::TooLarge { size } => return Verdict::Failed(format!("an answer of {size} bytes")),
        CallEnd::Malformed { problem } => return Verdict::Failed((*problem).to_owned()),
        CallEnd::HttpError { status, .. } => return Verdict::Failed(format!("HTTP {status} instead of a gRPC answer")),
    };
    if grpc.status != OK {
        return Verdict::Failed(format!("gRPC status {} ({})", status_name(grpc.status), grpc.status));
    }
    let Ok(response) = RateLimitResponse::decode(grpc.body) else {
        return Verdict::Failed("an answer that is not a RateLimitResponse".into());
    };
    // As Envoy's own rate limit filter reads it: anything but OVER_LIMIT lets the call go.
    if response.overall_code != CODE_OVER_LIMIT {
        return Verdict::Ok;
    }
    let over: Vec<(usize, &DescriptorStatus)> = response
        .statuses
        .iter()
        .enumerate()
        .filter(|(_, status)| status.code == CODE_OVER_LIMIT)
        .collect();
    let retry_after = over
        .iter()
        .filter_map(|(_, status)| status.duration_until_reset.as_ref())
        .filter_map(|duration| Duration::try_from(*duration).ok())
        .max();
    let limit = over
        .iter()
        .find_map(|(_, status)| status.current_limit.as_ref())
        .map(describe);
    if over.iter().any(|(index, _)| *index == CALLER_DESCRIPTOR) {
        return Verdict::CallerOver { retry_after, limit };
    }
    Verdict::ToolOver { retry_after, limit }
}

/// `2 per second`, as the service's configuration says a limit.
fn describe(limit: &RateLimit) -> String {
    let unit = match limit.unit {
        1 => "second",
        2 => "minute",
        3 => "hour",
        4 => "day",
        5 => "month",
        6 => "year",
        _ => "unit of time",
    };
    format!("{} per {unit}", limit.requests_per_unit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::call_end::GrpcReply;

    fn replied(response: &RateLimitResponse) -> Vec<u8> {
        response.encode_to_vec()
    }

    fn end(body: &[u8]) -> CallEnd<'_> {
        CallEnd::Replied(GrpcReply {
            status: OK,
            message: None,
            body,
            details: None,
        })
    }

    fn status(code: i32, reset_ms: Option<u64>) -> DescriptorStatus {
        DescriptorStatus {
            code,
            current_limit: Some(RateLimit {
                requests_per_unit: 2,
                unit: 1,
                name: String::new(),
            }),
            limit_remaining: 0,
            duration_until_reset: reset_ms.map(|ms| prost_types::Duration {
                seconds: i64::try_from(ms / 1000).unwrap(),
                nanos: i32::try_from((ms % 1000) * 1_000_000).unwrap(),
            }),
        }
    }

    #[test]
    fn the_request_carries_the_caller_the_tool_and_the_rule() {
        let request = RateLimitRequest {
            domain: "switchblade".into(),
            descriptors: descriptors("agent-7", "UserService_GetUser", Some("demo.users.v1.UserService")),
            hits_addend: 0,
        };
        let decoded = RateLimitRequest::decode(request.encode_to_vec().as_slice()).unwrap();
        let shown: Vec<Vec<(String, String)>> = decoded
            .descriptors
            .iter()
            .map(|descriptor| {
                descriptor
                    .entries
                    .iter()
                    .map(|e| (e.key.clone(), e.value.clone()))
                    .collect()
            })
            .collect();
        let pair = |key: &str, value: &str| (key.to_owned(), value.to_owned());
        assert_eq!(
            shown,
            [
                vec![pair("caller", "agent-7")],
                vec![pair("tool", "UserService_GetUser"), pair("caller", "agent-7")],
                vec![pair("rule", "demo.users.v1.UserService"), pair("caller", "agent-7")],
            ]
        );
        assert_eq!(descriptors("a", "T", None).len(), 2);
    }

    #[test]
    fn the_verdict_says_which_limit_and_when_to_retry() {
        let ok = replied(&RateLimitResponse {
            overall_code: CODE_OK,
            statuses: vec![status(CODE_OK, None)],
        });
        assert_eq!(verdict(&end(&ok)), Verdict::Ok);
        let unknown = replied(&RateLimitResponse::default());
        assert_eq!(verdict(&end(&unknown)), Verdict::Ok, "as Envoy reads UNKNOWN");
        let tool = replied(&RateLimitResponse {
            overall_code: CODE_OVER_LIMIT,
            statuses: vec![status(CODE_OK, None), status(CODE_OVER_LIMIT, Some(1500))],
        });
        assert_eq!(
            verdict(&end(&tool)),
            Verdict::ToolOver {
                retry_after: Some(Duration::from_millis(1500)),
                limit: Some("2 per second".into())
            }
        );
        let caller = replied(&RateLimitResponse {
            overall_code: CODE_OVER_LIMIT,
            statuses: vec![status(CODE_OVER_LIMIT, Some(300)), status(CODE_OVER_LIMIT, Some(700))],
        });
        assert!(
            matches!(verdict(&end(&caller)), Verdict::CallerOver { retry_after: Some(d), .. } if d == Duration::from_millis(700))
        );
    }

    #[test]
    fn anything_but_an_answer_is_a_failure() {
        assert!(matches!(verdict(&CallEnd::Reset), Verdict::Failed(_)));
        assert!(matches!(verdict(&CallEnd::DeadlinePassed), Verdict::Failed(_)));
        assert!(matches!(verdict(&end(b"\xff\xff\xff")), Verdict::Failed(_)));
        let unavailable = CallEnd::Replied(GrpcReply {
            status: 14,
            message: None,
            body: b"",
            details: None,
        });
        assert_eq!(
            verdict(&unavailable),
            Verdict::Failed("gRPC status UNAVAILABLE (14)".into())
        );
    }
}

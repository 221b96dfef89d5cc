//! The MCP server of one configuration. A POST to the MCP path goes through four stages, each
//! in a module of its own:
//!
//! 1. HTTP admission: the method and declared size from the headers alone
//!    ([`header_phase`]), then who may call, content negotiation and the size read
//!    ([`crate::http::admit`]);
//! 2. the envelope: one JSON-RPC message or a batch, and the protocol era it speaks (here);
//! 3. the method table: each message's answer, or an upstream call ([`methods`], and
//!    [`tool_call`] for `tools/call`);
//! 4. the reply: answers and tool results assembled as calls return ([`reply`],
//!    [`tool_result`]).
//!
//! Pure: the host adapter feeds it headers and body bytes, makes the calls it asks for, and
//! hands back how each ended ([`crate::upstream`]).

pub(crate) mod calls;
mod header_phase;
pub(crate) mod methods;
mod origin;
mod progress;
pub(crate) mod reply;
mod rpc_response;
mod stream_result;
pub(crate) mod tasks;
pub(crate) mod tool_call;
pub(crate) mod tool_result;
mod tool_search;

use std::borrow::Cow;

use prost_reflect::DescriptorPool;
use serde_json::{json, Map, Value};

use crate::access::{AccessPolicy, Caller};
use crate::catalog::Catalog;
use crate::config::{ConfigError, Discovery, DiscoveryTools, Limits, PluginConfig, Routing};
use crate::descriptors::{configured_pool, embedded_pool};
use crate::eras::{declares_modern_envelope, Era, SERVER_INFO_META};
use crate::grpc::details::StatusDetails;
use crate::http::Refusal;
use crate::http::{admit, CallerPolicy, HttpResponse, McpHeaders};
use crate::jsonrpc::{self, Body, Message, RpcError, INVALID_REQUEST};
use crate::observe::Observations;
use crate::proto_json::gate::ArgumentError;
use crate::quota::counters::Counters;
use crate::quota::Quota;
use crate::search::ToolSearch;
use crate::tools_list::{CacheScope, ListStyle, PrivateLists, ToolsListPages};
use crate::upstream::UpstreamCall;
pub use origin::{Origin, RequestFacts};
pub(crate) use reply::Reply;
use reply::{refuse_batch, Admission, RpcResponse};
use tool_call::argument_duplicate;

/// A refusal of the whole POST, before any message is handled.
fn whole_refusal(status: u16, error: &RpcError) -> HttpResponse {
    HttpResponse::rpc_error(status, error)
}

/// The W3C trace context headers.
const TRACE_CONTEXT_HEADERS: [&str; 2] = ["traceparent", "tracestate"];

/// A POST to the MCP path.
#[derive(Debug, Clone, Copy)]
pub(crate) struct McpRequest<'a> {
    pub headers: &'a McpHeaders,
    pub body: &'a [u8],
    /// Who is calling: [`Server::caller`] from the token payload the host read, or
    /// [`Caller::Anyone`] when the configuration has no authorization.
    pub caller: &'a Caller,
    /// The client's address (Envoy's `source.address`), which the host reads when the rate
    /// limits count callers by it ([`Server::reads_client_address`]).
    pub client_address: Option<&'a str>,
    /// The counters every worker shares, for the rate limits (none: only the rate limit
    /// service limits).
    pub counters: Option<&'a Counters>,
}

/// What to do with a request.
#[derive(Debug)]
pub(crate) enum Outcome {
    Respond(HttpResponse),
    /// Make the reply's calls; it is complete when each has ended.
    Await(Reply),
    /// A `notifications/cancelled`: cancel the client's request `request_id` if it is in
    /// flight (its [`CancelKey`](crate::cancel::CancelKey)), and answer with `response`.
    Cancel {
        request_id: Value,
        response: HttpResponse,
    },
}

/// One configuration's MCP server, built once per configuration and shared by every request
/// (and, in a native host, every worker thread).
#[derive(Debug)]
pub struct Server {
    mcp_path: String,
    catalog: Catalog,
    server_info: Value,
    /// The modern era's `_meta` of every tool result, rendered once.
    result_meta: String,
    instructions: Option<String>,
    tools_list: ToolsListPages,
    /// Who may call which tool, if the configuration says.
    access: Option<AccessPolicy>,
    /// Under authorization: the lists callers see, rendered per set of visible tools.
    private_lists: PrivateLists,
    /// The `server/discover` result, rendered once.
    discover_result: String,
    /// Request headers sent upstream as gRPC metadata: `forward_headers`, and the trace
    /// context unless it is turned off.
    forward_headers: Vec<String>,
    /// Renders error details; decoded with the embedded `google.rpc` messages.
    status_details: Option<StatusDetails>,
    /// Who may call (Origin and Host allowlists).
    callers: CallerPolicy,
    limits: Limits,
    routing: Routing,
    /// The rate limits and concurrency caps per tool and caller, if any are configured.
    quota: Option<Quota>,
    /// Task ids' keys and the timings of task tools.
    tasks: tasks::TaskSettings,
    /// Tool search (`discovery: search`): the index, and the list of its two tools.
    search: Option<(ToolSearch, ToolsListPages)>,
}

/// What every message of one POST shares.
struct RequestContext<'a> {
    era: Era,
    batch: bool,
    headers: &'a McpHeaders,
    caller: &'a Caller,
    client_address: Option<&'a str>,
    counters: Option<&'a Counters>,
    /// A key given twice inside a single request's `params.arguments`: the tool call is
    /// refused like any other bad argument, naming the path.
    duplicate_argument: Option<ArgumentError>,
}

/// What one message of a body turns into.
enum Handled {
    /// Nothing to answer (a notification, or a client's response).
    Nothing,
    Response(RpcResponse),
    Call(UpstreamCall),
    /// A `notifications/cancelled` for this request id.
    Cancel(Value),
}

impl Server {
    /// Builds the server from the plugin configuration bytes, with the configuration's own
    /// descriptor set or the embedded one.
    pub fn from_config_bytes(bytes: &[u8]) -> Result<Self, ConfigError> {
        let config = PluginConfig::parse(bytes)?;
        Self::new(&config, &configured_pool(config.descriptor_set.as_deref())?)
    }

    /// The server of a configuration whose services are in `pool`; services read through
    /// reflection are pending (see [`crate::reflection::Discovery`]).
    pub fn new(config: &PluginConfig, pool: &DescriptorPool) -> Result<Self, ConfigError> {
        Self::build(config, pool, false)
    }

    /// The server of a configuration, with the services read through reflection found in
    /// `pool` (`reflected`) or pending.
    pub fn build(config: &PluginConfig, pool: &DescriptorPool, reflected: bool) -> Result<Self, ConfigError> {
        let catalog = Catalog::build(config, pool, reflected)?;
        let identity = &config.server;
        let mut server_info = Map::new();
        server_info.insert("name".into(), json!(identity.name.as_deref().unwrap_or("switchblade")));
        server_info.insert(
            "version".into(),
            json!(identity.version.as_deref().unwrap_or(env!("CARGO_PKG_VERSION"))),
        );
        if let Some(title) = &identity.title {
            server_info.insert("title".into(), json!(title));
        }
        let server_info = Value::Object(server_info);
        let list = &config.tools_list;
        // Clients must not keep a list longer than reflection may take to change it.
        let ttl_ms = match config.reflected_services().next() {
            Some(_) => list.ttl_ms.min(config.reflection.interval_ms),
            None => list.ttl_ms,
        };
        let style = ListStyle {
            page_size: list.page_size,
            ttl_ms,
            server_info: server_info.clone(),
        };
        let access = AccessPolicy::build(config, &catalog)?;
        let quota = Quota::build(config, &catalog)?;
        // In search mode no caller is shown the whole list: it is not rendered.
        let (tools_list, search) = match config.discovery {
            Discovery::List => (ToolsListPages::public(&catalog, &style), None),
            Discovery::Search => (
                ToolsListPages::render(&[], &style, CacheScope::Public),
                Some(tool_search(&catalog, &config.discovery_tools, &style, list.ttl_ms)?),
            ),
        };
        let task_settings = tasks::TaskSettings::new(&config.tasks, config.limits.max_callers, &catalog);
        let discover_result = methods::discover_result(
            &server_info,
            identity.instructions.as_deref(),
            ttl_ms,
            task_settings.offered,
        );
        Ok(Server {
            mcp_path: config.mcp_path.clone(),
            catalog,
            result_meta: json!({ SERVER_INFO_META: server_info }).to_string(),
            server_info,
            instructions: identity.instructions.clone(),
            tools_list,
            access,
            private_lists: PrivateLists::new(style),
            discover_result,
            forward_headers: forwarded_headers(config),
            status_details: details_pool(config, pool).and_then(StatusDetails::new),
            limits: config.limits.clone(),
            callers: CallerPolicy {
                allowed_origins: config.allowed_origins.clone(),
                allowed_hosts: config.allowed_hosts.clone(),
            },
            routing: config.routing.clone(),
            quota,
            tasks: task_settings,
            search,
        })
    }

    pub fn mcp_path(&self) -> &str {
        &self.mcp_path
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    #[cfg(test)]
    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    /// How tool calls reach the upstream, where the host can choose.
    pub fn routing(&self) -> &Routing {
        &self.routing
    }

    /// The rate limits, if the configuration has any.
    pub(crate) fn quota(&self) -> Option<&Quota> {
        self.quota.as_ref()
    }

    /// Whether the rate limits count callers by their address: the host then reads
    /// `source.address` into [`McpRequest::client_address`].
    pub(crate) fn reads_client_address(&self) -> bool {
        self.quota.as_ref().is_some_and(Quota::reads_client_address)
    }

    /// Who may call which tool; `None` when every caller may call every tool.
    pub fn access(&self) -> Option<&AccessPolicy> {
        self.access.as_ref()
    }

    /// The caller of a request, from what the host found where the configuration says the
    /// verified token payload is ([`AccessPolicy::source`]); `None`: nothing there.
    pub(crate) fn caller(&self, token_payload: Option<&[u8]>) -> Caller {
        match &self.access {
            None => Caller::Anyone,
            Some(policy) => policy.caller(token_payload),
        }
    }

    /// Answers a POST to the MCP path, or asks for upstream calls; notes what happened in
    /// `observed`.
    pub(crate) fn handle(&self, request: McpRequest<'_>, observed: &mut Observations) -> Outcome {
        if let Err((reason, refusal)) = admit(request.headers, request.body.len(), &self.callers, &self.limits) {
            observed.refused(reason);
            return Outcome::Respond(refusal);
        }
        if let Some(refusal) = self.refuse_unverified(request.caller) {
            observed.refused(Refusal::Unauthenticated);
            return Outcome::Respond(refusal);
        }
        match self.read_envelope(request) {
            Ok((context, messages)) => {
                observed.era(context.era);
                self.plan(&context, messages, observed)
            }
            Err((reason, refusal)) => {
                observed.refused(reason);
                Outcome::Respond(refusal)
            }
        }
    }

    /// Under authorization, a request without a verified token for this server is refused
    /// whole: fail closed. Where the configuration publishes resource metadata, the challenge
    /// names it, so that an OAuth client finds its authorization server.
    fn refuse_unverified(&self, caller: &Caller) -> Option<HttpResponse> {
        let policy = self.access.as_ref()?;
        let found = match caller {
            Caller::Verified { .. } => return None,
            Caller::WrongAudience(why) => {
                let message = format!(
                    "Unauthorized: the token was not issued for this server: {why}. \
                     Ask the authorization server for a token for this resource (RFC 8707 `resource`)"
                );
                return Some(self.unauthorized(&message, Some("invalid_token")));
            }
            Caller::Unverified(found) => found.as_str(),
            Caller::Anyone => "the host did not read it",
        };
        let message = format!(
            "Unauthorized: this server authorizes each tool from a verified token, and none reached it ({found}). \
             Send a bearer token; operators: put jwt_authn before Switchblade, with `payload_in_metadata` where `authorization.token_payload` says ({})",
            policy.source()
        );
        Some(self.unauthorized(&message, None))
    }

    /// A 401 whose challenge names the protected resource metadata, where it is published, with
    /// the RFC 6750 `error` given.
    fn unauthorized(&self, message: &str, error: Option<&str>) -> HttpResponse {
        let resource = self.access.as_ref().and_then(AccessPolicy::protected_resource);
        let challenge = match resource {
            Some(resource) => Cow::Owned(resource.challenge(error, None)),
            None => Cow::Borrowed("Bearer"),
        };
        HttpResponse::unauthorized(message, challenge)
    }

    /// The body's messages, and what they share: the era, whether they came as a batch, and a
    /// key given twice in tool arguments (any other duplicate key refuses the whole body).
    fn read_envelope<'a>(
        &self,
        request: McpRequest<'a>,
    ) -> Result<(RequestContext<'a>, Vec<Message>), (Refusal, HttpResponse)> {
        let parsed = jsonrpc::parse_body(request.body, self.limits.max_json_depth)
            .map_err(|error| (Refusal::InvalidJson, whole_refusal(400, &error)))?;
        let Body { messages, batch } = parsed.body;
        // Errors before a message is read answer with its id, when there is one message.
        let first_id = || match (batch, messages.first()) {
            (false, Some(message)) => jsonrpc::reply_id(message.id()),
            _ => Value::Null,
        };
        let duplicate_argument = match parsed.duplicate {
            None => None,
            Some(duplicate) => match argument_duplicate(&duplicate, batch) {
                Some(error) => Some(error),
                None => {
                    let message = format!(
                        "Invalid Request: duplicate key `{}` at `{}`",
                        duplicate.key, duplicate.path
                    );
                    return Err((
                        Refusal::DuplicateKey,
                        whole_refusal(400, &RpcError::new(&first_id(), INVALID_REQUEST, message)),
                    ));
                }
            },
        };
        let declares_modern = !batch
            && messages
                .iter()
                .any(|message| declares_modern_envelope(message.params()));
        let era = Era::of(request.headers.protocol_version.as_deref(), declares_modern).map_err(|error| {
            let error = RpcError {
                id: first_id(),
                ..error
            };
            (Refusal::ProtocolVersion, whole_refusal(400, &error))
        })?;
        let max_batch_size = self.limits.max_batch_size;
        if let Some(refusal) = batch
            .then(|| refuse_batch(era, messages.len(), max_batch_size))
            .flatten()
        {
            return Err((Refusal::Batch, whole_refusal(400, &refusal)));
        }
        let context = RequestContext {
            era,
            batch,
            headers: request.headers,
            caller: request.caller,
            client_address: request.client_address,
            counters: request.counters,
            duplicate_argument,
        };
        Ok((context, messages))
    }

    /// Each message's answer, in order; calls leave a slot in the reply for their result.
    fn plan(&self, context: &RequestContext<'_>, messages: Vec<Message>, observed: &mut Observations) -> Outcome {
        let mut reply = Reply::new(context.batch, messages.len(), &self.limits);
        if self.tasks.offered {
            reply.poll_counters = context.counters.cloned();
        }
        let mut cancelled = None;
        let lone_id = match (context.batch, messages.first()) {
            (false, Some(message)) => Some(jsonrpc::reply_id(message.id())),
            _ => None,
        };
        for message in messages {
            match self.handle_message(context, message, reply.next_slot(), observed) {
                Handled::Nothing => {}
                Handled::Response(answer) => reply.answered(answer),
                Handled::Call(call) => reply.awaiting(call),
                Handled::Cancel(request_id) => cancelled = Some(request_id),
            }
        }
        // A cancellation inside a batch that also makes calls is ignored (the spec allows it).
        match (reply.has_calls(), cancelled) {
            (true, _) => {
                reply.admission = self.quota.as_ref().map(|quota| {
                    Box::new(Admission {
                        counters: context.counters.cloned(),
                        caller: quota.caller_key(context.caller, context.client_address),
                        taken: false,
                        caller_over: None,
                        lone_id: lone_id.unwrap_or(Value::Null),
                        checked: Vec::new(),
                    })
                });
                Outcome::Await(reply)
            }
            (false, Some(request_id)) => Outcome::Cancel {
                request_id,
                response: reply.into_response(),
            },
            (false, None) => Outcome::Respond(reply.into_response()),
        }
    }
}

/// Tool search over the catalog, and its list: two tools whatever the catalog's size, the same
/// for every caller, and as lasting as the configuration (reflection changes the catalog, not
/// them).
fn tool_search(
    catalog: &Catalog,
    names: &DiscoveryTools,
    style: &ListStyle,
    ttl_ms: u64,
) -> Result<(ToolSearch, ToolsListPages), ConfigError> {
    if let Some(taken) = [&names.search, &names.call]
        .into_iter()
        .find(|name| catalog.get(name).is_some())
    {
        return Err(ConfigError(format!(
            "at `discovery_tools`: a tool is named {taken:?}, the name of one of discovery's own tools; \
             give it another (`tools.M.name`) or rename discovery's (`discovery_tools`)"
        )));
    }
    let search = ToolSearch::build(catalog, names);
    let style = ListStyle {
        ttl_ms,
        ..style.clone()
    };
    let pages = ToolsListPages::fixed(search.definitions(), &style);
    Ok((search, pages))
}

/// The request headers a call forwards: the configured ones, then the W3C trace context.
fn forwarded_headers(config: &PluginConfig) -> Vec<String> {
    let mut headers = config.forward_headers.clone();
    if config.forward_trace_context {
        for name in TRACE_CONTEXT_HEADERS {
            if !headers.iter().any(|known| known == name) {
                headers.push(name.to_owned());
            }
        }
    }
    headers
}

/// The pool error details are decoded with: the embedded set, which has the `google.rpc`
/// messages. Without a `descriptor_set` the catalog's pool is that set already, and decoding it
/// again would double the start-up work of every VM.
fn details_pool(config: &PluginConfig, pool: &DescriptorPool) -> Option<DescriptorPool> {
    match config.descriptor_set {
        None => Some(pool.clone()),
        Some(_) => embedded_pool().ok(),
    }
}

#[cfg(test)]
mod tests;

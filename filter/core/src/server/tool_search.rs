//! `tools/call` of discovery's own tools (`discovery: search`): the search tool answers from
//! the index; the call tool's call is the call of the tool it names, made exactly as a
//! `tools/call` of that tool would be.

use serde_json::{Map, Value};

use super::tool_result::ToolResult;
use super::{Handled, RequestContext, Server};
use crate::jsonrpc::RpcError;
use crate::observe::Observations;
use crate::search::{called, Query, ToolSearch};

impl Server {
    /// The answer to a call of one of tool search's tools, if `name` is one and search is on.
    pub(super) fn call_search_tool(
        &self,
        context: &RequestContext<'_>,
        id: &Value,
        name: &str,
        params: &Map<String, Value>,
        slot: usize,
        observed: &mut Observations,
    ) -> Option<Result<Handled, RpcError>> {
        let (search, _) = self.search.as_ref()?;
        let empty = Value::Object(Map::new());
        let arguments = params
            .get("arguments")
            .filter(|value| !value.is_null())
            .unwrap_or(&empty);
        let refused = |problem: &str| {
            let text = format!(
                "Invalid arguments for tool {name}: {problem}. Nothing was done; fix the arguments to match the tool's inputSchema."
            );
            Some(Ok(Handled::Response(self.tool_result(
                context.era,
                id,
                &ToolResult::error(&text),
            ))))
        };
        if let Some(duplicate) = &context.duplicate_argument {
            return refused(&duplicate.to_string());
        }
        let names = search.names();
        if name == names.search {
            return match Query::read(arguments) {
                Ok(query) => Some(Ok(Handled::Response(self.search_answer(context, id, search, &query)))),
                Err(problem) => refused(&problem),
            };
        }
        if name != names.call {
            return None;
        }
        let (called_name, called_arguments) = match called(arguments, names) {
            Ok(called) => called,
            Err(problem) => return refused(&problem),
        };
        if called_name == names.search || called_name == names.call {
            return refused(&format!(
                "{called_name} is not called through {}; call it directly",
                names.call
            ));
        }
        // The call as a `tools/call` of that tool: its name and arguments, and the rest of the
        // request's params (a task, `_meta` and its progress token) as they came.
        let mut inner = params.clone();
        inner.insert("name".into(), Value::String(called_name.to_owned()));
        match called_arguments {
            Some(arguments) => inner.insert("arguments".into(), arguments.clone()),
            None => inner.remove("arguments"),
        };
        Some(self.call_tool(context, id, &inner, slot, observed))
    }

    fn search_answer(
        &self,
        context: &RequestContext<'_>,
        id: &Value,
        search: &ToolSearch,
        query: &Query<'_>,
    ) -> super::rpc_response::RpcResponse {
        // A caller finds what it would see listed: under authorization, what it may call (or,
        // when challenged for scopes, what some caller may).
        let visible = |tool: &crate::catalog::Tool| context.caller.lists(self.access.as_ref(), &tool.name);
        let answer = search.answer(&self.catalog, query, visible);
        self.tool_result(context.era, id, &ToolResult::success(&answer))
    }
}

//! How agents see the tools: `tools/list`'s pages and caching, and discovery (every tool
//! listed, or tool search's two tools).

use serde::Deserialize;

pub const DEFAULT_PAGE_SIZE: usize = 100;
pub const MAX_PAGE_SIZE: usize = 1000;
pub const DEFAULT_LIST_TTL_MS: u64 = 300_000;
/// The name of discovery's search tool, unless `discovery_tools.search` says otherwise.
pub const DEFAULT_SEARCH_TOOL: &str = "search_tools";
/// The name of discovery's call tool, unless `discovery_tools.call` says otherwise.
pub const DEFAULT_CALL_TOOL: &str = "call_tool";

/// `tools/list` paging and caching hints.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ToolsListConfig {
    /// Tools per page; longer lists are paged with opaque cursors.
    #[serde(default = "default_page_size")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = MAX_PAGE_SIZE)))]
    pub page_size: usize,
    /// `ttlMs` of `tools/list` and `server/discover` results (2026-07-28 clients cache them).
    #[serde(default = "default_list_ttl_ms")]
    pub ttl_ms: u64,
}

impl Default for ToolsListConfig {
    fn default() -> Self {
        ToolsListConfig {
            page_size: DEFAULT_PAGE_SIZE,
            ttl_ms: DEFAULT_LIST_TTL_MS,
        }
    }
}

/// How an agent discovers the tools.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum Discovery {
    /// `tools/list` shows every tool the caller may call, paged.
    #[default]
    List,
    /// `tools/list` shows a search tool, which finds tools by a request in words, and a call
    /// tool, which calls one: an agent's cost before its first call stays the same at any
    /// catalog size.
    Search,
}

/// The names of discovery's two tools (`discovery: search`); a catalog tool may not take one.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DiscoveryTools {
    /// The tool that searches the catalog (a tool name: 1-64 characters of `[A-Za-z0-9_-]`).
    #[cfg_attr(feature = "schema", schemars(regex(pattern = crate::tool_name::PATTERN)))]
    pub search: String,
    /// The tool that calls a tool the search found (a tool name, as `search`).
    #[cfg_attr(feature = "schema", schemars(regex(pattern = crate::tool_name::PATTERN)))]
    pub call: String,
}

impl Default for DiscoveryTools {
    fn default() -> Self {
        DiscoveryTools {
            search: DEFAULT_SEARCH_TOOL.to_owned(),
            call: DEFAULT_CALL_TOOL.to_owned(),
        }
    }
}

fn default_page_size() -> usize {
    DEFAULT_PAGE_SIZE
}

fn default_list_ttl_ms() -> u64 {
    DEFAULT_LIST_TTL_MS
}

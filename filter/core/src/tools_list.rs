//! `tools/list` pages, rendered once per configuration for both protocol eras, and the
//! opaque cursors that lead from one page to the next. Under authorization each caller sees
//! the tools it may call: one rendering per distinct set of visible tools, kept in a bounded
//! cache ([`PrivateLists`]).

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine;
use serde::Serialize;
use serde_json::value::{to_raw_value, RawValue};
use serde_json::{json, Value};

use crate::catalog::{Catalog, Tool};
use crate::eras::{Era, SERVER_INFO_META};

/// How many distinct private renderings are kept; past it the oldest is dropped (and
/// rendered again when its callers list next).
pub const MAX_PRIVATE_LISTS: usize = 64;

/// Every page of one tool list, ready to send.
#[derive(Debug)]
pub struct ToolsListPages {
    pages: Vec<Page>,
    /// Identifies this list, so a cursor from another configuration (or another caller's
    /// list) is refused, not misread.
    fingerprint: u64,
}

#[derive(Debug)]
struct Page {
    legacy: String,
    modern: String,
}

/// A cursor this server did not issue for the current list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidCursor;

/// Whether a list may be shared between callers (the modern era's `cacheScope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheScope {
    /// The same for every caller: shared caches may keep it.
    Public,
    /// Depends on who asks.
    Private,
}

impl CacheScope {
    fn word(self) -> &'static str {
        match self {
            CacheScope::Public => "public",
            CacheScope::Private => "private",
        }
    }
}

/// What every rendering of a configuration's list shares.
#[derive(Debug, Clone)]
pub struct ListStyle {
    pub page_size: usize,
    pub ttl_ms: u64,
    pub server_info: Value,
}

impl ToolsListPages {
    pub fn render(tools: &[&Tool], style: &ListStyle, scope: CacheScope) -> Self {
        let fingerprint = fingerprint(tools, style.page_size);
        let chunks: Vec<&[&Tool]> = if tools.is_empty() {
            vec![&[]]
        } else {
            tools.chunks(style.page_size.max(1)).collect()
        };
        let last = chunks.len() - 1;
        let pages = chunks
            .into_iter()
            .enumerate()
            .map(|(index, page)| {
                let next_cursor = (index < last).then(|| encode_cursor(fingerprint, index + 1));
                Page::render(page, next_cursor, style, scope)
            })
            .collect();
        ToolsListPages { pages, fingerprint }
    }

    /// One page of fixed definitions, the same in both eras (tool search's two tools).
    pub fn fixed<'a>(definitions: impl Iterator<Item = &'a RawValue>, style: &ListStyle) -> Self {
        let definitions: Vec<&RawValue> = definitions.collect();
        let legacy = LegacyPage {
            tools: definitions
                .iter()
                .map(|definition| Cow::Borrowed(*definition))
                .collect(),
            next_cursor: None,
        };
        let page = Page {
            legacy: to_json_text(&legacy),
            modern: to_json_text(&ModernPage::new(definitions, None, style, CacheScope::Public)),
        };
        ToolsListPages {
            pages: vec![page],
            fingerprint: 0,
        }
    }

    /// The list every caller sees, when there is no authorization.
    pub fn public(catalog: &Catalog, style: &ListStyle) -> Self {
        let tools: Vec<&Tool> = catalog.tools().map(AsRef::as_ref).collect();
        Self::render(&tools, style, CacheScope::Public)
    }

    /// The `tools/list` result (JSON text) for a cursor, in the request's era.
    pub fn result(&self, era: Era, cursor: Option<&str>) -> Result<&str, InvalidCursor> {
        let index = match cursor {
            None => 0,
            Some(cursor) => decode_cursor(cursor)
                .filter(|(fingerprint, index)| *fingerprint == self.fingerprint && *index > 0)
                .map(|(_, index)| index)
                .ok_or(InvalidCursor)?,
        };
        let page = self.pages.get(index).ok_or(InvalidCursor)?;
        Ok(match era {
            Era::Legacy(_) => &page.legacy,
            Era::Modern => &page.modern,
        })
    }
}

/// The renderings of the lists callers with different grants see, keyed by which tools are
/// visible (callers whose grants differ but show the same tools share one), bounded.
#[derive(Debug)]
pub struct PrivateLists {
    style: ListStyle,
    cache: Mutex<RenderingCache>,
}

#[derive(Debug, Default)]
struct RenderingCache {
    renderings: HashMap<Vec<bool>, Arc<ToolsListPages>>,
    /// Keys, oldest first.
    order: VecDeque<Vec<bool>>,
}

impl PrivateLists {
    pub fn new(style: ListStyle) -> Self {
        PrivateLists {
            style,
            cache: Mutex::new(RenderingCache::default()),
        }
    }

    /// The pages of the tools `visible` selects (one flag per catalog tool, in order).
    pub fn pages(&self, catalog: &Catalog, visible: Vec<bool>) -> Arc<ToolsListPages> {
        // A panic while holding the lock leaves a cache that is still consistent enough to read.
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(pages) = cache.renderings.get(&visible) {
            return Arc::clone(pages);
        }
        let tools: Vec<&Tool> = catalog
            .tools()
            .zip(&visible)
            .filter(|(_, shown)| **shown)
            .map(|(tool, _)| tool.as_ref())
            .collect();
        let pages = Arc::new(ToolsListPages::render(&tools, &self.style, CacheScope::Private));
        if cache.order.len() >= MAX_PRIVATE_LISTS {
            if let Some(oldest) = cache.order.pop_front() {
                cache.renderings.remove(&oldest);
            }
        }
        cache.order.push_back(visible.clone());
        cache.renderings.insert(visible, Arc::clone(&pages));
        pages
    }

    /// How many renderings are kept now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .renderings
            .len()
    }
}

impl Page {
    fn render(tools: &[&Tool], next_cursor: Option<String>, style: &ListStyle, scope: CacheScope) -> Page {
        let legacy = LegacyPage {
            tools: tools.iter().map(|tool| legacy_definition(tool)).collect(),
            next_cursor: next_cursor.as_deref(),
        };
        let definitions = tools.iter().map(|tool| tool.definition.as_ref()).collect();
        let modern = ModernPage::new(definitions, next_cursor.as_deref(), style, scope);
        Page {
            legacy: to_json_text(&legacy),
            modern: to_json_text(&modern),
        }
    }
}

/// A `tools/list` result of the handshake era.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LegacyPage<'a> {
    tools: Vec<Cow<'a, RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<&'a str>,
}

/// A `tools/list` result of the stateless era: the handshake era's fields, then its own.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ModernPage<'a> {
    tools: Vec<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<&'a str>,
    ttl_ms: u64,
    cache_scope: &'static str,
    result_type: &'static str,
    #[serde(rename = "_meta")]
    meta: Value,
}

impl<'a> ModernPage<'a> {
    fn new(tools: Vec<&'a RawValue>, next_cursor: Option<&'a str>, style: &ListStyle, scope: CacheScope) -> Self {
        ModernPage {
            tools,
            next_cursor,
            ttl_ms: style.ttl_ms,
            cache_scope: scope.word(),
            result_type: "complete",
            meta: json!({ SERVER_INFO_META: style.server_info }),
        }
    }
}

fn to_json_text(page: &impl Serialize) -> String {
    // Definitions are JSON text already and every key is a string: writing cannot fail.
    serde_json::to_string(page).unwrap_or_else(|_| String::from(r#"{"tools":[]}"#))
}

/// A tool as the handshake era lists it: a task tool declares `execution.taskSupport` (the
/// 2025-11-25 tasks utility; the 2026-07-28 extension has no such field, a server decides per
/// call).
fn legacy_definition(tool: &Tool) -> Cow<'_, RawValue> {
    if tool.task.is_none() {
        return Cow::Borrowed(&tool.definition);
    }
    let mut definition = tool.definition_value();
    if let Value::Object(map) = &mut definition {
        map.insert("execution".into(), json!({"taskSupport": "optional"}));
    }
    to_raw_value(&definition).map_or(Cow::Borrowed(&tool.definition), Cow::Owned)
}

fn encode_cursor(fingerprint: u64, index: usize) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{fingerprint:016x}:{index}"))
}

fn decode_cursor(cursor: &str) -> Option<(u64, usize)> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (fingerprint, index) = text.split_once(':')?;
    Some((u64::from_str_radix(fingerprint, 16).ok()?, index.parse().ok()?))
}

/// FNV-1a over the listed tool names and the page size: stable across VMs running this
/// build, and different for lists that show different tools.
fn fingerprint(tools: &[&Tool], page_size: usize) -> u64 {
    let page = page_size.to_le_bytes();
    let names = tools.iter().map(|tool| tool.name.as_bytes());
    crate::fingerprint::fingerprint(names.chain(std::iter::once(&page[..])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PluginConfig;
    use crate::descriptors::embedded_pool;

    fn pages(page_size: usize) -> ToolsListPages {
        let config = PluginConfig::parse(
            br#"{"services":{"demo.catalog.v1.CatalogService":{"cluster":"c"},"demo.users.v1.UserService":{"cluster":"c"}}}"#,
        )
        .unwrap();
        let catalog = Catalog::build(&config, &embedded_pool().unwrap(), false).unwrap();
        ToolsListPages::public(&catalog, &style(page_size))
    }

    fn style(page_size: usize) -> ListStyle {
        ListStyle {
            page_size,
            ttl_ms: 60_000,
            server_info: json!({"name": "s", "version": "1"}),
        }
    }

    fn names(result: &Value) -> Vec<&str> {
        result["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn one_page_has_no_cursor() {
        let pages = pages(100);
        let legacy: Value = serde_json::from_str(pages.result(Era::Legacy("2025-11-25"), None).unwrap()).unwrap();
        assert_eq!(names(&legacy).len(), 3);
        assert!(legacy.get("nextCursor").is_none());
        assert!(legacy.get("ttlMs").is_none());
        let modern: Value = serde_json::from_str(pages.result(Era::Modern, None).unwrap()).unwrap();
        assert_eq!(
            (modern["ttlMs"].clone(), modern["cacheScope"].clone()),
            (json!(60_000), json!("public"))
        );
        assert_eq!(modern["resultType"], "complete");
        assert_eq!(modern["_meta"][SERVER_INFO_META]["name"], "s");
    }

    #[test]
    fn pages_are_the_definitions_text_in_the_fields_order() {
        let config = PluginConfig::parse(br#"{"services":{"demo.users.v1.UserService":{"cluster":"c"}}}"#).unwrap();
        let catalog = Catalog::build(&config, &embedded_pool().unwrap(), false).unwrap();
        let tool = catalog.tools().next().unwrap();
        let pages = ToolsListPages::public(&catalog, &style(100));
        let legacy = pages.result(Era::Legacy("2025-11-25"), None).unwrap();
        assert_eq!(legacy, format!(r#"{{"tools":[{}]}}"#, tool.definition.get()));
        let modern = pages.result(Era::Modern, None).unwrap();
        let order: Vec<usize> = [
            "\"tools\"",
            "\"ttlMs\"",
            "\"cacheScope\"",
            "\"resultType\"",
            "\"_meta\"",
        ]
        .iter()
        .map(|key| modern.rfind(key).unwrap())
        .collect();
        assert!(order.windows(2).all(|pair| pair[0] < pair[1]), "{modern}");
    }

    #[test]
    fn cursors_walk_every_page_in_order() {
        let pages = pages(2);
        assert_eq!(pages.pages.len(), 2);
        let first: Value = serde_json::from_str(pages.result(Era::Modern, None).unwrap()).unwrap();
        assert_eq!(names(&first), ["CatalogService_Search", "CatalogService_GetItem"]);
        let cursor = first["nextCursor"].as_str().unwrap();
        let second: Value = serde_json::from_str(pages.result(Era::Modern, Some(cursor)).unwrap()).unwrap();
        assert_eq!(names(&second), ["UserService_GetUser"]);
        assert!(second.get("nextCursor").is_none());
    }

    #[test]
    fn foreign_or_malformed_cursors_are_refused() {
        let two = pages(2);
        let one = pages(1);
        let first: Value = serde_json::from_str(one.result(Era::Modern, None).unwrap()).unwrap();
        let cursor_from_other_config = first["nextCursor"].as_str().unwrap();
        assert_eq!(
            two.result(Era::Modern, Some(cursor_from_other_config)),
            Err(InvalidCursor)
        );
        assert_eq!(two.result(Era::Modern, Some("")), Err(InvalidCursor));
        assert_eq!(two.result(Era::Modern, Some("not a cursor!")), Err(InvalidCursor));
        assert_eq!(
            two.result(Era::Modern, Some(&encode_cursor(two.fingerprint, 0))),
            Err(InvalidCursor)
        );
        assert_eq!(
            two.result(Era::Modern, Some(&encode_cursor(two.fingerprint, 9))),
            Err(InvalidCursor)
        );
    }

    #[test]
    fn private_lists_are_private_per_visible_set_and_bounded() {
        let config = PluginConfig::parse(
            br#"{"services":{"demo.catalog.v1.CatalogService":{"cluster":"c"},"demo.users.v1.UserService":{"cluster":"c"}}}"#,
        )
        .unwrap();
        let catalog = Catalog::build(&config, &embedded_pool().unwrap(), false).unwrap();
        let lists = PrivateLists::new(style(1));
        let catalog_only = lists.pages(&catalog, vec![true, true, false]);
        let users_only = lists.pages(&catalog, vec![false, false, true]);
        let first: Value = serde_json::from_str(catalog_only.result(Era::Modern, None).unwrap()).unwrap();
        assert_eq!(first["cacheScope"], "private");
        assert_eq!(names(&first), ["CatalogService_Search"]);
        let cursor = first["nextCursor"].as_str().unwrap();
        // The cursor leads on in its own list, and nowhere in another caller's.
        let second: Value = serde_json::from_str(catalog_only.result(Era::Modern, Some(cursor)).unwrap()).unwrap();
        assert_eq!(names(&second), ["CatalogService_GetItem"]);
        assert_eq!(users_only.result(Era::Modern, Some(cursor)), Err(InvalidCursor));
        // The same visible set is rendered once.
        assert!(Arc::ptr_eq(
            &catalog_only,
            &lists.pages(&catalog, vec![true, true, false])
        ));
        let nothing: Value = serde_json::from_str(
            lists
                .pages(&catalog, vec![false; 3])
                .result(Era::Legacy("2025-11-25"), None)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(nothing, json!({"tools": []}));
        assert_eq!(lists.len(), 3);
        // Bounded: past the limit the oldest rendering goes. (Three tools make only eight
        // sets; flags past the catalog's end are ignored by the rendering but tell keys apart.)
        for set in 0..(MAX_PRIVATE_LISTS + 3) {
            let visible: Vec<bool> = (0..16).map(|bit| set & (1 << bit) != 0).collect();
            lists.pages(&catalog, visible);
        }
        assert_eq!(lists.len(), MAX_PRIVATE_LISTS);
    }
}

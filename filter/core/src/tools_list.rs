//! `tools/list` pages, rendered once per configuration for both protocol eras, and the
//! opaque cursors that lead from one page to the next.

use base64::Engine;
use serde_json::{json, Map, Value};

use crate::catalog::Catalog;
use crate::eras::{Era, SERVER_INFO_META};

/// Every page of the tool list, ready to send.
#[derive(Debug)]
pub struct ToolsListPages {
    pages: Vec<Page>,
    /// Identifies this list, so a cursor from another configuration is refused, not misread.
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

impl ToolsListPages {
    pub fn render(catalog: &Catalog, page_size: usize, ttl_ms: u64, server_info: &Value) -> Self {
        let definitions: Vec<&Value> = catalog.tools().map(|tool| &tool.definition).collect();
        let fingerprint = fingerprint(catalog, page_size);
        let chunks: Vec<&[&Value]> = if definitions.is_empty() {
            vec![&[]]
        } else {
            definitions.chunks(page_size.max(1)).collect()
        };
        let last = chunks.len() - 1;
        let pages = chunks
            .into_iter()
            .enumerate()
            .map(|(index, tools)| {
                let next_cursor = (index < last).then(|| encode_cursor(fingerprint, index + 1));
                Page::render(tools, next_cursor, ttl_ms, server_info)
            })
            .collect();
        ToolsListPages { pages, fingerprint }
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

impl Page {
    fn render(tools: &[&Value], next_cursor: Option<String>, ttl_ms: u64, server_info: &Value) -> Page {
        let mut legacy = Map::new();
        legacy.insert("tools".into(), json!(tools));
        if let Some(cursor) = next_cursor {
            legacy.insert("nextCursor".into(), json!(cursor));
        }
        let mut modern = legacy.clone();
        modern.insert("ttlMs".into(), json!(ttl_ms));
        // The list is the same for every caller: shared caches may keep it.
        modern.insert("cacheScope".into(), json!("public"));
        modern.insert("resultType".into(), json!("complete"));
        modern.insert("_meta".into(), json!({ SERVER_INFO_META: server_info }));
        Page {
            legacy: Value::Object(legacy).to_string(),
            modern: Value::Object(modern).to_string(),
        }
    }
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

/// FNV-1a over the tool names and the page size: stable across VMs running this build.
fn fingerprint(catalog: &Catalog, page_size: usize) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;
    let names = catalog.tools().map(|tool| tool.name.as_bytes());
    let page = page_size.to_le_bytes();
    names
        .chain(std::iter::once(&page[..]))
        .flat_map(|bytes| bytes.iter().chain(b"\0"))
        .fold(OFFSET, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(PRIME))
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
        let catalog = Catalog::build(&config, &embedded_pool().unwrap()).unwrap();
        ToolsListPages::render(&catalog, page_size, 60_000, &json!({"name": "s", "version": "1"}))
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
}

//! `any.in`, `any.not_in` (type URLs) and `field_mask.in`, `field_mask.not_in` (paths, each
//! covering the paths under it). A mask's `const` is an [`Equal`](super::equal::Equal) rule.

use serde_json::{Map, Value};

use super::equal::{in_or_not, listed};
use super::family::Family;
use super::standard::{SchemaFor, StandardRule};
use super::subject::Subject;
use crate::proto_json::shown;

/// An Any's type URL is (`inside`) or is not one of these.
#[derive(Debug, Clone)]
pub struct TypeUrls {
    pub urls: Vec<String>,
    pub inside: bool,
}

impl StandardRule for TypeUrls {
    fn name(&self, family: Family) -> String {
        format!("{family}.{} = {}", in_or_not(self.inside), listed(&quoted(&self.urls)))
    }

    fn words(&self) -> String {
        let urls = self.urls.join(", ");
        if self.inside {
            format!("must be a message of type {urls}")
        } else {
            format!("must not be a message of type {urls}")
        }
    }

    fn holds(&self, subject: &Subject<'_>) -> bool {
        match subject {
            Subject::TypeUrl(url) => self.urls.iter().any(|listed| listed == url) == self.inside,
            _ => true,
        }
    }

    /// The type is what the rule looks at, and would be cut from the object shown.
    fn given(&self, value: &Value) -> String {
        match value.get("@type") {
            Some(url) => format!("\"@type\": {url}"),
            None => shown(value),
        }
    }

    fn keyword(&self, _schema: SchemaFor<'_>, _base: &mut Map<String, Value>, _extra: &mut Map<String, Value>) -> bool {
        false
    }
}

/// A FieldMask's paths are all covered (`inside`), or none is, by these.
#[derive(Debug, Clone)]
pub struct MaskPaths {
    pub paths: Vec<String>,
    pub inside: bool,
}

impl StandardRule for MaskPaths {
    fn name(&self, family: Family) -> String {
        format!("{family}.{} = {}", in_or_not(self.inside), listed(&quoted(&self.paths)))
    }

    fn words(&self) -> String {
        let paths = self.paths.join(", ");
        if self.inside {
            format!("may only hold the paths {paths} (or paths under them)")
        } else {
            format!("must not hold the paths {paths} (or paths under them)")
        }
    }

    fn holds(&self, subject: &Subject<'_>) -> bool {
        let Subject::Paths(given) = subject else {
            return true;
        };
        let is_covered = |path: &String| self.paths.iter().any(|listed| covers(listed, path));
        if self.inside {
            given.iter().all(is_covered)
        } else {
            !given.iter().any(is_covered)
        }
    }

    fn keyword(&self, _schema: SchemaFor<'_>, _base: &mut Map<String, Value>, _extra: &mut Map<String, Value>) -> bool {
        false
    }
}

/// `listed` is `path`, or a path above it.
fn covers(listed: &str, path: &str) -> bool {
    path == listed || path.strip_prefix(listed).is_some_and(|rest| rest.starts_with('.'))
}

fn quoted(texts: &[String]) -> Vec<String> {
    texts.iter().map(|text| format!("\"{text}\"")).collect()
}

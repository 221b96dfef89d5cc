//! The docs held to the code: README.md, CONTRIBUTING.md and every docs/*.md.
//!
//! What is checked, with deliberately simple heuristics:
//!
//! - **Paths.** An inline code span that starts with a top-level folder of the repository
//!   (`filter/…`, `scripts/…`, `docs/…`, …) or is a top-level file (`docker-compose.yml`) names a
//!   path, up to its first space (`scripts/fuzz 60 task_id` names `scripts/fuzz`). It must exist,
//!   unless it holds a wildcard or a placeholder (`*`, `…`, `<`, `{`, `|`, a word in capitals such
//!   as `FILE`), or is one of [`OUTPUTS`], the paths a run writes. Every relative link target
//!   must exist too, and its `#anchor` must be a heading of the target (GitHub's slugs).
//! - **Commands.** In code spans and fenced blocks, `switchblade SUBCOMMAND` must name a
//!   subcommand that `switchblade --help` lists, and every `--flag` after it on that command
//!   (lines joined at a trailing `\`) must appear in `switchblade SUBCOMMAND --help`. Every
//!   `scripts/NAME` must be an executable file, and a `--flag` after it must appear in the script
//!   or in the Python program it hands over to.
//! - **Errors.** The docs quote an error the user sees in a fenced block with the info string
//!   `error` (one error a line, `…` for what is left out), or in a table column whose header
//!   says `error`. Each quote must be accounted for by the code: every word of it lies in the
//!   literal text of a format string of the Rust sources (`filter/`, `cli/src/`, the demo
//!   upstream in `test-harness/src/`), found in the quote with its literal parts in order and
//!   its `{…}` placeholders matching anything, or is a value (a number, a name with `.`, `_`,
//!   `/`, `-` or digits, a word in capitals, or anything in backticks or quotes). Texts of
//!   libraries are listed in [`LIBRARY_TEXTS`], each with where it comes from. The errors of
//!   "When the configuration is wrong" are also reproduced exactly: each configuration in
//!   [`WRONG_CONFIGURATIONS`] is run through `switchblade check`, and the README must quote
//!   what it prints.

// Test code: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
// The benchmark's figures the docs quote.
#[path = "docs/figures.rs"]
mod figures;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use common::{repo, switchblade, switchblade_in};

/// Paths the docs name that a run writes, so a fresh clone does not have them.
const OUTPUTS: &[(&str, &str)] = &[
    (
        ".work",
        "the scratch folder the scripts and examples write into (ignored by git)",
    ),
    ("target", "cargo's build output"),
    ("dist", "where `scripts/release` writes the release's files"),
    ("fuzz/artifacts", "what a fuzzing run that crashed saved"),
];

/// The top-level folders and files a path in the docs may start with.
const TOP_LEVEL: &[&str] = &[
    "filter/",
    "cli/",
    "scripts/",
    "envoy/",
    "deploy/",
    "docs/",
    "test-harness/",
    "proto/",
    "third_party/",
    "fuzz/",
    ".ci/",
    ".work/",
    "target/",
    "dist/",
];
const TOP_LEVEL_FILES: &[&str] = &[
    "README.md",
    "CONTRIBUTING.md",
    "CHANGELOG.md",
    "SECURITY.md",
    "docker-compose.yml",
    "Cargo.toml",
    "rust-toolchain.toml",
];

/// Texts of libraries that the docs quote inside an error, and where each comes from.
const LIBRARY_TEXTS: &[(&str, &str)] = &[
    (
        "unknown field `{}`, expected one of {}",
        "serde's error for an unknown field",
    ),
    (" at line {} column {}", "serde_json's position of an error"),
    ("invalid peer certificate: {}", "rustls, through tonic"),
    (
        "upstream connect error or disconnect/reset before headers. {}",
        "Envoy's router",
    ),
    (
        "found open group without closing ')'",
        "the regex crate's error for an unclosed group",
    ),
];

/// Wrong plugin configurations, each run through `switchblade check`: the README's "When the
/// configuration is wrong" must quote exactly what each prints.
const WRONG_CONFIGURATIONS: &[&str] = &[
    r#"{"services":{"demo.users.v1.UserService":{"clustr":"users"}}}"#,
    r#"{"services": {"demo.users.v1.Nope": {"cluster": "users"}}}"#,
    r#"{"services": {"demo.catalog.v1.CatalogService": {"cluster": "catalog", "expose": "selected", "methods": ["demo.catalog.v1.CatalogService/Nope"]}}}"#,
    r#"{"services": {"demo.catalog.v1.CatalogService": {"cluster": "catalog", "streaming": true}}, "tools": {"demo.catalog.v1.CatalogService/WatchItems": {"max_messages": 0}}}"#,
    r#"{"services": {"demo.catalog.v1.CatalogService": {"cluster": "catalog"}, "demo.users.v1.UserService": {"cluster": "users"}}, "tools": {"demo.users.v1.UserService/GetUser": {"name": "CatalogService_Search"}}}"#,
    r#"{"services": {"demo.catalog.v1.CatalogService": {"cluster": "catalog", "expose": "selected", "methods": ["demo.catalog.v1.CatalogService/Search"]}}, "tools": {"demo.catalog.v1.CatalogService/GetItem": {"name": "get_item"}}}"#,
    r#"{"services": {"demo.users.v1.UserService": {"cluster": "users"}}, "limits": {"rules": [{"match": "*", "requests_per_second": 50}, {"match": "demo.users.v1.UserService/DeleteUser", "requests_per_second": 1}]}}"#,
    r#"{"services": {"demo.users.v1.UserService": {"cluster": "users"}}, "limits": {"rules": [{"match": "*", "requests_per_second": 0}]}}"#,
    r#"{"services": {"demo.users.v1.UserService": {"cluster": "users"}}, "limits": {"caller": {"claim": "sub"}}}"#,
];

/// A page of the docs: its path from the repository's root, and its text.
struct Page {
    path: String,
    text: String,
}

fn pages() -> Vec<Page> {
    let mut paths = vec!["README.md".to_owned(), "CONTRIBUTING.md".to_owned()];
    let mut docs: Vec<String> = fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|path| Page {
            text: fs::read_to_string(repo().join(&path)).unwrap(),
            path,
        })
        .collect()
}

/// A fenced block: its info string and its lines.
struct Block {
    info: String,
    lines: Vec<String>,
}

/// The page split into its prose lines (outside fences) and its fenced blocks.
fn split(text: &str) -> (Vec<String>, Vec<Block>) {
    let mut prose = Vec::new();
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        match (&mut open, trimmed.strip_prefix("```")) {
            (None, Some(info)) => {
                open = Some(Block {
                    info: info.trim().to_owned(),
                    lines: Vec::new(),
                })
            }
            (Some(_), Some(_)) => blocks.push(open.take().unwrap()),
            (Some(block), None) => block.lines.push(trimmed.to_owned()),
            (None, None) => prose.push(line.to_owned()),
        }
    }
    (prose, blocks)
}

/// The inline code spans of prose lines (a span may not cross a line; ``double`` spans too).
fn code_spans(prose: &[String]) -> Vec<String> {
    let mut spans = Vec::new();
    for line in prose {
        let mut rest = line.as_str();
        while let Some(start) = rest.find('`') {
            let ticks = rest[start..].chars().take_while(|c| *c == '`').count();
            let fence = &rest[start..start + ticks];
            let after = &rest[start + ticks..];
            match after.find(fence) {
                Some(end) => {
                    spans.push(after[..end].trim().to_owned());
                    rest = &after[end + ticks..];
                }
                None => break,
            }
        }
    }
    spans
}

// ---------------------------------------------------------------------------------------------
// Paths and links

fn is_placeholder(path: &str) -> bool {
    path.contains(['*', '…', '<', '{', '|', '$'])
        || path
            .split(['/', '.', '-', '_'])
            .any(|word| word.len() > 1 && word.chars().all(|c| c.is_ascii_uppercase()) && word != "README")
}

fn is_output(path: &str) -> bool {
    OUTPUTS
        .iter()
        .any(|(output, _)| path == *output || path.starts_with(&format!("{output}/")))
}

/// The path a code span names, if it names one.
fn path_in(span: &str) -> Option<String> {
    let first = span.split_whitespace().next()?;
    let first = first.trim_end_matches([',', ';', ':', ')']);
    let named = TOP_LEVEL.iter().any(|top| first.starts_with(top)) || TOP_LEVEL_FILES.contains(&first);
    (named && !is_placeholder(first)).then(|| first.trim_end_matches('/').to_owned())
}

#[test]
fn every_path_the_docs_name_exists() {
    let mut missing = BTreeSet::new();
    let mut named = 0;
    for page in pages() {
        let (prose, _) = split(&page.text);
        for span in code_spans(&prose) {
            if let Some(path) = path_in(&span) {
                named += 1;
                if !is_output(&path) && !repo().join(&path).exists() {
                    missing.insert(format!("{}: `{path}`", page.path));
                }
            }
        }
    }
    assert!(named > 100, "found only {named} paths: the heuristic changed?");
    assert!(missing.is_empty(), "paths that do not exist: {missing:#?}");
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let (prose, _) = split(text);
    prose
        .iter()
        .filter(|line| line.starts_with('#'))
        .map(|line| slug(line.trim_start_matches('#')))
        .collect()
}

/// The targets of the markdown links `[text](target)` of prose lines.
fn link_targets(prose: &[String]) -> Vec<String> {
    let mut targets = Vec::new();
    for line in prose {
        let mut rest = line.as_str();
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push(after[..end].to_owned());
            rest = &after[end..];
        }
    }
    targets
}

#[test]
fn every_relative_link_and_anchor_leads_somewhere() {
    let mut broken = Vec::new();
    for page in pages() {
        let (prose, _) = split(&page.text);
        let here = Path::new(&page.path).parent().unwrap_or(Path::new(""));
        for target in link_targets(&prose) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file_path: PathBuf = if file.is_empty() {
                repo().join(&page.path)
            } else {
                repo().join(here).join(file)
            };
            if !file_path.exists() {
                broken.push(format!("{}: {target} (no such file)", page.path));
                continue;
            }
            if !anchor.is_empty() && !anchors(&fs::read_to_string(&file_path).unwrap()).contains(anchor) {
                broken.push(format!("{}: {target} (no such heading)", page.path));
            }
        }
    }
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}

#[test]
fn the_docs_index_lists_every_page() {
    let index = fs::read_to_string(repo().join("docs/README.md")).unwrap();
    for entry in fs::read_dir(repo().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name != "README.md" {
            assert!(
                index.contains(&format!("]({name})")),
                "docs/README.md does not list {name}"
            );
        }
    }
}

#[test]
fn the_module_map_is_the_tree() {
    let architecture = fs::read_to_string(repo().join("docs/architecture.md")).unwrap();
    let map = architecture
        .split("| module (`filter/core/src/`) | does |")
        .nth(1)
        .unwrap()
        .split("\n\n")
        .next()
        .unwrap();
    let named: BTreeSet<String> = map
        .lines()
        .filter_map(|line| line.strip_prefix("| "))
        .filter_map(|line| line.split(" | ").next())
        .flat_map(|cell| code_spans(&[cell.to_owned()]))
        .collect();
    let source = repo().join("filter/core/src");
    for name in &named {
        assert!(
            source.join(name).exists(),
            "the module map names `{name}`, which is not in filter/core/src"
        );
    }
    for entry in fs::read_dir(&source).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let only_tests = entry.path().is_dir()
            && fs::read_dir(entry.path())
                .unwrap()
                .all(|file| file.unwrap().file_name() == "tests.rs");
        if name == "lib.rs" || name.ends_with("tests.rs") || only_tests {
            continue;
        }
        let listed = if entry.path().is_dir() {
            format!("{name}/")
        } else {
            name.clone()
        };
        assert!(
            named.contains(&listed),
            "filter/core/src/{listed} is missing from docs/architecture.md's module map"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Commands and flags

/// Every command the docs show: code spans, and the lines of fenced blocks (joined at `\`).
fn commands(page: &Page) -> Vec<String> {
    let (prose, blocks) = split(&page.text);
    let mut found = code_spans(&prose);
    for block in blocks {
        let mut joined = String::new();
        for line in block.lines {
            let line = line.split(" # ").next().unwrap_or_default();
            if let Some(continued) = line.strip_suffix('\\') {
                joined.push_str(continued);
                joined.push(' ');
            } else {
                joined.push_str(line);
                found.push(std::mem::take(&mut joined));
            }
        }
    }
    found
}

/// The words of each `PROGRAM …` invocation in a command line, up to a pipe, a redirection or
/// a separator.
fn invocations<'a>(line: &'a str, program: &str) -> Vec<Vec<&'a str>> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut found = Vec::new();
    for (at, word) in words.iter().enumerate() {
        let word = word.trim_start_matches(['(', '`', '$']);
        if word == program || word.ends_with(&format!("/{program}")) && !word.starts_with("scripts/") {
            let rest = words[at + 1..]
                .iter()
                .take_while(|word| !matches!(**word, "|" | ">" | "2>" | "&&" | ";" | "||" | "#"))
                .copied()
                .collect();
            found.push(rest);
        }
    }
    found
}

fn flags<'a>(words: &[&'a str]) -> Vec<&'a str> {
    words
        .iter()
        .filter(|word| word.starts_with("--") && word.len() > 2)
        .map(|word| word.split(['=', '`', ',', ')', ';']).next().unwrap_or_default())
        .collect()
}

#[test]
fn every_switchblade_command_and_flag_the_docs_show_exists() {
    let top_help = switchblade(&["--help"]).ok();
    let mut helps: BTreeMap<String, String> = BTreeMap::new();
    let mut shown = 0;
    let mut wrong = BTreeSet::new();
    for page in pages() {
        for line in commands(&page) {
            for words in invocations(&line, "switchblade") {
                let Some(subcommand) = words.first() else { continue };
                let subcommand = subcommand.trim_end_matches(['`', ',', ')', '.']);
                // Not a command: a log line's `switchblade:`, a placeholder, a flag.
                if !subcommand.chars().all(|c| c.is_ascii_lowercase()) {
                    continue;
                }
                if !top_help.contains(&format!("  {subcommand} ")) {
                    // Prose that names the binary ("switchblade turns …") is not a command.
                    if subcommand.chars().all(|c| c.is_ascii_lowercase()) && words.len() > 1 && flags(&words).is_empty()
                    {
                        continue;
                    }
                    wrong.insert(format!("{}: switchblade {subcommand}: no such command", page.path));
                    continue;
                }
                shown += 1;
                let help = helps
                    .entry(subcommand.to_owned())
                    .or_insert_with(|| switchblade(&[subcommand, "--help"]).ok());
                for flag in flags(&words) {
                    if !help.contains(flag) {
                        wrong.insert(format!("{}: switchblade {subcommand} {flag}: no such flag", page.path));
                    }
                }
            }
        }
    }
    assert!(
        shown > 20,
        "found only {shown} switchblade commands: the heuristic changed?"
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn every_script_the_docs_show_exists_with_its_flags() {
    let mut wrong = BTreeSet::new();
    for page in pages() {
        for line in commands(&page) {
            let words: Vec<&str> = line.split_whitespace().collect();
            for (at, word) in words.iter().enumerate() {
                let Some(start) = word.find("scripts/") else { continue };
                let name: String = word[start..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_'))
                    .collect();
                if name == "scripts/" || is_output(&name) {
                    continue;
                }
                let path = repo().join(&name);
                let Ok(metadata) = fs::metadata(&path) else {
                    wrong.insert(format!("{}: {name} does not exist", page.path));
                    continue;
                };
                if std::os::unix::fs::PermissionsExt::mode(&metadata.permissions()) & 0o111 == 0 {
                    wrong.insert(format!("{}: {name} is not executable", page.path));
                }
                let script = fs::read_to_string(&path).unwrap();
                // The Python program the script hands its arguments to, if any.
                let program = script
                    .split_whitespace()
                    .find(|word| word.starts_with("test-harness/") && word.ends_with(".py"))
                    .map(|program| fs::read_to_string(repo().join(program)).unwrap_or_default())
                    .unwrap_or_default();
                let rest: Vec<&str> = words[at + 1..]
                    .iter()
                    .take_while(|word| !matches!(**word, "|" | ">" | "&&" | ";" | "#") && !word.contains("scripts/"))
                    .copied()
                    .collect();
                for flag in flags(&rest) {
                    if !script.contains(flag) && !program.contains(flag) {
                        wrong.insert(format!("{}: {name} {flag}: no such option", page.path));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

// ---------------------------------------------------------------------------------------------
// Errors

/// The errors the docs quote: the lines of `error` blocks, and the code spans of table columns
/// headed `error`; each with the page it is on.
fn quoted_errors() -> Vec<(String, String)> {
    let mut quotes = Vec::new();
    for page in pages() {
        let (prose, blocks) = split(&page.text);
        for block in blocks.into_iter().filter(|block| block.info == "error") {
            quotes.extend(block.lines.into_iter().map(|line| (page.path.clone(), line)));
        }
        let mut column = None;
        for line in &prose {
            if !line.starts_with('|') {
                column = None;
                continue;
            }
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
            match column {
                None if line.contains("---") => {}
                None => column = cells.iter().position(|cell| cell.contains("error")).map(Some),
                Some(None) => {}
                Some(Some(at)) => {
                    if let Some(cell) = cells.get(at) {
                        for span in code_spans(&[cell.to_string()]) {
                            quotes.push((page.path.clone(), span));
                        }
                    }
                }
            }
            if column.is_none() && !line.contains("---") {
                column = Some(None);
            }
        }
    }
    quotes
}

/// The string literals of a Rust source, escapes decoded (comments and char literals skipped).
fn string_literals(source: &str) -> Vec<String> {
    let chars: Vec<char> = source.chars().collect();
    let mut literals = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        match chars[at] {
            '/' if chars.get(at + 1) == Some(&'/') => {
                while at < chars.len() && chars[at] != '\n' {
                    at += 1;
                }
            }
            '\'' => {
                // A char literal ('x', '\n', '\'') or a lifetime ('a).
                if chars.get(at + 1) == Some(&'\\') {
                    at += 2;
                    while at < chars.len() && chars[at] != '\'' {
                        at += 1;
                    }
                } else if chars.get(at + 2) == Some(&'\'') {
                    at += 2;
                }
                at += 1;
            }
            // A raw string (r"…", r#"…"#), not a raw identifier (r#type).
            'r' if chars[at + 1..].iter().find(|c| **c != '#') == Some(&'"')
                && !chars
                    .get(at.wrapping_sub(1))
                    .is_some_and(|c| c.is_alphanumeric() || *c == '_') =>
            {
                let hashes = chars[at + 1..].iter().take_while(|c| **c == '#').count();
                let start = at + 1 + hashes + 1;
                let end_mark: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
                let mut end = start;
                while end < chars.len() && !chars[end..].starts_with(&end_mark) {
                    end += 1;
                }
                literals.push(chars[start.min(end)..end].iter().collect());
                at = end + end_mark.len();
            }
            '"' => {
                let mut literal = String::new();
                at += 1;
                while at < chars.len() && chars[at] != '"' {
                    if chars[at] == '\\' {
                        at += 1;
                        match chars.get(at) {
                            Some('n') => literal.push('\n'),
                            Some('t') => literal.push('\t'),
                            Some('\n') => {
                                while chars.get(at + 1).is_some_and(|c| c.is_whitespace()) {
                                    at += 1;
                                }
                            }
                            Some(other) => literal.push(*other),
                            None => {}
                        }
                    } else {
                        literal.push(chars[at]);
                    }
                    at += 1;
                }
                literals.push(literal);
                at += 1;
            }
            _ => at += 1,
        }
    }
    literals
}

/// The literal parts of a format string, between its `{…}` placeholders.
fn literal_parts(format: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                parts.last_mut().unwrap().push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                parts.last_mut().unwrap().push('}');
            }
            '{' => {
                for inner in chars.by_ref() {
                    if inner == '}' {
                        break;
                    }
                }
                parts.push(String::new());
            }
            _ => parts.last_mut().unwrap().push(c),
        }
    }
    parts.retain(|part| !part.is_empty());
    parts
}

fn rust_sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_sources(&path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            found.push(path);
        }
    }
}

/// The literal parts of every string in the code that prints errors, and of [`LIBRARY_TEXTS`]:
/// each string's parts, for strings with at least 12 characters of literal text.
fn formats() -> Vec<Vec<String>> {
    let mut files = Vec::new();
    for dir in [
        "filter/core/src",
        "filter/wasm/src",
        "filter/module/src",
        "cli/src",
        "test-harness/src",
    ] {
        rust_sources(&repo().join(dir), &mut files);
    }
    let mut literals: Vec<String> = files
        .iter()
        .flat_map(|file| string_literals(&fs::read_to_string(file).unwrap()))
        .collect();
    literals.extend(LIBRARY_TEXTS.iter().map(|(text, _)| (*text).to_owned()));
    literals
        .iter()
        .map(|literal| literal_parts(literal))
        .filter(|parts| parts.iter().map(String::len).sum::<usize>() >= 12)
        .collect()
}

/// Marks the bytes of `quote` that a string's literal parts cover. The parts are looked for in
/// order, each after the last one found (a part not found is skipped: a quote may leave the
/// start or the end out with `…`); a placeholder between two parts found is covered too when
/// it holds one word, since the string put it there.
fn cover(quote: &str, parts: &[String], covered: &mut [bool]) {
    let mut from = 0;
    let mut previous_end: Option<usize> = None;
    for part in parts {
        let Some((at, end)) = find_part(quote, from, part) else {
            previous_end = None;
            continue;
        };
        covered[at..end].iter_mut().for_each(|byte| *byte = true);
        if let Some(previous) = previous_end {
            if !quote[previous..at].contains(char::is_whitespace) {
                covered[previous..at].iter_mut().for_each(|byte| *byte = true);
            }
        }
        previous_end = Some(end);
        from = end;
    }
}

/// Where `part` is in `quote` from `from` on: whole, or cut by the quote's end (the quote ends
/// with the part's start) or start (the quote starts with the part's end, where the docs'
/// `…` or the table's other column holds the rest), or at both. A cut part must keep 8
/// characters.
fn find_part(quote: &str, from: usize, part: &str) -> Option<(usize, usize)> {
    if let Some(at) = quote[from..].find(part) {
        return Some((from + at, from + at + part.len()));
    }
    // The quote cut at both ends: all of it is inside the part.
    if from == 0 && quote.trim().len() >= 8 && part.contains(quote.trim_end()) {
        return Some((0, quote.len()));
    }
    let tail = &quote[from..];
    let cut = |length: usize| length >= 8;
    let ends_with_start = (1..part.len())
        .rev()
        .filter(|length| part.is_char_boundary(*length) && cut(*length))
        .find(|length| tail.ends_with(&part[..*length]));
    if let Some(length) = ends_with_start {
        return Some((quote.len() - length, quote.len()));
    }
    let starts_with_end = (1..part.len())
        .filter(|start| part.is_char_boundary(*start) && cut(part.len() - start))
        .find(|start| from == 0 && quote.starts_with(&part[*start..]));
    starts_with_end.map(|start| (0, part.len() - start))
}

/// Whether a word of a quote is a value rather than the code's words: a number, a name with
/// punctuation or digits, a word in capitals (the docs write `T` or `N` for a tool's name or a
/// number), or a name in CamelCase.
fn is_value(word: &str) -> bool {
    word.chars()
        .any(|c| c.is_ascii_digit() || matches!(c, '.' | '_' | '/' | '-' | '[' | ':' | '@' | '='))
        || word.chars().all(|c| c.is_ascii_uppercase())
        || word.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && word.chars().skip(1).any(|c| c.is_ascii_uppercase())
}

/// The words of a quote that neither the code's strings cover nor are values.
fn unaccounted(quote: &str, formats: &[Vec<String>]) -> Vec<String> {
    let quote = quote
        .strip_prefix("[error][wasm] wasm log switchblade switchblade: ")
        .or_else(|| quote.strip_prefix("switchblade: "))
        .unwrap_or(quote);
    let mut covered = vec![false; quote.len()];
    for pieces in quote.split('…') {
        let offset = pieces.as_ptr() as usize - quote.as_ptr() as usize;
        for parts in formats {
            cover(pieces, parts, &mut covered[offset..offset + pieces.len()]);
        }
    }
    // What is in backticks or quotes is a value given or named, not the code's words.
    let mut quoted = vec![false; quote.len()];
    for mark in ['`', '"'] {
        let mut open = None;
        for (at, c) in quote.char_indices() {
            if c == mark {
                match open.take() {
                    None => open = Some(at),
                    Some(start) => quoted[start..=at].iter_mut().for_each(|byte| *byte = true),
                }
            }
        }
    }
    let mut words = Vec::new();
    let mut start = 0;
    for (at, c) in quote.char_indices().chain(std::iter::once((quote.len(), ' '))) {
        if c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '…') {
            let word = quote[start..at].trim_matches(|c: char| !c.is_alphanumeric());
            let begin = start + quote[start..at].find(word).unwrap_or(0);
            let end = begin + word.len();
            let accounted = word.is_empty()
                || is_value(&quote[start..at])
                || covered[begin..end].iter().all(|byte| *byte)
                || quoted[begin..end].iter().all(|byte| *byte);
            if !accounted {
                words.push(word.to_owned());
            }
            start = at + c.len_utf8();
        }
    }
    words
}

#[test]
fn every_error_the_docs_quote_is_one_the_code_prints() {
    let formats = formats();
    let quotes = quoted_errors();
    assert!(
        quotes.len() > 40,
        "found only {} quoted errors: the conventions changed?",
        quotes.len()
    );
    let mut wrong = Vec::new();
    for (page, quote) in &quotes {
        let words = unaccounted(quote, &formats);
        if !words.is_empty() {
            wrong.push(format!("{page}: {quote}\n    not in the code: {words:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "quoted errors the code does not print:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_wrong_configurations_the_reference_quotes_are_refused_in_those_words() {
    let reference = fs::read_to_string(repo().join("docs/configuration.md")).unwrap();
    let section = reference
        .split("\n## When the configuration is wrong\n")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    let (_, blocks) = split(section);
    let quoted: Vec<&String> = blocks
        .iter()
        .filter(|block| block.info == "error")
        .flat_map(|block| &block.lines)
        .collect();
    assert_eq!(
        quoted.len(),
        WRONG_CONFIGURATIONS.len(),
        "one configuration a quoted error"
    );
    for (configuration, quote) in WRONG_CONFIGURATIONS.iter().zip(quoted) {
        let run = switchblade_in(&repo(), &["check", "-"], configuration);
        assert_eq!(run.code, 1, "{configuration} passes: {}", run.stdout);
        let printed = run
            .stderr
            .split_once("invalid plugin configuration: ")
            .map(|(_, error)| error.trim_end())
            .unwrap_or_else(|| panic!("{}", run.stderr));
        let expected = format!("invalid plugin configuration: {printed}");
        assert!(
            quote.ends_with(&expected),
            "docs/configuration.md quotes\n  {quote}\nwhere the filter says\n  {expected}"
        );
    }
}

/// The subcommands a `--help` lists, or the flags (`--name`, `-x`) it lists.
fn help_entries(help: &str, section: &str) -> Vec<String> {
    let Some(rest) = help.split(&format!("\n{section}:\n")).nth(1) else {
        return Vec::new();
    };
    // Long help puts a blank line between entries; the section ends at the next heading.
    rest.lines()
        .take_while(|line| line.is_empty() || line.starts_with(' '))
        .filter(|line| {
            let entry = line.trim_start();
            // An entry's own line, not a line of its description.
            entry.starts_with('-') || (section == "Commands" && line.starts_with("  ") && !line.starts_with("      "))
        })
        .filter_map(|line| {
            let entry = line.trim_start();
            match section {
                "Commands" => entry.split_whitespace().next().map(str::to_owned),
                _ => entry
                    .split([',', ' '])
                    .find(|word| word.starts_with("--"))
                    .map(str::to_owned),
            }
        })
        .collect()
}

#[test]
fn every_command_and_flag_of_the_cli_is_documented() {
    let page = std::fs::read_to_string(repo().join("docs/cli.md")).unwrap();
    let commands = help_entries(&switchblade(&["--help"]).ok(), "Commands");
    assert!(commands.len() >= 6, "{commands:?}");
    let mut undocumented = Vec::new();
    for command in &commands {
        if !page.contains(&format!("| `{command}")) {
            undocumented.push(format!("switchblade {command}: no row in docs/cli.md's Commands"));
        }
        if command == "help" {
            continue;
        }
        for flag in help_entries(&switchblade(&[command, "--help"]).ok(), "Options") {
            if flag != "--help" && !page.contains(&format!("`{flag}")) {
                undocumented.push(format!("switchblade {command} {flag}: not in docs/cli.md"));
            }
        }
    }
    assert!(undocumented.is_empty(), "{undocumented:#?}");
}

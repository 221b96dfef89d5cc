//! The benchmark's figures the docs quote are the headline's.
//!
//! BENCHMARKS.md opens with one headline, measured on one commit; the README and docs/ quote
//! from it and from nothing else. A **figure** is a number or a range followed by a unit of
//! measure (`1.25–1.31 ×`, `61 µs`, `155 MiB`, `1,757 bytes`). The figures checked are those of
//! every paragraph (a table row counts as one) of docs/performance.md, of any paragraph that
//! cites the benchmark (links to BENCHMARKS.md, docs/benchmarks/ or performance.md), and of any
//! paragraph holding a measured ratio (a number with decimals followed by `×`). Each must be a
//! figure of the headline, written the same way.

use std::collections::BTreeSet;
use std::fs;

use super::{pages, repo, split};

/// Units of measure, longest first where one begins another.
const UNITS: &[&str] = &[
    "×", "req/s", "µs", "ns", "ms", "s", "GiB", "MiB", "KiB", "MB", "KB", "kB", "bytes", "B", "%",
];

/// The headline of BENCHMARKS.md: from its `## Headline` heading to the next `## `.
fn headline() -> String {
    let text = fs::read_to_string(repo().join("test-harness/BENCHMARKS.md")).unwrap();
    let start = text
        .find("\n## Headline")
        .expect("BENCHMARKS.md has a `## Headline` section");
    let rest = &text[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |end| end + 3);
    rest[..end].to_owned()
}

/// Prose split into paragraphs: blank lines end one, and each table row or list item is one.
fn paragraphs(prose: &[String]) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut open = String::new();
    for line in prose {
        let trimmed = line.trim();
        let starts_one =
            trimmed.is_empty() || trimmed.starts_with('|') || trimmed.starts_with("- ") || trimmed.starts_with('#');
        if starts_one && !open.is_empty() {
            found.push(std::mem::take(&mut open));
        }
        if !trimmed.is_empty() {
            open.push(' ');
            open.push_str(trimmed);
        }
        if trimmed.starts_with('|') || trimmed.starts_with('#') {
            found.push(std::mem::take(&mut open));
        }
    }
    if !open.is_empty() {
        found.push(open);
    }
    found
}

/// The figures of a text, each as `NUMBER UNIT` with one plain space between.
fn figures(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        let starts_number = chars[at].is_ascii_digit()
            && (at == 0 || !(chars[at - 1].is_alphanumeric() || ".,–-_".contains(chars[at - 1])));
        if !starts_number {
            at += 1;
            continue;
        }
        let mut end = at;
        while end < chars.len()
            && (chars[end].is_ascii_digit()
                || (".,–".contains(chars[end]) && chars.get(end + 1).is_some_and(char::is_ascii_digit)))
        {
            end += 1;
        }
        let number: String = chars[at..end].iter().collect();
        let mut unit_at = end;
        if chars
            .get(unit_at)
            .is_some_and(|c| [' ', '\u{a0}', '\u{202f}'].contains(c))
        {
            unit_at += 1;
        }
        let rest: String = chars[unit_at..chars.len().min(unit_at + 6)].iter().collect();
        let unit = UNITS.iter().find(|unit| {
            rest.starts_with(**unit)
                && rest[unit.len()..]
                    .chars()
                    .next()
                    .is_none_or(|next| !next.is_alphanumeric())
        });
        if let Some(unit) = unit {
            found.push(format!("{number} {unit}"));
        }
        at = end;
    }
    found
}

/// Whether a paragraph says what the benchmark measured: it cites it, or holds a ratio.
fn quotes_the_benchmark(paragraph: &str) -> bool {
    ["BENCHMARKS.md", "benchmarks/", "performance.md"]
        .iter()
        .any(|cited| paragraph.contains(cited))
        || figures(paragraph)
            .iter()
            .any(|figure| figure.ends_with(" ×") && figure.contains('.'))
}

#[test]
fn the_figure_reader_reads_figures_and_nothing_else() {
    assert_eq!(
        figures("serves 1.25–1.31 × the chain's, 61 µs at p50, about 155\u{a0}MiB; 1,757 bytes, 4%"),
        ["1.25–1.31 ×", "61 µs", "155 MiB", "1,757 bytes", "4 %"]
    );
    assert!(
        figures("Envoy v1.40.0, 16 connections, 3 rounds, x86_64, 4 × `max_response_bytes`, 2 items")
            .iter()
            .all(|f| f == "4 ×")
    );
    assert!(!quotes_the_benchmark("4 × `max_response_bytes`"));
    assert!(quotes_the_benchmark("the module: 1.2 × the chain"));
}

#[test]
fn every_figure_the_docs_quote_is_the_headlines() {
    let headline: BTreeSet<String> = figures(&headline()).into_iter().collect();
    assert!(headline.len() > 20, "the headline holds few figures: {headline:?}");
    let mut strays = Vec::new();
    for page in pages() {
        let (prose, _) = split(&page.text);
        let whole_page = page.path == "docs/performance.md";
        for paragraph in paragraphs(&prose) {
            if !(whole_page || quotes_the_benchmark(&paragraph)) {
                continue;
            }
            for figure in figures(&paragraph) {
                if !headline.contains(&figure) {
                    strays.push(format!("{}: {figure:?} in {paragraph:?}", page.path));
                }
            }
        }
    }
    assert!(
        strays.is_empty(),
        "figures the docs quote that the headline of test-harness/BENCHMARKS.md does not hold \
         (quote it as the headline writes it, or measure it there): {strays:#?}"
    );
}

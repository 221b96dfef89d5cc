//! What tool search's index holds against the catalog it indexes, natively:
//! `cargo bench -p switchblade-core --bench search_index -- CONFIG.json…` (plugin
//! configurations; `scripts/bench` passes its scale and real catalogs). Without arguments, the
//! embedded demo catalog.
//!
//! Live heap bytes, counted by dhat's allocator: the descriptor pool and the catalog built from
//! it (what every build holds), then what building the index adds (what search mode adds).

// A benchmark: a broken expectation should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;

use switchblade_core::catalog::Catalog;
use switchblade_core::config::{DiscoveryTools, PluginConfig};
use switchblade_core::descriptors::configured_pool;
use switchblade_core::search::ToolSearch;

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

const DEMO: &str = r#"{"services": {"demo.catalog.v1.CatalogService": {"cluster": "c", "streaming": true},
                                   "demo.users.v1.UserService": {"cluster": "c"}}}"#;

fn live_bytes() -> usize {
    dhat::HeapStats::get().curr_bytes
}

fn main() {
    let files: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with("--")).collect();
    let _profiler = dhat::Profiler::builder().testing().build();
    println!("| catalog | tools | pool and catalog | index | index / catalog | stems | postings |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let configurations = match files.is_empty() {
        true => vec![("demo".to_owned(), DEMO.as_bytes().to_vec())],
        false => files
            .iter()
            .map(|file| (file.clone(), std::fs::read(file).unwrap()))
            .collect(),
    };
    for (name, bytes) in configurations {
        let config = PluginConfig::parse(&bytes).unwrap();
        let before = live_bytes();
        let pool = configured_pool(config.descriptor_set.as_deref()).unwrap();
        let catalog = Catalog::build(&config, &pool, false).unwrap();
        let catalog_bytes = live_bytes() - before;
        let search = ToolSearch::build(&catalog, &DiscoveryTools::default());
        let index_bytes = live_bytes() - before - catalog_bytes;
        let (stems, postings) = search.size();
        let label = std::path::Path::new(&name)
            .file_stem()
            .map_or(name.clone(), |stem| stem.to_string_lossy().into_owned());
        println!(
            "| {label} | {} | {} KiB | {} KiB | {:.0}% | {stems} | {postings} |",
            catalog.tool_count(),
            catalog_bytes / 1024,
            index_bytes / 1024,
            100.0 * index_bytes as f64 / catalog_bytes as f64,
        );
        black_box((search, catalog, pool));
    }
}

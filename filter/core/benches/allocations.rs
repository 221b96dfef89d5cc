//! How many blocks the filter allocates per `tools/call`, natively:
//! `cargo bench -p switchblade-core --bench allocations`.
//!
//! The same `CatalogService_GetItem` call as `hot_path`, counted instead of timed (the counting
//! allocator takes a lock per allocation, so it lives in its own binary). With
//! `SWITCHBLADE_DHAT=1` it also writes `dhat-heap.json`, each allocation site with its stack.
//! Then what the call's tool keeps once it has answered: its render plan.

// A benchmark: a broken expectation should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;

use switchblade_core::descriptors::embedded_pool;
use switchblade_core::proto_json::render::RenderPlan;

mod get_item;
use get_item::GetItem;

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

const CALLS: u64 = 1000;

fn main() {
    let get_item = GetItem::new();
    let profiler = match std::env::var_os("SWITCHBLADE_DHAT") {
        Some(_) => dhat::Profiler::new_heap(),
        None => dhat::Profiler::builder().testing().build(),
    };
    let blocks = || dhat::HeapStats::get().total_blocks;
    // What the first call sets up once (lazily built tables) is not the call's.
    let answer = get_item.answered();
    assert_eq!(answer["result"]["structuredContent"]["name"], "Switchblade multitool");
    let mut host = GetItem::host(true);
    let mut exchange = get_item.plan(&mut host);
    get_item.answer(&mut exchange, &mut host);
    let (mut request_half, mut reply_half) = (0, 0);
    for _ in 0..CALLS {
        let before = blocks();
        let mut exchange = get_item.plan(&mut host);
        let planned = blocks();
        get_item.answer(&mut exchange, &mut host);
        black_box(exchange);
        request_half += planned - before;
        reply_half += blocks() - planned;
    }
    let item = embedded_pool()
        .unwrap()
        .get_message_by_name("demo.catalog.v1.Item")
        .unwrap();
    let held_before = dhat::HeapStats::get();
    let plan = RenderPlan::new(&item);
    let held = dhat::HeapStats::get();
    black_box(&plan);
    drop(profiler);
    println!("tools/call CatalogService_GetItem, natively, blocks allocated per call:");
    println!("  request half (read, check, encode, start) {:8}", request_half / CALLS);
    println!("  reply half (decode, render, send)         {:8}", reply_half / CALLS);
    println!(
        "the tool's render plan (demo.catalog.v1.Item and the types inside): {} bytes in {} blocks, \
         plus {} bytes for the plan itself",
        held.curr_bytes - held_before.curr_bytes,
        held.curr_blocks - held_before.curr_blocks,
        std::mem::size_of_val(&plan),
    );
}

//! Any bytes as a reflection answer's body, after any status, through a refresh: framing,
//! protobuf decoding, the files it claims to hold, the imports it asks for next, and the
//! catalog built from whatever it holds.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use prost_reflect::DescriptorPool;
use switchblade_core::config::PluginConfig;
use switchblade_core::descriptors::embedded_pool;
use switchblade_core::reflection::{Discovery, ReflectionCallEnd, Step};

thread_local! {
    // Read once per fuzzing thread: a configuration and the embedded descriptors.
    static SETUP: (PluginConfig, DescriptorPool) = {
        let config = br#"{"services":{"demo.catalog.v1.CatalogService":{"cluster":"c","from_reflection":true}}}"#;
        (
            PluginConfig::parse(config).expect("the fuzz configuration is valid"),
            embedded_pool().expect("the embedded descriptors load"),
        )
    };
}

fuzz_target!(|data: &[u8]| {
    let Some((&status, body)) = data.split_first() else {
        return;
    };
    let Some(mut discovery) = SETUP.with(|(config, pool)| Discovery::new(config, pool)) else {
        return;
    };
    let status = [b'0' + status % 16];
    let headers: [(&str, &[u8]); 1] = [(":status", b"200")];
    let trailers: [(&str, &[u8]); 1] = [("grpc-status", &status[..1])];
    let mut calls = discovery.start(Duration::ZERO);
    // Every call of every round gets the same answer, for a bounded number of calls.
    for _ in 0..64 {
        let Some(call) = calls.pop() else { return };
        let answer = ReflectionCallEnd::Http {
            headers: &headers,
            body,
            trailers: &trailers,
        };
        match discovery.file(call.id, answer, Duration::ZERO) {
            Step::Call(more) => calls.extend(more),
            Step::Wait => {}
            Step::Done(_) => return,
        }
    }
});

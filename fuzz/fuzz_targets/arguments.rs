//! Any JSON as the arguments of the kitchen-sink tools (every field kind): transcoding, the
//! strict checks, and the explanation of a refusal.
#![no_main]

#[path = "kitchen_sink.rs"]
mod kitchen_sink;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(arguments) = std::str::from_utf8(data) else { return };
    for tool in ["KitchenSinkService_Echo", "KitchenSinkService_EchoTree", "KitchenSinkService_EchoTime"] {
        kitchen_sink::call(tool, arguments, |_, _| ());
    }
});

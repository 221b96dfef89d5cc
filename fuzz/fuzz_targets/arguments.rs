//! Any JSON as the arguments of the kitchen-sink tools (every field kind) and the rules
//! service's (every buf.validate rule family): transcoding, the strict checks, the rules, and
//! the explanation of a refusal.
#![no_main]

#[path = "kitchen_sink.rs"]
mod kitchen_sink;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(arguments) = std::str::from_utf8(data) else { return };
    let tools = [
        "KitchenSinkService_Echo",
        "KitchenSinkService_EchoTree",
        "KitchenSinkService_EchoTime",
        "RulesService_PlaceOrder",
        "RulesService_SetLevel",
    ];
    for tool in tools {
        kitchen_sink::call(tool, arguments, |_, _| ());
    }
});

//! Any JSON as the arguments of the kitchen-sink tools (every field kind) and the rules
//! service's (every buf.validate rule family): transcoding, the strict checks, the rules, and
//! the explanation of a refusal.
#![no_main]

#[path = "kitchen_sink.rs"]
mod kitchen_sink;

use libfuzzer_sys::fuzz_target;
use switchblade_core::exchange::Step;

fuzz_target!(|data: &[u8]| {
    let Ok(arguments) = std::str::from_utf8(data) else {
        return;
    };
    let tools = [
        "KitchenSinkService_Echo",
        "KitchenSinkService_EchoTree",
        "KitchenSinkService_EchoTime",
        "RulesService_PlaceOrder",
        "RulesService_SetLevel",
    ];
    for tool in tools {
        kitchen_sink::call(tool, arguments, |server, exchange, step, host| {
            // A refusal is answered at once; a call that passed the gate waits for its upstream.
            assert!(matches!(step, Step::Answered | Step::Waiting), "{tool}: {step:?}");
            exchange.request_gone(server, host);
        });
    }
});

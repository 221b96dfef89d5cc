//! Any JSON as the arguments of the kitchen-sink tool (every field kind): transcoding, the
//! strict checks, and the explanation of a refusal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchblade_filter::http::McpHeaders;
use switchblade_filter::server::{McpRequest, Server};

thread_local! {
    // The filter is single-threaded (it shares with Rc), and so is each fuzzing thread.
    static SERVER: Server = {
        let config = br#"{"services":{"test.kitchensink.v1.KitchenSinkService":{"cluster":"c"}}}"#;
        Server::from_config_bytes(config).expect("the fuzz configuration is valid")
    };
}

fuzz_target!(|data: &[u8]| {
    let Ok(arguments) = std::str::from_utf8(data) else { return };
    for tool in ["KitchenSinkService_Echo", "KitchenSinkService_EchoTree", "KitchenSinkService_EchoTime"] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#);
        let headers = McpHeaders { content_type: Some("application/json".into()), ..McpHeaders::default() };
        SERVER.with(|server| {
            let _ = server.handle(McpRequest { headers: &headers, body: body.as_bytes() });
        });
    }
});

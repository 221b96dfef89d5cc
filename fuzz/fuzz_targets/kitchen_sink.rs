//! The server the kitchen-sink fuzz targets share (the kitchen sink's every field kind, and the
//! buf.validate rules service's every rule family): one per fuzzing thread, since the filter is
//! single-threaded (it shares state with Rc).

use switchblade_core::access::Caller;
use switchblade_core::http::McpHeaders;
use switchblade_core::observe::Observations;
use switchblade_core::server::{McpRequest, Outcome, Server};

thread_local! {
    static SERVER: Server = {
        let config = br#"{"services":{"test.kitchensink.v1.KitchenSinkService":{"cluster":"c"},"test.rules.v1.RulesService":{"cluster":"c"}}}"#;
        Server::from_config_bytes(config).expect("the fuzz configuration is valid")
    };
}

/// Calls `tool` with `arguments` (JSON text) and hands the server and the outcome to `then`.
pub fn call<T>(tool: &str, arguments: &str, then: impl FnOnce(&Server, Outcome) -> T) -> T {
    let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#);
    let headers = McpHeaders { content_type: Some("application/json".into()), ..McpHeaders::default() };
    SERVER.with(|server| {
        let mut observed = Observations::default();
        let outcome = server.handle(McpRequest { headers: &headers, body: body.as_bytes(), caller: &Caller::Anyone, client_address: None, counters: None }, &mut observed);
        then(server, outcome)
    })
}

//! The server the kitchen-sink fuzz targets share (the kitchen sink's every field kind, and the
//! buf.validate rules service's every rule family): one per fuzzing thread, since the filter is
//! single-threaded (it shares state with Rc).

use switchblade_core::exchange::fake_host::{post, FakeExchange, FakeHead, FakeHost};
use switchblade_core::exchange::Step;
use switchblade_core::server::Server;

thread_local! {
    static SERVER: Server = {
        let config = br#"{"services":{"test.kitchensink.v1.KitchenSinkService":{"cluster":"c"},"test.rules.v1.RulesService":{"cluster":"c"}}}"#;
        Server::from_config_bytes(config).expect("the fuzz configuration is valid")
    };
}

/// Calls `tool` with `arguments` (JSON text) through the exchange, and hands the server, the
/// exchange, where it stands and its host to `then`.
pub fn call<T>(
    tool: &str,
    arguments: &str,
    then: impl FnOnce(&Server, &mut FakeExchange, Step, &mut FakeHost) -> T,
) -> T {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#
    );
    SERVER.with(|server| {
        let mut host = FakeHost::default();
        let (mut exchange, step) = post(server, &mut host, &FakeHead::post("/mcp"), body.as_bytes());
        then(server, &mut exchange, step, &mut host)
    })
}

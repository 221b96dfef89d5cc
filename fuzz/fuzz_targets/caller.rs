//! Any bytes where the verified token payload should be, read as dynamic metadata (protobuf)
//! and as filter state (JSON text), then a tools/list and a tools/call as that caller, through the exchange.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchblade_core::exchange::fake_host::{post, FakeHead, FakeHost};
use switchblade_core::server::Server;

thread_local! {
    static SERVERS: [Server; 2] = {
        let services = r#""services":{"demo.catalog.v1.CatalogService":{"cluster":"c"},"demo.users.v1.UserService":{"cluster":"c"}},
            "tools_list":{"page_size":1}"#;
        let rules = r#""rules":{"demo.catalog.v1.CatalogService":["catalog:read"],"demo.users.v1.UserService/GetUser":["users:read","x"]}"#;
        let metadata = format!(r#"{{{services},"authorization":{{{rules}}}}}"#);
        let filter_state = format!(
            r#"{{{services},"authorization":{{{rules},"claim":["a","roles"],"unlisted":"allow","token_payload":{{"filter_state":"k"}}}}}}"#
        );
        [metadata, filter_state].map(|config| Server::from_config_bytes(config.as_bytes()).expect("the fuzz configuration is valid"))
    };
}

const BODIES: [&str; 2] = [
    r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"UserService_GetUser","arguments":{"user_id":1}}}"#,
];

fuzz_target!(|data: &[u8]| {
    SERVERS.with(|servers| {
        for server in servers {
            for body in BODIES {
                let mut host = FakeHost {
                    token_payload: Some(data.to_vec()),
                    ..FakeHost::default()
                };
                let (mut exchange, _) = post(server, &mut host, &FakeHead::post("/mcp"), body.as_bytes());
                exchange.request_gone(server, &mut host);
            }
        }
    });
});

//! Any bytes from the upstream: as a response message of every kitchen-sink type, and as
//! `grpc-status-details-bin`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchblade_filter::http::McpHeaders;
use switchblade_filter::server::{GrpcReply, McpRequest, Outcome, Server};

thread_local! {
    // The filter is single-threaded (it shares with Rc), and so is each fuzzing thread.
    static SERVER: Server = {
        let config = br#"{"services":{"test.kitchensink.v1.KitchenSinkService":{"cluster":"c"}}}"#;
        Server::from_config_bytes(config).expect("the fuzz configuration is valid")
    };
}

fuzz_target!(|data: &[u8]| {
    let headers = McpHeaders { content_type: Some("application/json".into()), ..McpHeaders::default() };
    for (tool, arguments) in [
        ("KitchenSinkService_Echo", r#"{"must":"m"}"#),
        ("KitchenSinkService_EchoTree", "{}"),
        ("KitchenSinkService_EchoTime", "{}"),
        ("KitchenSinkService_Ping", "{}"),
    ] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#);
        SERVER.with(|server| {
            let Outcome::Await(mut reply, calls) = server.handle(McpRequest { headers: &headers, body: body.as_bytes() })
            else {
                panic!("{tool} did not become a call");
            };
            let status = if data.first().is_some_and(|b| b & 1 == 1) { 3 } else { 0 };
            server.complete(&mut reply, &calls[0], GrpcReply { status, message: None, body: data, details: Some(data) });
            let _ = reply.into_response();
        });
    }
});

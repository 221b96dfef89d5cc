//! Any POST body, with any of the headers the endpoint reads, through the whole request path:
//! parsing, era choice, header checks, dispatch, and the replies of the calls it asks for.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use switchblade_core::access::Caller;
use switchblade_core::http::McpHeaders;
use switchblade_core::observe::Observations;
use switchblade_core::server::{McpRequest, Outcome, Server};
use switchblade_core::grpc::call_end::{CallEnd, GrpcReply};

thread_local! {
    // The filter is single-threaded (it shares with Rc), and so is each fuzzing thread.
    static SERVER: Server = {
        let config = br#"{"forward_headers":["x-request-id"],"allowed_origins":["https://ok.example"],
            "tools_list":{"page_size":2},
            "services":{"demo.catalog.v1.CatalogService":{"cluster":"c"},"demo.users.v1.UserService":{"cluster":"c"},
                        "test.kitchensink.v1.KitchenSinkService":{"cluster":"c"}}}"#;
        Server::from_config_bytes(config).expect("the fuzz configuration is valid")
    };
}

const VERSIONS: [&str; 4] = ["2026-07-28", "2025-11-25", "2025-03-26", "1999-01-01"];
const METHODS: [&str; 4] = ["tools/call", "tools/list", "server/discover", "initialize"];
const NAMES: [&str; 3] = ["UserService_GetUser", "KitchenSinkService_Echo", "=?base64?VXNlclNlcnZpY2VfR2V0VXNlcg==?="];

fuzz_target!(|data: &[u8]| {
    // The first byte picks the headers; the rest is the body.
    let Some((&choice, body)) = data.split_first() else { return };
    let pick = |items: &[&str], shift: u8| -> Option<String> {
        let index = usize::from((choice >> shift) & 0b11);
        items.get(index).map(|item| (*item).to_owned())
    };
    let headers = McpHeaders {
        content_type: Some("application/json".into()),
        protocol_version: if choice & 1 == 0 { None } else { pick(&VERSIONS, 1) },
        mcp_method: pick(&METHODS, 3),
        mcp_name: pick(&NAMES, 5),
        origin: (choice & 0x80 != 0).then(|| "https://ok.example".into()),
        ..McpHeaders::default()
    };
    SERVER.with(|server| answer_everything(server, &headers, body));
});

fn answer_everything(server: &Server, headers: &McpHeaders, body: &[u8]) {
    let mut observed = Observations::default();
    if let Outcome::Await(mut reply) = server.handle(McpRequest { headers, body, caller: &Caller::Anyone, client_address: None, counters: None }, &mut observed) {
        let calls = reply.take_calls_to_start();
        // Answer each call with bytes from the body itself: valid or not, it must not panic.
        for (index, call) in calls.iter().enumerate() {
            let grpc = GrpcReply { status: (index % 3) as u32 * 7, message: Some(b"x%20y"), body, details: Some(body) };
            server.file(&mut reply, call, CallEnd::Replied(grpc), Duration::ZERO, &mut observed);
        }
        let _ = reply.into_response();
    }
    // What the host publishes must not panic either, whatever the request was.
    let _ = (observed.samples(), observed.log_fields());
}

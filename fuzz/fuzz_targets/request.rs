//! Any POST body, with any of the headers the endpoint reads, through the whole request path:
//! parsing, era choice, header checks, dispatch, and the replies of the calls it asks for, by
//! the exchange over the fake host.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchblade_core::exchange::fake_host::{post, FakeHead, FakeHost};
use switchblade_core::exchange::Step;
use switchblade_core::http::HeaderCopy;
use switchblade_core::server::Server;

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
const NAMES: [&str; 3] = [
    "UserService_GetUser",
    "KitchenSinkService_Echo",
    "=?base64?VXNlclNlcnZpY2VfR2V0VXNlcg==?=",
];

fuzz_target!(|data: &[u8]| {
    // The first byte picks the headers; the rest is the body.
    let Some((&choice, body)) = data.split_first() else {
        return;
    };
    let pick = |items: &[&str], shift: u8| -> Option<String> {
        let index = usize::from((choice >> shift) & 0b11);
        items.get(index).map(|item| (*item).to_owned())
    };
    let mut head = FakeHead::post("/mcp").without("mcp-protocol-version");
    let headers = [
        (
            "mcp-protocol-version",
            if choice & 1 == 0 { None } else { pick(&VERSIONS, 1) },
        ),
        ("mcp-method", pick(&METHODS, 3)),
        ("mcp-name", pick(&NAMES, 5)),
        ("origin", (choice & 0x80 != 0).then(|| "https://ok.example".into())),
    ];
    for (name, value) in headers {
        if let Some(value) = value {
            head = head.with(name, value);
        }
    }
    SERVER.with(|server| answer_everything(server, &head, body));
});

/// Posts the request, then answers each call it makes with bytes from the body itself: valid
/// or not, nothing may panic, and the exchange must answer once its calls have ended.
fn answer_everything(server: &Server, head: &FakeHead, body: &[u8]) {
    let mut host = FakeHost::default();
    let (mut exchange, _) = post(server, &mut host, head, body);
    let mut answered = 0u32;
    while exchange.step() == Step::Waiting {
        let id = host.out[0];
        host.call_gone(id);
        let status = (answered % 3 * 7).to_string();
        answered += 1;
        let trailers = [
            ("grpc-status", status.as_bytes()),
            ("grpc-message", b"x%20y"),
            ("grpc-status-details-bin", body),
        ];
        let answer = || {
            (
                HeaderCopy::from_iter([(":status", "200")]),
                body.to_vec(),
                HeaderCopy::from_iter(trailers),
            )
        };
        exchange.call_answered(server, &mut host, id, body.len(), answer);
    }
    assert!(
        matches!(exchange.step(), Step::Answered | Step::Continue),
        "{:?}",
        exchange.step()
    );
}

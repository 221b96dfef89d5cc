//! The demo upstream's streaming methods, end to end against its binary: what each sends, how
//! it refuses, the stream modes the control API sets, and the stream counts it shows.

// Test code: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use switchblade_test_harness::proto::catalog::catalog_service_client::CatalogServiceClient;
use switchblade_test_harness::proto::catalog::{Category, ImportItemRequest, ImportSummary, WatchItemsRequest};
use switchblade_test_harness::proto::kitchen_sink::kitchen_sink_service_client::KitchenSinkServiceClient;
use switchblade_test_harness::proto::kitchen_sink::{Everything, Tree};
use switchblade_test_harness::proto::users::user_service_client::UserServiceClient;
use switchblade_test_harness::proto::users::ChatMessage;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::{Code, Request, Streaming};
use tonic_types::StatusExt;

/// The upstream binary on ports of its own, stopped when dropped.
struct Upstream {
    child: Child,
    grpc: String,
    control: String,
}

impl Upstream {
    fn start() -> Upstream {
        let mut child = Command::new(env!("CARGO_BIN_EXE_demo-upstream"))
            .args(["--grpc", "127.0.0.1:0", "--control", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // "demo-upstream: gRPC on 127.0.0.1:P, control on http://127.0.0.1:Q"
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let (grpc, control) = line
            .trim()
            .strip_prefix("demo-upstream: gRPC on ")
            .and_then(|rest| rest.split_once(", control on http://"))
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"));
        Upstream {
            grpc: format!("http://{grpc}"),
            control: control.to_owned(),
            child,
        }
    }

    async fn channel(&self) -> Channel {
        Channel::from_shared(self.grpc.clone())
            .unwrap()
            .connect()
            .await
            .unwrap()
    }

    async fn catalog(&self) -> CatalogServiceClient<Channel> {
        CatalogServiceClient::new(self.channel().await)
    }

    async fn users(&self) -> UserServiceClient<Channel> {
        UserServiceClient::new(self.channel().await)
    }

    async fn sink(&self) -> KitchenSinkServiceClient<Channel> {
        KitchenSinkServiceClient::new(self.channel().await)
    }

    /// One HTTP/1.1 request to the control API: the status code and the body.
    async fn control(&self, method: &str, path: &str) -> (u16, String) {
        let mut socket = tokio::net::TcpStream::connect(&self.control).await.unwrap();
        let request =
            format!("{method} {path} HTTP/1.1\r\nhost: upstream\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        socket.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        socket.read_to_string(&mut response).await.unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, body.to_owned())
    }

    async fn stream_mode(&self, mode: &str) {
        assert_eq!(self.control("POST", &format!("/stream?mode={mode}")).await.0, 200);
    }

    async fn streams(&self) -> String {
        self.control("GET", "/streams").await.1
    }

    /// Waits (up to 5 s) until `GET /streams` says `open`, `opened` and `cancelled`: the
    /// upstream sees a client go away a moment after it went.
    async fn expect_streams(&self, open: u64, opened: u64, cancelled: u64) {
        let expected = format!(r#"{{"open":{open},"opened":{opened},"cancelled":{cancelled}}}"#);
        let mut seen = String::new();
        for _ in 0..100 {
            seen = self.streams().await;
            if seen == expected {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("streams: expected {expected}, saw {seen}");
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn watch(ids: &[i64], interval_ms: Option<u32>) -> WatchItemsRequest {
    WatchItemsRequest {
        ids: ids.to_vec(),
        interval_ms,
    }
}

/// The next message, which must come within 5 s.
async fn next<T>(stream: &mut Streaming<T>) -> Result<Option<T>, tonic::Status> {
    tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .expect("no message within 5 s")
}

/// Every message until the end, and how the stream ended.
async fn drain<T>(stream: &mut Streaming<T>) -> (Vec<T>, Result<(), tonic::Status>) {
    let mut messages = Vec::new();
    loop {
        match next(stream).await {
            Ok(Some(message)) => messages.push(message),
            Ok(None) => return (messages, Ok(())),
            Err(status) => return (messages, Err(status)),
        }
    }
}

/// An event as (item id, stock, initial, sequence).
fn stock(event: &switchblade_test_harness::proto::catalog::ItemEvent) -> (i64, u32, bool, u32) {
    let item = event.item.as_ref().unwrap();
    (item.id, item.stock, event.initial, event.sequence)
}

#[tokio::test]
async fn watch_items_sends_the_current_state_then_stock_changes_until_the_client_leaves() {
    let upstream = Upstream::start();
    let mut events = upstream
        .catalog()
        .await
        .watch_items(watch(&[1, 2], Some(20)))
        .await
        .unwrap()
        .into_inner();
    let mut seen = Vec::new();
    for _ in 0..5 {
        seen.push(stock(&next(&mut events).await.unwrap().unwrap()));
    }
    // (id, stock, initial, sequence): item 1 has 12, item 2 none; changes take one each in
    // turn, and restock an item that has none.
    assert_eq!(
        seen,
        [
            (1, 12, true, 1),
            (2, 0, true, 2),
            (1, 11, false, 3),
            (2, 10, false, 4),
            (1, 10, false, 5)
        ]
    );
    upstream.expect_streams(1, 1, 0).await;
    drop(events);
    upstream.expect_streams(0, 1, 1).await;
}

#[tokio::test]
async fn watch_items_watches_every_item_at_the_default_interval_without_ids() {
    let upstream = Upstream::start();
    let mut events = upstream
        .catalog()
        .await
        .watch_items(watch(&[], None))
        .await
        .unwrap()
        .into_inner();
    let mut initial = Vec::new();
    for _ in 0..5 {
        initial.push(stock(&next(&mut events).await.unwrap().unwrap()).0);
    }
    assert_eq!(initial, [1, 2, 3, 4, 5]);
    let started = tokio::time::Instant::now();
    let change = next(&mut events).await.unwrap().unwrap();
    assert_eq!(stock(&change), (1, 11, false, 6));
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn watch_items_ends_with_deadline_exceeded_when_the_deadline_passes() {
    let upstream = Upstream::start();
    let mut request = Request::new(watch(&[3], Some(50)));
    request.set_timeout(Duration::from_millis(400));
    let mut events = upstream
        .catalog()
        .await
        .watch_items(request)
        .await
        .unwrap()
        .into_inner();
    let (messages, end) = drain(&mut events).await;
    assert!((4..=10).contains(&messages.len()), "{} events", messages.len());
    assert_eq!(end.unwrap_err().code(), Code::DeadlineExceeded);
    upstream.expect_streams(0, 1, 1).await;
}

#[tokio::test]
async fn watch_items_refuses_unknown_ids_and_intervals_out_of_range_before_streaming() {
    let upstream = Upstream::start();
    let mut catalog = upstream.catalog().await;
    let unknown = catalog.watch_items(watch(&[1, 99], None)).await.unwrap_err();
    assert_eq!(
        (unknown.code(), unknown.message()),
        (Code::NotFound, "no item has id 99")
    );
    let zero = catalog.watch_items(watch(&[], Some(0))).await.unwrap_err();
    assert_eq!(zero.code(), Code::InvalidArgument);
    let violations = zero.get_details_bad_request().unwrap().field_violations;
    assert_eq!(violations[0].field, "interval_ms");
    assert_eq!(violations[0].description, "must be between 1 and 60000, got 0");
    upstream.expect_streams(0, 0, 0).await;
}

fn import(name: &str, price_minor: i64, stock: u32) -> ImportItemRequest {
    ImportItemRequest {
        name: name.into(),
        category: Category::Hardware as i32,
        price_minor,
        stock,
    }
}

#[tokio::test]
async fn import_items_tallies_what_it_imports() {
    let upstream = Upstream::start();
    let mut catalog = upstream.catalog().await;
    let items = vec![import("File", 500, 3), import("Rasp", 250, 4), import("Vice", 9_000, 0)];
    let summary = catalog
        .import_items(tokio_stream::iter(items))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        summary,
        ImportSummary {
            imported_count: 3,
            total_stock: 7,
            total_value_minor: 2_500
        }
    );
    let nothing = catalog.import_items(tokio_stream::iter(Vec::new())).await.unwrap();
    assert_eq!(nothing.into_inner(), ImportSummary::default());
    // A client-streaming answer is one message: not a stream the counts follow.
    upstream.expect_streams(0, 0, 0).await;
}

#[tokio::test]
async fn import_items_refuses_an_item_that_breaks_a_rule_naming_its_index() {
    let upstream = Upstream::start();
    let mut catalog = upstream.catalog().await;
    let items = vec![import("File", 500, 3), import("Rasp", 250, 4), import("Vice", -1, 2)];
    let refused = catalog.import_items(tokio_stream::iter(items)).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(
        refused.message(),
        "item 2: price_minor must be positive, got -1; nothing was imported"
    );
    let details = refused.get_error_details();
    let violation = &details.bad_request().unwrap().field_violations[0];
    assert_eq!(
        (violation.field.as_str(), violation.description.as_str()),
        ("price_minor", "item 2: must be positive, got -1")
    );
    assert_eq!(details.error_info().unwrap().metadata["index"], "2");
    let nameless = catalog
        .import_items(tokio_stream::iter(vec![import("", 1, 1)]))
        .await
        .unwrap_err();
    assert_eq!(
        nameless.message(),
        "item 0: name must not be empty; nothing was imported"
    );
}

fn said(text: &str) -> ChatMessage {
    ChatMessage {
        text: text.into(),
        sender: "ada".into(),
    }
}

fn texts(messages: &[ChatMessage]) -> Vec<(&str, &str)> {
    messages
        .iter()
        .map(|message| (message.sender.as_str(), message.text.as_str()))
        .collect()
}

#[tokio::test]
async fn chat_replies_to_each_message_as_it_comes_and_says_bye_after_the_last() {
    let upstream = Upstream::start();
    let (sender, outgoing) = mpsc::channel(4);
    let mut replies = upstream
        .users()
        .await
        .chat(ReceiverStream::new(outgoing))
        .await
        .unwrap()
        .into_inner();
    // One reply to each message before the next is sent: the conversation is interactive.
    sender.send(said("hello")).await.unwrap();
    let first = next(&mut replies).await.unwrap().unwrap();
    assert_eq!(texts(&[first]), [("desk", "you said: hello")]);
    sender.send(said("how are you?")).await.unwrap();
    let second = next(&mut replies).await.unwrap().unwrap();
    assert_eq!(texts(&[second]), [("desk", "you said: how are you?")]);
    upstream.expect_streams(1, 1, 0).await;
    drop(sender);
    let (rest, end) = drain(&mut replies).await;
    assert_eq!(texts(&rest), [("desk", "bye")]);
    end.unwrap();
    upstream.expect_streams(0, 1, 0).await;
}

#[tokio::test]
async fn chat_ends_with_invalid_argument_at_an_empty_message_naming_its_index() {
    let upstream = Upstream::start();
    let messages = vec![said("hi"), said("")];
    let mut replies = upstream
        .users()
        .await
        .chat(tokio_stream::iter(messages))
        .await
        .unwrap()
        .into_inner();
    let (seen, end) = drain(&mut replies).await;
    assert_eq!(texts(&seen), [("desk", "you said: hi")]);
    let refused = end.unwrap_err();
    assert_eq!(
        (refused.code(), refused.message()),
        (Code::InvalidArgument, "message 1: text must not be empty")
    );
    assert_eq!(refused.get_error_details().error_info().unwrap().metadata["index"], "1");
    upstream.expect_streams(0, 1, 0).await;
}

#[tokio::test]
async fn chat_ends_with_deadline_exceeded_when_the_deadline_passes_mid_chat() {
    let upstream = Upstream::start();
    let (sender, outgoing) = mpsc::channel(4);
    let mut request = Request::new(ReceiverStream::new(outgoing));
    request.set_timeout(Duration::from_millis(300));
    let mut replies = upstream.users().await.chat(request).await.unwrap().into_inner();
    sender.send(said("hello")).await.unwrap();
    let (seen, end) = drain(&mut replies).await;
    assert_eq!(texts(&seen), [("desk", "you said: hello")]);
    assert_eq!(end.unwrap_err().code(), Code::DeadlineExceeded);
    upstream.expect_streams(0, 1, 1).await;
    drop(sender);
}

#[tokio::test]
async fn chat_counts_a_client_that_goes_away_as_cancelled() {
    let upstream = Upstream::start();
    let grpc = upstream.grpc.clone();
    // The client on a runtime of its own, dropped mid-chat with its connection: it goes away
    // without a word, as a process that dies would.
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let chat = runtime.block_on(async {
            let mut users = UserServiceClient::connect(grpc).await.unwrap();
            let (sender, outgoing) = mpsc::channel(4);
            let mut replies = users.chat(ReceiverStream::new(outgoing)).await.unwrap().into_inner();
            sender.send(said("hello")).await.unwrap();
            next(&mut replies).await.unwrap().unwrap();
            (sender, replies)
        });
        drop(runtime);
        drop(chat);
    })
    .join()
    .unwrap();
    upstream.expect_streams(0, 1, 1).await;
}

fn everything(text: &str) -> Everything {
    Everything {
        must: text.into(),
        numbers: vec![1, 2, 3],
        tree: Some(Tree {
            label: "root".into(),
            ..Tree::default()
        }),
        ..Everything::default()
    }
}

#[tokio::test]
async fn kitchen_sink_echoes_through_each_kind_of_stream() {
    let upstream = Upstream::start();
    let mut sink = upstream.sink().await;

    let mut copies = sink.echo_stream(everything("x")).await.unwrap().into_inner();
    let (copies, end) = drain(&mut copies).await;
    end.unwrap();
    assert_eq!(copies, vec![everything("x"); 3]);

    let trees: Vec<Tree> = ["a", "b", "c"]
        .map(|label| Tree {
            label: label.into(),
            ..Tree::default()
        })
        .to_vec();
    let forest = sink.collect_trees(tokio_stream::iter(trees.clone())).await.unwrap();
    assert_eq!(forest.into_inner().trees, trees);

    let sent = vec![everything("one"), everything("two")];
    let mut echoes = sink
        .echo_each(tokio_stream::iter(sent.clone()))
        .await
        .unwrap()
        .into_inner();
    let (echoes, end) = drain(&mut echoes).await;
    end.unwrap();
    assert_eq!(echoes, sent);
    upstream.expect_streams(0, 2, 0).await;
}

#[tokio::test]
async fn stream_mode_many_sends_ten_thousand_messages_then_ok() {
    let upstream = Upstream::start();
    upstream.stream_mode("many").await;
    let mut events = upstream
        .catalog()
        .await
        .watch_items(watch(&[], None))
        .await
        .unwrap()
        .into_inner();
    let (events, end) = drain(&mut events).await;
    end.unwrap();
    assert_eq!(events.len(), 10_000);
    assert_eq!(stock(&events[9_999]).3, 10_000);
    let mut copies = upstream
        .sink()
        .await
        .echo_stream(everything("x"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(drain(&mut copies).await.0.len(), 10_000);
    upstream.expect_streams(0, 2, 0).await;
}

#[tokio::test]
async fn stream_mode_error_after_fails_the_stream_after_that_many_messages() {
    let upstream = Upstream::start();
    upstream.stream_mode("error_after=2").await;
    let mut copies = upstream
        .sink()
        .await
        .echo_stream(everything("x"))
        .await
        .unwrap()
        .into_inner();
    let (copies, end) = drain(&mut copies).await;
    assert_eq!(copies.len(), 2);
    let failed = end.unwrap_err();
    assert_eq!(
        (failed.code(), failed.message()),
        (
            Code::FailedPrecondition,
            "the upstream's stream mode error_after=2 fails every stream after 2 messages"
        )
    );
    upstream.stream_mode("error_after=0").await;
    let mut events = upstream
        .catalog()
        .await
        .watch_items(watch(&[], None))
        .await
        .unwrap()
        .into_inner();
    let (events, end) = drain(&mut events).await;
    assert!(events.is_empty());
    assert_eq!(end.unwrap_err().code(), Code::FailedPrecondition);
    upstream.expect_streams(0, 2, 0).await;
}

#[tokio::test]
async fn stream_mode_never_end_sends_one_message_and_then_holds_the_stream_open() {
    let upstream = Upstream::start();
    upstream.stream_mode("never_end").await;
    let mut request = Request::new(everything("x"));
    // Past its deadline too: the upstream is hostile.
    request.set_timeout(Duration::from_millis(100));
    let mut copies = upstream.sink().await.echo_stream(request).await.unwrap().into_inner();
    assert_eq!(next(&mut copies).await.unwrap().unwrap(), everything("x"));
    let silence = tokio::time::timeout(Duration::from_millis(500), copies.message()).await;
    assert!(silence.is_err(), "the stream went on: {silence:?}");
    upstream.expect_streams(1, 1, 0).await;
    drop(copies);
    upstream.expect_streams(0, 1, 1).await;
}

#[tokio::test]
async fn reset_clears_the_mode_and_the_counts_but_not_what_is_still_open() {
    let upstream = Upstream::start();
    let (status, error) = upstream.control("POST", "/stream?mode=sometimes").await;
    assert_eq!(
        (status, error.as_str()),
        (
            400,
            "stream mode \"sometimes\": write normal, many, count=N, error_after=N (N a count) or never_end"
        )
    );
    upstream.stream_mode("never_end").await;
    let mut catalog = upstream.catalog().await;
    let mut held = catalog.watch_items(watch(&[1], None)).await.unwrap().into_inner();
    next(&mut held).await.unwrap().unwrap();
    let mut ended = catalog.watch_items(watch(&[1], None)).await.unwrap().into_inner();
    next(&mut ended).await.unwrap().unwrap();
    drop(ended);
    upstream.expect_streams(1, 2, 1).await;
    assert_eq!(upstream.control("POST", "/reset").await.0, 200);
    upstream.expect_streams(1, 0, 0).await;
    // Mode normal again: one initial event, then changes.
    let mut events = catalog.watch_items(watch(&[1], Some(10))).await.unwrap().into_inner();
    for sequence in 1..=3 {
        assert_eq!(stock(&next(&mut events).await.unwrap().unwrap()).3, sequence);
    }
    drop((held, events));
    upstream.expect_streams(0, 1, 2).await;
}

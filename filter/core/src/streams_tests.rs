use super::*;
use crate::grpc::frame::grpc_frame;

fn frames(messages: &[&[u8]]) -> Vec<u8> {
    messages.iter().flat_map(|message| grpc_frame(message)).collect()
}

#[test]
fn messages_come_whole_whatever_the_chunks() {
    let messages: [&[u8]; 4] = [b"one", b"", b"three", &[7; 300]];
    let body = frames(&messages);
    for size in 1..=body.len() {
        let mut collector = StreamCollector::new(100, 1 << 20);
        let mut completed = 0;
        for chunk in body.chunks(size) {
            completed += collector.feed(chunk);
        }
        assert_eq!(completed, 4, "chunks of {size}");
        let kept: Vec<&[u8]> = collector.messages().iter().map(Vec::as_slice).collect();
        assert_eq!(kept, messages, "chunks of {size}");
        assert_eq!(collector.end(false), Ok(EndReason::Complete));
    }
}

#[test]
fn a_stream_that_ends_inside_a_frame_is_broken_unless_the_deadline_cut_it() {
    let body = frames(&[b"whole", b"cut"]);
    let mut collector = StreamCollector::new(100, 1 << 20);
    collector.feed(&body[..body.len() - 1]);
    assert_eq!(collector.messages().len(), 1);
    assert_eq!(
        collector.end(false),
        Err("the upstream's answer ends inside a gRPC frame")
    );
    assert_eq!(collector.end(true), Ok(EndReason::Deadline));
}

#[test]
fn the_message_bound_stops_the_stream() {
    let body = frames(&[b"a", b"b", b"c"]);
    let mut collector = StreamCollector::new(2, 1 << 20);
    assert_eq!(collector.feed(&body), 2);
    assert!(collector.is_done());
    assert_eq!(collector.end(false), Ok(EndReason::MaxMessages));
    assert_eq!(collector.feed(&frames(&[b"d"])), 0, "nothing after a bound");
}

#[test]
fn a_message_past_the_byte_bound_is_not_kept_nor_buffered() {
    let mut collector = StreamCollector::new(100, 10);
    assert_eq!(collector.feed(&frames(&[b"12345678"])), 1);
    // Declared 4 GiB: refused from its prefix, before a byte of it is kept.
    let mut huge = vec![0, 0xff, 0xff, 0xff, 0xff];
    huge.extend_from_slice(b"x");
    assert_eq!(collector.feed(&huge), 0);
    assert_eq!(collector.end(false), Ok(EndReason::MaxBytes));
    assert_eq!(collector.messages().len(), 1);
    assert!(collector.pending.len() <= FRAME_PREFIX);
    // Pushed messages (a host that reads frames itself) keep to the same bound.
    let mut pushed = StreamCollector::new(100, 10);
    assert!(pushed.push(b"12345678"));
    assert!(!pushed.push(b"123"));
    assert_eq!(pushed.stopped(), Some(EndReason::MaxBytes));
}

#[test]
fn a_compressed_frame_breaks_the_stream() {
    let mut collector = StreamCollector::new(100, 1 << 20);
    let mut body = frames(&[b"ok"]);
    body.extend_from_slice(&[1, 0, 0, 0, 1, b'z']);
    assert_eq!(collector.feed(&body), 1);
    assert_eq!(
        collector.end(false),
        Err("the upstream's answer is compressed, and no compression was offered")
    );
}

#[test]
fn kinds_and_schemas() {
    assert!(CallKind::Bidirectional.sends_many() && CallKind::Bidirectional.receives_many());
    assert!(!CallKind::ServerStreaming.sends_many() && CallKind::ServerStreaming.receives_many());
    let item =
        json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/T"}}, "$defs": {"T": {"type": "string"}}});
    let input = messages_input_schema(item.clone(), 5);
    assert_eq!(input["properties"]["messages"]["maxItems"], 5);
    assert_eq!(
        input["$defs"]["T"]["type"], "string",
        "the item's $defs move to the root"
    );
    assert!(input["properties"]["messages"]["items"].get("$defs").is_none());
    let output = stream_output_schema(item);
    assert_eq!(
        output["properties"]["end"]["properties"]["reason"]["enum"],
        json!(["complete", "max_messages", "max_bytes", "deadline"])
    );
    assert_eq!(output["required"], json!(["messages", "end"]));
}

use super::scalar::write_float;
use super::*;
use crate::descriptors::embedded_pool;
use serde_json::{json, Value};

/// No bound on the text, for tests about what is written.
const UNBOUNDED: usize = usize::MAX;

fn message(name: &str) -> MessageDescriptor {
    embedded_pool().unwrap().get_message_by_name(name).unwrap()
}

/// [`super::render`] with a plan made for the one answer.
fn render(message: &MessageDescriptor, bytes: &[u8], limit: usize) -> Result<String, RenderError> {
    super::render(&RenderPlan::new(message), bytes, limit)
}

fn rendered(name: &str, bytes: &[u8]) -> Value {
    serde_json::from_str(&render(&message(name), bytes, UNBOUNDED).unwrap()).unwrap()
}

#[test]
fn renders_responses_with_proto_names_and_defaults() {
    assert_eq!(
        rendered("demo.users.v1.User", &[0x08, 7, 0x12, 3, b'a', b'd', b'a']),
        json!({"user_id": 7, "username": "ada", "display_name": "", "email": "", "state": "ACCOUNT_STATE_UNSPECIFIED"})
    );
}

#[test]
fn follows_protobufs_rules_for_repeats() {
    // The last value of a singular field wins; unknown fields are skipped.
    let user = rendered("demo.users.v1.User", &[0x08, 7, 0x08, 8, 0xf8, 0x07, 1]);
    assert_eq!(user["user_id"], 8);
    // Two oneof members on the wire: the last is the one.
    let everything = rendered("test.kitchensink.v1.Everything", &[0x4a, 1, b'a', 0x50, 5]);
    assert_eq!((everything.get("text"), &everything["number"]), (None, &json!("5")));
    // A map key given twice keeps its last value; repeated scalars may come packed or not.
    let map = rendered(
        "test.kitchensink.v1.Everything",
        &[
            0x32, 5, 0x08, 1, 0x12, 1, b'a', 0x32, 5, 0x08, 1, 0x12, 1, b'b', 0x18, 3, 0x1a, 2, 4, 5,
        ],
    );
    assert_eq!(
        (&map["by_id"], &map["numbers"]),
        (&json!({"1": "b"}), &json!([3, 4, 5]))
    );
}

#[test]
fn a_map_keeps_each_key_at_its_first_place_with_its_last_value() {
    let entries = |keys: &[(&str, u8)]| -> Vec<(String, u8)> {
        keys.iter().map(|&(key, value)| (key.to_owned(), value)).collect()
    };
    assert_eq!(
        each_key_once(entries(&[("b", 1), ("a", 2), ("b", 3), ("c", 4), ("a", 5), ("b", 6)])),
        entries(&[("b", 6), ("a", 5), ("c", 4)])
    );
    assert_eq!(each_key_once(entries(&[("z", 1)])), entries(&[("z", 1)]));
    assert_eq!(
        each_key_once(entries(&[("z", 1), ("y", 2)])),
        entries(&[("z", 1), ("y", 2)])
    );
    // As text, in that order: {1: "a", 2: "b", 1: "c"} is {"1": "c", "2": "b"}.
    let entry = |key: u8, value: u8| [0x32, 5, 0x08, key, 0x12, 1, value];
    let bytes = [entry(1, b'a'), entry(2, b'b'), entry(1, b'c')].concat();
    let text = render(&message("test.kitchensink.v1.Everything"), &bytes, UNBOUNDED).unwrap();
    assert!(text.contains(r#""by_id":{"1":"c","2":"b"}"#), "{text}");
}

#[test]
fn refuses_garbage_responses() {
    let user = message("demo.users.v1.User");
    for bytes in [&[0xff, 0xff, 0xff][..], &[0x12, 5, b'a'], &[0x12, 1, 0xff], &[0x08]] {
        let Err(RenderError::Invalid(why)) = render(&user, bytes, UNBOUNDED) else {
            panic!("{bytes:?} rendered");
        };
        assert!(why.starts_with("not a valid demo.users.v1.User: "), "{why}");
    }
}

#[test]
fn deep_nesting_is_refused_not_overflowed() {
    // Tree { children: [Tree { children: [...] }] }, 10,000 levels.
    let mut bytes = Vec::new();
    for _ in 0..10_000 {
        let mut outer = vec![0x12];
        crate::proto_json::wire::put_varint(&mut outer, bytes.len() as u64);
        outer.extend_from_slice(&bytes);
        bytes = outer;
    }
    let Err(RenderError::Invalid(why)) = render(&message("test.kitchensink.v1.Tree"), &bytes, UNBOUNDED) else {
        panic!("rendered");
    };
    assert!(why.contains("nested more than 100 deep"), "{why}");
}

/// `Everything` with `count` empty `Scalars` in its `many` (two bytes each on the wire, all
/// fifteen fields written at their defaults in JSON).
fn empty_children(count: usize) -> Vec<u8> {
    let child = message("test.kitchensink.v1.Everything")
        .get_field_by_name("many")
        .unwrap();
    let tag = u8::try_from(child.number() << 3 | 2).unwrap();
    [tag, 0].repeat(count)
}

#[test]
fn the_text_stops_at_its_limit_exactly() {
    let everything = message("test.kitchensink.v1.Everything");
    let bytes = empty_children(3);
    let whole = render(&everything, &bytes, UNBOUNDED).unwrap();
    assert!(whole.len() > 3 * 100, "{whole}");
    assert_eq!(render(&everything, &bytes, whole.len()).unwrap(), whole);
    assert_eq!(
        render(&everything, &bytes, whole.len() - 1),
        Err(RenderError::TooLarge { limit: whole.len() - 1 })
    );
}

#[test]
fn empty_messages_cannot_multiply_past_the_limit() {
    // A megabyte of empty messages would be hundreds of megabytes of defaults; rendering
    // stops at the limit instead of building them.
    let bytes = empty_children(512 * 1024);
    let started = std::time::Instant::now();
    assert_eq!(
        render(&message("test.kitchensink.v1.Everything"), &bytes, 1 << 20),
        Err(RenderError::TooLarge { limit: 1 << 20 })
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn strings_are_escaped_as_serde_json_escapes_them() {
    for text in [
        "plain",
        "quote \" and \\ backslash",
        "line\nbreak\t\u{1}\u{1f}",
        "ünïcødé ✓ /",
    ] {
        let mut out = String::new();
        write_string(&mut out, text);
        assert_eq!(out, serde_json::to_string(text).unwrap());
    }
}

proptest::proptest! {
    #[test]
    fn any_string_is_escaped_as_serde_json_escapes_it(text in "(\\PC|[\\x00-\\x7f])*") {
        let mut out = String::from("before");
        write_string(&mut out, &text);
        proptest::prop_assert_eq!(out, format!("before{}", serde_json::to_string(&text).unwrap()));
    }

    #[test]
    fn any_float_is_written_as_serde_json_writes_it(bits in proptest::num::u64::ANY, single_bits in proptest::num::u32::ANY) {
        for (number, single) in [(f64::from_bits(bits), false), (f64::from(f32::from_bits(single_bits)), true)] {
            let mut out = String::new();
            write_float(&mut out, number, single);
            let expected = match (number.is_finite(), single) {
                (true, false) => serde_json::to_string(&number).unwrap(),
                (true, true) => serde_json::to_string(&(number as f32)).unwrap(),
                (false, _) if number.is_nan() => "\"NaN\"".to_owned(),
                (false, _) if number > 0.0 => "\"Infinity\"".to_owned(),
                (false, _) => "\"-Infinity\"".to_owned(),
            };
            proptest::prop_assert_eq!(out, expected);
        }
    }
}

#[test]
fn a_plan_holds_each_type_once_and_serves_answer_after_answer() {
    let plan = RenderPlan::new(&message("test.kitchensink.v1.Tree"));
    let types: Vec<&str> = plan.messages.iter().map(|plan| plan.message.full_name()).collect();
    // Recursion refers back to a type's number: Tree and Forest, however deep answers nest.
    assert_eq!(types, ["test.kitchensink.v1.Tree", "test.kitchensink.v1.Forest"]);
    // Tree { label: "a", children: [Tree { label: "b" }], forest: Forest { trees: [Tree { label: "c" }] } }
    let bytes = [
        0x0a, 0x01, b'a', 0x12, 0x03, 0x0a, 0x01, b'b', 0x1a, 0x05, 0x0a, 0x03, 0x0a, 0x01, b'c',
    ];
    let expected = json!({
        "label": "a",
        "children": [{"label": "b", "children": []}],
        "forest": {"trees": [{"label": "c", "children": []}]}
    });
    for _ in 0..2 {
        let text = super::render(&plan, &bytes, UNBOUNDED).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), expected);
    }
}

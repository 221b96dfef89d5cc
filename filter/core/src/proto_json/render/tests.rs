use super::*;
use crate::descriptors::embedded_pool;
use serde_json::{json, Value};

fn rendered(name: &str, bytes: &[u8]) -> Value {
    let message = embedded_pool().unwrap().get_message_by_name(name).unwrap();
    serde_json::from_str(&render(&message, bytes).unwrap()).unwrap()
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
fn refuses_garbage_responses() {
    let user = embedded_pool()
        .unwrap()
        .get_message_by_name("demo.users.v1.User")
        .unwrap();
    for bytes in [&[0xff, 0xff, 0xff][..], &[0x12, 5, b'a'], &[0x12, 1, 0xff], &[0x08]] {
        let error = render(&user, bytes).unwrap_err();
        assert!(error.0.starts_with("not a valid demo.users.v1.User: "), "{}", error.0);
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
    let tree = embedded_pool()
        .unwrap()
        .get_message_by_name("test.kitchensink.v1.Tree")
        .unwrap();
    assert!(render(&tree, &bytes)
        .unwrap_err()
        .0
        .contains("nested more than 100 deep"));
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

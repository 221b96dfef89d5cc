use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::*;

/// What the body reads as when parsed into a JSON value first, with the same rule.
fn read_as_value(bytes: &[u8], max_depth: usize) -> Result<Body, ParseError> {
    unique_keys::parse_with(bytes, max_depth, UniqueKeys::new).map(Body::from)
}

fn duplicate(bytes: &[u8]) -> (String, String) {
    match read_body(bytes, 64) {
        Err(ParseError::Duplicate(duplicate)) => (duplicate.path, duplicate.key),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_request_keeps_its_members_and_nothing_else() {
    let body = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a"},"extra":[1]}"#;
    let members = Members {
        id: Some(json!(7)),
        jsonrpc: Some(json!("2.0")),
        method: Some(json!("tools/call")),
        params: Some(json!({"name": "a"})),
        answers: false,
    };
    assert_eq!(
        read_body(body, 64).unwrap(),
        Body {
            messages: vec![Message::object(members)],
            batch: false
        }
    );
}

#[test]
fn a_key_with_escapes_names_the_same_member() {
    let body = read_body(br#"{"\u0069d":1,"m\u0065thod":"ping"}"#, 64).unwrap();
    assert_eq!(body.messages[0].id(), Some(&json!(1)));
    assert_eq!(duplicate(br#"{"id":1,"\u0069d":2}"#), (".".into(), "id".into()));
}

#[test]
fn answers_are_told_by_result_or_error() {
    for body in [br#"{"id":1,"result":{}}"#.as_slice(), br#"{"id":1,"error":{}}"#] {
        let body = read_body(body, 64).unwrap();
        assert!(body.messages[0].members.as_ref().unwrap().answers);
    }
}

#[test]
fn any_key_given_twice_is_refused_with_where() {
    assert_eq!(duplicate(br#"{"id":1,"id":2}"#), (".".into(), "id".into()));
    assert_eq!(duplicate(br#"{"x":1,"y":0,"x":2}"#), (".".into(), "x".into()));
    assert_eq!(duplicate(br#"{"result":1,"result":2}"#), (".".into(), "result".into()));
    assert_eq!(
        duplicate(br#"{"params":{"arguments":{"user_id":1,"user_id":{"$ne":null}}}}"#),
        ("params.arguments".into(), "user_id".into())
    );
    assert_eq!(duplicate(br#"[{"id":1},{"id":1,"id":2}]"#), ("[1]".into(), "id".into()));
}

#[test]
fn nesting_counts_the_envelope() {
    assert!(read_body(br#"{"params":{}}"#, 2).is_ok());
    assert!(matches!(
        read_body(br#"{"params":{"a":{}}}"#, 2),
        Err(ParseError::TooDeep)
    ));
    assert!(matches!(read_body(br#"[{"params":{}}]"#, 2), Err(ParseError::TooDeep)));
    assert!(matches!(read_body(br#"{"x":[[]]}"#, 2), Err(ParseError::TooDeep)));
}

#[test]
fn what_is_not_an_object_has_no_members() {
    for text in ["7", "-7", "1.5", "\"s\"", "null", "true", "[[1], 2, \"x\"]", " \n[]"] {
        let body = read_body(text.as_bytes(), 64).unwrap();
        assert!(body.messages.iter().all(|message| message.members.is_none()), "{text}");
        assert_eq!(body, read_as_value(text.as_bytes(), 64).unwrap(), "{text}");
    }
    assert!(matches!(read_body(b"[1,", 64), Err(ParseError::Syntax(_))));
    assert!(matches!(read_body(b"{} x", 64), Err(ParseError::Syntax(_))));
}

/// JSON values whose objects have JSON-RPC's member names and others.
fn json_value() -> impl Strategy<Value = Value> {
    let key = prop::sample::select(vec!["id", "jsonrpc", "method", "params", "result", "error", "x", "é"]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        "[a-z\"\\\\]{0,4}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6).prop_map(|members| Value::Object(
                members
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect::<Map<_, _>>()
            )),
        ]
    })
}

proptest! {
    /// Read into members or parsed into a value first, a body is the same, and is refused at
    /// the same depth.
    #[test]
    fn a_body_read_into_members_is_the_body_parsed_as_a_value(value in json_value(), max_depth in 1usize..6) {
        let text = serde_json::to_vec(&value).unwrap();
        match (read_body(&text, max_depth), read_as_value(&text, max_depth)) {
            (Ok(read), Ok(parsed)) => prop_assert_eq!(read, parsed),
            (Err(ParseError::TooDeep), Err(ParseError::TooDeep)) => {}
            (read, parsed) => prop_assert!(false, "{:?} against {:?}", read, parsed),
        }
    }
}

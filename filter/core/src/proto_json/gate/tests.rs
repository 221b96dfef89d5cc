use super::*;
use crate::descriptors::embedded_pool;
use serde_json::json;

fn descriptor(name: &str) -> MessageDescriptor {
    embedded_pool().unwrap().get_message_by_name(name).unwrap()
}

fn encode(name: &str, arguments: Value) -> Result<Vec<u8>, ArgumentError> {
    Gate::build(&embedded_pool().unwrap())
        .unwrap()
        .encode(&descriptor(name), &arguments)
}

/// The refusal of `arguments` (plus the required `must`) as a kitchen-sink `Everything`.
fn refusal(arguments: Value) -> String {
    let mut arguments = arguments;
    if arguments.get("must").is_none() {
        arguments["must"] = json!("x");
    }
    encode("test.kitchensink.v1.Everything", arguments)
        .unwrap_err()
        .to_string()
}

#[test]
fn encodes_valid_arguments() {
    let get_user = "demo.users.v1.GetUserRequest";
    assert_eq!(encode(get_user, json!({"user_id": 7})).unwrap(), [0x08, 7]);
    assert_eq!(encode(get_user, json!({})).unwrap(), Vec::<u8>::new());
    // proto3 JSON accepts the lowerCamelCase JSON name too, and defaults are not written.
    assert_eq!(encode(get_user, json!({"userId": 7})).unwrap(), [0x08, 7]);
    assert_eq!(encode(get_user, json!({"user_id": 0})).unwrap(), Vec::<u8>::new());
    assert_eq!(
        encode(get_user, json!({"user_id": -1})).unwrap(),
        [0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
    );
    let get_item = "demo.catalog.v1.GetItemRequest";
    assert_eq!(encode(get_item, json!({"id": "42"})).unwrap(), [0x08, 42]);
    assert_eq!(encode(get_item, json!({"id": 42})).unwrap(), [0x08, 42]);
}

#[test]
fn writes_every_form_as_protobuf_does() {
    let scalars = |value: Value| encode("test.kitchensink.v1.Scalars", value).unwrap();
    assert_eq!(scalars(json!({"a_sint32": -1})), [0x38, 0x01]);
    assert_eq!(scalars(json!({"a_sint64": "-2"})), [0x40, 0x03]);
    assert_eq!(scalars(json!({"a_fixed32": 1})), [0x4d, 1, 0, 0, 0]);
    assert_eq!(
        scalars(json!({"an_sfixed64": -1})),
        [0x61, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
    );
    assert_eq!(
        scalars(json!({"a_double": 1.5})),
        [[0x09].as_slice(), &1.5f64.to_le_bytes()].concat()
    );
    assert_eq!(
        scalars(json!({"a_float": "-Infinity"})),
        [[0x15].as_slice(), &f32::NEG_INFINITY.to_le_bytes()].concat()
    );
    assert_eq!(
        scalars(json!({"a_bool": true, "a_string": "é"})),
        [0x68, 1, 0x72, 2, 0xc3, 0xa9]
    );
    assert_eq!(scalars(json!({"some_bytes": "AAEC/w"})), [0x7a, 4, 0, 1, 2, 0xff]);
    assert_eq!(scalars(json!({"some_bytes": "-_8="})), [0x7a, 2, 0xfb, 0xff]);
    let everything = |value: Value| {
        let mut value = value;
        value["must"] = json!("m");
        encode("test.kitchensink.v1.Everything", value).unwrap()
    };
    let must = [0x6a, 1, b'm'];
    // Packed repeated scalars, map entries, enums by name, well-known types.
    assert_eq!(
        everything(json!({"numbers": [1, 2]})),
        [&[0x1a, 2, 1, 2][..], &must].concat()
    );
    assert_eq!(everything(json!({"by_id": {"-1": "a"}})).len(), 2 + 11 + 3 + must.len());
    assert_eq!(
        everything(json!({"color": "COLOR_GREEN"})),
        [&[0x10, 2][..], &must].concat()
    );
    assert_eq!(
        everything(json!({"took": "1.5s"})),
        [&[0x7a, 8, 0x08, 1, 0x10, 0x80, 0xca, 0xb5, 0xee, 0x01][..], &must].concat()
    );
    assert_eq!(
        everything(json!({"mask": "a.bC"})),
        [&[0xe2, 0x01, 7, 0x0a, 5, b'a', b'.', b'b', b'_', b'c'][..], &must].concat()
    );
    assert_eq!(
        everything(json!({"w_int32": 0})),
        [&[0xa2, 0x01, 0][..], &must].concat()
    );
}

#[test]
fn refuses_query_objects_where_an_integer_is_expected() {
    let error = encode("demo.users.v1.GetUserRequest", json!({"user_id": {"$ne": null}})).unwrap_err();
    assert_eq!(
        error.to_string(),
        "at `user_id`: expected a 32-bit integer from -2147483648 to 2147483647, got {\"$ne\":null}"
    );
}

#[test]
fn refuses_non_object_arguments() {
    let error = encode("demo.catalog.v1.SearchRequest", json!(["query"])).unwrap_err();
    assert_eq!(error.to_string(), "arguments must be a JSON object, got an array");
}

#[test]
fn scalars_say_what_they_expect_and_what_they_got() {
    let int32 = "a 32-bit integer from -2147483648 to 2147483647";
    assert_eq!(
        refusal(json!({"scalars": {"an_int32": "x"}})),
        format!("at `scalars.an_int32`: expected {int32}, got \"x\"")
    );
    assert_eq!(
        refusal(json!({"scalars": {"a_uint32": -1}})),
        "at `scalars.a_uint32`: expected an unsigned 32-bit integer from 0 to 4294967295, got -1 (out of range)"
    );
    assert_eq!(
        refusal(json!({"scalars": {"an_int32": 1.5}})),
        format!("at `scalars.an_int32`: expected {int32}, got 1.5 (not an integer)")
    );
    assert!(refusal(json!({"many": [{}, {"an_int32": "two"}]}))
        .starts_with("at `many[1].an_int32`: expected a 32-bit integer"));
    assert_eq!(
        refusal(json!({"color": "COLOR_BLUE"})),
        "at `color`: expected one of COLOR_UNSPECIFIED, COLOR_CRIMSON, COLOR_RED, COLOR_GREEN, got \"COLOR_BLUE\""
    );
    assert_eq!(
        refusal(json!({"at": "yesterday"})),
        "at `at`: expected an RFC 3339 timestamp such as \"2026-01-31T12:00:00Z\", got \"yesterday\" (not an RFC 3339 date and time)"
    );
    assert_eq!(
        refusal(json!({"numbers": "1,2,3"})),
        format!("at `numbers`: expected a list, each element {int32}, got \"1,2,3\"")
    );
    assert!(refusal(json!({"by_id": {"one": "a"}}))
        .starts_with("at `by_id`: expected an object whose keys are a 64-bit integer"));
    assert!(refusal(json!({"w_int32": "x"})).starts_with("at `w_int32`: expected a 32-bit integer"));
    assert_eq!(
        refusal(json!({"anything": {"@type": "type.googleapis.com/acme.Unknown"}})),
        "at `anything`: expected an object with \"@type\" naming a known message, got {\"@type\":\"type.googleapis.com/acme.Un... (no message of that type is known here)"
    );
}

#[test]
fn keys_say_what_the_message_has() {
    let text = refusal(json!({"nope": 1}));
    assert!(
        text.starts_with("unknown field `nope`; test.kitchensink.v1.Everything has: scalars, color, numbers,"),
        "{text}"
    );
    assert!(refusal(json!({"scalars": {"an_int33": 1}}))
        .starts_with("at `scalars`: unknown field `an_int33`; test.kitchensink.v1.Scalars has: a_double,"));
    assert_eq!(
        refusal(json!({"text": "a", "number": "1"})),
        "`text`, `number` are all members of oneof `choice`; set at most one"
    );
    assert_eq!(
        refusal(json!({"alias": "a", "renamed": "b"})),
        "`alias` and `renamed` are the same field (renamed); give it once"
    );
}

#[test]
fn required_fields_come_from_field_behavior_and_proto2() {
    let pool = embedded_pool().unwrap();
    let everything = pool.get_message_by_name("test.kitchensink.v1.Everything").unwrap();
    let must = everything.get_field_by_name("must").unwrap();
    let maybe = everything.get_field_by_name("maybe").unwrap();
    let id = pool
        .get_message_by_name("test.kitchensink.v1.Legacy")
        .unwrap()
        .get_field_by_name("id")
        .unwrap();
    assert!(is_required(&pool, &must, None) && is_required(&pool, &id, None) && !is_required(&pool, &maybe, None));
    let everything = "test.kitchensink.v1.Everything";
    assert_eq!(
        encode(everything, json!({})).unwrap_err().to_string(),
        "missing required field `must`"
    );
    assert_eq!(
        encode(everything, json!({"must": null})).unwrap_err().to_string(),
        "missing required field `must`"
    );
    assert_eq!(
        refusal(json!({"legacy": {"count": 1}})),
        "at `legacy`: missing required field `id`"
    );
}

#[test]
fn refuses_what_proto3_parsers_are_lenient_about() {
    let cases = [
        (json!({"scalars": {"an_int32": "7"}}), "at `scalars.an_int32`: expected a 32-bit integer from -2147483648 to 2147483647, got \"7\""),
        (json!({"scalars": {"an_int64": "007"}}), "at `scalars.an_int64`: expected a 64-bit integer, as a decimal string such as \"-42\" (or a JSON integer), got \"007\""),
        (json!({"scalars": {"a_double": "1.5"}}), "at `scalars.a_double`: expected a number (or \"NaN\", \"Infinity\", \"-Infinity\"), got \"1.5\""),
        (json!({"scalars": {"a_double": "nan"}}), "at `scalars.a_double`: expected a number"),
        (json!({"scalars": null}), "at `scalars`: expected an object (test.kitchensink.v1.Scalars), got null (leave a field out to leave it unset)"),
        (json!({"numbers": null}), "at `numbers`: expected a list, each element a 32-bit integer"),
        (json!({"by_id": {"007": "x"}}), "at `by_id`: expected an object whose keys are a 64-bit integer"),
        (json!({"w_int32": "7"}), "at `w_int32`: expected a 32-bit integer from -2147483648 to 2147483647, got \"7\""),
        (json!({"mask": "a..b"}), "at `mask`: expected comma-separated field paths"),
        (json!({"took": "1.1234567891s"}), "at `took`: expected a duration in seconds"),
        (json!({"color": 2}), "at `color`: expected one of COLOR_UNSPECIFIED, COLOR_CRIMSON, COLOR_RED, COLOR_GREEN, got 2 (give the value's name, not its number)"),
        (json!({"colors": {"3": 9}}), "at `colors.3`: expected one of COLOR_UNSPECIFIED, COLOR_CRIMSON, COLOR_RED, COLOR_GREEN, got 9 (give the value's name, not its number)"),
        (json!({"anything": {"@type": "type.googleapis.com/google.protobuf.Int32Value", "value": "7"}}), "at `anything.value`: expected a 32-bit integer"),
        (json!({"anything": {"@type": "type.googleapis.com/test.kitchensink.v1.Scalars", "an_int32": "1"}}), "at `anything.an_int32`: expected a 32-bit integer"),
    ];
    for (arguments, expected) in cases {
        let text = refusal(arguments.clone());
        assert!(text.starts_with(expected), "{arguments}: {text}");
    }
}

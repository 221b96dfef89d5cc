use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage};
use serde_json::{json, Value};

use crate::descriptors::embedded_pool;
use crate::docs::Docs;
use crate::proto_json::gate::Gate;
use crate::proto_json::schema::message_schema;
use crate::proto_json::Direction;

const ORDER: &str = "test.rules.v1.Order";
const LEVEL: &str = "test.rules.v1.Level";

fn encode(name: &str, arguments: &Value) -> Result<Vec<u8>, String> {
    let pool = embedded_pool().unwrap();
    let message = pool.get_message_by_name(name).unwrap();
    Gate::build(&pool)
        .unwrap()
        .encode(&message, arguments)
        .map_err(|error| error.to_string())
}

/// An order that passes every rule, with `extra` on top.
fn order(extra: Value) -> Value {
    let mut arguments = json!({"name": "ada", "phone": "+15551234"});
    for (key, value) in extra.as_object().unwrap() {
        arguments[key] = value.clone();
    }
    arguments
}

fn schema(name: &str) -> Value {
    let pool = embedded_pool().unwrap();
    message_schema(
        &pool.get_message_by_name(name).unwrap(),
        Direction::Input,
        &Docs::from_pool(&pool),
        &Gate::build(&pool).unwrap(),
    )
    .unwrap()
}

#[test]
fn a_valid_order_passes_every_rule() {
    let full = order(json!({
        "email": "ada@example.com", "website": "https://example.com/a?b#c",
        "request_id": "8a9c1e0e-7b1f-4c1e-9f5e-0d2b6a3c4e5f", "host": "example.com", "client_ip": "::1",
        "sku": "SKU-1234", "tier": "pro", "endpoint": "example.com:443", "subnet": "10.0.0.0/8",
        "quantity": 100, "account": "14", "discount": 0.5, "port": 80, "weight": 1.5, "offset": "-1",
        "batch": 20, "terms_accepted": true, "token": "AAECAw==", "raw_ip": "fwAAAQ==", "magic": "iVBORw==",
        "color": "COLOR_RED", "shade": "COLOR_GREEN", "tags": ["a", "b"], "limits": {"x": 0},
        "timeout": "30s", "not_before": "2001-01-01T00:00:00Z", "placed_at": "2020-01-01T00:00:00Z",
        "update_mask": "name,tags", "extra": {"@type": "type.googleapis.com/google.protobuf.Duration", "value": "1s"},
        "priority": 5, "ship_to": {"city": "Oslo", "country": "NO"}, "coupon": "C", "nickname": "",
        "note": "Hello",
    }));
    encode(ORDER, &full).unwrap();
}

#[test]
fn each_rule_family_refuses_with_the_rule_its_limit_and_the_value() {
    let cases: Vec<(Value, &str)> = vec![
        (json!({"name": "ab"}), "at `name`: must be at least 3 characters long (string.min_len = 3), got \"ab\""),
        (json!({"name": "Ada"}), "at `name`: must match the regular expression `^[a-z][a-z0-9_]*$` (string.pattern = \"^[a-z][a-z0-9_]*$\"), got \"Ada\""),
        (json!({"email": "ada"}), "at `email`: must be an email address (string.email), got \"ada\""),
        (json!({"sku": "SKU-12"}), "at `sku`: must be exactly 8 characters long (string.len = 8), got \"SKU-12\""),
        (json!({"sku": "ABC-1234"}), "at `sku`: must start with \"SKU-\" (string.prefix = \"SKU-\"), got \"ABC-1234\""),
        (json!({"tier": "gold"}), "at `tier`: must be one of \"free\", \"pro\" (string.in = [\"free\", \"pro\"]), got \"gold\""),
        (json!({"quantity": 0}), "at `quantity`: must be greater than 0 and less than or equal to 100 (int32.gt = 0, int32.lte = 100), got 0"),
        (json!({"account": "13"}), "at `account`: must not be any of 0, 13 (int64.not_in = [0, 13]), got \"13\""),
        (json!({"discount": 1}), "at `discount`: must be greater than or equal to 0 and less than 1 (double.gte = 0, double.lt = 1), got 1"),
        (json!({"port": 8080}), "at `port`: must be greater than 49151 or less than 1024 (uint32.gt = 49151, uint32.lt = 1024), got 8080"),
        (json!({"weight": "NaN"}), "at `weight`: must be a finite number (not NaN or an infinity) (float.finite), got \"NaN\""),
        (json!({"offset": 1}), "at `offset`: must be -1 (sint64.const = -1), got 1"),
        (json!({"batch": 30}), "at `batch`: must be one of 10, 20, 50 (fixed32.in = [10, 20, 50]), got 30"),
        (json!({"terms_accepted": false}), "at `terms_accepted`: must be true (bool.const = true), got false"),
        (json!({"token": "AAE="}), "at `token`: must be at least 4 bytes long (bytes.min_len = 4), got \"AAE=\""),
        (json!({"raw_ip": "AAECAwQ="}), "at `raw_ip`: must be the 4 bytes of an IPv4 address (bytes.ipv4), got \"AAECAwQ=\""),
        (json!({"color": "COLOR_BLUE"}), "at `color`: must be one of \"COLOR_RED\", \"COLOR_GREEN\" (enum.in = [\"COLOR_RED\", \"COLOR_GREEN\"]), got \"COLOR_BLUE\""),
        (json!({"tags": ["a", "b", "a"]}), "at `tags`: items must be unique (repeated.unique), got [\"a\",\"b\",\"a\"]"),
        (json!({"tags": ["a", ""]}), "at `tags[1]`: must be at least 1 character long (string.min_len = 1), got \"\""),
        (json!({"limits": {"a": 1, "b": 2, "c": 3}}), "at `limits`: must have at most 2 pairs (map.max_pairs = 2), got {\"a\":1,\"b\":2,\"c\":3}"),
        (json!({"limits": {"A": 1}}), "at `limits.A`: key: must match the regular expression `^[a-z]+$` (string.pattern = \"^[a-z]+$\"), got \"A\""),
        (json!({"limits": {"a": -1}}), "at `limits.a`: must be greater than or equal to 0 (int32.gte = 0), got -1"),
        (json!({"timeout": "0s"}), "at `timeout`: must be greater than \"0s\" and less than or equal to \"30s\" (duration.gt = \"0s\", duration.lte = \"30s\"), got \"0s\""),
        (json!({"not_before": "1999-12-31T23:59:59Z"}), "at `not_before`: must be greater than \"2000-01-01T00:00:00Z\" (timestamp.gt = \"2000-01-01T00:00:00Z\"), got \"1999-12-31T23:59:59Z\""),
        (json!({"placed_at": "2999-01-01T00:00:00Z"}), "at `placed_at`: must be in the past (timestamp.lt_now), got \"2999-01-01T00:00:00Z\""),
        (json!({"update_mask": "name,color"}), "at `update_mask`: may only hold the paths name, tags (or paths under them) (field_mask.in = [\"name\", \"tags\"]), got \"name,color\""),
        (json!({"extra": {"@type": "type.googleapis.com/google.protobuf.Timestamp", "value": "2020-01-01T00:00:00Z"}}), "at `extra`: must be a message of type type.googleapis.com/google.protobuf.Duration (any.in = [\"type.googleapis.com/google.protobuf.Duration\"]), got \"@type\": \"type.googleapis.com/google.protobuf.Timestamp\""),
        (json!({"priority": 9}), "at `priority`: must be greater than or equal to 1 and less than or equal to 5 (int32.gte = 1, int32.lte = 5), got 9"),
        (json!({"ship_to": {"city": "Oslo", "country": "NOR"}}), "at `ship_to.country`: must be exactly 2 characters long (string.len = 2), got \"NOR\""),
        (json!({"ship_to": {"country": "NO"}}), "at `ship_to.city`: must be at least 1 character long (string.min_len = 1), got nothing: a field left out holds its default, \"\""),
        (json!({"phone": "555"}), "at `phone`: must match the regular expression `^\\+[0-9]{6,15}$` (string.pattern = \"^\\+[0-9]{6,15}$\"), got \"555\""),
        (json!({"coupon": "C", "gift_card": "G"}), "`coupon`, `gift_card` are all set; set at most one of the fields `coupon`, `gift_card` (message.oneof)"),
        (json!({"account_ids": ["7", 7]}), "at `account_ids`: items must be unique (repeated.unique), got [\"7\",7]"),
        (json!({"blobs": ["AQI=", "AQI"]}), "at `blobs`: items must be unique (repeated.unique), got [\"AQI=\",\"AQI\"]"),
        (json!({"nickname": "a"}), "at `nickname`: must be at least 2 characters long (string.min_len = 2), got \"a\""),
    ];
    let wrong: Vec<String> = cases
        .into_iter()
        .filter_map(|(extra, expected)| match encode(ORDER, &order(extra.clone())) {
            Err(error) if error == expected => None,
            other => Some(format!("{extra}:\n  got      {other:?}\n  expected {expected}")),
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn required_rules_name_what_is_missing() {
    assert_eq!(
        encode(ORDER, &json!({"phone": "+15551234"})).unwrap_err(),
        "missing required field `name`"
    );
    assert_eq!(
        encode(ORDER, &json!({"name": "ada"})).unwrap_err(),
        "one of `phone`, `pager` is required (oneof.required), got none"
    );
    // A field without presence holds its default when left out, and the default is checked.
    assert_eq!(
        encode(LEVEL, &json!({"items": ["x"], "color": "COLOR_RED"})).unwrap_err(),
        "at `level`: must be greater than or equal to 1 (int32.gte = 1), got nothing: a field left out holds its default, 0"
    );
    assert_eq!(
        encode(LEVEL, &json!({"level": 1, "color": "COLOR_RED"})).unwrap_err(),
        "at `items`: must have at least 1 item (repeated.min_items = 1), got nothing: a field left out is empty"
    );
    assert_eq!(
        encode(
            LEVEL,
            &json!({"level": 1, "items": ["x"], "color": "COLOR_UNSPECIFIED"})
        )
        .unwrap_err(),
        "at `color`: must be set to a value other than the default (required), got \"COLOR_UNSPECIFIED\""
    );
    assert_eq!(
        encode(LEVEL, &json!({"level": 1, "items": ["x"]})).unwrap_err(),
        "missing required field `color`"
    );
    encode(LEVEL, &json!({"level": 1, "items": ["x"], "color": "COLOR_RED"})).unwrap();
}

#[test]
fn rules_are_written_into_the_input_schema() {
    let schema = schema(ORDER);
    let properties = &schema["properties"];
    assert_eq!(schema["required"], json!(["name"]));
    assert_eq!(properties["name"]["minLength"], 3);
    assert_eq!(properties["name"]["maxLength"], 20);
    assert_eq!(properties["name"]["pattern"], "^[a-z][a-z0-9_]*$");
    assert_eq!(properties["email"]["format"], "email");
    assert_eq!(properties["website"]["format"], "uri");
    assert_eq!(properties["request_id"]["format"], "uuid");
    assert_eq!(properties["sku"]["minLength"], 8);
    assert_eq!(properties["sku"]["maxLength"], 8);
    assert!(properties["sku"]["description"]
        .as_str()
        .unwrap()
        .contains("Must start with \"SKU-\" (string.prefix = \"SKU-\")."));
    assert_eq!(properties["tier"]["enum"], json!(["free", "pro"]));
    assert_eq!(properties["quantity"]["exclusiveMinimum"], 0);
    assert_eq!(properties["quantity"]["maximum"], 100);
    assert_eq!(properties["account"]["type"], "integer");
    assert_eq!(properties["account"]["not"], json!({"enum": [0, 13]}));
    assert_eq!(properties["discount"]["type"], "number");
    assert_eq!(properties["discount"]["minimum"], 0.0);
    assert_eq!(properties["discount"]["exclusiveMaximum"], 1.0);
    assert_eq!(properties["port"]["not"], json!({"minimum": 1024, "maximum": 49151}));
    assert_eq!(properties["weight"]["type"], "number");
    assert_eq!(properties["offset"]["const"], -1);
    assert_eq!(properties["batch"]["enum"], json!([10, 20, 50]));
    assert_eq!(properties["terms_accepted"]["const"], true);
    assert_eq!(properties["color"]["enum"], json!(["COLOR_RED", "COLOR_GREEN"]));
    assert_eq!(
        properties["shade"]["enum"],
        json!(["COLOR_UNSPECIFIED", "COLOR_RED", "COLOR_GREEN"])
    );
    assert_eq!(properties["tags"]["maxItems"], 3);
    assert_eq!(properties["tags"]["uniqueItems"], true);
    assert_eq!(properties["tags"]["items"]["minLength"], 1);
    // uniqueItems compares JSON: 64-bit items are offered as numbers only, bytes say it in words.
    assert_eq!(properties["account_ids"]["uniqueItems"], true);
    assert_eq!(properties["account_ids"]["items"]["type"], "integer");
    assert!(properties["blobs"].get("uniqueItems").is_none());
    assert_eq!(
        properties["blobs"]["description"],
        "Items must be unique (repeated.unique)."
    );
    assert_eq!(properties["limits"]["maxProperties"], 2);
    assert_eq!(properties["limits"]["propertyNames"]["pattern"], "^[a-z]+$");
    assert_eq!(properties["limits"]["additionalProperties"]["minimum"], 0);
    assert_eq!(properties["priority"]["minimum"], 1);
    assert_eq!(properties["ship_to"]["properties"]["country"]["minLength"], 2);
    assert_eq!(
        properties["nickname"]["anyOf"],
        json!([{"const": ""}, {"minLength": 2}])
    );
    let timeout = properties["timeout"]["description"].as_str().unwrap();
    assert!(timeout.contains("Must be greater than \"0s\" and less than or equal to \"30s\" (duration.gt = \"0s\", duration.lte = \"30s\")."), "{timeout}");
    let description = schema["description"].as_str().unwrap();
    assert!(description.starts_with("An order. Set exactly one of `phone`, `pager` (oneof.required). Set at most one of `coupon`, `gift_card` (message.oneof). Rule `gift_needs_note`"), "{description}");
    let level = self::schema(LEVEL);
    assert_eq!(level["required"], json!(["level", "items", "color"]));
    assert_eq!(properties["ship_to"]["required"], json!(["city", "country"]));
    assert_eq!(level["properties"]["level"]["minimum"], 1);
    assert_eq!(level["properties"]["items"]["minItems"], 1);
    assert_eq!(
        level["properties"]["color"]["enum"],
        json!(["COLOR_RED", "COLOR_GREEN", "COLOR_BLUE"])
    );
}

#[cfg(feature = "cel")]
#[test]
fn cel_rules_hold_with_the_cel_feature() {
    assert_eq!(
        encode(ORDER, &order(json!({"note": "HELLO"}))).unwrap_err(),
        "at `note`: must not be all capitals (cel no_shouting: `this != this.upperAscii()`), got \"HELLO\""
    );
    assert_eq!(
        encode(ORDER, &order(json!({"gift_card": "G"}))).unwrap_err(),
        "a gift card order needs a note (cel gift_needs_note: `!has(this.gift_card) || this.note != ''`)"
    );
    encode(ORDER, &order(json!({"gift_card": "G", "note": "for you"}))).unwrap();
    let error = super::CelRule::new("x".into(), String::new(), "this ==".into()).unwrap_err();
    assert!(
        error.starts_with("the CEL rule `this ==` does not compile: "),
        "{error}"
    );
    let note = schema(ORDER)["properties"]["note"]["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        note.ends_with(" Rule `no_shouting`: must not be all capitals (CEL `this != this.upperAscii()`)."),
        "{note}"
    );
}

#[cfg(not(feature = "cel"))]
#[test]
fn without_the_cel_feature_cel_rules_are_shown_not_checked() {
    encode(ORDER, &order(json!({"note": "HELLO", "gift_card": "G"}))).unwrap();
    let note = schema(ORDER)["properties"]["note"]["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        note.ends_with(
            " Rule `no_shouting`: must not be all capitals (CEL `this != this.upperAscii()`, not checked by the gateway)."
        ),
        "{note}"
    );
}

/// `pool` with a file `test/declared.proto` added, whose message `Request` has the fields
/// given (as `FieldDescriptorProto`s in JSON, options included, which name `pool`'s
/// extensions).
fn with_request(mut pool: DescriptorPool, fields: Value) -> DescriptorPool {
    let file = json!({
        "name": "test/declared.proto",
        "package": "test.declared",
        "dependency": ["buf/validate/validate.proto"],
        "messageType": [{"name": "Request", "field": fields}],
    });
    add_file(&mut pool, file);
    pool
}

/// Adds a `FileDescriptorProto` written in JSON, read as `pool`'s descriptor.proto reads it.
fn add_file(pool: &mut DescriptorPool, file: Value) {
    let file_proto = pool.get_message_by_name("google.protobuf.FileDescriptorProto").unwrap();
    let file = DynamicMessage::deserialize(file_proto, file).unwrap();
    pool.decode_file_descriptor_proto(file.encode_to_vec().as_slice())
        .unwrap();
}

/// A pool whose `buf/validate/validate.proto` declares `FieldRules` with a `string` member
/// and an `ignore` of its own type, and `StringRules.min_len` as `min_len`: another
/// declaration than protovalidate's.
fn pool_declaring(ignore: Value, min_len: Value) -> DescriptorPool {
    let embedded = embedded_pool().unwrap();
    let mut pool = DescriptorPool::new();
    let descriptor = embedded.get_file_by_name("google/protobuf/descriptor.proto").unwrap();
    pool.add_file_descriptor_proto(descriptor.file_descriptor_proto().clone())
        .unwrap();
    let optional = |name: &str, number: u32, kind: Value| {
        let mut field = json!({"name": name, "number": number, "label": "LABEL_OPTIONAL"});
        if let (Value::Object(field), Value::Object(kind)) = (&mut field, kind) {
            field.extend(kind);
        }
        field
    };
    let mut string = optional(
        "string",
        14,
        json!({"type": "TYPE_MESSAGE", "typeName": ".buf.validate.StringRules"}),
    );
    string["oneofIndex"] = json!(0);
    add_file(
        &mut pool,
        json!({
            "name": "buf/validate/validate.proto",
            "package": "buf.validate",
            "dependency": ["google/protobuf/descriptor.proto"],
            "messageType": [
                {"name": "FieldRules", "field": [string, optional("ignore", 27, ignore)], "oneofDecl": [{"name": "type"}]},
                {"name": "StringRules", "field": [optional("min_len", 2, min_len)]},
            ],
            "extension": [{
                "name": "field", "number": 1159, "label": "LABEL_OPTIONAL", "type": "TYPE_MESSAGE",
                "typeName": ".buf.validate.FieldRules", "extendee": ".google.protobuf.FieldOptions",
            }],
        }),
    );
    pool
}

fn string_field(rules: Value) -> Value {
    json!([{
        "name": "text", "number": 1, "label": "LABEL_OPTIONAL", "type": "TYPE_STRING",
        "options": {"[buf.validate.field]": rules},
    }])
}

#[test]
fn a_rule_of_another_type_than_protovalidate_declares_is_refused_at_load() {
    let pool = pool_declaring(json!({"type": "TYPE_INT32"}), json!({"type": "TYPE_BOOL"}));
    let pool = with_request(pool, string_field(json!({"string": {"minLen": true}})));
    assert_eq!(
        Gate::build(&pool).unwrap_err(),
        "the buf.validate rules of field test.declared.Request.text: `buf.validate.StringRules.min_len` holds a \
         bool, where protovalidate declares a uint64"
    );
    // Read as declared, the same rule holds.
    let pool = pool_declaring(json!({"type": "TYPE_INT32"}), json!({"type": "TYPE_UINT64"}));
    let pool = with_request(pool, string_field(json!({"string": {"minLen": 2}})));
    let gate = Gate::build(&pool).unwrap();
    let request = pool.get_message_by_name("test.declared.Request").unwrap();
    assert_eq!(
        gate.encode(&request, &json!({"text": "a"})).unwrap_err().to_string(),
        "at `text`: must be at least 2 characters long (string.min_len = 2), got \"a\""
    );
    let pool = pool_declaring(json!({"type": "TYPE_INT32"}), json!({"type": "TYPE_UINT64"}));
    let pool = with_request(pool, string_field(json!({"ignore": 1})));
    assert_eq!(
        Gate::build(&pool).unwrap_err(),
        "the buf.validate rules of field test.declared.Request.text: `buf.validate.FieldRules.ignore` holds an \
         int32, where protovalidate declares an enum value"
    );
}

#[test]
fn enum_numbers_protovalidate_does_not_define_are_refused_at_load() {
    let embedded = || embedded_pool().unwrap();
    let pool = with_request(embedded(), string_field(json!({"ignore": 2})));
    assert_eq!(
        Gate::build(&pool).unwrap_err(),
        "the buf.validate rules of field test.declared.Request.text: `ignore` is 2, which is none of \
         protovalidate's `buf.validate.Ignore` values (IGNORE_IF_ZERO_VALUE = 1, IGNORE_ALWAYS = 3)"
    );
    let pool = with_request(embedded(), string_field(json!({"string": {"wellKnownRegex": 7}})));
    assert_eq!(
        Gate::build(&pool).unwrap_err(),
        "the buf.validate rules of field test.declared.Request.text: `well_known_regex` is 7, which is none of \
         protovalidate's `buf.validate.KnownRegex` values (KNOWN_REGEX_HTTP_HEADER_NAME = 1, \
         KNOWN_REGEX_HTTP_HEADER_VALUE = 2)"
    );
    // The numbers it does define, by name.
    let pool = with_request(
        embedded(),
        string_field(json!({"ignore": "IGNORE_ALWAYS", "string": {"wellKnownRegex": "KNOWN_REGEX_HTTP_HEADER_NAME"}})),
    );
    let rules = Gate::build(&pool).unwrap();
    let rules = rules.rules("test.declared.Request").unwrap();
    assert_eq!(rules.fields[0].1.ignore, super::Ignore::Always);
}

#[test]
fn a_message_oneof_rule_names_its_own_fields() {
    let refusal = |oneof: Value| {
        let mut pool = embedded_pool().unwrap();
        let text = |name: &str, number: u32| json!({"name": name, "number": number, "label": "LABEL_OPTIONAL", "type": "TYPE_STRING"});
        add_file(
            &mut pool,
            json!({
                "name": "test/declared.proto",
                "package": "test.declared",
                "dependency": ["buf/validate/validate.proto"],
                "messageType": [{
                    "name": "Request",
                    "field": [text("a", 1), text("b", 2)],
                    "options": {"[buf.validate.message]": {"oneof": [oneof]}},
                }],
            }),
        );
        Gate::build(&pool).err()
    };
    assert_eq!(
        refusal(json!({"fields": ["a", "nope"]})).unwrap(),
        "the buf.validate oneof rule of message test.declared.Request names `nope`, which is not one of its fields"
    );
    assert_eq!(
        refusal(json!({"required": true})).unwrap(),
        "a buf.validate oneof rule of message test.declared.Request names no fields"
    );
    assert_eq!(refusal(json!({"fields": ["a", "b"], "required": true})), None);
}

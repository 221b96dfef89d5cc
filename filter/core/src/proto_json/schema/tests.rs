use super::*;
use crate::descriptors::embedded_pool;
use prost_reflect::DescriptorPool;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::source_code_info::Location;
use prost_types::{
    DescriptorProto, EnumDescriptorProto, EnumValueDescriptorProto, FieldDescriptorProto, FileDescriptorProto,
    MethodDescriptorProto, ServiceDescriptorProto, SourceCodeInfo,
};

fn schema(name: &str, direction: Direction) -> Value {
    let pool = embedded_pool().unwrap();
    let docs = Docs::from_pool(&pool);
    let gate = Gate::build(&pool).unwrap();
    message_schema(&pool.get_message_by_name(name).unwrap(), direction, &docs, &gate).unwrap()
}

#[test]
fn int32_field_is_a_bounded_integer() {
    let schema = schema("demo.users.v1.GetUserRequest", Direction::Input);
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["additionalProperties"], false);
    let user_id = &schema["properties"]["user_id"];
    assert_eq!(user_id["type"], "integer");
    assert_eq!(user_id["minimum"], i32::MIN);
    assert_eq!(user_id["maximum"], i32::MAX);
    assert!(user_id["description"].as_str().unwrap().contains("32-bit integer"));
    assert!(schema.get("required").is_none());
}

#[test]
fn nested_messages_enums_maps_and_well_known_types() {
    let schema = schema("demo.catalog.v1.Item", Direction::Input);
    let properties = &schema["properties"];
    assert_eq!(properties["id"]["type"], json!(["string", "integer"]));
    assert_eq!(properties["id"]["minimum"], i64::MIN);
    assert_eq!(properties["category"]["enum"][1], "CATEGORY_HARDWARE");
    assert_eq!(properties["price"]["properties"]["currency_code"]["type"], "string");
    assert_eq!(properties["price"]["additionalProperties"], false);
    assert_eq!(properties["tags"]["items"]["type"], "string");
    assert_eq!(properties["attributes"]["additionalProperties"]["type"], "string");
    assert_eq!(properties["updated_at"]["format"], "date-time");
    assert_eq!(schema["description"], "A product in the catalog.");
}

#[test]
fn output_requires_fields_without_presence_and_tolerates_unknown_enum_numbers() {
    let schema = schema("demo.catalog.v1.Item", Direction::Output);
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        required,
        ["id", "name", "description", "category", "stock", "tags", "attributes"]
    );
    assert_eq!(schema["properties"]["category"]["anyOf"][1]["type"], "integer");
}

#[test]
fn proto3_optional_is_not_required_on_output() {
    let schema = schema("demo.catalog.v1.SearchFilters", Direction::Output);
    let required = schema["required"].as_array().unwrap();
    assert!(!required.contains(&json!("max_price_minor")));
    assert!(required.contains(&json!("category")));
}

/// The package of the pools these tests build.
pub(crate) const PACKAGE: &str = "shape.v1";
/// Their service, with one method per message in [`pool`]'s `methods`.
pub(crate) const SERVICE: &str = "shape.v1.Shapes";

fn field(name: &str, number: usize, kind: Type, type_name: Option<&str>) -> FieldDescriptorProto {
    FieldDescriptorProto {
        name: Some(name.into()),
        number: Some(i32::try_from(number).unwrap()),
        label: Some(Label::Optional as i32),
        r#type: Some(kind as i32),
        type_name: type_name.map(|name| format!(".{PACKAGE}.{name}")),
        json_name: Some(name.into()),
        ..FieldDescriptorProto::default()
    }
}

fn message_of(name: &str, field: Vec<FieldDescriptorProto>) -> DescriptorProto {
    DescriptorProto {
        name: Some(name.into()),
        field,
        ..DescriptorProto::default()
    }
}

/// One file of `messages`, `enums`, comments (by descriptor path) and a service whose
/// methods take and return the messages named in `methods`.
fn pool(
    messages: Vec<DescriptorProto>,
    enums: Vec<EnumDescriptorProto>,
    comments: Vec<(Vec<i32>, String)>,
    methods: &[&str],
) -> DescriptorPool {
    let method = |name: &&str| MethodDescriptorProto {
        name: Some(name.to_string()),
        input_type: Some(format!(".{PACKAGE}.{name}")),
        output_type: Some(format!(".{PACKAGE}.{name}")),
        ..MethodDescriptorProto::default()
    };
    let location = |(path, text): (Vec<i32>, String)| Location {
        path,
        leading_comments: Some(text),
        ..Location::default()
    };
    let file = FileDescriptorProto {
        name: Some("shape/v1/shape.proto".into()),
        package: Some(PACKAGE.into()),
        message_type: messages,
        enum_type: enums,
        service: vec![ServiceDescriptorProto {
            name: Some("Shapes".into()),
            method: methods.iter().map(method).collect(),
            ..ServiceDescriptorProto::default()
        }],
        source_code_info: Some(SourceCodeInfo {
            location: comments.into_iter().map(location).collect(),
        }),
        syntax: Some("proto3".into()),
        ..FileDescriptorProto::default()
    };
    let mut pool = DescriptorPool::new();
    pool.add_file_descriptor_proto(file).unwrap();
    pool
}

/// `Level0` … `Level{levels - 1}`, each with `fan` fields of the next (`a`, `b`, …); the
/// last holds a string. Inline, the tree has `fan^(levels - 1)` copies of the last.
/// Method `Level0` takes and returns the first.
pub(crate) fn fanned(levels: usize, fan: usize) -> DescriptorPool {
    let messages = (0..levels)
        .map(|level| {
            let fields = if level + 1 < levels {
                let next = format!("Level{}", level + 1);
                (0..fan)
                    .map(|index| {
                        let name = match u8::try_from(index) {
                            Ok(small) if small < 26 => char::from(b'a' + small).to_string(),
                            _ => format!("f{index}"),
                        };
                        field(&name, index + 1, Type::Message, Some(&next))
                    })
                    .collect()
            } else {
                vec![field("value", 1, Type::String, None)]
            };
            message_of(&format!("Level{level}"), fields)
        })
        .collect();
    pool(messages, Vec::new(), Vec::new(), &["Level0"])
}

/// `Chain0` … `Chain{length - 1}`, each with a string and the next.
fn chain(length: usize) -> DescriptorPool {
    let messages = (0..length)
        .map(|link| {
            let mut fields = vec![field("value", 1, Type::String, None)];
            if link + 1 < length {
                fields.push(field("next", 2, Type::Message, Some(&format!("Chain{}", link + 1))));
            }
            message_of(&format!("Chain{link}"), fields)
        })
        .collect();
    pool(messages, Vec::new(), Vec::new(), &[])
}

/// `Huge`: `fields` fields of an enum of `values` values, whose schema lists every name
/// (about 15 bytes a value).
pub(crate) fn enum_heavy(fields: usize, values: usize) -> DescriptorPool {
    let value = |number: usize| EnumValueDescriptorProto {
        name: Some(format!("MANY_VALUE_{number:05}")),
        number: Some(i32::try_from(number).unwrap()),
        ..EnumValueDescriptorProto::default()
    };
    let many = EnumDescriptorProto {
        name: Some("Many".into()),
        value: (0..values).map(value).collect(),
        ..EnumDescriptorProto::default()
    };
    let huge = message_of(
        "Huge",
        (0..fields)
            .map(|index| field(&format!("f{index}"), index + 1, Type::Enum, Some("Many")))
            .collect(),
    );
    pool(vec![huge], vec![many], Vec::new(), &["Huge"])
}

fn message(pool: &DescriptorPool, name: &str) -> MessageDescriptor {
    pool.get_message_by_name(&format!("{PACKAGE}.{name}")).unwrap()
}

fn laid_out_in(pool: &DescriptorPool, name: &str, direction: Direction) -> Result<(Value, Layout), SchemaTooLarge> {
    laid_out(
        &message(pool, name),
        direction,
        &Docs::from_pool(pool),
        &Gate::build(pool).unwrap(),
    )
}

fn def_names(schema: &Value) -> Vec<&str> {
    schema["$defs"]
        .as_object()
        .map(|defs| defs.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

/// The fields written in a schema: the properties of every message's object in it.
fn written_fields(schema: &Value) -> u64 {
    match schema {
        Value::Object(map) => {
            let own = match (map.get("properties"), map.get("additionalProperties")) {
                (Some(Value::Object(properties)), Some(Value::Bool(false))) => properties.len() as u64,
                _ => 0,
            };
            own + map.values().map(written_fields).sum::<u64>()
        }
        Value::Array(items) => items.iter().map(written_fields).sum(),
        _ => 0,
    }
}

#[test]
fn an_exponential_tree_is_written_shared_each_message_once() {
    // 16 messages of 4 fields each: inline, 4^15 copies of the last, which never finished.
    let pool = fanned(16, 4);
    let root = message(&pool, "Level0");
    let expected: u64 = (0..15).map(|level| 4 * 4u64.pow(level)).sum::<u64>() + 4u64.pow(15);
    assert_eq!(Shape::of(&root).inline_fields, expected);
    assert!(expected > INLINE_FIELD_BUDGET);
    for direction in [Direction::Input, Direction::Output] {
        let (schema, layout) = laid_out_in(&pool, "Level0", direction).unwrap();
        assert_eq!(layout, Layout::Shared);
        let levels: Vec<String> = (1..16).map(|level| format!("{PACKAGE}.Level{level}")).collect();
        let mut defined = def_names(&schema);
        defined.sort_by_key(|name| name.trim_start_matches("shape.v1.Level").parse::<usize>().unwrap());
        assert_eq!(defined, levels);
        for name in ["a", "b", "c", "d"] {
            assert_eq!(schema["properties"][name], json!({"$ref": "#/$defs/shape.v1.Level1"}));
            assert_eq!(
                schema["$defs"]["shape.v1.Level14"]["properties"][name],
                json!({"$ref": "#/$defs/shape.v1.Level15"})
            );
        }
        assert_eq!(
            schema["$defs"]["shape.v1.Level15"]["properties"]["value"]["type"],
            "string"
        );
        // Each message once: 61 fields, a few kilobytes.
        assert_eq!(written_fields(&schema), 61);
        assert!(json_len(&schema) < 8_000, "{} bytes", json_len(&schema));
        assert!(jsonschema::meta::is_valid(&schema));
        let validator = jsonschema::draft202012::new(&schema).unwrap();
        // Level14, whose fields are Level15s (which, as output, always carry `value`).
        let mut deep = json!({"a": {"value": "leaf"}, "d": {"value": ""}});
        for _ in 2..16 {
            deep = json!({"a": deep, "d": {}});
        }
        assert!(validator.is_valid(&deep));
        deep["a"]["a"]["d"]["unknown"] = json!(1);
        assert!(!validator.is_valid(&deep));
    }
}

#[test]
fn forty_levels_and_a_saturated_count_build_as_fast() {
    let pool = fanned(40, 4);
    assert!(Shape::of(&message(&pool, "Level0")).inline_fields > INLINE_FIELD_BUDGET);
    let (schema, layout) = laid_out_in(&pool, "Level0", Direction::Input).unwrap();
    assert_eq!(layout, Layout::Shared);
    assert_eq!(def_names(&schema).len(), 39);
    assert_eq!(written_fields(&schema), 4 * 39 + 1);
    // 200^16 copies inline: more than 64 bits count.
    let pool = fanned(17, 200);
    assert_eq!(Shape::of(&message(&pool, "Level0")).inline_fields, u64::MAX);
    let (schema, layout) = laid_out_in(&pool, "Level0", Direction::Output).unwrap();
    assert_eq!(layout, Layout::Shared);
    assert_eq!(written_fields(&schema), 200 * 16 + 1);
}

#[test]
fn the_count_is_what_the_inline_layout_writes() {
    // Recursive messages, maps, lists, well-known types (the embedded protos), a chain
    // cut at MAX_INLINE_DEPTH, and a tree with many paths to each message.
    let embedded = embedded_pool().unwrap();
    let mut cases: Vec<(DescriptorPool, MessageDescriptor)> = embedded
        .all_messages()
        .map(|message| (embedded.clone(), message))
        .collect();
    for (pool, name) in [(chain(40), "Chain0"), (fanned(5, 3), "Level0")] {
        let root = message(&pool, name);
        cases.push((pool, root));
    }
    for (pool, root) in cases {
        let shape = Shape::of(&root);
        let docs = Docs::from_pool(&pool);
        let gate = Gate::build(&pool).unwrap();
        let schema = build(&root, Direction::Input, &docs, &gate, &shape, Layout::Inline).unwrap();
        assert_eq!(shape.inline_fields, written_fields(&schema), "{}", root.full_name());
    }
    // The chain goes on behind a `$ref` every 16 messages, inline.
    let pool = chain(40);
    let (schema, layout) = laid_out_in(&pool, "Chain0", Direction::Input).unwrap();
    assert_eq!(layout, Layout::Inline);
    assert_eq!(def_names(&schema), ["shape.v1.Chain17", "shape.v1.Chain34"]);
}

/// `Root`: `BUDGET / 2` fields of `Leaf` (one field each) and the rest as strings, plus
/// `extra` more strings.
fn at_budget(extra: usize) -> DescriptorPool {
    let leaves = usize::try_from(INLINE_FIELD_BUDGET / 2).unwrap();
    let strings = usize::try_from(INLINE_FIELD_BUDGET % 2).unwrap() + extra;
    let mut fields: Vec<FieldDescriptorProto> = (0..leaves)
        .map(|index| field(&format!("leaf{index}"), index + 1, Type::Message, Some("Leaf")))
        .collect();
    fields.extend((0..strings).map(|index| field(&format!("text{index}"), leaves + index + 1, Type::String, None)));
    let leaf = message_of("Leaf", vec![field("on", 1, Type::Bool, None)]);
    pool(vec![message_of("Root", fields), leaf], Vec::new(), Vec::new(), &[])
}

#[test]
fn the_budget_is_the_last_count_written_inline() {
    let pool = at_budget(0);
    assert_eq!(Shape::of(&message(&pool, "Root")).inline_fields, INLINE_FIELD_BUDGET);
    let (schema, layout) = laid_out_in(&pool, "Root", Direction::Input).unwrap();
    assert_eq!(layout, Layout::Inline);
    assert!(schema.get("$defs").is_none());
    assert_eq!(schema["properties"]["leaf0"]["properties"]["on"]["type"], "boolean");

    let pool = at_budget(1);
    assert_eq!(
        Shape::of(&message(&pool, "Root")).inline_fields,
        INLINE_FIELD_BUDGET + 1
    );
    let (schema, layout) = laid_out_in(&pool, "Root", Direction::Input).unwrap();
    assert_eq!(layout, Layout::Shared);
    assert_eq!(def_names(&schema), ["shape.v1.Leaf"]);
    assert_eq!(schema["properties"]["leaf0"], json!({"$ref": "#/$defs/shape.v1.Leaf"}));
    // A message used once stays where it is, shared or not.
    assert_eq!(schema["properties"]["text0"]["type"], "string");
}

#[test]
fn a_shared_message_used_once_stays_inline_and_a_recursive_root_shares_its_children() {
    // Root { Once once; Twice x; Twice y; Root again; } with the tree past the budget.
    let mut root_fields = vec![
        field("once", 1, Type::Message, Some("Once")),
        field("x", 2, Type::Message, Some("Twice")),
        field("y", 3, Type::Message, Some("Twice")),
        field("big", 4, Type::Message, Some("Level0")),
    ];
    let fanned = fanned(16, 4);
    let mut messages: Vec<DescriptorProto> = fanned
        .get_file_by_name("shape/v1/shape.proto")
        .unwrap()
        .file_descriptor_proto()
        .message_type
        .clone();
    messages.push(message_of("Once", vec![field("text", 1, Type::String, None)]));
    messages.push(message_of("Twice", vec![field("number", 1, Type::Int32, None)]));
    messages.push(message_of("Root", root_fields.clone()));
    let plain = pool(messages.clone(), Vec::new(), Vec::new(), &[]);
    let (schema, layout) = laid_out_in(&plain, "Root", Direction::Input).unwrap();
    assert_eq!(layout, Layout::Shared);
    assert_eq!(schema["properties"]["once"]["properties"]["text"]["type"], "string");
    assert_eq!(schema["properties"]["x"], json!({"$ref": "#/$defs/shape.v1.Twice"}));
    assert_eq!(
        schema["properties"]["big"]["properties"]["a"],
        json!({"$ref": "#/$defs/shape.v1.Level1"})
    );
    assert!(!def_names(&schema).contains(&"shape.v1.Once"));

    // A recursive root is written twice (as the root and under `$defs`): what it holds
    // once is shared, so that nothing is written twice.
    root_fields.push(field("again", 5, Type::Message, Some("Root")));
    let last = messages.len() - 1;
    messages[last] = message_of("Root", root_fields);
    let recursive = pool(messages, Vec::new(), Vec::new(), &[]);
    let (schema, layout) = laid_out_in(&recursive, "Root", Direction::Input).unwrap();
    assert_eq!(layout, Layout::Shared);
    assert_eq!(schema["properties"]["again"], json!({"$ref": "#/$defs/shape.v1.Root"}));
    assert_eq!(schema["properties"]["once"], json!({"$ref": "#/$defs/shape.v1.Once"}));
    assert_eq!(
        schema["$defs"]["shape.v1.Root"]["properties"]["once"],
        json!({"$ref": "#/$defs/shape.v1.Once"})
    );
}

#[test]
fn an_inline_schema_past_the_byte_bound_is_written_shared() {
    // 8 fields of a message with a 200 kB comment: few fields, 1.6 MB inline.
    let fields = (0..8)
        .map(|index| field(&format!("f{index}"), index + 1, Type::Message, Some("Wordy")))
        .collect();
    let comment = "word ".repeat(40_000);
    let pool = pool(
        vec![
            message_of("Root", fields),
            message_of("Wordy", vec![field("on", 1, Type::Bool, None)]),
        ],
        Vec::new(),
        vec![(vec![4, 1], comment)],
        &[],
    );
    assert_eq!(Shape::of(&message(&pool, "Root")).inline_fields, 16);
    let (schema, layout) = laid_out_in(&pool, "Root", Direction::Input).unwrap();
    assert_eq!(layout, Layout::Shared);
    assert_eq!(def_names(&schema), ["shape.v1.Wordy"]);
    let length = json_len(&schema);
    assert!((200_000..MAX_SCHEMA_BYTES).contains(&length), "{length}");
}

#[test]
fn a_schema_too_large_even_shared_is_refused() {
    // 100 fields of an enum of 2,000 values: about 3 MB of names, shared or not.
    let pool = enum_heavy(100, 2_000);
    for direction in [Direction::Input, Direction::Output] {
        assert_eq!(laid_out_in(&pool, "Huge", direction), Err(SchemaTooLarge));
    }
    // Just under the bound it is served.
    let pool = enum_heavy(20, 2_000);
    let schema = laid_out_in(&pool, "Huge", Direction::Input).unwrap().0;
    assert!(json_len(&schema) > MAX_SCHEMA_BYTES / 2);
}

#[test]
fn the_count_while_building_never_passes_the_final_length() {
    // Descriptions on inlined messages (replaced by the field's), rules that shrink an
    // enum's list, maps and lists: what was counted is at most the text.
    let embedded = embedded_pool().unwrap();
    let docs = Docs::from_pool(&embedded);
    let gate = Gate::build(&embedded).unwrap();
    for message in embedded.all_messages() {
        let shape = Shape::of(&message);
        for direction in [Direction::Input, Direction::Output] {
            let mut builder = Builder {
                direction,
                docs: &docs,
                gate: &gate,
                shape: &shape,
                layout: Layout::Inline,
                depth: 0,
                defs: BTreeMap::new(),
                pending: Vec::new(),
                written: 0,
            };
            let schema = builder.object(&message).unwrap();
            let length = json_len(&schema);
            assert!(builder.written <= length, "{} {direction:?}", message.full_name());
            assert!(
                builder.written * 3 >= length,
                "{} {direction:?}: {} of {length}",
                message.full_name(),
                builder.written
            );
        }
    }
}

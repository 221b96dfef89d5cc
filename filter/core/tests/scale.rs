//! A large descriptor set builds its catalog quickly and without deep recursion: 1,000 unary
//! methods with 2,000 request and response messages, a 300-message chain nested one inside the
//! next, and a 100-message cycle. The build runs on a thread with a small stack, as the Wasm
//! VM has (1 MiB, the Wasm default).

// Test code: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use base64::Engine;
use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{
    DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet, MethodDescriptorProto,
    ServiceDescriptorProto,
};
use serde_json::{json, Value};
use switchblade_core::server::Server;

const METHODS: usize = 1000;
const CHAIN: usize = 300;
const CYCLE: usize = 100;

fn field(name: &str, number: i32, kind: Type, type_name: Option<String>) -> FieldDescriptorProto {
    FieldDescriptorProto {
        name: Some(name.into()),
        number: Some(number),
        label: Some(Label::Optional as i32),
        r#type: Some(kind as i32),
        type_name,
        json_name: Some(name.into()),
        ..Default::default()
    }
}

fn message(name: String, fields: Vec<FieldDescriptorProto>) -> DescriptorProto {
    DescriptorProto {
        name: Some(name),
        field: fields,
        ..Default::default()
    }
}

fn reference(name: &str) -> Option<String> {
    Some(format!(".scale.v1.{name}"))
}

fn descriptor_set() -> FileDescriptorSet {
    let mut messages = Vec::new();
    let mut methods = Vec::new();
    for i in 0..METHODS {
        let scalars = || {
            vec![
                field("id", 1, Type::Int64, None),
                field("name", 2, Type::String, None),
                field("count", 3, Type::Int32, None),
                field("enabled", 4, Type::Bool, None),
            ]
        };
        messages.push(message(format!("Request{i}"), scalars()));
        messages.push(message(format!("Response{i}"), scalars()));
        methods.push(MethodDescriptorProto {
            name: Some(format!("Method{i}")),
            input_type: reference(&format!("Request{i}")),
            output_type: reference(&format!("Response{i}")),
            ..Default::default()
        });
    }
    for i in 0..CHAIN {
        let mut fields = vec![field("value", 1, Type::String, None)];
        if i + 1 < CHAIN {
            fields.push(field("next", 2, Type::Message, reference(&format!("Chain{}", i + 1))));
        }
        messages.push(message(format!("Chain{i}"), fields));
    }
    for i in 0..CYCLE {
        let next = reference(&format!("Cycle{}", (i + 1) % CYCLE));
        messages.push(message(
            format!("Cycle{i}"),
            vec![
                field("label", 1, Type::String, None),
                field("next", 2, Type::Message, next),
            ],
        ));
    }
    methods.push(MethodDescriptorProto {
        name: Some("Deep".into()),
        input_type: reference("Chain0"),
        output_type: reference("Cycle0"),
        ..Default::default()
    });
    FileDescriptorSet {
        file: vec![FileDescriptorProto {
            name: Some("scale/v1/scale.proto".into()),
            package: Some("scale.v1".into()),
            message_type: messages,
            service: vec![ServiceDescriptorProto {
                name: Some("ScaleService".into()),
                method: methods,
                ..Default::default()
            }],
            syntax: Some("proto3".into()),
            ..Default::default()
        }],
    }
}

#[test]
fn a_thousand_methods_deep_chains_and_cycles_build_on_a_small_stack() {
    let set = descriptor_set();
    let message_count = set.file[0].message_type.len();
    assert!(message_count > 2300, "{message_count} messages");
    let config = json!({
        "descriptor_set": base64::engine::general_purpose::STANDARD.encode(set.encode_to_vec()),
        "services": {"scale.v1.ScaleService": {"cluster": "c"}},
        "tools_list": {"page_size": 1000},
    })
    .to_string();
    // To measure the same build inside Envoy's Wasm VM (see docs/json-mapping.md, Scale).
    if let Ok(path) = std::env::var("SWITCHBLADE_SCALE_CONFIG_OUT") {
        std::fs::write(path, &config).unwrap();
    }

    let built = std::thread::Builder::new()
        .stack_size(1024 * 1024) // the Wasm default, and debug frames are larger than release ones
        .spawn(move || {
            let started = Instant::now();
            let server = Server::from_config_bytes(config.as_bytes()).map_err(|error| error.0)?;
            let elapsed = started.elapsed();
            let deep = server
                .catalog()
                .get("ScaleService_Deep")
                .map(|tool| tool.definition_value());
            Ok::<_, String>((server.catalog().tool_count(), elapsed, deep))
        })
        .unwrap()
        .join()
        .expect("no stack overflow");
    let (tools, elapsed, deep) = built.unwrap();
    assert_eq!(tools, METHODS + 1);
    eprintln!(
        "catalog of {tools} tools from {message_count} messages built in {elapsed:?} (native, this build profile)"
    );

    let deep = deep.unwrap();
    let input = &deep["inputSchema"];
    // The chain is inlined 16 deep at a time, then continues behind a $ref.
    let defs = input["$defs"].as_object().unwrap();
    assert!(defs.contains_key("scale.v1.Chain17") && defs.contains_key("scale.v1.Chain289"));
    assert!(jsonschema::meta::is_valid(input));
    // A full 300-link instance validates, so every link is in the schema.
    let mut chain = json!({"value": "last"});
    for _ in 1..CHAIN {
        chain = json!({"value": "link", "next": chain});
    }
    let validator = jsonschema::draft202012::new(input).unwrap();
    assert!(validator.is_valid(&chain));
    let mut too_long = json!({"value": "one too many"});
    for _ in 0..CHAIN {
        too_long = json!({"value": "link", "next": too_long});
    }
    assert!(!validator.is_valid(&too_long), "Chain299 has no `next`");
    let output: &Value = &deep["outputSchema"];
    assert_eq!(output["properties"]["next"]["$ref"], "#/$defs/scale.v1.Cycle1");
    assert!(jsonschema::meta::is_valid(output));
}

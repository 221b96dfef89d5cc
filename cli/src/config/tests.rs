use super::args::{parse_metadata, parse_service, DEFAULT_IMAGE};
use super::*;
use crate::descriptor_sets::File;
use std::path::{Path, PathBuf};

/// What `switchblade config` prints for `args`.
fn config(args: &ConfigArgs) -> Result<String, String> {
    run(args).map(|output| output.stdout)
}

fn users_args(format: Format) -> ConfigArgs {
    ConfigArgs {
        protos: vec!["demo/users/v1/users.proto".into()],
        includes: vec![proto_dir()],
        descriptor_set: None,
        reflect: None,
        reflect_tls: false,
        reflect_ca: None,
        services: vec![("demo.users.v1.UserService".into(), "users".into())],
        methods: vec!["demo.users.v1.UserService/GetUser".into()],
        tool_names: vec![],
        timeouts: vec![],
        streaming: false,
        metadata: vec![],
        discovery: DiscoveryArg::List,
        forward_headers: vec!["X-Request-Id".into()],
        allowed_origins: vec![],
        resource: None,
        authorization_servers: vec![],
        jwks_uri: None,
        scopes: vec![],
        caller_metadata: vec![],
        format,
        wasm: "x.wasm".into(),
        image: DEFAULT_IMAGE.into(),
    }
}

fn proto_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../proto")
}

/// `bytes` in a file of this test run's own, for --descriptor-set.
fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("switchblade-cli-{}-{name}", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// What protox writes for `files` (as `protoc --include_imports --include_source_info`
/// would: every span and comment), the files of `drop` left out.
fn protox_set(files: &[&str], drop: &[&str]) -> Vec<u8> {
    let mut set = protox::compile(files, [proto_dir()]).unwrap();
    set.file.retain(|file| !drop.contains(&file.name()));
    set.encode_to_vec()
}

fn set_args(service: &str, path: PathBuf) -> ConfigArgs {
    ConfigArgs {
        protos: vec![],
        includes: vec![],
        descriptor_set: Some(path),
        services: vec![(service.into(), "c".into())],
        methods: vec![],
        forward_headers: vec![],
        ..users_args(Format::Json)
    }
}

fn tool_list(config_json: &str) -> Vec<Value> {
    let server = Server::from_config_bytes(config_json.as_bytes()).unwrap();
    server.catalog().tools().map(|tool| tool.definition_value()).collect()
}

#[test]
fn a_descriptor_set_serves_the_tools_its_protos_do() {
    let catalog = "demo/catalog/v1/catalog.proto";
    let path = temp_file("catalog.binpb", &protox_set(&[catalog], &[]));
    let from_set = config(&set_args("demo.catalog.v1.CatalogService", path.clone())).unwrap();
    let from_protos = config(&ConfigArgs {
        protos: vec![catalog.into()],
        includes: vec![proto_dir()],
        descriptor_set: None,
        ..set_args("demo.catalog.v1.CatalogService", path.clone())
    })
    .unwrap();
    std::fs::remove_file(path).unwrap();
    assert_eq!(tool_list(&from_set), tool_list(&from_protos));
    assert!(!tool_list(&from_set).is_empty());
    // The spans are gone, as from .proto files.
    assert_eq!(from_set.len(), from_protos.len());
}

/// The kitchen sink's Echo takes `must` with `(google.api.field_behavior) = REQUIRED`: a
/// custom option, which a set decoded into prost_types and encoded again would have lost.
fn echo_required(config_json: &str) -> Value {
    let tools = tool_list(config_json);
    let echo = tools
        .iter()
        .find(|tool| tool["name"] == "KitchenSinkService_Echo")
        .unwrap();
    echo["inputSchema"]["required"].clone()
}

#[test]
fn custom_options_survive_the_proto_route_and_a_descriptor_set() {
    let sink = "test/kitchensink/v1/kitchen_sink.proto";
    let service = "test.kitchensink.v1.KitchenSinkService";
    let mut compiler = protox::Compiler::new([proto_dir()]).unwrap();
    compiler
        .include_source_info(true)
        .include_imports(true)
        .open_files([sink])
        .unwrap();
    let path = temp_file("sink-options.binpb", &compiler.encode_file_descriptor_set());
    let from_set = config(&set_args(service, path.clone())).unwrap();
    std::fs::remove_file(path).unwrap();
    let from_protos = config(&ConfigArgs {
        protos: vec![sink.into()],
        includes: vec![proto_dir()],
        descriptor_set: None,
        ..set_args(service, PathBuf::new())
    })
    .unwrap();
    assert_eq!(echo_required(&from_protos), json!(["must"]));
    assert_eq!(echo_required(&from_set), json!(["must"]));
}

/// A user's .proto that imports `buf/validate/validate.proto`, in a directory of its own.
const RULED_PROTO: &str = r#"syntax = "proto3";
package acme.shop.v1;
import "buf/validate/validate.proto";
service Shop { rpc Buy(BuyRequest) returns (BuyRequest); }
message BuyRequest {
  string sku = 1 [(buf.validate.field).string = {min_len: 3, pattern: "^[A-Z]+$"}];
  int32 count = 2 [(buf.validate.field).int32.gt = 0];
}
"#;

/// A directory of this test run's own holding `shop.proto`.
fn shop_dir(name: &str, source: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchblade-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("shop.proto"), source).unwrap();
    dir
}

/// `switchblade config` of the shop in `dir`, with `dir` as the only include path.
fn shop_config(dir: &Path) -> Result<String, String> {
    config(&ConfigArgs {
        protos: vec!["shop.proto".into()],
        includes: vec![dir.to_owned()],
        descriptor_set: None,
        ..set_args("acme.shop.v1.Shop", PathBuf::new())
    })
}

fn buy_schema(config_json: &str) -> Value {
    tool_list(config_json)
        .into_iter()
        .find(|tool| tool["name"] == "Shop_Buy")
        .unwrap()["inputSchema"]
        .clone()
}

#[test]
fn buf_validate_imports_need_no_extra_step() {
    let dir = shop_dir("ruled", RULED_PROTO);
    // The .proto route: no include path holds buf/validate/validate.proto.
    let from_protos = shop_config(&dir).unwrap();
    let schema = buy_schema(&from_protos);
    assert_eq!(schema["properties"]["sku"]["minLength"], 3);
    assert_eq!(schema["properties"]["count"]["exclusiveMinimum"], 0);
    // A set that imports it without carrying it (as `buf build --exclude-imports` writes).
    let mut compiler = protox::Compiler::new([dir.clone(), proto_dir()]).unwrap();
    compiler.include_imports(true).open_files(["shop.proto"]).unwrap();
    // Encoded by protox, byte for byte: a decoded set would have lost the options.
    let whole = compiler.encode_file_descriptor_set();
    let files = switchblade_core::descriptors::set_files(&whole).unwrap();
    let shop = files
        .into_iter()
        .filter(|file| File::decode(file.to_vec()).unwrap().name() == "shop.proto");
    let path = temp_file("shop.binpb", &switchblade_core::descriptors::encode_set(shop));
    let from_set = config(&set_args("acme.shop.v1.Shop", path.clone())).unwrap();
    std::fs::remove_file(path).unwrap();
    std::fs::remove_dir_all(dir).unwrap();
    assert_eq!(buy_schema(&from_set), schema);
}

#[test]
/// `switchblade config` refuses them as the filter would, naming the field.
fn rules_that_cannot_be_enforced_as_written_are_refused_at_load() {
    let cases = [
        (
            r#"string sku = 1 [(buf.validate.field).string.pattern = "(unclosed"];"#,
            "the configuration would be refused: in the descriptor set: the buf.validate rules of field \
             acme.shop.v1.BuyRequest.sku: the pattern `(unclosed` does not compile",
        ),
        (
            r#"int32 count = 1 [(buf.validate.field).string.min_len = 1];"#,
            "the configuration would be refused: in the descriptor set: the buf.validate rules of field \
             acme.shop.v1.BuyRequest.count: `string` rules on a field that takes `int32` rules",
        ),
        (
            r#"repeated int32 counts = 1 [(buf.validate.field).int32.gt = 1];"#,
            "the configuration would be refused: in the descriptor set: the buf.validate rules of field \
             acme.shop.v1.BuyRequest.counts: `int32` rules on a field that takes `repeated` rules",
        ),
    ];
    for (field, expected) in cases {
        let source = RULED_PROTO.replace(
            r#"  string sku = 1 [(buf.validate.field).string = {min_len: 3, pattern: "^[A-Z]+$"}];
  int32 count = 2 [(buf.validate.field).int32.gt = 0];"#,
            &format!("  {field}"),
        );
        let dir = shop_dir("bad-rules", &source);
        let error = shop_config(&dir).unwrap_err();
        std::fs::remove_dir_all(dir).unwrap();
        assert!(error.starts_with(expected), "{error}");
    }
}

#[test]
fn a_descriptor_set_without_its_imports_names_what_it_lacks() {
    let sink = "test/kitchensink/v1/kitchen_sink.proto";
    let all = prost_types::FileDescriptorSet::decode(protox_set(&[sink], &[]).as_slice()).unwrap();
    let others: Vec<&str> = all
        .file
        .iter()
        .map(|file| file.name())
        .filter(|name| *name != sink)
        .collect();
    let path = temp_file("sink.binpb", &protox_set(&[sink], &others));
    let error = config(&set_args("test.kitchensink.v1.KitchenSinkService", path.clone())).unwrap_err();
    std::fs::remove_file(path).unwrap();
    // google/api/field_behavior.proto is built in, and filled in; legacy.proto is the user's.
    assert!(
        error.ends_with(
            "sink.binpb: the descriptor set lacks `test/kitchensink/v1/legacy.proto`, imported by \
             `test/kitchensink/v1/kitchen_sink.proto`; build it with --include_imports (protoc) or without \
             --exclude-imports (buf)"
        ),
        "{error}"
    );
    // The well-known imports alone are filled in.
    let catalog = "demo/catalog/v1/catalog.proto";
    let path = temp_file(
        "bare-catalog.binpb",
        &protox_set(&[catalog], &["google/protobuf/timestamp.proto"]),
    );
    let filled = config(&set_args("demo.catalog.v1.CatalogService", path.clone()));
    std::fs::remove_file(path).unwrap();
    assert!(!tool_list(&filled.unwrap()).is_empty());
}

#[test]
fn what_is_not_a_descriptor_set_is_refused() {
    let source = std::fs::read(proto_dir().join("demo/users/v1/users.proto")).unwrap();
    let path = temp_file("users.proto", &source);
    let error = config(&set_args("demo.users.v1.UserService", path.clone())).unwrap_err();
    std::fs::remove_file(path).unwrap();
    assert!(
        error.contains("users.proto: not a binary FileDescriptorSet ("),
        "{error}"
    );
    assert!(error.contains("write one with `buf build -o set.binpb`"), "{error}");
}

#[test]
fn services_are_written_service_equals_cluster() {
    assert_eq!(parse_service("a.B=c"), Ok(("a.B".to_owned(), "c".to_owned())));
    assert!(parse_service("a.B").is_err());
    assert!(parse_service("=c").is_err());
}

#[test]
fn protos_become_a_configuration_the_filter_accepts() {
    let value: Value = serde_json::from_str(&config(&users_args(Format::Json)).unwrap()).unwrap();
    assert_eq!(value["services"]["demo.users.v1.UserService"]["expose"], "selected");
    assert_eq!(value["forward_headers"], json!(["x-request-id"]));
    let orphan = ConfigArgs {
        methods: vec!["other.Svc/M".into()],
        ..users_args(Format::Json)
    };
    assert_eq!(
        config(&orphan).unwrap_err(),
        "--method other.Svc/M: not a method of any --service (write package.Service/Method)"
    );
}

#[test]
fn metadata_is_written_per_service_and_tool_and_discovery_when_asked() {
    let args = ConfigArgs {
        metadata: vec![
            parse_metadata("demo.users.v1.UserService:x-tenant=acme").unwrap(),
            parse_metadata("demo.users.v1.UserService/GetUser:x-user=id={user_id}").unwrap(),
        ],
        discovery: DiscoveryArg::Search,
        ..users_args(Format::Json)
    };
    let value: Value = serde_json::from_str(&config(&args).unwrap()).unwrap();
    assert_eq!(
        value["services"]["demo.users.v1.UserService"]["metadata"],
        json!({"x-tenant": "acme"})
    );
    assert_eq!(
        value["tools"]["demo.users.v1.UserService/GetUser"]["metadata"],
        json!({"x-user": "id={user_id}"})
    );
    assert_eq!(value["discovery"], "search");
    assert!(parse_metadata("a.B=x").is_err());
    assert!(parse_metadata(":x=1").is_err());
    let elsewhere = ConfigArgs {
        metadata: vec![parse_metadata("other.Svc:x=1").unwrap()],
        ..users_args(Format::Json)
    };
    assert_eq!(
        config(&elsewhere).unwrap_err(),
        "--metadata other.Svc:…: names no --service and no method of one"
    );
    // The filter's own refusals hold: a reserved name is refused before anything is printed.
    let reserved = ConfigArgs {
        metadata: vec![parse_metadata("demo.users.v1.UserService:grpc-timeout=1S").unwrap()],
        ..users_args(Format::Json)
    };
    let refused = config(&reserved).unwrap_err();
    assert!(
        refused.starts_with(
            "the configuration would be refused: at `services.demo.users.v1.UserService.metadata.grpc-timeout`"
        ),
        "{refused}"
    );
}

#[test]
fn source_info_keeps_the_comments_only() {
    let args = users_args(Format::Json);
    let set = prost_types::FileDescriptorSet::decode(protos::compile(&args.protos, &args.includes).unwrap().as_slice())
        .unwrap();
    let users = set
        .file
        .iter()
        .find(|file| file.name() == "demo/users/v1/users.proto")
        .unwrap();
    let locations = &users.source_code_info.as_ref().unwrap().location;
    assert!(locations.len() > 10, "the comments are kept");
    assert!(locations
        .iter()
        .all(|location| location.span.is_empty() && location.leading_detached_comments.is_empty()));
    assert!(locations
        .iter()
        .all(|location| location.leading_comments.is_some() || location.trailing_comments.is_some()));
    // And they still describe the tools.
    let server = Server::from_config_bytes(config(&args).unwrap().as_bytes()).unwrap();
    let tool = server.catalog().get("UserService_GetUser").unwrap();
    assert!(tool.definition_value()["description"]
        .as_str()
        .is_some_and(|text| !text.is_empty()));
}

#[test]
fn task_tools_get_a_fresh_key_of_their_own() {
    let args = ConfigArgs {
        protos: vec!["demo/exports/v1/exports.proto".into()],
        services: vec![("demo.exports.v1.ExportService".into(), "exports".into())],
        methods: vec![],
        ..users_args(Format::Json)
    };
    let output = run(&args).unwrap();
    assert!(
        output.notes.iter().any(|note| note.contains("task tools")),
        "{:?}",
        output.notes
    );
    let value: Value = serde_json::from_str(&output.stdout).unwrap();
    let key = value["tasks"]["keys"][0].as_str().unwrap();
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(key).unwrap().len(), 32);
    let again: Value = serde_json::from_str(&config(&args).unwrap()).unwrap();
    assert_ne!(again["tasks"]["keys"][0], key, "each run its own key");
    let server = Server::from_config_bytes(output.stdout.as_bytes()).unwrap();
    assert!(server
        .catalog()
        .get("ExportService_ExportCatalog")
        .unwrap()
        .task
        .is_some());
    // Services without task tools get no key.
    let plain: Value = serde_json::from_str(&config(&users_args(Format::Json)).unwrap()).unwrap();
    assert!(plain.get("tasks").is_none());
}

fn authenticated_args(format: Format) -> ConfigArgs {
    ConfigArgs {
        resource: Some("https://mcp.example.com/mcp".into()),
        authorization_servers: vec!["https://auth.example.com".into()],
        jwks_uri: Some("https://auth.example.com:8443/jwks".into()),
        scopes: vec![("demo.users.v1.UserService".into(), "users:read".into())],
        caller_metadata: vec![("X-Caller-Sub".into(), "sub".into())],
        ..users_args(format)
    }
}

#[test]
fn an_authenticated_configuration_publishes_its_metadata_and_checks_tokens_for_itself() {
    let plugin: Value = serde_json::from_str(&config(&authenticated_args(Format::Json)).unwrap()).unwrap();
    assert_eq!(
        plugin["authorization"],
        json!({
            "rules": {"demo.users.v1.UserService": ["users:read"]},
            "unlisted": "deny",
            "resource_metadata": {
                "resource": "https://mcp.example.com/mcp",
                "authorization_servers": ["https://auth.example.com"]
            },
            "caller_metadata": {"x-caller-sub": "sub"}
        })
    );
    let bootstrap: Value = yaml_serde::from_str(&config(&authenticated_args(Format::Envoy)).unwrap()).unwrap();
    let manager = &bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"];
    let jwt_authn = &manager["http_filters"][0]["typed_config"];
    assert_eq!(manager["http_filters"][1]["name"], "switchblade");
    let provider = &jwt_authn["providers"]["oauth"];
    assert_eq!(provider["issuer"], "https://auth.example.com");
    assert_eq!(provider["audiences"], json!(["https://mcp.example.com/mcp"]));
    assert_eq!(provider["forward"], json!(false));
    assert_eq!(
        jwt_authn["rules"],
        json!([{"match": {"path": "/mcp"}, "requires": {"provider_name": "oauth"}}])
    );
    let challenge = &manager["local_reply_config"]["mappers"][0]["headers_to_add"][0]["header"]["value"];
    assert_eq!(
        challenge,
        "Bearer resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\""
    );
    let jwks = bootstrap["static_resources"]["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|cluster| cluster["name"] == "switchblade_jwks")
        .unwrap();
    let address = &jwks["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"];
    assert_eq!(
        (&address["address"], &address["port_value"]),
        (&json!("auth.example.com"), &json!(8443))
    );
    assert_eq!(jwks["transport_socket"]["typed_config"]["sni"], "auth.example.com");

    let module: Value = yaml_serde::from_str(&config(&authenticated_args(Format::Module)).unwrap()).unwrap();
    let filters =
        &module["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]["http_filters"];
    assert_eq!(filters[1]["name"], "envoy.filters.http.set_filter_state");
    let plugin: Value =
        serde_json::from_str(filters[2]["typed_config"]["filter_config"]["value"].as_str().unwrap()).unwrap();
    assert_eq!(
        plugin["authorization"]["token_payload"],
        json!({"filter_state": "switchblade.token_payload"})
    );
}

#[test]
fn an_authenticated_bootstrap_needs_the_keys_and_a_secure_resource() {
    let without_keys = ConfigArgs {
        jwks_uri: None,
        ..authenticated_args(Format::Envoy)
    };
    assert!(config(&without_keys)
        .unwrap_err()
        .starts_with("--resource with --format envoy: give --jwks-uri"));
    assert!(config(&ConfigArgs {
        jwks_uri: None,
        ..authenticated_args(Format::Json)
    })
    .is_ok());
    let plain = ConfigArgs {
        resource: Some("http://mcp.example.com/mcp".into()),
        ..authenticated_args(Format::Json)
    };
    assert!(config(&plain)
        .unwrap_err()
        .contains("at `authorization.resource_metadata.resource`: \"http://mcp.example.com/mcp\" is not https"));
    let open = ConfigArgs {
        scopes: vec![],
        ..authenticated_args(Format::Json)
    };
    let plugin: Value = serde_json::from_str(&config(&open).unwrap()).unwrap();
    assert_eq!(plugin["authorization"]["unlisted"], "allow");
}

#[test]
fn allowed_origins_bring_envoys_cors_filter_with_the_same_origins() {
    let bootstrap = |origins: &[&str], format: Format| -> Value {
        let args = ConfigArgs {
            allowed_origins: origins.iter().map(|origin| (*origin).to_owned()).collect(),
            ..users_args(format)
        };
        yaml_serde::from_str(&config(&args).unwrap()).unwrap()
    };
    for format in [Format::Envoy, Format::Module] {
        let printed = bootstrap(&["https://chat.example.com", "*"], format);
        let manager = &printed["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"];
        assert_eq!(
            manager["http_filters"][0]["name"], "envoy.filters.http.cors",
            "first, before any token check"
        );
        let host = &manager["route_config"]["virtual_hosts"][0];
        let policy = &host["typed_per_filter_config"]["envoy.filters.http.cors"];
        assert_eq!(
            policy["allow_origin_string_match"],
            serde_json::json!([{"exact": "https://chat.example.com"}, {"safe_regex": {"regex": ".*"}}])
        );
        assert!(policy["expose_headers"].as_str().unwrap().contains("mcp-session-id"));
        // The CORS filter passes over direct responses: the MCP route leads to a dead end.
        let mcp = host["routes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|route| route["match"]["path"] == "/mcp")
            .unwrap();
        assert_eq!(mcp["route"]["cluster"], "switchblade_unanswered");
        let clusters = printed["static_resources"]["clusters"].as_array().unwrap();
        let dead_end = clusters
            .iter()
            .find(|cluster| cluster["name"] == "switchblade_unanswered")
            .unwrap();
        assert_eq!(dead_end["load_assignment"]["endpoints"], serde_json::json!([]));
        let plugin: Value = serde_json::from_str(
            manager["http_filters"][1]["typed_config"]
                .pointer("/config/configuration/value")
                .or_else(|| manager["http_filters"][1]["typed_config"].pointer("/filter_config/value"))
                .and_then(Value::as_str)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            plugin["allowed_origins"],
            serde_json::json!(["https://chat.example.com", "*"])
        );
        // Without origins, no CORS filter and the direct response stays.
        let plain = bootstrap(&[], format);
        let text = serde_json::to_string(&plain).unwrap();
        assert!(!text.contains("envoy.filters.http.cors") && !text.contains("switchblade_unanswered"));
    }
}

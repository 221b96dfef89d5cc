use super::*;
use crate::descriptors::embedded_pool;
use crate::streams::CallKind;
use serde_json::json;

fn build(json: &str) -> Result<Catalog, String> {
    let config = PluginConfig::parse(json.as_bytes()).map_err(|e| e.0)?;
    Catalog::build(&config, &embedded_pool().unwrap(), false).map_err(|e| e.0)
}

fn names(catalog: &Catalog) -> Vec<&str> {
    catalog.tools().map(|t| t.name.as_str()).collect()
}

const CATALOG: &str = "demo.catalog.v1.CatalogService";

#[test]
fn all_exposes_unary_methods_and_skips_streaming_ones() {
    let catalog = build(
        r#"{"services":{
            "demo.catalog.v1.CatalogService":{"cluster":"catalog","timeout_ms":2500,"metadata":{"x-tenant":"t1"}},
            "demo.users.v1.UserService":{"cluster":"users"}}}"#,
    )
    .unwrap();
    assert_eq!(
        names(&catalog),
        ["CatalogService_Search", "CatalogService_GetItem", "UserService_GetUser"]
    );
    let get_item = catalog.get("CatalogService_GetItem").unwrap();
    assert_eq!((get_item.service_name(), get_item.method_name()), (CATALOG, "GetItem"));
    assert_eq!(
        (get_item.cluster.as_str(), get_item.timeout),
        ("catalog", Duration::from_millis(2500))
    );
    assert_eq!(get_item.metadata, [("x-tenant".to_owned(), MetadataValue::fixed("t1"))]);
    assert!(catalog.get("CatalogService_WatchItems").is_none());
}

#[test]
fn selected_exposes_exactly_the_listed_methods_in_order() {
    let catalog = build(
        r#"{"services":{"demo.catalog.v1.CatalogService":{"cluster":"c","expose":"selected",
            "methods":["demo.catalog.v1.CatalogService/GetItem","demo.catalog.v1.CatalogService/Search"]}}}"#,
    )
    .unwrap();
    assert_eq!(names(&catalog), ["CatalogService_GetItem", "CatalogService_Search"]);
}

#[test]
fn none_exposes_nothing() {
    let catalog = build(
        r#"{"services":{"demo.catalog.v1.CatalogService":{"cluster":"c","expose":"none"},"demo.users.v1.UserService":{"cluster":"u"}}}"#,
    )
    .unwrap();
    assert_eq!(names(&catalog), ["UserService_GetUser"]);
}

#[test]
fn definitions_carry_comments_schemas_and_hints() {
    let catalog = build(r#"{"services":{"demo.users.v1.UserService":{"cluster":"users"}}}"#).unwrap();
    let definition = &catalog.get("UserService_GetUser").unwrap().definition_value();
    assert_eq!(
        definition["description"],
        "Fetch a user account by its numeric id. Fails with NOT_FOUND when no user has that id."
    );
    assert_eq!(definition["title"], "UserService: GetUser");
    assert_eq!(definition["inputSchema"]["properties"]["user_id"]["type"], "integer");
    assert_eq!(definition["outputSchema"]["type"], "object");
    assert_eq!(
        definition["annotations"],
        json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true})
    );
}

#[test]
fn overrides_replace_what_the_descriptors_say() {
    let catalog = build(
        r#"{"services":{"demo.users.v1.UserService":{"cluster":"users","timeout_ms":100}},
            "tools":{"demo.users.v1.UserService/GetUser":{"name":"get-user","title":"Look up a user","description":"Finds a user.",
            "timeout_ms":50,"annotations":{"readOnlyHint":true,"openWorldHint":false}}}}"#,
    )
    .unwrap();
    let tool = catalog.get("get-user").unwrap();
    assert_eq!(tool.timeout, Duration::from_millis(50));
    assert_eq!(tool.definition_value()["title"], "Look up a user");
    assert_eq!(tool.definition_value()["description"], "Finds a user.");
    assert_eq!(
        tool.definition_value()["annotations"],
        json!({"readOnlyHint": true, "openWorldHint": false})
    );
}

#[test]
fn configuration_errors_name_the_key_and_the_fix() {
    let cases = [
        (r#"{"services":{"demo.Nope":{"cluster":"c"}}}"#, "at `services.demo.Nope`: service demo.Nope is not in the descriptor set; known services: demo.catalog.v1.CatalogService, google.longrunning.Operations, demo.exports.v1.ExportService, demo.users.v1.UserService"),
        (r#"{"services":{"demo.catalog.v1.CatalogService":{"cluster":"c","expose":"selected","methods":["GetItem"]}}}"#,
         "at `services.demo.catalog.v1.CatalogService.methods[0]`: \"GetItem\" is not a method selector; write demo.catalog.v1.CatalogService/Method"),
        (r#"{"services":{"demo.catalog.v1.CatalogService":{"cluster":"c","expose":"selected","methods":["demo.catalog.v1.CatalogService/Nope"]}}}"#,
         "at `services.demo.catalog.v1.CatalogService.methods[0]`: service demo.catalog.v1.CatalogService has no method Nope; its methods: Search, GetItem, WatchItems, ImportItems"),
        (r#"{"services":{"demo.catalog.v1.CatalogService":{"cluster":"c","expose":"selected","methods":["demo.users.v1.UserService/GetUser"]}}}"#,
         "at `services.demo.catalog.v1.CatalogService.methods[0]`: demo.users.v1.UserService/GetUser names service demo.users.v1.UserService, not demo.catalog.v1.CatalogService; list it under `services.demo.users.v1.UserService`"),
        (r#"{"services":{"demo.catalog.v1.CatalogService":{"cluster":"c","expose":"selected","methods":["demo.catalog.v1.CatalogService/GetItem","demo.catalog.v1.CatalogService/GetItem"]}}}"#,
         "at `services.demo.catalog.v1.CatalogService.methods[1]`: demo.catalog.v1.CatalogService/GetItem is listed twice"),
        (r#"{"services":{"demo.catalog.v1.CatalogService":{"cluster":"c","max_messages":0}}}"#,
         "at `services.demo.catalog.v1.CatalogService.max_messages`: must be greater than 0"),
        (r#"{"services":{"demo.catalog.v1.CatalogService":{"cluster":"c"},"demo.users.v1.UserService":{"cluster":"u"}},
             "tools":{"demo.users.v1.UserService/GetUser":{"name":"CatalogService_Search"}}}"#,
         "demo.users.v1.UserService/GetUser would be tool \"CatalogService_Search\", which demo.catalog.v1.CatalogService/Search already is; tool names must be unique"),
        (r#"{"services":{"demo.users.v1.UserService":{"cluster":"u"}},"tools":{"demo.users.v1.UserService/GetUser":{"name":"get.user"}}}"#,
         "at `tools.demo.users.v1.UserService/GetUser.name`: tool name \"get.user\" for demo.users.v1.UserService/GetUser is not 1-64 characters of [A-Za-z0-9_-]"),
        (r#"{"services":{"demo.users.v1.UserService":{"cluster":"u"}},"tools":{"demo.catalog.v1.CatalogService/GetItem":{"name":"x"}}}"#,
         "at `tools.demo.catalog.v1.CatalogService/GetItem`: demo.catalog.v1.CatalogService/GetItem is not an exposed method"),
        (r#"{"services":{"demo.users.v1.UserService":{"cluster":"u"}},"tools":{"GetUser":{"name":"x"}}}"#,
         "at `tools.GetUser`: \"GetUser\" is not a method selector"),
    ];
    for (json, expected) in cases {
        let error = build(json).err().unwrap_or_else(|| panic!("accepted: {json}"));
        assert!(error.starts_with(expected), "\n{json}\n got: {error}\nwant: {expected}");
    }
}

#[test]
fn an_exponential_tree_is_shared_and_a_schema_too_large_even_so_is_refused() {
    use crate::proto_json::schema::tests::{enum_heavy, fanned, SERVICE};
    let config =
        PluginConfig::parse(format!(r#"{{"services":{{"{SERVICE}":{{"cluster":"c"}}}}}}"#).as_bytes()).unwrap();
    // 16 messages of 4 fields of the next: each written once.
    let catalog = Catalog::build(&config, &fanned(16, 4), false).unwrap();
    let definition = &catalog.get("Shapes_Level0").unwrap().definition_value();
    for side in ["inputSchema", "outputSchema"] {
        assert_eq!(definition[side]["properties"]["a"]["$ref"], "#/$defs/shape.v1.Level1");
        assert_eq!(definition[side]["$defs"].as_object().unwrap().len(), 15);
    }
    let error = Catalog::build(&config, &enum_heavy(100, 2_000), false).unwrap_err().0;
    assert_eq!(
        error,
        "at `services.shape.v1.Shapes`: the input schema of shape.v1.Shapes/Huge (message shape.v1.Huge) would be \
         larger than 1048576 bytes of JSON, even with each message that occurs more than once written once under \
         `$defs`; leave the method out (`expose: selected`) or give it a smaller message"
    );
}

#[test]
fn streaming_methods_are_tools_when_asked_for() {
    // `expose: all` takes them with `streaming: true` (and skips them without, see above).
    let catalog =
        build(r#"{"services":{"demo.catalog.v1.CatalogService":{"cluster":"c","streaming":true,"max_messages":7}}}"#)
            .unwrap();
    let watch = catalog.get("CatalogService_WatchItems").unwrap();
    assert_eq!((watch.kind, watch.max_messages), (CallKind::ServerStreaming, 7));
    let definition = &watch.definition_value();
    // The request is the method's own; the result gathers its stream.
    assert_eq!(definition["inputSchema"]["properties"]["ids"]["type"], "array");
    let output = &definition["outputSchema"];
    assert_eq!(output["required"], serde_json::json!(["messages", "end"]));
    assert_eq!(
        output["properties"]["messages"]["items"]["properties"]["item"]["type"],
        "object"
    );
    let description = definition["description"].as_str().unwrap();
    assert!(description.ends_with("Returns the messages the method streams back as `messages` (at most 7, within 10000 ms), and how the stream ended as `end`."), "{description}");
    // `expose: selected` may name one directly.
    let catalog = build(
        r#"{"services":{"demo.catalog.v1.CatalogService":{"cluster":"c","expose":"selected","methods":["demo.catalog.v1.CatalogService/WatchItems"]}},
            "tools":{"demo.catalog.v1.CatalogService/WatchItems":{"max_messages":3}}}"#,
    )
    .unwrap();
    assert_eq!(catalog.get("CatalogService_WatchItems").unwrap().max_messages, 3);
}

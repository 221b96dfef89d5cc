use super::*;
use crate::config::PluginConfig;
use crate::descriptors::embedded_pool;

fn catalog() -> Catalog {
    let config = PluginConfig::parse(
        br#"{"services": {"demo.catalog.v1.CatalogService": {"cluster": "c", "streaming": true},
                          "demo.users.v1.UserService": {"cluster": "c"}}}"#,
    )
    .unwrap();
    Catalog::build(&config, &embedded_pool().unwrap(), false).unwrap()
}

fn found(search: &ToolSearch, catalog: &Catalog, arguments: Value) -> Vec<String> {
    let query = Query::read(&arguments).unwrap();
    let answer: Value = serde_json::from_str(&search.answer(catalog, &query, |_| true)).unwrap();
    answer["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_request_in_words_finds_the_tool_with_its_definition() {
    let catalog = catalog();
    let search = ToolSearch::build(&catalog, &DiscoveryTools::default());
    let first = |query: &str| found(&search, &catalog, json!({"query": query}))[0].clone();
    assert_eq!(first("look up one user by their id"), "UserService_GetUser");
    assert_eq!(first("fetch an item of the catalog"), "CatalogService_GetItem");
    assert_eq!(
        first("search the catalog for items matching words"),
        "CatalogService_Search"
    );
    let arguments = json!({"query": "get an item"});
    let query = Query::read(&arguments).unwrap();
    let answer: Value = serde_json::from_str(&search.answer(&catalog, &query, |_| true)).unwrap();
    let definition = catalog
        .get(answer["tools"][0]["name"].as_str().unwrap())
        .unwrap()
        .definition_value();
    assert_eq!(
        answer["tools"][0], definition,
        "a tool found is described as tools/list would"
    );
}

#[test]
fn a_requests_values_do_not_steer_it() {
    let catalog = catalog();
    let search = ToolSearch::build(&catalog, &DiscoveryTools::default());
    let first = |query: &str| found(&search, &catalog, json!({"query": query}))[0].clone();
    // `user` and `search` would name other tools; here they are only parts of values.
    assert_eq!(first("fetch the item users/search-42"), "CatalogService_GetItem");
    assert_eq!(first("fetch the item 'user search'"), "CatalogService_GetItem");
}

#[test]
fn filters_and_visibility_keep_tools_out() {
    let catalog = catalog();
    let search = ToolSearch::build(&catalog, &DiscoveryTools::default());
    let names = found(
        &search,
        &catalog,
        json!({"query": "get", "service": "userservice", "limit": 20}),
    );
    assert_eq!(names, ["UserService_GetUser"]);
    let streams = found(&search, &catalog, json!({"query": "items", "kind": "server-streaming"}));
    assert!(
        streams
            .iter()
            .all(|name| catalog.get(name).unwrap().kind.label() == "server-streaming"),
        "{streams:?}"
    );
    assert!(!streams.is_empty());
    let arguments = json!({"query": "user"});
    let query = Query::read(&arguments).unwrap();
    let hidden: Value =
        serde_json::from_str(&search.answer(&catalog, &query, |tool| !tool.name.starts_with("User"))).unwrap();
    assert!(hidden["tools"]
        .as_array()
        .unwrap()
        .iter()
        .all(|tool| !tool["name"].as_str().unwrap().starts_with("User")));
    assert_eq!(
        found(&search, &catalog, json!({"query": "zebra quantum"})),
        Vec::<String>::new()
    );
}

#[test]
fn bad_arguments_say_what_is_wrong() {
    for (arguments, expected) in [
        (json!({}), "`query` is required"),
        (json!({"query": "  "}), "`query` is required"),
        (json!({"query": 3}), "`query` must be a string"),
        (
            json!({"query": "x", "limit": 0}),
            "`limit` must be a whole number from 1 to 20",
        ),
        (
            json!({"query": "x", "limit": 21}),
            "`limit` must be a whole number from 1 to 20",
        ),
        (
            json!({"query": "x", "kind": "streaming"}),
            "`kind` \"streaming\" is not one of unary,",
        ),
        (json!({"query": "x", "where": "y"}), "unknown argument `where`"),
        (json!({"query": "x".repeat(1001)}), "`query` has 1001 bytes"),
        (json!([1]), "the arguments must be an object"),
    ] {
        let error = Query::read(&arguments).unwrap_err();
        assert!(error.starts_with(expected), "{arguments}: {error}");
    }
    assert_eq!(
        called(&json!({"name": "t", "arguments": {"a": 1}}), &DiscoveryTools::default())
            .unwrap()
            .0,
        "t"
    );
    assert!(called(&json!({"arguments": {}}), &DiscoveryTools::default())
        .unwrap_err()
        .starts_with("`name` is required"));
}

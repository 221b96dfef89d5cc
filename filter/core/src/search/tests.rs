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

/// A repository service whose every request carries the same `Repository`, as Gitaly's do
/// (under a field with a comment of its own in `Fsck`, and in the messages of a stream in
/// `WriteRefs`), and a `Cursor` only two tools carry.
const REPOSITORIES: &str = r#"
syntax = "proto3";
package estate.v1;

message Repository {
  // The storage the repository is on.
  string storage_name = 1;
  // The directories of alternate objects, searched for a commit's objects.
  repeated string alternate_object_directories = 2;
}
message Cursor {
  // Where the last page ended, for paging through history.
  string token = 1;
}
message RepositoryRequest { Repository repository = 1; }
message PagedRequest { Repository repository = 1; Cursor cursor = 2; }
message ObjectsRequest { Repository repository = 1; repeated string object_ids = 2; }
message FsckRequest {
  // The repository to check, which must exist.
  Repository repository = 1;
}
message RefRequest { Repository repository = 1; string ref = 2; }
message Empty {}

service Repositories {
  rpc GarbageCollect(RepositoryRequest) returns (Empty);
  rpc Fsck(FsckRequest) returns (Empty);
  rpc WriteRefs(stream RefRequest) returns (Empty);
  rpc RepositorySize(RepositoryRequest) returns (Empty);
  rpc ListCommits(PagedRequest) returns (Empty);
  rpc ListTags(PagedRequest) returns (Empty);
  rpc SearchFilesByName(RepositoryRequest) returns (Empty);
  rpc GetObjects(ObjectsRequest) returns (Empty);
}
"#;

fn repositories() -> Catalog {
    struct Source;
    impl protox::file::FileResolver for Source {
        fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
            match name {
                "repositories.proto" => protox::file::File::from_source(name, REPOSITORIES),
                _ => Err(protox::Error::file_not_found(name)),
            }
        }
    }
    let mut compiler = protox::Compiler::with_file_resolver(Source);
    compiler.include_source_info(true);
    compiler.open_file("repositories.proto").unwrap();
    let config =
        PluginConfig::parse(br#"{"services": {"estate.v1.Repositories": {"cluster": "c", "streaming": true}}}"#)
            .unwrap();
    Catalog::build(&config, &compiler.descriptor_pool(), false).unwrap()
}

#[test]
fn a_message_most_tools_carry_says_nothing_of_any() {
    let catalog = repositories();
    let search = ToolSearch::build(&catalog, &DiscoveryTools::default());
    let search_for = |query: &str| found(&search, &catalog, json!({"query": query, "limit": 20}));
    // Only every tool's `Repository` says these words: no tool is found by them.
    assert_eq!(search_for("the storage of alternate directories"), Vec::<String>::new());
    // A word it shares with one tool finds that tool alone, at full weight: "searched" is in
    // every tool's `Repository`, and would find every tool, each by a word that says nothing.
    assert_eq!(search_for("searching"), ["Repositories_SearchFilesByName"]);
    // A message few tools carry speaks for them.
    assert_eq!(
        search_for("page through the history"),
        ["Repositories_ListCommits", "Repositories_ListTags"]
    );
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

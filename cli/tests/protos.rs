//! The `.proto` route: Google's common protos built in, a user's copy on `-I` first, and errors
//! that point at the file, line and column, with what to do.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{scratch, switchblade, switchblade_in, write};
use serde_json::Value;

/// A service that imports what every `grpc_json_transcoder` proto imports, and takes a
/// `google.type.Money`.
const SHOP: &str = r#"syntax = "proto3";
package acme.shop.v1;

import "google/api/annotations.proto";
import "google/type/money.proto";

service Shop {
  // Buys one item.
  rpc Buy(BuyRequest) returns (BuyReply) {
    option (google.api.http) = {post: "/v1/buy" body: "*"};
  }
}

message BuyRequest {
  string sku = 1;
  google.type.Money price = 2;
}
message BuyReply { string order_id = 1; }
"#;

fn tools(dir: &std::path::Path, config: &str) -> Value {
    let path = dir.join("plugin.json");
    std::fs::write(&path, config).unwrap();
    serde_json::from_str(&switchblade(&["tools", path.to_str().unwrap()]).ok()).unwrap()
}

#[test]
fn googleapis_imports_need_no_include_path() {
    let dir = scratch("googleapis");
    write(&dir, &[("acme/shop/v1/shop.proto", SHOP)]);
    let config = switchblade_in(
        &dir,
        &[
            "config",
            "acme/shop/v1/shop.proto",
            "--service",
            "acme.shop.v1.Shop=shop",
        ],
        "",
    )
    .ok();
    let listed = tools(&dir, &config);
    let buy = &listed["tools"][0];
    assert_eq!(buy["name"], "Shop_Buy");
    assert_eq!(buy["description"], "Buys one item.");
    // google.type.Money's own comments describe its fields.
    let price = &buy["inputSchema"]["properties"]["price"];
    assert_eq!(
        price["description"],
        "Represents an amount of money with its currency type."
    );
    assert_eq!(
        price["properties"]["currency_code"]["description"],
        "The three-letter currency code defined in ISO 4217."
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_copy_on_an_include_path_wins_over_the_built_in_one() {
    let dir = scratch("own-money");
    let own_money = "syntax = \"proto3\";\npackage google.type;\n// Ours.\nmessage Money { string amount = 1; }\n";
    write(
        &dir,
        &[
            ("acme/shop/v1/shop.proto", SHOP),
            ("google/type/money.proto", own_money),
        ],
    );
    let config = switchblade_in(
        &dir,
        &[
            "config",
            "acme/shop/v1/shop.proto",
            "--service",
            "acme.shop.v1.Shop=shop",
        ],
        "",
    )
    .ok();
    let price = tools(&dir, &config)["tools"][0]["inputSchema"]["properties"]["price"].clone();
    assert_eq!(price["description"], "Ours.");
    assert_eq!(price["properties"]["amount"]["type"], "string");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_descriptor_set_without_its_googleapis_imports_has_them_filled_in() {
    let dir = scratch("set-googleapis");
    write(&dir, &[("acme/shop/v1/shop.proto", SHOP)]);
    // As `buf build --exclude-imports` writes it: the shop alone.
    let googleapis = common::repo().join("third_party/googleapis");
    let mut compiler = protox::Compiler::new([dir.clone(), googleapis]).unwrap();
    compiler.include_source_info(true).include_imports(false);
    compiler.open_files(["acme/shop/v1/shop.proto"]).unwrap();
    let set = dir.join("shop.binpb");
    std::fs::write(&set, compiler.encode_file_descriptor_set()).unwrap();
    let from_set = switchblade(&[
        "config",
        "--descriptor-set",
        set.to_str().unwrap(),
        "--service",
        "acme.shop.v1.Shop=shop",
    ])
    .ok();
    let from_protos = switchblade_in(
        &dir,
        &[
            "config",
            "acme/shop/v1/shop.proto",
            "--service",
            "acme.shop.v1.Shop=shop",
        ],
        "",
    )
    .ok();
    assert_eq!(tools(&dir, &from_set), tools(&dir, &from_protos));
    std::fs::remove_dir_all(dir).unwrap();
}

/// The error `switchblade config -I . FILE` ends with, for `source` in `acme/shop/v1/shop.proto`.
fn compile_error(name: &str, source: &str) -> String {
    let dir = scratch(name);
    write(&dir, &[("acme/shop/v1/shop.proto", source)]);
    let error = switchblade_in(
        &dir,
        &[
            "config",
            "-I",
            ".",
            "acme/shop/v1/shop.proto",
            "--service",
            "acme.shop.v1.Shop=shop",
        ],
        "",
    )
    .error();
    std::fs::remove_dir_all(dir).unwrap();
    error
}

#[test]
fn a_syntax_error_points_at_the_line_and_column() {
    let source = "syntax = \"proto3\";\npackage acme.shop.v1;\n\nmessage BuyRequest {\n  string sku = 1\n}\n";
    assert_eq!(
        compile_error("syntax", source),
        "acme/shop/v1/shop.proto:6:1: expected ';' or '[', but found '}'\n  |\n6 | }\n  | ^"
    );
    // Tabs stay tabs under the line, so the caret lines up.
    let tabbed = "syntax = \"proto3\";\npackage acme.shop.v1;\nmessage BuyRequest {\n\tstring sku = 1 }\n";
    assert_eq!(
        compile_error("tabs", tabbed),
        "acme/shop/v1/shop.proto:4:17: expected ';' or '[', but found '}'\n  |\n4 | \tstring sku = 1 }\n  | \t               ^"
    );
}

#[test]
fn an_unknown_type_is_underlined() {
    let source = "syntax = \"proto3\";\npackage acme.shop.v1;\nservice Shop {\n  rpc Buy(BuyRequest) returns (Reply);\n}\nmessage BuyRequest {}\n";
    assert_eq!(
        compile_error("unknown-type", source),
        "acme/shop/v1/shop.proto:4:32: name 'Reply' is not defined\n  |\n4 |   rpc Buy(BuyRequest) returns (Reply);\n  |                                ^^^^^"
    );
}

#[test]
fn a_missing_import_names_the_importer_the_places_searched_and_what_to_do() {
    let source = "syntax = \"proto3\";\npackage acme.shop.v1;\nimport \"acme/common/v1/money.proto\";\n";
    assert_eq!(
        compile_error("missing-import", source),
        "acme/shop/v1/shop.proto:3:1: import 'acme/common/v1/money.proto' not found\n  |\n3 | import \"acme/common/v1/money.proto\";\n  | ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n  searched: acme/common/v1/money.proto, the built-in files (google/protobuf/*, google/api/*, google/rpc/*, google/type/*, google/longrunning/*, buf/validate/validate.proto)\n  help: pass -I DIR with the directory DIR where DIR/acme/common/v1/money.proto is (the directory the import is relative to)"
    );
    let google = "syntax = \"proto3\";\npackage acme.shop.v1;\nimport \"google/cloud/location/locations.proto\";\n";
    assert!(compile_error("missing-google", google).ends_with(
        "  help: google/cloud/location/locations.proto is not one of the built-in Google protos; pass -I with the \
         directory of a googleapis checkout that has it"
    ));
}

#[test]
fn include_paths_and_files_that_are_not_there_are_refused() {
    let args = |extra: &[&str]| {
        let mut args = vec!["config", "--service", "a.B=c"];
        args.extend_from_slice(extra);
        switchblade(&args).error()
    };
    assert_eq!(args(&["-I", "protos", "x.proto"]), "-I protos: no such directory");
    assert_eq!(args(&["-I", "README.md", "x.proto"]), "-I README.md: not a directory");
    assert_eq!(
        args(&["-I", "proto", "-I", "test-harness/proto", "acme/v1/nope.proto"]),
        "acme/v1/nope.proto: no such file (searched proto/acme/v1/nope.proto, test-harness/proto/acme/v1/nope.proto); \
         name the .proto files relative to an -I directory"
    );
    assert_eq!(
        args(&["-I", "test-harness", "proto/demo/users/v1/users.proto"]),
        "proto/demo/users/v1/users.proto: the file is in none of the include directories (test-harness); pass -I \
         with the directory that its imports are relative to, and name the file relative to it"
    );
}

#[test]
fn a_set_without_comments_is_pointed_out() {
    let dir = scratch("no-comments");
    let mut compiler = protox::Compiler::new([common::repo().join("proto")]).unwrap();
    compiler.include_source_info(false).include_imports(true);
    compiler.open_files(["demo/users/v1/users.proto"]).unwrap();
    let set = dir.join("users.binpb");
    std::fs::write(&set, compiler.encode_file_descriptor_set()).unwrap();
    let run = switchblade(&[
        "config",
        "--descriptor-set",
        set.to_str().unwrap(),
        "--service",
        "demo.users.v1.UserService=users",
        "--streaming",
    ]);
    assert_eq!(run.code, 0);
    assert_eq!(
        run.stderr,
        "switchblade: the descriptor set has no comments, so the tools have no descriptions; build it with them \
         (`buf build` keeps them; `protoc --include_imports --include_source_info --descriptor_set_out=set.binpb -I \
         DIR FILE.proto`)\n"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

//! Generates the demo services' tonic code from `../proto`, compiled by protox (no protoc).

use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto");
    println!("cargo:rerun-if-changed={}", proto_root.display());
    let files = ["demo/catalog/v1/catalog.proto", "demo/users/v1/users.proto"];
    let descriptors = protox::compile(files, [&proto_root])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}

//! Generates the demo services' tonic code from `../proto` (embedded in the filter) and
//! `proto/` (a "user" service the filter does not embed), compiled by protox (no protoc).

use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let includes = [manifest.join("../proto"), manifest.join("proto")];
    for include in &includes {
        println!("cargo:rerun-if-changed={}", include.display());
    }
    let files = [
        "demo/catalog/v1/catalog.proto",
        "demo/users/v1/users.proto",
        "acme/inventory/v1/inventory.proto",
        "test/kitchensink/v1/kitchen_sink.proto",
    ];
    let descriptors = protox::compile(files, &includes)?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}

//! Generates the demo services' tonic code from `../proto` (embedded in the filter) and
//! `proto/` (a "user" service the filter does not embed), compiled by protox (no protoc), and
//! writes their descriptor set (with imports and source info) for the upstream's gRPC server
//! reflection. Also the rate limit service the test peer `ratelimit-peer` serves, apart: it is
//! not one of the demo upstream's services.

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
        "test/rules/v1/rules.proto",
        "demo/exports/v1/exports.proto",
    ];
    let mut compiler = protox::Compiler::new(includes)?;
    compiler
        .include_source_info(true)
        .include_imports(true)
        .open_files(files)?;
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    // Encoded by protox itself, which keeps custom options (decoding into prost_types would not).
    std::fs::write(
        out_dir.join("demo_descriptors.binpb"),
        compiler.encode_file_descriptor_set(),
    )?;
    let descriptors = compiler.file_descriptor_set();
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    let mut rate_limit = protox::Compiler::new([manifest.join("proto")])?;
    rate_limit
        .include_imports(true)
        .open_files(["envoy/service/ratelimit/v3/rls.proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(rate_limit.file_descriptor_set())?;
    Ok(())
}

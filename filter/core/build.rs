//! Compiles every `.proto` under `../proto` into one descriptor set that the filter embeds,
//! so the released `.wasm` serves the demo services with no extra configuration. With the
//! `googleapis` feature, also compiles Google's common protos (`third_party/googleapis`) into a
//! second set of their own, which the filter does not embed unless it enables the feature.

use std::path::{Path, PathBuf};
use std::{env, fs, io};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(out_dir.join("switchblade_descriptors.bin"), compile_tree(&proto_root)?)?;

    if env::var_os("CARGO_FEATURE_GOOGLEAPIS").is_some() {
        let googleapis = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../third_party/googleapis");
        fs::write(out_dir.join("googleapis_descriptors.bin"), compile_tree(&googleapis)?)?;
    }
    Ok(())
}

/// Every `.proto` under `root`, compiled with their comments and imports.
fn compile_tree(root: &Path) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    collect_protos(root, &mut files)?;
    files.sort();
    let relative: Vec<PathBuf> = files
        .iter()
        .map(|file| file.strip_prefix(root).map(Path::to_path_buf))
        .collect::<Result<_, _>>()?;
    let mut compiler = protox::Compiler::new([root])?;
    compiler.include_source_info(true).include_imports(true);
    compiler.open_files(relative)?;
    Ok(compiler.encode_file_descriptor_set())
}

fn collect_protos(dir: &Path, files: &mut Vec<PathBuf>) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            println!("cargo:rerun-if-changed={}", path.display());
            collect_protos(&path, files)?;
        } else if path.extension().is_some_and(|ext| ext == "proto") {
            println!("cargo:rerun-if-changed={}", path.display());
            files.push(path);
        }
    }
    Ok(())
}

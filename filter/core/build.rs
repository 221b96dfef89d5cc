//! Compiles every `.proto` under `../proto` into one descriptor set that the filter embeds,
//! so the released `.wasm` serves the demo services with no extra configuration.

use std::path::{Path, PathBuf};
use std::{env, fs, io};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    println!("cargo:rerun-if-changed={}", proto_root.display());

    let mut files = Vec::new();
    collect_protos(&proto_root, &mut files)?;
    files.sort();
    let relative: Vec<PathBuf> = files
        .iter()
        .map(|file| file.strip_prefix(&proto_root).map(Path::to_path_buf))
        .collect::<Result<_, _>>()?;

    let mut compiler = protox::Compiler::new([&proto_root])?;
    compiler.include_source_info(true).include_imports(true);
    compiler.open_files(relative)?;

    let out = PathBuf::from(env::var("OUT_DIR")?).join("switchblade_descriptors.bin");
    fs::write(out, compiler.encode_file_descriptor_set())?;
    Ok(())
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

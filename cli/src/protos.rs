//! The `.proto` route of `switchblade config`: the files compiled with protox against the
//! include paths and then the built-in files, and its errors written as a compiler writes them
//! (`path:line:column: message`, the line, a caret), each missing import with the places
//! searched and what to do.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use miette::Diagnostic;
use protox::file::{ChainFileResolver, FileResolver, IncludeFileResolver};

use crate::descriptor_sets::{self, built_in_description, BuiltInFiles};

/// The encoded descriptor set of `protos` and everything they import, with only the comments
/// of its source info.
pub fn compile(protos: &[PathBuf], includes: &[PathBuf]) -> Result<Vec<u8>, String> {
    check_includes(includes)?;
    for proto in protos {
        check_found(proto, includes)?;
    }
    let missing = Rc::new(RefCell::new(Vec::new()));
    let mut chain = ChainFileResolver::new();
    for include in includes {
        chain.add(IncludeFileResolver::new(include.clone()));
    }
    chain.add(BuiltInFiles);
    let resolver = RecordingMisses {
        inner: chain,
        missing: Rc::clone(&missing),
    };
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler.include_source_info(true).include_imports(true);
    if let Err(error) = compiler.open_files(protos) {
        let last_missing = missing.borrow().last().cloned();
        return Err(explain(&error, includes, last_missing.as_deref()));
    }
    // Encoded by protox itself, which keeps custom options (its decoded set would not).
    let files = descriptor_sets::files_of_set(&compiler.encode_file_descriptor_set())?;
    descriptor_sets::encode(files)
}

/// An include path that does not exist would only turn into a confusing "not found" later.
fn check_includes(includes: &[PathBuf]) -> Result<(), String> {
    for include in includes {
        match std::fs::metadata(include) {
            Ok(metadata) if metadata.is_dir() => {}
            Ok(_) => return Err(format!("-I {}: not a directory", include.display())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(format!("-I {}: no such directory", include.display()))
            }
            Err(error) => return Err(format!("-I {}: {error}", include.display())),
        }
    }
    Ok(())
}

/// A file to compile is named relative to an include path (`acme/v1/x.proto`), or by a path
/// inside one (`protos/acme/v1/x.proto` with `-I protos`).
fn check_found(proto: &Path, includes: &[PathBuf]) -> Result<(), String> {
    let inside_an_include = includes.iter().any(|include| proto.starts_with(include));
    if proto.is_file() && inside_an_include {
        return Ok(());
    }
    // (Joined to an absolute path, an include would be the path itself.)
    if proto.is_relative() && includes.iter().any(|include| include.join(proto).is_file()) {
        return Ok(());
    }
    let searched: Vec<String> = includes
        .iter()
        .map(|include| display_path(&include.join(proto)))
        .collect();
    if proto.is_file() {
        return Err(format!(
            "{}: the file is in none of the include directories ({}); pass -I with the directory that \
             its imports are relative to, and name the file relative to it",
            proto.display(),
            list(includes.iter().map(|include| include.display().to_string()))
        ));
    }
    Err(format!(
        "{}: no such file (searched {}); name the .proto files relative to an -I directory",
        proto.display(),
        list(searched)
    ))
}

/// The include paths and built-in files, remembering each name that none of them has: the
/// last one is the import that a "not found" error is about.
struct RecordingMisses {
    inner: ChainFileResolver,
    missing: Rc<RefCell<Vec<String>>>,
}

impl FileResolver for RecordingMisses {
    fn resolve_path(&self, path: &Path) -> Option<String> {
        self.inner.resolve_path(path)
    }

    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        let opened = self.inner.open_file(name);
        if opened.as_ref().is_err_and(protox::Error::is_file_not_found) {
            self.missing.borrow_mut().push(name.to_owned());
        }
        opened
    }
}

/// A protox error for people: where (the file's path as found on the include paths), the
/// line with a caret, and for a missing import, where it was looked for and what to do.
fn explain(error: &protox::Error, includes: &[PathBuf], missing: Option<&str>) -> String {
    let source = error.file().and_then(|name| find_source(name, includes));
    let mut text = match &source {
        Some(source) => source.diagnostic(error, &error.to_string()),
        None => match error.file() {
            Some(name) => format!("{name}: {error}"),
            None => error.to_string(),
        },
    };
    if let (Some(source), Some(related)) = (&source, error.related()) {
        for other in related {
            text.push('\n');
            text.push_str(&source.diagnostic(other, &other.to_string()));
        }
    }
    if let Some(help) = error.help() {
        text.push_str(&format!("\n  help: {help}"));
    }
    if let (true, Some(name)) = (error.is_file_not_found(), missing) {
        text.push_str(&missing_import_advice(name, includes));
    }
    text
}

fn missing_import_advice(name: &str, includes: &[PathBuf]) -> String {
    let searched = includes
        .iter()
        .map(|include| display_path(&include.join(name)))
        .chain([format!("the built-in files ({})", built_in_description())]);
    let what_to_do = if name.starts_with("google/") {
        format!(
            "{name} is not one of the built-in Google protos; pass -I with the directory of a googleapis \
             checkout that has it"
        )
    } else {
        format!("pass -I DIR with the directory DIR where DIR/{name} is (the directory the import is relative to)")
    };
    format!("\n  searched: {}\n  help: {what_to_do}", list(searched))
}

/// A file that failed, as read from the include path that has it.
struct Source {
    path: String,
    text: String,
}

fn find_source(name: &str, includes: &[PathBuf]) -> Option<Source> {
    includes.iter().find_map(|include| {
        let path = include.join(name);
        let text = std::fs::read_to_string(&path).ok()?;
        Some(Source {
            path: display_path(&path),
            text,
        })
    })
}

impl Source {
    /// `path:line:column: message`, then the line and a caret under the span, as compilers
    /// write errors; without a span, `path: message`.
    fn diagnostic(&self, diagnostic: &dyn Diagnostic, message: &str) -> String {
        let span = diagnostic.labels().and_then(|mut labels| labels.next());
        let Some(span) = span else {
            return format!("{}: {message}", self.path);
        };
        let offset = span.offset().min(self.text.len());
        let Some(before) = self.text.get(..offset) else {
            return format!("{}: {message}", self.path);
        };
        let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
        let line_number = before.matches('\n').count() + 1;
        let line = self.text[line_start..].lines().next().unwrap_or_default();
        let lead = &self.text[line_start..offset];
        let column = lead.chars().count() + 1;
        // Tabs stay tabs under the line, so that the caret lines up however they are shown.
        let pad: String = lead.chars().map(|c| if c == '\t' { '\t' } else { ' ' }).collect();
        let rest_of_line = line.get(lead.len()..).unwrap_or_default();
        let width = self
            .text
            .get(offset..offset + span.len())
            .map_or(1, |spanned| spanned.chars().take_while(|c| *c != '\n').count())
            .clamp(1, rest_of_line.chars().count().max(1));
        let gutter = " ".repeat(line_number.to_string().len());
        format!(
            "{}:{line_number}:{column}: {message}\n{gutter} |\n{line_number} | {line}\n{gutter} | {pad}{}",
            self.path,
            "^".repeat(width)
        )
    }
}

/// A path as a person typed it: `protos/x.proto`, not `./protos/x.proto`.
fn display_path(path: &Path) -> String {
    path.strip_prefix(".").unwrap_or(path).display().to_string()
}

fn list(items: impl IntoIterator<Item = String>) -> String {
    items.into_iter().collect::<Vec<_>>().join(", ")
}

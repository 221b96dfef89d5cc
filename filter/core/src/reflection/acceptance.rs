//! What a server's reflection is trusted with: the files of the services read through it, and
//! nothing else. An answer may hold any files under any names; only the files that answer a
//! question, and the files they import, are read ([`answering_files`]), and none of them takes
//! the place of a file the configuration or the filter supplies ([`Protected`]).

use std::collections::{HashMap, HashSet};

use prost_reflect::{DescriptorPool, FileDescriptor};
use prost_types::FileDescriptorProto;

use super::is_well_known;
use crate::config::PluginConfig;

/// A question put to a server's reflection, against which its answer is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked<'a> {
    /// `file_by_filename`: the file of this name.
    File(&'a str),
    /// `file_containing_symbol`: the file declaring this service (or message or enum) at its
    /// top level.
    Symbol(&'a str),
}

/// The files of one answer to `asked` that are read, by index in the answer: the first file
/// answering each question (the file of the asked name, or the file declaring the asked
/// symbol), and the files those reach through their imports within the answer. Every other
/// file, and a second file of a name already there, is left out: a server vouches for what it
/// was asked about, not for whatever else it sends. A file for which `kept_local` is true is
/// reached but its imports are not followed, since its local copy is used instead. An error
/// names a question the answer does not answer.
pub fn answering_files(
    asked: &[Asked<'_>],
    files: &[&FileDescriptorProto],
    kept_local: impl Fn(&str) -> bool,
) -> Result<Vec<usize>, String> {
    let mut first_of_name: HashMap<&str, usize> = HashMap::new();
    for (index, file) in files.iter().enumerate() {
        first_of_name.entry(file.name()).or_insert(index);
    }
    let is_first = |index: usize, file: &FileDescriptorProto| first_of_name.get(file.name()) == Some(&index);
    let mut to_visit = Vec::with_capacity(asked.len());
    for question in asked {
        let answer = match question {
            Asked::File(name) => first_of_name.get(name).copied(),
            Asked::Symbol(symbol) => files
                .iter()
                .enumerate()
                .position(|(index, file)| is_first(index, file) && declares(file, symbol)),
        };
        match (answer, question) {
            (Some(index), _) => to_visit.push(index),
            (None, Asked::File(name)) => {
                return Err(format!("the answer to a request for `{name}` does not hold that file"))
            }
            (None, Asked::Symbol(symbol)) => {
                return Err(format!(
                    "the answer to a request for {symbol} holds no file that declares it"
                ))
            }
        }
    }
    let mut reached = vec![false; files.len()];
    while let Some(index) = to_visit.pop() {
        let (Some(seen), Some(file)) = (reached.get_mut(index), files.get(index)) else {
            continue;
        };
        if std::mem::replace(seen, true) || kept_local(file.name()) {
            continue;
        }
        to_visit.extend(
            file.dependency
                .iter()
                .filter_map(|import| first_of_name.get(import.as_str()).copied()),
        );
    }
    Ok(reached
        .iter()
        .enumerate()
        .filter_map(|(index, reached)| reached.then_some(index))
        .collect())
}

/// Whether `file` declares `symbol` (a package-qualified name) at its top level.
fn declares(file: &FileDescriptorProto, symbol: &str) -> bool {
    let local = match file.package() {
        "" => Some(symbol),
        package => symbol.strip_prefix(package).and_then(|rest| rest.strip_prefix('.')),
    };
    let Some(local) = local else {
        return false;
    };
    file.service.iter().any(|service| service.name() == local)
        || file.message_type.iter().any(|message| message.name() == local)
        || file.enum_type.iter().any(|declared| declared.name() == local)
}

/// The file names a reflected file may never take: their local copies are always used.
///
/// Reflection supplies the files of the services read through it; the configuration (its
/// descriptor set, or the embedded one) and the filter supply everything else. Protected are:
/// - the well-known files the filter has a copy of (`google/protobuf/*`,
///   `buf/validate/validate.proto`: [`is_well_known`]);
/// - every configured file that declares a service served from the configuration (not read
///   through reflection);
/// - every configured file that no file declaring a reflected service reaches through its
///   imports (whatever else the configuration supplied);
/// - and every configured file that any of those imports, directly or not.
///
/// What is left of the configured files, a reflected service's own files and the files only
/// they import, is not used once reflection answers: the server is the source of its own
/// services, and supplies them whole.
#[derive(Debug, Default)]
pub(super) struct Protected {
    names: HashSet<String>,
}

impl Protected {
    pub(super) fn of(config: &PluginConfig, configured: &DescriptorPool, embedded: Option<&DescriptorPool>) -> Self {
        let reflected: HashSet<&str> = config.reflected_services().map(|(service, _)| service).collect();
        let served_from_configuration: HashSet<&str> = config
            .services
            .iter()
            .filter(|(_, service)| !service.from_reflection)
            .map(|(name, _)| name)
            .collect();
        let declares_one_of = |file: &FileDescriptor, services: &HashSet<&str>| {
            file.services().any(|service| services.contains(service.full_name()))
        };
        let reached_from_reflected =
            import_closure(configured.files().filter(|file| declares_one_of(file, &reflected)));
        let roots = configured.files().filter(|file| {
            is_well_known(file.name())
                || declares_one_of(file, &served_from_configuration)
                || !reached_from_reflected.contains(file.name())
        });
        let mut names = import_closure(roots);
        let built_in_well_known = embedded
            .into_iter()
            .flat_map(DescriptorPool::files)
            .filter(|file| is_well_known(file.name()));
        names.extend(import_closure(built_in_well_known));
        Protected { names }
    }

    pub(super) fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }
}

/// The names of `files` and of every file they import, directly or not.
fn import_closure(files: impl Iterator<Item = FileDescriptor>) -> HashSet<String> {
    let mut names = HashSet::new();
    let mut to_visit: Vec<FileDescriptor> = files.collect();
    while let Some(file) = to_visit.pop() {
        if names.insert(file.name().to_owned()) {
            to_visit.extend(file.dependencies());
        }
    }
    names
}

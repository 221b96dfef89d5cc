//! Live discovery: the descriptors of services with `from_reflection`, read from their own gRPC
//! server reflection through their clusters, when the filter is configured and then every
//! `reflection.interval_ms`, and a new [`Server`] when the API changed.
//!
//! Host-free like the rest of the core: [`Discovery::start`] says which calls to make (one per
//! cluster and round, every question framed in one request body, since the reflection stream
//! answers each question in order); the host makes them and hands each answer to
//! [`Discovery::file`], which asks for the next round (imports not yet read) or says how the
//! refresh ended. A refresh that fails, or whose answer does not build, keeps the last good
//! server: the host swaps servers only on [`Refreshed::Changed`].
//!
//! A server is trusted with its own services only (see [`acceptance`]): of each answer, the
//! files asked for and their imports are read, and no reflected file replaces one that the
//! configuration or the filter supplies, or that another cluster gave first.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use prost_reflect::DescriptorPool;

pub mod acceptance;
mod protocol;
mod refreshed;
mod refresher;
mod shared;

use acceptance::{answering_files, Protected};
use protocol::{read_answer, Question, ReflectionAnswer, Version};
pub use protocol::{ReflectionCall, ReflectionCallEnd};
pub use refreshed::{Declined, Refreshed, Step};
pub use refresher::Refresher;
pub use shared::SharedRefresher;

use crate::config::PluginConfig;
use crate::descriptors::{add_set, embedded_pool, encode_set, same_but_for_source_info};
use crate::fingerprint::fingerprint;
use crate::server::Server;

/// Rounds of imports one refresh may follow (a file, its imports, theirs, …).
const MAX_ROUNDS: usize = 16;
/// How soon a refresh is tried again after a failure, at most (the interval, if shorter).
const RETRY_AFTER: Duration = Duration::from_secs(5);
/// The largest reflection answer a host reads: a thousand-method API's descriptors are a few
/// hundred kilobytes.
/// How often a host looks whether a refresh is due: the precision of `reflection.interval_ms`.
pub const REFRESH_TICK: Duration = Duration::from_millis(500);

pub const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// Files the filter has its own copies of, which it uses whatever a server's reflection holds.
const WELL_KNOWN_PREFIX: &str = "google/protobuf/";
/// Switchblade's declaration of the buf.validate options.
const VALIDATE_PROTO: &str = "buf/validate/validate.proto";

/// A file the filter keeps its own copy of (the configuration's, or the embedded one): where
/// it has one, no server's copy is used.
fn is_well_known(name: &str) -> bool {
    name.starts_with(WELL_KNOWN_PREFIX) || name == VALIDATE_PROTO
}

/// One cluster and the services read from it.
#[derive(Debug)]
struct Target {
    cluster: String,
    services: Vec<String>,
    /// The version the cluster answered last (v1 first; v1alpha once v1 is unimplemented).
    version: Version,
}

/// One refresh in progress.
#[derive(Debug, Default)]
struct Round {
    /// Call id → the target asked and the questions.
    out: HashMap<u64, (usize, Vec<Question>)>,
    /// Files read so far, by name.
    files: BTreeMap<String, ReflectedFile>,
    /// File names asked for, so that none is asked twice.
    asked: HashSet<String>,
    problems: Vec<String>,
    rounds: usize,
    declined: Declined,
}

/// One file a server's reflection gave.
#[derive(Debug)]
struct ReflectedFile {
    /// As the server encoded it (custom options kept), with only the comments of its source info.
    bytes: Vec<u8>,
    imports: Vec<String>,
    /// The target that gave it, which is asked for its imports.
    target: usize,
}

/// The live discovery of one configuration's reflected services.
#[derive(Debug)]
pub struct Discovery {
    config: PluginConfig,
    /// The configuration's own descriptors (its set, or the embedded one): the files of the
    /// services that are not reflected, and the well-known files.
    configured: DescriptorPool,
    /// The embedded set, for the well-known files the configuration does not have.
    embedded: Option<DescriptorPool>,
    /// The names a reflected file may not take.
    protected: Protected,
    targets: Vec<Target>,
    timeout: Duration,
    interval: Duration,
    round: Option<Round>,
    /// When (on the host's clock) the running round started.
    round_started_at: Duration,
    next_id: u64,
    /// Digest of the last good refresh's files; `None` until one succeeds.
    last_good: Option<u64>,
    /// When (on the host's clock) the next refresh is due.
    due_at: Duration,
}

impl Discovery {
    /// The discovery a configuration needs: `None` when no service is reflected.
    pub fn new(config: &PluginConfig, configured: &DescriptorPool) -> Option<Self> {
        let mut targets: Vec<Target> = Vec::new();
        for (service, cluster) in config.reflected_services() {
            match targets.iter_mut().find(|target| target.cluster == cluster) {
                Some(target) => target.services.push(service.to_owned()),
                None => targets.push(Target {
                    cluster: cluster.to_owned(),
                    services: vec![service.to_owned()],
                    version: Version::V1,
                }),
            }
        }
        if targets.is_empty() {
            return None;
        }
        let services: Vec<&str> = config.reflected_services().map(|(service, _)| service).collect();
        log::info!(
            "reading {} through gRPC server reflection; their tools are not known until it answers",
            services.join(", ")
        );
        // Without a descriptor set the configured pool is the embedded one already.
        let embedded = config.descriptor_set.as_ref().and_then(|_| embedded_pool().ok());
        Some(Discovery {
            config: config.clone(),
            configured: configured.clone(),
            protected: Protected::of(config, configured, embedded.as_ref()),
            embedded,
            targets,
            timeout: Duration::from_millis(config.reflection.timeout_ms),
            interval: Duration::from_millis(config.reflection.interval_ms),
            round: None,
            round_started_at: Duration::ZERO,
            next_id: 1,
            last_good: None,
            due_at: Duration::ZERO,
        })
    }

    /// Whether a refresh should start at `now`: it is due and none is running (a refresh whose
    /// answers never came is given up after twice the call timeout and a tick's slack).
    pub fn is_due(&self, now: Duration) -> bool {
        now >= self.due_at && (self.round.is_none() || self.is_stale(now))
    }

    fn is_stale(&self, now: Duration) -> bool {
        now.saturating_sub(self.round_started_at) > self.timeout * 2 + RETRY_AFTER
    }

    /// Starts a refresh: the first round's calls, one per cluster. Nothing if one is running.
    pub fn start(&mut self, now: Duration) -> Vec<ReflectionCall> {
        if self.round.is_some() && !self.is_stale(now) {
            return Vec::new();
        }
        if self.round.take().is_some() {
            log::warn!("gRPC server reflection: a refresh got no answer in time; starting another");
        }
        self.round_started_at = now;
        self.due_at = now + self.interval;
        let mut round = Round::default();
        let asks: Vec<(usize, Vec<Question>)> = self
            .targets
            .iter()
            .enumerate()
            .map(|(index, target)| {
                let questions = target
                    .services
                    .iter()
                    .map(|service| Question::FileContainingSymbol(service.clone()))
                    .collect();
                (index, questions)
            })
            .collect();
        let calls = asks
            .into_iter()
            .map(|(target, questions)| self.call(&mut round, target, questions))
            .collect();
        self.round = Some(round);
        calls
    }

    fn call(&mut self, round: &mut Round, target: usize, questions: Vec<Question>) -> ReflectionCall {
        let id = self.next_id;
        self.next_id += 1;
        let (cluster, version) = self.targets.get(target).map_or((String::new(), Version::V1), |target| {
            (target.cluster.clone(), target.version)
        });
        let call = ReflectionCall::new(id, cluster, version, &questions, self.timeout);
        round.out.insert(id, (target, questions));
        call
    }

    /// Files how call `id` ended, at `now` on the host's clock.
    pub fn file(&mut self, id: u64, answer: ReflectionCallEnd<'_>, now: Duration) -> Step {
        let Some(mut round) = self.round.take() else {
            return Step::Wait;
        };
        let Some((target, questions)) = round.out.remove(&id) else {
            self.round = Some(round);
            return Step::Wait;
        };
        let mut calls = Vec::new();
        match self.read(answer, target, &questions, &mut round) {
            Ok(()) => {}
            Err(Retry::V1Alpha) => calls.push(self.call(&mut round, target, questions)),
            Err(Retry::No(problem)) => {
                let problem = format!("cluster {}: {problem}", self.cluster(target));
                round.problems.push(problem);
            }
        }
        if round.out.is_empty() && calls.is_empty() && round.problems.is_empty() {
            calls = self.next_round(&mut round);
        }
        if !calls.is_empty() {
            self.round = Some(round);
            return Step::Call(calls);
        }
        if !round.out.is_empty() {
            self.round = Some(round);
            return Step::Wait;
        }
        let refreshed = self.finish(round);
        if let Refreshed::Failed(_) = refreshed {
            let retry = if self.last_good.is_none() {
                RETRY_AFTER.min(self.interval)
            } else {
                self.interval
            };
            self.due_at = now + retry;
        }
        Step::Done(refreshed)
    }

    /// Reads one call's answer to `questions` into the round.
    fn read(
        &mut self,
        answer: ReflectionCallEnd<'_>,
        target: usize,
        questions: &[Question],
        round: &mut Round,
    ) -> Result<(), Retry> {
        match read_answer(answer).map_err(Retry::No)? {
            ReflectionAnswer::Unimplemented => {
                let Some(target) = self.targets.get_mut(target) else {
                    return Err(Retry::No("no such target".into()));
                };
                if target.version == Version::V1 {
                    target.version = Version::V1Alpha;
                    return Err(Retry::V1Alpha);
                }
                // Ask v1 first again next time: the server may have been upgraded.
                target.version = Version::V1;
                Err(Retry::No(
                    "the server does not offer gRPC server reflection (neither grpc.reflection.v1 nor v1alpha)".into(),
                ))
            }
            ReflectionAnswer::Files(files) => {
                let asked: Vec<_> = questions.iter().map(Question::asked).collect();
                let protos: Vec<_> = files.iter().map(|file| &file.proto).collect();
                let answering =
                    answering_files(&asked, &protos, |name| self.protected.contains(name)).map_err(Retry::No)?;
                round.declined.unasked += files.len() - answering.len();
                let mut answering = answering.into_iter().peekable();
                for (index, file) in files.into_iter().enumerate() {
                    if answering.next_if_eq(&index).is_none() {
                        continue;
                    }
                    let name = file.proto.name().to_owned();
                    round.asked.insert(name.clone());
                    match round.files.entry(name) {
                        Entry::Vacant(entry) => {
                            entry.insert(ReflectedFile {
                                bytes: file.bytes,
                                imports: file.proto.dependency,
                                target,
                            });
                        }
                        // A file already read stays, from whichever cluster gave it first.
                        Entry::Occupied(kept) if !same_but_for_source_info(&kept.get().bytes, &file.bytes) => {
                            let whose = format!("cluster {}'s", self.cluster(kept.get().target));
                            let kept = replacement(&whose, kept.key(), self.cluster(target));
                            round.declined.replacements.push(kept);
                        }
                        Entry::Occupied(_) => {}
                    }
                }
                Ok(())
            }
        }
    }

    /// Calls for the imports no file read so far provides, to the cluster whose file needs them.
    fn next_round(&mut self, round: &mut Round) -> Vec<ReflectionCall> {
        let mut wanted: BTreeMap<usize, Vec<Question>> = BTreeMap::new();
        let mut missing_anywhere = Vec::new();
        // The imports of a protected file are not followed: its local copy is used.
        let followed = round.files.iter().filter(|(name, _)| !self.protected.contains(name));
        for (name, file) in followed {
            for import in &file.imports {
                if round.files.contains_key(import) || self.protected.contains(import) {
                    continue;
                }
                if round.asked.contains(import) {
                    missing_anywhere.push(format!("`{import}`, imported by `{name}`"));
                    continue;
                }
                let questions = wanted.entry(file.target).or_default();
                if !questions.contains(&Question::FileByFilename(import.clone())) {
                    questions.push(Question::FileByFilename(import.clone()));
                }
            }
        }
        if !missing_anywhere.is_empty() {
            round
                .problems
                .push(format!("the reflection does not have {}", missing_anywhere.join(", ")));
            return Vec::new();
        }
        if wanted.is_empty() {
            return Vec::new();
        }
        round.rounds += 1;
        if round.rounds > MAX_ROUNDS {
            round
                .problems
                .push(format!("imports nest deeper than {MAX_ROUNDS} files"));
            return Vec::new();
        }
        for questions in wanted.values() {
            for question in questions {
                if let Question::FileByFilename(name) = question {
                    round.asked.insert(name.clone());
                }
            }
        }
        wanted
            .into_iter()
            .map(|(target, questions)| self.call(round, target, questions))
            .collect()
    }

    fn cluster(&self, target: usize) -> &str {
        self.targets.get(target).map_or("", |target| target.cluster.as_str())
    }

    fn finish(&mut self, round: Round) -> Refreshed {
        if !round.problems.is_empty() {
            return Refreshed::Failed(round.problems.join("; "));
        }
        // The files in name order: the same API gives the same digest.
        let digest = fingerprint(round.files.values().map(|file| file.bytes.as_slice()));
        if self.last_good == Some(digest) {
            return Refreshed::Unchanged;
        }
        let mut declined = round.declined;
        let server = self
            .merged_pool(&round.files, &mut declined.replacements)
            .and_then(|pool| Server::build(&self.config, &pool, true).map_err(|error| error.0));
        match server {
            Ok(server) => {
                self.last_good = Some(digest);
                Refreshed::Changed {
                    server: Box::new(server),
                    declined,
                }
            }
            Err(problem) => {
                let kept = declined.replacements.iter().map(|kept| format!("; {kept}"));
                Refreshed::Failed(format!(
                    "the reflected descriptors do not make a catalog: {problem}{}",
                    kept.collect::<String>()
                ))
            }
        }
    }

    /// The reflected files whose names are not protected, and the protected local files (the
    /// configuration's, and the filter's well-known ones it lacks). A reflected file that
    /// differs from the protected one of its name is noted in `replacements`. Encoded, so that
    /// custom options stay.
    fn merged_pool(
        &self,
        reflected: &BTreeMap<String, ReflectedFile>,
        replacements: &mut Vec<String>,
    ) -> Result<DescriptorPool, String> {
        let well_known = self
            .embedded
            .iter()
            .flat_map(DescriptorPool::files)
            .filter(|file| is_well_known(file.name()));
        let mut seen = HashSet::new();
        let local: BTreeMap<String, (Vec<u8>, &str)> = self
            .configured
            .files()
            .map(|file| (file, self.configured_source()))
            .chain(well_known.map(|file| (file, "the filter's built-in")))
            .filter(|(file, _)| self.protected.contains(file.name()) && seen.insert(file.name().to_owned()))
            .map(|(file, whose)| (file.name().to_owned(), (file.encode_to_vec(), whose)))
            .collect();
        let mut files: Vec<&[u8]> = local.values().map(|(bytes, _)| bytes.as_slice()).collect();
        for (name, file) in reflected {
            match local.get(name) {
                None => files.push(&file.bytes),
                Some((kept, whose)) if !same_but_for_source_info(kept, &file.bytes) => {
                    replacements.push(replacement(whose, name, self.cluster(file.target)));
                }
                Some(_) => {}
            }
        }
        let mut pool = DescriptorPool::new();
        add_set(&mut pool, &encode_set(files))?;
        Ok(pool)
    }

    /// Whose the configured files are, in a note.
    fn configured_source(&self) -> &'static str {
        if self.config.descriptor_set.is_some() {
            "the configured"
        } else {
            "the filter's built-in"
        }
    }
}

/// A note on a reflected file left out for `whose` file of the same name.
fn replacement(whose: &str, name: &str, cluster: &str) -> String {
    format!("kept {whose} `{name}`, not cluster {cluster}'s different copy")
}

/// Why a call's answer is not read.
enum Retry {
    /// v1 is not there: ask v1alpha.
    V1Alpha,
    No(String),
}

#[cfg(test)]
mod tests;

//! Text as the search index and its queries see it: identifiers split where their words meet
//! (`DeleteRange`, `lease_id`, `HTTPServer`, `v3lock`), lowercase, without the words that say
//! nothing, and cut to their stems (Snowball's English stemmer), so that "deleting keys" meets
//! `DeleteRange`'s "delete" and `key`.

use rust_stemmers::{Algorithm, Stemmer};

use super::vocabulary::{KINDRED, SHORT_FORMS, STOP_WORDS};

/// The weight of a kindred word, against the word itself.
pub const KINDRED_WEIGHT: f32 = 0.7;

/// Splits and stems text.
pub struct Words {
    stemmer: Stemmer,
    /// The stems of each group of [`KINDRED`].
    groups: Vec<Box<[Box<str>]>>,
    /// Each stem of [`KINDRED`] and a group it is in, by stem: a word's groups are found by a
    /// binary search (a map of a few hundred stems would cost several times their bytes).
    memberships: Vec<(Box<str>, u16)>,
    /// [`SHORT_FORMS`], by short form.
    short_forms: Vec<(&'static str, &'static str)>,
}

impl std::fmt::Debug for Words {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Words")
    }
}

impl Default for Words {
    fn default() -> Self {
        let stemmer = Stemmer::create(Algorithm::English);
        let groups: Vec<Box<[Box<str>]>> = KINDRED
            .iter()
            .map(|group| group.iter().map(|word| stemmer.stem(word).into()).collect())
            .collect();
        let mut memberships: Vec<(Box<str>, u16)> = groups
            .iter()
            .zip(0_u16..)
            .flat_map(|(stems, number)| stems.iter().map(move |stem| (stem.clone(), number)))
            .collect();
        memberships.sort_unstable();
        memberships.dedup();
        let mut short_forms = SHORT_FORMS.to_vec();
        short_forms.sort_unstable();
        Words {
            stemmer,
            groups,
            memberships,
            short_forms,
        }
    }
}

impl Words {
    /// The stems of `text`, in order, stop words left out; a short form is followed by the
    /// words it stands for.
    pub fn stems(&self, text: &str) -> Vec<String> {
        let mut stems = Vec::new();
        for word in split(text) {
            if !STOP_WORDS.contains(&word.as_str()) {
                self.push_stems(&word, &mut stems);
            }
        }
        stems
    }

    /// Pushes the stem of one word that says something, and the stems of the words it stands
    /// for if it is a short form.
    fn push_stems(&self, word: &str, stems: &mut Vec<String>) {
        stems.push(self.stemmer.stem(word).into_owned());
        if let Ok(found) = self.short_forms.binary_search_by(|(short, _)| (*short).cmp(word)) {
            if let Some((_, long)) = self.short_forms.get(found) {
                stems.extend(long.split(' ').map(|long| self.stemmer.stem(long).into_owned()));
            }
        }
    }

    /// The stems a query looks for, each once, with their weights: the words of its job (not
    /// its values, see [`job_words`]) at 1, and their kindred at [`KINDRED_WEIGHT`]. A stop
    /// word in a group looks for its kindred only ("which namespaces" asks for a list).
    pub fn query(&self, text: &str) -> Vec<(String, f32)> {
        let mut weights: Vec<(String, f32)> = Vec::new();
        let mut raise = |stem: &str, weight: f32| match weights.iter_mut().find(|(known, _)| known == stem) {
            Some((_, known)) => *known = known.max(weight),
            None => weights.push((stem.to_owned(), weight)),
        };
        let mut stems = Vec::new();
        for word in job_words(text) {
            stems.clear();
            let stop_word = STOP_WORDS.contains(&word.as_str());
            if stop_word {
                stems.push(self.stemmer.stem(&word).into_owned());
            } else {
                self.push_stems(&word, &mut stems);
            }
            for stem in &stems {
                if !stop_word {
                    raise(stem, 1.0);
                }
                for kindred in self.kindred(stem) {
                    raise(kindred, KINDRED_WEIGHT);
                }
            }
        }
        weights
    }

    /// The other stems of the groups `stem` is in (a stem in two groups may come twice).
    pub fn kindred<'a>(&'a self, stem: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let first = self.memberships.partition_point(|(known, _)| known.as_ref() < stem);
        self.memberships
            .get(first..)
            .unwrap_or_default()
            .iter()
            .take_while(move |(known, _)| known.as_ref() == stem)
            .filter_map(|&(_, number)| self.groups.get(usize::from(number)))
            .flat_map(|group| group.iter().map(AsRef::as_ref))
            .filter(move |other| *other != stem)
    }
}

/// The words of a request that say what the job is: its values (`web-1`, `v1.2`,
/// `sha256:4f2a…`, `/app/config/`, `team=payments`, anything quoted) are a tool's arguments,
/// not words of the job, and would match tools by chance. A value is a quoted span (`'…'`,
/// `"…"`, `` `…` ``, `“…”`, `‘…’`, opening at a token's start and closing at one's end: requests
/// quote names and messages), or a whitespace-separated token that [`is_value`]. A request
/// whose other words say nothing (stop words, or none) keeps its values: they are all it says.
pub fn job_words(text: &str) -> Vec<String> {
    let tokens: Vec<&str> = text.split_whitespace().collect();
    let mut job = Vec::new();
    let mut index = 0;
    while let Some(token) = tokens.get(index) {
        match quoted_span_end(&tokens, index) {
            Some(end) => index = end + 1,
            None => {
                if !is_value(token) {
                    job.extend(split(token));
                }
                index += 1;
            }
        }
    }
    if job.iter().all(|word| STOP_WORDS.contains(&word.as_str())) {
        split(text)
    } else {
        job
    }
}

/// The quotes a quoted value opens and closes with.
const QUOTES: [(char, char); 5] = [('\'', '\''), ('"', '"'), ('`', '`'), ('“', '”'), ('‘', '’')];

/// The last token of the quoted span that opens at `tokens[start]`, if one does: its opening
/// quote starts the token (after a bracket) and the same pair's closing quote ends a token
/// (before the sentence's punctuation).
fn quoted_span_end(tokens: &[&str], start: usize) -> Option<usize> {
    let mut opened = tokens.get(start)?.trim_start_matches(['(', '[']).chars();
    let first = opened.next()?;
    let (_, close) = QUOTES.iter().find(|(open, _)| *open == first)?;
    let after_quote = opened.as_str();
    (start..tokens.len()).find(|&end| {
        let body = if end == start {
            after_quote
        } else {
            tokens.get(end).copied().unwrap_or_default()
        };
        body.trim_end_matches(|c: char| ".,;:!?)]".contains(c))
            .ends_with(*close)
    })
}

/// Whether one token, not quoted, is a value: without the punctuation around it, it holds `:`,
/// `=` or `@`; or a digit and any other mark (`web-1`, `v1.2`, `10.0.0.7`); or `/` as a path
/// has it (`/app/config/`, `~/src`, `docker.io/library/nginx`, `kube-system/coredns`). A slash
/// between two plain words is the request's "or" (`create/update`, `read/write`), not a value.
fn is_value(token: &str) -> bool {
    let inside = token.trim_matches(|c: char| !c.is_alphanumeric());
    let slashes = inside.matches('/').count();
    let other_marks = inside.contains(|c: char| !c.is_alphanumeric() && c != '/');
    let has_digit = inside.contains(|c: char| c.is_ascii_digit());
    let bare = token.trim_matches(|c: char| ",.;:!?()[]{}".contains(c));
    let path =
        bare.contains('/') && (bare.starts_with(['/', '~']) || bare.ends_with('/') || slashes > 1 || other_marks);
    inside.contains([':', '=', '@']) || has_digit && (slashes > 0 || other_marks) || path
}

/// The lowercase words of `text`: split at anything but letters and digits, and inside
/// identifiers where a lowercase letter or digit meets an uppercase one (`getItem`), where an
/// uppercase run meets a capitalised word (`HTTPServer` → `http`, `server`), and where letters
/// meet digits after a word of two letters or more (`v3lock` stays whole, `lease2` splits).
pub fn split(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    for token in text.split(|c: char| !c.is_alphanumeric()) {
        let chars: Vec<char> = token.chars().collect();
        let mut start = 0;
        for index in 1..chars.len() {
            let (before, here) = (chars[index - 1], chars[index]);
            let next_is_lower = chars.get(index + 1).is_some_and(|c| c.is_lowercase());
            // `PIDs`, `URLs`: an uppercase run's plural, not a run meeting the word `Ds`.
            let plural_s =
                chars.get(index + 1) == Some(&'s') && !chars.get(index + 2).is_some_and(|c| c.is_lowercase());
            let boundary = (before.is_lowercase() || before.is_ascii_digit()) && here.is_uppercase()
                || before.is_uppercase() && here.is_uppercase() && next_is_lower && !plural_s
                || before.is_alphabetic() && here.is_ascii_digit() && index - start >= 3;
            if boundary {
                words.push(chars[start..index].iter().collect::<String>().to_lowercase());
                start = index;
            }
        }
        if start < chars.len() {
            words.push(chars[start..].iter().collect::<String>().to_lowercase());
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_split_where_their_words_meet() {
        assert_eq!(split("DeleteRange"), ["delete", "range"]);
        assert_eq!(split("lease_id"), ["lease", "id"]);
        assert_eq!(split("HTTPServer"), ["http", "server"]);
        assert_eq!(split("ListPIDs, URLsFor"), ["list", "pids", "urls", "for"]);
        assert_eq!(split("etcdserverpb.KV/Txn"), ["etcdserverpb", "kv", "txn"]);
        assert_eq!(split("v3lock getItem2"), ["v3lock", "get", "item", "2"]);
        assert_eq!(
            split("MemberPromote, compactRevision"),
            ["member", "promote", "compact", "revision"]
        );
    }

    #[test]
    fn a_requests_values_are_left_out_of_its_job() {
        let job = |text: &str| job_words(text).join(" ");
        assert_eq!(
            job("show container web-1's spec, image v1.2 and host 10.0.0.7"),
            "show container spec image and host"
        );
        assert_eq!(
            job("put team=payments under /app/config/ for me@example.org"),
            "put under for"
        );
        assert_eq!(job("pull docker.io/library/nginx:latest"), "pull");
        assert_eq!(
            job("let the 'read only' role read \"everything\" and run `ps aux`."),
            "let the role read and run"
        );
        // Words with digits but no mark, and apostrophes inside words, are words.
        assert_eq!(
            job("the container's sha256 and x509"),
            "the container s sha 256 and x509"
        );
        assert_eq!(job("an 'unclosed quote"), "an unclosed quote");
        // A request of values alone keeps them, as does one whose other words say nothing.
        assert_eq!(job("sha256:4f2a"), "sha 256 4f2a");
        assert_eq!(job("'web-1'"), "web 1");
        assert_eq!(job("- web-1 ?"), "web 1", "marks alone say nothing");
        assert_eq!(job("for team=payments"), "for team payments");
        // A slash between plain words is an "or"; a path's slashes make a value.
        assert_eq!(
            job("create/update or read/write, under /app/config/ or ~/src or kube-system/coredns"),
            "create update or read write under or or"
        );
        // Typographic quotes pair as they should, also after a bracket.
        assert_eq!(
            job("set “read only” on the ‘audit’ bucket (\"as is\") and ('this')"),
            "set on the bucket and"
        );
    }

    #[test]
    fn stems_meet_across_word_forms_and_stop_words_say_nothing() {
        let words = Words::default();
        assert_eq!(words.stems("Deleting the keys"), words.stems("delete key"));
        assert_eq!(words.stems("listing all containers"), ["list", "contain"]);
        assert!(words.kindred("remov").any(|other| other == "delet"));
        assert_eq!(words.kindred("etcdserverpb").count(), 0);
    }

    #[test]
    fn a_query_looks_for_its_words_and_their_kindred_once_each() {
        let words = Words::default();
        let weight = |query: &str, stem: &str| {
            words
                .query(query)
                .into_iter()
                .find(|(known, _)| known == stem)
                .map(|(_, weight)| weight)
        };
        assert_eq!(weight("remove the key", "remov"), Some(1.0));
        assert_eq!(weight("remove the key", "delet"), Some(KINDRED_WEIGHT));
        assert_eq!(weight("delete, remove", "delet"), Some(1.0), "a word's own weight wins");
        // A stop word says nothing itself, but "which" asks for a list.
        assert_eq!(weight("which namespaces exist", "which"), None);
        assert_eq!(weight("which namespaces exist", "list"), Some(KINDRED_WEIGHT));
        assert_eq!(weight("the", "the"), None);
        assert_eq!(words.query("PIDs").first().map(|(stem, _)| stem.as_str()), Some("pid"));
    }
}

//! Text as the search index and its queries see it: identifiers split where their words meet
//! (`DeleteRange`, `lease_id`, `HTTPServer`, `v3lock`), lowercase, without the words that say
//! nothing, and cut to their stems (Snowball's English stemmer), so that "deleting keys" meets
//! `DeleteRange`'s "delete" and `key`.

use rust_stemmers::{Algorithm, Stemmer};

/// Words too common in API text and requests to tell one tool from another.
const STOP_WORDS: [&str; 46] = [
    "a", "about", "all", "an", "and", "any", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from",
    "given", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "one", "or",
    "that", "the", "this", "to", "use", "using", "want", "what", "when", "which", "with", "you", "your",
];

/// Words that name the same thing or action in requests and in APIs: a query word also looks
/// for the others of its group, at a lower weight. Stemmed when [`Words`] is made. General
/// API and operations vocabulary, not any one API's.
const KINDRED: [&[&str]; 34] = [
    &[
        "get", "fetch", "read", "retrieve", "show", "look", "lookup", "find", "inspect", "describe", "info", "detail",
    ],
    &["list", "enumerate", "every", "browse", "which"],
    &[
        "delete",
        "remove",
        "erase",
        "drop",
        "destroy",
        "purge",
        "clear",
        "wipe",
        "unregister",
    ],
    &["create", "add", "new", "make", "insert", "register", "put"],
    &[
        "update", "modify", "change", "edit", "set", "patch", "rename", "alter", "raise", "lower",
    ],
    &[
        "watch",
        "subscribe",
        "observe",
        "follow",
        "monitor",
        "notify",
        "event",
        "stream",
    ],
    &[
        "stop",
        "cancel",
        "kill",
        "abort",
        "terminate",
        "halt",
        "shutdown",
        "signal",
        "sigterm",
        "sigkill",
    ],
    &["start", "run", "launch", "begin", "execute", "spawn"],
    &["pause", "freeze", "suspend"],
    &["resume", "unpause", "thaw", "continue"],
    &["wait", "block", "until"],
    &["grant", "allow", "permit", "give", "assign"],
    &["revoke", "deny", "withdraw"],
    &["size", "usage", "space", "disk", "bytes", "big", "large"],
    &["metrics", "statistics", "stats", "cpu", "memory", "usage"],
    &["version", "release", "build"],
    &["revert", "undo", "reverse", "rollback"],
    &["squash", "collapse", "combine", "flatten"],
    &["archive", "zip", "tarball", "tar"],
    &["snapshot", "backup"],
    &["alarm", "alert"],
    &["check", "verify", "validate", "integrity", "corrupt", "fsck"],
    &["blame", "annotate"],
    &["expire", "expiry", "ttl", "timetolive"],
    &["leader", "leadership"],
    &["member", "node", "peer"],
    &["permission", "role", "privilege"],
    &["namespace", "tenant"],
    &["save", "store", "persist"],
    &["process", "pid", "pids"],
    &["copy", "duplicate", "clone"],
    &["compare", "diff", "difference"],
    &["ancestor", "parent", "base"],
    &["authentication", "auth", "login", "credentials"],
];

/// Short forms API names use, and the words they stand for: a text that has one has those
/// words too.
const SHORT_FORMS: [(&str, &str); 22] = [
    ("ff", "fast forward"),
    ("gc", "garbage collect"),
    ("fsck", "check file system"),
    ("ttl", "time to live"),
    ("txn", "transaction"),
    ("pid", "process"),
    ("pids", "processes"),
    ("exec", "execute"),
    ("lfs", "large file storage"),
    ("ref", "reference"),
    ("refs", "references"),
    ("repo", "repository"),
    ("config", "configuration"),
    ("auth", "authentication"),
    ("info", "information"),
    ("stats", "statistics"),
    ("rev", "revision"),
    ("dir", "directory"),
    ("msg", "message"),
    ("kv", "key value"),
    ("rpc", "remote procedure call"),
    ("id", "identifier"),
];

/// The weight of a kindred word, against the word itself.
pub const KINDRED_WEIGHT: f32 = 0.5;

/// Splits and stems text.
pub struct Words {
    stemmer: Stemmer,
    /// [`KINDRED`], stemmed.
    kindred: Vec<Vec<String>>,
}

impl std::fmt::Debug for Words {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Words")
    }
}

impl Default for Words {
    fn default() -> Self {
        let stemmer = Stemmer::create(Algorithm::English);
        let kindred = KINDRED
            .iter()
            .map(|group| group.iter().map(|word| stemmer.stem(word).into_owned()).collect())
            .collect();
        Words { stemmer, kindred }
    }
}

impl Words {
    /// The stems of `text`, in order, stop words left out; a short form is followed by the
    /// words it stands for.
    pub fn stems(&self, text: &str) -> Vec<String> {
        let mut stems = Vec::new();
        for word in split(text) {
            if STOP_WORDS.contains(&word.as_str()) {
                continue;
            }
            stems.push(self.stemmer.stem(&word).into_owned());
            if let Some((_, long)) = SHORT_FORMS.iter().find(|(short, _)| *short == word) {
                stems.extend(long.split(' ').map(|long| self.stemmer.stem(long).into_owned()));
            }
        }
        stems
    }

    /// The other stems of the groups `stem` is in.
    pub fn kindred<'a>(&'a self, stem: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.kindred
            .iter()
            .filter(move |group| group.iter().any(|known| known == stem))
            .flat_map(|group| group.iter().map(String::as_str))
            .filter(move |other| *other != stem)
    }
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
            let boundary = (before.is_lowercase() || before.is_ascii_digit()) && here.is_uppercase()
                || before.is_uppercase() && here.is_uppercase() && next_is_lower
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
        assert_eq!(split("etcdserverpb.KV/Txn"), ["etcdserverpb", "kv", "txn"]);
        assert_eq!(split("v3lock getItem2"), ["v3lock", "get", "item", "2"]);
        assert_eq!(
            split("MemberPromote, compactRevision"),
            ["member", "promote", "compact", "revision"]
        );
    }

    #[test]
    fn stems_meet_across_word_forms_and_stop_words_say_nothing() {
        let words = Words::default();
        assert_eq!(words.stems("Deleting the keys"), words.stems("delete key"));
        assert_eq!(words.stems("listing all containers"), ["list", "contain"]);
        assert!(words.kindred("remov").any(|other| other == "delet"));
        assert_eq!(words.kindred("txn").count(), 0);
    }
}

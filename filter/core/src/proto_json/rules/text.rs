//! What a string or bytes value holds: `pattern`, `prefix`, `suffix`, `contains` and (strings
//! only) `not_contains`.

use serde_json::{json, Map, Value};

use super::family::Family;
use super::standard::{SchemaFor, StandardRule};
use super::subject::Subject;
use crate::proto_json::Form;

#[derive(Debug, Clone)]
pub enum Text {
    /// `pattern`: RE2 syntax, which regex-lite reads but for Unicode classes. Bytes must be
    /// UTF-8 text that matches.
    Pattern(regex_lite::Regex),
    /// A prefix, suffix or part: the value, and as written.
    Affix {
        affix: Affix,
        value: Subject<'static>,
        shown: String,
    },
}

/// How an affix sits in the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Affix {
    Prefix,
    Suffix,
    Contains,
    NotContains,
}

impl Affix {
    /// The string family's, in the order they are read; bytes have all but `not_contains`.
    pub const STRING: [Affix; 4] = [Affix::Prefix, Affix::Suffix, Affix::Contains, Affix::NotContains];
    pub const BYTES: [Affix; 3] = [Affix::Prefix, Affix::Suffix, Affix::Contains];

    /// The rule's name in the .proto.
    pub fn rule(self) -> &'static str {
        match self {
            Affix::Prefix => "prefix",
            Affix::Suffix => "suffix",
            Affix::Contains => "contains",
            Affix::NotContains => "not_contains",
        }
    }
}

impl StandardRule for Text {
    fn name(&self, family: Family) -> String {
        match self {
            Text::Pattern(regex) => format!("{family}.pattern = \"{}\"", regex.as_str()),
            Text::Affix { affix, shown, .. } => format!("{family}.{} = {shown}", affix.rule()),
        }
    }

    fn words(&self) -> String {
        match self {
            Text::Pattern(regex) => format!("must match the regular expression `{}`", regex.as_str()),
            Text::Affix { affix, shown, .. } => match affix {
                Affix::Prefix => format!("must start with {shown}"),
                Affix::Suffix => format!("must end with {shown}"),
                Affix::Contains => format!("must contain {shown}"),
                Affix::NotContains => format!("must not contain {shown}"),
            },
        }
    }

    fn holds(&self, subject: &Subject<'_>) -> bool {
        match (self, subject) {
            (Text::Pattern(regex), Subject::Text(text)) => regex.is_match(text),
            (Text::Pattern(regex), Subject::Bytes(bytes)) => {
                std::str::from_utf8(bytes).is_ok_and(|text| regex.is_match(text))
            }
            (
                Text::Affix {
                    affix,
                    value: Subject::Text(part),
                    ..
                },
                Subject::Text(text),
            ) => match affix {
                Affix::Prefix => text.starts_with(part.as_ref()),
                Affix::Suffix => text.ends_with(part.as_ref()),
                Affix::Contains => text.contains(part.as_ref()),
                Affix::NotContains => !text.contains(part.as_ref()),
            },
            (
                Text::Affix {
                    affix,
                    value: Subject::Bytes(part),
                    ..
                },
                Subject::Bytes(bytes),
            ) => match affix {
                Affix::Prefix => bytes.starts_with(part),
                Affix::Suffix => bytes.ends_with(part),
                Affix::Contains => part.is_empty() || bytes.windows(part.len()).any(|window| window == part.as_ref()),
                // Not a bytes rule.
                Affix::NotContains => true,
            },
            _ => true,
        }
    }

    /// A pattern is JSON Schema's `pattern` unless it holds a `(?` group (flags such as `(?i)`,
    /// `(?P<name>`), which ECMA-262 reads otherwise or not at all; affixes are said in words.
    fn keyword(&self, schema: SchemaFor<'_>, _base: &mut Map<String, Value>, extra: &mut Map<String, Value>) -> bool {
        match (self, schema) {
            (Text::Pattern(regex), SchemaFor::Value(Form::String)) if !regex.as_str().contains("(?") => {
                extra.insert("pattern".into(), json!(regex.as_str()));
                true
            }
            _ => false,
        }
    }
}

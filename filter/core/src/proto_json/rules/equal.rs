//! `const`, `in` and `not_in`: a value equal to the one the rule names, to one of those it
//! lists, or to none of them, compared as [`Subject`]s and shown as the .proto writes them.
//! (`any` and `field_mask` list type URLs and paths instead: `well_known.rs`.)

use serde_json::{Map, Value};

use super::family::Family;
use super::keywords::{json_of, numbers_only};
use super::standard::{SchemaFor, StandardRule};
use super::subject::Subject;
use crate::proto_json::Form;

#[derive(Debug, Clone)]
pub enum Equal {
    /// `const`: the value, and as written.
    Const { value: Subject<'static>, shown: String },
    /// `in` (`inside`) or `not_in`.
    In {
        values: Vec<Subject<'static>>,
        shown: Vec<String>,
        inside: bool,
    },
}

impl StandardRule for Equal {
    fn name(&self, family: Family) -> String {
        match self {
            Equal::Const { shown, .. } => format!("{family}.const = {shown}"),
            Equal::In { shown, inside, .. } => format!("{family}.{} = {}", in_or_not(*inside), listed(shown)),
        }
    }

    fn words(&self) -> String {
        match self {
            Equal::Const { shown, .. } => format!("must be {shown}"),
            Equal::In {
                shown, inside: true, ..
            } => format!("must be one of {}", shown.join(", ")),
            Equal::In {
                shown, inside: false, ..
            } => format!("must not be any of {}", shown.join(", ")),
        }
    }

    fn holds(&self, subject: &Subject<'_>) -> bool {
        match self {
            Equal::Const { value, .. } => value == subject,
            Equal::In { values, inside, .. } => values.contains(subject) == *inside,
        }
    }

    fn keyword(&self, schema: SchemaFor<'_>, base: &mut Map<String, Value>, extra: &mut Map<String, Value>) -> bool {
        let SchemaFor::Value(form) = schema else {
            return false;
        };
        match (self, form) {
            (Equal::Const { value, .. }, form) => match json_of(value, form) {
                Some(value) => {
                    numbers_only(form, base);
                    extra.insert("const".into(), value);
                    true
                }
                None => false,
            },
            // An enum's schema lists its names: those the rule allows stay.
            (Equal::In { values, inside, .. }, Form::Enum(descriptor)) => {
                let names: Vec<String> = values
                    .iter()
                    .filter_map(|value| match value {
                        Subject::Enum(number) => descriptor.get_value(*number).map(|value| value.name().to_owned()),
                        _ => None,
                    })
                    .collect();
                if let Some(Value::Array(allowed)) = base.get_mut("enum") {
                    allowed.retain(|name| {
                        name.as_str()
                            .is_some_and(|name| names.iter().any(|n| n == name) == *inside)
                    });
                }
                true
            }
            (Equal::In { values, inside, .. }, form) => {
                let listed: Option<Vec<Value>> = values.iter().map(|value| json_of(value, form)).collect();
                match listed {
                    Some(listed) => {
                        numbers_only(form, base);
                        if *inside {
                            extra.insert("enum".into(), Value::Array(listed));
                        } else {
                            extra.insert("not".into(), serde_json::json!({ "enum": listed }));
                        }
                        true
                    }
                    None => false,
                }
            }
        }
    }
}

/// `in` or `not_in`, as the rule is named.
pub fn in_or_not(inside: bool) -> &'static str {
    if inside {
        "in"
    } else {
        "not_in"
    }
}

/// Values as a rule's name lists them: `[1, 2]`.
pub fn listed(shown: &[String]) -> String {
    format!("[{}]", shown.join(", "))
}

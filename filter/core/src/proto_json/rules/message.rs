//! The rules of one message: its fields', its oneofs' (`(buf.validate.oneof).required`) and
//! its own (`(buf.validate.message).oneof` and `cel`). A oneof rule's words in a schema and
//! in a refusal are here beside its check.

use std::collections::HashSet;

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{Map, Value};

use super::cel::{all_hold, this_message, CelRule};
use super::field::FieldRules;
use super::subject::Subject;
use crate::proto_json::given_value;

/// The rules of one message: its fields', its oneofs' and its own.
#[derive(Debug, Default)]
pub struct MessageRules {
    pub fields: Vec<(FieldDescriptor, FieldRules)>,
    /// Sets of fields of which at most one may be set (exactly one when `required`): oneof
    /// `required` and message `oneof` rules.
    pub exclusive: Vec<Exclusive>,
    /// Message-level CEL rules.
    pub cel: Vec<CelRule>,
}

impl MessageRules {
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.exclusive.is_empty() && self.cel.is_empty()
    }

    pub fn field(&self, field: &FieldDescriptor) -> Option<&FieldRules> {
        self.fields
            .iter()
            .find(|(candidate, _)| candidate.number() == field.number())
            .map(|(_, rules)| rules)
    }

    /// The message's own CEL rules, for the message given as `object`.
    pub fn check_message(&self, message: &MessageDescriptor, object: &Map<String, Value>) -> Result<(), String> {
        all_hold(&self.cel, || this_message(message, object))
    }
}

/// At most one of `fields`, or exactly one when `required`.
#[derive(Debug, Clone)]
pub struct Exclusive {
    pub fields: Vec<FieldDescriptor>,
    pub required: bool,
    /// `(buf.validate.oneof).required` on a oneof of this name, or a message `oneof` rule.
    pub oneof: Option<String>,
}

impl Exclusive {
    /// The rule's name in errors, as protovalidate names it.
    pub fn rule(&self) -> &'static str {
        if self.oneof.is_some() {
            "oneof.required"
        } else {
            "message.oneof"
        }
    }

    fn members(&self) -> Vec<String> {
        self.fields.iter().map(|field| format!("`{}`", field.name())).collect()
    }

    /// The rule in a message's description.
    pub fn words(&self) -> String {
        let how = if self.required { "exactly one" } else { "at most one" };
        format!("Set {how} of {} ({}).", self.members().join(", "), self.rule())
    }

    /// At most one of the set's fields in `object`; exactly one if required. A field without
    /// presence given its default counts as not set, as protovalidate counts it.
    pub fn check(&self, object: &Map<String, Value>) -> Result<(), String> {
        let set: Vec<String> = self
            .fields
            .iter()
            .filter(|field| {
                given_value(object, field).is_some_and(|value| {
                    field.supports_presence()
                        || field.is_list()
                        || field.is_map()
                        || !Subject::of(&field.kind(), value).is_zero()
                })
            })
            .map(|field| format!("`{}`", field.name()))
            .collect();
        let members = self.members();
        let which = match &self.oneof {
            Some(oneof) => format!("oneof `{oneof}`"),
            None => format!("the fields {}", members.join(", ")),
        };
        if set.len() > 1 {
            return Err(format!(
                "{} are all set; set at most one of {which} ({})",
                set.join(", "),
                self.rule()
            ));
        }
        if set.is_empty() && self.required {
            return Err(format!(
                "one of {} is required ({}), got none",
                members.join(", "),
                self.rule()
            ));
        }
        Ok(())
    }
}

/// The CEL rules that messages reachable from `inputs` carry, which the gate does not
/// enforce: for the load-time log line.
pub fn unenforced_rules<'a>(
    rules: impl Fn(&str) -> Option<&'a MessageRules>,
    inputs: impl Iterator<Item = MessageDescriptor>,
) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut stack: Vec<MessageDescriptor> = inputs.collect();
    let mut found = Vec::new();
    while let Some(message) = stack.pop() {
        if !seen.insert(message.full_name().to_owned()) {
            continue;
        }
        if let Some(message_rules) = rules(message.full_name()) {
            let unchecked = |cel: &&CelRule| !cel.is_enforced();
            found.extend(
                message_rules
                    .cel
                    .iter()
                    .filter(unchecked)
                    .map(|cel| format!("{} ({})", message.full_name(), cel.label())),
            );
            for (field, field_rules) in &message_rules.fields {
                found.extend(
                    field_rules
                        .cel
                        .iter()
                        .filter(unchecked)
                        .map(|cel| format!("{} ({})", field.full_name(), cel.label())),
                );
            }
        }
        stack.extend(message.fields().filter_map(|field| match field.kind() {
            Kind::Message(inner) => Some(inner),
            _ => None,
        }));
    }
    found
}

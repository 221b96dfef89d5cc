//! How an answer's types are written, worked out once per tool from their descriptors.

use std::collections::HashMap;

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};

use super::super::WellKnown;
use super::{write_string, RenderError};

/// How to write a message type and every message type inside it, worked out from their
/// descriptors once: each field's key, shape and kind, read from here for every field of every
/// answer instead of from the descriptor pool (each field it hands out holds a counted share
/// of the pool). The types are numbered, so a recursive one refers to itself by number.
#[derive(Debug)]
pub struct RenderPlan {
    /// The root type first, then the others as they were found.
    pub(super) messages: Vec<MessagePlan>,
}

#[derive(Debug)]
pub(super) struct MessagePlan {
    pub(super) message: MessageDescriptor,
    pub(super) well_known: Option<WellKnown>,
    /// Some field is in a oneof that is not a proto3 `optional`.
    pub(super) has_oneofs: bool,
    pub(super) fields: Vec<FieldPlan>,
}

#[derive(Debug)]
pub(super) struct FieldPlan {
    pub(super) field: FieldDescriptor,
    pub(super) number: u32,
    /// `"name":`, quoted once.
    pub(super) key: Box<str>,
    pub(super) shape: Shape,
    pub(super) kind: Kind,
    /// The number of the message type this field holds (a map's entry type, for a map).
    pub(super) nested: Option<usize>,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Shape {
    /// Left out when absent if it has presence (a message, a oneof member, `optional`);
    /// written at its default otherwise.
    Singular {
        skipped_when_absent: bool,
    },
    List,
    Map,
}

impl RenderPlan {
    pub fn new(root: &MessageDescriptor) -> Self {
        let mut numbers: HashMap<String, usize> = HashMap::from([(root.full_name().to_owned(), 0)]);
        let mut found = vec![root.clone()];
        let mut messages = Vec::new();
        while let Some(message) = found.get(messages.len()).cloned() {
            let well_known = WellKnown::of(&message);
            // A well-known type is written from its bytes, not field by field.
            let fields = if well_known.is_some() {
                Vec::new()
            } else {
                message
                    .fields()
                    .map(|field| {
                        let kind = field.kind();
                        let nested = match &kind {
                            Kind::Message(inner) => {
                                let next = numbers.len();
                                let number = *numbers.entry(inner.full_name().to_owned()).or_insert(next);
                                if number == next {
                                    found.push(inner.clone());
                                }
                                Some(number)
                            }
                            _ => None,
                        };
                        FieldPlan::new(field, kind, nested)
                    })
                    .collect()
            };
            let has_oneofs = message.oneofs().any(|oneof| !oneof.is_synthetic());
            messages.push(MessagePlan {
                has_oneofs,
                message,
                well_known,
                fields,
            });
        }
        RenderPlan { messages }
    }

    /// The root type's plan: always there, since [`RenderPlan::new`] starts with it.
    pub(super) fn root(&self) -> Result<&MessagePlan, RenderError> {
        self.messages
            .first()
            .ok_or_else(|| RenderError::from("a render plan has no message"))
    }

    pub(super) fn root_name(&self) -> &str {
        self.root().map_or("message", |root| root.message.full_name())
    }

    /// The plan of the message type `field` holds, if it holds one.
    pub(super) fn nested(&self, field: &FieldPlan) -> Option<&MessagePlan> {
        self.messages.get(field.nested?)
    }
}

impl MessagePlan {
    /// The plan of a map entry's key (field 1) or value (field 2).
    pub(super) fn entry_field(&self, number: u32) -> Option<&FieldPlan> {
        self.fields.iter().find(|field| field.number == number)
    }
}

impl FieldPlan {
    fn new(field: FieldDescriptor, kind: Kind, nested: Option<usize>) -> Self {
        let mut key = String::with_capacity(field.name().len() + 3);
        write_string(&mut key, field.name());
        key.push(':');
        let shape = if field.is_map() {
            Shape::Map
        } else if field.is_list() {
            Shape::List
        } else {
            Shape::Singular {
                skipped_when_absent: field.supports_presence(),
            }
        };
        FieldPlan {
            number: field.number(),
            key: key.into_boxed_str(),
            shape,
            kind,
            field,
            nested,
        }
    }
}

//! Rule families: the member of `buf.validate.FieldRules.type` a field takes (`int32`,
//! `string`, `repeated` …), named as the .proto names it. Rules of another family than the
//! field's are refused by these names when the configuration loads.

use prost_reflect::{FieldDescriptor, Kind};

use crate::proto_json::{Form, WellKnown};

/// One member of `FieldRules.type`: the rules a field of one kind takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Float,
    Double,
    Int32,
    Int64,
    UInt32,
    UInt64,
    SInt32,
    SInt64,
    Fixed32,
    Fixed64,
    SFixed32,
    SFixed64,
    Bool,
    String,
    Bytes,
    Enum,
    Repeated,
    Map,
    Any,
    Duration,
    Timestamp,
    FieldMask,
}

impl Family {
    const ALL: [Family; 22] = [
        Family::Float,
        Family::Double,
        Family::Int32,
        Family::Int64,
        Family::UInt32,
        Family::UInt64,
        Family::SInt32,
        Family::SInt64,
        Family::Fixed32,
        Family::Fixed64,
        Family::SFixed32,
        Family::SFixed64,
        Family::Bool,
        Family::String,
        Family::Bytes,
        Family::Enum,
        Family::Repeated,
        Family::Map,
        Family::Any,
        Family::Duration,
        Family::Timestamp,
        Family::FieldMask,
    ];

    /// Its member's name in `FieldRules.type`, which also names its rules in errors
    /// (`int32.gt = 0`).
    pub fn name(self) -> &'static str {
        match self {
            Family::Float => "float",
            Family::Double => "double",
            Family::Int32 => "int32",
            Family::Int64 => "int64",
            Family::UInt32 => "uint32",
            Family::UInt64 => "uint64",
            Family::SInt32 => "sint32",
            Family::SInt64 => "sint64",
            Family::Fixed32 => "fixed32",
            Family::Fixed64 => "fixed64",
            Family::SFixed32 => "sfixed32",
            Family::SFixed64 => "sfixed64",
            Family::Bool => "bool",
            Family::String => "string",
            Family::Bytes => "bytes",
            Family::Enum => "enum",
            Family::Repeated => "repeated",
            Family::Map => "map",
            Family::Any => "any",
            Family::Duration => "duration",
            Family::Timestamp => "timestamp",
            Family::FieldMask => "field_mask",
        }
    }

    /// The family a `FieldRules.type` member of this name declares, if Switchblade knows it.
    pub fn named(name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|family| family.name() == name)
    }

    /// The family whose rules `target` of `field` takes; `None` for a message, which takes
    /// only `required`, `ignore` and `cel`.
    pub fn of(field: &FieldDescriptor, target: Target) -> Option<Family> {
        if matches!(target, Target::Field) && field.is_map() {
            return Some(Family::Map);
        }
        if matches!(target, Target::Field) && field.is_list() {
            return Some(Family::Repeated);
        }
        let kind = target.kind(field);
        // A wrapper takes its scalar's rules.
        let kind = match Form::of(&kind) {
            Form::WellKnown(WellKnown::Wrapper(inner)) => inner,
            Form::WellKnown(WellKnown::Any) => return Some(Family::Any),
            Form::WellKnown(WellKnown::Duration) => return Some(Family::Duration),
            Form::WellKnown(WellKnown::Timestamp) => return Some(Family::Timestamp),
            Form::WellKnown(WellKnown::FieldMask) => return Some(Family::FieldMask),
            _ => kind,
        };
        Some(match kind {
            Kind::Double => Family::Double,
            Kind::Float => Family::Float,
            Kind::Int32 => Family::Int32,
            Kind::Int64 => Family::Int64,
            Kind::Uint32 => Family::UInt32,
            Kind::Uint64 => Family::UInt64,
            Kind::Sint32 => Family::SInt32,
            Kind::Sint64 => Family::SInt64,
            Kind::Fixed32 => Family::Fixed32,
            Kind::Fixed64 => Family::Fixed64,
            Kind::Sfixed32 => Family::SFixed32,
            Kind::Sfixed64 => Family::SFixed64,
            Kind::Bool => Family::Bool,
            Kind::String => Family::String,
            Kind::Bytes => Family::Bytes,
            Kind::Enum(_) => Family::Enum,
            Kind::Message(_) => return None,
        })
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a set of rules applies to: a whole field (a list or a map as a whole), or one item of
/// a list or value of a map, or a map's key.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    Field,
    Element,
    Key,
}

impl Target {
    /// The kind of one value the rules look at.
    pub fn kind(self, field: &FieldDescriptor) -> Kind {
        match (field.kind(), self) {
            (Kind::Message(entry), Target::Element) if field.is_map() => entry.map_entry_value_field().kind(),
            (Kind::Message(entry), Target::Key) if field.is_map() => entry.map_entry_key_field().kind(),
            (kind, _) => kind,
        }
    }
}

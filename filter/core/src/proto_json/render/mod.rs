//! Upstream answers (protobuf bytes) straight to JSON text, in the forms of the mapping table,
//! with proto field names, and with every field that has no presence (at its default when
//! unset) so a model always sees the whole shape. No message is built in between: the bytes
//! are indexed by field number, then written in the order the descriptor declares, following
//! a [`RenderPlan`] made from the descriptors once per tool.
//!
//! Protobuf's own rules apply: the last value of a singular field wins, a message given more
//! than once is merged, the last member set of a oneof is the one, the last entry of a map key
//! wins, and fields the descriptor does not know are skipped.

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor, OneofDescriptor};
use smallvec::SmallVec;

mod plan;
mod scalar;
mod well_known;

use super::wire::{Reader, WireValue};
pub use plan::RenderPlan;
use plan::{FieldPlan, MessagePlan, Shape};
pub(crate) use scalar::write_string;
use scalar::{write_default, write_scalar};
use well_known::write_well_known;

/// How deep messages may nest in an answer: protobuf's own limit, which also keeps the stack
/// shallow whatever an upstream sends.
pub(super) const MAX_DEPTH: usize = 100;

/// The occurrences a message's index holds on the stack (32 bytes each on a 64-bit target):
/// most messages of an answer have fewer, and make no allocation for it; a larger one doubles
/// its room as it grows.
const INLINE_OCCURRENCES: usize = 16;

/// A message's field occurrences, in wire order (see [`index`]).
pub(super) type Occurrences<'a> = SmallVec<[Occurrence<'a>; INLINE_OCCURRENCES]>;

/// Why an upstream answer could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RenderError {
    /// The bytes are not a valid message of the type, and why.
    Invalid(String),
    /// The JSON would be larger than the limit it was rendered with.
    TooLarge { limit: usize },
}

/// The answer `bytes`, a message of `plan`'s type, as JSON text of at most `limit` bytes, give
/// or take one scalar: rendering stops as soon as the text has grown past it, before the rest
/// is built.
pub fn render(plan: &RenderPlan, bytes: &[u8], limit: usize) -> Result<String, RenderError> {
    let mut out = String::with_capacity((bytes.len() * 2 + 64).min(limit));
    let level = Level::root(limit);
    let written = plan
        .root()
        .and_then(|root| write_message(&mut out, plan, root, bytes, level))
        .and_then(|()| level.check(&out));
    written.map_err(|error| match error {
        RenderError::Invalid(why) => RenderError::Invalid(format!("not a valid {}: {why}", plan.root_name())),
        RenderError::TooLarge { .. } => RenderError::TooLarge { limit },
    })?;
    Ok(out)
}

// What stops rendering inside the answer converts to `RenderError::Invalid`, and the answer's
// type is named once, at the top ([`render`]).
impl From<String> for RenderError {
    fn from(why: String) -> Self {
        RenderError::Invalid(why)
    }
}

impl From<&str> for RenderError {
    fn from(why: &str) -> Self {
        RenderError::Invalid(why.to_owned())
    }
}

/// Where a value is written: how deep among messages, and how long the text it goes into may
/// grow. Fields without presence are written at their defaults, so a few bytes of empty
/// messages can ask for far more text than they take: the limit is checked as each field and
/// each item is written, not once at the end.
#[derive(Debug, Clone, Copy)]
pub(super) struct Level {
    depth: usize,
    limit: usize,
}

impl Level {
    fn root(limit: usize) -> Self {
        Level { depth: 0, limit }
    }

    pub(super) fn deeper(self) -> Self {
        Level {
            depth: self.depth + 1,
            ..self
        }
    }

    pub(super) fn depth(self) -> usize {
        self.depth
    }

    /// The level of a value written into a text of its own, which goes into `out` afterwards.
    pub(super) fn apart(self, out: &str) -> Self {
        Level {
            limit: self.limit.saturating_sub(out.len()),
            ..self.deeper()
        }
    }

    /// Stops once `out` has grown past the limit.
    pub(super) fn check(self, out: &str) -> Result<(), RenderError> {
        if out.len() > self.limit {
            return Err(RenderError::TooLarge { limit: self.limit });
        }
        Ok(())
    }
}

/// One field occurrence on the wire.
#[derive(Clone, Copy)]
pub(super) struct Occurrence<'a> {
    pub(super) number: u32,
    pub(super) value: WireValue<'a>,
}

fn write_message(
    out: &mut String,
    plan: &RenderPlan,
    message: &MessagePlan,
    bytes: &[u8],
    level: Level,
) -> Result<(), RenderError> {
    if level.depth > MAX_DEPTH {
        return Err(format!("messages are nested more than {MAX_DEPTH} deep").into());
    }
    level.check(out)?;
    if let Some(well_known) = &message.well_known {
        return write_well_known(out, well_known, &message.message, bytes, level);
    }
    let mut fields = index(bytes)?;
    let winners = if message.has_oneofs {
        oneof_winners(&message.message, &fields)
    } else {
        Vec::new()
    };
    // Stable: occurrences of one field stay in wire order.
    fields.sort_by_key(|occurrence| occurrence.number);
    out.push('{');
    let mut first = true;
    for field in &message.fields {
        let start = fields.partition_point(|occurrence| occurrence.number < field.number);
        let end = fields.partition_point(|occurrence| occurrence.number <= field.number);
        let occurrences = &fields[start..end];
        let present = !occurrences.is_empty();
        // Without winners no member of a oneof is present, and none can have lost.
        let lost = present
            && !winners.is_empty()
            && field
                .field
                .containing_oneof()
                .filter(|oneof| !oneof.is_synthetic())
                .is_some_and(|oneof| !winners.contains(&(oneof, field.number)));
        if matches!(
            field.shape,
            Shape::Singular {
                skipped_when_absent: true
            }
        ) && (!present || lost)
        {
            continue;
        }
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(&field.key);
        match field.shape {
            Shape::Map => write_map(out, plan, field, occurrences, level)?,
            Shape::List => write_list(out, plan, field, occurrences, level)?,
            Shape::Singular { .. } => match occurrences.last() {
                Some(last) => write_singular(out, plan, field, occurrences, last, level)?,
                None => write_default(out, &field.field),
            },
        }
        level.check(out)?;
    }
    out.push('}');
    Ok(())
}

/// Every field occurrence of a message, in wire order.
pub(super) fn index(bytes: &[u8]) -> Result<Occurrences<'_>, RenderError> {
    let mut reader = Reader::new(bytes);
    let mut fields = Occurrences::new();
    while let Some(field) = reader.field().map_err(str::to_owned)? {
        fields.push(Occurrence {
            number: field.number,
            value: field.value,
        });
    }
    Ok(fields)
}

/// For each oneof, the member set last on the wire: the only one written. For a message whose
/// plan says it has a oneof that is not a proto3 `optional`; others have no winners.
fn oneof_winners(message: &MessageDescriptor, fields: &[Occurrence<'_>]) -> Vec<(OneofDescriptor, u32)> {
    let mut winners: Vec<(OneofDescriptor, u32)> = Vec::new();
    for occurrence in fields {
        let Some(oneof) = message
            .get_field(occurrence.number)
            .and_then(|field| field.containing_oneof())
            .filter(|oneof| !oneof.is_synthetic())
        else {
            continue;
        };
        match winners.iter_mut().find(|(known, _)| *known == oneof) {
            Some(winner) => winner.1 = occurrence.number,
            None => winners.push((oneof, occurrence.number)),
        }
    }
    winners
}

fn write_singular(
    out: &mut String,
    plan: &RenderPlan,
    field: &FieldPlan,
    occurrences: &[Occurrence<'_>],
    last: &Occurrence<'_>,
    level: Level,
) -> Result<(), RenderError> {
    let Some(message) = plan.nested(field) else {
        return write_scalar(out, &field.field, &field.kind, last.value);
    };
    // A message given more than once is their merge, which is what their bytes concatenated
    // decode to.
    if let [only] = occurrences {
        return write_message(
            out,
            plan,
            message,
            message_bytes(&field.field, only.value)?,
            level.deeper(),
        );
    }
    let mut merged = Vec::new();
    for occurrence in occurrences {
        merged.extend_from_slice(message_bytes(&field.field, occurrence.value)?);
    }
    write_message(out, plan, message, &merged, level.deeper())
}

fn message_bytes<'a>(field: &FieldDescriptor, value: WireValue<'a>) -> Result<&'a [u8], RenderError> {
    match value {
        WireValue::Len(bytes) | WireValue::Group(bytes) => Ok(bytes),
        _ => Err(wrong_wire_type(field)),
    }
}

fn write_list(
    out: &mut String,
    plan: &RenderPlan,
    field: &FieldPlan,
    occurrences: &[Occurrence<'_>],
    level: Level,
) -> Result<(), RenderError> {
    let (kind, descriptor) = (&field.kind, &field.field);
    out.push('[');
    let mut first = true;
    let mut separate = |out: &mut String| {
        if !first {
            out.push(',');
        }
        first = false;
    };
    let message = plan.nested(field);
    for occurrence in occurrences {
        match (message, occurrence.value) {
            (Some(message), value) => {
                separate(out);
                write_message(out, plan, message, message_bytes(descriptor, value)?, level.deeper())?;
            }
            // Numbers may come packed, whatever the descriptor says.
            (None, WireValue::Len(packed)) if is_packable(kind) => {
                let mut reader = Reader::new(packed);
                while !reader.is_empty() {
                    separate(out);
                    let value = match fixed_width(kind) {
                        Some(4) => WireValue::Fixed32(u32::from_le_bytes(take::<4>(&mut reader)?)),
                        Some(_) => WireValue::Fixed64(u64::from_le_bytes(take::<8>(&mut reader)?)),
                        None => WireValue::Varint(reader.varint().map_err(str::to_owned)?),
                    };
                    write_scalar(out, descriptor, kind, value)?;
                    level.check(out)?;
                }
            }
            (None, value) => {
                separate(out);
                write_scalar(out, descriptor, kind, value)?;
            }
        }
        level.check(out)?;
    }
    out.push(']');
    Ok(())
}

fn take<const N: usize>(reader: &mut Reader<'_>) -> Result<[u8; N], RenderError> {
    reader.fixed::<N>().map_err(RenderError::from)
}

fn write_map(
    out: &mut String,
    plan: &RenderPlan,
    field: &FieldPlan,
    occurrences: &[Occurrence<'_>],
    level: Level,
) -> Result<(), RenderError> {
    let entry = plan.nested(field).ok_or_else(|| wrong_wire_type(&field.field))?;
    let (Some(key_field), Some(value_field)) = (entry.entry_field(1), entry.entry_field(2)) else {
        return Err(format!("map field {} has no key or no value", field.field.name()).into());
    };
    let mut entries: Vec<(String, Option<WireValue<'_>>)> = Vec::with_capacity(occurrences.len());
    for occurrence in occurrences {
        let mut key = None;
        let mut value = None;
        let mut reader = Reader::new(message_bytes(&field.field, occurrence.value)?);
        while let Some(part) = reader.field().map_err(str::to_owned)? {
            match part.number {
                1 => key = Some(part.value),
                2 => value = Some(part.value),
                _ => {}
            }
        }
        let mut key_text = String::new();
        match key {
            Some(key) => write_scalar(&mut key_text, &key_field.field, &key_field.kind, key)?,
            None => write_default(&mut key_text, &key_field.field),
        }
        // JSON keys are strings: a number or boolean key is written in quotes.
        if !key_text.starts_with('"') {
            key_text = format!("\"{key_text}\"");
        }
        entries.push((key_text, value));
    }
    let entries = each_key_once(entries);
    let value_message = plan.nested(value_field);
    out.push('{');
    for (index, (key, value)) in entries.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(key);
        out.push(':');
        match (value, value_message) {
            (Some(value), Some(message)) => write_message(
                out,
                plan,
                message,
                message_bytes(&value_field.field, *value)?,
                level.deeper(),
            )?,
            (Some(value), None) => write_scalar(out, &value_field.field, &value_field.kind, *value)?,
            (None, Some(message)) => write_message(out, plan, message, &[], level.deeper())?,
            (None, None) => write_default(out, &value_field.field),
        }
        level.check(out)?;
    }
    out.push('}');
    Ok(())
}

/// A map's entries in wire order with each key once: at its first place, with its last value.
/// Sorted rather than hashed: most maps have no key twice, and one entry needs no check.
fn each_key_once<T: Copy>(mut entries: Vec<(String, T)>) -> Vec<(String, T)> {
    if entries.len() < 2 {
        return entries;
    }
    let mut by_key: Vec<usize> = (0..entries.len()).collect();
    // Stable: the places of one key stay in wire order.
    by_key.sort_by(|&a, &b| entries[a].0.cmp(&entries[b].0));
    let mut kept = vec![true; entries.len()];
    let mut start = 0;
    while let Some(&first) = by_key.get(start) {
        let same = by_key[start..]
            .iter()
            .take_while(|&&place| entries[place].0 == entries[first].0)
            .count();
        let places = &by_key[start..start + same];
        if let Some(&last) = places.last() {
            entries[first].1 = entries[last].1;
        }
        for &later in &places[1..] {
            kept[later] = false;
        }
        start += same;
    }
    let mut place = 0;
    entries.retain(|_| {
        place += 1;
        kept[place - 1]
    });
    entries
}

pub(super) fn wrong_wire_type(field: &FieldDescriptor) -> RenderError {
    format!("field {} has the wrong wire type", field.name()).into()
}

fn is_packable(kind: &Kind) -> bool {
    !matches!(kind, Kind::String | Kind::Bytes | Kind::Message(_))
}

/// The width of a fixed-size kind on the wire, if it is one.
fn fixed_width(kind: &Kind) -> Option<usize> {
    match kind {
        Kind::Fixed32 | Kind::Sfixed32 | Kind::Float => Some(4),
        Kind::Fixed64 | Kind::Sfixed64 | Kind::Double => Some(8),
        _ => None,
    }
}

#[cfg(test)]
mod tests;

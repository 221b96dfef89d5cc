//! `buf.validate` (protovalidate) rules: read once from the descriptor pool's field, oneof and
//! message options ([`read`]), enforced on tool arguments by the gate ([`field`],
//! [`message`]), and written into input schemas from what the gate read, as JSON Schema
//! keywords or, where JSON Schema has none, in words ([`schema`]).
//!
//! Each kind of standard rule keeps its name, its words, its check and its schema keywords
//! side by side in one file ([`standard::StandardRule`]), so an error, a schema's description
//! and docs/validation.md say the same thing: [`equal`] (`const`, `in`, `not_in`), [`ordered`] (`gt`,
//! `gte`, `lt`, `lte`, `finite`), [`length`], [`text`] (`pattern`, prefixes …), [`formats`]
//! (`email`, `ip` …), [`collections`] (`unique`), [`now`] (`lt_now`, `gt_now`, `within`),
//! [`well_known`] (`any` and `field_mask`). [`rule`] gathers them; [`family`] names the
//! families and which a field takes; `read/families.rs` says which rules each family has.
//! `required` and `ignore` are in [`field`], oneof rules in [`message`], CEL rules in [`cel`].
//!
//! Enforced: every standard rule of every family (numbers, bool, string with its well-known
//! formats, bytes, enum, repeated, map, Any, Duration, Timestamp, FieldMask), `required`,
//! `ignore`, oneof `required` and message `oneof` rules. CEL expressions (`cel`,
//! `cel_expression`) are enforced with the `cel` cargo feature ([`expressions`]); without it,
//! and always for predefined rule extensions, they are shown in the schema in words and logged
//! at load as unenforced.

mod cel;
mod collections;
mod declared;
mod equal;
#[cfg(feature = "cel")]
mod expressions;
mod family;
mod field;
mod formats;
mod keywords;
mod length;
mod message;
mod now;
mod ordered;
mod read;
mod rule;
mod schema;
mod standard;
mod subject;
mod text;
mod well_known;

pub use cel::CelRule;
pub use field::{FieldRules, Ignore, Place, Violation};
pub use message::{unenforced_rules, Exclusive, MessageRules};
pub use read::pool_rules;
pub use schema::{annotate, message_words};
pub use subject::Subject;

#[cfg(test)]
mod tests;

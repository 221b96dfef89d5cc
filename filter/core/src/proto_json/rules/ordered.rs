//! `gt`, `gte`, `lt`, `lte` and `finite`: bounds on values that are ordered, numbers and (in
//! nanoseconds) durations and timestamps. A lower bound above the upper one means "outside the
//! range", as protovalidate reads it.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::family::Family;
use super::keywords::{number_json, numbers_only};
use super::standard::{SchemaFor, StandardRule};
use super::subject::{Number, Subject};
use crate::proto_json::Form;

/// `gt`/`gte` and `lt`/`lte`, at least one of them.
#[derive(Debug, Clone)]
pub struct Range {
    pub lower: Option<Bound>,
    pub upper: Option<Bound>,
}

/// One bound of a range: the value, as a number (or nanoseconds for durations and
/// timestamps), and as written in the rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    pub value: Number,
    pub side: Side,
    pub shown: String,
}

/// Which side of a bound passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `gt`, `lt`: the bound itself fails.
    Exclusive,
    /// `gte`, `lte`: the bound itself passes.
    Inclusive,
}

impl Range {
    /// gt/gte above lt/lte: the values between fail, those outside pass.
    fn is_outside(&self) -> bool {
        match (&self.lower, &self.upper) {
            (Some(lower), Some(upper)) => match (lower.value, upper.value) {
                (Number::Int(low), Number::Int(high)) => low >= high,
                (Number::Float(low), Number::Float(high)) => low >= high,
                _ => false,
            },
            _ => false,
        }
    }
}

impl StandardRule for Range {
    fn name(&self, family: Family) -> String {
        let part = |bound: &Bound, exclusive: &str, inclusive: &str| {
            let name = match bound.side {
                Side::Exclusive => exclusive,
                Side::Inclusive => inclusive,
            };
            format!("{family}.{name} = {}", bound.shown)
        };
        let parts: Vec<String> = [
            self.lower.as_ref().map(|bound| part(bound, "gt", "gte")),
            self.upper.as_ref().map(|bound| part(bound, "lt", "lte")),
        ]
        .into_iter()
        .flatten()
        .collect();
        parts.join(", ")
    }

    fn words(&self) -> String {
        let above = |bound: &Bound| match bound.side {
            Side::Exclusive => format!("greater than {}", bound.shown),
            Side::Inclusive => format!("greater than or equal to {}", bound.shown),
        };
        let below = |bound: &Bound| match bound.side {
            Side::Exclusive => format!("less than {}", bound.shown),
            Side::Inclusive => format!("less than or equal to {}", bound.shown),
        };
        match (&self.lower, &self.upper) {
            (Some(lower), Some(upper)) if self.is_outside() => format!("must be {} or {}", above(lower), below(upper)),
            (Some(lower), Some(upper)) => format!("must be {} and {}", above(lower), below(upper)),
            (Some(lower), None) => format!("must be {}", above(lower)),
            (None, Some(upper)) => format!("must be {}", below(upper)),
            (None, None) => String::new(),
        }
    }

    fn holds(&self, subject: &Subject<'_>) -> bool {
        let value = match subject {
            Subject::Number(number) => *number,
            Subject::Nanos(nanos) => Number::Int(*nanos),
            _ => return true,
        };
        let above = self.lower.as_ref().map(|bound| is_beyond(value, bound, false));
        let below = self.upper.as_ref().map(|bound| is_beyond(value, bound, true));
        match (above, below) {
            (Some(above), Some(below)) if self.is_outside() => above || below,
            (above, below) => above.unwrap_or(true) && below.unwrap_or(true),
        }
    }

    fn keyword(&self, schema: SchemaFor<'_>, base: &mut Map<String, Value>, extra: &mut Map<String, Value>) -> bool {
        let SchemaFor::Value(form @ (Form::Int32 { .. } | Form::Int64 { .. } | Form::Float { .. })) = schema else {
            return false;
        };
        numbers_only(form, base);
        match (&self.lower, &self.upper) {
            (Some(low), Some(high)) if self.is_outside() => {
                // Between the bounds fails: not (from `high` up to `low`).
                let mut between = Map::new();
                between.insert(bound_keyword(high, true, true).into(), number_json(high.value));
                between.insert(bound_keyword(low, false, true).into(), number_json(low.value));
                extra.insert("not".into(), Value::Object(between));
            }
            (lower, upper) => {
                for (bound, is_upper) in [(lower, false), (upper, true)] {
                    if let Some(bound) = bound {
                        extra.insert(bound_keyword(bound, is_upper, false).into(), number_json(bound.value));
                    }
                }
            }
        }
        true
    }
}

/// `value` is beyond `bound`: above it for a lower bound, below it for an upper one (or at it,
/// when inclusive). NaN is beyond nothing.
fn is_beyond(value: Number, bound: &Bound, is_upper: bool) -> bool {
    let ordering = match (value, bound.value) {
        (Number::Int(value), Number::Int(limit)) => Some(value.cmp(&limit)),
        (Number::Float(value), Number::Float(limit)) => value.partial_cmp(&limit),
        _ => return true,
    };
    let beyond = if is_upper { Ordering::Less } else { Ordering::Greater };
    ordering
        .is_some_and(|ordering| ordering == beyond || (bound.side == Side::Inclusive && ordering == Ordering::Equal))
}

/// The keyword of a bound: `gt: 5` is `exclusiveMinimum: 5`, `lte: 5` is `maximum: 5`. Turned
/// (`band`), it bounds the failing band between an outside range's ends: `lt: 5` fails from 5
/// up (`minimum: 5`), `gte: 9` below 9 (`exclusiveMaximum: 9`).
fn bound_keyword(bound: &Bound, is_upper: bool, band: bool) -> &'static str {
    let exclusive = (bound.side == Side::Exclusive) != band;
    match (is_upper != band, exclusive) {
        (false, true) => "exclusiveMinimum",
        (false, false) => "minimum",
        (true, true) => "exclusiveMaximum",
        (true, false) => "maximum",
    }
}

/// `float.finite`, `double.finite`.
#[derive(Debug, Clone)]
pub struct Finite;

impl StandardRule for Finite {
    fn name(&self, family: Family) -> String {
        format!("{family}.finite")
    }

    fn words(&self) -> String {
        "must be a finite number (not NaN or an infinity)".to_owned()
    }

    fn holds(&self, subject: &Subject<'_>) -> bool {
        match subject {
            Subject::Number(Number::Float(value)) => value.is_finite(),
            _ => true,
        }
    }

    /// The schema's JSON numbers are finite: offering only those says it.
    fn keyword(&self, schema: SchemaFor<'_>, base: &mut Map<String, Value>, _extra: &mut Map<String, Value>) -> bool {
        let SchemaFor::Value(form @ Form::Float { .. }) = schema else {
            return false;
        };
        numbers_only(form, base);
        true
    }
}

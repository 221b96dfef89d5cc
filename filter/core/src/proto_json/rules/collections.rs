//! `repeated.unique`: no item given twice. (A list's and a map's lengths are in `length.rs`;
//! the rules of their items, keys and values are whole field rules of their own.)

use std::collections::HashSet;

use serde_json::{json, Map, Value};

use super::family::Family;
use super::keywords::numbers_only;
use super::standard::{SchemaFor, StandardRule, Whole};
use super::subject::Subject;
use crate::proto_json::Form;

#[derive(Debug, Clone)]
pub struct Unique;

impl StandardRule for Unique {
    fn name(&self, family: Family) -> String {
        format!("{family}.unique")
    }

    fn words(&self) -> String {
        "items must be unique".to_owned()
    }

    fn holds(&self, _subject: &Subject<'_>) -> bool {
        true
    }

    /// Items are compared as the rules read them, so `"7"` and `7` are the same 64-bit item.
    fn holds_whole(&self, whole: Whole<'_>) -> bool {
        let Whole::List { kind, items } = whole else {
            return true;
        };
        let mut seen = HashSet::with_capacity(items.len());
        items
            .iter()
            .all(|item| seen.insert(format!("{:?}", Subject::of(kind, item))))
    }

    /// `uniqueItems` compares JSON, which is the gate's own comparison only where a value has
    /// one spelling: not for base64 (padded or not), said in words then, nor for 64-bit
    /// integers as strings, which the items' schema then leaves out.
    fn keyword(&self, schema: SchemaFor<'_>, base: &mut Map<String, Value>, extra: &mut Map<String, Value>) -> bool {
        let SchemaFor::List(items_form) = schema else {
            return false;
        };
        if matches!(items_form, Form::Bytes) {
            return false;
        }
        extra.insert("uniqueItems".into(), json!(true));
        if let (Form::Int64 { .. }, Some(Value::Object(items))) = (items_form, base.get_mut("items")) {
            numbers_only(items_form, items);
        }
        true
    }
}

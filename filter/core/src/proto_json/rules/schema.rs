//! `buf.validate` rules in an input schema: as JSON Schema keywords where JSON Schema has one
//! that means the same or less (so what a schema allows, the gate accepts), and in words in
//! the field's description otherwise (CEL, prefixes, durations, formats JSON Schema lacks).
//! Each rule writes its own keywords ([`super::standard::StandardRule::keyword`]); this lays
//! them out for a field, a list, a map and their elements.

use prost_reflect::{FieldDescriptor, Kind};
use serde_json::{json, Map, Value};

use super::field::{merge, require_non_default, zero_of, FieldRules, Ignore, REQUIRED_NOT_DEFAULT};
use super::length::Unit;
use super::message::MessageRules;
use super::standard::SchemaFor;
use crate::proto_json::{Form, WellKnown};

/// Writes `rules` of `field` into the field's `schema`; returns what only words can say.
pub fn annotate(field: &FieldDescriptor, rules: &FieldRules, schema: &mut Value) -> Vec<String> {
    let mut words = Vec::new();
    if rules.ignore == Ignore::Always {
        return words;
    }
    let Value::Object(map) = schema else {
        return words;
    };
    if field.is_list() || field.is_map() {
        let items_form = Form::of(&field.kind());
        let (unit, whole) = if field.is_list() {
            (Unit::Items, SchemaFor::List(&items_form))
        } else {
            (Unit::Pairs, SchemaFor::Map)
        };
        let mut extra = Map::new();
        if let (true, Some((min_key, _))) = (rules.required, unit.keywords()) {
            extra.insert(min_key.into(), json!(1));
        }
        for (family, rule) in rules.standard() {
            if !rule.keyword(whole, map, &mut extra) {
                words.push(rule.said(family));
            }
        }
        let empty = if field.is_list() { json!([]) } else { json!({}) };
        merge(map, extra, rules.ignore == Ignore::IfZero, empty);
        let (item_kind, key_kind) = match field.kind() {
            Kind::Message(entry) if field.is_map() => (
                entry.map_entry_value_field().kind(),
                Some(entry.map_entry_key_field().kind()),
            ),
            kind => (kind, None),
        };
        if let Some(item_rules) = &rules.items {
            let slot = if field.is_list() {
                "items"
            } else {
                "additionalProperties"
            };
            if let Some(item_schema) = map.get_mut(slot) {
                let said = element(&item_kind, item_rules, item_schema);
                let each = if field.is_list() { "Each item" } else { "Each value" };
                words.extend(said.into_iter().map(|text| format!("{each}: {text}")));
            }
        }
        if let (Some(key_rules), Some(key_kind)) = (&rules.keys, key_kind) {
            let names = map.entry("propertyNames").or_insert_with(|| json!({}));
            let said = element(&key_kind, key_rules, names);
            words.extend(said.into_iter().map(|text| format!("Each key: {text}")));
        }
    } else {
        words.extend(element(&field.kind(), rules, schema));
        if rules.required && !field.supports_presence() {
            words.push(REQUIRED_NOT_DEFAULT.to_owned());
        }
    }
    words.extend(rules.cel.iter().map(|cel| cel.words()));
    words
}

/// The words of a message's own rules: oneof and message `oneof` rules, CEL.
pub fn message_words(rules: &MessageRules) -> Vec<String> {
    let mut words: Vec<String> = rules.exclusive.iter().map(|exclusive| exclusive.words()).collect();
    words.extend(rules.cel.iter().map(|cel| cel.words()));
    words
}

/// Rules of one value (a singular field, an item, a key or a map value) into its schema.
fn element(kind: &Kind, rules: &FieldRules, schema: &mut Value) -> Vec<String> {
    let mut words = Vec::new();
    let Value::Object(map) = schema else {
        return words;
    };
    let form = match Form::of(kind) {
        Form::WellKnown(WellKnown::Wrapper(inner)) => Form::of(&inner),
        form => form,
    };
    let mut extra = Map::new();
    for (family, rule) in rules.standard() {
        if !rule.keyword(SchemaFor::Value(&form), map, &mut extra) {
            words.push(rule.said(family));
        }
    }
    if rules.required {
        require_non_default(&form, map, &mut extra);
    }
    let zero = zero_of(&form);
    merge(map, extra, rules.ignore == Ignore::IfZero, zero);
    words
}

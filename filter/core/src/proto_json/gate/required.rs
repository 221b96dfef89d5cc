//! Which fields a request must carry: proto2 `required`, `google.api.field_behavior =
//! REQUIRED` and `(buf.validate.field).required` (when the pool declares the options).

use prost_reflect::{Cardinality, DescriptorPool, FieldDescriptor, Value as ProtoValue};

use crate::proto_json::rules::{FieldRules, Ignore};

const FIELD_BEHAVIOR_EXTENSION: &str = "google.api.field_behavior";
const FIELD_BEHAVIOR_REQUIRED: i32 = 2;

/// proto2 `required`, `google.api.field_behavior = REQUIRED`, or `(buf.validate.field).required`
/// in the field's `rules` (as the caller has read them).
pub fn is_required(pool: &DescriptorPool, field: &FieldDescriptor, rules: Option<&FieldRules>) -> bool {
    field.cardinality() == Cardinality::Required
        || has_required_behavior(pool, field)
        || rules.is_some_and(|rules| rules.required && rules.ignore != Ignore::Always)
}

fn has_required_behavior(pool: &DescriptorPool, field: &FieldDescriptor) -> bool {
    let Some(extension) = pool.get_extension_by_name(FIELD_BEHAVIOR_EXTENSION) else {
        return false;
    };
    let options = field.options();
    if !options.has_extension(&extension) {
        return false;
    }
    match options.get_extension(&extension).as_ref() {
        ProtoValue::List(behaviors) => behaviors
            .iter()
            .any(|behavior| matches!(behavior, ProtoValue::EnumNumber(FIELD_BEHAVIOR_REQUIRED))),
        _ => false,
    }
}

//! Which fields a request must carry: proto2 `required`, and `google.api.field_behavior =
//! REQUIRED` (when the pool declares the option).

use prost_reflect::{Cardinality, DescriptorPool, FieldDescriptor, Value as ProtoValue};

const FIELD_BEHAVIOR_EXTENSION: &str = "google.api.field_behavior";
const FIELD_BEHAVIOR_REQUIRED: i32 = 2;

/// proto2 `required`, or `google.api.field_behavior = REQUIRED` (when the pool declares it).
pub fn is_required(pool: &DescriptorPool, field: &FieldDescriptor) -> bool {
    if field.cardinality() == Cardinality::Required {
        return true;
    }
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

use super::*;
use crate::descriptors::embedded_pool;

#[test]
fn well_known_types_are_one_list() {
    let pool = embedded_pool().unwrap();
    let well_known = pool
        .all_messages()
        .filter(|message| WellKnown::of(message).is_some())
        .count();
    assert_eq!(well_known, 17);
    // A google.protobuf message that is not a well-known type is an ordinary message.
    let descriptor = pool.get_message_by_name("google.protobuf.FileDescriptorProto");
    assert!(descriptor.is_none_or(|message| WellKnown::of(&message).is_none()));
}

#[test]
fn map_keys_are_spelled_canonically() {
    let int64 = KeyForm::of(&Kind::Int64);
    assert!(int64.fits("-5") && !int64.fits("007") && !int64.fits("+7") && !int64.fits("x"));
    assert!(KeyForm::of(&Kind::Bool).fits("true") && !KeyForm::of(&Kind::Bool).fits("TRUE"));
    assert!(KeyForm::of(&Kind::String).fits("anything"));
}

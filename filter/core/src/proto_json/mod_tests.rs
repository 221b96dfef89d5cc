use super::*;
use crate::descriptors::embedded_pool;

fn field_form(message: &str, field: &str) -> Form {
    let pool = embedded_pool().unwrap();
    let field = pool
        .get_message_by_name(message)
        .unwrap()
        .get_field_by_name(field)
        .unwrap();
    Form::of(&field.kind())
}

#[test]
fn well_known_types_are_one_list() {
    let pool = embedded_pool().unwrap();
    let well_known: Vec<&str> = pool
        .all_messages()
        .filter(|message| WellKnown::of(message).is_some())
        .map(|message| message.full_name().to_owned())
        .collect::<Vec<_>>()
        .leak()
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(well_known.len(), 17, "{well_known:?}");
    // A google.protobuf message that is not a well-known type is an ordinary message.
    let descriptor = pool.get_message_by_name("google.protobuf.FileDescriptorProto");
    assert!(descriptor.is_none_or(|message| WellKnown::of(&message).is_none()));
}

#[test]
fn forms_of_scalars() {
    let int64 = field_form("test.kitchensink.v1.Scalars", "an_int64");
    assert!(int64.fits(&json!("-42")) && int64.fits(&json!(-42)) && int64.fits(&json!(1e3)));
    for refused in [
        json!("+42"),
        json!("042"),
        json!("-0"),
        json!(null),
        json!(1.5),
        json!("9223372036854775808"),
    ] {
        assert!(!int64.fits(&refused), "{refused}");
    }
    let uint64 = field_form("test.kitchensink.v1.Scalars", "a_uint64");
    assert!(uint64.fits(&json!(u64::MAX)) && !uint64.fits(&json!(18_446_744_073_709_551_616.0_f64)));
    let int32 = field_form("test.kitchensink.v1.Scalars", "an_int32");
    assert!(int32.fits(&json!(7)) && int32.fits(&json!(2.0)) && !int32.fits(&json!("7")));
    let float = field_form("test.kitchensink.v1.Scalars", "a_float");
    assert!(float.fits(&json!("NaN")) && float.fits(&json!(3.0e38)) && !float.fits(&json!(1e39)));
    assert!(!float.fits(&json!("nan")) && !float.fits(&json!("1.5")));
    let color = field_form("test.kitchensink.v1.Everything", "color");
    assert!(color.fits(&json!("COLOR_RED")) && !color.fits(&json!(1)));
    let wrapper = field_form("test.kitchensink.v1.Everything", "w_int32");
    assert!(wrapper.fits(&json!(3)) && !wrapper.fits(&json!("3")));
}

#[test]
fn forms_of_well_known_strings() {
    let at = field_form("test.kitchensink.v1.Everything", "at");
    assert!(at.fits(&json!("2026-01-31T12:00:00Z")) && at.fits(&json!("2026-01-31T12:00:00.123456789+01:00")));
    for refused in [
        "2026-01-31t12:00:00z",
        "2026-01-31T12:00:00.1234567891Z",
        "2026-01-31 12:00:00Z",
        "yesterday",
    ] {
        assert!(!at.fits(&json!(refused)), "{refused}");
    }
    let took = field_form("test.kitchensink.v1.Everything", "took");
    assert!(took.fits(&json!("1.5s")) && took.fits(&json!("-3s")));
    for refused in ["1.5", "+1s", "1.1234567891s", ".5s", "1.s"] {
        assert!(!took.fits(&json!(refused)), "{refused}");
    }
    let mask = field_form("test.kitchensink.v1.Everything", "mask");
    assert!(mask.fits(&json!("")) && mask.fits(&json!("name,price.amountMinor")));
    for refused in ["a..b", "price_amount", "Name", ",a"] {
        assert!(!mask.fits(&json!(refused)), "{refused}");
    }
}

#[test]
fn map_keys_are_spelled_canonically() {
    let int64 = KeyForm::of(&Kind::Int64);
    assert!(int64.fits("-5") && !int64.fits("007") && !int64.fits("+7") && !int64.fits("x"));
    assert!(KeyForm::of(&Kind::Bool).fits("true") && !KeyForm::of(&Kind::Bool).fits("TRUE"));
    assert!(KeyForm::of(&Kind::String).fits("anything"));
}

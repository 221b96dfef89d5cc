//! Reading a declared `buf.validate` message (`FieldRules`, `StringRules`, a CEL `Rule` …) by
//! field name. protovalidate's published `validate.proto` and Switchblade's shorter one
//! (`proto/buf/validate/validate.proto`) name their fields alike, and a declaration that lacks
//! a field has not set it. A field that holds another type than protovalidate declares is
//! refused, naming it, rather than read as unset: its rule would silently not be enforced.

use prost_reflect::{DynamicMessage, ReflectMessage, Value as ProtoValue};

/// Typed reads of a declared message's fields, each an error naming the field when its value
/// is not of the type protovalidate gives it.
pub trait Declared {
    /// The value of field `name` if it is set, read by `read` (`None`: not what `expected`
    /// describes).
    fn one<T>(&self, name: &str, expected: &str, read: impl Fn(&ProtoValue) -> Option<T>) -> Result<Option<T>, String>;

    /// The values of list field `name` (none if it is not set), each read by `read`.
    fn many<T>(&self, name: &str, expected: &str, read: impl Fn(&ProtoValue) -> Option<T>) -> Result<Vec<T>, String>;

    /// A `bool` field: unset is false.
    fn flag(&self, name: &str) -> Result<bool, String> {
        let read = |value: &ProtoValue| value.as_bool();
        Ok(self.one(name, "a bool", read)?.unwrap_or(false))
    }

    fn uint64(&self, name: &str) -> Result<Option<u64>, String> {
        self.one(name, "a uint64", ProtoValue::as_u64)
    }

    fn text(&self, name: &str) -> Result<Option<String>, String> {
        self.one(name, "a string", |value| value.as_str().map(str::to_owned))
    }

    /// An enum field's number.
    fn enum_number(&self, name: &str) -> Result<Option<i32>, String> {
        self.one(name, "an enum value", ProtoValue::as_enum_number)
    }

    fn message(&self, name: &str) -> Result<Option<DynamicMessage>, String> {
        self.one(name, "a message", |value| value.as_message().cloned())
    }

    fn strings(&self, name: &str) -> Result<Vec<String>, String> {
        self.many(name, "strings", |value| value.as_str().map(str::to_owned))
    }

    fn messages(&self, name: &str) -> Result<Vec<DynamicMessage>, String> {
        self.many(name, "messages", |value| value.as_message().cloned())
    }
}

impl Declared for DynamicMessage {
    fn one<T>(&self, name: &str, expected: &str, read: impl Fn(&ProtoValue) -> Option<T>) -> Result<Option<T>, String> {
        let Some(value) = set_value(self, name) else {
            return Ok(None);
        };
        match read(&value) {
            Some(read) => Ok(Some(read)),
            None => Err(format!(
                "`{}.{name}` holds {}, where protovalidate declares {expected}",
                self.descriptor().full_name(),
                described(&value)
            )),
        }
    }

    fn many<T>(&self, name: &str, expected: &str, read: impl Fn(&ProtoValue) -> Option<T>) -> Result<Vec<T>, String> {
        let Some(value) = set_value(self, name) else {
            return Ok(Vec::new());
        };
        let field = format!("{}.{name}", self.descriptor().full_name());
        let ProtoValue::List(items) = value.as_ref() else {
            return Err(format!(
                "`{field}` holds {}, where protovalidate declares a list of {expected}",
                described(&value)
            ));
        };
        items
            .iter()
            .map(|item| {
                read(item).ok_or_else(|| {
                    format!(
                        "`{field}` holds {} in its list, where protovalidate declares {expected}",
                        described(item)
                    )
                })
            })
            .collect()
    }
}

/// A field's value if it is set; `None` also when the declaration has no such field.
fn set_value<'a>(message: &'a DynamicMessage, name: &str) -> Option<std::borrow::Cow<'a, ProtoValue>> {
    if message.has_field_by_name(name) {
        message.get_field_by_name(name)
    } else {
        None
    }
}

/// A value's type, for an error that says what a field holds.
fn described(value: &ProtoValue) -> String {
    match value {
        ProtoValue::Bool(_) => "a bool".to_owned(),
        ProtoValue::I32(_) => "an int32".to_owned(),
        ProtoValue::I64(_) => "an int64".to_owned(),
        ProtoValue::U32(_) => "a uint32".to_owned(),
        ProtoValue::U64(_) => "a uint64".to_owned(),
        ProtoValue::F32(_) => "a float".to_owned(),
        ProtoValue::F64(_) => "a double".to_owned(),
        ProtoValue::String(_) => "a string".to_owned(),
        ProtoValue::Bytes(_) => "bytes".to_owned(),
        ProtoValue::EnumNumber(_) => "an enum value".to_owned(),
        ProtoValue::Message(message) => format!("a {}", message.descriptor().full_name()),
        ProtoValue::List(_) => "a list".to_owned(),
        ProtoValue::Map(_) => "a map".to_owned(),
    }
}

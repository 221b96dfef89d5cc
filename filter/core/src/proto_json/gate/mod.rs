//! The gate: tool arguments (JSON) to the request message's protobuf bytes, in one walk that
//! holds every value to the mapping table ([`Form`]) and writes the wire bytes as it goes. A
//! value the table refuses stops the walk with its JSON path, what the field takes and what
//! was given, so nothing the schema does not promise reaches an upstream. A field that reads
//! is then held to its `buf.validate` rules ([`super::rules`]), and so is a message, once its
//! fields are read.

mod refusal;
mod required;
mod well_known;

use std::collections::HashMap;

use prost_reflect::{DescriptorPool, FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{Map, Value};

use super::form::{encode_key, scalar, Encoded};
use super::rules::{pool_rules, MessageRules, Place};
use super::snake_case;
use super::time::{parse_duration, parse_timestamp};
use super::well_known::is_field_mask_shape;
use super::wire::put_len;
use super::{field_by_key, given_value, json_type, Form, KeyForm, WellKnown};
pub use refusal::ArgumentError;
use refusal::{refusal, refusal_with};
pub use required::is_required;
use well_known::{json_value, list_values, struct_fields};

const ANY_TYPE_KEY: &str = "@type";

/// The gate of one descriptor pool: which fields each message requires, the `buf.validate`
/// rules of each message that has any, and where the messages inside `Any` values are found.
#[derive(Debug, Default)]
pub struct Gate {
    /// By message full name, for the messages that have either; one lookup per message.
    checks: HashMap<String, Checks>,
    pool: DescriptorPool,
}

/// What one message asks of its fields beyond their types.
#[derive(Debug, Default)]
struct Checks {
    required: Vec<FieldDescriptor>,
    rules: Option<MessageRules>,
}

/// Why a value was refused: for itself (with a detail, if the field's words are not enough),
/// or for something inside it, already worded with its own path.
enum Refused {
    Value(Option<&'static str>),
    Inside(ArgumentError),
}

impl From<ArgumentError> for Refused {
    fn from(error: ArgumentError) -> Self {
        Refused::Inside(error)
    }
}

impl From<Option<&'static str>> for Refused {
    fn from(why: Option<&'static str>) -> Self {
        Refused::Value(why)
    }
}

/// Where the walk is, as JSON keys and list indexes; written out only for an error.
#[derive(Default)]
struct Path<'a>(Vec<Step<'a>>);

enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

impl Path<'_> {
    fn error(&self, problem: String) -> ArgumentError {
        let mut path = String::new();
        for step in &self.0 {
            match step {
                Step::Key(key) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(key);
                }
                Step::Index(index) => path.push_str(&format!("[{index}]")),
            }
        }
        ArgumentError {
            path: if path.is_empty() { ".".into() } else { path },
            problem,
        }
    }

    /// The error for `value` of `field` (or of one element of it), refused as `refused` says.
    fn refused(&self, field: &FieldDescriptor, element: bool, value: &Value, refused: Refused) -> ArgumentError {
        match refused {
            Refused::Inside(error) => error,
            Refused::Value(why) => self.error(refusal(field, element, value, why)),
        }
    }
}

impl Gate {
    /// The gate of `pool`; or why a `buf.validate` rule in it cannot be enforced as written.
    pub fn build(pool: &DescriptorPool) -> Result<Self, String> {
        let mut rules = pool_rules(pool)?;
        let mut checks: HashMap<String, Checks> = HashMap::new();
        for message in pool.all_messages() {
            let message_rules = rules.remove(message.full_name());
            let required: Vec<FieldDescriptor> = message
                .fields()
                .filter(|field| {
                    let field_rules = message_rules.as_ref().and_then(|rules| rules.field(field));
                    is_required(pool, field, field_rules)
                })
                .collect();
            if !required.is_empty() || message_rules.is_some() {
                checks.insert(
                    message.full_name().to_owned(),
                    Checks {
                        required,
                        rules: message_rules,
                    },
                );
            }
        }
        Ok(Gate {
            checks,
            pool: pool.clone(),
        })
    }

    /// The `buf.validate` rules of a message, if it has any.
    pub fn rules(&self, message: &str) -> Option<&MessageRules> {
        self.checks.get(message).and_then(|checks| checks.rules.as_ref())
    }

    /// The `message` that `arguments` describe, protobuf-encoded.
    pub fn encode(&self, message: &MessageDescriptor, arguments: &Value) -> Result<Vec<u8>, ArgumentError> {
        let mut out = Vec::with_capacity(64);
        let mut path = Path::default();
        match Form::of(&Kind::Message(message.clone())) {
            Form::WellKnown(well_known) => {
                self.well_known(&well_known, arguments, &mut path, &mut out)
                    .map_err(|refused| match refused {
                        Refused::Inside(error) => error,
                        Refused::Value(why) => path.error(refusal_with(well_known.expected(), arguments, why)),
                    })?;
            }
            _ => {
                let Value::Object(object) = arguments else {
                    let problem = format!("arguments must be a JSON object, got {}", json_type(arguments));
                    return Err(path.error(problem));
                };
                self.message(message, object, false, &mut path, &mut out)?;
            }
        }
        Ok(out)
    }

    /// A message's fields, from the keys of `object` (all but `@type` inside an `Any`).
    fn message<'a>(
        &self,
        message: &MessageDescriptor,
        object: &'a Map<String, Value>,
        in_any: bool,
        path: &mut Path<'a>,
        out: &mut Vec<u8>,
    ) -> Result<(), ArgumentError> {
        let checks = self.checks.get(message.full_name());
        let required = checks.map(|checks| &checks.required);
        let rules = checks.and_then(|checks| checks.rules.as_ref());
        let mut seen: Vec<(u32, &str)> = Vec::with_capacity(object.len());
        for (key, value) in object {
            if in_any && key == ANY_TYPE_KEY {
                continue;
            }
            let Some(field) = field_by_key(message, key) else {
                let fields: Vec<String> = message.fields().map(|field| field.name().to_owned()).collect();
                let problem = format!(
                    "unknown field `{key}`; {} has: {}",
                    message.full_name(),
                    fields.join(", ")
                );
                return Err(path.error(problem));
            };
            if let Some((_, other)) = seen.iter().find(|(number, _)| *number == field.number()) {
                let problem = format!(
                    "`{other}` and `{key}` are the same field ({}); give it once",
                    field.name()
                );
                return Err(path.error(problem));
            }
            seen.push((field.number(), key));
            // A required field given as null is missing, and is said to be so below.
            if value.is_null() && required.is_some_and(|fields| fields.iter().any(|f| f.number() == field.number())) {
                continue;
            }
            path.0.push(Step::Key(key));
            self.field(&field, value, path, out)?;
            if let Some(field_rules) = rules.and_then(|rules| rules.field(&field)) {
                if !value.is_null() {
                    field_rules.check_given(&field, value).map_err(|violation| {
                        if let Some(place) = violation.place {
                            path.0.push(match place {
                                Place::Index(index) => Step::Index(index),
                                Place::Key(key) => Step::Key(key),
                            });
                        }
                        path.error(violation.problem)
                    })?;
                }
            }
            path.0.pop();
        }
        check_oneofs(message, object, path)?;
        if let Some(missing) = required.into_iter().flatten().find(|field| !is_given(object, field)) {
            return Err(path.error(format!("missing required field `{}`", missing.name())));
        }
        if let Some(rules) = rules {
            for exclusive in &rules.exclusive {
                exclusive.check(object).map_err(|problem| path.error(problem))?;
            }
            for (field, field_rules) in &rules.fields {
                if !is_given(object, field) {
                    field_rules.check_absent(field).map_err(|violation| {
                        let mut error = path.error(violation.problem);
                        error.path = match error.path.as_str() {
                            "." => field.name().to_owned(),
                            above => format!("{above}.{}", field.name()),
                        };
                        error
                    })?;
                }
            }
            // The message's own rules, once its fields hold.
            rules
                .check_message(message, object)
                .map_err(|problem| path.error(problem))?;
        }
        Ok(())
    }

    fn field<'a>(
        &self,
        field: &FieldDescriptor,
        value: &'a Value,
        path: &mut Path<'a>,
        out: &mut Vec<u8>,
    ) -> Result<(), ArgumentError> {
        if field.is_map() {
            return self.map(field, value, path, out);
        }
        if !field.is_list() {
            let always = field.supports_presence();
            return self
                .value(field, value, always, path, out)
                .map_err(|refused| path.refused(field, false, value, refused));
        }
        let Value::Array(items) = value else {
            return Err(path.refused(field, false, value, Refused::Value(None)));
        };
        let mut packed = Vec::new();
        for (index, item) in items.iter().enumerate() {
            path.0.push(Step::Index(index));
            let written = if field.is_packed() {
                scalar(&field.kind(), item)
                    .map(|(encoded, _)| encoded.put_bare(&mut packed))
                    .map_err(Refused::Value)
            } else {
                self.value(field, item, true, path, out)
            };
            written.map_err(|refused| path.refused(field, true, item, refused))?;
            path.0.pop();
        }
        if !packed.is_empty() {
            put_len(out, field.number(), &packed);
        }
        Ok(())
    }

    /// A map: one entry message per key, the key spelled as the table says.
    fn map<'a>(
        &self,
        field: &FieldDescriptor,
        value: &'a Value,
        path: &mut Path<'a>,
        out: &mut Vec<u8>,
    ) -> Result<(), ArgumentError> {
        let (Kind::Message(entry), Value::Object(map)) = (field.kind(), value) else {
            return Err(path.refused(field, false, value, Refused::Value(None)));
        };
        let (key_field, value_field) = (entry.map_entry_key_field(), entry.map_entry_value_field());
        let key_form = KeyForm::of(&key_field.kind());
        let mut bytes = Vec::new();
        for (key, item) in map {
            if !key_form.fits(key) {
                return Err(path.refused(field, false, value, Refused::Value(None)));
            }
            bytes.clear();
            encode_key(&key_field.kind(), key, &mut bytes);
            path.0.push(Step::Key(key));
            self.value(&value_field, item, true, path, &mut bytes)
                .map_err(|refused| path.refused(field, true, item, refused))?;
            path.0.pop();
            put_len(out, field.number(), &bytes);
        }
        Ok(())
    }

    /// The value of `field` (or of one element of it), tagged with its number. A scalar with
    /// no presence is left out when it is the default, as protobuf writes it.
    fn value<'a>(
        &self,
        field: &FieldDescriptor,
        value: &'a Value,
        always: bool,
        path: &mut Path<'a>,
        out: &mut Vec<u8>,
    ) -> Result<(), Refused> {
        let number = field.number();
        match Form::of(&field.kind()) {
            Form::Message(message) => {
                let Value::Object(object) = value else {
                    return Err(Refused::Value(None));
                };
                let mut bytes = Vec::new();
                self.message(&message, object, false, path, &mut bytes)?;
                put_len(out, number, &bytes);
            }
            Form::WellKnown(well_known) => {
                let mut bytes = Vec::new();
                self.well_known(&well_known, value, path, &mut bytes)?;
                put_len(out, number, &bytes);
            }
            _ => {
                let (encoded, is_default) = scalar(&field.kind(), value)?;
                if always || !is_default {
                    encoded.put(out, number);
                }
            }
        }
        Ok(())
    }

    /// A well-known type's value, written as the fields of its message.
    fn well_known<'a>(
        &self,
        well_known: &WellKnown,
        value: &'a Value,
        path: &mut Path<'a>,
        out: &mut Vec<u8>,
    ) -> Result<(), Refused> {
        match (well_known, value) {
            (WellKnown::Timestamp | WellKnown::Duration, Value::String(text)) => {
                let parsed = match well_known {
                    WellKnown::Timestamp => parse_timestamp(text),
                    _ => parse_duration(text),
                };
                let (seconds, nanos) = parsed.map_err(|why| Refused::Value(Some(why)))?;
                if seconds != 0 {
                    Encoded::Varint(seconds as u64).put(out, 1);
                }
                if nanos != 0 {
                    Encoded::Varint(i64::from(nanos) as u64).put(out, 2);
                }
            }
            (WellKnown::FieldMask, Value::String(text)) if is_field_mask_shape(text) => {
                for mask_path in text.split(',').filter(|mask_path| !mask_path.is_empty()) {
                    put_len(out, 1, snake_case(mask_path).as_bytes());
                }
            }
            (WellKnown::Struct, Value::Object(object)) => struct_fields(object, out),
            (WellKnown::ListValue, Value::Array(items)) => list_values(items, out),
            (WellKnown::Value, value) => json_value(value, out),
            (WellKnown::Empty, Value::Object(object)) if object.is_empty() => {}
            (WellKnown::Wrapper(kind), value) => {
                let (encoded, is_default) = scalar(kind, value)?;
                if !is_default {
                    encoded.put(out, 1);
                }
            }
            (WellKnown::Any, Value::Object(object)) => self.any(object, path, out)?,
            _ => return Err(Refused::Value(None)),
        }
        Ok(())
    }

    /// An `Any`: `@type` names the message, and the other keys are its fields (or `value`
    /// holds the JSON of a well-known type).
    fn any<'a>(&self, object: &'a Map<String, Value>, path: &mut Path<'a>, out: &mut Vec<u8>) -> Result<(), Refused> {
        let Some(Value::String(type_url)) = object.get(ANY_TYPE_KEY) else {
            return Err(Refused::Value(Some("\"@type\" is missing")));
        };
        let name = type_url.rsplit('/').next().unwrap_or(type_url);
        let message = self
            .pool
            .get_message_by_name(name)
            .ok_or(Refused::Value(Some("no message of that type is known here")))?;
        let mut bytes = Vec::new();
        match Form::of(&Kind::Message(message.clone())) {
            Form::WellKnown(well_known) => {
                if let Some(unknown) = object
                    .keys()
                    .find(|key| !matches!(key.as_str(), ANY_TYPE_KEY | "value"))
                {
                    let problem = format!("unknown field `{unknown}`; a {name} in an Any takes only `value`");
                    return Err(Refused::Inside(path.error(problem)));
                }
                let value = object.get("value").unwrap_or(&Value::Null);
                path.0.push(Step::Key("value"));
                self.well_known(&well_known, value, path, &mut bytes)
                    .map_err(|refused| match refused {
                        Refused::Inside(error) => error,
                        Refused::Value(why) => path.error(refusal_with(well_known.expected(), value, why)),
                    })?;
                path.0.pop();
            }
            _ => self.message(&message, object, true, path, &mut bytes)?,
        }
        put_len(out, 1, type_url.as_bytes());
        put_len(out, 2, &bytes);
        Ok(())
    }
}

fn is_given(object: &Map<String, Value>, field: &FieldDescriptor) -> bool {
    given_value(object, field).is_some()
}

/// At most one member of each oneof, or the members given, named.
fn check_oneofs(
    message: &MessageDescriptor,
    object: &Map<String, Value>,
    path: &Path<'_>,
) -> Result<(), ArgumentError> {
    for oneof in message.oneofs().filter(|oneof| !oneof.is_synthetic()) {
        let set: Vec<String> = oneof
            .fields()
            .filter(|field| object.contains_key(field.name()) || object.contains_key(field.json_name()))
            .map(|field| format!("`{}`", field.name()))
            .collect();
        if set.len() > 1 {
            let problem = format!(
                "{} are all members of oneof `{}`; set at most one",
                set.join(", "),
                oneof.name()
            );
            return Err(path.error(problem));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

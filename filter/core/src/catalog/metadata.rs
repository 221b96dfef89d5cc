//! The gRPC metadata a tool's calls carry: fixed text, or text with the values of the call's
//! arguments in it (`{name}`, `{parent.id}`), as Google's APIs want their routing header
//! (`x-goog-request-params: name={name}`) and multi-tenant services a tenant from the request.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use prost_reflect::{Kind, MessageDescriptor};
use serde_json::Value;

use crate::config::ConfigError;

/// What an argument's value keeps as it is in metadata: RFC 3986's unreserved characters.
/// Everything else is percent-encoded, so that a value is whole and a header stays one line.
const ENCODED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// One metadata value: its text, and the arguments whose values go into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataValue {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    /// A path into the request message, its last field a scalar: each field's JSON name and
    /// proto name (arguments may use either).
    Field(Vec<(String, String)>),
}

impl MetadataValue {
    /// `text` read as a template against the tool's request message (`input`, `None` for a tool
    /// whose arguments are not one message): `{a.b}` is the value of the argument at that path,
    /// `{{` and `}}` a brace. `at` names the key, for the error.
    pub fn parse(at: &str, text: &str, input: Option<&MessageDescriptor>) -> Result<Self, ConfigError> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(brace) = rest.find(['{', '}']) {
            literal.push_str(&rest[..brace]);
            let after = &rest[brace + 1..];
            match (&rest[brace..=brace], after.chars().next()) {
                ("{", Some('{')) | ("}", Some('}')) => {
                    literal.push_str(&rest[brace..=brace]);
                    rest = &after[1..];
                }
                ("{", _) => {
                    let Some(end) = after.find('}') else {
                        return Err(ConfigError(format!(
                            "{at}: {text:?} opens `{{` without closing it; write {{field}} for an argument's value, {{{{ for a brace"
                        )));
                    };
                    if !literal.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut literal)));
                    }
                    parts.push(Part::Field(field_path(at, &after[..end], input)?));
                    rest = &after[end + 1..];
                }
                _ => {
                    return Err(ConfigError(format!(
                        "{at}: {text:?} has a `}}` that closes nothing; write }}}} for a brace"
                    )))
                }
            }
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(MetadataValue { parts })
    }

    /// The paths of the arguments the value reads (each field's JSON and proto names).
    pub fn arguments(&self) -> impl Iterator<Item = &[(String, String)]> {
        self.parts.iter().filter_map(|part| match part {
            Part::Field(path) => Some(path.as_slice()),
            Part::Text(_) => None,
        })
    }

    /// Fixed text, as a service's metadata is.
    pub fn fixed(text: &str) -> Self {
        MetadataValue {
            parts: vec![Part::Text(text.to_owned())],
        }
    }

    /// The value, from the call's arguments; `None` when an argument it reads is absent (or
    /// not a single value): the metadata is then not sent.
    pub fn render(&self, arguments: Option<&Value>) -> Option<String> {
        let mut text = String::new();
        for part in &self.parts {
            match part {
                Part::Text(literal) => text.push_str(literal),
                Part::Field(path) => {
                    let value = path.iter().try_fold(arguments?, |value, (json_name, proto_name)| {
                        value.get(json_name).or_else(|| value.get(proto_name))
                    })?;
                    let value = match value {
                        Value::String(value) => value.clone(),
                        Value::Number(number) => number.to_string(),
                        Value::Bool(flag) => flag.to_string(),
                        _ => return None,
                    };
                    text.extend(utf8_percent_encode(&value, ENCODED));
                }
            }
        }
        Some(text)
    }
}

/// `arguments` without the argument at `path` (by its JSON or its proto name).
pub fn remove_argument(arguments: &mut Value, path: &[(String, String)]) {
    let Some(((json_name, proto_name), parents)) = path.split_last() else {
        return;
    };
    let parent = parents.iter().try_fold(arguments, |value, (json_name, proto_name)| {
        let key = if value.get(json_name).is_some() {
            json_name
        } else {
            proto_name
        };
        value.get_mut(key)
    });
    if let Some(Value::Object(parent)) = parent {
        parent.remove(json_name);
        parent.remove(proto_name);
    }
}

/// The field names of `{path}`, each checked against the message it is read in: the last one
/// a single value, the ones before it messages.
fn field_path(at: &str, path: &str, input: Option<&MessageDescriptor>) -> Result<Vec<(String, String)>, ConfigError> {
    let Some(mut message) = input.cloned() else {
        return Err(ConfigError(format!(
            "{at}: {{{path}}} reads an argument, and this tool's arguments are not one request message (a stream of messages, or a message whose JSON is not an object)"
        )));
    };
    let names: Vec<&str> = path.split('.').collect();
    let mut json_names = Vec::with_capacity(names.len());
    for (index, name) in names.iter().enumerate() {
        let field = message
            .fields()
            .find(|field| field.name() == *name || field.json_name() == *name)
            .ok_or_else(|| {
                ConfigError(format!(
                    "{at}: {{{path}}}: {} has no field {name:?}",
                    message.full_name()
                ))
            })?;
        json_names.push((field.json_name().to_owned(), field.name().to_owned()));
        let last = index + 1 == names.len();
        match (field.kind(), field.is_list() || field.is_map(), last) {
            (_, true, _) => {
                return Err(ConfigError(format!(
                    "{at}: {{{path}}}: {} is a repeated field or a map, not one value",
                    field.full_name()
                )))
            }
            (Kind::Message(inner), false, false) => message = inner,
            (Kind::Message(_), false, true) => {
                return Err(ConfigError(format!(
                    "{at}: {{{path}}}: {} is a message; name one of its fields",
                    field.full_name()
                )))
            }
            (_, false, false) => {
                return Err(ConfigError(format!(
                    "{at}: {{{path}}}: {} is not a message, and has no fields",
                    field.full_name()
                )))
            }
            (_, false, true) => {}
        }
    }
    Ok(json_names)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::descriptors::embedded_pool;

    fn input(message: &str) -> MessageDescriptor {
        embedded_pool().unwrap().get_message_by_name(message).unwrap()
    }

    #[test]
    fn a_template_takes_the_arguments_values_encoded() {
        let request = input("demo.catalog.v1.GetItemRequest");
        let value = MetadataValue::parse("at `x`", "id={id}&v=1 {{literal}}", Some(&request)).unwrap();
        assert_eq!(
            value.render(Some(&json!({"id": "a/b c"}))).as_deref(),
            Some("id=a%2Fb%20c&v=1 {literal}")
        );
        assert_eq!(
            value.render(Some(&json!({"id": 7}))).as_deref(),
            Some("id=7&v=1 {literal}")
        );
        assert_eq!(value.render(Some(&json!({}))), None, "an absent argument sends nothing");
        assert_eq!(value.render(None), None);
        let fixed = MetadataValue::parse("at `x`", "acme", None).unwrap();
        assert_eq!(fixed.render(None).as_deref(), Some("acme"));
    }

    #[test]
    fn an_argument_read_is_removed_by_either_name() {
        let request = input("demo.catalog.v1.GetItemRequest");
        let value = MetadataValue::parse("at `x`", "{id}", Some(&request)).unwrap();
        let path = value.arguments().next().unwrap();
        let mut arguments = json!({"id": "a", "other": 1});
        remove_argument(&mut arguments, path);
        assert_eq!(arguments, json!({"other": 1}));
        let mut absent = json!({"other": 1});
        remove_argument(&mut absent, path);
        assert_eq!(absent, json!({"other": 1}));
    }

    #[test]
    fn a_template_that_names_no_single_field_is_refused() {
        let request = input("demo.catalog.v1.GetItemRequest");
        for (text, expected) in [
            ("{nope}", "demo.catalog.v1.GetItemRequest has no field \"nope\""),
            ("{id", "opens `{` without closing it"),
            ("id}", "has a `}` that closes nothing"),
            ("{id.x}", "is not a message, and has no fields"),
        ] {
            let error = MetadataValue::parse("at `tools.M.metadata.k`", text, Some(&request))
                .unwrap_err()
                .0;
            assert!(
                error.starts_with("at `tools.M.metadata.k`: ") && error.contains(expected),
                "{text}: {error}"
            );
        }
        let error = MetadataValue::parse("at `k`", "{id}", None).unwrap_err().0;
        assert!(
            error.contains("this tool's arguments are not one request message"),
            "{error}"
        );
    }
}

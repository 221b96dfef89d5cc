//! Turns a refusal of the JSON parser into words a model can act on: at this path, this was
//! expected, that was given. The parser knows where it stopped; the descriptor knows what
//! belongs there.

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::Value;

use super::transcode::ArgumentError;
use super::{expected_in_field, field_by_key, Form};

/// Restates `error` (from parsing `arguments` as `message`) with what the field expects.
pub fn explain(message: &MessageDescriptor, arguments: &Value, error: ArgumentError) -> ArgumentError {
    let segments = split_path(&error.path);
    let Some(spot) = locate(message, arguments, &segments) else {
        return error;
    };
    let problem = match spot.place {
        Place::Message(message) => explain_in_message(&message, spot.value, &error.problem),
        // Errors about an object's keys are about the message the field holds.
        Place::Field(field, element) => match (field.kind(), is_about_keys(&error.problem)) {
            (Kind::Message(inner), true) if element || !(field.is_list() || field.is_map()) => {
                explain_in_message(&inner, spot.value, &error.problem)
            }
            _ => Some(explain_in_field(&field, element, spot.value, &error.problem)),
        },
    };
    ArgumentError {
        path: error.path,
        problem: problem.unwrap_or(error.problem),
    }
}

/// What sits at a path: a message (for errors about its keys) or a field's value.
struct Spot<'a> {
    place: Place,
    value: &'a Value,
}

enum Place {
    Message(MessageDescriptor),
    /// A field, and whether the value is one element of it (of a list, or a map's value).
    Field(FieldDescriptor, bool),
}

fn split_path(path: &str) -> Vec<String> {
    if path == "." {
        return Vec::new();
    }
    let mut segments = Vec::new();
    for part in path.split('.') {
        let mut rest = part;
        while let Some(open) = rest.find('[') {
            if open > 0 {
                segments.push(rest[..open].to_owned());
            }
            let close = rest[open..].find(']').map_or(rest.len(), |close| open + close + 1);
            segments.push(rest[open..close].to_owned());
            rest = &rest[close..];
        }
        if !rest.is_empty() {
            segments.push(rest.to_owned());
        }
    }
    segments
}

fn locate<'a>(message: &MessageDescriptor, arguments: &'a Value, segments: &[String]) -> Option<Spot<'a>> {
    let mut place = Place::Message(message.clone());
    let mut value = arguments;
    for segment in segments {
        let (next_place, next_value) = match (&place, segment.strip_prefix('[')) {
            (Place::Field(field, false), Some(index)) if field.is_list() => {
                let index: usize = index.trim_end_matches(']').parse().ok()?;
                (element_place(field), value.get(index)?)
            }
            (Place::Field(field, false), None) if field.is_map() => (element_place(field), value.get(segment)?),
            (Place::Message(message), None) => {
                let field = field_by_key(message, segment)?;
                (Place::Field(field, false), value.get(segment)?)
            }
            (Place::Field(field, _), None) => {
                let Kind::Message(inner) = field.kind() else {
                    return None;
                };
                let field = field_by_key(&inner, segment)?;
                (Place::Field(field, false), value.get(segment)?)
            }
            _ => return None,
        };
        place = next_place;
        value = next_value;
    }
    Some(Spot { place, value })
}

/// A list's element, or a map's value: described by the field, one element at a time.
fn element_place(field: &FieldDescriptor) -> Place {
    Place::Field(field.clone(), true)
}

fn is_about_keys(problem: &str) -> bool {
    problem.starts_with("unrecognized field name ") || problem.starts_with("multiple fields provided for oneof ")
}

fn explain_in_message(message: &MessageDescriptor, value: &Value, problem: &str) -> Option<String> {
    if let Some(name) = quoted_after(problem, "unrecognized field name ") {
        let fields: Vec<String> = message.fields().map(|field| field.name().to_owned()).collect();
        let fields = fields.join(", ");
        return Some(format!("unknown field `{name}`; {} has: {fields}", message.full_name()));
    }
    if let Some(oneof) = quoted_after(problem, "multiple fields provided for oneof ") {
        let set: Vec<String> = message
            .oneofs()
            .find(|candidate| candidate.name() == oneof)?
            .fields()
            .filter(|field| {
                value
                    .get(field.name())
                    .or_else(|| value.get(field.json_name()))
                    .is_some()
            })
            .map(|field| format!("`{}`", field.name()))
            .collect();
        return Some(format!(
            "{} are all members of oneof `{oneof}`; set at most one",
            set.join(", ")
        ));
    }
    None
}

fn explain_in_field(field: &FieldDescriptor, element: bool, value: &Value, problem: &str) -> String {
    // "invalid type: …, expected …" only repeats what this sentence says; other details stay.
    let detail = (!problem.starts_with("invalid type:")).then_some(problem);
    refusal_with(expected_in_field(field, element), value, detail)
}

/// "expected <what the field holds>, got <value>": a value of a field that the mapping table
/// refuses (`element`: one element of a list or map, rather than the whole).
pub fn refusal(field: &FieldDescriptor, element: bool, value: &Value) -> String {
    let singular = !(field.is_list() || field.is_map());
    let hint = match (value, Form::of(&field.kind())) {
        (Value::Null, _) if singular => Some("leave a field out to leave it unset"),
        (Value::Number(_), Form::Enum(_)) if element || singular => Some("give the value's name, not its number"),
        _ => None,
    };
    refusal_with(expected_in_field(field, element), value, hint)
}

/// "expected <form>, got <value>", for a value that is not a field's (the message in an `Any`).
pub fn refusal_of(form: &Form, value: &Value) -> String {
    refusal_with(form.expected(), value, None)
}

fn refusal_with(expected: String, value: &Value, detail: Option<&str>) -> String {
    match detail {
        Some(detail) => format!("expected {expected}, got {} ({detail})", shown(value)),
        None => format!("expected {expected}, got {}", shown(value)),
    }
}

/// The offending value, short enough for one line.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 40 {
        return text;
    }
    let cut: String = text.chars().take(37).collect();
    format!("{cut}...")
}

fn quoted_after<'a>(problem: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = problem.strip_prefix(prefix)?;
    rest.strip_prefix('\'')?.strip_suffix('\'')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptors::embedded_pool;
    use crate::proto_json::transcode::encode_arguments;
    use serde_json::json;

    fn refusal(arguments: Value) -> String {
        let message = embedded_pool()
            .unwrap()
            .get_message_by_name("test.kitchensink.v1.Everything")
            .unwrap();
        let error = encode_arguments(&message, &arguments).unwrap_err();
        explain(&message, &arguments, error).to_string()
    }

    #[test]
    fn paths_split_into_fields_and_indexes() {
        assert_eq!(split_path("many[1].an_int32"), ["many", "[1]", "an_int32"]);
        assert_eq!(
            split_path("tree.children[0].children[2]"),
            ["tree", "children", "[0]", "children", "[2]"]
        );
        assert!(split_path(".").is_empty());
    }

    #[test]
    fn scalars_say_what_they_expect_and_what_they_got() {
        assert_eq!(
            refusal(json!({"scalars": {"an_int32": "x"}})),
            "at `scalars.an_int32`: expected a 32-bit integer from -2147483648 to 2147483647, got \"x\" (invalid digit found in string)"
        );
        assert_eq!(
            refusal(json!({"scalars": {"a_uint32": -1}})),
            "at `scalars.a_uint32`: expected an unsigned 32-bit integer from 0 to 4294967295, got -1 (out of range integral type conversion attempted)"
        );
        assert!(refusal(json!({"many": [{}, {"an_int32": "two"}]}))
            .starts_with("at `many[1].an_int32`: expected a 32-bit integer"));
        assert!(refusal(json!({"color": "COLOR_BLUE"})).starts_with(
            "at `color`: expected one of COLOR_UNSPECIFIED, COLOR_CRIMSON, COLOR_RED, COLOR_GREEN, got \"COLOR_BLUE\""
        ));
        assert!(refusal(json!({"at": "yesterday"})).starts_with(
            "at `at`: expected an RFC 3339 timestamp such as \"2026-01-31T12:00:00Z\", got \"yesterday\""
        ));
        assert_eq!(
            refusal(json!({"numbers": "1,2,3"})),
            "at `numbers`: expected a list, each element a 32-bit integer from -2147483648 to 2147483647, got \"1,2,3\""
        );
        assert!(refusal(json!({"by_id": {"one": "a"}}))
            .starts_with("at `by_id`: expected an object whose keys are a 64-bit integer"));
        assert!(refusal(json!({"w_int32": "x"})).starts_with("at `w_int32`: expected a 32-bit integer"));
    }

    #[test]
    fn keys_say_what_the_message_has() {
        let text = refusal(json!({"nope": 1}));
        assert!(
            text.starts_with("unknown field `nope`; test.kitchensink.v1.Everything has: scalars, color, numbers,"),
            "{text}"
        );
        assert!(refusal(json!({"scalars": {"an_int33": 1}}))
            .starts_with("at `scalars`: unknown field `an_int33`; test.kitchensink.v1.Scalars has: a_double,"));
        assert_eq!(
            refusal(json!({"text": "a", "number": "1"})),
            "`text`, `number` are all members of oneof `choice`; set at most one"
        );
    }
}

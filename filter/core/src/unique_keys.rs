//! JSON parsing that refuses an object key given twice, at any depth. serde_json keeps the
//! last value silently, so a body could say one thing to a reader of the first key and
//! another to the filter.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

/// A key given twice: where (the object's JSON path, `.` for the top) and which.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    pub path: String,
    pub key: String,
}

/// Parses `bytes` as JSON read by `seed` (made from the nesting allowed, `max_depth`), which
/// refuses duplicate keys and deeper nesting with [`duplicate`] and [`UniqueKeys`]: a reader
/// of a known shape keeps the rule for itself and the values inside it.
pub fn parse_with<S, T>(bytes: &[u8], max_depth: usize, seed: impl Fn(usize) -> S) -> Result<T, ParseError>
where
    S: for<'de> DeserializeSeed<'de, Value = T>,
{
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = match seed(max_depth).deserialize(&mut deserializer) {
        Ok(value) => value,
        Err(error) => {
            let message = error.to_string();
            if message.starts_with(TOO_DEEP_MARKER) {
                return Err(ParseError::TooDeep);
            }
            if let Some(key) = message.strip_prefix(DUPLICATE_MARKER) {
                // serde_json appends " at line L column C" to custom errors.
                let key = key.rsplit_once(" at line ").map_or(key, |(key, _position)| key);
                // Rare: read again, keeping track of where, to say where the key is.
                return Err(ParseError::Duplicate(DuplicateKey {
                    path: duplicate_path(bytes, seed(max_depth)).unwrap_or_else(|| ".".into()),
                    key: key.to_owned(),
                }));
            }
            return Err(ParseError::Syntax(error));
        }
    };
    deserializer.end().map_err(ParseError::Syntax)?;
    Ok(value)
}

/// The JSON path of the object that gives a key twice in `bytes` (known to have one).
fn duplicate_path<S: for<'de> DeserializeSeed<'de>>(bytes: &[u8], seed: S) -> Option<String> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let mut track = serde_path_to_error::Track::new();
    let tracked = serde_path_to_error::Deserializer::new(&mut deserializer, &mut track);
    seed.deserialize(tracked).err()?;
    Some(track.path().to_string())
}

/// The error for `key` given twice in one object.
pub fn duplicate<E: Error>(key: &str) -> E {
    E::custom(format!("{DUPLICATE_MARKER}{key}"))
}

#[derive(Debug)]
pub enum ParseError {
    Syntax(serde_json::Error),
    Duplicate(DuplicateKey),
    /// Nested deeper than allowed.
    TooDeep,
}

const DUPLICATE_MARKER: &str = "\u{0}duplicate key:";
const TOO_DEEP_MARKER: &str = "\u{0}too deep";

/// A JSON value of any shape, read with the rule: no key twice in an object, no nesting deeper
/// than allowed.
#[derive(Clone, Copy)]
pub struct UniqueKeys {
    /// Objects and arrays that may still open inside this value.
    depth_left: usize,
}

impl UniqueKeys {
    /// A value inside which `depth_left` objects and arrays may still open.
    pub fn new(depth_left: usize) -> Self {
        UniqueKeys { depth_left }
    }

    /// The reader of a value inside this one, which is an object or an array.
    pub fn inner<E: Error>(self) -> Result<UniqueKeys, E> {
        match self.depth_left.checked_sub(1) {
            Some(depth_left) => Ok(UniqueKeys { depth_left }),
            None => Err(E::custom(TOO_DEEP_MARKER)),
        }
    }
}

impl<'de> DeserializeSeed<'de> for UniqueKeys {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for UniqueKeys {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E: Error>(self, value: f64) -> Result<Value, E> {
        Number::from_f64(value)
            .map(Value::Number)
            .ok_or_else(|| E::custom("a number that is not finite"))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.inner()?;
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = seq.next_element_seed(inner)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = self.inner()?;
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            // One lookup per key: the entry that finds a key new is where its value goes.
            let place = match object.entry(key) {
                Entry::Vacant(place) => place,
                Entry::Occupied(given) => return Err(duplicate(given.key())),
            };
            let value = map.next_value_seed(inner)?;
            place.insert(value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(bytes: &[u8]) -> Result<Value, ParseError> {
        parse_depth(bytes, 64)
    }

    fn parse_depth(bytes: &[u8], max_depth: usize) -> Result<Value, ParseError> {
        parse_with(bytes, max_depth, UniqueKeys::new)
    }

    #[test]
    fn nesting_is_bounded() {
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(parse_depth(nested(3).as_bytes(), 3).is_ok());
        assert!(matches!(parse_depth(nested(4).as_bytes(), 3), Err(ParseError::TooDeep)));
        assert!(matches!(
            parse_depth(br#"{"a":{"b":{"c":{}}}}"#, 3),
            Err(ParseError::TooDeep)
        ));
        // The configured limit, not serde_json's own, is what stops 10,000 levels.
        assert!(matches!(
            parse_depth(nested(10_000).as_bytes(), 64),
            Err(ParseError::TooDeep)
        ));
    }

    fn duplicate(text: &str) -> DuplicateKey {
        match parse(text.as_bytes()) {
            Err(ParseError::Duplicate(duplicate)) => duplicate,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parses_like_serde_json() {
        let text = r#"{"a":[1,-2,3.5,"x",null,true,{"b":{}}],"c":18446744073709551615}"#;
        assert_eq!(
            parse(text.as_bytes()).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
        assert_eq!(parse(b"[]").unwrap(), json!([]));
        assert!(matches!(parse(b"{} x"), Err(ParseError::Syntax(_))));
        assert!(matches!(parse(b"{"), Err(ParseError::Syntax(_))));
    }

    #[test]
    fn finds_duplicates_at_any_depth_with_their_path() {
        assert_eq!(
            duplicate(r#"{"a":1,"a":2}"#),
            DuplicateKey {
                path: ".".into(),
                key: "a".into()
            }
        );
        let nested = duplicate(r#"{"params":{"arguments":{"user_id":1,"user_id":{"$ne":null}}}}"#);
        assert_eq!(
            (nested.path.as_str(), nested.key.as_str()),
            ("params.arguments", "user_id")
        );
        let in_list = duplicate(r#"{"x":[{"k":1},{"k":1,"k":2}]}"#);
        assert_eq!((in_list.path.as_str(), in_list.key.as_str()), ("x[1]", "k"));
    }
}

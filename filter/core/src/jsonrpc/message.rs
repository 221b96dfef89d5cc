//! A POST body read straight into its messages' members: the envelope of a message is not
//! built as a JSON object first (its keys, a table and a string each would be allocations on
//! every request), only the values of `id`, `jsonrpc`, `method` and `params` are kept. The
//! rule on keys and depth holds throughout ([`unique_keys`]).

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::Body;
use crate::unique_keys::{self, ParseError, UniqueKeys};

/// One message of a body, as read: the members of its object (none if it is any other value,
/// which no JSON-RPC message is).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Message {
    pub members: Option<Members>,
}

/// The members of a message's object that JSON-RPC reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Members {
    pub id: Option<Value>,
    pub jsonrpc: Option<Value>,
    pub method: Option<Value>,
    pub params: Option<Value>,
    /// It has `result` or `error`: a client's answer.
    pub answers: bool,
}

impl Message {
    fn object(members: Members) -> Self {
        Message { members: Some(members) }
    }

    pub fn id(&self) -> Option<&Value> {
        self.members.as_ref()?.id.as_ref()
    }

    pub fn params(&self) -> Option<&Value> {
        self.members.as_ref()?.params.as_ref()
    }
}

impl Members {
    /// Where the value of the member `key` goes; none for a key beyond the four.
    fn slot(&mut self, key: &str) -> Option<&mut Option<Value>> {
        match key {
            "id" => Some(&mut self.id),
            "jsonrpc" => Some(&mut self.jsonrpc),
            "method" => Some(&mut self.method),
            "params" => Some(&mut self.params),
            _ => None,
        }
    }
}

fn answers(key: &str) -> bool {
    matches!(key, "result" | "error")
}

/// A message already parsed as a JSON value (a body read again with its last duplicates kept).
impl From<Value> for Message {
    fn from(value: Value) -> Self {
        let Value::Object(object) = value else {
            return Message::default();
        };
        let mut members = Members::default();
        for (key, value) in object {
            match members.slot(&key) {
                Some(slot) => *slot = Some(value),
                None => members.answers |= answers(&key),
            }
        }
        Message::object(members)
    }
}

impl From<Value> for Body {
    fn from(value: Value) -> Self {
        match value {
            Value::Array(batch) => Body {
                messages: batch.into_iter().map(Message::from).collect(),
                batch: true,
            },
            single => Body {
                messages: vec![Message::from(single)],
                batch: false,
            },
        }
    }
}

/// Reads `bytes` as a body: an array is a batch, anything else one message.
pub fn read_body(bytes: &[u8], max_depth: usize) -> Result<Body, ParseError> {
    // JSON's whitespace is these four; what follows decides the shape.
    let first = bytes.iter().find(|byte| !matches!(byte, b' ' | b'\t' | b'\n' | b'\r'));
    if first == Some(&b'[') {
        let batch = |depth_left| ReadBatch(UniqueKeys::new(depth_left));
        let messages = unique_keys::parse_with(bytes, max_depth, batch)?;
        Ok(Body { messages, batch: true })
    } else {
        let message = |depth_left| ReadMessage(UniqueKeys::new(depth_left));
        let message = unique_keys::parse_with(bytes, max_depth, message)?;
        Ok(Body {
            messages: vec![message],
            batch: false,
        })
    }
}

/// Reads an object key, borrowed from the body unless it has escapes.
struct ReadKey;

impl<'de> DeserializeSeed<'de> for ReadKey {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Cow<'de, str>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for ReadKey {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(key))
    }

    fn visit_str<E>(self, key: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(key.to_owned()))
    }

    fn visit_string<E>(self, key: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(key))
    }
}

/// Reads one message (its own level under the rule): an object's members; any other value is
/// read under the rule and not kept.
#[derive(Clone, Copy)]
struct ReadMessage(UniqueKeys);

impl<'de> DeserializeSeed<'de> for ReadMessage {
    type Value = Message;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Message, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ReadMessage {
    type Value = Message;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON-RPC message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Message, A::Error> {
        let inner = self.0.inner()?;
        let mut members = Members::default();
        // Keys beyond the four, to refuse one given twice; made only when there is one.
        let mut others: Option<HashSet<String>> = None;
        while let Some(key) = map.next_key_seed(ReadKey)? {
            match members.slot(&key) {
                Some(Some(_)) => return Err(unique_keys::duplicate(&key)),
                Some(slot) => *slot = Some(map.next_value_seed(inner)?),
                None => {
                    members.answers |= answers(&key);
                    let seen = others.get_or_insert_with(HashSet::new);
                    if seen.contains(key.as_ref()) {
                        return Err(unique_keys::duplicate(&key));
                    }
                    seen.insert(key.into_owned());
                    // Read under the rule, not kept.
                    map.next_value_seed(inner)?;
                }
            }
        }
        Ok(Message::object(members))
    }

    // Not an object: read under the rule where it can fail (an array's objects and depth, a
    // number's finiteness), and not kept.
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Message, A::Error> {
        self.0.visit_seq(seq).map(|_| Message::default())
    }

    fn visit_bool<E>(self, _: bool) -> Result<Message, E> {
        Ok(Message::default())
    }

    fn visit_i64<E>(self, _: i64) -> Result<Message, E> {
        Ok(Message::default())
    }

    fn visit_u64<E>(self, _: u64) -> Result<Message, E> {
        Ok(Message::default())
    }

    fn visit_f64<E: Error>(self, value: f64) -> Result<Message, E> {
        self.0.visit_f64(value).map(|_| Message::default())
    }

    fn visit_str<E>(self, _: &str) -> Result<Message, E> {
        Ok(Message::default())
    }

    fn visit_unit<E>(self) -> Result<Message, E> {
        Ok(Message::default())
    }
}

/// Reads a batch: an array of messages.
struct ReadBatch(UniqueKeys);

impl<'de> DeserializeSeed<'de> for ReadBatch {
    type Value = Vec<Message>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Vec<Message>, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ReadBatch {
    type Value = Vec<Message>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a batch of JSON-RPC messages")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Message>, A::Error> {
        let item = ReadMessage(self.0.inner()?);
        let mut messages = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(message) = seq.next_element_seed(item)? {
            messages.push(message);
        }
        Ok(messages)
    }
}

#[cfg(test)]
mod tests;

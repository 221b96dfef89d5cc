//! JSON-RPC 2.0 envelopes: what a POST body holds, and how answers are written.

use serde_json::{json, Map, Value};

use crate::proto_json::render::write_string;
use crate::unique_keys::{DuplicateKey, ParseError};

mod message;
pub use message::{Members, Message};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// MCP 2026-07-28: the HTTP headers disagree with the body, or a required one is missing.
pub const HEADER_MISMATCH: i64 = -32020;
/// Switchblade's own (the implementation-defined range): the caller is over its rate limit
/// across every tool (with HTTP 429 and `Retry-After`).
pub const RATE_LIMITED: i64 = -32029;
/// A 2026-07-28 request that needs a capability its client did not declare (the tasks
/// extension, for `tasks/*`).
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// MCP 2026-07-28: the requested protocol version is not served.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// A POST body's messages: one, or a batch of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Body {
    pub messages: Vec<Message>,
    pub batch: bool,
}

/// One JSON-RPC message from a client.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// A client's answer to a server request. This server sends none.
    Response,
}

/// A JSON-RPC error object and the id to answer with (null when the request's is unknown).
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub id: Value,
    pub code: i64,
    pub message: String,
    /// Boxed: rare, and it would make every `Result<_, RpcError>` large.
    pub data: Option<Box<Value>>,
}

impl RpcError {
    pub fn new(id: &Value, code: i64, message: impl Into<String>) -> Self {
        RpcError {
            id: id.clone(),
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(Box::new(data));
        self
    }

    /// The JSON-RPC error response object.
    pub fn to_value(&self) -> Value {
        let mut error = Map::new();
        error.insert("code".into(), json!(self.code));
        error.insert("message".into(), json!(self.message));
        if let Some(data) = &self.data {
            error.insert("data".into(), Value::clone(data));
        }
        json!({"jsonrpc": "2.0", "id": self.id, "error": error})
    }
}

/// A POST body, and the first key it gives twice, if any (the body then holds the last value).
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub body: Body,
    pub duplicate: Option<DuplicateKey>,
}

/// Reads a POST body as JSON: one message or a batch, nested at most `max_depth` deep.
pub fn parse_body(bytes: &[u8], max_depth: usize) -> Result<Parsed, RpcError> {
    let (body, duplicate) = match message::read_body(bytes, max_depth) {
        Ok(body) => (body, None),
        Err(ParseError::Syntax(error)) => return Err(parse_error(&error)),
        Err(ParseError::TooDeep) => {
            let message = format!("Invalid Request: JSON nested deeper than {max_depth} levels");
            return Err(RpcError::new(&Value::Null, INVALID_REQUEST, message));
        }
        // Read again, keeping the last value, to answer in terms of the request.
        Err(ParseError::Duplicate(duplicate)) => (
            serde_json::from_slice::<Value>(bytes)
                .map(Body::from)
                .map_err(|error| parse_error(&error))?,
            Some(duplicate),
        ),
    };
    Ok(Parsed { body, duplicate })
}

fn parse_error(error: &serde_json::Error) -> RpcError {
    RpcError::new(
        &Value::Null,
        PARSE_ERROR,
        format!("Parse error: body is not valid JSON: {error}"),
    )
}

/// Classifies one message of a body.
pub fn classify(message: Message) -> Result<Incoming, RpcError> {
    let Some(Members {
        id,
        jsonrpc,
        method,
        params,
        answers,
    }) = message.members
    else {
        return Err(RpcError::new(
            &Value::Null,
            INVALID_REQUEST,
            "Invalid Request: expected a JSON-RPC object",
        ));
    };
    let reply_id = reply_id(id.as_ref());
    if jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
        return Err(RpcError::new(
            &reply_id,
            INVALID_REQUEST,
            "Invalid Request: `jsonrpc` must be \"2.0\"",
        ));
    }
    match (method, id) {
        (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
        (Some(Value::String(method)), Some(id)) if is_valid_id(&id) => Ok(Incoming::Request { id, method, params }),
        (Some(Value::String(_)), Some(_)) => Err(RpcError::new(
            &Value::Null,
            INVALID_REQUEST,
            "Invalid Request: `id` must be a string or an integer",
        )),
        (Some(_), _) => Err(RpcError::new(
            &reply_id,
            INVALID_REQUEST,
            "Invalid Request: `method` must be a string",
        )),
        (None, Some(_)) if answers => Ok(Incoming::Response),
        (None, _) => Err(RpcError::new(
            &reply_id,
            INVALID_REQUEST,
            "Invalid Request: `method` is missing",
        )),
    }
}

/// The id to answer a message with: its own if valid, else null.
pub fn reply_id(id: Option<&Value>) -> Value {
    id.filter(|id| is_valid_id(id)).cloned().unwrap_or(Value::Null)
}

/// MCP ids are strings or integers; null is not allowed for requests.
pub(crate) fn is_valid_id(id: &Value) -> bool {
    match id {
        Value::String(_) => true,
        Value::Number(number) => number.is_i64() || number.is_u64(),
        _ => false,
    }
}

/// `{"jsonrpc":"2.0","id":…,"result":…}` with a result that is already JSON text.
pub fn success_raw(id: &Value, result_json: &str) -> Vec<u8> {
    success_written(id, result_json.len(), |body| body.push_str(result_json))
}

/// The same, with the result written by `write_result` straight into the body (`result_len`:
/// about how long it is), so that a result made for this answer is not copied into it.
pub fn success_written(id: &Value, result_len: usize, write_result: impl FnOnce(&mut String)) -> Vec<u8> {
    const HEAD: &str = r#"{"jsonrpc":"2.0","id":"#;
    const RESULT: &str = r#","result":"#;
    // Room for an integer id or a short string one; a longer one grows the body once.
    const ID_ROOM: usize = 24;
    let mut body = String::with_capacity(HEAD.len() + ID_ROOM + RESULT.len() + result_len + 1);
    body.push_str(HEAD);
    write_id(&mut body, id);
    body.push_str(RESULT);
    write_result(&mut body);
    body.push('}');
    body.into_bytes()
}

/// An id as JSON: the integers and strings MCP allows written directly, anything else through
/// serde_json.
fn write_id(body: &mut String, id: &Value) {
    match id {
        Value::String(id) => write_string(body, id),
        Value::Number(number) => match (number.as_u64(), number.as_i64()) {
            (Some(id), _) => body.push_str(itoa::Buffer::new().format(id)),
            (None, Some(id)) => body.push_str(itoa::Buffer::new().format(id)),
            (None, None) => body.push_str(&number.to_string()),
        },
        other => body.push_str(&other.to_string()),
    }
}

pub fn encode(value: &Value) -> Vec<u8> {
    // Serializing a `Value` cannot fail: its map keys are always strings.
    serde_json::to_vec(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &[u8]) -> Result<Incoming, RpcError> {
        let Body { messages, batch: false } = parse_body(body, 64)?.body else {
            panic!("unexpected batch");
        };
        classify(messages.into_iter().next().unwrap())
    }

    #[test]
    fn parses_requests_notifications_and_responses() {
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).unwrap(),
            Incoming::Request {
                id: json!(1),
                method: "ping".into(),
                params: None
            }
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}"#).unwrap(),
            Incoming::Request {
                id: json!("a"),
                method: "tools/list".into(),
                params: Some(json!({}))
            }
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap(),
            Incoming::Notification {
                method: "notifications/initialized".into(),
                params: None
            }
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#).unwrap(),
            Incoming::Response
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"x"}}"#).unwrap(),
            Incoming::Response
        );
        // Members in any order, and others beside them.
        assert_eq!(
            parse(br#"{"params":{"a":1},"extra":0,"method":"x","id":"q","jsonrpc":"2.0"}"#).unwrap(),
            Incoming::Request {
                id: json!("q"),
                method: "x".into(),
                params: Some(json!({"a": 1}))
            }
        );
        // An answer has an id.
        let anonymous = parse(br#"{"jsonrpc":"2.0","result":{}}"#).unwrap_err();
        assert_eq!(
            (anonymous.code, anonymous.message.as_str()),
            (INVALID_REQUEST, "Invalid Request: `method` is missing")
        );
    }

    #[test]
    fn batches_are_arrays() {
        assert_eq!(
            parse_body(b"[1, {}]", 64).unwrap().body,
            Body {
                messages: vec![Message::default(), Message::from(json!({}))],
                batch: true
            }
        );
    }

    #[test]
    fn duplicate_keys_are_reported_with_the_last_value_kept() {
        let parsed = parse_body(br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#, 64).unwrap();
        assert_eq!(parsed.duplicate.unwrap().key, "id");
        assert_eq!(
            parsed.body,
            Body {
                messages: vec![Message::from(json!({"jsonrpc":"2.0","id":2,"method":"ping"}))],
                batch: false
            }
        );
        assert_eq!(parse_body(br#"{"a":1,"a":2"#, 64).unwrap_err().code, PARSE_ERROR);
    }

    #[test]
    fn refuses_malformed_envelopes() {
        assert_eq!(parse_body(b"{nope", 64).unwrap_err().code, PARSE_ERROR);
        assert_eq!(parse(b"7").unwrap_err().code, INVALID_REQUEST);
        let wrong_version = parse(br#"{"jsonrpc":"1.0","id":4,"method":"ping"}"#).unwrap_err();
        assert_eq!((wrong_version.code, wrong_version.id), (INVALID_REQUEST, json!(4)));
        assert_eq!(parse(br#"{"id":4,"method":"ping"}"#).unwrap_err().code, INVALID_REQUEST);
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#)
                .unwrap_err()
                .code,
            INVALID_REQUEST
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#)
                .unwrap_err()
                .code,
            INVALID_REQUEST
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#)
                .unwrap_err()
                .code,
            INVALID_REQUEST
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":1,"method":7}"#).unwrap_err().code,
            INVALID_REQUEST
        );
        assert_eq!(parse(br#"{"jsonrpc":"2.0","id":1}"#).unwrap_err().code, INVALID_REQUEST);
    }

    #[test]
    fn writes_answers() {
        assert_eq!(
            success_raw(&json!("x"), "{}"),
            br#"{"jsonrpc":"2.0","id":"x","result":{}}"#
        );
        // Every id as serde_json writes it.
        for id in [
            json!(0),
            json!(-7),
            json!(u64::MAX),
            json!(i64::MIN),
            json!("q\"\\\n\u{1}é"),
            json!(1.5),
            Value::Null,
        ] {
            let written = success_written(&id, 2, |body| body.push_str("[]"));
            let expected = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":[]}}"#);
            assert_eq!(String::from_utf8(written).unwrap(), expected);
        }
        let error = RpcError::new(&json!(2), METHOD_NOT_FOUND, "no").with_data(json!({"a": 1}));
        assert_eq!(
            error.to_value(),
            json!({"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no","data":{"a":1}}})
        );
    }
}

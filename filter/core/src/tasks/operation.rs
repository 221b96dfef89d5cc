//! `google.longrunning` on the wire: the Operation a method or `GetOperation` answers, read
//! with its fixed field numbers (no descriptor needed), and the requests the gateway sends to
//! the Operations service.

use prost::Message;

/// `google.longrunning.Operation`.
#[derive(Clone, PartialEq, Message)]
pub struct Operation {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub metadata: Option<Any>,
    #[prost(bool, tag = "3")]
    pub done: bool,
    /// A `google.rpc.Status`, kept as its bytes: the error details renderer reads them as a
    /// `grpc-status-details-bin` trailer, which is the same message.
    #[prost(bytes = "vec", optional, tag = "4")]
    pub error: Option<Vec<u8>>,
    #[prost(message, optional, tag = "5")]
    pub response: Option<Any>,
}

/// `google.protobuf.Any`.
#[derive(Clone, PartialEq, Message)]
pub struct Any {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

impl Any {
    /// The message's full name: what follows the type URL's last `/`.
    pub fn type_name(&self) -> &str {
        self.type_url.rsplit('/').next().unwrap_or(&self.type_url)
    }
}

/// The code and message of a `google.rpc.Status`.
#[derive(Clone, PartialEq, Message)]
pub struct StatusHead {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
}

/// `GetOperationRequest` and `CancelOperationRequest`: the operation's name alone.
#[derive(Clone, PartialEq, Message)]
struct NameRequest {
    #[prost(string, tag = "1")]
    name: String,
}

/// What an operation says of itself.
#[derive(Debug, Clone, PartialEq)]
pub enum State<'a> {
    Running {
        metadata: Option<&'a Any>,
    },
    /// Done with a `response` (`None`: a service that gives no result).
    Succeeded(Option<&'a Any>),
    /// Done with an `error`: its code, message, and the whole status's bytes (for its details).
    Failed {
        code: u32,
        message: String,
        status: &'a [u8],
    },
}

impl Operation {
    pub fn decode_bytes(bytes: &[u8]) -> Result<Operation, String> {
        Operation::decode(bytes).map_err(|error| format!("not a google.longrunning.Operation ({error})"))
    }

    pub fn state(&self) -> State<'_> {
        if !self.done {
            return State::Running {
                metadata: self.metadata.as_ref(),
            };
        }
        match &self.error {
            Some(status) => {
                let head = StatusHead::decode(status.as_slice()).unwrap_or_default();
                State::Failed {
                    code: u32::try_from(head.code).unwrap_or(crate::grpc::status::UNKNOWN),
                    message: head.message,
                    status,
                }
            }
            None => State::Succeeded(self.response.as_ref()),
        }
    }
}

/// The request message of `GetOperation` or `CancelOperation` for the operation `name`.
pub fn name_request(name: &str) -> Vec<u8> {
    NameRequest { name: name.to_owned() }.encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_follow_done_error_and_response() {
        let running = Operation {
            name: "operations/1".into(),
            ..Operation::default()
        };
        assert_eq!(running.state(), State::Running { metadata: None });
        let status = StatusHead {
            code: 9,
            message: "no rates".into(),
        }
        .encode_to_vec();
        let failed = Operation {
            done: true,
            error: Some(status.clone()),
            ..running.clone()
        };
        assert_eq!(
            failed.state(),
            State::Failed {
                code: 9,
                message: "no rates".into(),
                status: &status
            }
        );
        let response = Any {
            type_url: "type.googleapis.com/demo.exports.v1.ExportCatalogResponse".into(),
            value: vec![],
        };
        assert_eq!(response.type_name(), "demo.exports.v1.ExportCatalogResponse");
        let done = Operation {
            done: true,
            response: Some(response.clone()),
            ..running
        };
        assert_eq!(done.state(), State::Succeeded(Some(&response)));
        let decoded = Operation::decode_bytes(&done.encode_to_vec()).unwrap();
        assert_eq!(decoded, done);
        assert!(Operation::decode_bytes(&[0xff, 0xff]).is_err());
        assert_eq!(
            NameRequest::decode(name_request("operations/1").as_slice())
                .unwrap()
                .name,
            "operations/1"
        );
    }
}

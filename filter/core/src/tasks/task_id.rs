//! The task id: an opaque token the gateway hands out for a long-running operation and checks
//! again on every poll, with no state of its own. It carries the operation's name, the tool,
//! the creation time and a digest of the caller's identity, authenticated with HMAC-SHA256
//! under the configuration's key; any Envoy with the same keys checks it alike.
//!
//! Layout (then base64url without padding):
//!
//! | bytes | field |
//! |---|---|
//! | 1 | version, 1 |
//! | 8 | creation time, milliseconds since the Unix epoch, big-endian |
//! | 16 | the first 16 bytes of SHA-256 of the caller's identity (empty without authorization) |
//! | 1 + n | the tool's name (1–64 bytes) |
//! | 2 + n | the operation's name (1–1024 bytes), big-endian length |
//! | 32 | HMAC-SHA256 of `switchblade task id\0` and every byte above |
//!
//! The identity's digest is in the clear so that an id shown by another caller is told apart
//! from a forged one (both are refused); the MAC covers it, so it cannot be swapped.

use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::tool_name;

/// What a task id says, once checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskId {
    pub created_ms: u64,
    pub tool: String,
    pub operation: String,
    /// The digest of the identity of the caller it was issued to.
    pub caller: [u8; CALLER_DIGEST_BYTES],
}

/// Why a task request is refused, with no upstream call: a task id (`-32602`), or a 2026-07-28
/// client that did not declare the tasks extension (`-32021`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskRefusal {
    /// Not a task id of any layout this gateway writes.
    Malformed,
    /// Well formed, but no key of this configuration made it.
    Forged,
    /// Made for a caller with another identity.
    OtherCaller,
    /// Older than the configured time to live.
    Expired,
    /// Its tool is not a task tool this caller may call here.
    NotATaskTool,
    /// A `tasks/*` request from a 2026-07-28 client that did not declare the extension.
    Undeclared,
}

impl TaskRefusal {
    pub fn label(self) -> &'static str {
        match self {
            TaskRefusal::Malformed => "malformed",
            TaskRefusal::Forged => "forged",
            TaskRefusal::OtherCaller => "other_caller",
            TaskRefusal::Expired => "expired",
            TaskRefusal::NotATaskTool => "not_a_task_tool",
            TaskRefusal::Undeclared => "undeclared",
        }
    }
}

const VERSION: u8 = 1;
/// Domain separation: these MACs are task ids and nothing else signed with the same key.
const CONTEXT: &[u8] = b"switchblade task id\0";
pub const CALLER_DIGEST_BYTES: usize = 16;
const MAC_BYTES: usize = 32;
/// An operation name past this is not put in a task id (nor a header that carries one).
pub const MAX_OPERATION_BYTES: usize = 1024;
/// The longest id this gateway writes, in characters of base64url.
pub const MAX_TASK_ID_CHARS: usize =
    (1 + 8 + CALLER_DIGEST_BYTES + 1 + tool_name::MAX_LEN + 2 + MAX_OPERATION_BYTES + MAC_BYTES).div_ceil(3) * 4;

type HmacSha256 = Hmac<Sha256>;

/// The keys of a configuration: the first signs, each verifies.
#[derive(Clone)]
pub struct KeyRing {
    keys: Vec<Vec<u8>>,
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the keys themselves, not even in a debug print.
        write!(f, "KeyRing({} keys)", self.keys.len())
    }
}

impl KeyRing {
    /// A ring of at least one key (checked by the configuration).
    pub fn new(keys: Vec<Vec<u8>>) -> Option<Self> {
        (!keys.is_empty() && keys.iter().all(|key| !key.is_empty())).then_some(KeyRing { keys })
    }

    /// The task id of `task`, signed with the first key.
    pub fn sign(&self, task: &TaskId) -> Result<String, String> {
        let mut bytes = body(task)?;
        let mac = self.mac(0, &bytes);
        bytes.extend_from_slice(&mac);
        Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
    }

    /// Reads and checks a task id for a caller with `identity`: made by one of these keys, for
    /// this caller. Expiry and the tool are the caller's to check (they need the clock and the
    /// catalog).
    pub fn verify(&self, id: &str, identity: &[u8]) -> Result<TaskId, TaskRefusal> {
        let task = parse(id)?;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(id)
            .map_err(|_| TaskRefusal::Malformed)?;
        let (signed, mac) = bytes.split_at(bytes.len() - MAC_BYTES);
        let made_here = (0..self.keys.len()).any(|index| self.verify_mac(index, signed, mac));
        if !made_here {
            return Err(TaskRefusal::Forged);
        }
        if task.caller != caller_digest(identity) {
            return Err(TaskRefusal::OtherCaller);
        }
        Ok(task)
    }

    fn mac(&self, index: usize, signed: &[u8]) -> [u8; MAC_BYTES] {
        let mut mac = self.keyed(index);
        mac.update(CONTEXT);
        mac.update(signed);
        mac.finalize().into_bytes().into()
    }

    /// Compared in constant time by the `hmac` crate.
    fn verify_mac(&self, index: usize, signed: &[u8], tag: &[u8]) -> bool {
        let mut mac = self.keyed(index);
        mac.update(CONTEXT);
        mac.update(signed);
        mac.verify_slice(tag).is_ok()
    }

    fn keyed(&self, index: usize) -> HmacSha256 {
        let key = self.keys.get(index).map_or(&[][..], Vec::as_slice);
        // HMAC takes a key of any length; this cannot fail.
        match HmacSha256::new_from_slice(key) {
            Ok(mac) => mac,
            Err(_) => HmacSha256::new(&Default::default()),
        }
    }
}

/// The digest of a caller's identity that a task id carries.
pub fn caller_digest(identity: &[u8]) -> [u8; CALLER_DIGEST_BYTES] {
    let digest = Sha256::digest(identity);
    let mut short = [0; CALLER_DIGEST_BYTES];
    short.copy_from_slice(&digest[..CALLER_DIGEST_BYTES]);
    short
}

/// Reads the fields of a task id without checking its MAC: a layout check only. Anything but a
/// well-formed id of this version is `Malformed`; it never panics, whatever the input (fuzzed).
pub fn parse(id: &str) -> Result<TaskId, TaskRefusal> {
    if id.len() > MAX_TASK_ID_CHARS {
        return Err(TaskRefusal::Malformed);
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(id)
        .map_err(|_| TaskRefusal::Malformed)?;
    let mut reader = Reader(&bytes);
    if reader.take(1)? != [VERSION] {
        return Err(TaskRefusal::Malformed);
    }
    let created_ms = u64::from_be_bytes(reader.array()?);
    let caller = reader.array::<CALLER_DIGEST_BYTES>()?;
    let tool_len = usize::from(reader.take(1)?[0]);
    let tool = reader.text(tool_len, tool_name::MAX_LEN)?;
    let operation_len = usize::from(u16::from_be_bytes(reader.array()?));
    let operation = reader.text(operation_len, MAX_OPERATION_BYTES)?;
    reader.take(MAC_BYTES)?;
    if !reader.0.is_empty() {
        return Err(TaskRefusal::Malformed);
    }
    Ok(TaskId {
        created_ms,
        tool,
        operation,
        caller,
    })
}

/// The signed bytes of a task id.
fn body(task: &TaskId) -> Result<Vec<u8>, String> {
    let tool = task.tool.as_bytes();
    let operation = task.operation.as_bytes();
    if tool.is_empty() || tool.len() > tool_name::MAX_LEN {
        return Err(format!("the tool name is not 1 to {} bytes", tool_name::MAX_LEN));
    }
    if operation.is_empty() || operation.len() > MAX_OPERATION_BYTES {
        return Err(format!(
            "the operation's name has {} bytes; a task id holds 1 to {MAX_OPERATION_BYTES}",
            operation.len()
        ));
    }
    let mut bytes = Vec::with_capacity(1 + 8 + CALLER_DIGEST_BYTES + 3 + tool.len() + operation.len() + MAC_BYTES);
    bytes.push(VERSION);
    bytes.extend_from_slice(&task.created_ms.to_be_bytes());
    bytes.extend_from_slice(&task.caller);
    bytes.push(u8::try_from(tool.len()).map_err(|_| "tool name too long".to_owned())?);
    bytes.extend_from_slice(tool);
    bytes.extend_from_slice(
        &u16::try_from(operation.len())
            .map_err(|_| "operation name too long".to_owned())?
            .to_be_bytes(),
    );
    bytes.extend_from_slice(operation);
    Ok(bytes)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Result<&'a [u8], TaskRefusal> {
        if count > self.0.len() {
            return Err(TaskRefusal::Malformed);
        }
        let (taken, rest) = self.0.split_at(count);
        self.0 = rest;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], TaskRefusal> {
        self.take(N)?.try_into().map_err(|_| TaskRefusal::Malformed)
    }

    fn text(&mut self, len: usize, max: usize) -> Result<String, TaskRefusal> {
        if len == 0 || len > max {
            return Err(TaskRefusal::Malformed);
        }
        String::from_utf8(self.take(len)?.to_vec()).map_err(|_| TaskRefusal::Malformed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(key: u8) -> KeyRing {
        KeyRing::new(vec![vec![key; 32]]).unwrap()
    }

    fn task(identity: &[u8]) -> TaskId {
        TaskId {
            created_ms: 1_767_225_600_000,
            tool: "ExportService_ExportCatalog".into(),
            operation: "operations/export-7".into(),
            caller: caller_digest(identity),
        }
    }

    #[test]
    fn an_id_reads_back_as_it_was_signed() {
        let id = ring(1).sign(&task(b"ada")).unwrap();
        assert!(id.len() <= MAX_TASK_ID_CHARS);
        assert!(
            id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "{id}"
        );
        assert_eq!(ring(1).verify(&id, b"ada").unwrap(), task(b"ada"));
    }

    #[test]
    fn another_key_or_caller_or_a_changed_byte_is_refused() {
        let id = ring(1).sign(&task(b"ada")).unwrap();
        assert_eq!(ring(2).verify(&id, b"ada"), Err(TaskRefusal::Forged));
        assert_eq!(ring(1).verify(&id, b"bob"), Err(TaskRefusal::OtherCaller));
        let mut bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&id).unwrap();
        for index in 0..bytes.len() {
            bytes[index] ^= 1;
            let changed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bytes);
            assert!(ring(1).verify(&changed, b"ada").is_err(), "byte {index}");
            bytes[index] ^= 1;
        }
    }

    #[test]
    fn both_keys_of_a_rotation_verify_and_the_first_signs() {
        let rotating = KeyRing::new(vec![vec![2; 32], vec![1; 32]]).unwrap();
        let old = ring(1).sign(&task(b"")).unwrap();
        assert!(rotating.verify(&old, b"").is_ok());
        let new = rotating.sign(&task(b"")).unwrap();
        assert!(ring(2).verify(&new, b"").is_ok());
        assert_eq!(ring(1).verify(&new, b""), Err(TaskRefusal::Forged));
    }

    #[test]
    fn what_is_not_an_id_is_malformed() {
        let id = ring(1).sign(&task(b"")).unwrap();
        for bad in [
            "",
            "!!!",
            "AA",
            &id[..id.len() - 4],
            &format!("{id}AAAA"),
            &"A".repeat(MAX_TASK_ID_CHARS + 4),
        ] {
            assert_eq!(parse(bad), Err(TaskRefusal::Malformed), "{bad:?}");
        }
        let long = TaskId {
            operation: "o".repeat(MAX_OPERATION_BYTES + 1),
            ..task(b"")
        };
        assert!(ring(1).sign(&long).is_err());
        let longest = TaskId {
            operation: "o".repeat(MAX_OPERATION_BYTES),
            tool: "t".repeat(tool_name::MAX_LEN),
            ..task(b"")
        };
        let id = ring(1).sign(&longest).unwrap();
        assert!(id.len() <= MAX_TASK_ID_CHARS);
        assert_eq!(parse(&id).unwrap(), longest);
    }
}

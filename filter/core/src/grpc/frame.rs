//! gRPC's length-prefixed frames: a compression flag, the message length, the message.

/// The length of a gRPC frame's prefix: a compression flag, then the message length.
pub(crate) const FRAME_PREFIX: usize = 5;

/// `message` in one uncompressed gRPC frame.
pub(crate) fn grpc_frame(message: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(FRAME_PREFIX + message.len());
    frame.push(0);
    // A request message is bounded far below 4 GiB by `limits.max_request_message_bytes`.
    frame.extend_from_slice(&u32::try_from(message.len()).unwrap_or(u32::MAX).to_be_bytes());
    frame.extend_from_slice(message);
    frame
}

/// Every message of a streamed response body, in order; an empty body has none.
pub(crate) fn unframe_all(mut body: &[u8]) -> Result<Vec<&[u8]>, &'static str> {
    let mut messages = Vec::new();
    while !body.is_empty() {
        let Some((prefix, rest)) = body.split_first_chunk::<FRAME_PREFIX>() else {
            return Err("the answer ends inside a gRPC frame");
        };
        let [compressed, length @ ..] = *prefix;
        if compressed != 0 {
            return Err("the answer is compressed, and no compression was offered");
        }
        let length = usize::try_from(u32::from_be_bytes(length)).unwrap_or(usize::MAX);
        let Some((message, after)) = rest.split_at_checked(length) else {
            return Err("the answer ends inside a gRPC frame");
        };
        messages.push(message);
        body = after;
    }
    Ok(messages)
}

/// The one message of a unary response.
pub(crate) fn unframe(body: &[u8]) -> Result<&[u8], &'static str> {
    let Some((prefix, rest)) = body.split_first_chunk::<FRAME_PREFIX>() else {
        return Err(if body.is_empty() {
            "the upstream's answer has no message"
        } else {
            "the upstream's answer ends inside a gRPC frame"
        });
    };
    let [compressed, length @ ..] = *prefix;
    if compressed != 0 {
        return Err("the upstream's answer is compressed, and no compression was offered");
    }
    let length = usize::try_from(u32::from_be_bytes(length)).unwrap_or(usize::MAX);
    match rest.len().cmp(&length) {
        std::cmp::Ordering::Less => Err("the upstream's answer ends inside a gRPC frame"),
        std::cmp::Ordering::Greater => Err("the upstream's answer has more than one message for a unary method"),
        std::cmp::Ordering::Equal => Ok(rest),
    }
}

//! FNV-1a over a sequence of byte strings: a fingerprint that is stable across VMs and builds,
//! for telling one list or one API from another (not for security).

/// The fingerprint of `parts`, each ended by a zero byte so that `["ab", "c"]` and
/// `["a", "bc"]` differ.
pub(crate) fn fingerprint<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;
    parts
        .into_iter()
        .flat_map(|bytes| bytes.iter().chain(&[0]))
        .fold(OFFSET, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(PRIME))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_told_apart_by_their_boundaries() {
        let one: [&[u8]; 2] = [b"ab", b"c"];
        let other: [&[u8]; 2] = [b"a", b"bc"];
        assert_ne!(fingerprint(one), fingerprint(other));
        assert_eq!(fingerprint(one), fingerprint([&b"ab"[..], &b"c"[..]]));
    }
}

//! Decisions for the string "well-known formats" of protovalidate's `StringRules`.
//!
//! Every function is total: malformed, empty, huge or non-ASCII input yields `false`, never a panic.
//! Emptiness is treated the way protovalidate's `*_empty` rules do: only `uri_ref` and
//! `http_header_value` accept the empty string.

use std::net::{Ipv4Addr, Ipv6Addr};

/// HTML "valid email address": no quoting, comments or display names, so typos are not silently accepted.
pub fn email(text: &str) -> bool {
    let Some((local, domain)) = text.split_once('@') else {
        return false;
    };
    let local_ok = !local.is_empty()
        && local
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".!#$%&'*+/=?^_`{|}~-".contains(&b));
    local_ok && domain.split('.').all(is_dns_label)
}

/// RFC 1034 host name; an all-digit last label is refused so dotted quads are not mistaken for names.
pub fn hostname(text: &str) -> bool {
    let name = text.strip_suffix('.').unwrap_or(text);
    let last_label_is_numeric = name
        .rsplit('.')
        .next()
        .is_some_and(|label| label.bytes().all(|b| b.is_ascii_digit()));
    !name.is_empty() && name.len() <= 253 && name.split('.').all(is_dns_label) && !last_label_is_numeric
}

fn is_dns_label(label: &str) -> bool {
    (1..=63).contains(&label.len())
        && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !label.starts_with('-')
        && !label.ends_with('-')
}

/// `version` 0 accepts either family; any other value than 0, 4, 6 accepts nothing.
pub fn ip(text: &str, version: u8) -> bool {
    (matches!(version, 0 | 4) && text.parse::<Ipv4Addr>().is_ok())
        || (matches!(version, 0 | 6) && is_ipv6_with_optional_zone(text))
}

/// The std parser follows RFC 4291 (including a trailing dotted quad) but knows no zones; protovalidate
/// accepts any non-empty zone id after `%` (RFC 4007 leaves its character set open).
fn is_ipv6_with_optional_zone(text: &str) -> bool {
    let (address, zone) = match text.split_once('%') {
        Some((address, zone)) => (address, Some(zone)),
        None => (text, None),
    };
    zone.is_none_or(|zone| !zone.is_empty()) && address.parse::<Ipv6Addr>().is_ok()
}

/// Address "/" prefix length; host bits may be set (a host inside its network).
pub fn ip_with_prefixlen(text: &str, version: u8) -> bool {
    parse_prefix(text, version).is_some()
}

/// Address "/" prefix length naming a network: every bit after the prefix must be zero.
pub fn ip_prefix(text: &str, version: u8) -> bool {
    // A shift by the full width means no host bits, which `checked_shl` reports as `None`.
    parse_prefix(text, version).is_some_and(|(bits, length)| bits.checked_shl(length).unwrap_or(0) == 0)
}

/// Returns the address left-aligned in 128 bits with its prefix length; zones make no sense in a prefix.
fn parse_prefix(text: &str, version: u8) -> Option<(u128, u32)> {
    let (address, length) = text.split_once('/')?;
    let canonical_decimal = (1..=3).contains(&length.len())
        && length.bytes().all(|b| b.is_ascii_digit())
        && (length == "0" || !length.starts_with('0'));
    let length: u32 = length.parse().ok().filter(|_| canonical_decimal)?;
    let (bits, width) = match (version, address.parse::<Ipv4Addr>(), address.parse::<Ipv6Addr>()) {
        (0 | 4, Ok(v4), _) => (u128::from(u32::from(v4)) << 96, 32),
        (0 | 6, _, Ok(v6)) => (u128::from(v6), 128),
        _ => return None,
    };
    (length <= width).then_some((bits, length))
}

/// Hostname or IP address of either family.
pub fn address(text: &str) -> bool {
    hostname(text) || ip(text, 0)
}

/// "host:port" with a hostname or IPv4 host, or "[ipv6]:port"; the port is mandatory.
pub fn host_and_port(text: &str) -> bool {
    if let Some(bracketed) = text.strip_prefix('[') {
        return bracketed.rsplit_once(']').is_some_and(|(host, rest)| {
            is_ipv6_with_optional_zone(host) && rest.strip_prefix(':').is_some_and(is_port)
        });
    }
    text.rsplit_once(':')
        .is_some_and(|(host, port)| (hostname(host) || host.parse::<Ipv4Addr>().is_ok()) && is_port(port))
}

/// Decimal 0..=65535 without leading zeros, so each port has exactly one spelling.
fn is_port(text: &str) -> bool {
    let canonical =
        !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) && (text == "0" || !text.starts_with('0'));
    canonical && text.parse::<u16>().is_ok()
}

/// RFC 3986 `URI`: scheme ":" hier-part [ "?" query ] [ "#" fragment ].
pub fn uri(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once(':') else {
        return false;
    };
    let mut scheme_bytes = scheme.bytes();
    let scheme_ok = scheme_bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && scheme_bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    scheme_ok && is_reference_after_scheme(rest, true)
}

/// RFC 3986 `URI-reference`: a URI or a relative reference (the empty string is one).
pub fn uri_ref(text: &str) -> bool {
    uri(text) || is_reference_after_scheme(text, false)
}

/// Checks `[ "//" authority ] path [ "?" query ] [ "#" fragment ]`. Without a scheme the first segment
/// may not hold a colon, otherwise the reference would read as having a scheme.
fn is_reference_after_scheme(text: &str, has_scheme: bool) -> bool {
    let (before_fragment, fragment) = split_optional(text, '#');
    let (hierarchy, query) = split_optional(before_fragment, '?');
    let query_chars = |part: &str| decode_component(part, |b| is_pchar(b) || b == b'/' || b == b'?').is_some();
    if !fragment.is_none_or(query_chars) || !query.is_none_or(query_chars) {
        return false;
    }
    if let Some(after_slashes) = hierarchy.strip_prefix("//") {
        let (authority, path) = split_optional(after_slashes, '/');
        return is_authority(authority) && path.is_none_or(is_path);
    }
    let first_segment = hierarchy.split('/').next().unwrap_or_default();
    (has_scheme || !first_segment.contains(':')) && is_path(hierarchy)
}

fn split_optional(text: &str, separator: char) -> (&str, Option<&str>) {
    match text.split_once(separator) {
        Some((head, tail)) => (head, Some(tail)),
        None => (text, None),
    }
}

fn is_path(path: &str) -> bool {
    path.split('/')
        .all(|segment| decode_component(segment, is_pchar).is_some())
}

/// `[ userinfo "@" ] host [ ":" port ]`; the port is any digit string here, RFC 3986 sets no range.
fn is_authority(authority: &str) -> bool {
    let (userinfo, host_port) = match authority.rsplit_once('@') {
        Some((userinfo, host_port)) => (Some(userinfo), host_port),
        None => (None, authority),
    };
    let userinfo_ok =
        userinfo.is_none_or(|u| decode_component(u, |b| is_unreserved_or_sub_delim(b) || b == b':').is_some());
    let digits = |port: &str| port.bytes().all(|b| b.is_ascii_digit());
    let host_port_ok = match host_port.strip_prefix('[') {
        Some(bracketed) => bracketed.split_once(']').is_some_and(|(literal, rest)| {
            is_ip_literal(literal) && (rest.is_empty() || rest.strip_prefix(':').is_some_and(digits))
        }),
        None => {
            let (reg_name, port) = split_optional(host_port, ':');
            decodes_to_utf8(reg_name, is_unreserved_or_sub_delim) && port.is_none_or(digits)
        }
    };
    userinfo_ok && host_port_ok
}

/// IPv6address, IPv6addrz (RFC 6874: zone introduced by an encoded "%25") or IPvFuture.
fn is_ip_literal(literal: &str) -> bool {
    if let Some(future) = literal.strip_prefix(['v', 'V']) {
        return future.split_once('.').is_some_and(|(version, body)| {
            !version.is_empty()
                && version.bytes().all(|b| b.is_ascii_hexdigit())
                && !body.is_empty()
                && body.bytes().all(|b| is_unreserved_or_sub_delim(b) || b == b':')
        });
    }
    match literal.split_once("%25") {
        Some((address, zone)) => {
            address.parse::<Ipv6Addr>().is_ok() && !zone.is_empty() && decodes_to_utf8(zone, is_unreserved)
        }
        None => literal.parse::<Ipv6Addr>().is_ok(),
    }
}

/// Percent-decodes `text` if every byte is either `allowed` or part of a well-formed "%XX" triplet.
fn decode_component(text: &str, allowed: impl Fn(u8) -> bool) -> Option<Vec<u8>> {
    let mut decoded = Vec::with_capacity(text.len());
    let mut bytes = text.bytes();
    while let Some(byte) = bytes.next() {
        if byte == b'%' {
            let high = bytes.next().and_then(hex_value)?;
            let low = bytes.next().and_then(hex_value)?;
            decoded.push(high << 4 | low);
        } else if allowed(byte) {
            decoded.push(byte);
        } else {
            return None;
        }
    }
    Some(decoded)
}

/// Percent-encoding in a host may only spell UTF-8 text (RFC 3986 section 3.2.2).
fn decodes_to_utf8(text: &str, allowed: impl Fn(u8) -> bool) -> bool {
    decode_component(text, allowed).is_some_and(|decoded| std::str::from_utf8(&decoded).is_ok())
}

fn hex_value(byte: u8) -> Option<u8> {
    char::from(byte).to_digit(16).and_then(|digit| u8::try_from(digit).ok())
}

fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

fn is_unreserved_or_sub_delim(byte: u8) -> bool {
    is_unreserved(byte) || b"!$&'()*+,;=".contains(&byte)
}

fn is_pchar(byte: u8) -> bool {
    is_unreserved_or_sub_delim(byte) || byte == b':' || byte == b'@'
}

/// RFC 4122 text form 8-4-4-4-12, hex digits of either case.
pub fn uuid(text: &str) -> bool {
    text.len() == 36
        && text.bytes().enumerate().all(|(position, b)| match position {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

/// A UUID with its dashes trimmed: 32 hex digits.
pub fn tuuid(text: &str) -> bool {
    text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// 26 Crockford base32 digits; the first is at most 7 because a ULID is 128 bits.
pub fn ulid(text: &str) -> bool {
    let mut bytes = text.bytes();
    let is_crockford = |b: u8| b.is_ascii_digit() || (b.is_ascii_alphabetic() && !b"iloIuLOU".contains(&b));
    text.len() == 26 && bytes.next().is_some_and(|b| (b'0'..=b'7').contains(&b)) && bytes.all(is_crockford)
}

/// Dot-separated protobuf identifiers, modern form without a leading dot.
pub fn protobuf_fqn(text: &str) -> bool {
    let is_identifier = |part: &str| {
        let mut bytes = part.bytes();
        bytes.next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
    };
    text.split('.').all(is_identifier)
}

/// Historical absolute form: exactly one leading dot, then a `protobuf_fqn`.
pub fn protobuf_dot_fqn(text: &str) -> bool {
    text.strip_prefix('.').is_some_and(protobuf_fqn)
}

/// Strict: an RFC 7230 token, optionally preceded by ":" for HTTP/2 pseudo-headers. Loose: any
/// non-empty text free of the bytes that could split or truncate a header (NUL, CR, LF).
pub fn http_header_name(text: &str, strict: bool) -> bool {
    if !strict {
        return !text.is_empty() && !text.bytes().any(is_header_breaking);
    }
    // Upstream's class once read `+-.` as a range and let "," through; RFC 7230 excludes it.
    let token = text.strip_prefix(':').unwrap_or(text);
    !token.is_empty()
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Strict: no control characters except horizontal tab. Loose: no NUL, CR, LF. Empty values are allowed.
pub fn http_header_value(text: &str, strict: bool) -> bool {
    if strict {
        !text.bytes().any(|b| b.is_ascii_control() && b != b'\t')
    } else {
        !text.bytes().any(is_header_breaking)
    }
}

fn is_header_breaking(byte: u8) -> bool {
    matches!(byte, b'\0' | b'\r' | b'\n')
}

#[cfg(test)]
mod tests;

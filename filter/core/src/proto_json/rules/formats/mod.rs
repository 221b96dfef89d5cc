//! The well-known formats: a string that is an email address, a hostname, an IP address …
//! (`string.email` …, `string.well_known_regex`), and bytes that are an IP address or a UUID
//! (`bytes.ipv4` …). What each format accepts is decided in [`syntax`].

pub mod syntax;

use serde_json::{json, Map, Value};

use super::family::Family;
use super::standard::{SchemaFor, StandardRule};
use super::subject::Subject;
use crate::proto_json::Form;

/// A string format, by its rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Email,
    Hostname,
    Ip(IpVersion),
    IpWithPrefixLen(IpVersion),
    IpPrefix(IpVersion),
    Uri,
    UriRef,
    Address,
    Uuid,
    Tuuid,
    HostAndPort,
    Ulid,
    ProtobufFqn,
    ProtobufDotFqn,
    HeaderName { strict: bool },
    HeaderValue { strict: bool },
}

/// Which IP addresses a format takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpVersion {
    Either,
    V4,
    V6,
}

impl IpVersion {
    /// As [`syntax`] takes it (and CEL's `isIp(4)`): 0 for either.
    fn number(self) -> u8 {
        match self {
            IpVersion::Either => 0,
            IpVersion::V4 => 4,
            IpVersion::V6 => 6,
        }
    }
}

/// `buf.validate.KnownRegex`: what `string.well_known_regex` names, by its numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnownRegex {
    Unspecified = 0,
    HttpHeaderName = 1,
    HttpHeaderValue = 2,
}

impl KnownRegex {
    pub fn from_number(number: i32) -> Option<KnownRegex> {
        [
            KnownRegex::Unspecified,
            KnownRegex::HttpHeaderName,
            KnownRegex::HttpHeaderValue,
        ]
        .into_iter()
        .find(|known| *known as i32 == number)
    }

    /// The format it names; `strict` is `string.strict` (true unless set false).
    pub fn format(self, strict: bool) -> Option<Format> {
        match self {
            KnownRegex::Unspecified => None,
            KnownRegex::HttpHeaderName => Some(Format::HeaderName { strict }),
            KnownRegex::HttpHeaderValue => Some(Format::HeaderValue { strict }),
        }
    }
}

impl Format {
    /// The formats a `bool` rule sets, in the order they are read.
    pub const FLAGS: [Format; 20] = [
        Format::Email,
        Format::Hostname,
        Format::Ip(IpVersion::Either),
        Format::Ip(IpVersion::V4),
        Format::Ip(IpVersion::V6),
        Format::Uri,
        Format::UriRef,
        Format::Address,
        Format::Uuid,
        Format::Tuuid,
        Format::IpWithPrefixLen(IpVersion::Either),
        Format::IpWithPrefixLen(IpVersion::V4),
        Format::IpWithPrefixLen(IpVersion::V6),
        Format::IpPrefix(IpVersion::Either),
        Format::IpPrefix(IpVersion::V4),
        Format::IpPrefix(IpVersion::V6),
        Format::HostAndPort,
        Format::Ulid,
        Format::ProtobufFqn,
        Format::ProtobufDotFqn,
    ];

    /// The rule's name in the .proto.
    pub fn rule(self) -> &'static str {
        match self {
            Format::Email => "email",
            Format::Hostname => "hostname",
            Format::Ip(IpVersion::Either) => "ip",
            Format::Ip(IpVersion::V4) => "ipv4",
            Format::Ip(IpVersion::V6) => "ipv6",
            Format::IpWithPrefixLen(IpVersion::Either) => "ip_with_prefixlen",
            Format::IpWithPrefixLen(IpVersion::V4) => "ipv4_with_prefixlen",
            Format::IpWithPrefixLen(IpVersion::V6) => "ipv6_with_prefixlen",
            Format::IpPrefix(IpVersion::Either) => "ip_prefix",
            Format::IpPrefix(IpVersion::V4) => "ipv4_prefix",
            Format::IpPrefix(IpVersion::V6) => "ipv6_prefix",
            Format::Uri => "uri",
            Format::UriRef => "uri_ref",
            Format::Address => "address",
            Format::Uuid => "uuid",
            Format::Tuuid => "tuuid",
            Format::HostAndPort => "host_and_port",
            Format::Ulid => "ulid",
            Format::ProtobufFqn => "protobuf_fqn",
            Format::ProtobufDotFqn => "protobuf_dot_fqn",
            Format::HeaderName { .. } | Format::HeaderValue { .. } => "well_known_regex",
        }
    }

    /// What a value of the format is.
    fn what(self) -> String {
        let address = |version: IpVersion, what: &str| match version {
            IpVersion::V4 => format!("an IPv4 {what}"),
            IpVersion::V6 => format!("an IPv6 {what}"),
            IpVersion::Either => format!("an IP {what}"),
        };
        match self {
            Format::Email => "an email address".into(),
            Format::Hostname => "a hostname".into(),
            Format::Ip(version) => address(version, "address"),
            Format::IpWithPrefixLen(version) => {
                address(version, "address with a prefix length, such as 192.168.1.5/24")
            }
            Format::IpPrefix(version) => address(version, "prefix with no host bits set, such as 192.168.1.0/24"),
            Format::Uri => "an absolute URI".into(),
            Format::UriRef => "a URI or relative reference".into(),
            Format::Address => "a hostname or an IP address".into(),
            Format::Uuid => "a UUID such as 8a9c1e0e-7b1f-4c1e-9f5e-0d2b6a3c4e5f".into(),
            Format::Tuuid => "a UUID of 32 hex digits without dashes".into(),
            Format::HostAndPort => "a host (hostname or IP address) and port, such as example.com:443".into(),
            Format::Ulid => "a ULID".into(),
            Format::ProtobufFqn => "a fully-qualified protobuf name, such as pkg.Message".into(),
            Format::ProtobufDotFqn => "a fully-qualified protobuf name with a leading dot, such as .pkg.Message".into(),
            Format::HeaderName { .. } => "an HTTP header name".into(),
            Format::HeaderValue { .. } => "an HTTP header value".into(),
        }
    }

    fn accepts(self, text: &str) -> bool {
        match self {
            Format::Email => syntax::email(text),
            Format::Hostname => syntax::hostname(text),
            Format::Ip(version) => syntax::ip(text, version.number()),
            Format::IpWithPrefixLen(version) => syntax::ip_with_prefixlen(text, version.number()),
            Format::IpPrefix(version) => syntax::ip_prefix(text, version.number()),
            Format::Uri => syntax::uri(text),
            Format::UriRef => syntax::uri_ref(text),
            Format::Address => syntax::address(text),
            Format::Uuid => syntax::uuid(text),
            Format::Tuuid => syntax::tuuid(text),
            Format::HostAndPort => syntax::host_and_port(text),
            Format::Ulid => syntax::ulid(text),
            Format::ProtobufFqn => syntax::protobuf_fqn(text),
            Format::ProtobufDotFqn => syntax::protobuf_dot_fqn(text),
            Format::HeaderName { strict } => syntax::http_header_name(text, strict),
            Format::HeaderValue { strict } => syntax::http_header_value(text, strict),
        }
    }

    /// JSON Schema's own name of a format that means the same or less (draft 2020-12). Not
    /// `hostname`: JSON Schema's allows an all-digit last label, which protovalidate's does not.
    fn json_schema_format(self) -> Option<&'static str> {
        match self {
            Format::Email => Some("email"),
            Format::Ip(IpVersion::V4) => Some("ipv4"),
            Format::Ip(IpVersion::V6) => Some("ipv6"),
            Format::Uri => Some("uri"),
            Format::UriRef => Some("uri-reference"),
            Format::Uuid => Some("uuid"),
            _ => None,
        }
    }
}

impl StandardRule for Format {
    fn name(&self, family: Family) -> String {
        format!("{family}.{}", self.rule())
    }

    fn words(&self) -> String {
        format!("must be {}", self.what())
    }

    fn holds(&self, subject: &Subject<'_>) -> bool {
        match subject {
            Subject::Text(text) => self.accepts(text),
            _ => true,
        }
    }

    fn keyword(&self, schema: SchemaFor<'_>, _base: &mut Map<String, Value>, extra: &mut Map<String, Value>) -> bool {
        match (schema, self.json_schema_format()) {
            (SchemaFor::Value(Form::String), Some(name)) => {
                extra.insert("format".into(), json!(name));
                true
            }
            _ => false,
        }
    }
}

/// A bytes format, checked by length alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteFormat {
    Ip,
    Ipv4,
    Ipv6,
    Uuid,
}

impl ByteFormat {
    /// In the order they are read.
    pub const ALL: [ByteFormat; 4] = [ByteFormat::Ip, ByteFormat::Ipv4, ByteFormat::Ipv6, ByteFormat::Uuid];

    /// The rule's name in the .proto.
    pub fn rule(self) -> &'static str {
        match self {
            ByteFormat::Ip => "ip",
            ByteFormat::Ipv4 => "ipv4",
            ByteFormat::Ipv6 => "ipv6",
            ByteFormat::Uuid => "uuid",
        }
    }
}

impl StandardRule for ByteFormat {
    fn name(&self, family: Family) -> String {
        format!("{family}.{}", self.rule())
    }

    fn words(&self) -> String {
        let what = match self {
            ByteFormat::Ip => "the 4 or 16 bytes of an IP address",
            ByteFormat::Ipv4 => "the 4 bytes of an IPv4 address",
            ByteFormat::Ipv6 => "the 16 bytes of an IPv6 address",
            ByteFormat::Uuid => "the 16 bytes of a UUID",
        };
        format!("must be {what}")
    }

    fn holds(&self, subject: &Subject<'_>) -> bool {
        let Subject::Bytes(bytes) = subject else {
            return true;
        };
        match self {
            ByteFormat::Ip => bytes.len() == 4 || bytes.len() == 16,
            ByteFormat::Ipv4 => bytes.len() == 4,
            ByteFormat::Ipv6 | ByteFormat::Uuid => bytes.len() == 16,
        }
    }

    fn keyword(&self, _schema: SchemaFor<'_>, _base: &mut Map<String, Value>, _extra: &mut Map<String, Value>) -> bool {
        false
    }
}

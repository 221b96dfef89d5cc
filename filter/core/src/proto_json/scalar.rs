//! One scalar value in its JSON form ([`Form`]) to its protobuf encoding: the gate's rule for
//! numbers, booleans, strings, bytes and enums, and map keys.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::{alphabet, Engine};
use serde_json::{Number, Value};

use super::decimal::IntRange;
use super::wire::{put_len, put_tag, put_varint, zigzag32, zigzag64, WireType};
use super::{int_range, Form};
use prost_reflect::Kind;

/// A scalar's wire encoding.
#[derive(Debug)]
pub enum Encoded<'v> {
    Varint(u64),
    Fixed32(u32),
    Fixed64(u64),
    Bytes(std::borrow::Cow<'v, [u8]>),
}

impl Encoded<'_> {
    /// Writes the value as field `number`.
    pub fn put(&self, out: &mut Vec<u8>, number: u32) {
        match self {
            Encoded::Bytes(bytes) => put_len(out, number, bytes),
            Encoded::Varint(_) => put_tag(out, number, WireType::Varint),
            Encoded::Fixed32(_) => put_tag(out, number, WireType::Fixed32),
            Encoded::Fixed64(_) => put_tag(out, number, WireType::Fixed64),
        }
        self.put_bare(out);
    }

    /// Writes the value without a tag, as an element of a packed list.
    pub fn put_bare(&self, out: &mut Vec<u8>) {
        match self {
            Encoded::Varint(value) => put_varint(out, *value),
            Encoded::Fixed32(value) => out.extend_from_slice(&value.to_le_bytes()),
            Encoded::Fixed64(value) => out.extend_from_slice(&value.to_le_bytes()),
            // Only numbers are packed; a length-delimited value is written whole by `put`.
            Encoded::Bytes(_) => {}
        }
    }
}

/// Base64 as the bytes form takes it: standard or URL-safe (even mixed), padded or not.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// `value` as a scalar of `kind`, and whether it is the kind's default; or, if the value does
/// not have the form the table gives the kind, why beyond that (if a detail helps).
pub fn scalar<'v>(kind: &Kind, value: &'v Value) -> Result<(Encoded<'v>, bool), Option<&'static str>> {
    let encoded = match (kind, value) {
        (Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 | Kind::Uint32 | Kind::Fixed32, Value::Number(number)) => {
            let (negative, magnitude) = integer(number, int_range(&Form::of(kind)))?;
            encode_integer(kind, negative, magnitude)
        }
        (Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 | Kind::Uint64 | Kind::Fixed64, value) => {
            let range = int_range(&Form::of(kind));
            let (negative, magnitude) = match value {
                Value::Number(number) => integer(number, range)?,
                Value::String(text) if range.is_canonical_decimal(text) => decimal(text).ok_or(None)?,
                // Spelled right, but too large for the type.
                Value::String(text) if IntRange::ANY.is_canonical_decimal(text) || is_long_decimal(text) => {
                    return Err(Some("out of range"))
                }
                _ => return Err(None),
            };
            encode_integer(kind, negative, magnitude)
        }
        (Kind::Double | Kind::Float, value) => {
            let number = match value {
                Value::Number(number) => number.as_f64().ok_or(None)?,
                Value::String(text) => match text.as_str() {
                    "NaN" => f64::NAN,
                    "Infinity" => f64::INFINITY,
                    "-Infinity" => f64::NEG_INFINITY,
                    _ => return Err(None),
                },
                _ => return Err(None),
            };
            if matches!(kind, Kind::Double) {
                Encoded::Fixed64(number.to_bits())
            } else if number.is_finite() && number.abs() > f64::from(f32::MAX) {
                return Err(Some("out of range"));
            } else {
                Encoded::Fixed32((number as f32).to_bits())
            }
        }
        (Kind::Bool, Value::Bool(flag)) => Encoded::Varint(u64::from(*flag)),
        (Kind::String, Value::String(text)) => Encoded::Bytes(text.as_bytes().into()),
        (Kind::Bytes, Value::String(text)) => Encoded::Bytes(base64_bytes(text).ok_or(None)?.into()),
        (Kind::Enum(descriptor), Value::String(name)) => {
            let value = descriptor.get_value_by_name(name).ok_or(None)?;
            Encoded::Varint(i64::from(value.number()) as u64)
        }
        (Kind::Enum(descriptor), Value::Null) if descriptor.full_name() == "google.protobuf.NullValue" => {
            Encoded::Varint(0)
        }
        _ => return Err(None),
    };
    let is_default = match &encoded {
        Encoded::Varint(value) => *value == 0,
        Encoded::Fixed32(value) => *value == 0,
        Encoded::Fixed64(value) => *value == 0,
        Encoded::Bytes(bytes) => bytes.is_empty(),
    };
    Ok((encoded, is_default))
}

/// A map key, already spelled as its [`KeyForm`](super::KeyForm) says, as field 1 of the
/// entry.
pub fn encode_key(kind: &Kind, key: &str, out: &mut Vec<u8>) {
    let encoded = match kind {
        Kind::Bool => Encoded::Varint(u64::from(key == "true")),
        Kind::String => Encoded::Bytes(key.as_bytes().into()),
        kind => match decimal(key) {
            Some((negative, magnitude)) => encode_integer(kind, negative, magnitude),
            None => return,
        },
    };
    encoded.put(out, 1);
}

/// An integer of `kind`, from its sign and magnitude (already in the kind's range).
fn encode_integer(kind: &Kind, negative: bool, magnitude: u64) -> Encoded<'static> {
    // Two's complement: the bits of the signed value, which each encoding then takes.
    let bits = if negative { magnitude.wrapping_neg() } else { magnitude };
    match kind {
        Kind::Sint32 => Encoded::Varint(zigzag32(bits as i32)),
        Kind::Sint64 => Encoded::Varint(zigzag64(bits as i64)),
        Kind::Sfixed32 | Kind::Fixed32 => Encoded::Fixed32(bits as u32),
        Kind::Sfixed64 | Kind::Fixed64 => Encoded::Fixed64(bits),
        // int32 is written sign-extended to 64 bits, as int64 is.
        _ => Encoded::Varint(bits),
    }
}

/// A canonical decimal too long for 64 bits.
fn is_long_decimal(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    digits.len() > 20 && !digits.starts_with('0') && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A canonical decimal as a sign and a magnitude.
fn decimal(text: &str) -> Option<(bool, u64)> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    Some((digits.len() != text.len(), digits.parse().ok()?))
}

/// A JSON number with no fraction, in range, as a sign and a magnitude. A number too large for
/// serde_json's integers arrives as a float: 2^64 and beyond are out of every range here, and
/// below that a float with no fraction converts exactly (`as` saturates, so the bound comes
/// first).
pub fn integer(number: &Number, range: IntRange) -> Result<(bool, u64), Option<&'static str>> {
    let (negative, magnitude) = if let Some(value) = number.as_i64() {
        (value < 0, value.unsigned_abs())
    } else if let Some(value) = number.as_u64() {
        (false, value)
    } else {
        let value = number.as_f64().ok_or(None)?;
        if value.fract() != 0.0 {
            return Err(Some("not an integer"));
        }
        if value.abs() >= 18_446_744_073_709_551_616.0 {
            return Err(Some("out of range"));
        }
        (value < 0.0, value.abs() as u64)
    };
    let limit = if negative { range.below_zero } else { range.above_zero };
    if magnitude > limit {
        return Err(Some("out of range"));
    }
    Ok((negative, magnitude))
}

/// Base64 in either alphabet, padded or not; `None` if it is not base64.
fn base64_bytes(text: &str) -> Option<Vec<u8>> {
    if !text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_' | b'='))
    {
        return None;
    }
    let standard: String = text
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    BASE64.decode(standard).ok()
}

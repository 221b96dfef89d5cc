//! The protobuf wire format, as far as the codec needs it: writing tags and scalars, and
//! reading a message's fields one by one without building a message in between.

/// How a field's value is laid out on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireType {
    Varint = 0,
    Fixed64 = 1,
    Len = 2,
    StartGroup = 3,
    EndGroup = 4,
    Fixed32 = 5,
}

impl WireType {
    fn of(bits: u64) -> Option<WireType> {
        Some(match bits {
            0 => WireType::Varint,
            1 => WireType::Fixed64,
            2 => WireType::Len,
            3 => WireType::StartGroup,
            4 => WireType::EndGroup,
            5 => WireType::Fixed32,
            _ => return None,
        })
    }
}

pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        // Truncation is the point: the low seven bits, with the continuation bit.
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

pub fn put_tag(out: &mut Vec<u8>, number: u32, wire_type: WireType) {
    put_varint(out, (u64::from(number) << 3) | wire_type as u64);
}

/// A length-delimited field: tag, length, bytes.
pub fn put_len(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_tag(out, number, WireType::Len);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

pub fn zigzag32(value: i32) -> u64 {
    u64::from(((value << 1) ^ (value >> 31)) as u32)
}

pub fn zigzag64(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

pub fn unzigzag32(value: u64) -> i32 {
    let value = value as u32;
    ((value >> 1) as i32) ^ -((value & 1) as i32)
}

pub fn unzigzag64(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

/// Why bytes are not a valid encoding.
pub type WireError = &'static str;

/// One field of a message as it lies on the wire.
#[derive(Debug, Clone, Copy)]
pub struct WireField<'a> {
    pub number: u32,
    pub value: WireValue<'a>,
}

#[derive(Debug, Clone, Copy)]
pub enum WireValue<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    /// A length-delimited value: a string, bytes, a message or packed scalars.
    Len(&'a [u8]),
    /// A proto2 group: its fields, between the start and end tags.
    Group(&'a [u8]),
}

/// Reads a message's fields in wire order.
pub struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes }
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn varint(&mut self) -> Result<u64, WireError> {
        let mut value = 0u64;
        for (index, byte) in self.bytes.iter().enumerate().take(10) {
            value |= u64::from(byte & 0x7f) << (7 * index);
            if byte & 0x80 == 0 {
                self.bytes = &self.bytes[index + 1..];
                return Ok(value);
            }
        }
        Err("a varint is cut off or longer than ten bytes")
    }

    fn take(&mut self, length: usize) -> Result<&'a [u8], WireError> {
        if length > self.bytes.len() {
            return Err("a field runs past the end of the message");
        }
        let (taken, rest) = self.bytes.split_at(length);
        self.bytes = rest;
        Ok(taken)
    }

    fn tag(&mut self) -> Result<(u32, WireType), WireError> {
        let tag = self.varint()?;
        let wire_type = WireType::of(tag & 7).ok_or("a field has an unknown wire type")?;
        let number = u32::try_from(tag >> 3).map_err(|_| "a field number is out of range")?;
        if number == 0 {
            return Err("a field has number 0");
        }
        Ok((number, wire_type))
    }

    /// The next field, or `None` at the end of the message.
    pub fn field(&mut self) -> Result<Option<WireField<'a>>, WireError> {
        if self.bytes.is_empty() {
            return Ok(None);
        }
        let (number, wire_type) = self.tag()?;
        let value = match wire_type {
            WireType::Varint => WireValue::Varint(self.varint()?),
            WireType::Fixed64 => WireValue::Fixed64(u64::from_le_bytes(self.fixed()?)),
            WireType::Fixed32 => WireValue::Fixed32(u32::from_le_bytes(self.fixed()?)),
            WireType::Len => {
                let length = usize::try_from(self.varint()?).map_err(|_| "a length is out of range")?;
                WireValue::Len(self.take(length)?)
            }
            WireType::StartGroup => WireValue::Group(self.group(number)?),
            WireType::EndGroup => return Err("a group ends that never started"),
        };
        Ok(Some(WireField { number, value }))
    }

    pub fn fixed<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let bytes = self.take(N)?;
        bytes.try_into().map_err(|_| "a fixed-size field is cut off")
    }

    /// The fields of the group that started with field `number`, up to its end tag. Nested
    /// groups are skipped over by depth, not recursion, so no input can exhaust the stack.
    fn group(&mut self, number: u32) -> Result<&'a [u8], WireError> {
        let start = self.bytes;
        let mut depth = 1usize;
        loop {
            let before = self.bytes.len();
            let (inner, wire_type) = self.tag()?;
            match wire_type {
                WireType::Varint => {
                    self.varint()?;
                }
                WireType::Fixed64 => {
                    self.take(8)?;
                }
                WireType::Fixed32 => {
                    self.take(4)?;
                }
                WireType::Len => {
                    let length = usize::try_from(self.varint()?).map_err(|_| "a length is out of range")?;
                    self.take(length)?;
                }
                WireType::StartGroup => depth += 1,
                WireType::EndGroup => {
                    depth -= 1;
                    if depth == 0 {
                        if inner != number {
                            return Err("a group ends with another field's number");
                        }
                        let consumed = start.len() - before;
                        return Ok(&start[..consumed]);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_zigzag_round_trip() {
        for value in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(Reader::new(&out).varint(), Ok(value));
        }
        for value in [0, -1, 1, i32::MIN, i32::MAX] {
            assert_eq!(unzigzag32(zigzag32(value)), value);
        }
        for value in [0, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag64(zigzag64(value)), value);
        }
        assert_eq!(zigzag32(-1), 1);
        assert_eq!(zigzag64(1), 2);
    }

    #[test]
    fn fields_are_read_in_wire_order() {
        let mut out = Vec::new();
        put_tag(&mut out, 1, WireType::Varint);
        put_varint(&mut out, 150);
        put_len(&mut out, 2, b"hi");
        put_tag(&mut out, 3, WireType::StartGroup);
        put_tag(&mut out, 4, WireType::Fixed32);
        out.extend_from_slice(&7u32.to_le_bytes());
        put_tag(&mut out, 3, WireType::EndGroup);
        let mut reader = Reader::new(&out);
        assert!(matches!(
            reader.field(),
            Ok(Some(WireField {
                number: 1,
                value: WireValue::Varint(150)
            }))
        ));
        assert!(matches!(
            reader.field(),
            Ok(Some(WireField {
                number: 2,
                value: WireValue::Len(b"hi")
            }))
        ));
        let Ok(Some(WireField {
            number: 3,
            value: WireValue::Group(group),
        })) = reader.field()
        else {
            panic!("a group")
        };
        assert!(matches!(
            Reader::new(group).field(),
            Ok(Some(WireField {
                number: 4,
                value: WireValue::Fixed32(7)
            }))
        ));
        assert!(matches!(reader.field(), Ok(None)));
    }

    #[test]
    fn broken_bytes_are_errors_not_panics() {
        for bytes in [
            &[0x08][..],
            &[0x0a, 5, 1],
            &[0xff; 11],
            &[0x00],
            &[0x0c],
            &[0x0b, 0x08],
            &[0x0f, 0],
        ] {
            let mut reader = Reader::new(bytes);
            let mut steps = 0;
            while let Ok(Some(_)) = reader.field() {
                steps += 1;
                assert!(steps < 10);
            }
        }
    }
}

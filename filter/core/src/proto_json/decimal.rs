//! Integers written as decimal strings (64-bit values, map keys, a Duration's seconds): one
//! canonical spelling, and a regular expression for exactly the integers of a range, so that a
//! schema's `pattern` refuses what the gate refuses.
//!
//! Ranges are held as magnitudes in `u64` (every protobuf integer type fits), which keeps
//! 128-bit arithmetic out of the `.wasm`.

/// The integers from `-below_zero` to `above_zero`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntRange {
    pub below_zero: u64,
    pub above_zero: u64,
}

impl IntRange {
    pub const INT32: IntRange = IntRange {
        below_zero: 1 << 31,
        above_zero: i32::MAX as u64,
    };
    pub const UINT32: IntRange = IntRange {
        below_zero: 0,
        above_zero: u32::MAX as u64,
    };
    pub const INT64: IntRange = IntRange {
        below_zero: 1 << 63,
        above_zero: i64::MAX as u64,
    };
    pub const UINT64: IntRange = IntRange {
        below_zero: 0,
        above_zero: u64::MAX,
    };
    /// Every integer with a 64-bit magnitude: for telling a number too large from one misspelled.
    pub const ANY: IntRange = IntRange {
        below_zero: u64::MAX,
        above_zero: u64::MAX,
    };

    pub fn contains_i64(self, value: i64) -> bool {
        if value < 0 {
            value.unsigned_abs() <= self.below_zero
        } else {
            value.unsigned_abs() <= self.above_zero
        }
    }

    pub fn contains_u64(self, value: u64) -> bool {
        value <= self.above_zero
    }

    /// `-?(0|[1-9][0-9]*)`, no `+`, no leading zeros, no `-0`, with a value in range.
    pub fn is_canonical_decimal(self, text: &str) -> bool {
        let (negative, digits) = match text.strip_prefix('-') {
            Some(digits) => (true, digits),
            None => (false, text),
        };
        let canonical = match digits.as_bytes() {
            [] => false,
            [b'0'] => !negative,
            [first, rest @ ..] => (b'1'..=b'9').contains(first) && rest.iter().all(u8::is_ascii_digit),
        };
        let limit = if negative { self.below_zero } else { self.above_zero };
        canonical && digits.parse::<u64>().is_ok_and(|magnitude| magnitude <= limit)
    }

    /// An ECMA-262 regular expression matching the canonical decimals in range, anchored.
    pub fn pattern(self) -> String {
        format!("^({})$", self.alternatives())
    }

    /// The same, unanchored, to build larger patterns with.
    pub fn alternatives(self) -> String {
        let mut alternatives = vec!["0".to_owned()];
        if self.above_zero >= 1 {
            alternatives.extend(one_up_to(self.above_zero));
        }
        if self.below_zero >= 1 {
            alternatives.push(format!("-({})", one_up_to(self.below_zero).join("|")));
        }
        alternatives.join("|")
    }
}

/// Alternatives that together match 1 to `n`: every shorter number, then each prefix of `n`
/// followed by a smaller digit and any digits, then `n` itself.
fn one_up_to(n: u64) -> Vec<String> {
    let digits = n.to_string();
    let length = digits.len();
    let mut alternatives = Vec::new();
    match length {
        0 | 1 => {}
        2 => alternatives.push("[1-9]".to_owned()),
        _ => alternatives.push(format!("[1-9][0-9]{{0,{}}}", length - 2)),
    }
    for (position, digit) in digits.bytes().enumerate() {
        let lowest = if position == 0 { b'1' } else { b'0' };
        if digit <= lowest {
            continue;
        }
        let below = if digit - 1 == lowest {
            char::from(lowest).to_string()
        } else {
            format!("[{}-{}]", char::from(lowest), char::from(digit - 1))
        };
        let rest = match length - position - 1 {
            0 => String::new(),
            1 => "[0-9]".to_owned(),
            more => format!("[0-9]{{{more}}}"),
        };
        alternatives.push(format!("{}{below}{rest}", &digits[..position]));
    }
    alternatives.push(digits);
    alternatives
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, text: &str) -> bool {
        regex::Regex::new(pattern).unwrap().is_match(text)
    }

    fn range(below_zero: u64, above_zero: u64) -> IntRange {
        IntRange { below_zero, above_zero }
    }

    #[test]
    fn canonical_decimals_in_range() {
        for good in ["0", "7", "-7", "9223372036854775807", "-9223372036854775808"] {
            assert!(IntRange::INT64.is_canonical_decimal(good), "{good}");
        }
        for bad in [
            "",
            "-",
            "+7",
            "007",
            "-0",
            " 7",
            "7 ",
            "1e3",
            "1.0",
            "9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999999999999999999999999999",
        ] {
            assert!(!IntRange::INT64.is_canonical_decimal(bad), "{bad}");
        }
        assert!(!IntRange::UINT32.is_canonical_decimal("-1"));
        assert!(IntRange::INT32.contains_i64(-2_147_483_648) && !IntRange::INT32.contains_i64(2_147_483_648));
    }

    #[test]
    fn patterns_spell_the_range() {
        assert_eq!(range(0, 9).pattern(), "^(0|[1-8]|9)$");
        assert_eq!(
            range(128, 127).pattern(),
            "^(0|[1-9][0-9]{0,1}|1[0-1][0-9]|12[0-6]|127|-([1-9][0-9]{0,1}|1[0-1][0-9]|12[0-7]|128))$"
        );
    }

    #[test]
    fn patterns_match_exactly_the_canonical_decimals_in_range() {
        for (below_zero, above_zero) in [
            (0, 9),
            (0, 10),
            (0, 255),
            (128, 127),
            (1, 99),
            (0, 1000),
            (305, 0),
            (0, 1),
        ] {
            let range = range(below_zero, above_zero);
            let pattern = range.pattern();
            for value in -1100_i64..=1100 {
                for text in [value.to_string(), format!("0{value}"), format!("+{value}")] {
                    assert_eq!(
                        matches(&pattern, &text),
                        range.is_canonical_decimal(&text),
                        "{text} against {range:?}: {pattern}"
                    );
                }
            }
        }
    }

    #[test]
    fn patterns_hold_at_the_64_bit_edges() {
        let edges = [
            "9223372036854775806",
            "9223372036854775807",
            "9223372036854775808",
            "9223372036854775810",
            "-9223372036854775808",
            "-9223372036854775809",
            "18446744073709551615",
            "18446744073709551616",
            "18446744073709551700",
            "99999999999999999999",
            "100000000000000000000",
            "1000000000000000000",
        ];
        for text in edges {
            let int64 = IntRange::INT64.is_canonical_decimal(text);
            let uint64 = IntRange::UINT64.is_canonical_decimal(text);
            assert_eq!(matches(&IntRange::INT64.pattern(), text), int64, "int64 {text}");
            assert_eq!(matches(&IntRange::UINT64.pattern(), text), uint64, "uint64 {text}");
            assert_eq!(int64, text.parse::<i64>().is_ok(), "{text}");
            assert_eq!(uint64, text.parse::<u64>().is_ok(), "{text}");
        }
    }
}

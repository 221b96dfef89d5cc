//! Integers written as decimal strings (64-bit values, map keys, a Duration's seconds): one
//! canonical spelling, and the regular expression a schema's `pattern` gives for it.
//!
//! The pattern says the spelling and the number of digits, not the exact range: a pattern for
//! exactly the 64-bit integers runs to 800 characters, which every `tools/list` and every
//! model's context would carry once per such field. The gate checks the range, and names it.
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
        let Some((negative, digits)) = canonical_spelling(text) else {
            return false;
        };
        let limit = if negative { self.below_zero } else { self.above_zero };
        digits.parse::<u64>().is_ok_and(|magnitude| magnitude <= limit)
    }

    /// An ECMA-262 regular expression for canonical decimals with no more digits than the
    /// range's bound (and no sign when the range has no negatives), anchored.
    pub fn pattern(self) -> String {
        format!("^({})$", self.alternatives())
    }

    /// The same, unanchored, to build larger patterns with.
    pub fn alternatives(self) -> String {
        let digits = self.below_zero.max(self.above_zero).to_string().len();
        let sign = if self.below_zero > 0 { "-?" } else { "" };
        match digits {
            1 => format!("0|{sign}[1-9]"),
            _ => format!("0|{sign}[1-9][0-9]{{0,{}}}", digits - 1),
        }
    }

    /// Whether `text` has the pattern's shape: canonical, and no longer than the bound.
    #[cfg(test)]
    fn has_shape(self, text: &str) -> bool {
        canonical_spelling(text).is_some_and(|(negative, digits)| {
            (self.below_zero > 0 || !negative) && digits.len() <= self.below_zero.max(self.above_zero).to_string().len()
        })
    }
}

/// Whether `text` is an integer spelled canonically, whatever its size.
pub fn is_canonical_spelling(text: &str) -> bool {
    canonical_spelling(text).is_some()
}

/// Whether `text` is spelled `-?(0|[1-9][0-9]*)` without `-0`: its sign and digits if so.
fn canonical_spelling(text: &str) -> Option<(bool, &str)> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, text),
    };
    let canonical = match digits.as_bytes() {
        [] => false,
        [b'0'] => !negative,
        [first, rest @ ..] => (b'1'..=b'9').contains(first) && rest.iter().all(u8::is_ascii_digit),
    };
    canonical.then_some((negative, digits))
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
    fn patterns_say_the_spelling_and_the_number_of_digits() {
        assert_eq!(IntRange::INT64.pattern(), "^(0|-?[1-9][0-9]{0,18})$");
        assert_eq!(IntRange::UINT64.pattern(), "^(0|[1-9][0-9]{0,19})$");
        assert_eq!(IntRange::INT32.pattern(), "^(0|-?[1-9][0-9]{0,9})$");
        assert_eq!(range(0, 9).pattern(), "^(0|[1-9])$");
    }

    #[test]
    fn patterns_admit_every_value_in_range_and_only_canonical_decimals_of_that_length() {
        for (below_zero, above_zero) in [(0, 9), (0, 10), (0, 255), (128, 127), (1, 99), (305, 0)] {
            let range = range(below_zero, above_zero);
            let pattern = range.pattern();
            for value in -1100_i64..=1100 {
                for text in [value.to_string(), format!("0{value}"), format!("+{value}")] {
                    assert_eq!(matches(&pattern, &text), range.has_shape(&text), "{text}: {pattern}");
                    if range.is_canonical_decimal(&text) {
                        assert!(matches(&pattern, &text), "{text} in range, refused by {pattern}");
                    }
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
            assert_eq!(int64, text.parse::<i64>().is_ok(), "{text}");
            assert_eq!(uint64, text.parse::<u64>().is_ok(), "{text}");
            assert_eq!(
                matches(&IntRange::INT64.pattern(), text),
                IntRange::INT64.has_shape(text),
                "int64 {text}"
            );
            assert_eq!(
                matches(&IntRange::UINT64.pattern(), text),
                IntRange::UINT64.has_shape(text),
                "uint64 {text}"
            );
            assert!(!int64 || matches(&IntRange::INT64.pattern(), text), "int64 {text}");
            assert!(!uint64 || matches(&IntRange::UINT64.pattern(), text), "uint64 {text}");
        }
    }
}

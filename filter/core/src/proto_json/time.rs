//! `google.protobuf.Timestamp` and `Duration` in their JSON forms: RFC 3339 in UTC, and
//! seconds with an `s`. Both are read strictly and written canonically (0, 3, 6 or 9 digits
//! of fraction, as proto3 JSON writers do).

/// The Timestamp range proto3 JSON allows: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z.
const MIN_SECONDS: i64 = -62_135_596_800;
const MAX_SECONDS: i64 = 253_402_300_799;
/// ±10,000 years.
pub const MAX_DURATION_SECONDS: u64 = 315_576_000_000;
const NANOS: i64 = 1_000_000_000;

/// Seconds and nanoseconds since the epoch, or why the text is not a valid timestamp.
pub fn parse_timestamp(text: &str) -> Result<(i64, i32), &'static str> {
    let bytes = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = bytes.get(range)?;
        digits.iter().try_fold(0i64, |sum, digit| {
            digit.is_ascii_digit().then(|| sum * 10 + i64::from(digit - b'0'))
        })
    };
    let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if bytes.len() < 20 || separators.iter().any(|&(at, byte)| bytes[at] != byte) {
        return Err("not an RFC 3339 date and time");
    }
    let fields = [0..4, 5..7, 8..10, 11..13, 14..16, 17..19].map(number);
    let [Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second)] = fields else {
        return Err("not an RFC 3339 date and time");
    };
    let mut rest = &bytes[19..];
    let mut nanos = 0i64;
    if let Some(fraction) = rest.strip_prefix(b".") {
        let digits = fraction.iter().take_while(|byte| byte.is_ascii_digit()).count();
        if !(1..=9).contains(&digits) {
            return Err("the fraction of a second has more than nine digits");
        }
        nanos = fraction[..digits]
            .iter()
            .fold(0, |sum, digit| sum * 10 + i64::from(digit - b'0'))
            * 10i64.pow(9 - digits as u32);
        rest = &fraction[digits..];
    }
    let offset_minutes = match rest {
        b"Z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digits = [*h1, *h2, *m1, *m2];
            if !digits.iter().all(u8::is_ascii_digit) {
                return Err("not an RFC 3339 time offset");
            }
            let [h1, h2, m1, m2] = digits.map(|digit| i64::from(digit - b'0'));
            let minutes = (h1 * 10 + h2) * 60 + m1 * 10 + m2;
            if *sign == b'-' {
                -minutes
            } else {
                minutes
            }
        }
        _ => return Err("not an RFC 3339 time offset (Z or ±HH:MM)"),
    };
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err("not a valid date");
    }
    // A leap second (:60) is counted as the second after :59, as proto3 JSON readers do.
    if hour > 23 || minute > 59 || second > 60 {
        return Err("not a valid time of day");
    }
    let seconds =
        days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second - offset_minutes * 60;
    if !(MIN_SECONDS..=MAX_SECONDS).contains(&seconds) {
        return Err("outside the years 0001 to 9999");
    }
    Ok((seconds, nanos as i32))
}

/// RFC 3339 in UTC, or `None` outside the years 0001 to 9999 (or with invalid nanoseconds).
pub fn format_timestamp(seconds: i64, nanos: i32) -> Option<String> {
    let mut text = String::with_capacity(30);
    write_timestamp(&mut text, seconds, nanos).then_some(text)
}

/// Writes the timestamp as [`format_timestamp`] does, digit by digit (answers carry many, and
/// the formatting machinery costs more than the date arithmetic); `false`, with nothing
/// written, where that gives `None`.
pub fn write_timestamp(out: &mut String, seconds: i64, nanos: i32) -> bool {
    if !(MIN_SECONDS..=MAX_SECONDS).contains(&seconds) || !(0..NANOS as i32).contains(&nanos) {
        return false;
    }
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    // Within the range above every part is non-negative and fits its digits.
    let parts = [
        (year, 4, '-'),
        (month, 2, '-'),
        (day, 2, 'T'),
        (of_day / 3_600, 2, ':'),
        (of_day % 3_600 / 60, 2, ':'),
    ];
    for (part, width, separator) in parts {
        push_digits(out, part.unsigned_abs(), width);
        out.push(separator);
    }
    push_digits(out, (of_day % 60).unsigned_abs(), 2);
    push_fraction(out, nanos.unsigned_abs());
    out.push('Z');
    true
}

/// Seconds and nanoseconds (with the same sign), or why the text is not a valid duration.
pub fn parse_duration(text: &str) -> Result<(i64, i32), &'static str> {
    let number = text.strip_suffix('s').ok_or("not a number of seconds followed by s")?;
    let (negative, number) = match number.strip_prefix('-') {
        Some(number) => (true, number),
        None => (false, number),
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let canonical = whole == "0" || (whole.starts_with(|c: char| ('1'..='9').contains(&c)));
    if !canonical || !whole.bytes().all(|byte| byte.is_ascii_digit()) || whole.len() > 12 {
        return Err("not a number of seconds followed by s");
    }
    let seconds: u64 = whole.parse().map_err(|_| "not a number of seconds followed by s")?;
    if seconds > MAX_DURATION_SECONDS {
        return Err("longer than 10,000 years");
    }
    if number.contains('.')
        && (!(1..=9).contains(&fraction.len()) || !fraction.bytes().all(|byte| byte.is_ascii_digit()))
    {
        return Err("the fraction of a second has one to nine digits");
    }
    let nanos = fraction
        .bytes()
        .fold(0i64, |sum, digit| sum * 10 + i64::from(digit - b'0'))
        * 10i64.pow(9 - fraction.len() as u32);
    let sign = if negative { -1 } else { 1 };
    Ok((sign * seconds as i64, (sign * nanos) as i32))
}

/// `1.500s`, `-2s`, or `None` out of range or with signs that disagree.
pub fn format_duration(seconds: i64, nanos: i32) -> Option<String> {
    let mut text = String::with_capacity(24);
    write_duration(&mut text, seconds, nanos).then_some(text)
}

/// Writes the duration as [`format_duration`] does; `false`, with nothing written, where that
/// gives `None`.
pub fn write_duration(out: &mut String, seconds: i64, nanos: i32) -> bool {
    if seconds.unsigned_abs() > MAX_DURATION_SECONDS
        || nanos.unsigned_abs() >= NANOS as u32
        || (seconds > 0 && nanos < 0)
        || (seconds < 0 && nanos > 0)
    {
        return false;
    }
    if seconds < 0 || nanos < 0 {
        out.push('-');
    }
    out.push_str(itoa::Buffer::new().format(seconds.unsigned_abs()));
    push_fraction(out, nanos.unsigned_abs());
    out.push('s');
    true
}

/// `.fff`, `.ffffff` or `.fffffffff`, whichever is shortest and exact; nothing for zero.
fn push_fraction(out: &mut String, nanos: u32) {
    if nanos == 0 {
        return;
    }
    let (value, width) = if nanos.is_multiple_of(1_000_000) {
        (nanos / 1_000_000, 3)
    } else if nanos.is_multiple_of(1_000) {
        (nanos / 1_000, 6)
    } else {
        (nanos, 9)
    };
    out.push('.');
    push_digits(out, u64::from(value), width);
}

/// The last `width` decimal digits of `value`, with leading zeros.
fn push_digits(out: &mut String, value: u64, width: u32) {
    for place in (0..width).rev() {
        let digit = value / 10u64.pow(place) % 10;
        out.push(char::from(b'0' + digit as u8));
    }
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of a day since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip() {
        for (text, seconds, nanos) in [
            ("1970-01-01T00:00:00Z", 0, 0),
            ("2026-01-31T12:00:00.250Z", 1_769_860_800, 250_000_000),
            ("0001-01-01T00:00:00Z", MIN_SECONDS, 0),
            ("9999-12-31T23:59:59.999999999Z", MAX_SECONDS, 999_999_999),
            ("2024-02-29T00:00:00.000001Z", 1_709_164_800, 1_000),
            ("1969-12-31T23:59:59.000000001Z", -1, 1),
        ] {
            assert_eq!(parse_timestamp(text), Ok((seconds, nanos)), "{text}");
            assert_eq!(format_timestamp(seconds, nanos).as_deref(), Some(text));
        }
        assert_eq!(
            parse_timestamp("2026-01-31T13:00:00+01:00"),
            parse_timestamp("2026-01-31T12:00:00Z")
        );
        assert_eq!(
            parse_timestamp("2026-01-31T23:59:60Z"),
            parse_timestamp("2026-02-01T00:00:00Z")
        );
    }

    #[test]
    fn invalid_timestamps_say_why() {
        for text in [
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2026-01-31T24:00:00Z",
            "2026-01-31t12:00:00z",
            "2026-01-31T12:00:00",
            "2026-01-31T12:00:00.Z",
            "2026-01-31T12:00:00.1234567891Z",
            "0000-12-31T23:59:59Z",
            "9999-12-31T23:00:00-01:00",
            "2026-01-31T12:00:00+1:00",
        ] {
            assert!(parse_timestamp(text).is_err(), "{text}");
        }
        assert_eq!(format_timestamp(MAX_SECONDS + 1, 0), None);
        assert_eq!(format_timestamp(0, -1), None);
    }

    #[test]
    fn durations_round_trip() {
        for (text, seconds, nanos) in [
            ("0s", 0, 0),
            ("1.500s", 1, 500_000_000),
            ("-1.500s", -1, -500_000_000),
            ("-0.000000001s", 0, -1),
            ("315576000000.999999999s", 315_576_000_000, 999_999_999),
        ] {
            assert_eq!(parse_duration(text), Ok((seconds, nanos)), "{text}");
            assert_eq!(format_duration(seconds, nanos).as_deref(), Some(text));
        }
        assert_eq!(parse_duration("1.5s"), Ok((1, 500_000_000)));
        for text in [
            "1.5",
            "+1s",
            "01s",
            "1.s",
            ".5s",
            "1.1234567891s",
            "315576000001s",
            "5 minutes",
            "-s",
        ] {
            assert!(parse_duration(text).is_err(), "{text}");
        }
        assert_eq!(format_duration(1, -1), None);
    }
}

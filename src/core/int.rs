//! Integers as Redis writes them (`INCRBY`, `PEXPIRE`, `INCR` on a stored
//! value): an optional `-`, then `0` or a digit 1-9 followed by digits. No `+`,
//! no leading zeros, no spaces, no `-0`.

/// 2^53 - 1: the largest integer a double (a sorted-set score) holds exactly.
pub const MAX_SAFE: i64 = (1 << 53) - 1;

/// Parses `bytes` as a strict Redis integer; `None` for anything else,
/// including values outside `i64`.
pub fn parse_i64(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, bytes),
    };
    match digits {
        [] => return None,
        [b'0'] if !negative => return Some(0),
        [b'0', ..] => return None,
        _ => {}
    }
    if digits.len() <= 18 {
        // Below 10^18: no overflow possible, no check per digit.
        let mut value: i64 = 0;
        for &b in digits {
            let digit = b.wrapping_sub(b'0');
            if digit > 9 {
                return None;
            }
            value = value * 10 + i64::from(digit);
        }
        return Some(if negative { -value } else { value });
    }
    let mut value: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        let digit = i64::from(b - b'0');
        // Accumulate negatively so that i64::MIN parses too.
        value = value.checked_mul(10)?.checked_sub(digit)?;
    }
    if negative {
        Some(value)
    } else {
        value.checked_neg()
    }
}

/// Parses a strict integer and checks it lies in `[lo, hi]`.
pub fn parse_in_range(bytes: &[u8], lo: i64, hi: i64) -> Option<i64> {
    parse_i64(bytes).filter(|v| (lo..=hi).contains(v))
}

/// Writes `v` in decimal into `buf` (an `i64` has at most 20 characters)
/// and returns the digits: no allocation on the hot path.
pub fn decimal(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..]
}

/// A stored value is usable when it is a finite number within `±MAX_SAFE`.
pub fn is_safe_score(score: f64) -> bool {
    score.is_finite() && score.abs() <= MAX_SAFE as f64
}

/// Rounds a time in ms up to a whole ms. Inputs are safe scores plus durations,
/// so the result always fits an `i64`.
pub fn ceil_ms(ms: f64) -> i64 {
    ms.ceil() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_incrby_accepts() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("5", 5),
            ("-5", -5),
            ("1000", 1000),
            ("9007199254740991", MAX_SAFE),
            // Either side of the unchecked path's 18 digits.
            ("999999999999999999", 999_999_999_999_999_999),
            ("-999999999999999999", -999_999_999_999_999_999),
            ("1000000000000000000", 1_000_000_000_000_000_000),
            ("-1000000000000000000", -1_000_000_000_000_000_000),
            ("9223372036854775807", i64::MAX),
            ("-9223372036854775808", i64::MIN),
        ];
        for (text, want) in cases {
            assert_eq!(parse_i64(text.as_bytes()), Some(*want), "{text}");
        }
    }

    #[test]
    fn rejects_what_incrby_rejects() {
        for text in [
            "",
            "-",
            "+5",
            "05",
            "-05",
            "-0",
            " 5",
            "5 ",
            "5.0",
            "1e3",
            "0x10",
            "abc",
            // The bytes either side of the digits.
            "1/",
            "1:",
            "-12345678901234567/",
            "12345678901234567:",
            "9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999999",
            "٣",
        ] {
            assert_eq!(parse_i64(text.as_bytes()), None, "{text:?}");
        }
        assert_eq!(parse_i64(b"\xff\x00"), None);
    }

    #[test]
    fn range_checks_are_inclusive() {
        assert_eq!(parse_in_range(b"1", 1, MAX_SAFE), Some(1));
        assert_eq!(parse_in_range(b"0", 1, MAX_SAFE), None);
        assert_eq!(
            parse_in_range(b"9007199254740991", 1, MAX_SAFE),
            Some(MAX_SAFE)
        );
        assert_eq!(parse_in_range(b"9007199254740992", 1, MAX_SAFE), None);
        assert_eq!(parse_in_range(b"-1", 0, MAX_SAFE), None);
    }

    #[test]
    fn decimals_are_written_as_redis_writes_them() {
        let mut buf = [0u8; 20];
        for v in [0, 7, -7, 10, 1000, MAX_SAFE, -MAX_SAFE, i64::MAX, i64::MIN] {
            assert_eq!(decimal(v, &mut buf), v.to_string().as_bytes());
        }
    }

    #[test]
    fn safe_scores() {
        assert!(is_safe_score(0.0));
        assert!(is_safe_score(MAX_SAFE as f64));
        assert!(is_safe_score(-(MAX_SAFE as f64)));
        assert!(is_safe_score(12.5));
        assert!(!is_safe_score(9007199254740992.0));
        assert!(!is_safe_score(f64::INFINITY));
        assert!(!is_safe_score(f64::NEG_INFINITY));
        assert!(!is_safe_score(f64::NAN));
    }

    #[test]
    fn ceil_rounds_fractions_up() {
        assert_eq!(ceil_ms(10.0), 10);
        assert_eq!(ceil_ms(10.2), 11);
        assert_eq!(ceil_ms(-10.5), -10);
    }
}

//! Member names for admitted units.
//!
//! Eight characters: a letter, then seven from `[0-9A-Za-z]`, so a name never
//! reads as a decimal number nor as a UUID (the names older Lua scripts
//! write). Names come from a counter that starts at a random point per process;
//! the command layer adds with NX and asks for another name on the rare clash
//! (a name written before a restart or by another primary), so two units
//! never merge and the score is never shifted.

/// Number of distinct names: 52 * 62^7.
pub const SPACE: u64 = 52 * 62u64.pow(7);

const LETTERS: &[u8; 52] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const ALNUM: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The name for counter value `n` (taken modulo [`SPACE`]).
pub fn name(n: u64) -> [u8; 8] {
    let mut n = n % SPACE;
    let mut out = [0u8; 8];
    for slot in out[1..].iter_mut().rev() {
        *slot = ALNUM[(n % 62) as usize];
        n /= 62;
    }
    out[0] = LETTERS[(n % 52) as usize];
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn looks_numeric(s: &str) -> bool {
        let s = s.strip_prefix('-').unwrap_or(s);
        let (int, frac) = s.split_once('.').unwrap_or((s, "1"));
        !int.is_empty()
            && int.bytes().all(|b| b.is_ascii_digit())
            && !frac.is_empty()
            && frac.bytes().all(|b| b.is_ascii_digit())
    }

    #[test]
    fn names_are_short_unique_and_never_numbers_or_uuids() {
        let mut seen = HashSet::new();
        for n in (0..200_000u64)
            .chain(SPACE - 100..SPACE + 100)
            .chain([u64::MAX, u64::MAX - 1])
        {
            let b = name(n);
            let s = std::str::from_utf8(&b).unwrap();
            assert_eq!(s.len(), 8);
            assert!(!looks_numeric(s), "{s}");
            assert!(s.as_bytes()[0].is_ascii_alphabetic(), "{s}");
            assert!(s.len() != 36, "never a UUID");
            if n < SPACE {
                assert!(seen.insert(b), "duplicate name {s} for {n}");
            }
        }
    }

    #[test]
    fn consecutive_counters_give_distinct_names_across_the_wrap() {
        assert_ne!(name(SPACE - 1), name(SPACE));
        assert_eq!(name(SPACE), name(0));
    }
}

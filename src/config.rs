//! Module configuration (`CONFIG SET` / `CONFIG GET ratelimit.<name>`, or a
//! load-time argument: `--loadmodule <path> max-future-ms 60000 max-past-ms
//! 86400000`).

use std::sync::atomic::AtomicI64;

use crate::core::int::{parse_in_range, MAX_SAFE};
use crate::error::show;

/// `ratelimit.max-future-ms`: when above 0, an explicit `now` more than this
/// many ms ahead of the server clock is an argument error naming `now` (a
/// caller sending microseconds, or a broken clock, would otherwise stamp
/// units into a far future and lock a key for years). 0 = off (default).
pub static MAX_FUTURE_MS: AtomicI64 = AtomicI64::new(0);

/// `ratelimit.max-past-ms`: the mirror of `max-future-ms`. When above 0, an
/// explicit `now` more than this many ms behind the server clock is an
/// argument error naming `now` (a `now` sent in seconds reads as January
/// 1970 and would otherwise be counted silently in the past). 0 = off.
pub static MAX_PAST_MS: AtomicI64 = AtomicI64::new(0);

/// The load-time arguments the module takes.
const LOAD_ARGS: [&str; 2] = ["max-future-ms", "max-past-ms"];

/// Checks the load-time arguments: `<name> <ms>` pairs, each name of
/// [`LOAD_ARGS`] at most once. Anything else fails the load with a message
/// saying why (the load path parses arguments more loosely than `CONFIG
/// SET`, so the value is checked again here, as `CONFIG SET` would check it).
pub fn check_load_args(args: &[&[u8]]) -> Result<(), String> {
    let mut seen: Vec<&[u8]> = Vec::new();
    for pair in args.chunks(2) {
        let (name, value) = match pair {
            [name, value] => (*name, Some(*value)),
            [name] => (*name, None),
            _ => continue,
        };
        if !LOAD_ARGS.iter().any(|known| known.as_bytes() == name) {
            return Err(format!(
                "unknown load argument '{}' (expected: {} <ms>)",
                show(name),
                LOAD_ARGS.join(" <ms>, ")
            ));
        }
        let shown = show(name);
        if seen.contains(&name) {
            return Err(format!("{shown} given twice"));
        }
        seen.push(name);
        let Some(value) = value else {
            return Err(format!("{shown} needs a value"));
        };
        if parse_in_range(value, 0, MAX_SAFE).is_none() {
            return Err(format!(
                "{shown}: '{}' is not an integer from 0 to {MAX_SAFE}",
                show(value)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_arguments() {
        let ok: &[&[u8]] = &[b"max-future-ms", b"60000", b"max-past-ms", b"0"];
        assert_eq!(check_load_args(ok), Ok(()));
        assert_eq!(check_load_args(&[]), Ok(()));
        for (args, want) in [
            (
                &[&b"max-past-ms"[..], b"1", b"max-past-ms", b"2"][..],
                "max-past-ms given twice",
            ),
            (
                &[b"max-past-ms", b"-1"],
                "max-past-ms: '-1' is not an integer",
            ),
            (&[b"max-past-ms"], "max-past-ms needs a value"),
            (
                &[b"max-futur-ms", b"1"],
                "unknown load argument 'max-futur-ms'",
            ),
        ] {
            let got = check_load_args(args).unwrap_err();
            assert!(got.starts_with(want), "{got}");
        }
    }
}

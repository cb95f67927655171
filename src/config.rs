//! Module configuration (`CONFIG SET` / `CONFIG GET ratelimit.<name>`, or a
//! load-time argument: `--loadmodule <path> max-future-ms 60000 max-past-ms
//! 86400000`).

use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

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

/// Applies the load-time arguments: `<name> <ms>` pairs, each name of
/// [`LOAD_ARGS`] at most once, each value an integer from 0 to 2^53-1 as
/// `CONFIG SET` takes it. Anything else fails the load with a message naming
/// the argument and the value (the module reads its arguments itself rather
/// than through `redis_module!`'s `module_args_as_configuration`, whose
/// error for `abc` names neither). Nothing is applied unless all are valid.
pub fn apply_load_args(args: &[&[u8]]) -> Result<(), String> {
    let mut values: Vec<(&[u8], i64)> = Vec::new();
    check_load_args(args, &mut values)?;
    for (name, v) in values {
        let target = if name == b"max-future-ms" {
            &MAX_FUTURE_MS
        } else {
            &MAX_PAST_MS
        };
        target.store(v, Relaxed);
    }
    Ok(())
}

fn check_load_args<'a>(args: &[&'a [u8]], values: &mut Vec<(&'a [u8], i64)>) -> Result<(), String> {
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
        let Some(v) = parse_in_range(value, 0, MAX_SAFE) else {
            return Err(format!(
                "{shown}: '{}' is not an integer from 0 to {MAX_SAFE}",
                show(value)
            ));
        };
        values.push((name, v));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_arguments() {
        let check = |args: &[&[u8]]| check_load_args(args, &mut Vec::new());
        let ok: &[&[u8]] = &[b"max-future-ms", b"60000", b"max-past-ms", b"0"];
        let mut values = Vec::new();
        assert_eq!(check_load_args(ok, &mut values), Ok(()));
        assert_eq!(
            values,
            [(&b"max-future-ms"[..], 60000), (&b"max-past-ms"[..], 0)]
        );
        assert_eq!(check(&[]), Ok(()));
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
                &[b"max-future-ms", b"abc"],
                "max-future-ms: 'abc' is not an integer from 0 to 9007199254740991",
            ),
            (
                &[b"max-past-ms", b"1.5"],
                "max-past-ms: '1.5' is not an integer",
            ),
            (
                &[b"max-futur-ms", b"1"],
                "unknown load argument 'max-futur-ms'",
            ),
        ] {
            let got = check(args).unwrap_err();
            assert!(got.starts_with(want), "{got}");
        }
    }
}

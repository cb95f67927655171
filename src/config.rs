//! Module configuration (`CONFIG SET` / `CONFIG GET ratelimit.<name>`, or a
//! load-time argument: `--loadmodule <path> max-future-ms 60000`).

use std::sync::atomic::AtomicI64;

/// `ratelimit.max-future-ms`: when above 0, an explicit `now` more than this
/// many ms ahead of the server clock is an argument error naming `now` (a
/// caller sending microseconds, or a broken clock, would otherwise stamp
/// units into a far future and lock a key for years). 0 = off (default).
pub static MAX_FUTURE_MS: AtomicI64 = AtomicI64::new(0);

/// The load-time arguments the module takes: `max-future-ms <ms>` pairs.
/// Anything else fails the load with a message saying why (the load path
/// parses arguments more loosely than `CONFIG SET`, so the value is checked
/// again here, as `CONFIG SET` would check it).
pub fn check_load_args(args: &[&[u8]]) -> Result<(), String> {
    let mut seen = false;
    for pair in args.chunks(2) {
        match pair {
            [name, _] if *name == b"max-future-ms" && seen => {
                return Err("max-future-ms given twice".into());
            }
            [name, value] if *name == b"max-future-ms" => {
                seen = true;
                if crate::core::int::parse_in_range(value, 0, crate::core::int::MAX_SAFE).is_none()
                {
                    return Err(format!(
                        "max-future-ms: '{}' is not an integer from 0 to {}",
                        crate::error::show(value),
                        crate::core::int::MAX_SAFE
                    ));
                }
            }
            [name, ..] => {
                return Err(format!(
                    "unknown load argument '{}' (expected: max-future-ms <ms>)",
                    crate::error::show(name)
                ))
            }
            [] => {}
        }
    }
    Ok(())
}

//! Module configuration (`CONFIG SET` / `CONFIG GET ratelimit.<name>`, or a
//! load-time argument: `--loadmodule <path> max-future-ms 60000`).

use std::sync::atomic::AtomicI64;

/// `ratelimit.max-future-ms`: when above 0, an explicit `now` more than this
/// many ms ahead of the server clock is an argument error naming `now` (a
/// caller sending microseconds, or a broken clock, would otherwise stamp
/// units into a far future and lock a key for years). 0 = off (default).
pub static MAX_FUTURE_MS: AtomicI64 = AtomicI64::new(0);

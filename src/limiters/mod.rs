//! The limiters: one folder per algorithm — the sliding-window log
//! (`sliding_log`, RL.CHECK), GCRA (`gcra`, RL.THROTTLE), calendar quotas
//! (`calendar`, RL.QUOTA) and leases (`lease`, RL.LEASE). Each folder owns
//! its arguments (`args.rs`), its pure decision (no Redis types, the clock
//! passed in, table-tested with plain `cargo test`), and in its `mod.rs` the
//! [`Limiter`]: how it reads its state from a key, and how it writes and
//! replicates its effects.
//!
//! Every command that decides is a runner over this interface:
//! `commands::runner` runs one limiter (RL.CHECK, RL.THROTTLE, RL.QUOTA,
//! RL.LEASE and their peeks), `commands::all` runs many (RL.ALL,
//! RL.ALLPEEK) through [`AnyLimiter`]. A fifth algorithm is one new folder,
//! one line in `registry.rs` and its clause word in `core::all::Kind`.
//!
//! Dependencies run one way: `commands` → `limiters` → `core`, `redis_api`.

pub mod calendar;
pub mod gcra;
mod hash_writes;
pub mod lease;
pub mod sliding_log;
mod sorted_set;
#[cfg(test)]
mod tests;

mod limiter;
mod registry;

pub use limiter::{Limiter, Mode, Phase, Request, RuleReplies};
pub use registry::{AnyArgs, AnyLimiter};

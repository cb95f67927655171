//! The command layer: the entry points Redis calls (this file), the call's
//! key, clock and context (`call`), the reply (`outcome`). The commands that
//! decide are runners over the limiters (`crate::limiters`): `runner` over
//! one (RL.CHECK, RL.THROTTLE, RL.QUOTA, RL.LEASE and their peeks), `all`
//! over many (RL.ALL, RL.ALLPEEK); `lease` holds RL.RELEASE and RL.RENEW;
//! `dayhour` and `lockcount` are the seeds' counters.

pub mod all;
mod call;
mod counter_keys;
pub mod dayhour;
pub mod lease;
pub mod lockcount;
mod outcome;
pub mod runner;

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::raw;

use self::outcome::Outcome;
use crate::error::Error;
use crate::limiters::calendar::Calendar;
use crate::limiters::gcra::TokenBucket;
use crate::limiters::lease::Lease;
use crate::limiters::sliding_log::SlidingLog;
use crate::redis_api::{bytes, reply_error, Ctx, RString};
use crate::stats::{self, CommandStats};

type Handler = fn(Ctx, &[RString]) -> Result<Outcome, Error>;

/// Runs a handler: counts it, replies, and turns a panic into an error reply
/// instead of letting it abort the server.
fn run(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut RString,
    argc: c_int,
    stats: &CommandStats,
    handler: Handler,
) -> c_int {
    let ctx = Ctx(ctx);
    let args: &[RString] = if argv.is_null() || argc <= 0 {
        &[]
    } else {
        unsafe { std::slice::from_raw_parts(argv, argc as usize) }
    };
    // The reply is sent where the outcome was made: an `Outcome` is large
    // (RL.LEASE's token inline), and moving it out costs two copies a call.
    // Sending it cannot panic (no indexing, no allocation).
    let result = catch_unwind(AssertUnwindSafe(|| match handler(ctx, args) {
        Ok(ref outcome) => {
            stats.record(outcome.kind);
            Ok(outcome.send(ctx))
        }
        Err(e) => Err(e),
    }))
    .unwrap_or_else(|_| {
        Err(Error::Internal(
            "internal error in the ratelimit module".into(),
        ))
    });
    match result {
        Ok(status) => status,
        Err(e) => {
            stats.record(stats::Kind::Error);
            reply_error(ctx, &e.reply_text())
        }
    }
}

/// The `extern "C"` entry points Redis calls, one per command: each runs
/// its handler through [`run`] with its INFO counters.
macro_rules! entry_points {
    ($($name:ident => $stats:ident, $handler:expr;)*) => {$(
        pub extern "C" fn $name(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut RString,
            argc: c_int,
        ) -> c_int {
            run(ctx, argv, argc, &stats::$stats, $handler)
        }
    )*};
}

/// RL.ALL and RL.ALLPEEK are flagged `getkeys-api` besides their key-count
/// key spec: Redis 7.0's Cluster routing (and `CROSSSLOT`) finds a module
/// command's movable keys through this call, not through the spec. Asked
/// for its keys, the command names `numkeys` keys from index 2 (none when
/// `numkeys` is not a valid count: the call then fails on its arguments).
fn answer_keys_request(ctx: *mut raw::RedisModuleCtx, argv: *mut RString, argc: c_int) -> bool {
    let (Some(is_request), Some(key_at)) =
        (unsafe { raw::RedisModule_IsKeysPositionRequest }, unsafe {
            raw::RedisModule_KeyAtPos
        })
    else {
        return false;
    };
    if unsafe { is_request(ctx) } == 0 {
        return false;
    }
    let args: &[RString] = if argv.is_null() || argc <= 0 {
        &[]
    } else {
        unsafe { std::slice::from_raw_parts(argv, argc as usize) }
    };
    let max = crate::core::all::MAX_KEYS as i64;
    if let Some(n) = args
        .get(1)
        .and_then(|&a| crate::core::int::parse_in_range(bytes(a), 1, max))
    {
        if n as usize + 2 <= args.len() {
            for pos in 2..2 + n as c_int {
                unsafe { key_at(ctx, pos) };
            }
        }
    }
    true
}

/// RL.ALL's and RL.ALLPEEK's entry points: a keys request answered, else
/// run as the others are.
macro_rules! key_count_entry_points {
    ($($name:ident => $stats:ident, $handler:expr;)*) => {$(
        pub extern "C" fn $name(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut RString,
            argc: c_int,
        ) -> c_int {
            if answer_keys_request(ctx, argv, argc) {
                return raw::REDISMODULE_OK as c_int;
            }
            run(ctx, argv, argc, &stats::$stats, $handler)
        }
    )*};
}

key_count_entry_points! {
    rl_all => ALL, all::all;
    rl_allpeek => ALLPEEK, all::all_peek;
}

entry_points! {
    rl_check => CHECK, runner::command::<SlidingLog>;
    rl_peek => PEEK, runner::peek::<SlidingLog>;
    rl_dayhour => DAYHOUR, dayhour::dayhour;
    rl_lockcount => LOCKCOUNT, lockcount::lockcount;
    rl_throttle => THROTTLE, runner::command::<TokenBucket>;
    rl_throttlepeek => THROTTLEPEEK, runner::peek::<TokenBucket>;
    rl_quota => QUOTA, runner::command::<Calendar>;
    rl_quotapeek => QUOTAPEEK, runner::peek::<Calendar>;
    rl_lease => LEASE, runner::command::<Lease>;
    rl_leasepeek => LEASEPEEK, runner::peek::<Lease>;
    rl_release => RELEASE, lease::release;
    rl_renew => RENEW, lease::renew;
}

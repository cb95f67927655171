//! The command layer: one file per command. Each parses its arguments into
//! typed values, reads the keys, asks the core, applies the writes, replicates
//! them as native commands, and returns the reply.

pub mod all;
pub mod check;
mod counter_keys;
pub mod dayhour;
mod hash_state;
pub mod lease;
pub mod lockcount;
pub mod quota;
pub mod throttle;

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::raw;
use smallvec::SmallVec;

use crate::core::args::Clock;
use crate::error::Error;
use crate::redis_api::{
    bytes, reply_error, reply_integers, reply_integers_then, CallContext, Ctx, RString,
};
use crate::stats::{self, CommandStats};

/// A successful call: the integers of the reply and whether the request was
/// admitted (for the INFO counters). Held inline, so an admitted call
/// allocates nothing for its reply; only a per-token reply (RL.RELEASE,
/// RL.RENEW) uses the heap.
pub struct Outcome {
    reply: [i64; 7],
    len: usize,
    /// One integer per token, when the reply is that (RL.RELEASE, RL.RENEW).
    per_token: Vec<i64>,
    /// RL.LEASE's seventh element: the lease's token, or nil.
    last: Last,
    kind: stats::Kind,
}

/// What follows the integers of a reply.
enum Last {
    Nothing,
    Nil,
    Token([u8; crate::core::lease_args::MAX_TOKEN_LEN], usize),
}

impl Outcome {
    /// Up to seven integers (every decision of the module fits; RL.ALL's
    /// reply is seven).
    pub fn new(values: &[i64], admitted: bool) -> Outcome {
        let kind = if admitted {
            stats::Kind::Admitted
        } else {
            stats::Kind::Rejected
        };
        Self::of(values, kind)
    }

    /// A refund: counted as a call and a refund, not as admitted or rejected.
    pub fn refund(values: &[i64]) -> Outcome {
        Self::of(values, stats::Kind::Refund)
    }

    /// A debit: counted as a call and a debit, not as admitted or rejected.
    pub fn debit(values: &[i64]) -> Outcome {
        Self::of(values, stats::Kind::Debit)
    }

    /// RL.LEASE: six integers, then the token when admitted, nil when not.
    pub fn lease(values: &[i64], token: Option<&[u8]>) -> Outcome {
        let mut outcome = Self::new(values, token.is_some());
        outcome.last = match token {
            None => Last::Nil,
            Some(t) => {
                let mut buf = [0; crate::core::lease_args::MAX_TOKEN_LEN];
                let n = t.len().min(buf.len());
                buf[..n].copy_from_slice(&t[..n]);
                Last::Token(buf, n)
            }
        };
        outcome
    }

    /// RL.RELEASE / RL.RENEW: one count per token, and the units and lost
    /// tokens INFO adds up.
    pub fn per_token(counts: Vec<i64>, lost: u64) -> Outcome {
        let units = counts.iter().map(|&n| n.max(0) as u64).sum();
        let mut outcome = Self::of(&[], stats::Kind::Tokens { units, lost });
        outcome.per_token = counts;
        outcome
    }

    fn of(values: &[i64], kind: stats::Kind) -> Outcome {
        let mut reply = [0; 7];
        let len = values.len().min(reply.len());
        reply[..len].copy_from_slice(&values[..len]);
        Outcome {
            reply,
            len,
            per_token: Vec::new(),
            last: Last::Nothing,
            kind,
        }
    }

    /// The first six integers: a single command's decision, as RL.ALL
    /// reads its clauses'.
    fn six(&self) -> [i64; 6] {
        let r = &self.reply;
        [r[0], r[1], r[2], r[3], r[4], r[5]]
    }

    fn send(&self, ctx: Ctx) -> c_int {
        match &self.last {
            _ if !self.per_token.is_empty() => reply_integers(ctx, &self.per_token),
            Last::Nothing => reply_integers(ctx, &self.reply[..self.len]),
            Last::Nil => reply_integers_then(ctx, &self.reply[..self.len], None),
            Last::Token(buf, n) => reply_integers_then(ctx, &self.reply[..self.len], buf.get(..*n)),
        }
    }
}

type Handler = fn(Ctx, &[RString]) -> Result<Outcome, Error>;

/// A `NAME key now ...` call: the key, the arguments after it as bytes,
/// the clock it is evaluated with (the server's, read once, and the clock
/// guard in force), and the context it runs in.
pub struct KeyedCall<'a> {
    pub key: RString,
    /// On the stack for the usual call (up to 24 arguments after the key).
    pub args: SmallVec<[&'a [u8]; 24]>,
    pub clock: Clock,
    context: CallContext,
}

impl<'a> KeyedCall<'a> {
    pub fn new(ctx: Ctx, args: &'a [RString]) -> Result<Self, Error> {
        let [_, key, rest @ ..] = args else {
            return Err(Error::Arg("wrong number of arguments".into()));
        };
        let context = CallContext::read(ctx)?;
        Ok(KeyedCall {
            key: *key,
            args: rest.iter().map(|&s| bytes(s)).collect(),
            context,
            clock: Clock {
                server_time: context.server_time,
                max_future_ms: crate::config::MAX_FUTURE_MS
                    .load(std::sync::atomic::Ordering::Relaxed),
                max_past_ms: crate::config::MAX_PAST_MS.load(std::sync::atomic::Ordering::Relaxed),
            },
        })
    }
}

impl KeyedCall<'_> {
    /// SPEC "Memory": see [`CallContext::refuse_if_oom`]. Called by the
    /// writing commands after their argument checks (refunds excepted).
    pub fn refuse_if_oom(&self) -> Result<(), Error> {
        self.context.refuse_if_oom()
    }
}

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
    ($($name:ident => $stats:ident, $handler:path;)*) => {$(
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
    ($($name:ident => $stats:ident, $handler:path;)*) => {$(
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
    rl_check => CHECK, check::check;
    rl_peek => PEEK, check::peek;
    rl_dayhour => DAYHOUR, dayhour::dayhour;
    rl_lockcount => LOCKCOUNT, lockcount::lockcount;
    rl_throttle => THROTTLE, throttle::throttle;
    rl_throttlepeek => THROTTLEPEEK, throttle::throttle_peek;
    rl_quota => QUOTA, quota::quota;
    rl_quotapeek => QUOTAPEEK, quota::quota_peek;
    rl_lease => LEASE, lease::lease;
    rl_leasepeek => LEASEPEEK, lease::lease_peek;
    rl_release => RELEASE, lease::release;
    rl_renew => RENEW, lease::renew;
}

/// Redis checks arity before calling; this guards the indexing regardless.
fn fixed_args<const N: usize>(args: &[RString]) -> Result<&[RString; N], Error> {
    args.try_into()
        .map_err(|_| Error::Arg("wrong number of arguments".into()))
}

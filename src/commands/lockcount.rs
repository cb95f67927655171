//! `RL.LOCKCOUNT lockkey countkey window max locktime`: count, then lock out
//! (the seed's GET/SET/INCR interceptor flow, made atomic). O(1).

use super::call::fixed_args;
use super::counter_keys;
use super::outcome::Outcome;
use crate::core::args::{distinct_keys, parse_lockcount};
use crate::core::counters::{lockcount as decide, CounterWrite, LockCount};
use crate::error::Error;
use crate::redis_api::{bytes, CallContext, Ctx, Key, Kind, Native, RString};

pub fn lockcount(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    let [_, lock_name, count_name, window, max, locktime] = *fixed_args::<6>(args)?;
    let parsed = parse_lockcount(&[bytes(window), bytes(max), bytes(locktime)])?;
    distinct_keys(bytes(lock_name), bytes(count_name), ("lockkey", "countkey"))?;
    let context = CallContext::read(ctx)?;
    context.refuse_if_oom()?;

    let lock_key = Key::open(ctx, lock_name, true)?;
    let count_key = Key::open(ctx, count_name, true)?;
    // The lock key may hold any type: its existence is the lock.
    counter_keys::require_string(&count_key)?;
    let counter = counter_keys::read(&count_key, "countkey")?;
    let lock_exists = lock_key.kind()? != Kind::Empty;

    let server_time = context.server_time;
    let reply = match decide(lock_exists, counter, &parsed, server_time) {
        LockCount::Locked { count } => {
            let ttl = lock_key
                .expire_at()?
                .map_or(-1, |at| (at - server_time).max(0));
            [1, count, ttl]
        }
        LockCount::Admitted { write } => {
            counter_keys::write(ctx, count_name, &count_key, &write)?;
            [0, write.value, (write.expire_at - server_time).max(0)]
        }
        LockCount::Trips {
            count,
            lock_expire_at,
        } => {
            // The lock: a new key holding 1, as `SET lockkey 1 PXAT at`.
            let lock = CounterWrite {
                value: 1,
                expire_at: lock_expire_at,
                plain_increment: false,
            };
            counter_keys::write(ctx, lock_name, &lock_key, &lock)?;
            if count_key.kind()? != Kind::Empty {
                count_key.delete()?;
                ctx.propagate(Native::Del { key: count_name })?;
                ctx.signal_modified(count_name)?;
            }
            [1, count, parsed.locktime]
        }
    };
    Ok(Outcome::new(&reply, reply[0] == 0))
}

//! What the server says about the call being run: its context flags (inside
//! `MULTI`/`EXEC` or a script, above `maxmemory`) and the time Redis checks
//! key expiry against during it — the time `now = *` means.

use std::ffi::c_int;

use redis_module::raw;

use super::base::Ctx;
use crate::error::Error;

/// The context of one call, read once when it starts.
#[derive(Debug, Clone, Copy)]
pub struct CallContext {
    /// The context flags, read when the clock needs them (Redis 7.0);
    /// otherwise the OOM rule asks for what it needs (see
    /// [`CallContext::refuse_if_oom`]).
    flags: Option<c_int>,
    /// The time Redis checks key expiry against during this call, in ms.
    pub server_time: i64,
}

const FROZEN_CLOCK: c_int =
    (raw::REDISMODULE_CTX_FLAGS_MULTI | raw::REDISMODULE_CTX_FLAGS_LUA) as c_int;

impl CallContext {
    /// Reads the flags and the clock.
    ///
    /// Redis checks expiry against a time it caches when a top-level command
    /// starts and keeps frozen through `MULTI`/`EXEC`, `EVAL` and `FCALL`:
    /// `RedisModule_Milliseconds` reads the live clock instead, so two calls
    /// in one transaction would see time move that the keyspace does not.
    /// Redis 7.2+ and Valkey give the cached time as
    /// `RedisModule_CachedMicroseconds`; Redis 7.0 has no such call, and
    /// shows it only as INFO's `server_time_usec` — a whole INFO section, so
    /// read only where the live clock and the cached one can differ by more
    /// than the call's own run time (inside a transaction or a script).
    #[inline]
    pub fn read(ctx: Ctx) -> Result<CallContext, Error> {
        if let Some(cached) = unsafe { raw::RedisModule_CachedMicroseconds } {
            return Ok(CallContext {
                flags: None,
                server_time: unsafe { cached() }.div_euclid(1000),
            });
        }
        let flags = context_flags(ctx.0);
        let server_time = if flags & FROZEN_CLOCK != 0 {
            match info_server_time_usec(ctx) {
                Some(us) => us.div_euclid(1000),
                None => ctx.milliseconds()?,
            }
        } else {
            ctx.milliseconds()?
        };
        Ok(CallContext {
            flags: Some(flags),
            server_time,
        })
    }

    /// SPEC "Memory": while the server is above `maxmemory`, a call that can
    /// grow the keyspace is refused with Redis's own OOM error. The writing
    /// commands are registered without `deny-oom` (so that refunds,
    /// RL.RELEASE and RL.RENEW, which only shrink state, still run) and call
    /// this after their argument checks, before reading any key.
    ///
    /// Redis's own test (`REDISMODULE_CTX_FLAGS_OOM`) is `getMaxmemoryState`
    /// failing: the memory it counts above `maxmemory`. The flags were read
    /// for the clock on Redis 7.0; elsewhere the used-memory ratio (that
    /// memory over `maxmemory`, 0 without one, from the same function)
    /// answers for less than all the flags cost, and the flags are asked
    /// only when it cannot tell (exactly 1.0: a float hides a few bytes),
    /// without the call's context (these servers take none for the flags
    /// that are not the client's).
    pub fn refuse_if_oom(&self) -> Result<(), Error> {
        let oom = match self.flags {
            Some(flags) => flags & OOM != 0,
            None => match unsafe { raw::RedisModule_GetUsedMemoryRatio }.map(|r| unsafe { r() }) {
                Some(ratio) if ratio < 1.0 => false,
                Some(ratio) if ratio > 1.0 => true,
                _ => context_flags(std::ptr::null_mut()) & OOM != 0,
            },
        };
        if oom {
            return Err(Error::OutOfMemory);
        }
        Ok(())
    }
}

const OOM: c_int = raw::REDISMODULE_CTX_FLAGS_OOM as c_int;

/// The context flags of a call (0 when the server cannot tell).
fn context_flags(ctx: *mut raw::RedisModuleCtx) -> c_int {
    match unsafe { raw::RedisModule_GetContextFlags } {
        Some(get) => unsafe { get(ctx) },
        None => 0,
    }
}

/// `server_time_usec` from INFO's server section (Redis 7.0's only view of
/// the cached clock); `None` when the server will not tell.
fn info_server_time_usec(ctx: Ctx) -> Option<i64> {
    let (get, field, free) = unsafe {
        (
            raw::RedisModule_GetServerInfo?,
            raw::RedisModule_ServerInfoGetFieldSigned?,
            raw::RedisModule_FreeServerInfo?,
        )
    };
    let info = unsafe { get(ctx.0, c"server".as_ptr()) };
    if info.is_null() {
        return None;
    }
    let mut err: c_int = 0;
    let us = unsafe { field(info, c"server_time_usec".as_ptr(), &mut err) };
    unsafe { free(ctx.0, info) };
    (err == 0).then_some(us)
}

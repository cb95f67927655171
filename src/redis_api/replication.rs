//! Replicating a call's writes as the native commands that reproduce them,
//! with the keyspace events those commands fire.

use std::ffi::{c_int, CStr};

use redis_module::raw;

use super::base::{Ctx, RString};
use super::strings::{OwnedStrings, StrVec};
use crate::core::int::decimal;
use crate::error::Error;

impl Ctx {
    /// Tells Redis a key changed: invalidates WATCH and client-side caches.
    /// The module turns off the implicit signal on closing a writable key, so
    /// that rejections and errors, which write nothing, signal nothing.
    pub fn signal_modified(&self, key: RString) -> Result<(), Error> {
        let signal = api!(RedisModule_SignalModifiedKey);
        unsafe { signal(self.0, key) };
        Ok(())
    }

    /// Replicates a write as the native command that reproduces it (to
    /// replicas and the AOF, wrapped with the call's other replicated commands
    /// in MULTI/EXEC) and fires the keyspace events that command fires.
    pub fn propagate(&self, write: Native) -> Result<(), Error> {
        let replicate = api!(RedisModule_Replicate);
        let r = self.0;
        let (status, key, events): (c_int, RString, &[(c_int, &CStr)]) = unsafe {
            match write {
                Native::Zadd {
                    key,
                    score,
                    members: [member],
                    marked: [],
                } => {
                    let mut buf = [0u8; 20];
                    let score = decimal(score, &mut buf);
                    (
                        replicate(
                            r,
                            c"ZADD".as_ptr(),
                            c"sbs".as_ptr(),
                            key,
                            score.as_ptr(),
                            score.len(),
                            *member,
                        ),
                        key,
                        &[(raw::REDISMODULE_NOTIFY_ZSET, c"zadd")],
                    )
                }
                Native::Zadd {
                    key,
                    score,
                    members,
                    marked,
                } => (
                    self.replicate_zadd(key, None, score, members, marked)?,
                    key,
                    &[(raw::REDISMODULE_NOTIFY_ZSET, c"zadd")],
                ),
                Native::ZaddXx {
                    key,
                    score,
                    members,
                    marked,
                } => (
                    self.replicate_zadd(key, Some(b"XX"), score, members, marked)?,
                    key,
                    &[(raw::REDISMODULE_NOTIFY_ZSET, c"zadd")],
                ),
                Native::Pexpireat { key, at } => {
                    let mut buf = [0u8; 20];
                    let at = decimal(at, &mut buf);
                    (
                        replicate(
                            r,
                            c"PEXPIREAT".as_ptr(),
                            c"sb".as_ptr(),
                            key,
                            at.as_ptr(),
                            at.len(),
                        ),
                        key,
                        &[(raw::REDISMODULE_NOTIFY_GENERIC, c"expire")],
                    )
                }
                Native::SetPxat { key, value, at } => {
                    let (mut vbuf, mut abuf) = ([0u8; 20], [0u8; 20]);
                    let (value, at) = (decimal(value, &mut vbuf), decimal(at, &mut abuf));
                    (
                        replicate(
                            r,
                            c"SET".as_ptr(),
                            c"sbcb".as_ptr(),
                            key,
                            value.as_ptr(),
                            value.len(),
                            c"PXAT".as_ptr(),
                            at.as_ptr(),
                            at.len(),
                        ),
                        key,
                        &[
                            (raw::REDISMODULE_NOTIFY_STRING, c"set"),
                            (raw::REDISMODULE_NOTIFY_GENERIC, c"expire"),
                        ],
                    )
                }
                Native::Incr { key } => (
                    replicate(r, c"INCR".as_ptr(), c"s".as_ptr(), key),
                    key,
                    &[(raw::REDISMODULE_NOTIFY_STRING, c"incrby")],
                ),
                Native::ZremRangeByScore { key, max } => {
                    let mut buf = [0u8; 20];
                    let max = decimal(max, &mut buf);
                    (
                        replicate(
                            r,
                            c"ZREMRANGEBYSCORE".as_ptr(),
                            c"scb".as_ptr(),
                            key,
                            c"-inf".as_ptr(),
                            max.as_ptr(),
                            max.len(),
                        ),
                        key,
                        &[(raw::REDISMODULE_NOTIFY_ZSET, c"zremrangebyscore")],
                    )
                }
                Native::Zrem { key, members } => (
                    replicate_argv(r, c"ZREM", key, members)?,
                    key,
                    &[(raw::REDISMODULE_NOTIFY_ZSET, c"zrem")],
                ),
                Native::Hset { key, pairs } => (
                    replicate_argv(r, c"HSET", key, pairs)?,
                    key,
                    &[(raw::REDISMODULE_NOTIFY_HASH, c"hset")],
                ),
                Native::Hdel { key, fields } => (
                    replicate_argv(r, c"HDEL", key, fields)?,
                    key,
                    &[(raw::REDISMODULE_NOTIFY_HASH, c"hdel")],
                ),
                Native::Del { key } => (
                    replicate(r, c"DEL".as_ptr(), c"s".as_ptr(), key),
                    key,
                    &[(raw::REDISMODULE_NOTIFY_GENERIC, c"del")],
                ),
            }
        };
        if status != raw::REDISMODULE_OK as c_int {
            return Err(Error::Internal("could not replicate a write".into()));
        }
        let notify = api!(RedisModule_NotifyKeyspaceEvent);
        for (class, event) in events {
            unsafe { notify(r, *class, event.as_ptr(), key) };
        }
        Ok(())
    }

    /// Replicates `ZADD key [flag] score member [score member ...]` with one
    /// string for the score, shared by every pair, and one for the score
    /// half a ms before it, shared by the `marked` members (indices into
    /// `members`, ascending).
    fn replicate_zadd(
        &self,
        key: RString,
        flag: Option<&[u8]>,
        score: i64,
        members: &[RString],
        marked: &[usize],
    ) -> Result<c_int, Error> {
        let replicate = api!(RedisModule_Replicate);
        let mut strings = OwnedStrings::new(*self);
        let half = match marked {
            [] => None,
            _ => {
                let mut buf = [0u8; 32];
                Some(strings.bytes(half_before(score, &mut buf))?)
            }
        };
        let score = strings.int(score)?;
        let mut argv = StrVec::with_capacity(2 + 2 * members.len());
        argv.push(key);
        if let Some(flag) = flag {
            argv.push(strings.bytes(flag)?);
        }
        let mut marks = marked.iter().peekable();
        for (i, &m) in members.iter().enumerate() {
            match half {
                Some(half) if marks.next_if_eq(&&i).is_some() => argv.push(half),
                _ => argv.push(score),
            }
            argv.push(m);
        }
        Ok(unsafe {
            replicate(
                self.0,
                c"ZADD".as_ptr(),
                c"v".as_ptr(),
                argv.as_mut_ptr(),
                argv.len(),
            )
        })
    }

    /// Fires the `del` keyspace event of a key a write emptied (Redis
    /// removes an empty sorted set or hash, as `ZREM` / `HDEL` do).
    pub fn notify_del(&self, key: RString) -> Result<(), Error> {
        let notify = api!(RedisModule_NotifyKeyspaceEvent);
        unsafe {
            notify(
                self.0,
                raw::REDISMODULE_NOTIFY_GENERIC as c_int,
                c"del".as_ptr(),
                key,
            )
        };
        Ok(())
    }
}

/// `score - 0.5` as a double (a lease's first unit, see
/// `limiters::lease::units::first_unit_score`), written as the shortest
/// decimal that reads back as that double: `1700000000999.5`.
fn half_before(score: i64, buf: &mut [u8; 32]) -> &[u8] {
    use std::io::Write;
    let value = score as f64 - 0.5;
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    // A double in this range is at most 18 digits and a point: it fits.
    let _ = write!(cursor, "{value}");
    let n = cursor.position() as usize;
    buf.get(..n).unwrap_or(&[])
}

/// A write, as the native command that reproduces it on a replica or in the
/// AOF. Times are absolute, so nothing depends on the replica's clock.
pub enum Native<'a> {
    /// `ZADD key score member [score member ...]`, the `marked` members
    /// (indices into `members`, ascending) scored `score - 0.5` instead:
    /// the first units of leases of 2 or more units.
    Zadd {
        key: RString,
        score: i64,
        members: &'a [RString],
        marked: &'a [usize],
    },
    /// `ZADD key XX score member [score member ...]` (re-scores only),
    /// `marked` as in `Zadd`.
    ZaddXx {
        key: RString,
        score: i64,
        members: &'a [RString],
        marked: &'a [usize],
    },
    /// `PEXPIREAT key at`
    Pexpireat { key: RString, at: i64 },
    /// `SET key value PXAT at`
    SetPxat { key: RString, value: i64, at: i64 },
    /// `INCR key` (the key exists and keeps its expiry)
    Incr { key: RString },
    /// `DEL key`
    Del { key: RString },
    /// `ZREMRANGEBYSCORE key -inf max`
    ZremRangeByScore { key: RString, max: i64 },
    /// `ZREM key member [member ...]`
    Zrem {
        key: RString,
        members: &'a [RString],
    },
    /// `HSET key field value [field value ...]` (`pairs` flat)
    Hset { key: RString, pairs: &'a [RString] },
    /// `HDEL key field [field ...]`
    Hdel { key: RString, fields: &'a [RString] },
}

/// Replicates `cmd key args...`.
///
/// Up to six arguments after the key (`HSET` of three fields, `HDEL` or
/// `ZREM` of six) go one by one (`s`): Redis sizes its argument vector
/// from the format, where a vector (`v`) makes it grow that vector again
/// (a `zrealloc`, ~350 instructions a call).
unsafe fn replicate_argv(
    ctx: *mut raw::RedisModuleCtx,
    cmd: &CStr,
    key: RString,
    args: &[RString],
) -> Result<c_int, Error> {
    let replicate = api!(RedisModule_Replicate);
    let (c, k) = (cmd.as_ptr(), key);
    match *args {
        [] => return Ok(replicate(ctx, c, c"s".as_ptr(), k)),
        [a] => return Ok(replicate(ctx, c, c"ss".as_ptr(), k, a)),
        [a, b] => return Ok(replicate(ctx, c, c"sss".as_ptr(), k, a, b)),
        [a, b, d] => return Ok(replicate(ctx, c, c"ssss".as_ptr(), k, a, b, d)),
        [a, b, d, e] => return Ok(replicate(ctx, c, c"sssss".as_ptr(), k, a, b, d, e)),
        [a, b, d, e, f] => {
            return Ok(replicate(ctx, c, c"ssssss".as_ptr(), k, a, b, d, e, f));
        }
        [a, b, d, e, f, g] => {
            return Ok(replicate(ctx, c, c"sssssss".as_ptr(), k, a, b, d, e, f, g));
        }
        _ => {}
    }
    let mut argv = StrVec::with_capacity(1 + args.len());
    argv.push(key);
    for &a in args {
        argv.push(a);
    }
    Ok(replicate(
        ctx,
        cmd.as_ptr(),
        c"v".as_ptr(),
        argv.as_mut_ptr(),
        argv.len(),
    ))
}

/// The native commands the module replicates its writes with or counts with.
/// Checked at load: a renamed or disabled one would make a call fail, for
/// replication after its local writes.
pub const NATIVE_COMMANDS: [&CStr; 11] = [
    c"zadd",
    c"zrem",
    c"hset",
    c"hdel",
    c"zremrangebyscore",
    c"pexpireat",
    c"set",
    c"del",
    c"zcount",
    c"zrange",
    c"hrandfield",
];

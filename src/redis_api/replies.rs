//! Replies to the client.

use std::ffi::{c_char, c_int};

use redis_module::raw;

use super::base::Ctx;

/// Replies with an array of integers.
pub fn reply_integers(ctx: Ctx, values: &[i64]) -> c_int {
    let (Some(array), Some(int)) = (unsafe { raw::RedisModule_ReplyWithArray }, unsafe {
        raw::RedisModule_ReplyWithLongLong
    }) else {
        return raw::REDISMODULE_ERR as c_int;
    };
    unsafe { array(ctx.0, values.len() as _) };
    for &v in values {
        unsafe { int(ctx.0, v) };
    }
    raw::REDISMODULE_OK as c_int
}

/// Replies with an array of integers followed by one bulk string, or by a
/// nil when `last` is `None` (RL.LEASE: the token, or nil when rejected).
pub fn reply_integers_then(ctx: Ctx, values: &[i64], last: Option<&[u8]>) -> c_int {
    let (Some(array), Some(int), Some(buffer), Some(null)) = (
        unsafe { raw::RedisModule_ReplyWithArray },
        unsafe { raw::RedisModule_ReplyWithLongLong },
        unsafe { raw::RedisModule_ReplyWithStringBuffer },
        unsafe { raw::RedisModule_ReplyWithNull },
    ) else {
        return raw::REDISMODULE_ERR as c_int;
    };
    unsafe { array(ctx.0, values.len() as std::ffi::c_long + 1) };
    for &v in values {
        unsafe { int(ctx.0, v) };
    }
    match last {
        Some(b) => unsafe { buffer(ctx.0, b.as_ptr().cast::<c_char>(), b.len()) },
        None => unsafe { null(ctx.0) },
    };
    raw::REDISMODULE_OK as c_int
}

/// Replies with an array of integers followed by one array per group, each
/// holding one array of six integers per row (RL.ALL's `DETAILS`: per
/// clause, per rule).
pub fn reply_integers_then_groups<G>(ctx: Ctx, values: &[i64], groups: &[G]) -> c_int
where
    G: std::ops::Deref<Target = [[i64; 6]]>,
{
    let (Some(array), Some(int)) = (unsafe { raw::RedisModule_ReplyWithArray }, unsafe {
        raw::RedisModule_ReplyWithLongLong
    }) else {
        return raw::REDISMODULE_ERR as c_int;
    };
    unsafe { array(ctx.0, (values.len() + groups.len()) as _) };
    for &v in values {
        unsafe { int(ctx.0, v) };
    }
    for group in groups {
        unsafe { array(ctx.0, group.len() as _) };
        for row in group.iter() {
            reply_integers(ctx, row);
        }
    }
    raw::REDISMODULE_OK as c_int
}

/// Replies with an error; `text` carries its own prefix (`ERR`, `WRONGTYPE`).
pub fn reply_error(ctx: Ctx, text: &str) -> c_int {
    let Some(reply) = (unsafe { raw::RedisModule_ReplyWithError }) else {
        return raw::REDISMODULE_ERR as c_int;
    };
    // An error reply is one line without NUL bytes.
    let clean: Vec<u8> = text
        .bytes()
        .map(|b| {
            if b == b'\r' || b == b'\n' || b == 0 {
                b' '
            } else {
                b
            }
        })
        .chain(std::iter::once(0))
        .collect();
    unsafe { reply(ctx.0, clean.as_ptr().cast::<c_char>()) };
    raw::REDISMODULE_OK as c_int
}

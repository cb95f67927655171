//! `RedisModule_Call` where the key API has no equivalent (counting or
//! reading by rank on a skiplist, sampling hash fields, `COMMAND INFO`).

use std::ffi::{c_int, CStr};

use redis_module::raw;

use super::base::{Ctx, RString};
use crate::error::Error;

impl Ctx {
    /// `ZCOUNT key -inf max`: members with a score `<= max`.
    pub fn zcount_through(&self, key: RString, max: i64) -> Result<u64, Error> {
        let call = api!(RedisModule_Call);
        let r = unsafe {
            call(
                self.0,
                c"ZCOUNT".as_ptr(),
                c"scl".as_ptr(),
                key,
                c"-inf".as_ptr(),
                max,
            )
        };
        let reply = self.reply(c"ZCOUNT", r)?;
        reply.integer().map(|n| n.max(0) as u64)
    }

    /// The score of the member at 0-based ascending `rank`
    /// (`ZRANGE key rank rank WITHSCORES`): O(log n) on a skiplist.
    pub fn zscore_at_rank(&self, key: RString, rank: u64) -> Result<f64, Error> {
        let rank = rank as i64;
        let call = api!(RedisModule_Call);
        let r = unsafe {
            call(
                self.0,
                c"ZRANGE".as_ptr(),
                c"sllc".as_ptr(),
                key,
                rank,
                rank,
                c"WITHSCORES".as_ptr(),
            )
        };
        let reply = self.reply(c"ZRANGE", r)?;
        reply
            .array_string(1)?
            .and_then(|s| std::str::from_utf8(s).ok()?.parse::<f64>().ok())
            .ok_or_else(|| Error::Internal("ZRANGE gave no score".into()))
    }

    /// `HRANDFIELD key n` (`n > 0`): up to `n` distinct fields of a hash,
    /// drawn at random; O(n) on a large hash.
    pub fn hash_random_fields(&self, key: RString, n: i64) -> Result<Vec<Vec<u8>>, Error> {
        let call = api!(RedisModule_Call);
        let r = unsafe { call(self.0, c"HRANDFIELD".as_ptr(), c"sl".as_ptr(), key, n) };
        let reply = self.reply(c"HRANDFIELD", r)?;
        let kind = api!(RedisModule_CallReplyType);
        let length = api!(RedisModule_CallReplyLength);
        if unsafe { kind(reply.0) } != raw::REDISMODULE_REPLY_ARRAY as c_int {
            return Err(Error::Internal("HRANDFIELD gave no array".into()));
        }
        let count = unsafe { length(reply.0) };
        let mut fields = Vec::with_capacity(count);
        for i in 0..count {
            if let Some(field) = reply.array_string(i)? {
                fields.push(field.to_vec());
            }
        }
        Ok(fields)
    }

    fn reply(&self, cmd: &CStr, r: *mut raw::RedisModuleCallReply) -> Result<CallReply, Error> {
        if r.is_null() {
            return Err(Error::Internal(format!("{} failed", cmd.to_string_lossy())));
        }
        Ok(CallReply(r))
    }
}

/// Whether `name` is a command this server knows (`COMMAND INFO name`).
pub fn command_exists(ctx: *mut raw::RedisModuleCtx, name: &CStr) -> Result<bool, Error> {
    let call = api!(RedisModule_Call);
    let r = unsafe {
        call(
            ctx,
            c"COMMAND".as_ptr(),
            c"cc".as_ptr(),
            c"INFO".as_ptr(),
            name.as_ptr(),
        )
    };
    let reply = Ctx(ctx).reply(c"COMMAND", r)?;
    let kind = api!(RedisModule_CallReplyType);
    let element = api!(RedisModule_CallReplyArrayElement);
    let first = unsafe { element(reply.0, 0) };
    Ok(!first.is_null() && unsafe { kind(first) } == raw::REDISMODULE_REPLY_ARRAY as c_int)
}

/// A reply of `RedisModule_Call`, freed when dropped.
struct CallReply(*mut raw::RedisModuleCallReply);

impl CallReply {
    fn integer(&self) -> Result<i64, Error> {
        let kind = api!(RedisModule_CallReplyType);
        let int = api!(RedisModule_CallReplyInteger);
        if unsafe { kind(self.0) } != raw::REDISMODULE_REPLY_INTEGER as c_int {
            return Err(Error::Internal("unexpected reply type".into()));
        }
        Ok(unsafe { int(self.0) })
    }

    fn array_string(&self, index: usize) -> Result<Option<&[u8]>, Error> {
        let element = api!(RedisModule_CallReplyArrayElement);
        let string = api!(RedisModule_CallReplyStringPtr);
        let e = unsafe { element(self.0, index) };
        if e.is_null() {
            return Ok(None);
        }
        let mut len = 0usize;
        let p = unsafe { string(e, &mut len) };
        if p.is_null() {
            return Ok(None);
        }
        Ok(Some(unsafe {
            std::slice::from_raw_parts(p.cast::<u8>(), len)
        }))
    }
}

impl Drop for CallReply {
    fn drop(&mut self) {
        if let Some(free) = unsafe { raw::RedisModule_FreeCallReply } {
            unsafe { free(self.0) };
        }
    }
}

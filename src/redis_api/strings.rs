//! Strings: the bytes of a Redis string, strings the module creates and
//! frees, and short lists of them kept on the stack.

use std::ffi::c_char;

use redis_module::raw;
use smallvec::SmallVec;

use super::base::{Ctx, RString};
use crate::error::Error;

/// Strings created by the module, freed when dropped.
pub struct OwnedStrings {
    ctx: Ctx,
    items: StrVec,
}

impl OwnedStrings {
    pub fn new(ctx: Ctx) -> Self {
        OwnedStrings {
            ctx,
            items: StrVec::new(),
        }
    }

    pub fn bytes(&mut self, b: &[u8]) -> Result<RString, Error> {
        let create = api!(RedisModule_CreateString);
        let s = unsafe { create(self.ctx.0, b.as_ptr().cast::<c_char>(), b.len()) };
        self.items.push(s);
        Ok(s)
    }

    /// Takes ownership of a string the server created for the module.
    pub fn adopt(&mut self, s: RString) {
        self.items.push(s);
    }

    pub fn int(&mut self, v: i64) -> Result<RString, Error> {
        let create = api!(RedisModule_CreateStringFromLongLong);
        let s = unsafe { create(self.ctx.0, v) };
        self.items.push(s);
        Ok(s)
    }
}

impl Drop for OwnedStrings {
    fn drop(&mut self) {
        if let Some(free) = unsafe { raw::RedisModule_FreeString } {
            for &s in &self.items {
                unsafe { free(self.ctx.0, s) };
            }
        }
    }
}

/// A short list of strings — an argument vector for `RedisModule_Replicate`'s
/// `v` format, a call's new members, the strings it owns: on the stack for
/// the usual few (a call's fields or members), on the heap only past 17, so
/// the hot path allocates nothing of its own.
pub type StrVec = SmallVec<[RString; 17]>;

//! Strings: the bytes of a Redis string, strings the module creates and
//! frees, and short lists of them kept on the stack.

use std::ffi::c_char;
use std::ptr;
use std::sync::{Arc, Mutex};

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

    /// A string of `text` kept across calls: created at its first use, then
    /// shared (a reference count taken for this call, given back when
    /// dropped). For RL.QUOTA's field names: calls in one bucket name the
    /// same fields, which `limiters::calendar::buckets::bucket` hands out as
    /// one shared text; a string is found by that text's address (which a
    /// kept string holds on to, so no other text takes it).
    pub fn kept(&mut self, text: &Arc<str>) -> Result<RString, Error> {
        let (create, retain) = (
            api!(RedisModule_CreateString),
            api!(RedisModule_RetainString),
        );
        let Ok(mut kept) = KEPT.lock() else {
            return self.bytes(text.as_bytes());
        };
        let s = match kept.iter().find(|k| Arc::ptr_eq(&k.text, text)) {
            Some(k) => k.string,
            None => {
                // Created without a context: freed only by the cache.
                let s =
                    unsafe { create(ptr::null_mut(), text.as_ptr().cast::<c_char>(), text.len()) };
                if kept.len() >= KEPT_MAX {
                    if let (Some(old), Some(free)) =
                        (kept.pop(), unsafe { raw::RedisModule_FreeString })
                    {
                        unsafe { free(ptr::null_mut(), old.string) };
                    }
                }
                kept.insert(
                    0,
                    Kept {
                        text: text.clone(),
                        string: s,
                    },
                );
                s
            }
        };
        // This call's reference: a string evicted while the call runs lives on.
        unsafe { retain(ptr::null_mut(), s) };
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

/// A string kept across calls with the text it was made from.
struct Kept {
    text: Arc<str>,
    string: RString,
}

// Only Redis's main thread runs commands and unloads the module.
unsafe impl Send for Kept {}

/// How many strings [`OwnedStrings::kept`] keeps (most recent first).
const KEPT_MAX: usize = 16;

/// The strings kept across calls. A static rather than a thread-local, for
/// the reasons `limiters::calendar::buckets`'s caches are.
static KEPT: Mutex<Vec<Kept>> = Mutex::new(Vec::new());

/// Frees the strings kept across calls (at `MODULE UNLOAD`).
pub fn free_kept_strings() {
    let Ok(mut kept) = KEPT.lock() else { return };
    if let Some(free) = unsafe { raw::RedisModule_FreeString } {
        for k in kept.iter() {
            unsafe { free(ptr::null_mut(), k.string) };
        }
    }
    *kept = Vec::new();
}

/// A short list of strings — an argument vector for `RedisModule_Replicate`'s
/// `v` format, a call's new members, the strings it owns: on the stack for
/// the usual few (a call's fields or members), on the heap only past 17, so
/// the hot path allocates nothing of its own.
pub type StrVec = SmallVec<[RString; 17]>;

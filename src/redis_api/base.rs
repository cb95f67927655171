//! What every wrapper shares: the API-pointer macro, the string and
//! context types, an argument's bytes.

use redis_module::raw;

use crate::error::Error;

/// The API function pointer, or an internal error if the server lacks it.
macro_rules! api {
    ($name:ident) => {
        match unsafe { raw::$name } {
            Some(f) => f,
            None => {
                return Err(Error::Internal(
                    concat!("server lacks ", stringify!($name)).into(),
                ))
            }
        }
    };
}

pub type RString = *mut raw::RedisModuleString;

/// The command context of one call.
#[derive(Clone, Copy)]
pub struct Ctx(pub *mut raw::RedisModuleCtx);

/// The bytes of an argument; valid for the duration of the call.
pub fn bytes<'a>(s: RString) -> &'a [u8] {
    let Some(ptr_len) = (unsafe { raw::RedisModule_StringPtrLen }) else {
        return &[];
    };
    let mut len = 0usize;
    let p = unsafe { ptr_len(s, &mut len) };
    if p.is_null() {
        return &[];
    }
    unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
}

impl Ctx {
    /// The server's live clock in ms. Commands read the time they run at
    /// through [`CallContext`], which is what Redis checks expiry against.
    pub fn milliseconds(&self) -> Result<i64, Error> {
        let ms = api!(RedisModule_Milliseconds);
        Ok(unsafe { ms() })
    }
}

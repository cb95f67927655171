//! Thin wrappers over the raw Redis module API (`redis_module::raw`) for what
//! the commands need and the `redis-module` crate does not wrap: sorted sets
//! through the key API, absolute expiry, `RedisModule_Call` on a hot path,
//! and replication of native commands. Every function here returns an
//! [`Error`] instead of panicking when the server refuses.

use std::ffi::{c_char, c_int, CStr};
use std::ptr;

use redis_module::raw;

use smallvec::SmallVec;

use crate::core::int::decimal;
use crate::error::Error;

mod context;
pub use context::CallContext;

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

impl Ctx {
    /// The server's live clock in ms. Commands read the time they run at
    /// through [`CallContext`], which is what Redis checks expiry against.
    pub fn milliseconds(&self) -> Result<i64, Error> {
        let ms = api!(RedisModule_Milliseconds);
        Ok(unsafe { ms() })
    }

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
                } => {
                    // One string for the score, shared by every pair.
                    let mut strings = OwnedStrings::new(*self);
                    let score = strings.int(score)?;
                    let mut argv = StrVec::with_capacity(1 + 2 * members.len());
                    argv.push(key);
                    for &m in members {
                        argv.push(score);
                        argv.push(m);
                    }
                    (
                        replicate(
                            r,
                            c"ZADD".as_ptr(),
                            c"v".as_ptr(),
                            argv.as_mut_ptr(),
                            argv.len(),
                        ),
                        key,
                        &[(raw::REDISMODULE_NOTIFY_ZSET, c"zadd")],
                    )
                }
                Native::ZaddXx {
                    key,
                    score,
                    members,
                } => {
                    let mut strings = OwnedStrings::new(*self);
                    let score = strings.int(score)?;
                    let xx = strings.bytes(b"XX")?;
                    let mut argv = StrVec::with_capacity(2 + 2 * members.len());
                    argv.push(key);
                    argv.push(xx);
                    for &m in members {
                        argv.push(score);
                        argv.push(m);
                    }
                    (
                        replicate(
                            r,
                            c"ZADD".as_ptr(),
                            c"v".as_ptr(),
                            argv.as_mut_ptr(),
                            argv.len(),
                        ),
                        key,
                        &[(raw::REDISMODULE_NOTIFY_ZSET, c"zadd")],
                    )
                }
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

/// A write, as the native command that reproduces it on a replica or in the
/// AOF. Times are absolute, so nothing depends on the replica's clock.
pub enum Native<'a> {
    /// `ZADD key score member [score member ...]`
    Zadd {
        key: RString,
        score: i64,
        members: &'a [RString],
    },
    /// `ZADD key XX score member [score member ...]` (re-scores only)
    ZaddXx {
        key: RString,
        score: i64,
        members: &'a [RString],
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

/// A short list of strings — an argument vector for `RedisModule_Replicate`'s
/// `v` format, a call's new members, the strings it owns: on the stack for
/// the usual few (a call's fields or members), on the heap only past 17, so
/// the hot path allocates nothing of its own.
pub type StrVec = SmallVec<[RString; 17]>;

/// Replicates `cmd key args...`.
unsafe fn replicate_argv(
    ctx: *mut raw::RedisModuleCtx,
    cmd: &CStr,
    key: RString,
    args: &[RString],
) -> Result<c_int, Error> {
    let replicate = api!(RedisModule_Replicate);
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

/// Frees the detached thread-safe context that `redis_module!` makes at
/// load for its logging (`redis_module::MODULE_CONTEXT`) and clears it, so
/// a later load makes a new one. Only at unload: nothing logs through it
/// afterwards. The crate keeps the pointer in a private field of a
/// one-field struct; it is read through that layout, checked by size here.
pub fn free_module_context() {
    use std::sync::atomic::{AtomicPtr, Ordering};
    const _: () = assert!(
        std::mem::size_of::<redis_module::DetachedContext>()
            == std::mem::size_of::<AtomicPtr<raw::RedisModuleCtx>>()
    );
    // SAFETY: DetachedContext's only field is an AtomicPtr (redis-module
    // 2.0, src/context/mod.rs), so the static is that AtomicPtr; atomics
    // may be written through a shared reference.
    let slot = unsafe {
        &*(&redis_module::MODULE_CONTEXT as *const redis_module::DetachedContext)
            .cast::<AtomicPtr<raw::RedisModuleCtx>>()
    };
    let ctx = slot.swap(std::ptr::null_mut(), Ordering::Relaxed);
    if !ctx.is_null() {
        if let Some(free) = unsafe { raw::RedisModule_FreeThreadSafeContext } {
            unsafe { free(ctx) };
        }
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

/// The kinds of value a command distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Empty,
    String,
    SortedSet,
    Hash,
    Other,
}

/// An open key, closed when dropped.
pub struct Key {
    ptr: *mut raw::RedisModuleKey,
}

impl Key {
    /// Opens `name` for reading, or for reading and writing.
    pub fn open(ctx: Ctx, name: RString, write: bool) -> Result<Key, Error> {
        let open = api!(RedisModule_OpenKey);
        let mode = if write {
            raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
        } else {
            raw::REDISMODULE_READ
        };
        // A missing key opened for reading is NULL: an empty key.
        Ok(Key {
            ptr: unsafe { open(ctx.0, name, mode as c_int) },
        })
    }

    /// Opens `name` for a command that keeps values of type `kind`: a key
    /// of another type is `WRONGTYPE`.
    pub fn open_as(ctx: Ctx, name: RString, write: bool, kind: Kind) -> Result<Key, Error> {
        let key = Key::open(ctx, name, write)?;
        key.require_kind(kind)?;
        Ok(key)
    }

    /// `WRONGTYPE` unless the key is missing or of type `kind`.
    pub fn require_kind(&self, kind: Kind) -> Result<(), Error> {
        match self.kind()? {
            Kind::Empty => Ok(()),
            k if k == kind => Ok(()),
            _ => Err(Error::WrongType),
        }
    }

    pub fn kind(&self) -> Result<Kind, Error> {
        if self.ptr.is_null() {
            return Ok(Kind::Empty);
        }
        let key_type = api!(RedisModule_KeyType);
        Ok(match unsafe { key_type(self.ptr) } as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => Kind::Empty,
            raw::REDISMODULE_KEYTYPE_STRING => Kind::String,
            raw::REDISMODULE_KEYTYPE_ZSET => Kind::SortedSet,
            raw::REDISMODULE_KEYTYPE_HASH => Kind::Hash,
            _ => Kind::Other,
        })
    }

    /// Number of members (sorted set) or bytes (string).
    pub fn size(&self) -> Result<u64, Error> {
        if self.ptr.is_null() {
            return Ok(0);
        }
        let length = api!(RedisModule_ValueLength);
        Ok(unsafe { length(self.ptr) } as u64)
    }

    /// Absolute expiry in ms, `None` when the key has none.
    pub fn expire_at(&self) -> Result<Option<i64>, Error> {
        // Redis 8 dereferences the value of an empty key here: never ask.
        if self.kind()? == Kind::Empty {
            return Ok(None);
        }
        let get = api!(RedisModule_GetAbsExpire);
        let at = unsafe { get(self.ptr) };
        Ok((at != raw::REDISMODULE_NO_EXPIRE as i64).then_some(at))
    }

    pub fn set_expire_at(&self, at: i64) -> Result<(), Error> {
        let set = api!(RedisModule_SetAbsExpire);
        ok(unsafe { set(self.ptr, at) }, "could not set the expiry")
    }

    /// The stored string (valid until the key is written or closed).
    pub fn string(&self) -> Result<&[u8], Error> {
        let dma = api!(RedisModule_StringDMA);
        let mut len = 0usize;
        let p = unsafe { dma(self.ptr, &mut len, raw::REDISMODULE_READ as c_int) };
        if p.is_null() {
            return Err(Error::WrongType);
        }
        Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
    }

    /// Stores `value` as a decimal string in place (creating the key when
    /// missing). Unlike replacing the value, this keeps the key's expiry and
    /// leaves a plain string that later reads use without copying.
    pub fn write_int(&self, value: i64) -> Result<(), Error> {
        let truncate = api!(RedisModule_StringTruncate);
        let dma = api!(RedisModule_StringDMA);
        let mut buf = [0u8; 20];
        let digits = crate::core::int::decimal(value, &mut buf);
        let n = digits.len();
        ok(
            unsafe { truncate(self.ptr, n) },
            "could not write the string",
        )?;
        let mut len = 0usize;
        let p = unsafe {
            dma(
                self.ptr,
                &mut len,
                (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int,
            )
        };
        if p.is_null() || len != n {
            return Err(Error::Internal("could not write the string".into()));
        }
        unsafe { std::ptr::copy_nonoverlapping(digits.as_ptr(), p.cast::<u8>(), n) };
        Ok(())
    }

    pub fn delete(&self) -> Result<(), Error> {
        let delete = api!(RedisModule_DeleteKey);
        ok(unsafe { delete(self.ptr) }, "could not delete the key")
    }

    /// Calls `read` with the value of hash field `field` (`None` when the
    /// field or the key is missing). The value is valid only inside `read`.
    pub fn hash_get<R>(
        &self,
        field: RString,
        read: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<R, Error> {
        if self.ptr.is_null() {
            return Ok(read(None));
        }
        let get = api!(RedisModule_HashGet);
        let free = api!(RedisModule_FreeString);
        let mut value: RString = ptr::null_mut();
        let status = unsafe {
            get(
                self.ptr,
                raw::REDISMODULE_HASH_NONE as c_int,
                field,
                &mut value as *mut RString,
                ptr::null_mut::<c_char>(),
            )
        };
        ok(status, "could not read a hash field")?;
        if value.is_null() {
            return Ok(read(None));
        }
        let out = read(Some(bytes(value)));
        unsafe { free(ptr::null_mut(), value) };
        Ok(out)
    }

    /// Sets hash field `field` to `value` (creating the hash when the key is
    /// empty), or deletes the field when `value` is `None` (Redis deletes a
    /// hash left with no field).
    pub fn hash_set(&self, field: RString, value: Option<RString>) -> Result<(), Error> {
        let set = api!(RedisModule_HashSet);
        let value = value.unwrap_or(raw::REDISMODULE_HASH_DELETE as RString);
        // The return value counts fields changed; errors show up as 0 with
        // errno set, which cannot happen on an open hash or empty key.
        unsafe {
            set(
                self.ptr,
                raw::REDISMODULE_HASH_NONE as c_int,
                field,
                value,
                ptr::null_mut::<c_char>(),
            )
        };
        Ok(())
    }

    /// Calls `visit` with the name of every field of the hash (nothing for an
    /// empty key). The names are valid only inside `visit`, and the hash must
    /// not be written meanwhile: collect, then write.
    pub fn hash_fields(&self, mut visit: impl FnMut(&[u8])) -> Result<(), Error> {
        if self.kind()? != Kind::Hash {
            return Ok(());
        }
        let create = api!(RedisModule_ScanCursorCreate);
        let destroy = api!(RedisModule_ScanCursorDestroy);
        let scan = api!(RedisModule_ScanKey);
        extern "C" fn each(
            _key: *mut raw::RedisModuleKey,
            field: RString,
            _value: RString,
            visit: *mut std::ffi::c_void,
        ) {
            // SAFETY: `visit` is the `&mut dyn FnMut` passed below, alive
            // for the whole scan.
            let visit = unsafe { &mut *visit.cast::<&mut dyn FnMut(&[u8])>() };
            visit(bytes(field));
        }
        let mut visit: &mut dyn FnMut(&[u8]) = &mut visit;
        let cursor = unsafe { create() };
        if cursor.is_null() {
            return Err(Error::Internal("could not scan a hash".into()));
        }
        let data = (&mut visit as *mut &mut dyn FnMut(&[u8])).cast::<std::ffi::c_void>();
        while unsafe { scan(self.ptr, cursor, Some(each), data) } != 0 {}
        unsafe { destroy(cursor) };
        Ok(())
    }

    /// Adds `member` with `score` unless the member exists; true when added.
    pub fn zadd_new(&self, score: f64, member: RString) -> Result<bool, Error> {
        let add = api!(RedisModule_ZsetAdd);
        let mut flags = raw::REDISMODULE_ZADD_NX as c_int;
        ok(
            unsafe { add(self.ptr, score, member, &mut flags) },
            "could not add a member",
        )?;
        Ok(flags & raw::REDISMODULE_ZADD_ADDED as c_int != 0)
    }

    /// Adds `member` with `score`, or re-scores it (`xx`: only an existing
    /// member); true when the member was added.
    pub fn zadd(&self, score: f64, member: RString, xx: bool) -> Result<bool, Error> {
        let add = api!(RedisModule_ZsetAdd);
        let mut flags = if xx {
            raw::REDISMODULE_ZADD_XX as c_int
        } else {
            0
        };
        ok(
            unsafe { add(self.ptr, score, member, &mut flags) },
            "could not add a member",
        )?;
        Ok(flags & raw::REDISMODULE_ZADD_ADDED as c_int != 0)
    }

    /// The score of `member`, `None` when it (or the set) is missing.
    pub fn zscore(&self, member: RString) -> Result<Option<f64>, Error> {
        if self.kind()? != Kind::SortedSet {
            return Ok(None);
        }
        let score = api!(RedisModule_ZsetScore);
        let mut s = 0.0;
        Ok(
            (unsafe { score(self.ptr, member, &mut s) } == raw::REDISMODULE_OK as c_int)
                .then_some(s),
        )
    }

    pub fn zrem(&self, member: RString) -> Result<(), Error> {
        let rem = api!(RedisModule_ZsetRem);
        let mut deleted: c_int = 0;
        ok(
            unsafe { rem(self.ptr, member, &mut deleted) },
            "could not remove a member",
        )
    }

    /// Removes the members with a score `<= max`, walking up from the lowest
    /// (no `RedisModule_Call`: O(log N + M) for M removed); returns how many.
    pub fn zrem_through(&self, strings: &mut OwnedStrings, max: f64) -> Result<u64, Error> {
        let names = self.members_from_end(strings, false, max, u64::MAX)?;
        for &name in &names {
            self.zrem(name)?;
        }
        Ok(names.len() as u64)
    }

    /// Removes the `n` members at the top of the set (highest scores; among
    /// equal scores the greatest name in byte order, as the set orders them)
    /// and returns their names, for replication.
    pub fn zrem_top(&self, strings: &mut OwnedStrings, n: u64) -> Result<Vec<RString>, Error> {
        let names = self.members_from_end(strings, true, raw::REDISMODULE_NEGATIVE_INFINITE, n)?;
        for &name in &names {
            self.zrem(name)?;
        }
        Ok(names)
    }

    /// Up to `limit` member names from one end of the set: from the top down
    /// to any score, or from the bottom up to scores `<= max`. Collected
    /// first (the set must not change during the walk); owned by `strings`.
    fn members_from_end(
        &self,
        strings: &mut OwnedStrings,
        from_top: bool,
        max: f64,
        limit: u64,
    ) -> Result<Vec<RString>, Error> {
        let (start, step) = walk_from(from_top)?;
        let current = api!(RedisModule_ZsetRangeCurrentElement);
        let stop = api!(RedisModule_ZsetRangeStop);
        let mut names = Vec::new();
        let hi = if from_top {
            raw::REDISMODULE_POSITIVE_INFINITE
        } else {
            max
        };
        if limit == 0
            || self.ptr.is_null()
            || unsafe { start(self.ptr, raw::REDISMODULE_NEGATIVE_INFINITE, hi, 0, 0) }
                != raw::REDISMODULE_OK as c_int
        {
            return Ok(names);
        }
        loop {
            let mut score = 0.0;
            let element = unsafe { current(self.ptr, &mut score) };
            if element.is_null() {
                break;
            }
            strings.adopt(element);
            names.push(element);
            if names.len() as u64 == limit || unsafe { step(self.ptr) } == 0 {
                break;
            }
        }
        unsafe { stop(self.ptr) };
        Ok(names)
    }

    /// Lowest and highest scores, `None` when empty. O(1) / O(log n).
    pub fn zscore_bounds(&self) -> Result<Option<(f64, f64)>, Error> {
        if self.ptr.is_null() || self.size()? == 0 {
            return Ok(None);
        }
        let Some(lowest) = self.zscore_from_end(false, 0)? else {
            return Ok(None);
        };
        let Some(highest) = self.zscore_from_end(true, 0)? else {
            return Ok(None);
        };
        Ok(Some((lowest, highest)))
    }

    /// Counts the members above `edge` (from the top) or at or below it (from
    /// the bottom) by stepping through them without reading them: `None` once
    /// more than `cap` are found, so the caller can count by rank instead.
    pub fn zcount_from_end(
        &self,
        from_top: bool,
        edge: f64,
        cap: u64,
    ) -> Result<Option<u64>, Error> {
        let (start, step) = walk_from(from_top)?;
        let end_reached = api!(RedisModule_ZsetRangeEndReached);
        let stop = api!(RedisModule_ZsetRangeStop);
        let (lo, hi, lo_ex) = if from_top {
            (edge, raw::REDISMODULE_POSITIVE_INFINITE, 1)
        } else {
            (raw::REDISMODULE_NEGATIVE_INFINITE, edge, 0)
        };
        if self.ptr.is_null()
            || unsafe { start(self.ptr, lo, hi, lo_ex, 0) } != raw::REDISMODULE_OK as c_int
        {
            return Ok(Some(0));
        }
        let mut n = 0;
        if unsafe { end_reached(self.ptr) } == 0 {
            n = 1;
            while n <= cap && unsafe { step(self.ptr) } != 0 {
                n += 1;
            }
        }
        unsafe { stop(self.ptr) };
        Ok((n <= cap).then_some(n))
    }

    /// The score `steps` members in from the top or the bottom of the set.
    pub fn zscore_from_end(&self, from_top: bool, steps: u64) -> Result<Option<f64>, Error> {
        let (start, step) = walk_from(from_top)?;
        let current = api!(RedisModule_ZsetRangeCurrentElement);
        let stop = api!(RedisModule_ZsetRangeStop);
        let free = api!(RedisModule_FreeString);
        let (lo, hi) = (
            raw::REDISMODULE_NEGATIVE_INFINITE,
            raw::REDISMODULE_POSITIVE_INFINITE,
        );
        if self.ptr.is_null()
            || unsafe { start(self.ptr, lo, hi, 0, 0) } != raw::REDISMODULE_OK as c_int
        {
            return Ok(None);
        }
        let mut moved = 0;
        while moved < steps && unsafe { step(self.ptr) } != 0 {
            moved += 1;
        }
        let mut score = 0.0;
        let element = if moved == steps {
            unsafe { current(self.ptr, &mut score) }
        } else {
            ptr::null_mut()
        };
        unsafe { stop(self.ptr) };
        if element.is_null() {
            return Ok(None);
        }
        unsafe { free(ptr::null_mut(), element) };
        Ok(Some(score))
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if self.ptr.is_null() {
            return;
        }
        if let Some(close) = unsafe { raw::RedisModule_CloseKey } {
            unsafe { close(self.ptr) };
        }
    }
}

fn ok(status: c_int, what: &str) -> Result<(), Error> {
    if status == raw::REDISMODULE_OK as c_int {
        Ok(())
    } else {
        Err(Error::Internal(what.into()))
    }
}

type RangeStart = unsafe extern "C" fn(*mut raw::RedisModuleKey, f64, f64, c_int, c_int) -> c_int;
type RangeStep = unsafe extern "C" fn(*mut raw::RedisModuleKey) -> c_int;

/// How to start a score-range walk at one end of a sorted set and step inward.
fn walk_from(top: bool) -> Result<(RangeStart, RangeStep), Error> {
    Ok(if top {
        (
            api!(RedisModule_ZsetLastInScoreRange),
            api!(RedisModule_ZsetRangePrev),
        )
    } else {
        (
            api!(RedisModule_ZsetFirstInScoreRange),
            api!(RedisModule_ZsetRangeNext),
        )
    })
}

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

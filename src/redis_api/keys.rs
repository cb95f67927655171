//! Keys through the key API: type, size, expiry, strings, hash fields and
//! sorted-set members and ranges.

use std::ffi::{c_char, c_int};
use std::ptr;

use redis_module::raw;

use super::base::{bytes, Ctx, RString};
use super::strings::{OwnedStrings, StrVec};
use crate::error::Error;

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
    write: bool,
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
            write,
        })
    }

    /// Opened for writing (the call writes).
    pub fn is_writable(&self) -> bool {
        self.write
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
    pub fn zrem_top(&self, strings: &mut OwnedStrings, n: u64) -> Result<StrVec, Error> {
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
    ) -> Result<StrVec, Error> {
        let (start, step) = walk_from(from_top)?;
        let current = api!(RedisModule_ZsetRangeCurrentElement);
        let stop = api!(RedisModule_ZsetRangeStop);
        let mut names = StrVec::new();
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
        self.zscore_in_range(from_top, raw::REDISMODULE_POSITIVE_INFINITE, steps)
    }

    /// The lowest score when it is `<= max`, else `None`: one walk answers
    /// both whether a member lies at or below `max` and, if so, the lowest.
    pub fn zscore_lowest_through(&self, max: f64) -> Result<Option<f64>, Error> {
        self.zscore_in_range(false, max, 0)
    }

    /// The score `steps` members in from the top or the bottom of the
    /// members scored at most `max`.
    fn zscore_in_range(&self, from_top: bool, max: f64, steps: u64) -> Result<Option<f64>, Error> {
        let (start, step) = walk_from(from_top)?;
        let current = api!(RedisModule_ZsetRangeCurrentElement);
        let stop = api!(RedisModule_ZsetRangeStop);
        let free = api!(RedisModule_FreeString);
        let (lo, hi) = (raw::REDISMODULE_NEGATIVE_INFINITE, max);
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

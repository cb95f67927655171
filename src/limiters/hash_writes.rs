//! Writing a hash's fields and replicating them, shared by RL.THROTTLE and
//! RL.QUOTA (both keep their state in one hash per key).

use crate::error::Error;
use crate::redis_api::{Ctx, Key, Native, OwnedStrings, RString, StrVec};

/// The writes of one call on one hash: applied to the key at once, then
/// replicated together by [`HashWrites::finish`] as `HSET` (fields set),
/// `HDEL` (fields removed) and `PEXPIREAT`, or as `DEL` when no field is
/// left (Redis removes an empty hash).
pub struct HashWrites<'a> {
    ctx: Ctx,
    name: RString,
    key: &'a Key,
    strings: OwnedStrings,
    /// `field value` pairs, flat, as `HSET` takes them.
    set: StrVec,
    deleted: StrVec,
}

impl<'a> HashWrites<'a> {
    pub fn new(ctx: Ctx, name: RString, key: &'a Key) -> Self {
        HashWrites {
            ctx,
            name,
            key,
            strings: OwnedStrings::new(ctx),
            set: StrVec::new(),
            deleted: StrVec::new(),
        }
    }

    pub fn set(&mut self, field: RString, value: &[u8]) -> Result<(), Error> {
        let value = self.strings.bytes(value)?;
        self.key.hash_set(field, Some(value))?;
        self.set.push(field);
        self.set.push(value);
        Ok(())
    }

    pub fn delete(&mut self, field: RString) -> Result<(), Error> {
        self.key.hash_set(field, None)?;
        self.deleted.push(field);
        Ok(())
    }

    /// Sets the absolute expiry `expire_at` (when given; else the key keeps
    /// its own), replicates, and signals the key modified. Writes nothing
    /// and replicates nothing when no field changed.
    pub fn finish(self, expire_at: Option<i64>) -> Result<(), Error> {
        let (ctx, name) = (self.ctx, self.name);
        if self.set.is_empty() && self.deleted.is_empty() {
            return Ok(());
        }
        if self.key.size()? == 0 {
            // The last field went: the hash is gone (or goes now).
            if self.key.kind()? != crate::redis_api::Kind::Empty {
                self.key.delete()?;
            }
            ctx.propagate(Native::Del { key: name })?;
            return ctx.signal_modified(name);
        }
        if !self.set.is_empty() {
            ctx.propagate(Native::Hset {
                key: name,
                pairs: self.set.as_slice(),
            })?;
        }
        if !self.deleted.is_empty() {
            ctx.propagate(Native::Hdel {
                key: name,
                fields: self.deleted.as_slice(),
            })?;
        }
        if let Some(at) = expire_at {
            self.key.set_expire_at(at)?;
            ctx.propagate(Native::Pexpireat { key: name, at })?;
        }
        ctx.signal_modified(name)
    }
}

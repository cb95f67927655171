//! Reading and writing the string counters of RL.DAYHOUR and RL.LOCKCOUNT.

use crate::core::args::parse_counter;
use crate::core::counters::{Counter, CounterWrite};
use crate::error::Error;
use crate::redis_api::{Ctx, Event, Key, Kind, OwnedStrings, RString};

/// A missing key or a string, else `WRONGTYPE`.
pub fn require_string(key: &Key) -> Result<(), Error> {
    match key.kind()? {
        Kind::Empty | Kind::String => Ok(()),
        _ => Err(Error::WrongType),
    }
}

/// Reads a counter (type already checked) the way `INCR` reads it.
pub fn read(key: &Key, role: &str) -> Result<Counter, Error> {
    if key.kind()? == Kind::Empty {
        return Ok(Counter::MISSING);
    }
    let value = parse_counter(key.string()?, role)?;
    Ok(Counter {
        value: Some(value),
        expire_at: key.expire_at()?,
    })
}

/// Writes `value` with its absolute expiry, replicated as
/// `SET key value PXAT at` so replicas and AOF replays hold the same expiry.
pub fn write(
    ctx: Ctx,
    name: RString,
    key: &Key,
    w: &CounterWrite,
    strings: &mut OwnedStrings,
) -> Result<(), Error> {
    let value = strings.int(w.value)?;
    key.set_string(value)?;
    key.set_expire_at(w.expire_at)?;
    let pxat = strings.bytes(b"PXAT")?;
    let at = strings.int(w.expire_at)?;
    ctx.replicate(c"SET", &[name, value, pxat, at])?;
    ctx.notify(Event::Set, name)?;
    ctx.notify(Event::Expire, name)?;
    ctx.signal_modified(name)
}

//! Reading and writing the string counters of RL.DAYHOUR and RL.LOCKCOUNT.

use crate::core::args::parse_counter;
use crate::core::counters::{Counter, CounterWrite};
use crate::error::Error;
use crate::redis_api::{Ctx, Key, Kind, Native, RString};

/// A missing key or a string, else `WRONGTYPE`.
pub fn require_string(key: &Key) -> Result<(), Error> {
    key.require_kind(Kind::String)
}

/// Reads a counter (type already checked) the way `INCR` reads it, with
/// its expiry.
pub fn read(key: &Key, role: &str) -> Result<Counter, Error> {
    with_expiry(key, read_value(key, role)?)
}

/// Reads a counter's value (type already checked) the way `INCR` reads
/// it, not its expiry: whether a call is admitted depends on the values
/// only, and only an admission's writes need the expiry ([`with_expiry`]).
pub fn read_value(key: &Key, role: &str) -> Result<Counter, Error> {
    if key.kind()? == Kind::Empty {
        return Ok(Counter::MISSING);
    }
    let value = parse_counter(key.string()?, role)?;
    Ok(Counter {
        value: Some(value),
        expire_at: None,
    })
}

/// The counter read by [`read_value`] with its key's expiry.
pub fn with_expiry(key: &Key, counter: Counter) -> Result<Counter, Error> {
    if counter.value.is_none() {
        return Ok(counter);
    }
    Ok(Counter {
        expire_at: key.expire_at()?,
        ..counter
    })
}

/// Writes a counter in place and replicates it: `INCR key` for a plain
/// increment (the expiry stays), else `SET key value PXAT at`, so replicas and
/// AOF replays hold the same value and the same absolute expiry.
pub fn write(ctx: Ctx, name: RString, key: &Key, w: &CounterWrite) -> Result<(), Error> {
    key.write_int(w.value)?;
    if w.plain_increment {
        ctx.propagate(Native::Incr { key: name })?;
    } else {
        key.set_expire_at(w.expire_at)?;
        ctx.propagate(Native::SetPxat {
            key: name,
            value: w.value,
            at: w.expire_at,
        })?;
    }
    ctx.signal_modified(name)
}

//! `RL.DAYHOUR daykey hourkey daylimit hourlimit dayttl hourttl`: two fixed
//! windows that move together, all or nothing. O(1).
//!
//! Reproduces the seed's day/hour script replies without its
//! increment-then-roll-back writes (and refuses where a limit is 0 and its key
//! is missing, where the seed admits).

use super::call::fixed_args;
use super::counter_keys;
use super::outcome::Outcome;
use crate::core::args::{distinct_keys, parse_dayhour};
use crate::core::counters::dayhour as decide;
use crate::error::Error;
use crate::redis_api::{bytes, CallContext, Ctx, Key, RString};

pub fn dayhour(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    let [_, day_name, hour_name, daylimit, hourlimit, dayttl, hourttl] = *fixed_args::<7>(args)?;
    let parsed = parse_dayhour(&[
        bytes(daylimit),
        bytes(hourlimit),
        bytes(dayttl),
        bytes(hourttl),
    ])?;
    distinct_keys(bytes(day_name), bytes(hour_name), ("daykey", "hourkey"))?;
    let context = CallContext::read(ctx)?;
    context.refuse_if_oom()?;

    let day_key = Key::open(ctx, day_name, true)?;
    let hour_key = Key::open(ctx, hour_name, true)?;
    counter_keys::require_string(&day_key)?;
    counter_keys::require_string(&hour_key)?;
    let day = counter_keys::read_value(&day_key, "daykey")?;
    let hour = counter_keys::read_value(&hour_key, "hourkey")?;

    let mut out = decide(day, hour, &parsed, context.server_time);
    if out.writes.is_some() {
        // Admitted: the writes keep each key's expiry, so read them now.
        let day = counter_keys::with_expiry(&day_key, day)?;
        let hour = counter_keys::with_expiry(&hour_key, hour)?;
        out = decide(day, hour, &parsed, context.server_time);
    }
    if let Some((day_write, hour_write)) = out.writes {
        counter_keys::write(ctx, day_name, &day_key, &day_write)?;
        counter_keys::write(ctx, hour_name, &hour_key, &hour_write)?;
    }
    Ok(Outcome::new(&out.reply, out.writes.is_some()))
}

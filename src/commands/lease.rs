//! `RL.RELEASE key now token [token ...]` and `RL.RENEW key now ttl token
//! [token ...]`: the lease's token operations (`limiters::lease`); RL.LEASE
//! and RL.LEASEPEEK run through `super::runner`.

use super::call::KeyedCall;
use super::outcome::Outcome;
use crate::error::Error;
use crate::limiters::lease;
use crate::redis_api::{Ctx, RString};

/// RL.RELEASE: replies per token with the units that were live.
pub fn release(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    let call = KeyedCall::new(ctx, args)?;
    let counts = lease::release(ctx, call.key, &call.args, call.strings, &call.clock)?;
    Ok(Outcome::per_token(counts, 0))
}

/// RL.RENEW: replies per token with the units renewed (0: the lease is
/// lost, counted in INFO).
pub fn renew(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    let call = KeyedCall::new(ctx, args)?;
    let counts = lease::renew(ctx, call.key, &call.args, call.strings, &call.clock)?;
    let lost = counts.iter().filter(|&&n| n == 0).count() as u64;
    Ok(Outcome::per_token(counts, lost))
}

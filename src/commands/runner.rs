//! The one-limiter runner: RL.CHECK, RL.THROTTLE, RL.QUOTA and RL.LEASE
//! (`write`) and their peeks are each this runner over one
//! [`Limiter`](crate::limiters::Limiter) — the same steps RL.ALL
//! (`super::all`) runs over many.
//!
//! In the contract's error order: the arguments (the limiter's parser),
//! the memory rule (writing calls other than refunds), the key's type
//! (`WRONGTYPE`) and stored values (the limiter's read), then the
//! decision and, for an admitted writing call, its writes; or a refund, or
//! a debit.

use super::call::KeyedCall;
use super::outcome::Outcome;
use crate::error::Error;
use crate::limiters::{Limiter, Request};
use crate::redis_api::{Ctx, Key, RString};

/// The limiter's writing command (RL.CHECK, RL.THROTTLE, RL.QUOTA,
/// RL.LEASE).
pub fn command<L: Limiter>(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    run::<L>(ctx, args, true)
}

/// The limiter's peek (RL.PEEK, RL.THROTTLEPEEK, RL.QUOTAPEEK,
/// RL.LEASEPEEK): decides, writes nothing.
pub fn peek<L: Limiter>(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    run::<L>(ctx, args, false)
}

fn run<L: Limiter>(ctx: Ctx, args: &[RString], write: bool) -> Result<Outcome, Error> {
    let call = KeyedCall::new(ctx, args)?;
    let parsed = L::parse(&call.args, write, &call.clock)?;
    let request = L::request(&parsed);
    if write && request != Request::Refund {
        call.refuse_if_oom()?;
    }
    let key = Key::open_as(ctx, call.key, write, L::KIND)?;
    let mut limiter = L::read(ctx, call.key, key, parsed, &call.clock)?;
    match request {
        Request::Refund => Ok(Outcome::refund(&limiter.refund()?)),
        Request::Debit => Ok(Outcome::debit(&limiter.debit()?)),
        Request::Admit | Request::Reserve => {
            let verdict = if write {
                limiter.admit()?
            } else {
                limiter.decide()?
            };
            Ok(match limiter.token() {
                None => Outcome::new(&verdict.reply, verdict.admitted),
                Some(token) => Outcome::lease(&verdict.reply, token),
            })
        }
    }
}

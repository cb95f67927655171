//! `RL.THROTTLE key now burst count window [...] [COST cost] [REFUND | DEBIT
//! | RESERVE max_wait]` and `RL.THROTTLEPEEK` (no `REFUND` or `DEBIT`, `COST
//! 0` allowed; writes nothing).
//!
//! State: one hash per key, one field per rule named by its window in ms,
//! holding the rule's theoretical arrival time (TAT) in ns. Reads one field
//! per rule (`RedisModule_HashGet`); fields of windows the call does not name
//! are neither read nor changed. Writes (admitted RL.THROTTLE): every named
//! field, then the absolute expiry when it moves (on the key's grid, SPEC
//! "Expiries on a grid": most calls on a busy key keep it); replicated as
//! `HSET`, and `PEXPIREAT` when the expiry moved.
//! A refund writes the refunded fields (`HSET`), removes those back at a
//! full bucket (`HDEL`, or `DEL` when the hash is left empty) and keeps the
//! expiry. A debit writes as an admission does, whatever the rules say.

use super::{hash_state::HashWrites, KeyedCall, Outcome};
use crate::core::args::{parse_throttle, ThrottleArgs};
use crate::core::gcra::{self, format_tat, parse_tat, Gcra, TAT_BUF_LEN};
use crate::error::Error;
use crate::redis_api::{bytes, Ctx, Key, Kind, OwnedStrings, RString, StrVec};

pub fn throttle(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    evaluate(ctx, args, true)
}

pub fn throttle_peek(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    evaluate(ctx, args, false)
}

fn evaluate(ctx: Ctx, args: &[RString], write: bool) -> Result<Outcome, Error> {
    evaluate_call(ctx, &KeyedCall::new(ctx, args)?, write)
}

/// One call on one key, from its parsed-out key and arguments: the single
/// command, or one clause of RL.ALL (`super::all`).
pub(super) fn evaluate_call(ctx: Ctx, call: &KeyedCall, write: bool) -> Result<Outcome, Error> {
    let (key_name, clock) = (&call.key, &call.clock);
    let ThrottleArgs {
        now,
        rules,
        cost,
        refund,
        debit,
        reserve,
    } = parse_throttle(&call.args, write, clock)?;
    let (server_time, t) = (clock.server_time, clock.resolve(now));
    if write && !refund {
        call.refuse_if_oom()?;
    }

    let key = Key::open_as(ctx, *key_name, write, Kind::Hash)?;
    // The rules' field names, written on the stack (no heap string).
    let mut strings = OwnedStrings::new(ctx);
    let mut fields = StrVec::with_capacity(rules.len());
    for r in &rules {
        let mut buf = [0u8; 20];
        fields.push(strings.bytes(gcra::field_name(r.window, &mut buf))?);
    }
    let fields = fields.as_slice();
    let tats = read_tats(&key, *key_name, fields)?;

    if refund {
        let after = gcra::refund(&rules, cost, t, &tats);
        let mut writes = HashWrites::new(ctx, *key_name, &key);
        let mut buf = [0u8; TAT_BUF_LEN];
        for ((&field, before), after) in fields.iter().zip(&tats).zip(&after) {
            match (before, after) {
                (Some(_), Some(v)) => writes.set(field, format_tat(*v, &mut buf))?,
                (Some(_), None) => writes.delete(field)?,
                (None, _) => {}
            }
        }
        writes.finish(None)?;
        // The reply is the state now: RL.THROTTLEPEEK with COST 0 after it.
        let d = gcra::decide(&rules, 0, t, &after).decision;
        return Ok(Outcome::refund(&d.reply()));
    }

    if debit {
        // Recorded whether or not it fits (SPEC "Debits"), written as an
        // admission; the reply is the state now.
        let new_tats = gcra::debit(&rules, cost, t, &tats);
        apply(
            ctx,
            *key_name,
            &key,
            &rules,
            fields,
            &new_tats,
            server_time,
            t,
        )?;
        let after: Vec<Option<u128>> = new_tats.into_iter().map(Some).collect();
        let d = gcra::decide(&rules, 0, t, &after).decision;
        return Ok(Outcome::debit(&d.reply()));
    }

    // With RESERVE the call is admitted when its units are due within
    // `max_wait` and answers the delay (SPEC "Reservations").
    let decision = gcra::decide_reserving(&rules, cost, t, &tats, reserve);
    if let (true, Some(new_tats)) = (write, &decision.new_tats) {
        apply(
            ctx,
            *key_name,
            &key,
            &rules,
            fields,
            new_tats,
            server_time,
            t,
        )?;
    }
    let d = decision.decision;
    Ok(Outcome::new(&d.reply(), !d.limited))
}

/// The stored TAT of each named field (`None` when missing); a value that is
/// not one is an error in a stored value naming the key and field.
fn read_tats(key: &Key, key_name: RString, fields: &[RString]) -> Result<Vec<Option<u128>>, Error> {
    fields
        .iter()
        .map(|&field| {
            key.hash_get(field, |value| match value {
                None => Ok(None),
                Some(v) => parse_tat(v)
                    .map(Some)
                    .ok_or_else(|| gcra::stored_error(bytes(key_name), bytes(field), v)),
            })?
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn apply(
    ctx: Ctx,
    key_name: RString,
    key: &Key,
    rules: &[Gcra],
    fields: &[RString],
    new_tats: &[u128],
    server_time: i64,
    t: i64,
) -> Result<(), Error> {
    debug_assert_eq!(rules.len(), new_tats.len());
    let expire_at = gcra::expire_at(
        bytes(key_name),
        rules,
        new_tats,
        key.expire_at()?,
        server_time,
        t,
    );
    let mut writes = HashWrites::new(ctx, key_name, key);
    let mut buf = [0u8; TAT_BUF_LEN];
    for (&field, &tat) in fields.iter().zip(new_tats) {
        writes.set(field, format_tat(tat, &mut buf))?;
    }
    writes.finish(expire_at)
}

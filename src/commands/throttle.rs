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
    let parsed = parse_throttle(&call.args, write, &call.clock)?;
    let state = State::read(ctx, call, write, parsed)?;
    let ThrottleArgs {
        rules,
        cost,
        refund,
        debit,
        ..
    } = &state.args;
    let (rules, cost) = (rules.as_slice(), *cost);
    let (key_name, key, fields, t) = (state.key_name, &state.key, state.fields.as_slice(), state.t);
    let tats = &state.tats;

    if *refund {
        let after = gcra::refund(rules, cost, t, tats);
        let mut writes = HashWrites::new(ctx, key_name, key);
        let mut buf = [0u8; TAT_BUF_LEN];
        for ((&field, before), after) in fields.iter().zip(tats).zip(&after) {
            match (before, after) {
                (Some(_), Some(v)) => writes.set(field, format_tat(*v, &mut buf))?,
                (Some(_), None) => writes.delete(field)?,
                (None, _) => {}
            }
        }
        writes.finish(None)?;
        // The reply is the state now: RL.THROTTLEPEEK with COST 0 after it.
        let d = gcra::decide(rules, 0, t, &after).decision;
        return Ok(Outcome::refund(&d.reply()));
    }

    if *debit {
        // Recorded whether or not it fits (SPEC "Debits"), written as an
        // admission; the reply is the state now.
        let new_tats = gcra::debit(rules, cost, t, tats);
        apply(
            ctx,
            key_name,
            key,
            rules,
            fields,
            &new_tats,
            state.server_time,
            t,
        )?;
        let after: Vec<Option<u128>> = new_tats.into_iter().map(Some).collect();
        let d = gcra::decide(rules, 0, t, &after).decision;
        return Ok(Outcome::debit(&d.reply()));
    }

    let decided = state.decide();
    let (reply, admitted) = (decided.reply, decided.admitted);
    if write {
        decided.commit()?;
    }
    Ok(Outcome::new(&reply, admitted))
}

/// A call's key read: its arguments, the open key, the rules' field names
/// and their stored TATs.
struct State {
    ctx: Ctx,
    args: ThrottleArgs,
    key_name: RString,
    key: Key,
    /// Owns the field names.
    _strings: OwnedStrings,
    fields: StrVec,
    tats: Vec<Option<u128>>,
    server_time: i64,
    t: i64,
}

impl State {
    /// Checks the memory rule (writes other than refunds), opens the key
    /// (`WRONGTYPE`) and reads each rule's TAT (errors in stored values).
    fn read(ctx: Ctx, call: &KeyedCall, write: bool, args: ThrottleArgs) -> Result<State, Error> {
        let clock = &call.clock;
        let (server_time, t) = (clock.server_time, clock.resolve(args.now));
        if write && !args.refund {
            call.refuse_if_oom()?;
        }
        let key = Key::open_as(ctx, call.key, write, Kind::Hash)?;
        // The rules' field names, written on the stack (no heap string).
        let mut strings = OwnedStrings::new(ctx);
        let mut fields = StrVec::with_capacity(args.rules.len());
        for r in &args.rules {
            let mut buf = [0u8; 20];
            fields.push(strings.bytes(gcra::field_name(r.window, &mut buf))?);
        }
        let tats = read_tats(&key, call.key, fields.as_slice())?;
        Ok(State {
            ctx,
            args,
            key_name: call.key,
            key,
            _strings: strings,
            fields,
            tats,
            server_time,
            t,
        })
    }

    /// The admission decision (with RESERVE: admitted when its units are
    /// due within `max_wait`, SPEC "Reservations"), not yet written.
    fn decide(self) -> Decided {
        let a = &self.args;
        let decision = gcra::decide_reserving(&a.rules, a.cost, self.t, &self.tats, a.reserve);
        let d = decision.decision;
        Decided {
            reply: d.reply(),
            admitted: !d.limited,
            new_tats: decision.new_tats,
            state: self,
        }
    }
}

/// An RL.THROTTLE admission decided on its key and not yet written: RL.ALL
/// decides every clause before it writes any.
pub(super) struct Decided {
    state: State,
    new_tats: Option<Vec<u128>>,
    pub(super) reply: [i64; 6],
    pub(super) admitted: bool,
}

impl Decided {
    /// Writes and replicates an admission (nothing for a refusal).
    pub(super) fn commit(self) -> Result<(), Error> {
        let Some(new_tats) = &self.new_tats else {
            return Ok(());
        };
        let s = &self.state;
        apply(
            s.ctx,
            s.key_name,
            &s.key,
            &s.args.rules,
            s.fields.as_slice(),
            new_tats,
            s.server_time,
            s.t,
        )
    }
}

/// RL.THROTTLE's (`write`) or RL.THROTTLEPEEK's admission on a parsed-out
/// key, decided and not yet written (a `THROTTLE` clause of RL.ALL).
pub(super) fn decide_call(ctx: Ctx, call: &KeyedCall, write: bool) -> Result<Decided, Error> {
    let parsed = parse_throttle(&call.args, write, &call.clock)?;
    Ok(State::read(ctx, call, write, parsed)?.decide())
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

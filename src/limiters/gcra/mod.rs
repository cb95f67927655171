//! GCRA: `RL.THROTTLE key now burst count window [...] [COST cost] [REFUND
//! | DEBIT | RESERVE max_wait]` and `RL.THROTTLEPEEK` (no `REFUND` or
//! `DEBIT`, `COST 0` allowed; writes nothing). The pure decision is [`tat`]
//! (theoretical arrival times), the arguments [`args`]; this file reads and
//! writes the key.
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

pub mod args;
pub mod tat;

use self::args::{parse_throttle, ThrottleArgs};
use self::tat::{format_tat, parse_tat, Gcra, StoredTats, Tats, TAT_BUF_LEN};
use super::hash_writes::HashWrites;
use super::limiter::{Limiter, Phase, Request, RuleReplies, Verdict};
use crate::core::args::Clock;
use crate::error::Error;
use crate::redis_api::{bytes, Ctx, Key, Kind, OwnedStrings, RString, StrVec};

/// A GCRA bucket read from its key: the rules' field names and their
/// stored TATs.
pub struct TokenBucket {
    ctx: Ctx,
    args: ThrottleArgs,
    key_name: RString,
    key: Key,
    /// Owns the field names.
    _strings: OwnedStrings,
    fields: StrVec,
    tats: StoredTats,
    server_time: i64,
    t: i64,
    /// The admission's new TATs, once decided.
    new_tats: Option<Tats>,
    reply: [i64; 6],
}

impl TokenBucket {
    /// Writes `new_tats` (an admission or a debit) and moves the expiry
    /// when it must.
    fn write(&self, new_tats: &[u128]) -> Result<(), Error> {
        apply(
            self.ctx,
            self.key_name,
            &self.key,
            &self.args.rules,
            self.fields.as_slice(),
            new_tats,
            self.server_time,
            self.t,
        )
    }
}

impl Limiter for TokenBucket {
    type Args<'a> = ThrottleArgs;
    const KIND: Kind = Kind::Hash;

    fn parse(args: &[&[u8]], write: bool, clock: &Clock) -> Result<ThrottleArgs, Error> {
        parse_throttle(args, write, clock)
    }

    fn request(args: &ThrottleArgs) -> Request {
        Request::of(args.refund, args.debit, args.reserve.is_some())
    }

    fn cost(args: &ThrottleArgs) -> i64 {
        args.cost
    }

    fn rules(args: &ThrottleArgs) -> usize {
        args.rules.len()
    }

    /// Reads each rule's TAT (errors in stored values).
    fn read(
        ctx: Ctx,
        key_name: RString,
        key: Key,
        args: ThrottleArgs,
        clock: &Clock,
    ) -> Result<Self, Error> {
        // The rules' field names, written on the stack (no heap string).
        let mut strings = OwnedStrings::new(ctx);
        let mut fields = StrVec::with_capacity(args.rules.len());
        for r in &args.rules {
            let mut buf = [0u8; 20];
            fields.push(strings.bytes(tat::field_name(r.window, &mut buf))?);
        }
        let tats = read_tats(&key, key_name, fields.as_slice())?;
        Ok(TokenBucket {
            ctx,
            key_name,
            key,
            _strings: strings,
            fields,
            tats,
            server_time: clock.server_time,
            t: clock.resolve(args.now),
            args,
            new_tats: None,
            reply: [0; 6],
        })
    }

    /// With `RESERVE`: admitted when its units are due within `max_wait`
    /// (SPEC "Reservations").
    fn decide(&mut self) -> Result<Verdict, Error> {
        let a = &self.args;
        let decision = tat::decide_reserving(&a.rules, a.cost, self.t, &self.tats, a.reserve);
        let d = decision.decision;
        self.new_tats = decision.new_tats;
        self.reply = d.reply();
        Ok(Verdict {
            reply: self.reply,
            admitted: !d.limited,
        })
    }

    fn commit(&mut self) -> Result<[i64; 6], Error> {
        if let Some(new_tats) = &self.new_tats {
            self.write(new_tats)?;
        }
        Ok(self.reply)
    }

    fn refund(&mut self) -> Result<[i64; 6], Error> {
        let (rules, cost, t) = (&self.args.rules, self.args.cost, self.t);
        let after = tat::refund(rules, cost, t, &self.tats);
        let mut writes = HashWrites::new(self.ctx, self.key_name, &self.key);
        let mut buf = [0u8; TAT_BUF_LEN];
        for ((&field, before), after) in self.fields.iter().zip(&self.tats).zip(&after) {
            match (before, after) {
                (Some(_), Some(v)) => writes.set(field, format_tat(*v, &mut buf))?,
                (Some(_), None) => writes.delete(field)?,
                (None, _) => {}
            }
        }
        writes.finish(None)?;
        // The state now: RL.THROTTLEPEEK with COST 0 after it.
        Ok(tat::decide(rules, 0, t, &after).decision.reply())
    }

    fn debit(&mut self) -> Result<[i64; 6], Error> {
        let (rules, cost, t) = (&self.args.rules, self.args.cost, self.t);
        let new_tats = tat::debit(rules, cost, t, &self.tats);
        self.write(&new_tats)?;
        let after: Vec<Option<u128>> = new_tats.into_iter().map(Some).collect();
        Ok(tat::decide(&self.args.rules, 0, t, &after).decision.reply())
    }

    /// Each rule alone on its TAT: the one the admission writes (at
    /// `COST 0`), the stored one (at the clause's cost), or the one the
    /// refund left (at `COST 0`).
    fn details(&mut self, phase: Phase) -> Result<RuleReplies, Error> {
        let (rules, cost, t) = (&self.args.rules, self.args.cost, self.t);
        let refunded = match phase {
            Phase::Refunded => tat::refund(rules, cost, t, &self.tats),
            _ => Vec::new(),
        };
        let mut out = RuleReplies::new();
        for (i, rule) in rules.iter().enumerate() {
            let (at, tat) = match phase {
                Phase::Admitted => {
                    let written = self.new_tats.as_ref().and_then(|n| n.get(i).copied());
                    let Some(tat) = written else {
                        return Err(Error::Internal(
                            "details of an admission not decided".into(),
                        ));
                    };
                    (0, Some(tat))
                }
                Phase::Rejected => (cost, self.tats.get(i).copied().flatten()),
                Phase::Refunded => (0, refunded.get(i).copied().flatten()),
            };
            let mut reply = tat::decide(std::slice::from_ref(rule), at, t, &[tat])
                .decision
                .reply();
            reply[1] = i as i64 + 1;
            out.push(reply);
        }
        Ok(out)
    }
}

/// The stored TAT of each named field (`None` when missing); a value that is
/// not one is an error in a stored value naming the key and field.
fn read_tats(key: &Key, key_name: RString, fields: &[RString]) -> Result<StoredTats, Error> {
    fields
        .iter()
        .map(|&field| {
            key.hash_get(field, |value| match value {
                None => Ok(None),
                Some(v) => parse_tat(v)
                    .map(Some)
                    .ok_or_else(|| tat::stored_error(bytes(key_name), bytes(field), v)),
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
    let expire_at = tat::expire_at(
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

//! `RL.QUOTA key now zone period limit [...] [COST cost] [REFUND | DEBIT]`
//! and `RL.QUOTAPEEK` (no `REFUND` or `DEBIT`, `COST 0` allowed; writes
//! nothing). A debit writes as an admission does, whatever the limits say.
//!
//! State: one hash per key, one field per calendar bucket,
//! `<period>:<local start with offset>` (`day:2026-12-01T00:00+08:00`),
//! holding its count. The buckets are computed here from the bundled
//! time-zone database; replicas and AOF replays only see the effects.
//! Reads one field per named period. Writes (admitted RL.QUOTA): each
//! current bucket's field, the removal of stale buckets of the named periods
//! (older than the previous bucket), the absolute expiry; replicated as
//! `HSET`, `HDEL`, `PEXPIREAT`. A refund lowers the current buckets (`HSET`,
//! `HDEL` at 0, `DEL` when no field is left) and keeps the expiry.

use super::{hash_state::HashWrites, KeyedCall, Outcome};
use crate::core::args::{parse_quota, QuotaArgs};
use crate::core::calendar::{self, Bucket};
use crate::core::int::decimal;
use crate::error::Error;
use crate::redis_api::{bytes, Ctx, Key, Kind, OwnedStrings, RString};

pub fn quota(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    evaluate(ctx, args, true)
}

pub fn quota_peek(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    evaluate(ctx, args, false)
}

fn evaluate(ctx: Ctx, args: &[RString], write: bool) -> Result<Outcome, Error> {
    evaluate_call(ctx, &KeyedCall::new(ctx, args)?, write)
}

/// One call on one key, from its parsed-out key and arguments: the single
/// command, or one clause of RL.ALL (`super::all`).
pub(super) fn evaluate_call(ctx: Ctx, call: &KeyedCall, write: bool) -> Result<Outcome, Error> {
    let parsed = parse_quota(&call.args, write, &call.clock)?;
    let state = State::read(ctx, call, write, parsed)?;
    let (key_name, key, t) = (state.key_name, &state.key, state.t);
    let QuotaArgs {
        periods,
        cost,
        refund,
        debit,
        ..
    } = &state.args;
    let (buckets, fields, counts, cost) = (&state.buckets, &state.fields, &state.counts, *cost);

    if *refund {
        let mut writes = HashWrites::new(ctx, key_name, key);
        let mut digits = [0u8; 20];
        let mut after = counts.clone();
        for (&(field, stored), left) in fields.iter().zip(after.iter_mut()) {
            let Some(value) = stored else { continue };
            match calendar::refund(value, cost) {
                Some(v) => {
                    writes.set(field, decimal(v, &mut digits))?;
                    *left = v;
                }
                None => {
                    writes.delete(field)?;
                    *left = 0;
                }
            }
        }
        writes.finish(None)?;
        // The reply is the state now: RL.QUOTAPEEK with COST 0 after it.
        let d = calendar::decide(periods, buckets, &after, 0, t);
        return Ok(Outcome::refund(&d.reply()));
    }

    if *debit {
        // Recorded whether or not it fits (SPEC "Debits"), written as an
        // admission; the reply is the state now.
        let after: Vec<i64> = counts.iter().map(|&c| calendar::debit(c, cost)).collect();
        let current = Current {
            periods,
            buckets,
            fields,
        };
        record(ctx, key_name, key, &current, &after, state.server_time, t)?;
        let d = calendar::decide(periods, buckets, &after, 0, t);
        return Ok(Outcome::debit(&d.reply()));
    }

    let decided = state.decide();
    let (reply, admitted) = (decided.reply, decided.admitted);
    if write {
        decided.commit()?;
    }
    Ok(Outcome::new(&reply, admitted))
}

/// A call's key read: its arguments, the current buckets, the open key,
/// each bucket's field with its count as stored (None: no field) and the
/// counts the decision takes (a missing or negative count is 0).
struct State {
    ctx: Ctx,
    args: QuotaArgs,
    buckets: Vec<Bucket>,
    key_name: RString,
    key: Key,
    /// Owns the field names.
    _strings: OwnedStrings,
    /// With `counts`, on the stack: a call names at most six periods.
    fields: smallvec::SmallVec<[(RString, Option<i64>); 6]>,
    counts: smallvec::SmallVec<[i64; 6]>,
    server_time: i64,
    t: i64,
}

impl State {
    /// The buckets (an argument error past year 9999 in the zone, before
    /// any read), the memory rule (writes other than refunds), the key
    /// (`WRONGTYPE`) and each current bucket's count (errors in stored
    /// values).
    fn read(ctx: Ctx, call: &KeyedCall, write: bool, args: QuotaArgs) -> Result<State, Error> {
        let clock = &call.clock;
        let (server_time, t) = (clock.server_time, clock.resolve(args.now));
        let buckets = args
            .periods
            .iter()
            .map(|&(period, _)| calendar::bucket(&args.zone, period, t))
            .collect::<Result<Vec<Bucket>, Error>>()?;
        if write && !args.refund {
            call.refuse_if_oom()?;
        }
        let key_name = call.key;
        let key = Key::open_as(ctx, key_name, write, Kind::Hash)?;
        let mut strings = OwnedStrings::new(ctx);
        let mut fields: smallvec::SmallVec<[(RString, Option<i64>); 6]> = smallvec::SmallVec::new();
        for b in &buckets {
            let field = strings.kept(&b.field)?;
            let stored = key.hash_get(field, |value| {
                value
                    .map(|v| calendar::parse_count(bytes(key_name), bytes(field), v))
                    .transpose()
            })??;
            fields.push((field, stored));
        }
        let counts: smallvec::SmallVec<[i64; 6]> =
            fields.iter().map(|(_, c)| c.unwrap_or(0)).collect();
        Ok(State {
            ctx,
            args,
            buckets,
            key_name,
            key,
            _strings: strings,
            fields,
            counts,
            server_time,
            t,
        })
    }

    fn decide(self) -> Decided {
        let d = calendar::decide(
            &self.args.periods,
            &self.buckets,
            &self.counts,
            self.args.cost,
            self.t,
        );
        Decided {
            reply: d.reply(),
            admitted: !d.limited,
            state: self,
        }
    }
}

/// An RL.QUOTA admission decided on its key and not yet written: RL.ALL
/// decides every clause before it writes any.
pub(super) struct Decided {
    state: State,
    pub(super) reply: [i64; 6],
    pub(super) admitted: bool,
}

impl Decided {
    /// Counts an admission in every current bucket, writes and replicates
    /// it (nothing for a refusal).
    pub(super) fn commit(mut self) -> Result<(), Error> {
        if !self.admitted {
            return Ok(());
        }
        // Counts and cost are at most 2^53-1 and count + cost <= limit.
        let cost = self.state.args.cost;
        self.state.counts.iter_mut().for_each(|c| *c += cost);
        let s = &self.state;
        let after = &s.counts;
        let current = Current {
            periods: &s.args.periods,
            buckets: &s.buckets,
            fields: &s.fields,
        };
        record(
            s.ctx,
            s.key_name,
            &s.key,
            &current,
            after,
            s.server_time,
            s.t,
        )
    }
}

/// RL.QUOTA's (`write`) or RL.QUOTAPEEK's admission on a parsed-out key,
/// decided and not yet written (a `QUOTA` clause of RL.ALL).
pub(super) fn decide_call(ctx: Ctx, call: &KeyedCall, write: bool) -> Result<Decided, Error> {
    let parsed = parse_quota(&call.args, write, &call.clock)?;
    Ok(State::read(ctx, call, write, parsed)?.decide())
}

/// The call's periods, their current buckets, and each bucket's field with
/// its count as stored.
struct Current<'a> {
    periods: &'a [(calendar::Period, i64)],
    buckets: &'a [Bucket],
    fields: &'a [(RString, Option<i64>)],
}

/// The writes of an admission or a debit: each current bucket's field set
/// to its new count, stale buckets of the named periods removed, the
/// expiry moved when it changes.
fn record(
    ctx: Ctx,
    key_name: RString,
    key: &Key,
    current: &Current,
    counts: &[i64],
    server_time: i64,
    t: i64,
) -> Result<(), Error> {
    let expiry = key.expire_at()?;
    let expire_at = calendar::expire_at(current.buckets, expiry, server_time, t);
    let stale = stale_fields(
        ctx,
        key_name,
        key,
        current.periods,
        current.buckets,
        current.fields,
    )?;
    let mut strings = OwnedStrings::new(ctx);
    let mut writes = HashWrites::new(ctx, key_name, key);
    let mut digits = [0u8; 20];
    for (&(field, _), &count) in current.fields.iter().zip(counts) {
        writes.set(field, decimal(count, &mut digits))?;
    }
    for name in &stale {
        let field = strings.bytes(name)?;
        writes.delete(field)?;
    }
    // Within a bucket with `now = *` the expiry is the same every call:
    // neither set nor replicated again.
    writes.finish((Some(expire_at) != expiry).then_some(expire_at))
}

/// Fields RL.QUOTA examines for stale buckets per admitted call (see
/// [`stale_fields`]).
const STALE_SCAN_MAX_FIELDS: u64 = 64;

/// Fields of the named periods older than their previous bucket. Skips the
/// scan when the hash holds only the current buckets' fields (the usual
/// case within one bucket). A hash of at most [`STALE_SCAN_MAX_FIELDS`]
/// fields is scanned whole; a larger one — foreign fields, or buckets newer
/// than this call's that callers with a later `now` wrote — is examined on
/// that many fields drawn at random (`HRANDFIELD`), so a call stays bounded
/// and stale buckets still go, some on every call, until the hash is small.
fn stale_fields(
    ctx: Ctx,
    key_name: RString,
    key: &Key,
    periods: &[(calendar::Period, i64)],
    buckets: &[Bucket],
    fields: &[(RString, Option<i64>)],
) -> Result<Vec<Vec<u8>>, Error> {
    let present = fields.iter().filter(|(_, c)| c.is_some()).count() as u64;
    let size = key.size()?;
    if size <= present {
        return Ok(Vec::new());
    }
    let is_stale = |field: &[u8]| {
        periods
            .iter()
            .zip(buckets)
            .any(|(&(period, _), b)| calendar::is_stale(field, period, b.start_ms))
    };
    let mut stale = Vec::new();
    if size > STALE_SCAN_MAX_FIELDS {
        let sample = ctx.hash_random_fields(key_name, STALE_SCAN_MAX_FIELDS as i64)?;
        stale.extend(sample.into_iter().filter(|f| is_stale(f)));
        return Ok(stale);
    }
    key.hash_fields(|field| {
        if is_stale(field) {
            stale.push(field.to_vec());
        }
    })?;
    Ok(stale)
}

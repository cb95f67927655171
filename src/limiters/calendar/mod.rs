//! Calendar quotas: `RL.QUOTA key now zone period limit [...] [COST cost]
//! [REFUND | DEBIT]` and `RL.QUOTAPEEK` (no `REFUND` or `DEBIT`, `COST 0`
//! allowed; writes nothing). A debit writes as an admission does, whatever
//! the limits say. The pure decision and the zones' calendars are
//! [`buckets`], the arguments [`args`]; this file reads and writes the key.
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

pub mod args;
pub mod buckets;

use smallvec::SmallVec;

use self::args::{parse_quota, QuotaArgs};
use self::buckets::Bucket;
use super::hash_writes::HashWrites;
use super::limiter::{Limiter, Phase, Request, RuleReplies, Verdict};
use crate::core::args::Clock;
use crate::core::int::decimal;
use crate::error::Error;
use crate::redis_api::{bytes, Ctx, Key, Kind, OwnedStrings, RString};

/// Each current bucket's field with its count as stored (with `counts`,
/// on the stack: a call names at most six periods).
type Fields = SmallVec<[(RString, Option<i64>); 6]>;
/// The counts the decision takes.
type Counts = SmallVec<[i64; 6]>;
/// The current bucket of each period: on the stack for the usual one or
/// two periods.
type Buckets = SmallVec<[Bucket; 2]>;

/// RL.QUOTA's arguments and the current bucket of each period at `now`.
pub struct QuotaCall {
    args: QuotaArgs,
    buckets: Buckets,
}

/// A calendar quota read from its key: each current bucket's field with
/// its count as stored (None: no field) and the counts the decision takes
/// (a missing or negative count is 0).
pub struct Calendar {
    ctx: Ctx,
    args: QuotaArgs,
    buckets: Buckets,
    key_name: RString,
    key: Key,
    /// Owns the field names.
    _strings: OwnedStrings,
    /// With `counts`, on the stack: a call names at most six periods.
    fields: Fields,
    counts: Counts,
    server_time: i64,
    t: i64,
    verdict: Verdict,
}

impl Calendar {
    /// The writes of an admission or a debit: the current buckets set to
    /// `counts` (see [`record`]).
    fn record(&self, counts: &[i64]) -> Result<(), Error> {
        let current = Current {
            periods: &self.args.periods,
            buckets: &self.buckets,
            fields: &self.fields,
        };
        record(
            self.ctx,
            self.key_name,
            &self.key,
            &current,
            counts,
            self.server_time,
            self.t,
        )
    }

    /// The reply for `counts` at `COST 0`: the state now.
    fn state_now(&self, counts: &[i64]) -> [i64; 6] {
        buckets::decide(&self.args.periods, &self.buckets, counts, 0, self.t).reply()
    }
}

impl Limiter for Calendar {
    type Args<'a> = QuotaCall;
    const KIND: Kind = Kind::Hash;

    /// The arguments, then the buckets (an argument error past year 9999
    /// in the zone).
    fn parse(args: &[&[u8]], write: bool, clock: &Clock) -> Result<QuotaCall, Error> {
        let args = parse_quota(args, write, clock)?;
        let t = clock.resolve(args.now);
        let buckets = args
            .periods
            .iter()
            .map(|&(period, _)| buckets::bucket(&args.zone, period, t))
            .collect::<Result<Buckets, Error>>()?;
        Ok(QuotaCall { args, buckets })
    }

    fn request(call: &QuotaCall) -> Request {
        Request::of(call.args.refund, call.args.debit, false)
    }

    fn cost(call: &QuotaCall) -> i64 {
        call.args.cost
    }

    fn rules(call: &QuotaCall) -> usize {
        call.args.periods.len()
    }

    /// Reads each current bucket's count (errors in stored values).
    fn read(
        ctx: Ctx,
        key_name: RString,
        key: Key,
        call: QuotaCall,
        clock: &Clock,
    ) -> Result<Self, Error> {
        let QuotaCall { args, buckets } = call;
        let mut strings = OwnedStrings::new(ctx);
        let mut fields = Fields::new();
        for b in &buckets {
            let field = strings.kept(&b.field)?;
            let stored = key.hash_get(field, |value| {
                value
                    .map(|v| buckets::parse_count(bytes(key_name), bytes(field), v))
                    .transpose()
            })??;
            fields.push((field, stored));
        }
        let counts: Counts = fields.iter().map(|(_, c)| c.unwrap_or(0)).collect();
        Ok(Calendar {
            ctx,
            buckets,
            key_name,
            key,
            _strings: strings,
            fields,
            counts,
            server_time: clock.server_time,
            t: clock.resolve(args.now),
            args,
            verdict: Verdict {
                reply: [0; 6],
                admitted: false,
            },
        })
    }

    fn decide(&mut self) -> Result<Verdict, Error> {
        let d = buckets::decide(
            &self.args.periods,
            &self.buckets,
            &self.counts,
            self.args.cost,
            self.t,
        );
        self.verdict = Verdict {
            reply: d.reply(),
            admitted: !d.limited,
        };
        Ok(self.verdict)
    }

    /// Counts the admission in every current bucket.
    fn commit(&mut self) -> Result<[i64; 6], Error> {
        // Counts and cost are at most 2^53-1 and count + cost <= limit;
        // added in place (the counts are not read again).
        let cost = self.args.cost;
        self.counts.iter_mut().for_each(|c| *c += cost);
        self.record(&self.counts)?;
        Ok(self.verdict.reply)
    }

    fn refund(&mut self) -> Result<[i64; 6], Error> {
        let mut writes = HashWrites::new(self.ctx, self.key_name, &self.key);
        let mut digits = [0u8; 20];
        let mut after = self.counts.clone();
        for (&(field, stored), left) in self.fields.iter().zip(after.iter_mut()) {
            let Some(value) = stored else { continue };
            match buckets::refund(value, self.args.cost) {
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
        Ok(self.state_now(&after))
    }

    fn debit(&mut self) -> Result<[i64; 6], Error> {
        let cost = self.args.cost;
        let after: Counts = self
            .counts
            .iter()
            .map(|&c| buckets::debit(c, cost))
            .collect();
        self.record(&after)?;
        Ok(self.state_now(&after))
    }

    /// Each period alone on its current bucket's count: the count the
    /// admission writes (the stored count plus the cost, as
    /// [`Limiter::commit`] sums it; at `COST 0`), the stored one (at the
    /// clause's cost), or the one the refund left (at `COST 0`).
    fn details(&mut self, phase: Phase) -> Result<RuleReplies, Error> {
        let cost = self.args.cost;
        let mut out = RuleReplies::new();
        for (i, &(_, stored)) in self.fields.iter().enumerate() {
            let (count, at) = match phase {
                Phase::Admitted => (stored.unwrap_or(0).saturating_add(cost), 0),
                Phase::Rejected => (stored.unwrap_or(0), cost),
                Phase::Refunded => (
                    stored.map_or(0, |v| buckets::refund(v, cost).unwrap_or(0)),
                    0,
                ),
            };
            let (Some(period), Some(bucket)) =
                (self.args.periods.get(i..=i), self.buckets.get(i..=i))
            else {
                return Err(Error::Internal("a bucket without its period".into()));
            };
            let mut reply = buckets::decide(period, bucket, &[count], at, self.t).reply();
            reply[1] = i as i64 + 1;
            out.push(reply);
        }
        Ok(out)
    }
}

/// The call's periods, their current buckets, and each bucket's field with
/// its count as stored.
struct Current<'a> {
    periods: &'a [(buckets::Period, i64)],
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
    let expire_at = buckets::expire_at(current.buckets, expiry, server_time, t);
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
    periods: &[(buckets::Period, i64)],
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
            .any(|(&(period, _), b)| buckets::is_stale(field, period, b.start_ms))
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

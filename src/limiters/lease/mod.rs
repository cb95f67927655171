//! Leases, "at most `limit` units in flight": `RL.LEASE key now limit ttl
//! [COST cost] [TOKEN token]`, `RL.LEASEPEEK` (no `ttl`, writes nothing),
//! `RL.RELEASE key now token [token ...]` and `RL.RENEW key now ttl token
//! [token ...]`. The pure decision is [`units`], the arguments [`args`];
//! this file reads and writes the key.
//!
//! Reads: the live count and, for a refusal, one score by rank, as RL.CHECK
//! reads its window (see [`RedisLog`]); the token's units by name (`tok`,
//! `tok#2`, ... up to the first missing one; `tok` alone when its score is
//! whole, see [`units::has_siblings`]). Writes (admitted RL.LEASE):
//! the token's units beyond `cost` removed, its `cost` units added or
//! re-scored to `t + ttl` (the first of 2 or more to `t + ttl - 0.5`,
//! [`units::first_unit_score`]), expired units removed when the expiry moves or
//! when `limit` or more of them were found, the expiry on the key's grid.
//! Replicated as `ZREM`, `ZADD`, `ZREMRANGEBYSCORE` and `PEXPIREAT`;
//! RL.RELEASE as `ZREM`, RL.RENEW as `ZADD XX` and `PEXPIREAT`. A `LEASE`
//! clause of RL.ALL refunds as RL.RELEASE of its token does.

pub mod args;
pub mod units;

use smallvec::SmallVec;

use self::args::{parse_lease, parse_lease_clause, parse_tokens, LeaseArgs, MAX_TOKEN_LEN};
use self::units::{
    decide, expiry, first_unit_score, has_siblings, live_units, reap_bound, reaps, unit_name,
};
use super::limiter::{Limiter, Mode, Phase, Request, RuleReplies, Verdict};
use super::sorted_set::{next_member, reseed, Extremes, RedisLog, MAX_NAME_CLASHES};
use crate::core::args::Clock;
use crate::core::grid::Grid;
use crate::core::int::is_safe_score;
use crate::core::log_view::LogView;
use crate::core::members;
use crate::error::{show, Error};
use crate::redis_api::{bytes, Ctx, Key, Kind, Native, OwnedStrings, RString, StrVec};

/// A lease's unit names and their scores, in name order: on the stack for
/// the usual lease of a unit or two.
type Names = SmallVec<[RString; 2]>;
type Scores = SmallVec<[f64; 2]>;

/// What a key holds before an admission's writes (see
/// [`Lease::before_writes`]).
#[derive(Clone, Copy)]
struct Before {
    existing: Option<i64>,
    /// Expired units are those scored at or below it.
    bound: i64,
    has_expired: bool,
    expired_before: u64,
}

/// RL.RELEASE's and RL.RENEW's reply, one count per token: on the stack
/// for up to four tokens.
pub type PerToken = SmallVec<[i64; 4]>;

/// A lease's state read from its key: the set's size and extremes, and
/// the token's units (names and scores).
pub struct Lease {
    ctx: Ctx,
    name: RString,
    key: Key,
    write: bool,
    limit: i64,
    /// 0 in RL.LEASEPEEK (no `ttl`).
    ttl: i64,
    cost: i64,
    /// The token given (`TOKEN`), or the one an admission named.
    token: [u8; MAX_TOKEN_LEN],
    token_len: Option<usize>,
    server_time: i64,
    t: i64,
    extremes: Extremes,
    /// Owns `names`.
    strings: OwnedStrings,
    /// Whether the token's units were walked (`names`, `own`): on first
    /// need, so that RL.LEASE's new token can skip the walk (see
    /// [`Lease::admit_new_token`]).
    walked: bool,
    names: Names,
    /// The scores of the token's units (`names`); once an admission is
    /// decided, followed by those of the members past a gap in the chain
    /// that it re-scores (they move as the token's units do).
    own: Scores,
    verdict: Option<units::Verdict>,
    /// Whether the admission was written (RL.LEASE's reply then names the
    /// token).
    written: bool,
    /// The last reply made: the decision's, the admission's, the refund's.
    reply: [i64; 6],
}

impl Lease {
    fn view(&self) -> RedisLog<'_> {
        RedisLog::new(self.ctx, self.name, &self.key, self.extremes)
    }

    fn newest(&self) -> Option<f64> {
        self.extremes.newest()
    }

    fn given_token(&self) -> Option<&[u8]> {
        self.token_len.and_then(|n| self.token.get(..n))
    }

    /// The given token, copied out (so the key can be written meanwhile).
    fn token_copy(&self) -> Option<([u8; MAX_TOKEN_LEN], usize)> {
        let n = self.given_token()?.len();
        Some((self.token, n))
    }

    /// Walks the token's units (`tok`, `tok#2`, ... up to the first missing
    /// name), once; nothing without `TOKEN` or with `COST 0` (the peek's
    /// state now ignores the token).
    fn walk_token(&mut self) -> Result<(), Error> {
        if self.walked {
            return Ok(());
        }
        self.walked = true;
        if self.cost <= 0 {
            return Ok(());
        }
        let Some((token, n)) = self.token_copy() else {
            return Ok(());
        };
        let (names, own) = walk(&self.key, &mut self.strings, &token[..n], None)?;
        self.names = names;
        self.own = own;
        Ok(())
    }

    /// What the key holds before an admission's writes: its expiry, and
    /// whether `limit` or more expired units lie in it.
    fn before_writes(&mut self) -> Result<Before, Error> {
        let existing = self.key.expire_at()?;
        let bound = reap_bound(self.t, self.server_time);
        let has_expired = self
            .extremes
            .bounds
            .is_some_and(|(lowest, _)| lowest <= bound as f64);
        let expired_before = if has_expired {
            let mut view = self.view();
            let total = view.total()?;
            total.saturating_sub(view.count_newer_than(bound)?)
        } else {
            0
        };
        Ok(Before {
            existing,
            bound,
            has_expired,
            expired_before,
        })
    }

    /// RL.LEASE's usual call, decided and written at once: a `TOKEN` with
    /// room for `cost` units even if it held none (`live + cost <= limit`:
    /// admitted whatever it holds). Adding its first unit only where the
    /// name is free (one lookup of the name, as `ZADD` does) tells whether
    /// the token holds a lease: when it does, nothing was written and the
    /// call goes the usual way (`None`: walk, decide, commit); when not, the
    /// walk would have ended at once, so the remaining units are added the
    /// same way (a member already there, left past a gap in the chain, is
    /// re-scored as the walk-based path does) and the call finishes as
    /// [`Limiter::commit`] does. Saves the walk's lookup of a missing name:
    /// a scan of the whole set while it is a listpack.
    fn admit_new_token(&mut self) -> Result<Option<[i64; 6]>, Error> {
        if !self.write || self.walked || self.cost <= 0 {
            return Ok(None);
        }
        let Some((token, n)) = self.token_copy() else {
            return Ok(None);
        };
        let token = &token[..n];
        let (limit, cost, t) = (self.limit, self.cost, self.t);
        let live = self.view().count_newer_than(t)?;
        if live as i64 + cost > limit {
            return Ok(None);
        }
        let before = self.before_writes()?;
        let score = (t + self.ttl) as f64;
        let mut buf = [0u8; 85];
        let first = self.strings.bytes(unit_name(token, 1, &mut buf))?;
        if !self
            .key
            .zadd_new(first_unit_score(t + self.ttl, cost as u64), first)?
        {
            return Ok(None);
        }
        self.walked = true;
        let mut units = StrVec::with_capacity(cost as usize);
        units.push(first);
        let mut reused = 0;
        for i in 2..=cost as u64 {
            let name = self.strings.bytes(unit_name(token, i, &mut buf))?;
            if !self.key.zadd_new(score, name)? {
                // Live or not, it is re-scored as a unit of this lease.
                if let Some(old) = self.key.zscore(name)? {
                    reused += u64::from(old > t as f64);
                    self.own.push(old);
                }
                self.key.zadd(score, name, false)?;
            }
            units.push(name);
        }
        let verdict = units::Verdict {
            admitted: true,
            live,
            held: 0,
            retry_after: -1,
            reused,
        };
        self.verdict = Some(verdict);
        self.finish(verdict, before, units).map(Some)
    }

    /// The end of an admission, once its units are written (`units`, its
    /// `cost` unit names) and those beyond `cost` removed: the expired
    /// units removed when the expiry moves (or when `limit` or more were
    /// found), the expiry moved, the writes replicated; the reply.
    fn finish(
        &mut self,
        verdict: units::Verdict,
        before: Before,
        units: StrVec,
    ) -> Result<[i64; 6], Error> {
        let (ctx, key_name, limit, cost, t) = (self.ctx, self.name, self.limit, self.cost, self.t);
        let key = &self.key;
        let score = t + self.ttl;
        // The highest score after the writes: known without a read unless
        // one of the token's old units held the top (it may have moved
        // down).
        let top = match self.extremes.newest() {
            Some(high) if self.own.iter().all(|&s| s < high) => high.max(score as f64),
            None => score as f64,
            Some(_) => key.zscore_from_end(true, 0)?.unwrap_or(score as f64),
        };
        let grid = Grid::new(bytes(key_name), self.ttl);
        let expire_at = expiry(&grid, before.existing, top, t, self.server_time);
        let mut reaped = 0;
        if before.has_expired && reaps(expire_at.is_some(), before.expired_before, limit) {
            reaped = key.zrem_through(&mut self.strings, before.bound as f64)?;
        }
        if let Some(at) = expire_at {
            key.set_expire_at(at)?;
        }

        let dropped: &[RString] = self.names.get(cost as usize..).unwrap_or(&[]);
        if !dropped.is_empty() {
            ctx.propagate(Native::Zrem {
                key: key_name,
                members: dropped,
            })?;
        }
        ctx.propagate(Native::Zadd {
            key: key_name,
            score,
            members: &units,
            marked: if cost >= 2 { &[0] } else { &[] },
        })?;
        if reaped > 0 {
            ctx.propagate(Native::ZremRangeByScore {
                key: key_name,
                max: before.bound,
            })?;
        }
        if let Some(at) = expire_at {
            ctx.propagate(Native::Pexpireat { key: key_name, at })?;
        }
        ctx.signal_modified(key_name)?;
        self.written = true;
        self.reply = verdict.reply(limit, cost, Some(top), t).ints();
        Ok(self.reply)
    }

    /// The live members among the unit names an admission writes past the
    /// token's chain (`tok#i` for `i` after the first missing name up to
    /// `cost`): left by a gap in the chain (RL.CHECK's `REFUND` on the same
    /// key, an operator's `ZREM`), they are re-scored, not added. Their
    /// scores join `own`.
    fn live_past_the_chain(&mut self) -> Result<u64, Error> {
        self.walk_token()?;
        let Some(token) = self.given_token().filter(|_| self.cost > 0) else {
            return Ok(0);
        };
        let mut token_buf = [0u8; MAX_TOKEN_LEN];
        let n = token.len();
        token_buf[..n].copy_from_slice(token);
        let mut buf = [0u8; 85];
        let mut live = 0;
        // The walk found `names.len() + 1` missing: start after it (a new
        // token of cost 1, the usual lease, looks nothing up) — unless it
        // stopped at a first unit with a whole score, which has no `#2`
        // and looked nothing else up.
        let looked_up = match *self.own.as_slice() {
            [first] if !has_siblings(first) => 1,
            _ => self.names.len() as u64 + 1,
        };
        for i in looked_up + 1..=self.cost as u64 {
            let name = self
                .strings
                .bytes(unit_name(&token_buf[..n], i, &mut buf))?;
            if let Some(score) = self.key.zscore(name)? {
                live += u64::from(score > self.t as f64);
                self.own.push(score);
            }
        }
        Ok(live)
    }
}

impl Limiter for Lease {
    type Args<'a> = LeaseArgs<'a>;
    const KIND: Kind = Kind::SortedSet;

    /// RL.LEASE (`write`) or RL.LEASEPEEK (no `ttl`).
    fn parse<'a>(args: &[&'a [u8]], write: bool, clock: &Clock) -> Result<LeaseArgs<'a>, Error> {
        parse_lease(args, !write, clock)
    }

    /// RL.LEASE's arguments, `ttl` included, in every mode; `TOKEN`
    /// required where RL.ALL writes (its refund releases the token).
    fn parse_clause<'a>(
        args: &[&'a [u8]],
        mode: Mode,
        clock: &Clock,
    ) -> Result<LeaseArgs<'a>, Error> {
        let write = mode != Mode::Peek;
        let parsed = parse_lease_clause(args, i64::from(write), clock)?;
        if write && parsed.token.is_none() {
            return Err(Error::Arg(
                "TOKEN is required in a LEASE clause of RL.ALL".into(),
            ));
        }
        Ok(parsed)
    }

    fn request(_: &LeaseArgs) -> Request {
        Request::Admit
    }

    fn cost(args: &LeaseArgs) -> i64 {
        args.cost
    }

    fn rules(_: &LeaseArgs) -> usize {
        1
    }

    /// Reads the set's size and extremes and walks the token's units
    /// (with `COST 0`, the peek's state now, the token is ignored).
    fn read(
        ctx: Ctx,
        name: RString,
        key: Key,
        args: LeaseArgs<'_>,
        clock: &Clock,
    ) -> Result<Self, Error> {
        let write = key.is_writable();
        let t = clock.resolve(args.now);
        let extremes = Extremes::read_above(name, &key, t)?;
        let mut token = [0u8; MAX_TOKEN_LEN];
        let token_len = args.token.map(|given| {
            let n = given.len().min(MAX_TOKEN_LEN);
            token[..n].copy_from_slice(&given[..n]);
            n
        });
        Ok(Lease {
            ctx,
            name,
            key,
            write,
            limit: args.limit,
            ttl: args.ttl,
            cost: args.cost,
            token,
            token_len,
            server_time: clock.server_time,
            t,
            extremes,
            strings: OwnedStrings::new(ctx),
            walked: false,
            names: Names::new(),
            own: Scores::new(),
            verdict: None,
            written: false,
            reply: [0; 6],
        })
    }

    /// A peek that knows `ttl` (a `LEASE` clause of RL.ALLPEEK) answers
    /// what RL.LEASE would: its `reset_after` counts the units the call
    /// would (re)score to `t + ttl`.
    fn decide(&mut self) -> Result<Verdict, Error> {
        self.walk_token()?;
        let (limit, cost, t) = (self.limit, self.cost, self.t);
        let mut verdict = decide(limit, cost, t, &self.own, &mut self.view())?;
        if verdict.admitted {
            verdict.reused = self.live_past_the_chain()?;
        }
        self.verdict = Some(verdict);
        let top = if !self.write && self.ttl > 0 && verdict.admitted && cost > 0 {
            Some(top_after(
                &self.key,
                self.newest(),
                &self.own,
                (t + self.ttl) as f64,
            )?)
        } else {
            self.newest()
        };
        self.reply = verdict.reply(limit, cost, top, t).ints();
        Ok(Verdict {
            reply: self.reply,
            admitted: verdict.admitted,
        })
    }

    /// Adds or re-scores the token's `cost` units to `t + ttl` (naming the
    /// lease when no `TOKEN` was given), drops its units beyond `cost`,
    /// removes expired units when the expiry moves (or when `limit` or
    /// more expired), moves the expiry.
    fn commit(&mut self) -> Result<[i64; 6], Error> {
        let Some(verdict) = self.verdict else {
            return Err(Error::Internal("lease written before its decision".into()));
        };
        let before = self.before_writes()?;
        let (key, strings, names) = (&self.key, &mut self.strings, &self.names);
        let cost = self.cost;
        let score = (self.t + self.ttl) as f64;
        let first_score = first_unit_score(self.t + self.ttl, cost as u64);
        for &name in names.get(cost as usize..).unwrap_or(&[]) {
            key.zrem(name)?;
        }
        let units: StrVec = match self.token_len.and_then(|n| self.token.get(..n)) {
            Some(token) => {
                let mut buf = [0u8; 85];
                let mut units = StrVec::with_capacity(cost as usize);
                for i in 0..cost as usize {
                    let name = match names.get(i) {
                        Some(&n) => n,
                        None => strings.bytes(unit_name(token, i as u64 + 1, &mut buf))?,
                    };
                    key.zadd(if i == 0 { first_score } else { score }, name, false)?;
                    units.push(name);
                }
                units
            }
            None => {
                let mut named = [0u8; 8];
                let units = add_named_lease(key, strings, self.t + self.ttl, cost, &mut named)?;
                self.token[..8].copy_from_slice(&named);
                self.token_len = Some(8);
                units
            }
        };
        self.finish(verdict, before, units)
    }

    /// RL.LEASE: [`Lease::admit_new_token`] when it applies, else decide
    /// and commit.
    fn admit(&mut self) -> Result<Verdict, Error> {
        if let Some(reply) = self.admit_new_token()? {
            return Ok(Verdict {
                reply,
                admitted: true,
            });
        }
        let verdict = self.decide()?;
        if !verdict.admitted {
            return Ok(verdict);
        }
        Ok(Verdict {
            reply: self.commit()?,
            admitted: true,
        })
    }

    /// RL.RELEASE of the token (RL.ALL's `REFUND`); the state now, as
    /// RL.LEASEPEEK with `COST 0` answers it.
    fn refund(&mut self) -> Result<[i64; 6], Error> {
        self.walk_token()?;
        remove_units(self.ctx, self.name, &self.key, &self.names)?;
        self.extremes = Extremes::read(self.name, &self.key)?;
        let verdict = decide(self.limit, 0, self.t, &[], &mut self.view())?;
        self.reply = verdict.reply(self.limit, 0, self.newest(), self.t).ints();
        Ok(self.reply)
    }

    fn debit(&mut self) -> Result<[i64; 6], Error> {
        Err(Error::Internal("a lease takes no DEBIT".into()))
    }

    /// The one rule: RL.LEASE's reply when admitted (before the writes,
    /// computed as RL.ALLPEEK's peek computes it: the `ttl` counted),
    /// RL.LEASEPEEK's at the clause's cost when refused (the `ttl` not
    /// counted), RL.LEASEPEEK's with `COST 0` after the refund.
    fn details(&mut self, phase: Phase) -> Result<RuleReplies, Error> {
        let Some(verdict) = self.verdict else {
            // A refund decides nothing: its reply is the state now.
            return Ok(RuleReplies::from_slice(&[self.reply]));
        };
        let (limit, cost, t) = (self.limit, self.cost, self.t);
        let reply = match phase {
            Phase::Rejected => verdict.reply(limit, cost, self.newest(), t).ints(),
            // Written, or decided by a peek that knows `ttl`: its reply.
            Phase::Admitted if self.written || !self.write => self.reply,
            Phase::Admitted => {
                let top = if self.ttl > 0 && verdict.admitted && cost > 0 {
                    Some(top_after(
                        &self.key,
                        self.newest(),
                        &self.own,
                        (t + self.ttl) as f64,
                    )?)
                } else {
                    self.newest()
                };
                verdict.reply(limit, cost, top, t).ints()
            }
            Phase::Refunded => self.reply,
        };
        Ok(RuleReplies::from_slice(&[reply]))
    }

    /// RL.LEASE's seventh element: the token when admitted, nil when not;
    /// none for RL.LEASEPEEK.
    fn token(&self) -> Option<Option<&[u8]>> {
        if !self.write {
            return None;
        }
        Some(self.given_token().filter(|_| self.written))
    }
}

/// Removes a lease's units (RL.RELEASE): `ZREM`, and the key goes with its
/// last member, as `ZREM` does.
fn remove_units(ctx: Ctx, key_name: RString, key: &Key, names: &[RString]) -> Result<(), Error> {
    if names.is_empty() {
        return Ok(());
    }
    for &name in names {
        key.zrem(name)?;
    }
    ctx.propagate(Native::Zrem {
        key: key_name,
        members: names,
    })?;
    if key.kind()? == Kind::Empty {
        // The last member went: Redis removed the key, as ZREM does.
        ctx.notify_del(key_name)?;
    }
    ctx.signal_modified(key_name)
}

/// The names and scores of a lease's units, walking `tok`, `tok#2`, ... up
/// to the first missing name, or only `tok` when its score is whole (a
/// lease of one unit: one lookup). The names are owned by `strings`, but
/// for `first`: the call's own argument `tok`, when given.
fn walk(
    key: &Key,
    strings: &mut OwnedStrings,
    token: &[u8],
    first: Option<RString>,
) -> Result<(Names, Scores), Error> {
    // Usually one unit: room for it without growing.
    let (mut names, mut scores) = (Names::new(), Scores::new());
    let mut buf = [0u8; 85];
    for i in 1.. {
        let name = match first {
            Some(s) if i == 1 && bytes(s) == token => s,
            _ => strings.bytes(unit_name(token, i, &mut buf))?,
        };
        let Some(score) = key.zscore(name)? else {
            break;
        };
        names.push(name);
        scores.push(score);
        if i == 1 && !has_siblings(score) {
            break;
        }
    }
    Ok((names, scores))
}

/// A lease without `TOKEN`: the module names it (8 characters, as RL.CHECK
/// names its members) so that no unit name `name`, `name#2`, ... is taken
/// in the key; on a clash the units added are taken back and another name
/// is tried.
fn add_named_lease(
    key: &Key,
    strings: &mut OwnedStrings,
    expiry: i64,
    cost: i64,
    token: &mut [u8; 8],
) -> Result<StrVec, Error> {
    let mut buf = [0u8; 85];
    let mut units = StrVec::with_capacity(cost as usize);
    for _ in 0..MAX_NAME_CLASHES {
        *token = members::name(next_member());
        units.clear();
        let mut clash = false;
        for i in 1..=cost as u64 {
            let name = strings.bytes(unit_name(&token[..], i, &mut buf))?;
            let score = if i == 1 {
                first_unit_score(expiry, cost as u64)
            } else {
                expiry as f64
            };
            if !key.zadd_new(score, name)? {
                clash = true;
                break;
            }
            units.push(name);
        }
        // A free name also needs the unit after the last free, or a walk
        // would take a stranger's `name#(cost+1)` for part of this lease;
        // a lease of one unit has a whole score, and no walk looks past it.
        if !clash && cost < 2 {
            return Ok(units);
        }
        if !clash {
            let next = strings.bytes(unit_name(&token[..], cost as u64 + 1, &mut buf))?;
            if key.zscore(next)?.is_none() {
                return Ok(units);
            }
        }
        for &name in &units {
            key.zrem(name)?;
        }
        reseed();
    }
    Err(Error::Internal("could not find a free lease name".into()))
}

/// The highest score once every unit of the token (`own`, its scores) is
/// removed or re-scored to `score`: the highest of `score` and the other
/// members. Walks down from the top while the set's scores are the token's
/// own, highest first (an equal score of another member is the same value).
fn top_after(key: &Key, top: Option<f64>, own: &[f64], score: f64) -> Result<f64, Error> {
    let Some(high) = top else {
        return Ok(score);
    };
    if own.iter().all(|&s| s < high) {
        return Ok(high.max(score));
    }
    let mut own_desc = own.to_vec();
    own_desc.sort_by(|a, b| b.total_cmp(a));
    let mut rank = 0u64;
    loop {
        let Some(s) = key.zscore_from_end(true, rank)? else {
            return Ok(score);
        };
        if own_desc.get(rank as usize) == Some(&s) {
            rank += 1;
            continue;
        }
        return Ok(s.max(score));
    }
}

/// The server's strings of the tokens, the last arguments (`strings`, the
/// arguments after the key, as `args` are).
fn token_strings(strings: &[RString], tokens: usize) -> &[RString] {
    strings
        .get(strings.len().saturating_sub(tokens)..)
        .unwrap_or(&[])
}

/// RL.RELEASE on the arguments after the key (`args`, and `strings`, the
/// same as the server's strings): removes every unit of each lease; per
/// token, the units that were live.
pub fn release(
    ctx: Ctx,
    key_name: RString,
    args: &[&[u8]],
    strings: &[RString],
    clock: &Clock,
) -> Result<PerToken, Error> {
    let parsed = parse_tokens(args, false, clock)?;
    let given = token_strings(strings, parsed.tokens.len());
    let t = clock.resolve(parsed.now);
    let key = Key::open_as(ctx, key_name, true, Kind::SortedSet)?;
    let mut strings = OwnedStrings::new(ctx);
    let mut counts = PerToken::new();
    let mut walked: SmallVec<[Names; 4]> = SmallVec::new();
    // Every lease is read (and its scores checked) before the first write.
    // The scores it reads are the only stored values a release depends on,
    // so only those are checked (the set's extremes are not read).
    for (i, token) in parsed.tokens.iter().enumerate() {
        let (names, scores) = walk(&key, &mut strings, token, given.get(i).copied())?;
        // The same message as every other command's (the score itself is
        // not shown: 1e300 would print as a 301-digit integer).
        if scores.iter().any(|&s| !is_safe_score(s)) {
            return Err(Error::Stored(format!(
                "sorted set at '{}' holds a score that is not finite or outside -9007199254740991..9007199254740991",
                show(bytes(key_name))
            )));
        }
        counts.push(live_units(&scores, t) as i64);
        walked.push(names);
    }
    let removed: StrVec = walked.into_iter().flatten().collect();
    remove_units(ctx, key_name, &key, &removed)?;
    Ok(counts)
}

/// RL.RENEW on the arguments after the key: re-scores every unit of each
/// lease that still has a live one; per token, the units renewed (0: the
/// lease is lost).
pub fn renew(
    ctx: Ctx,
    key_name: RString,
    args: &[&[u8]],
    strings: &[RString],
    clock: &Clock,
) -> Result<PerToken, Error> {
    let parsed = parse_tokens(args, true, clock)?;
    let given = token_strings(strings, parsed.tokens.len());
    let (server_time, t) = (clock.server_time, clock.resolve(parsed.now));
    let key = Key::open_as(ctx, key_name, true, Kind::SortedSet)?;
    Extremes::read(key_name, &key)?;
    let existing = key.expire_at()?;
    let score = t + parsed.ttl;
    let mut strings = OwnedStrings::new(ctx);
    let mut counts = PerToken::new();
    let mut renewed = StrVec::new();
    // The first units of the leases of 2 or more units (indices into
    // `renewed`): scored half a ms before the others.
    let mut marked: SmallVec<[usize; 4]> = SmallVec::new();
    for (i, token) in parsed.tokens.iter().enumerate() {
        let (names, scores) = walk(&key, &mut strings, token, given.get(i).copied())?;
        if live_units(&scores, t) == 0 {
            counts.push(0);
            continue;
        }
        let first = first_unit_score(score, names.len() as u64);
        for (j, &name) in names.iter().enumerate() {
            key.zadd(if j == 0 { first } else { score as f64 }, name, true)?;
        }
        if names.len() >= 2 {
            marked.push(renewed.len());
        }
        counts.push(names.len() as i64);
        renewed.extend(names);
    }
    if renewed.is_empty() {
        return Ok(counts);
    }
    let top = key.zscore_from_end(true, 0)?.unwrap_or(score as f64);
    let grid = Grid::new(bytes(key_name), parsed.ttl);
    let expire_at = expiry(&grid, existing, top, t, server_time);
    if let Some(at) = expire_at {
        key.set_expire_at(at)?;
    }
    ctx.propagate(Native::ZaddXx {
        key: key_name,
        score,
        members: &renewed,
        marked: &marked,
    })?;
    if let Some(at) = expire_at {
        ctx.propagate(Native::Pexpireat { key: key_name, at })?;
    }
    ctx.signal_modified(key_name)?;
    Ok(counts)
}

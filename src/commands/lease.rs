//! `RL.LEASE key now limit ttl [COST cost] [TOKEN token]`, `RL.LEASEPEEK`
//! (no `ttl`, writes nothing), `RL.RELEASE key now token [token ...]` and
//! `RL.RENEW key now ttl token [token ...]`.
//!
//! Reads: the live count and, for a refusal, one score by rank, as RL.CHECK
//! reads its window (see [`RedisLog`]); the token's units by name (`tok`,
//! `tok#2`, ... up to the first missing one). Writes (admitted RL.LEASE):
//! the token's units beyond `cost` removed, its `cost` units added or
//! re-scored to `t + ttl`, expired units removed when the expiry moves or
//! when `limit` or more of them were found, the expiry on the key's grid.
//! Replicated as `ZREM`, `ZADD`, `ZREMRANGEBYSCORE` and `PEXPIREAT`;
//! RL.RELEASE as `ZREM`, RL.RENEW as `ZADD XX` and `PEXPIREAT`.

use super::check::{next_member, reseed, RedisLog, MAX_NAME_CLASHES};
use super::{KeyedCall, Outcome};
use crate::core::grid::Grid;
use crate::core::int::is_safe_score;
use crate::core::lease::{decide, expiry, live_units, reap_bound, reaps, unit_name};
use crate::core::lease_args::{parse_lease, parse_tokens};
use crate::core::members;
use crate::core::window::LogView;
use crate::error::{show, Error};
use crate::redis_api::{bytes, Ctx, Key, Kind, Native, OwnedStrings, RString};

pub fn lease(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    evaluate(ctx, args, true)
}

pub fn lease_peek(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    evaluate(ctx, args, false)
}

/// The names and scores of a lease's units, walking `tok`, `tok#2`, ... up
/// to the first missing name. The names are owned by `strings`.
fn walk(
    key: &Key,
    strings: &mut OwnedStrings,
    token: &[u8],
) -> Result<(Vec<RString>, Vec<f64>), Error> {
    // Usually one unit: room for it without growing.
    let (mut names, mut scores) = (Vec::with_capacity(2), Vec::with_capacity(2));
    let mut buf = [0u8; 85];
    for i in 1.. {
        let name = strings.bytes(unit_name(token, i, &mut buf))?;
        let Some(score) = key.zscore(name)? else {
            break;
        };
        names.push(name);
        scores.push(score);
    }
    Ok((names, scores))
}

fn evaluate(ctx: Ctx, args: &[RString], write: bool) -> Result<Outcome, Error> {
    evaluate_call(ctx, &KeyedCall::new(ctx, args)?, write)
}

/// One call on one key, from its parsed-out key and arguments: the single
/// command, or one clause of RL.ALL (`super::all`).
pub(super) fn evaluate_call(ctx: Ctx, call: &KeyedCall, write: bool) -> Result<Outcome, Error> {
    let (key_name, clock) = (call.key, &call.clock);
    let parsed = parse_lease(&call.args, !write, clock)?;
    let (server_time, t) = (clock.server_time, clock.resolve(parsed.now));
    if write {
        call.refuse_if_oom()?;
    }
    let (limit, cost) = (parsed.limit, parsed.cost);

    let key = Key::open_as(ctx, key_name, write, Kind::SortedSet)?;
    let mut view = RedisLog::read(ctx, key_name, &key)?;
    let mut strings = OwnedStrings::new(ctx);
    // With COST 0 (the peek's "state now") the token is ignored.
    let (names, own) = match parsed.token.filter(|_| cost > 0) {
        Some(token) => walk(&key, &mut strings, token)?,
        None => (Vec::new(), Vec::new()),
    };
    let verdict = decide(limit, cost, t, &own, &mut view)?;
    if !write {
        let reply = verdict.reply(limit, cost, view.newest(), t);
        return Ok(Outcome::new(&reply.ints(), verdict.admitted));
    }
    if !verdict.admitted {
        let reply = verdict.reply(limit, cost, view.newest(), t);
        return Ok(Outcome::lease(&reply.ints(), None));
    }

    // Admitted. What the key holds before the writes: its expiry, and
    // whether `limit` or more expired units lie in it.
    let existing = key.expire_at()?;
    let bound = reap_bound(t, server_time);
    let has_expired = view
        .bounds
        .is_some_and(|(lowest, _)| lowest <= bound as f64);
    let expired_before = if has_expired {
        let total = view.total()?;
        total.saturating_sub(view.count_newer_than(bound)?)
    } else {
        0
    };

    let score = t + parsed.ttl;
    let dropped: &[RString] = names.get(cost as usize..).unwrap_or(&[]);
    for &name in dropped {
        key.zrem(name)?;
    }
    let mut token_buf = [0u8; 8];
    let (token, units): (&[u8], Vec<RString>) = match parsed.token {
        Some(token) => {
            let mut buf = [0u8; 85];
            let mut units = Vec::with_capacity(cost as usize);
            for i in 0..cost as usize {
                let name = match names.get(i) {
                    Some(&n) => n,
                    None => strings.bytes(unit_name(token, i as u64 + 1, &mut buf))?,
                };
                key.zadd(score as f64, name, false)?;
                units.push(name);
            }
            (token, units)
        }
        None => {
            let units = add_named_lease(&key, &mut strings, score, cost, &mut token_buf)?;
            (&token_buf[..], units)
        }
    };
    // The highest score after the writes: known without a read unless one
    // of the token's old units held the top (it may have moved down).
    let top_before = view.newest();
    let top = match top_before {
        Some(high) if own.iter().all(|&s| s < high) => high.max(score as f64),
        None => score as f64,
        Some(_) => key.zscore_from_end(true, 0)?.unwrap_or(score as f64),
    };
    let grid = Grid::new(bytes(key_name), parsed.ttl);
    let expire_at = expiry(&grid, existing, top, t, server_time);
    let mut reaped = 0;
    if has_expired && reaps(expire_at.is_some(), expired_before, limit) {
        reaped = key.zrem_through(&mut strings, bound as f64)?;
    }
    if let Some(at) = expire_at {
        key.set_expire_at(at)?;
    }

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
    })?;
    if reaped > 0 {
        ctx.propagate(Native::ZremRangeByScore {
            key: key_name,
            max: bound,
        })?;
    }
    if let Some(at) = expire_at {
        ctx.propagate(Native::Pexpireat { key: key_name, at })?;
    }
    ctx.signal_modified(key_name)?;
    let reply = verdict.reply(limit, cost, Some(top), t);
    Ok(Outcome::lease(&reply.ints(), Some(token)))
}

/// A lease without `TOKEN`: the module names it (8 characters, as RL.CHECK
/// names its members) so that no unit name `name`, `name#2`, ... is taken
/// in the key; on a clash the units added are taken back and another name
/// is tried.
fn add_named_lease(
    key: &Key,
    strings: &mut OwnedStrings,
    score: i64,
    cost: i64,
    token: &mut [u8; 8],
) -> Result<Vec<RString>, Error> {
    let mut buf = [0u8; 85];
    let mut units: Vec<RString> = Vec::with_capacity(cost as usize);
    for _ in 0..MAX_NAME_CLASHES {
        *token = members::name(next_member());
        units.clear();
        let mut clash = false;
        for i in 1..=cost as u64 {
            let name = strings.bytes(unit_name(&token[..], i, &mut buf))?;
            if !key.zadd_new(score as f64, name)? {
                clash = true;
                break;
            }
            units.push(name);
        }
        // A free name also needs the unit after the last free, or a walk
        // would take a stranger's `name#(cost+1)` for part of this lease.
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

/// A `LEASE` clause decided without writing (RL.ALLPEEK, and RL.ALL before
/// it writes): what RL.LEASE with `ttl` would answer, its `reset_after`
/// counting the units the call would (re)score to `t + ttl`. With `COST 0`,
/// RL.LEASEPEEK's state now (token ignored, `ttl` not counted).
pub(super) fn peek_clause(
    ctx: Ctx,
    key_name: RString,
    t: i64,
    limit: i64,
    ttl: i64,
    cost: i64,
    token: Option<&[u8]>,
) -> Result<[i64; 6], Error> {
    let key = Key::open_as(ctx, key_name, false, Kind::SortedSet)?;
    let mut view = RedisLog::read(ctx, key_name, &key)?;
    let mut strings = OwnedStrings::new(ctx);
    let (_, own) = match token.filter(|_| cost > 0) {
        Some(token) => walk(&key, &mut strings, token)?,
        None => (Vec::new(), Vec::new()),
    };
    let verdict = decide(limit, cost, t, &own, &mut view)?;
    let top = if verdict.admitted && cost > 0 {
        Some(top_after(&key, view.newest(), &own, (t + ttl) as f64)?)
    } else {
        view.newest()
    };
    Ok(verdict.reply(limit, cost, top, t).ints())
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

/// RL.RELEASE: removes every unit of each lease; replies per token with
/// the units that were live.
pub fn release(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    release_call(ctx, &KeyedCall::new(ctx, args)?)
}

/// RL.RELEASE on a parsed-out key, also a `LEASE` clause's refund in RL.ALL.
pub(super) fn release_call(ctx: Ctx, call: &KeyedCall) -> Result<Outcome, Error> {
    let parsed = parse_tokens(&call.args, false, &call.clock)?;
    let t = call.clock.resolve(parsed.now);
    let key = Key::open_as(ctx, call.key, true, Kind::SortedSet)?;
    let mut strings = OwnedStrings::new(ctx);
    let mut counts = Vec::with_capacity(parsed.tokens.len());
    let mut walked = Vec::with_capacity(parsed.tokens.len());
    // Every lease is read (and its scores checked) before the first write.
    // The scores it reads are the only stored values a release depends on,
    // so only those are checked (the set's extremes are not read).
    for token in &parsed.tokens {
        let (names, scores) = walk(&key, &mut strings, token)?;
        if let Some(&bad) = scores.iter().find(|&&s| !is_safe_score(s)) {
            return Err(Error::Stored(format!(
                "sorted set at '{}' holds a score that is not finite or outside -9007199254740991..9007199254740991 ({bad})",
                show(bytes(call.key))
            )));
        }
        counts.push(live_units(&scores, t) as i64);
        walked.push(names);
    }
    let mut removed: Vec<RString> = Vec::new();
    for names in walked {
        for &name in &names {
            key.zrem(name)?;
        }
        removed.extend(names);
    }
    if !removed.is_empty() {
        ctx.propagate(Native::Zrem {
            key: call.key,
            members: &removed,
        })?;
        if key.kind()? == Kind::Empty {
            // The last member went: Redis removed the key, as ZREM does.
            ctx.notify_del(call.key)?;
        }
        ctx.signal_modified(call.key)?;
    }
    Ok(Outcome::per_token(counts, 0))
}

/// RL.RENEW: re-scores every unit of each lease that still has a live one;
/// replies per token with the units renewed (0: the lease is lost).
pub fn renew(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    let call = KeyedCall::new(ctx, args)?;
    let parsed = parse_tokens(&call.args, true, &call.clock)?;
    let (server_time, t) = (call.clock.server_time, call.clock.resolve(parsed.now));
    let key = Key::open_as(ctx, call.key, true, Kind::SortedSet)?;
    RedisLog::read(ctx, call.key, &key)?;
    let existing = key.expire_at()?;
    let score = t + parsed.ttl;
    let mut strings = OwnedStrings::new(ctx);
    let mut counts = Vec::with_capacity(parsed.tokens.len());
    let mut renewed: Vec<RString> = Vec::new();
    for token in &parsed.tokens {
        let (names, scores) = walk(&key, &mut strings, token)?;
        if live_units(&scores, t) == 0 {
            counts.push(0);
            continue;
        }
        for &name in &names {
            key.zadd(score as f64, name, true)?;
        }
        counts.push(names.len() as i64);
        renewed.extend(names);
    }
    let lost = counts.iter().filter(|&&n| n == 0).count() as u64;
    if renewed.is_empty() {
        return Ok(Outcome::per_token(counts, lost));
    }
    let top = key.zscore_from_end(true, 0)?.unwrap_or(score as f64);
    let grid = Grid::new(bytes(call.key), parsed.ttl);
    let expire_at = expiry(&grid, existing, top, t, server_time);
    if let Some(at) = expire_at {
        key.set_expire_at(at)?;
    }
    ctx.propagate(Native::ZaddXx {
        key: call.key,
        score,
        members: &renewed,
    })?;
    if let Some(at) = expire_at {
        ctx.propagate(Native::Pexpireat { key: call.key, at })?;
    }
    ctx.signal_modified(call.key)?;
    Ok(Outcome::per_token(counts, lost))
}

//! `RL.CHECK key now count window [count window ...] [COST cost] [REFUND |
//! DEBIT]` and `RL.PEEK` (no `REFUND` or `DEBIT`, `COST 0` allowed; writes
//! nothing). A debit writes as an admission does, without a decision.
//!
//! Reads, per distinct window: the set's lowest and highest scores answer
//! when the window's edge lies outside them; else at most [`STEP_CAP`]
//! members are stepped through from the nearer end; else `ZCOUNT` counts by
//! rank (O(log N) on a skiplist). The k-th member a retry-after needs is
//! found the same way (`ZRANGE` by rank past the cap). Writes (admitted
//! RL.CHECK only):
//! `cost` new members scored `now`; when the key's expiry must move (on its
//! grid, SPEC "Expiries on a grid" — about once an eighth of the longest
//! window on a busy key), members older than the longest window removed and
//! the new absolute expiry. Replicated as `ZADD`, then `ZREMRANGEBYSCORE`
//! (when something was removed) and `PEXPIREAT` when the expiry moved: most
//! calls on a busy key replicate one `ZADD`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Once;

use super::{KeyedCall, Outcome};
use crate::core::args::{parse_check, CheckArgs};
use crate::core::int::is_safe_score;
use crate::core::members;
use crate::core::window::{admission, decide, refund_units, Admission, LogView};
use crate::error::{show, Error};
use crate::redis_api::{bytes, Ctx, Key, Kind, Native, OwnedStrings, RString, StrVec};

pub fn check(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    evaluate(ctx, args, true)
}

pub fn peek(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    evaluate(ctx, args, false)
}

fn evaluate(ctx: Ctx, args: &[RString], write: bool) -> Result<Outcome, Error> {
    evaluate_call(ctx, &KeyedCall::new(ctx, args)?, write)
}

/// One call on one key, from its parsed-out key and arguments: the single
/// command, or one clause of RL.ALL (`super::all`).
pub(super) fn evaluate_call(ctx: Ctx, call: &KeyedCall, write: bool) -> Result<Outcome, Error> {
    let (key_name, clock) = (&call.key, &call.clock);
    let parsed = parse_check(&call.args, write, clock)?;
    let (server_time, t) = (clock.server_time, clock.resolve(parsed.now));
    if write && !parsed.refund {
        call.refuse_if_oom()?;
    }

    let key = Key::open_as(ctx, *key_name, write, Kind::SortedSet)?;
    let mut view = RedisLog::read(ctx, *key_name, &key)?;

    if parsed.refund {
        let n = refund_units(&parsed.rules, parsed.cost, t, view.newest(), &mut view)?;
        if n > 0 {
            let mut strings = OwnedStrings::new(ctx);
            let removed = key.zrem_top(&mut strings, n)?;
            ctx.propagate(Native::Zrem {
                key: *key_name,
                members: &removed,
            })?;
            if key.kind()? == Kind::Empty {
                // The last member went: Redis removed the key, as ZREM does.
                ctx.notify_del(*key_name)?;
            }
            ctx.signal_modified(*key_name)?;
            view = RedisLog::read(ctx, *key_name, &key)?;
        }
        // The reply is the state now: RL.PEEK with COST 0 after the refund.
        let newest = view.newest();
        let d = decide(&parsed.rules, 0, t, newest, &mut view)?;
        return Ok(Outcome::refund(&d.reply()));
    }

    let newest = view.newest();
    // A debit is recorded whatever the rules say (SPEC "Debits"): no
    // decision before it.
    let decision = if parsed.debit {
        None
    } else {
        Some(decide(&parsed.rules, parsed.cost, t, newest, &mut view)?)
    };
    if write && decision.is_none_or(|d| !d.limited) {
        let read = Read {
            newest,
            bounds: view.bounds,
            server_time,
            t,
        };
        record(ctx, *key_name, &key, &parsed.rules, parsed.cost, &read)?;
    }
    match decision {
        Some(d) => Ok(Outcome::new(&d.reply(), !d.limited)),
        None => {
            // The reply is the state now: RL.PEEK with COST 0 after the debit.
            let mut view = RedisLog::read(ctx, *key_name, &key)?;
            let newest = view.newest();
            let d = decide(&parsed.rules, 0, t, newest, &mut view)?;
            Ok(Outcome::debit(&d.reply()))
        }
    }
}

/// What an admission's writes need of the read before it: the set's
/// highest score and extremes, the server clock and the call's time.
struct Read {
    newest: Option<f64>,
    bounds: Option<(f64, f64)>,
    server_time: i64,
    t: i64,
}

/// The writes of an admission or a debit: `cost` members scored `t`, and
/// when the expiry moves (on its grid) the trim and the new expiry.
fn record(
    ctx: Ctx,
    key_name: RString,
    key: &Key,
    rules: &[crate::core::args::Rule],
    cost: i64,
    read: &Read,
) -> Result<(), Error> {
    let plan = admission(
        rules,
        cost,
        read.t,
        read.newest,
        read.server_time,
        key.expire_at()?,
        bytes(key_name),
    );
    let trim = plan.trim_through.filter(|&through| {
        read.bounds
            .is_some_and(|(lowest, _)| lowest <= through as f64)
    });
    apply(ctx, key_name, key, &plan, trim)
}

/// An RL.CHECK admission decided on its key and not yet written: RL.ALL
/// decides every clause before it writes any.
pub(super) struct Decided {
    ctx: Ctx,
    key_name: RString,
    key: Key,
    args: CheckArgs,
    read: Read,
    pub(super) reply: [i64; 6],
    pub(super) admitted: bool,
}

impl Decided {
    /// Records an admission (nothing for a refusal).
    pub(super) fn commit(self) -> Result<(), Error> {
        if !self.admitted {
            return Ok(());
        }
        let a = &self.args;
        record(
            self.ctx,
            self.key_name,
            &self.key,
            &a.rules,
            a.cost,
            &self.read,
        )
    }
}

/// RL.CHECK's (`write`) or RL.PEEK's admission on a parsed-out key, read
/// and decided as they do, not yet written (a `CHECK` clause of RL.ALL;
/// not for `REFUND` or `DEBIT`).
pub(super) fn decide_call(ctx: Ctx, call: &KeyedCall, write: bool) -> Result<Decided, Error> {
    let args = parse_check(&call.args, write, &call.clock)?;
    let (server_time, t) = (call.clock.server_time, call.clock.resolve(args.now));
    if write {
        call.refuse_if_oom()?;
    }
    let key = Key::open_as(ctx, call.key, write, Kind::SortedSet)?;
    let (d, read) = {
        let mut view = RedisLog::read(ctx, call.key, &key)?;
        let newest = view.newest();
        let d = decide(&args.rules, args.cost, t, newest, &mut view)?;
        let read = Read {
            newest,
            bounds: view.bounds,
            server_time,
            t,
        };
        (d, read)
    };
    Ok(Decided {
        ctx,
        key_name: call.key,
        key,
        args,
        read,
        reply: d.reply(),
        admitted: !d.limited,
    })
}

/// Members a call steps through, from the nearer end of the set, before it
/// counts by rank instead (`ZCOUNT` / `ZRANGE`, O(log N) on a skiplist).
/// Stepping costs a few hundred instructions a member; a `RedisModule_Call`
/// several thousand.
pub(super) const STEP_CAP: u64 = 24;

/// The sorted set as the decision core sees it.
pub(super) struct RedisLog<'a> {
    ctx: Ctx,
    name: RString,
    key: &'a Key,
    len: u64,
    /// Lowest and highest scores, `None` when empty.
    pub(super) bounds: Option<(f64, f64)>,
}

impl<'a> RedisLog<'a> {
    /// Reads the set's size and extremes; a score that is not finite or
    /// outside `±(2^53-1)` is an error in a stored value (sorted, so the
    /// extremes bound every score).
    pub(super) fn read(ctx: Ctx, name: RString, key: &'a Key) -> Result<Self, Error> {
        let bounds = key.zscore_bounds()?;
        if let Some((lowest, highest)) = bounds {
            if !is_safe_score(lowest) || !is_safe_score(highest) {
                return Err(Error::Stored(format!(
                    "sorted set at '{}' holds a score that is not finite or outside -9007199254740991..9007199254740991",
                    show(bytes(name))
                )));
            }
        }
        Ok(RedisLog {
            ctx,
            name,
            key,
            len: key.size()?,
            bounds,
        })
    }

    pub(super) fn newest(&self) -> Option<f64> {
        self.bounds.map(|(_, highest)| highest)
    }
}

impl LogView for RedisLog<'_> {
    type Error = Error;

    /// The extremes answer when the window's edge lies outside them (the
    /// usual case for the longest window, which admissions trim). Otherwise
    /// the members on the side of the edge that holds fewer (guessed from
    /// the extremes, as if scores were spread evenly) are stepped through,
    /// and past [`STEP_CAP`] counted with `len - ZCOUNT key -inf edge`.
    fn count_newer_than(&mut self, min_exclusive: i64) -> Result<u64, Error> {
        let edge = min_exclusive as f64;
        let Some((lowest, highest)) = self.bounds else {
            return Ok(0);
        };
        if lowest > edge {
            return Ok(self.len);
        }
        if highest <= edge {
            return Ok(0);
        }
        let newer_share = (highest - edge) / (highest - lowest);
        let from_top = newer_share <= 0.5;
        if let Some(n) = self.key.zcount_from_end(from_top, edge, STEP_CAP)? {
            return Ok(if from_top {
                n
            } else {
                self.len.saturating_sub(n)
            });
        }
        let older = self.ctx.zcount_through(self.name, min_exclusive)?;
        Ok(self.len.saturating_sub(older))
    }

    fn total(&mut self) -> Result<u64, Error> {
        Ok(self.len)
    }

    fn score_at_rank(&mut self, rank: u64) -> Result<f64, Error> {
        let from_top = self.len.saturating_sub(1).saturating_sub(rank);
        // The extremes are known already (the usual retry-after of a full
        // window is its oldest member).
        match self.bounds {
            Some((lowest, _)) if rank == 0 => return Ok(lowest),
            Some((_, highest)) if from_top == 0 => return Ok(highest),
            _ => {}
        }
        let (top, steps) = if from_top < rank {
            (true, from_top)
        } else {
            (false, rank)
        };
        if steps <= STEP_CAP {
            if let Some(score) = self.key.zscore_from_end(top, steps)? {
                return Ok(score);
            }
        }
        self.ctx.zscore_at_rank(self.name, rank)
    }
}

/// The next member counter. It starts at a random point per load and jumps
/// to a new random point after a clash, so names written before a restart or
/// by another primary rarely meet ours.
static NEXT_MEMBER: AtomicU64 = AtomicU64::new(0);

pub(super) fn next_member() -> u64 {
    static SEEDED: Once = Once::new();
    SEEDED.call_once(reseed);
    NEXT_MEMBER.fetch_add(1, Relaxed)
}

pub(super) fn reseed() {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(nanos);
    NEXT_MEMBER.store(h.finish(), Relaxed);
}

/// Clashes tolerated for one unit before the call gives up (and undoes its
/// additions). Each clash moves to a fresh random name, so reaching this
/// needs a set holding nearly all 1.8e14 names.
pub(super) const MAX_NAME_CLASHES: usize = 64;

/// Adds the admitted units, trims through `trim` (when given), sets the
/// expiry (unless a longer rule set holds the key), and replicates.
fn apply(
    ctx: Ctx,
    name: RString,
    key: &Key,
    plan: &Admission,
    trim: Option<i64>,
) -> Result<(), Error> {
    let mut strings = OwnedStrings::new(ctx);
    let mut added = StrVec::with_capacity(usize::try_from(plan.units).unwrap_or(0));
    for _ in 0..plan.units {
        let mut clashes = 0;
        loop {
            let member = strings.bytes(&members::name(next_member()))?;
            if key.zadd_new(plan.score as f64, member)? {
                added.push(member);
                break;
            }
            clashes += 1;
            if clashes == MAX_NAME_CLASHES {
                for &member in added.as_slice() {
                    key.zrem(member)?;
                }
                return Err(Error::Internal("could not find a free member name".into()));
            }
            reseed();
        }
    }
    if let Some(at) = plan.expire_at {
        key.set_expire_at(at)?;
    }
    ctx.propagate(Native::Zadd {
        key: name,
        score: plan.score,
        members: added.as_slice(),
    })?;
    if let Some(through) = trim {
        // Through the key API and replicated as one native command.
        if key.zrem_through(&mut strings, through as f64)? > 0 {
            ctx.propagate(Native::ZremRangeByScore {
                key: name,
                max: through,
            })?;
        }
    }
    if let Some(at) = plan.expire_at {
        ctx.propagate(Native::Pexpireat { key: name, at })?;
    }
    ctx.signal_modified(name)
}

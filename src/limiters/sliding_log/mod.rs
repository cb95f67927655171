//! The sliding-window log: `RL.CHECK key now count window [count window
//! ...] [COST cost] [REFUND | DEBIT]` and `RL.PEEK` (no `REFUND` or
//! `DEBIT`, `COST 0` allowed; writes nothing). A debit writes as an
//! admission does, without a decision. The pure decision is [`window`], the
//! arguments [`args`]; this file reads and writes the key.
//!
//! Reads, per distinct window (counted once per call: RL.ALL's `DETAILS`
//! reuses the decision's counts): the set's lowest and highest scores answer
//! when the window's edge lies outside them; else the members are stepped
//! through from the nearer end — on a listpack all of one side, on a
//! skiplist at most [`STEP_CAP`](super::sorted_set::STEP_CAP) — else
//! `ZCOUNT` counts by rank (O(log N) on a skiplist). The k-th member a retry-after needs is found the same way
//! (`ZRANGE` by rank past the cap). Writes (admitted RL.CHECK only):
//! `cost` new members scored `now`; when the key's expiry must move (on its
//! grid, SPEC "Expiries on a grid" — about once an eighth of the longest
//! window on a busy key), members older than the longest window removed and
//! the new absolute expiry. Replicated as `ZADD`, then `ZREMRANGEBYSCORE`
//! (when something was removed) and `PEXPIREAT` when the expiry moved: most
//! calls on a busy key replicate one `ZADD`.

pub mod args;
pub mod window;

use self::args::{parse_check, CheckArgs};
use self::window::{admission, decide, refund_units, Admission};
use super::limiter::{Limiter, Phase, Request, RuleReplies, Verdict};
use super::sorted_set::{next_member, reseed, Counted, Extremes, RedisLog, MAX_NAME_CLASHES};
use crate::core::args::Clock;
use crate::core::members;
use crate::error::Error;
use crate::redis_api::{bytes, Ctx, Key, Kind, Native, OwnedStrings, RString, StrVec};

/// A sliding-window log read from its key: the set's size and extremes.
pub struct SlidingLog {
    ctx: Ctx,
    name: RString,
    key: Key,
    args: CheckArgs,
    extremes: Extremes,
    /// What the views counted over the set as read (`extremes`).
    counted: Counted,
    server_time: i64,
    t: i64,
    verdict: Verdict,
}

impl SlidingLog {
    /// The key as the decision core sees it, over what [`Limiter::read`]
    /// found.
    fn view(&self) -> RedisLog<'_> {
        RedisLog::new(self.ctx, self.name, &self.key, self.extremes).remembering(&self.counted)
    }

    /// Reads the size and extremes again (after a write), forgetting the
    /// counts made before it.
    fn reread(&mut self) -> Result<(), Error> {
        self.counted.clear();
        self.extremes = Extremes::read(self.name, &self.key)?;
        Ok(())
    }

    fn newest(&self) -> Option<f64> {
        self.extremes.newest()
    }

    /// The state now: RL.PEEK with `COST 0`.
    fn state_now(&mut self) -> Result<[i64; 6], Error> {
        let (rules, t, newest) = (&self.args.rules, self.t, self.newest());
        Ok(decide(rules, 0, t, newest, &mut self.view())?.reply())
    }

    /// The writes of an admission or a debit: `cost` members scored `t`,
    /// and when the expiry moves (on its grid) the trim and the new expiry.
    fn record(&self) -> Result<(), Error> {
        self.counted.clear();
        let plan = admission(
            &self.args.rules,
            self.args.cost,
            self.t,
            self.newest(),
            self.server_time,
            self.key.expire_at()?,
            bytes(self.name),
        );
        let trim = plan.trim_through.filter(|&through| {
            self.extremes
                .bounds
                .is_some_and(|(lowest, _)| lowest <= through as f64)
        });
        apply(self.ctx, self.name, &self.key, &plan, trim)
    }
}

impl Limiter for SlidingLog {
    type Args<'a> = CheckArgs;
    const KIND: Kind = Kind::SortedSet;

    fn parse(args: &[&[u8]], write: bool, clock: &Clock) -> Result<CheckArgs, Error> {
        parse_check(args, write, clock)
    }

    fn request(args: &CheckArgs) -> Request {
        Request::of(args.refund, args.debit, false)
    }

    fn cost(args: &CheckArgs) -> i64 {
        args.cost
    }

    fn rules(args: &CheckArgs) -> usize {
        args.rules.len()
    }

    /// Reads the set's size and extremes; a score that is not finite or
    /// outside `±(2^53-1)` is an error in a stored value.
    fn read(
        ctx: Ctx,
        name: RString,
        key: Key,
        args: CheckArgs,
        clock: &Clock,
    ) -> Result<Self, Error> {
        let extremes = Extremes::read(name, &key)?;
        Ok(SlidingLog {
            ctx,
            name,
            key,
            server_time: clock.server_time,
            t: clock.resolve(args.now),
            args,
            extremes,
            counted: Counted::default(),
            verdict: Verdict {
                reply: [0; 6],
                admitted: false,
            },
        })
    }

    fn decide(&mut self) -> Result<Verdict, Error> {
        let (rules, cost, t, newest) = (&self.args.rules, self.args.cost, self.t, self.newest());
        let d = decide(rules, cost, t, newest, &mut self.view())?;
        self.verdict = Verdict {
            reply: d.reply(),
            admitted: !d.limited,
        };
        Ok(self.verdict)
    }

    fn commit(&mut self) -> Result<[i64; 6], Error> {
        self.record()?;
        Ok(self.verdict.reply)
    }

    /// Removes up to `cost` of the newest members scored at most `now`
    /// (`ZREM`; the key goes with its last member, as `ZREM` does).
    fn refund(&mut self) -> Result<[i64; 6], Error> {
        let (ctx, name) = (self.ctx, self.name);
        let n = {
            let (rules, cost, t, newest) =
                (&self.args.rules, self.args.cost, self.t, self.newest());
            refund_units(rules, cost, t, newest, &mut self.view())?
        };
        if n > 0 {
            let mut strings = OwnedStrings::new(ctx);
            let removed = self.key.zrem_top(&mut strings, n)?;
            ctx.propagate(Native::Zrem {
                key: name,
                members: &removed,
            })?;
            if self.key.kind()? == Kind::Empty {
                // The last member went: Redis removed the key, as ZREM does.
                ctx.notify_del(name)?;
            }
            ctx.signal_modified(name)?;
            self.reread()?;
        }
        self.state_now()
    }

    fn debit(&mut self) -> Result<[i64; 6], Error> {
        self.record()?;
        self.reread()?;
        self.state_now()
    }

    /// Each rule alone over the set as read (before any write). Admitted:
    /// at the clause's cost, which answers what the rule's `COST 0` peek
    /// answers after the admission's writes — its `cost` members scored
    /// `t` lie in every window and leave the newest score at `max(newest,
    /// t)`, and its trim removes only members no window counts (so no
    /// second read of the set).
    fn details(&mut self, phase: Phase) -> Result<RuleReplies, Error> {
        let cost = match phase {
            Phase::Admitted | Phase::Rejected => self.args.cost,
            Phase::Refunded => 0,
        };
        let (t, newest) = (self.t, self.newest());
        let mut out = RuleReplies::new();
        for (i, rule) in self.args.rules.iter().enumerate() {
            let mut reply = decide(
                std::slice::from_ref(rule),
                cost,
                t,
                newest,
                &mut self.view(),
            )?
            .reply();
            reply[1] = i as i64 + 1;
            out.push(reply);
        }
        Ok(out)
    }
}

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
        marked: &[],
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

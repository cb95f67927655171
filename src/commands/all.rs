//! `RL.ALL numkeys key [key ...] now clause [clause ...] [REFUND]` and
//! `RL.ALLPEEK` (no `REFUND`, `COST 0` allowed, a `LEASE` clause's `TOKEN`
//! optional; writes nothing): one all-or-nothing decision over several keys,
//! each key under one clause (`CHECK`, `THROTTLE`, `QUOTA` or `LEASE`).
//!
//! The run, in the contract's error order: every argument checked (keys,
//! `now`, each clause by its own command's parser, the cap over all
//! clauses); then every key's type, in key order (`WRONGTYPE`); then every
//! clause read and decided, in key order, without writing (errors in stored
//! values) — each by its own command's code, so each decides exactly as its
//! command does. Only when every clause admits are the writes done, one key
//! after the other, as each command writes and replicates them (Redis wraps
//! the call's replicated commands in one `MULTI`/`EXEC`). A `THROTTLE` or
//! `QUOTA` or `CHECK` clause keeps what it read and commits its decision
//! (`throttle::Decided`, `quota::Decided`, `check::Decided`: the same read,
//! decide and write steps RL.THROTTLE, RL.QUOTA and RL.CHECK run); a
//! `LEASE` clause is decided by its command's read-only path and written by
//! its writing path, which reads and decides again — keys are pairwise
//! distinct, so a write to one key cannot change another clause's
//! decision, and it decides exactly as it did.
//! `REFUND` refunds every clause as its command's `REFUND` does (a `LEASE`
//! clause: RL.RELEASE of its token), after the same checks.

use super::{check, lease, quota, throttle, KeyedCall, Outcome};
use crate::core::all::{self as plan, ClauseReply, Kind};
use crate::core::args::{parse_check, parse_now, parse_quota, parse_throttle, Clock};
use crate::core::calendar;
use crate::core::lease_args::parse_lease_clause;
use crate::error::Error;
use crate::redis_api::{self, bytes, CallContext, Ctx, Key, RString};

pub fn all(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    run(ctx, args, true)
}

pub fn all_peek(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    run(ctx, args, false)
}

/// What a call does with its clauses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// RL.ALL: admit and record in every clause, or nothing.
    Admit,
    /// RL.ALL ... REFUND.
    Refund,
    /// RL.ALLPEEK.
    Peek,
}

/// One limiter over one key, checked: the unit RL.ALL runs over many.
struct Clause<'a> {
    /// 1-based position among the clauses (the reply's `clause`).
    n: usize,
    kind: Kind,
    key: RString,
    /// The arguments of its command after the key: `now` first.
    args: Vec<&'a [u8]>,
    cost: i64,
    /// Rules it adds to the cap (a QUOTA period and a LEASE clause: one).
    rules: usize,
    /// A LEASE clause's limit, ttl and token (its peek and refund are not
    /// RL.LEASEPEEK's and RL.LEASE's argument shapes).
    lease: Option<(i64, i64, Option<&'a [u8]>)>,
}

/// A clause's argument error names the clause.
fn in_clause(n: usize, kind: Kind) -> impl Fn(Error) -> Error {
    move |e| match e {
        Error::Arg(m) => Error::Arg(format!("clause {n} ({}): {m}", kind.name())),
        other => other,
    }
}

fn not_an_option(n: usize, kind: Kind, option: &str) -> Error {
    Error::Arg(format!(
        "clause {n} ({}): {option} is not an option of a clause{}",
        kind.name(),
        if option == "REFUND" {
            " (REFUND may only be the last argument of RL.ALL)"
        } else {
            ""
        }
    ))
}

impl<'a> Clause<'a> {
    /// Checks a clause's arguments with its command's parser, as RL.ALL's
    /// mode asks (`REFUND`: the command's refund bounds for `COST`).
    fn parse(
        n: usize,
        kind: Kind,
        key: RString,
        now_arg: &'a [u8],
        clause_args: &[&'a [u8]],
        mode: Mode,
        clock: &Clock,
    ) -> Result<Clause<'a>, Error> {
        let mut args = Vec::with_capacity(clause_args.len() + 2);
        args.push(now_arg);
        args.extend_from_slice(clause_args);
        let write = mode != Mode::Peek;
        let mut parse_args = args.clone();
        if mode == Mode::Refund && kind != Kind::Lease {
            parse_args.push(b"REFUND");
        }
        let named = in_clause(n, kind);
        let (cost, rules, lease) = match kind {
            Kind::Check => {
                let p = parse_check(&parse_args, write, clock).map_err(&named)?;
                if p.debit {
                    return Err(not_an_option(n, kind, "DEBIT"));
                }
                if mode == Mode::Admit && p.refund {
                    return Err(not_an_option(n, kind, "REFUND"));
                }
                (p.cost, p.rules.len(), None)
            }
            Kind::Throttle => {
                let p = parse_throttle(&parse_args, write, clock).map_err(&named)?;
                if p.debit {
                    return Err(not_an_option(n, kind, "DEBIT"));
                }
                if p.reserve.is_some() {
                    return Err(not_an_option(n, kind, "RESERVE"));
                }
                if mode == Mode::Admit && p.refund {
                    return Err(not_an_option(n, kind, "REFUND"));
                }
                (p.cost, p.rules.len(), None)
            }
            Kind::Quota => {
                let p = parse_quota(&parse_args, write, clock).map_err(&named)?;
                if p.debit {
                    return Err(not_an_option(n, kind, "DEBIT"));
                }
                if mode == Mode::Admit && p.refund {
                    return Err(not_an_option(n, kind, "REFUND"));
                }
                // As RL.QUOTA: a `now` past year 9999 in the zone is an
                // argument error.
                let t = clock.resolve(p.now);
                for &(period, _) in &p.periods {
                    calendar::bucket(&p.zone, period, t).map_err(&named)?;
                }
                (p.cost, p.periods.len(), None)
            }
            Kind::Lease => {
                let min_cost = i64::from(write);
                let p = parse_lease_clause(&args, min_cost, clock).map_err(&named)?;
                if write && p.token.is_none() {
                    return Err(Error::Arg(format!(
                        "clause {n} (LEASE): TOKEN is required in a LEASE clause of RL.ALL"
                    )));
                }
                (p.cost, 1, Some((p.limit, p.ttl, p.token)))
            }
        };
        Ok(Clause {
            n,
            kind,
            key,
            args,
            cost,
            rules,
            lease,
        })
    }

    fn redis_kind(&self) -> redis_api::Kind {
        match self.kind {
            Kind::Check | Kind::Lease => redis_api::Kind::SortedSet,
            Kind::Throttle | Kind::Quota => redis_api::Kind::Hash,
        }
    }

    fn call(&self, args: Vec<&'a [u8]>, base: &Base) -> KeyedCall<'a> {
        KeyedCall {
            key: self.key,
            args: args.into(),
            clock: base.clock,
            context: base.context,
        }
    }

    /// What the clause's command would answer with `cost`, writing nothing.
    fn peek(&self, ctx: Ctx, base: &Base, cost: i64) -> Result<[i64; 6], Error> {
        if let Some((limit, ttl, token)) = self.lease {
            return lease::peek_clause(ctx, self.key, base.t, limit, ttl, cost, token);
        }
        let args = if cost == self.cost {
            self.args.clone()
        } else {
            with_cost_zero(&self.args)
        };
        self.run_command(ctx, self.call(args, base), false)
    }

    /// Reads the clause's key and decides, writing nothing: its reply, and
    /// what its writes need. A `CHECK`, `THROTTLE` or `QUOTA` clause keeps
    /// its key open with what it read (its command's read and decision,
    /// committed later without a second read); a `LEASE` clause answers by
    /// its command's read-only path and is written by its writing path,
    /// which reads and decides again on the same state.
    fn decide(&self, ctx: Ctx, base: &Base, write: bool) -> Result<(Pending, [i64; 6]), Error> {
        let call = || self.call(self.args.clone(), base);
        match self.kind {
            Kind::Throttle => {
                let d = throttle::decide_call(ctx, &call(), write)?;
                let reply = d.reply;
                Ok((Pending::Throttle(d), reply))
            }
            Kind::Quota => {
                let d = quota::decide_call(ctx, &call(), write)?;
                let reply = d.reply;
                Ok((Pending::Quota(d), reply))
            }
            Kind::Check => {
                let d = check::decide_call(ctx, &call(), write)?;
                let reply = d.reply;
                Ok((Pending::Check(d), reply))
            }
            Kind::Lease => Ok((Pending::Again, self.peek(ctx, base, self.cost)?)),
        }
    }

    /// Admits and records, as the clause's command does; its reply.
    fn apply(&self, ctx: Ctx, base: &Base, pending: Pending) -> Result<Option<[i64; 6]>, Error> {
        match pending {
            Pending::Throttle(d) => d.commit().map(|()| None),
            Pending::Quota(d) => d.commit().map(|()| None),
            Pending::Check(d) => d.commit().map(|()| None),
            Pending::Again => self
                .run_command(ctx, self.call(self.args.clone(), base), true)
                .map(Some),
        }
    }

    /// Refunds as the clause's command's `REFUND` does (a LEASE clause:
    /// RL.RELEASE of its token); the state now (its peek with `COST 0`).
    fn refund(&self, ctx: Ctx, base: &Base) -> Result<[i64; 6], Error> {
        if let Some((_, _, token)) = self.lease {
            if let (Some(token), Some(&now)) = (token, self.args.first()) {
                let call = self.call(vec![now, token], base);
                lease::release_call(ctx, &call)?;
            }
            return self.peek(ctx, base, 0);
        }
        let mut args = self.args.clone();
        args.push(b"REFUND");
        self.run_command(ctx, self.call(args, base), true)
    }

    /// The clause's own command on its key (`write`: RL.CHECK, RL.THROTTLE,
    /// RL.QUOTA, RL.LEASE; else their peeks); the six integers it answers.
    fn run_command(&self, ctx: Ctx, call: KeyedCall, write: bool) -> Result<[i64; 6], Error> {
        let outcome = match self.kind {
            Kind::Check => check::evaluate_call(ctx, &call, write)?,
            Kind::Throttle => throttle::evaluate_call(ctx, &call, write)?,
            Kind::Quota => quota::evaluate_call(ctx, &call, write)?,
            Kind::Lease => lease::evaluate_call(ctx, &call, write)?,
        };
        Ok(outcome.six())
    }
}

/// The clause's arguments with `COST 0` (its option's value replaced, or
/// the option added): its peek's state now. Only called on arguments its
/// parser accepted, where the first `COST` word after `now` is the option
/// (counts, windows, zones and periods are never `COST`).
fn with_cost_zero<'a>(args: &[&'a [u8]]) -> Vec<&'a [u8]> {
    let value: &'static [u8] = b"0";
    let mut out = Vec::with_capacity(args.len() + 2);
    let mut i = 0;
    let mut replaced = false;
    while let Some(&word) = args.get(i) {
        out.push(word);
        i += 1;
        if !replaced && i > 1 && word.eq_ignore_ascii_case(b"COST") {
            out.push(value);
            i += 1;
            replaced = true;
        }
    }
    if !replaced {
        out.push(b"COST");
        out.push(value);
    }
    out
}

/// A clause decided and not yet written.
enum Pending {
    Check(check::Decided),
    Throttle(throttle::Decided),
    Quota(quota::Decided),
    /// Written by its command's writing path (LEASE).
    Again,
}

/// What every clause of a call shares: the clock, `t`, the call's context.
struct Base {
    clock: Clock,
    context: CallContext,
    t: i64,
}

fn run(ctx: Ctx, args: &[RString], write: bool) -> Result<Outcome, Error> {
    let context = CallContext::read(ctx)?;
    let clock = Clock {
        server_time: context.server_time,
        max_future_ms: crate::config::MAX_FUTURE_MS.load(std::sync::atomic::Ordering::Relaxed),
        max_past_ms: crate::config::MAX_PAST_MS.load(std::sync::atomic::Ordering::Relaxed),
    };
    let key_args = args.get(2..).unwrap_or(&[]);
    let words: Vec<&[u8]> = args
        .get(1..)
        .unwrap_or(&[])
        .iter()
        .map(|&s| bytes(s))
        .collect();

    // numkeys, the keys (distinct), now.
    let numkeys = plan::parse_keys(&words)?;
    let keys = key_args.get(..numkeys).unwrap_or(&[]);
    let rest = words.get(1 + numkeys..).unwrap_or(&[]);
    let Some((&now_arg, clause_words)) = rest.split_first() else {
        return Err(Error::Arg("missing now".into()));
    };
    let now = parse_now(now_arg, &clock)?;
    let base = Base {
        clock,
        context,
        t: clock.resolve(now),
    };

    // The clauses, left to right; the cap as soon as it is passed; then
    // the keys no clause named.
    let (spans, refund) = plan::split_clauses(clause_words, write)?;
    let mode = match (write, refund) {
        (false, _) => Mode::Peek,
        (true, false) => Mode::Admit,
        (true, true) => Mode::Refund,
    };
    let mut used = vec![false; numkeys];
    let mut clauses: Vec<(usize, Clause)> = Vec::with_capacity(spans.len());
    let mut rules = 0;
    for (i, span) in spans.iter().enumerate() {
        let n = i + 1;
        let k = plan::clause_key(span.index, n, numkeys, &mut used)?;
        let key = *keys
            .get(k)
            .ok_or_else(|| Error::Internal("key index out of range".into()))?;
        let clause = Clause::parse(n, span.kind, key, now_arg, &span.args, mode, &clock)?;
        rules += clause.rules;
        plan::check_rule_cap(rules)?;
        clauses.push((k, clause));
    }
    plan::check_all_used(&used)?;
    if mode == Mode::Admit {
        base.context.refuse_if_oom()?;
    }

    // Key order from here: WRONGTYPE, then every clause read and decided
    // (errors in stored values) before the first write.
    clauses.sort_by_key(|(k, _)| *k);
    for (_, c) in &clauses {
        Key::open_as(ctx, c.key, false, c.redis_kind())?;
    }
    let first_cost = |c: &Clause| if mode == Mode::Refund { 0 } else { c.cost };
    let mut replies = vec![
        ClauseReply {
            ints: [0; 6],
            cost: 0
        };
        clauses.len()
    ];
    let mut pending: Vec<Pending> = Vec::with_capacity(clauses.len());
    for (_, c) in &clauses {
        let cost = first_cost(c);
        let (p, ints) = if mode == Mode::Refund {
            (Pending::Again, c.peek(ctx, &base, 0)?)
        } else {
            c.decide(ctx, &base, mode == Mode::Admit)?
        };
        pending.push(p);
        if let Some(r) = replies.get_mut(c.n - 1) {
            *r = ClauseReply { ints, cost };
        }
    }
    let admitted = replies.iter().all(|r| r.ints[0] == 0);
    match mode {
        Mode::Peek => Ok(Outcome::new(&plan::reply(&replies), admitted)),
        Mode::Admit if !admitted => Ok(Outcome::new(&plan::reply(&replies), false)),
        Mode::Admit => {
            for ((_, c), p) in clauses.iter().zip(pending) {
                if let Some(ints) = c.apply(ctx, &base, p)? {
                    if let Some(r) = replies.get_mut(c.n - 1) {
                        r.ints = ints;
                    }
                }
            }
            Ok(Outcome::new(&plan::reply(&replies), true))
        }
        Mode::Refund => {
            for (_, c) in &clauses {
                let ints = c.refund(ctx, &base)?;
                if let Some(r) = replies.get_mut(c.n - 1) {
                    *r = ClauseReply { ints, cost: 0 };
                }
            }
            Ok(Outcome::refund(&plan::reply(&replies)))
        }
    }
}

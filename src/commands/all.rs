//! `RL.ALL numkeys key [key ...] now clause [clause ...] [REFUND] [DETAILS]`
//! and `RL.ALLPEEK` (no `REFUND`, `COST 0` allowed, a `LEASE` clause's
//! `TOKEN` optional; writes nothing): one all-or-nothing decision over
//! several keys, each key under one clause (`CHECK`, `THROTTLE`, `QUOTA` or
//! `LEASE`). `DETAILS` adds every rule's own state to the reply, each
//! limiter reporting its rules ([`Phase`]) once the call has decided (and
//! written).
//!
//! The runner over many limiters (`crate::limiters`, through
//! [`AnyLimiter`]): the same steps `super::runner` runs over one. In the
//! contract's error order: every argument checked (keys, `now`, each clause
//! by its limiter's parser, the cap over all clauses); then every key's
//! type, in key order (`WRONGTYPE`); then every clause read and decided, in
//! key order, without writing (errors in stored values) — each by its own
//! limiter, so each decides exactly as its command does. Only when every
//! clause admits are the writes done, one key after the other, as each
//! command writes and replicates them (Redis wraps the call's replicated
//! commands in one `MULTI`/`EXEC`). Keys are pairwise distinct, so a write
//! to one key cannot change another clause's decision. `REFUND` reads
//! every clause, then refunds each as its command's `REFUND` does (a
//! `LEASE` clause: RL.RELEASE of its token).

use smallvec::{smallvec, SmallVec};

use super::outcome::Outcome;
use crate::core::all::{self as plan, ClauseReply, Kind, Tail};
use crate::core::args::{parse_now, Clock};
use crate::error::Error;
use crate::limiters::{AnyArgs, AnyLimiter, Mode, Phase, Request, RuleReplies};
use crate::redis_api::{bytes, CallContext, Ctx, Key, RString};

pub fn all(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    run(ctx, args, true)
}

pub fn all_peek(ctx: Ctx, args: &[RString]) -> Result<Outcome, Error> {
    run(ctx, args, false)
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
        "clause {n} ({}): {option} is not an option of a clause",
        kind.name()
    ))
}

/// A `REFUND` or `DETAILS` that does not end the call.
fn misplaced(n: usize, kind: Kind, tail: Tail) -> Error {
    Error::Arg(format!(
        "clause {n} ({}): {} is not an option of a clause ({})",
        kind.name(),
        tail.name(),
        tail.rule()
    ))
}

/// One limiter over one key, checked: the unit RL.ALL runs over many.
struct Clause<'a> {
    /// 1-based position among the clauses (the reply's `clause`).
    n: usize,
    key: RString,
    args: AnyArgs<'a>,
}

impl<'a> Clause<'a> {
    /// Checks a clause's arguments (`now` first) with its limiter's parser,
    /// as RL.ALL's mode asks, and refuses the options a clause cannot take.
    /// A `REFUND` or `DETAILS` among them (`misplaced`: where the first one
    /// stands after `now`, and the word to name) is the error, once the
    /// arguments before it pass.
    fn parse(
        n: usize,
        kind: Kind,
        key: RString,
        args: &[&'a [u8]],
        misplaced_at: Option<(usize, Tail)>,
        mode: Mode,
        clock: &Clock,
    ) -> Result<Clause<'a>, Error> {
        if let Some((at, tail)) = misplaced_at {
            let as_written = if mode == Mode::Peek {
                Mode::Peek
            } else {
                Mode::Admit
            };
            let before = args.get(..1 + at).unwrap_or(args);
            let written = AnyArgs::parse_clause(kind, before, as_written, clock)
                .map_err(in_clause(n, kind))?;
            refuse_clause_options(n, kind, written.request(), as_written)?;
            return Err(misplaced(n, kind, tail));
        }
        if mode == Mode::Refund {
            // The clause as written, without the call's `REFUND`: an option
            // a clause cannot take comes before that `REFUND`, so it is the
            // first bad argument (not a clash with it). Where the clause
            // does not parse so, the refund's own parse reports.
            if let Ok(written) = AnyArgs::parse_clause(kind, args, Mode::Admit, clock) {
                refuse_clause_options(n, kind, written.request(), Mode::Admit)?;
            }
        }
        let args = AnyArgs::parse_clause(kind, args, mode, clock).map_err(in_clause(n, kind))?;
        refuse_clause_options(n, kind, args.request(), mode)?;
        Ok(Clause { n, key, args })
    }
}

/// `DEBIT` and `RESERVE` are no clause's options, nor `REFUND` (only the
/// last argument of RL.ALL, which `mode` then is).
fn refuse_clause_options(n: usize, kind: Kind, request: Request, mode: Mode) -> Result<(), Error> {
    match request {
        Request::Debit => Err(not_an_option(n, kind, "DEBIT")),
        Request::Reserve => Err(not_an_option(n, kind, "RESERVE")),
        Request::Refund if mode == Mode::Admit => Err(misplaced(n, kind, Tail::Refund)),
        _ => Ok(()),
    }
}

fn run(ctx: Ctx, args: &[RString], write: bool) -> Result<Outcome, Error> {
    let context = CallContext::read(ctx)?;
    let clock = Clock {
        server_time: context.server_time,
        max_future_ms: crate::config::MAX_FUTURE_MS.load(std::sync::atomic::Ordering::Relaxed),
        max_past_ms: crate::config::MAX_PAST_MS.load(std::sync::atomic::Ordering::Relaxed),
    };
    let key_args = args.get(2..).unwrap_or(&[]);
    let words: SmallVec<[&[u8]; 32]> = args
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
    // A wrong `numkeys` shows as a bad `now` (a key or a clause word in
    // its place): the error says where `now` was looked for.
    parse_now(now_arg, &clock).map_err(|e| match e {
        Error::Arg(m) => Error::Arg(format!(
            "{m} (now is the argument after the {numkeys} key{} numkeys counts)",
            if numkeys == 1 { "" } else { "s" }
        )),
        other => other,
    })?;

    // The clauses, left to right; the cap as soon as it is passed; then
    // the keys no clause named.
    let (spans, ending) = plan::split_clauses(clause_words, write)?;
    let mode = match (write, ending.refund) {
        (false, _) => Mode::Peek,
        (true, false) => Mode::Admit,
        (true, true) => Mode::Refund,
    };
    let mut used: SmallVec<[bool; 8]> = smallvec![false; numkeys];
    let mut clauses: SmallVec<[(usize, Clause); 4]> = SmallVec::with_capacity(spans.len());
    let mut rules = 0;
    let mut clause_args: SmallVec<[&[u8]; 24]> = SmallVec::new();
    for (i, span) in spans.iter().enumerate() {
        let n = i + 1;
        let k = plan::clause_key(span.index, n, numkeys, &mut used)?;
        let key = *keys
            .get(k)
            .ok_or_else(|| Error::Internal("key index out of range".into()))?;
        // The clause's command's arguments after its key: `now` first.
        clause_args.clear();
        clause_args.push(now_arg);
        clause_args.extend_from_slice(span.args);
        let clause = Clause::parse(
            n,
            span.kind,
            key,
            &clause_args,
            span.misplaced,
            mode,
            &clock,
        )?;
        rules += clause.args.rules();
        plan::check_rule_cap(rules)?;
        clauses.push((k, clause));
    }
    plan::check_all_used(&used)?;
    if mode == Mode::Admit {
        context.refuse_if_oom()?;
    }

    // Key order from here: every key opened as its limiter keeps it
    // (WRONGTYPE), then every clause read and decided (errors in stored
    // values) before the first write.
    clauses.sort_by_key(|(k, _)| *k);
    let mut opened: SmallVec<[(Clause, Key); 4]> = SmallVec::with_capacity(clauses.len());
    for (_, c) in clauses {
        let key = Key::open_as(ctx, c.key, write, c.args.redis_kind())?;
        opened.push((c, key));
    }
    let mut replies: SmallVec<[ClauseReply; 4]> = smallvec![
        ClauseReply {
            ints: [0; 6],
            cost: 0
        };
        opened.len()
    ];
    let mut read: SmallVec<[(usize, AnyLimiter); 4]> = SmallVec::with_capacity(opened.len());
    for (c, key) in opened {
        let cost = if mode == Mode::Refund {
            0
        } else {
            c.args.cost()
        };
        let mut limiter = c.args.read(ctx, c.key, key, &clock)?;
        if mode != Mode::Refund {
            let ints = limiter.decide()?.reply;
            if let Some(r) = replies.get_mut(c.n - 1) {
                *r = ClauseReply { ints, cost };
            }
        }
        read.push((c.n, limiter));
    }
    let admitted = replies.iter().all(|r| r.ints[0] == 0);
    let details = ending.details;
    match mode {
        Mode::Peek => {
            let outcome = Outcome::new(&plan::reply(&replies), admitted);
            let phase = if admitted {
                Phase::Admitted
            } else {
                Phase::Rejected
            };
            with_details(outcome, details, &mut read, phase)
        }
        Mode::Admit if !admitted => {
            let outcome = Outcome::new(&plan::reply(&replies), false);
            with_details(outcome, details, &mut read, Phase::Rejected)
        }
        Mode::Admit => {
            // Before the writes: each limiter computes its rules' state
            // after them from what it read.
            let rules = rule_details(details, &mut read, Phase::Admitted)?;
            for (n, limiter) in read.iter_mut() {
                let ints = limiter.commit()?;
                if let Some(r) = replies.get_mut(*n - 1) {
                    r.ints = ints;
                }
            }
            Ok(Outcome::new(&plan::reply(&replies), true).with_details(rules))
        }
        Mode::Refund => {
            for (n, limiter) in read.iter_mut() {
                let ints = limiter.refund()?;
                if let Some(r) = replies.get_mut(*n - 1) {
                    *r = ClauseReply { ints, cost: 0 };
                }
            }
            let outcome = Outcome::refund(&plan::reply(&replies));
            with_details(outcome, details, &mut read, Phase::Refunded)
        }
    }
}

/// The reply, with every clause's rules after the seven integers when the
/// call ends with `DETAILS`.
fn with_details(
    outcome: Outcome,
    details: bool,
    read: &mut [(usize, AnyLimiter)],
    phase: Phase,
) -> Result<Outcome, Error> {
    Ok(outcome.with_details(rule_details(details, read, phase)?))
}

/// With `DETAILS`, every clause's rules as [`Phase`] says, each limiter
/// reporting its own, placed in clause order (`read` is in key order, each
/// with its clause's number); without, nothing (no allocation).
fn rule_details(
    details: bool,
    read: &mut [(usize, AnyLimiter)],
    phase: Phase,
) -> Result<Vec<RuleReplies>, Error> {
    if !details {
        return Ok(Vec::new());
    }
    let mut clauses: Vec<RuleReplies> = (0..read.len()).map(|_| RuleReplies::new()).collect();
    for (n, limiter) in read.iter_mut() {
        let slot = clauses
            .get_mut(*n - 1)
            .ok_or_else(|| Error::Internal("clause number out of range".into()))?;
        *slot = limiter.details(phase)?;
    }
    Ok(clauses)
}

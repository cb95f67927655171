//! The interface every limiter implements, and what it answers.

use smallvec::SmallVec;

use crate::core::args::Clock;
use crate::error::Error;
use crate::redis_api::{self, Ctx, Key, RString};

/// What a call asks of a limiter, from its options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Admit and record when the rules allow (the peeks: decide only).
    Admit,
    /// Admit when the units are due within a wait (RL.THROTTLE `RESERVE`).
    Reserve,
    /// Take back units (`REFUND`).
    Refund,
    /// Record whatever the rules say (`DEBIT`).
    Debit,
}

impl Request {
    /// From a parser's options (at most one of them is set: the parsers
    /// refuse a second).
    pub fn of(refund: bool, debit: bool, reserve: bool) -> Request {
        if refund {
            Request::Refund
        } else if debit {
            Request::Debit
        } else if reserve {
            Request::Reserve
        } else {
            Request::Admit
        }
    }
}

/// What RL.ALL does with its clauses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// RL.ALL: admit and record in every clause, or nothing.
    Admit,
    /// RL.ALL ... REFUND.
    Refund,
    /// RL.ALLPEEK.
    Peek,
}

/// Which state RL.ALL's `DETAILS` reports for each rule of a clause (SPEC
/// "RL.ALL", `DETAILS`): each rule alone, as the clause's command or peek
/// given only that rule answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The call admits: each rule's `COST 0` peek right after the call's
    /// writes (in RL.ALLPEEK: after the writes RL.ALL would make); a lease:
    /// RL.LEASE's reply.
    Admitted,
    /// The call refuses: each rule's peek at the clause's cost (a lease:
    /// RL.LEASEPEEK's), nothing written.
    Rejected,
    /// After the call's `REFUND`: each rule's `COST 0` peek.
    Refunded,
}

/// One six-integer array per rule, in the clause's order: on the stack for
/// the usual one or two rules.
pub type RuleReplies = SmallVec<[[i64; 6]; 2]>;

/// A decision not yet written: the reply's six integers and whether it
/// admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub reply: [i64; 6],
    pub admitted: bool,
}

/// One rate-limit algorithm over one key. A call parses ([`Limiter::parse`]
/// or, in RL.ALL, [`Limiter::parse_clause`]), the runner applies the memory
/// rule and opens the key as [`Limiter::KIND`] (`WRONGTYPE`), then
/// [`Limiter::read`] reads the state (errors in stored values), and one of: [`Limiter::decide`] then,
/// for an admission that writes, [`Limiter::commit`]; [`Limiter::refund`];
/// [`Limiter::debit`]. Nothing is written before `commit`, `refund` or
/// `debit`, so RL.ALL can decide every clause before it writes any.
pub trait Limiter: Sized {
    /// The checked arguments after the key (`now` first); a lease's token
    /// borrows the call's words.
    type Args<'a>;
    /// The Redis type its key holds.
    const KIND: redis_api::Kind;

    /// The arguments of its command (`write`) or of its peek.
    fn parse<'a>(args: &[&'a [u8]], write: bool, clock: &Clock) -> Result<Self::Args<'a>, Error>;

    /// The arguments of an RL.ALL clause (`now` first, then the clause's
    /// words): its command's parser, with `REFUND` added when RL.ALL
    /// refunds. The caller refuses the options a clause cannot take
    /// ([`Limiter::request`]).
    fn parse_clause<'a>(
        args: &[&'a [u8]],
        mode: Mode,
        clock: &Clock,
    ) -> Result<Self::Args<'a>, Error> {
        if mode != Mode::Refund {
            return Self::parse(args, mode == Mode::Admit, clock);
        }
        let mut words: SmallVec<[&'a [u8]; 24]> = args.iter().copied().collect();
        words.push(b"REFUND");
        Self::parse(&words, true, clock)
    }

    fn request(args: &Self::Args<'_>) -> Request;
    fn cost(args: &Self::Args<'_>) -> i64;
    /// Rules it adds to RL.ALL's cap (a QUOTA period and a lease: one).
    fn rules(args: &Self::Args<'_>) -> usize;

    /// Reads what the decision needs from the key `name`, open as
    /// [`Limiter::KIND`] (for writing when the call writes); errors in
    /// stored values.
    fn read(
        ctx: Ctx,
        name: RString,
        key: Key,
        args: Self::Args<'_>,
        clock: &Clock,
    ) -> Result<Self, Error>;

    /// The admission decision at the call's cost, nothing written.
    fn decide(&mut self) -> Result<Verdict, Error>;

    /// Writes and replicates the admission [`Limiter::decide`] made; the
    /// reply after it.
    fn commit(&mut self) -> Result<[i64; 6], Error>;

    /// A writing command's admission: decided and, when admitted, written
    /// (the reply after the writes). RL.ALL decides every clause before it
    /// writes any, so it calls [`Limiter::decide`] and
    /// [`Limiter::commit`]; a single command may take this shortcut, which
    /// a limiter can fuse where a write also answers a read (a lease's new
    /// token: adding its unit finds whether it was held).
    fn admit(&mut self) -> Result<Verdict, Error> {
        let verdict = self.decide()?;
        if !verdict.admitted {
            return Ok(verdict);
        }
        Ok(Verdict {
            reply: self.commit()?,
            admitted: true,
        })
    }

    /// Takes back `cost` units, writes and replicates that; the state now
    /// (its peek with `COST 0`).
    fn refund(&mut self) -> Result<[i64; 6], Error>;

    /// Records `cost` units whatever the rules say (SPEC "Debits"); the
    /// state now.
    fn debit(&mut self) -> Result<[i64; 6], Error>;

    /// RL.ALL's `DETAILS`: each rule alone, in the order the call gives
    /// them, `rule` its 1-based index. Called after [`Limiter::decide`]
    /// and before any write (`Admitted`, `Rejected`: the state after an
    /// admission's writes is computed, not read back), or after
    /// [`Limiter::refund`] (`Refunded`).
    fn details(&mut self, phase: Phase) -> Result<RuleReplies, Error>;

    /// RL.LEASE's seventh reply element: `Some(Some(token))` admitted,
    /// `Some(None)` (nil) refused; `None` for every other reply (six
    /// integers).
    fn token(&self) -> Option<Option<&[u8]>> {
        None
    }
}

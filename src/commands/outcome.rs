//! A call's reply and what it counts in INFO.

use std::ffi::c_int;

use crate::limiters::lease::args::MAX_TOKEN_LEN;
use crate::limiters::lease::PerToken;
use crate::limiters::RuleReplies;
use crate::redis_api::{reply_integers, reply_integers_then, reply_integers_then_groups, Ctx};
use crate::stats;

/// A successful call: the integers of the reply and whether the request was
/// admitted (for the INFO counters). Held inline, so an admitted call
/// allocates nothing for its reply; only a per-token reply (RL.RELEASE,
/// RL.RENEW) uses the heap.
pub struct Outcome {
    reply: [i64; 7],
    len: usize,
    /// One integer per token, when the reply is that (RL.RELEASE, RL.RENEW).
    per_token: PerToken,
    /// RL.LEASE's seventh element: the lease's token, or nil.
    last: Last,
    /// RL.ALL's and RL.ALLPEEK's `DETAILS`: per clause, one array per rule
    /// after the integers (empty otherwise: no allocation).
    details: Vec<RuleReplies>,
    pub(super) kind: stats::Kind,
}

/// What follows the integers of a reply.
enum Last {
    Nothing,
    Nil,
    Token([u8; MAX_TOKEN_LEN], usize),
}

impl Outcome {
    /// Up to seven integers (every decision of the module fits; RL.ALL's
    /// reply is seven).
    pub fn new(values: &[i64], admitted: bool) -> Outcome {
        let kind = if admitted {
            stats::Kind::Admitted
        } else {
            stats::Kind::Rejected
        };
        Self::of(values, kind)
    }

    /// A refund: counted as a call and a refund, not as admitted or rejected.
    pub fn refund(values: &[i64]) -> Outcome {
        Self::of(values, stats::Kind::Refund)
    }

    /// A debit: counted as a call and a debit, not as admitted or rejected.
    pub fn debit(values: &[i64]) -> Outcome {
        Self::of(values, stats::Kind::Debit)
    }

    /// RL.LEASE: six integers, then the token when admitted, nil when not.
    pub fn lease(values: &[i64], token: Option<&[u8]>) -> Outcome {
        let mut outcome = Self::new(values, token.is_some());
        outcome.last = match token {
            None => Last::Nil,
            Some(t) => {
                let mut buf = [0; MAX_TOKEN_LEN];
                let n = t.len().min(buf.len());
                buf[..n].copy_from_slice(&t[..n]);
                Last::Token(buf, n)
            }
        };
        outcome
    }

    /// RL.RELEASE / RL.RENEW: one count per token, and the units and lost
    /// tokens INFO adds up.
    pub fn per_token(counts: PerToken, lost: u64) -> Outcome {
        let units = counts.iter().map(|&n| n.max(0) as u64).sum();
        let mut outcome = Self::of(&[], stats::Kind::Tokens { units, lost });
        outcome.per_token = counts;
        outcome
    }

    fn of(values: &[i64], kind: stats::Kind) -> Outcome {
        let mut reply = [0; 7];
        let len = values.len().min(reply.len());
        reply[..len].copy_from_slice(&values[..len]);
        Outcome {
            reply,
            len,
            per_token: PerToken::new(),
            last: Last::Nothing,
            details: Vec::new(),
            kind,
        }
    }

    /// RL.ALL / RL.ALLPEEK with `DETAILS`: the integers, then per clause
    /// an array of its rules' six-integer arrays.
    pub fn with_details(mut self, details: Vec<RuleReplies>) -> Outcome {
        self.details = details;
        self
    }

    pub(super) fn send(&self, ctx: Ctx) -> c_int {
        match &self.last {
            _ if !self.per_token.is_empty() => reply_integers(ctx, &self.per_token),
            _ if !self.details.is_empty() => {
                reply_integers_then_groups(ctx, &self.reply[..self.len], &self.details)
            }
            Last::Nothing => reply_integers(ctx, &self.reply[..self.len]),
            Last::Nil => reply_integers_then(ctx, &self.reply[..self.len], None),
            Last::Token(buf, n) => reply_integers_then(ctx, &self.reply[..self.len], buf.get(..*n)),
        }
    }
}

//! The binding rule shared by RL.CHECK, RL.THROTTLE and RL.QUOTA (and their
//! peeks): which of several rules a reply describes.
//!
//! Rejected: the violated rule with the largest `retry_after`, ties to the
//! lower index — where a refusal whose `retry_after` is -1 (waiting cannot
//! help: RL.QUOTA's cost above a limit) binds before any other. Admitted: the rule with the smallest `remaining`, ties to the
//! larger `reset_after` (the rule a client must wait for longest), then to the
//! lower index — so a client that trusts `remaining`/`reset_after` as
//! `RateLimit` headers is never told a shorter reset than the one that binds
//! its next request.

/// One rule's view of a call, in the reply's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleOutcome {
    /// The rule refuses the request.
    pub violated: bool,
    pub remaining: i64,
    /// Meaningful for a violated rule only.
    pub retry_after: i64,
    pub reset_after: i64,
}

/// The binding rule and its outcome, in one pass and without allocating
/// (RL.CHECK's hot path): the best violated rule if any, else the best
/// admitted one. `None` when there is no rule.
pub fn binding(outcomes: impl IntoIterator<Item = RuleOutcome>) -> Option<(usize, RuleOutcome)> {
    let mut refused: Option<(usize, RuleOutcome)> = None;
    let mut admitted: Option<(usize, RuleOutcome)> = None;
    // A refusal that waiting cannot end (-1) outranks every wait.
    let wait = |o: &RuleOutcome| match o.retry_after {
        -1 => i64::MAX,
        r => r,
    };
    for (i, o) in outcomes.into_iter().enumerate() {
        if o.violated {
            if refused.is_none_or(|(_, b)| wait(&o) > wait(&b)) {
                refused = Some((i, o));
            }
        } else if admitted.is_none_or(|(_, b)| {
            o.remaining < b.remaining
                || (o.remaining == b.remaining && o.reset_after > b.reset_after)
        }) {
            admitted = Some((i, o));
        }
    }
    refused.or(admitted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(remaining: i64, reset_after: i64) -> RuleOutcome {
        RuleOutcome {
            violated: false,
            remaining,
            retry_after: -1,
            reset_after,
        }
    }

    fn refused(retry_after: i64) -> RuleOutcome {
        RuleOutcome {
            violated: true,
            remaining: 0,
            retry_after,
            reset_after: retry_after,
        }
    }

    #[test]
    fn table() {
        let cases: &[(&str, Vec<RuleOutcome>, usize)] = &[
            ("empty", vec![], 0),
            ("one rule", vec![ok(3, 10)], 0),
            ("smallest remaining", vec![ok(3, 10), ok(1, 5)], 1),
            (
                "remaining tie goes to the longer reset",
                vec![ok(0, 60_000), ok(0, 3_600_000)],
                1,
            ),
            (
                "full tie goes to the lower index",
                vec![ok(2, 10), ok(2, 10)],
                0,
            ),
            (
                "rejected: only violated rules bind",
                vec![ok(0, 99_999), refused(5)],
                1,
            ),
            (
                "rejected: largest retry-after",
                vec![refused(5), refused(50), refused(7)],
                1,
            ),
            (
                "rejected: ties go to the lower index",
                vec![refused(50), refused(50)],
                0,
            ),
            (
                "rejected: a refusal waiting cannot end (-1) binds first",
                vec![refused(50), refused(-1), refused(9_000)],
                1,
            ),
            (
                "rejected: two such refusals tie to the lower index",
                vec![refused(5), refused(-1), refused(-1)],
                1,
            ),
        ];
        for (name, outcomes, want) in cases {
            let index = binding(outcomes.iter().copied()).map_or(0, |(i, _)| i);
            assert_eq!(index, *want, "{name}");
        }
    }
}

//! The multi-rule sliding-window log behind RL.CHECK and RL.PEEK.
//!
//! The log is a sorted set of admitted units, scored by admission time in ms.
//! For rule i, `used_i` counts members with score `> t - window_i`; members
//! stamped in the future (by a skewed clock) count too. The decision needs only
//! counts by score and one score by rank, so a store answers it in O(log n)
//! whatever the limit: see [`LogView`].

use std::collections::HashMap;

use smallvec::SmallVec;

use crate::core::binding::{binding, RuleOutcome};
pub use crate::core::decision::Decision;
use crate::core::grid::Grid;
use crate::core::int::ceil_ms;
pub use crate::core::log_view::LogView;

/// "At most `count` units in any `window` ms".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub count: i64,
    pub window: i64,
}

/// What an admitted RL.CHECK writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// Score of every new member: the call's `now`.
    pub score: i64,
    /// Number of members to add: the cost.
    pub units: i64,
    /// Members with a score `<=` this have left the longest window: remove
    /// them. `None` when a longer rule set holds the key (see [`admission`]).
    pub trim_through: Option<i64>,
    /// Absolute Unix time in ms at which the key is to expire; `None` keeps
    /// the key's own (later) expiry.
    pub expire_at: Option<i64>,
}

/// Evaluates a request of `cost` units at time `t` against `rules`.
///
/// `newest` is the highest score in the set before the call (`None` when
/// empty); callers check it and the lowest score are finite and within
/// `±(2^53-1)` first.
pub fn decide<L: LogView>(
    rules: &[Rule],
    cost: i64,
    t: i64,
    newest: Option<f64>,
    log: &mut L,
) -> Result<Decision, L::Error> {
    let len = match newest {
        None => 0,
        Some(_) => log.total()?,
    };
    // Rules with the same window share one count: looked up among the
    // earlier rules when there are few, in a map when there are many (so a
    // call with thousands of rules stays linear).
    const SCAN_MAX: usize = 8;
    let mut counted: HashMap<i64, i64> = HashMap::new();
    // On the stack for up to 64 rules, the cap a call can have.
    let mut used: SmallVec<[i64; 64]> = SmallVec::with_capacity(rules.len());
    for (i, rule) in rules.iter().enumerate() {
        let earlier = if len == 0 {
            Some(0)
        } else if i < SCAN_MAX {
            rules[..i]
                .iter()
                .position(|r| r.window == rule.window)
                .map(|j| used[j])
        } else {
            counted.get(&rule.window).copied()
        };
        let n = match earlier {
            Some(n) => n,
            None => log.count_newer_than(t - rule.window)? as i64,
        };
        if i >= SCAN_MAX || rules.len() > SCAN_MAX {
            counted.entry(rule.window).or_insert(n);
        }
        used.push(n);
    }

    let is_violated = |i: usize| used[i] + cost > rules[i].count;
    if !(0..rules.len()).any(is_violated) {
        // `cost` 0 (the state now) adds nothing: a window is empty once the
        // newest member has left it, at once when there is none. (Not
        // `map_or(.., |n| n.max(t))`: compiled branchless, it compared the
        // unused payload of a `None` — valgrind: a jump on an uninitialised
        // value.)
        let newest_after = match newest {
            _ if cost > 0 => Some(ceil_ms(newest.unwrap_or(t as f64).max(t as f64))),
            Some(n) => Some(ceil_ms(n)),
            None => None,
        };
        let outcomes = rules.iter().zip(&used).map(|(rule, &n)| RuleOutcome {
            violated: false,
            remaining: rule.count - n - cost,
            retry_after: -1,
            reset_after: newest_after.map_or(0, |n| (n + rule.window - t).max(0)),
        });
        let (b, outcome) = binding(outcomes).unwrap_or((0, NO_RULE));
        return Ok(Decision {
            limited: false,
            rule: b + 1,
            limit: rules.get(b).map_or(0, |r| r.count),
            remaining: outcome.remaining,
            retry_after: -1,
            reset_after: outcome.reset_after,
        });
    }

    // A violated rule's window holds at least one member, so `newest` is in it.
    let newest = ceil_ms(newest.unwrap_or(t as f64));
    // A violated rule's retry-after is when the k-th oldest member of its
    // window leaves it, k = used + cost - count.
    let mut outcomes = Vec::with_capacity(rules.len());
    for (i, rule) in rules.iter().enumerate() {
        let retry_after = if is_violated(i) {
            let k = (used[i] + cost - rule.count) as u64;
            let first_in_window = len.saturating_sub(used[i] as u64);
            ceil_ms(log.score_at_rank(first_in_window + k - 1)?) + rule.window - t
        } else {
            -1
        };
        outcomes.push(RuleOutcome {
            violated: is_violated(i),
            remaining: (rule.count - used[i]).max(0),
            retry_after,
            reset_after: newest + rule.window - t,
        });
    }
    let (b, outcome) = binding(outcomes).unwrap_or((0, NO_RULE));
    Ok(Decision {
        limited: true,
        rule: b + 1,
        limit: rules.get(b).map_or(0, |r| r.count),
        remaining: outcome.remaining,
        retry_after: outcome.retry_after,
        reset_after: outcome.reset_after,
    })
}

/// What [`binding`] cannot return for a call with no rule (the parser
/// refuses one): never reached.
const NO_RULE: RuleOutcome = RuleOutcome {
    violated: false,
    remaining: 0,
    retry_after: -1,
    reset_after: 0,
};

/// The writes of an admitted call. `server_time` is the server clock read
/// once for this call (equal to `t` when `now` is `*`); `existing_expiry`
/// the key's absolute expiry before the call (`None`: new key, or none);
/// `key` the key's name (its grid offset, SPEC "Expiries on a grid").
///
/// With `X = max(newest after the call, server_time) + max_window`: when the
/// key already expires at or after `X` — a longer rule set, an operator, or
/// an earlier call in the same grid step holds it — nothing is trimmed and
/// the expiry stays; otherwise members at or before `t - max_window` go and
/// the key expires at the grid point at or after `X` (`W = max_window`). So
/// a canary or a rollback with shorter rules never trims history a longer
/// rule set still counts, and on a busy key most calls write one `ZADD`.
pub fn admission(
    rules: &[Rule],
    cost: i64,
    t: i64,
    newest: Option<f64>,
    server_time: i64,
    existing_expiry: Option<i64>,
    key: &[u8],
) -> Admission {
    let max_window = rules.iter().map(|r| r.window).max().unwrap_or(1);
    // (Not `map_or`: see `decide` — a branchless max read a None's payload.)
    let newest_after = ceil_ms(newest.unwrap_or(t as f64).max(t as f64));
    let needed = newest_after.max(server_time).saturating_add(max_window);
    let expire_at = Grid::new(key, max_window).expiry(existing_expiry, needed);
    Admission {
        score: t,
        units: cost,
        trim_through: expire_at.is_some().then_some(t - max_window),
        expire_at,
    }
}

/// How many members a refund of `cost` units removes: `min(cost, used)`,
/// `used` counted over the longest window. The command removes that many
/// from the top of the set (highest scores, ties to the greatest member
/// name), which all lie inside that window.
pub fn refund_units<L: LogView>(
    rules: &[Rule],
    cost: i64,
    t: i64,
    newest: Option<f64>,
    log: &mut L,
) -> Result<u64, L::Error> {
    if newest.is_none() {
        return Ok(0);
    }
    let max_window = rules.iter().map(|r| r.window).max().unwrap_or(1);
    let used = log.count_newer_than(t - max_window)?;
    Ok(used.min(cost.max(0) as u64))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::convert::Infallible;

    /// A sorted set as a sorted Vec of scores (also the lease core's tests'
    /// view of a set).
    pub(crate) struct VecLog(pub(crate) Vec<f64>);

    impl VecLog {
        fn new(mut scores: Vec<f64>) -> Self {
            scores.sort_by(f64::total_cmp);
            VecLog(scores)
        }
        fn newest(&self) -> Option<f64> {
            self.0.last().copied()
        }
        /// Applies an admission the way the command layer does.
        fn apply(&mut self, a: &Admission) {
            self.0
                .extend(std::iter::repeat_n(a.score as f64, a.units as usize));
            if let Some(through) = a.trim_through {
                self.0.retain(|&s| s > through as f64);
            }
            self.0.sort_by(f64::total_cmp);
        }
    }

    impl LogView for VecLog {
        type Error = Infallible;
        fn count_newer_than(&mut self, min: i64) -> Result<u64, Infallible> {
            Ok(self.0.iter().filter(|&&s| s > min as f64).count() as u64)
        }
        fn total(&mut self) -> Result<u64, Infallible> {
            Ok(self.0.len() as u64)
        }
        fn score_at_rank(&mut self, rank: u64) -> Result<f64, Infallible> {
            Ok(self.0[rank as usize])
        }
    }

    fn rules(pairs: &[(i64, i64)]) -> Vec<Rule> {
        pairs
            .iter()
            .map(|&(count, window)| Rule { count, window })
            .collect()
    }

    /// Runs RL.CHECK against the log: decides, applies when admitted.
    fn check(log: &mut VecLog, r: &[Rule], cost: i64, t: i64) -> [i64; 6] {
        let newest = log.newest();
        let d = decide(r, cost, t, newest, log).unwrap();
        if !d.limited {
            let a = admission(r, cost, t, newest, t, None, b"k");
            log.apply(&a);
        }
        d.reply()
    }

    #[test]
    fn demo_sequence_from_the_readme() {
        let r = rules(&[(2, 1000)]);
        let mut log = VecLog::new(vec![]);
        assert_eq!(check(&mut log, &r, 1, 5000), [0, 1, 2, 1, -1, 1000]);
        assert_eq!(check(&mut log, &r, 1, 5000), [0, 1, 2, 0, -1, 1000]);
        assert_eq!(check(&mut log, &r, 1, 5000), [1, 1, 2, 0, 1000, 1000]);
        assert_eq!(check(&mut log, &r, 1, 5400), [1, 1, 2, 0, 600, 600]);
        // Exactly `window` old: both members have left the window.
        assert_eq!(check(&mut log, &r, 1, 6000), [0, 1, 2, 1, -1, 1000]);
    }

    #[test]
    fn table_of_edges() {
        struct Case {
            name: &'static str,
            scores: Vec<f64>,
            rules: Vec<(i64, i64)>,
            cost: i64,
            t: i64,
            want: [i64; 6],
        }
        let cases = vec![
            Case {
                name: "member exactly window old does not count",
                scores: vec![9000.0],
                rules: vec![(1, 1000)],
                cost: 1,
                t: 10000,
                want: [0, 1, 1, 0, -1, 1000],
            },
            Case {
                name: "member one ms inside the window counts",
                scores: vec![9001.0],
                rules: vec![(1, 1000)],
                cost: 1,
                t: 10000,
                want: [1, 1, 1, 0, 1, 1],
            },
            Case {
                name: "future member counts and sets reset",
                scores: vec![12000.0],
                rules: vec![(1, 1000)],
                cost: 1,
                t: 10000,
                want: [1, 1, 1, 0, 3000, 3000],
            },
            Case {
                name: "future member pushes reset of an admitted call",
                scores: vec![12000.0],
                rules: vec![(2, 1000)],
                cost: 1,
                t: 10000,
                want: [0, 1, 2, 0, -1, 3000],
            },
            Case {
                name: "admitted binding rule is the smallest remaining",
                scores: vec![9500.0, 9600.0, 9700.0],
                rules: vec![(10, 1000), (5, 60000)],
                cost: 1,
                t: 10000,
                want: [0, 2, 5, 1, -1, 60000],
            },
            Case {
                name: "admitted ties in remaining go to the larger reset-after",
                scores: vec![],
                rules: vec![(3, 1000), (3, 2000)],
                cost: 1,
                t: 10000,
                want: [0, 2, 3, 2, -1, 2000],
            },
            Case {
                // The case: the 10th call in ten minutes leaves both
                // rules at 0; the hour binds (the minute would say "reset in 60 s").
                name: "admitted: the hour binds over the minute at remaining 0",
                scores: (1..10).map(|i| (10000 - i * 60000) as f64).collect(),
                rules: vec![(1, 60000), (10, 3600000)],
                cost: 1,
                t: 10000,
                want: [0, 2, 10, 0, -1, 3600000],
            },
            Case {
                name: "admitted full ties go to the lower index",
                scores: vec![],
                rules: vec![(3, 1000), (3, 1000)],
                cost: 1,
                t: 10000,
                want: [0, 1, 3, 2, -1, 1000],
            },
            Case {
                name: "rejected binding rule has the largest retry-after",
                // 1 per second: retry 900. 3 per minute: oldest of the three at 1000 -> retry 51000.
                scores: vec![1000.0, 5000.0, 9900.0],
                rules: vec![(1, 1000), (3, 60000)],
                cost: 1,
                t: 10000,
                want: [1, 2, 3, 0, 51000, 59900],
            },
            Case {
                name: "rejected ties go to the lower index",
                scores: vec![9500.0],
                rules: vec![(1, 1000), (1, 1000)],
                cost: 1,
                t: 10000,
                want: [1, 1, 1, 0, 500, 500],
            },
            Case {
                name: "cost picks the k-th oldest member",
                // used 4, cost 3, count 5: k = 2 -> second oldest in window (9300).
                scores: vec![8000.0, 9200.0, 9300.0, 9400.0, 9500.0],
                rules: vec![(5, 1000)],
                cost: 3,
                t: 10000,
                want: [1, 1, 5, 1, 300, 500],
            },
            Case {
                name: "cost that fits exactly is admitted",
                scores: vec![9200.0, 9300.0],
                rules: vec![(5, 1000)],
                cost: 3,
                t: 10000,
                want: [0, 1, 5, 0, -1, 1000],
            },
            Case {
                name: "fractional foreign scores round up",
                scores: vec![9000.5],
                rules: vec![(1, 1000)],
                cost: 1,
                t: 10000,
                want: [1, 1, 1, 0, 1, 1],
            },
            Case {
                name: "over-full set (limit lowered) never shows negative remaining",
                scores: vec![9100.0, 9200.0, 9300.0, 9400.0],
                rules: vec![(2, 1000)],
                cost: 1,
                t: 10000,
                // k = 4 + 1 - 2 = 3 -> third oldest (9300) -> retry 300.
                want: [1, 1, 2, 0, 300, 400],
            },
            Case {
                name: "members outside the window do not count",
                scores: vec![1.0, 2.0, 3.0],
                rules: vec![(1, 1000)],
                cost: 1,
                t: 10000,
                want: [0, 1, 1, 0, -1, 1000],
            },
            Case {
                name: "now 0 with an empty set",
                scores: vec![],
                rules: vec![(1, 1)],
                cost: 1,
                t: 0,
                want: [0, 1, 1, 0, -1, 1],
            },
        ];
        for c in cases {
            let mut log = VecLog::new(c.scores);
            let r = rules(&c.rules);
            let newest = log.newest();
            let got = decide(&r, c.cost, c.t, newest, &mut log).unwrap().reply();
            assert_eq!(got, c.want, "{}", c.name);
        }
    }

    #[test]
    fn cost_0_answers_the_state_now() {
        let r = rules(&[(2, 1000)]);
        let now = |scores: Vec<f64>| {
            let mut log = VecLog::new(scores);
            let newest = log.newest();
            decide(&r, 0, 10_000, newest, &mut log).unwrap().reply()
        };
        // Empty: all can pass, nothing to reset.
        assert_eq!(now(vec![]), [0, 1, 2, 2, -1, 0]);
        // Members outside the window only: the same.
        assert_eq!(now(vec![8000.0]), [0, 1, 2, 2, -1, 0]);
        // Full: nothing can pass, but nothing is over the limit.
        assert_eq!(now(vec![9500.0, 9600.0]), [0, 1, 2, 0, -1, 600]);
        // Over the limit (a debit, or a lowered limit): limited until the
        // oldest member in the window leaves it.
        assert_eq!(now(vec![9500.0, 9600.0, 9700.0]), [1, 1, 2, 0, 500, 700]);
        // A member in the future holds the reset.
        assert_eq!(now(vec![12_000.0]), [0, 1, 2, 1, -1, 3000]);
        // Several rules: the fullest binds; a window without members resets at once.
        let two = rules(&[(5, 100), (3, 60_000)]);
        let mut log = VecLog::new(vec![5000.0]);
        let newest = log.newest();
        let d = decide(&two, 0, 10_000, newest, &mut log).unwrap();
        assert_eq!(d.reply(), [0, 2, 3, 2, -1, 55_000]);
    }

    #[test]
    fn a_debit_3x_the_count_and_the_exact_time_the_key_admits_again() {
        // A debit is an admission that is never refused: `cost` members at
        // `t`, trimmed and expired as any admission.
        let r = rules(&[(2, 1000)]);
        let mut log = VecLog::new(vec![4500.0]);
        let newest = log.newest();
        let a = admission(&r, 6, 5000, newest, 5000, None, b"k");
        assert_eq!(
            (a.units, a.expire_at),
            (6, Some(Grid::new(b"k", 1000).at_or_after(6000)))
        );
        log.apply(&a);
        assert_eq!(log.0.len(), 7);
        let state = |log: &mut VecLog, cost: i64, t: i64| {
            let newest = log.newest();
            decide(&r, cost, t, newest, log).unwrap().reply()
        };
        // The state now: 7 members in the window, over the limit until
        // the debit's members leave it at 6000 (k = 7 - 2 = 5: the 5th
        // oldest is one of them).
        assert_eq!(state(&mut log, 0, 5000), [1, 1, 2, 0, 1000, 1000]);
        assert_eq!(state(&mut log, 1, 5999), [1, 1, 2, 0, 1, 1]);
        assert_eq!(state(&mut log, 1, 6000), [0, 1, 2, 1, -1, 1000]);
        // 3x a count of 3 in a longer window, older members first: the
        // oldest that must leave is the debit's.
        let r = rules(&[(3, 10_000)]);
        let mut log = VecLog::new(vec![1000.0, 2000.0]);
        let newest = log.newest();
        log.apply(&admission(&r, 9, 3000, newest, 3000, None, b"k"));
        let newest = log.newest();
        let d = decide(&r, 1, 3000, newest, &mut log).unwrap();
        // used 11, k = 11 + 1 - 3 = 9: the 9th oldest is a debit member.
        assert_eq!(d.reply(), [1, 1, 3, 0, 10_000, 10_000]);
        // Cost 0 (the state now): k = 8, still a debit member.
        let d = decide(&r, 0, 3000, newest, &mut log).unwrap();
        assert_eq!(d.reply(), [1, 1, 3, 0, 10_000, 10_000]);
        // At 11 000 the two old members have left: 9 remain, still over.
        let d = decide(&r, 0, 12_999, newest, &mut log).unwrap();
        assert_eq!(d.reply(), [1, 1, 3, 0, 1, 1]);
        let d = decide(&r, 1, 13_000, newest, &mut log).unwrap();
        assert_eq!(d.reply()[..4], [0, 1, 3, 2]);
    }

    #[test]
    fn times_stay_exact_at_the_top_of_the_range() {
        // Integer arithmetic: t + window beyond 2^53 must not round.
        let top = crate::core::int::MAX_SAFE;
        let mut log = VecLog::new(vec![top as f64]);
        let newest = log.newest();
        let d = decide(&rules(&[(1, 1000)]), 1, top, newest, &mut log).unwrap();
        assert_eq!(d.reply(), [1, 1, 1, 0, 1000, 1000]);
        let mut log = VecLog::new(vec![top as f64]);
        let d = decide(&rules(&[(1, 2)]), 1, top - 1, newest, &mut log).unwrap();
        assert_eq!(d.reply(), [1, 1, 1, 0, 3, 3]);
    }

    #[test]
    fn admission_writes() {
        let r = rules(&[(10, 1000), (100, 60000)]);
        // W = 60 000: g = 7 500, and this key's offset.
        let grid = Grid::new(b"k", 60_000);
        assert_eq!(grid.step, 7_500);
        let at = |x| grid.at_or_after(x);
        // Empty set, server clock: X = now + the longest window, on the grid.
        assert_eq!(
            admission(&r, 2, 10000, None, 10000, None, b"k"),
            Admission {
                score: 10000,
                units: 2,
                trim_through: Some(-50000),
                expire_at: Some(at(70000))
            }
        );
        assert!(at(70000) >= 70000 && at(70000) < 77500);
        // A caller whose clock runs behind still gets a full window from the server's clock.
        let a = admission(&r, 1, 10000, None, 20000, None, b"k");
        assert_eq!(a.expire_at, Some(at(80000)));
        // A future member keeps the key alive until it leaves the longest window.
        let a = admission(&r, 1, 10000, Some(30000.0), 10000, None, b"k");
        assert_eq!(a.expire_at, Some(at(90000)));
        // Fractional newest rounds up.
        let a = admission(&r, 1, 10000, Some(30000.5), 10000, None, b"k");
        assert_eq!(a.expire_at, Some(at(90001)));
    }

    #[test]
    fn the_expiry_moves_on_the_grid_and_the_trim_goes_with_it() {
        // One rule of 1 s: g = 125 ms. At t0 = 10 001 + o the first call
        // needs X = 11 001 + o, one ms past a grid point of this key.
        let r = rules(&[(1000, 1000)]);
        let key = b"{user:42}:rate";
        let grid = Grid::new(key, 1000);
        let (g, o) = (grid.step, grid.offset);
        assert_eq!(g, 125);
        let t0 = 10_001 + o;
        // First call on a new key: the next grid point, and a trim.
        let a = admission(&r, 1, t0, None, t0, None, key);
        let e = 11_125 + o;
        assert_eq!((a.expire_at, a.trim_through), (Some(e), Some(t0 - 1000)));
        // Every call whose X is at or before E keeps it and trims nothing:
        // the rest of the step, X = E exactly included.
        for dt in [0, 1, 124] {
            let newest = Some((t0 + dt) as f64);
            let a = admission(&r, 1, t0 + dt, newest, t0 + dt, Some(e), key);
            assert_eq!((a.expire_at, a.trim_through), (None, None), "dt {dt}");
        }
        // One ms past the step: the expiry moves a whole step, and the
        // deferred trim runs.
        let t = t0 + 125;
        let a = admission(&r, 1, t, Some(t as f64), t, Some(e), key);
        assert_eq!((a.expire_at, a.trim_through), (Some(e + g), Some(t - 1000)));
        // X on a grid point is set as it is.
        let t = e - 1000;
        let a = admission(&r, 1, t, Some(t as f64), t, Some(e - 1), key);
        assert_eq!((a.expire_at, a.trim_through), (Some(e), Some(t - 1000)));
        // W < 8: a grid of every ms, so the expiry is X itself (offset 0).
        let short = rules(&[(5, 7)]);
        let a = admission(&short, 1, 100, None, 100, None, key);
        assert_eq!(a.expire_at, Some(107));
        let a = admission(&short, 1, 100, None, 100, Some(106), key);
        assert_eq!(a.expire_at, Some(107));
    }

    #[test]
    fn a_steady_stream_keeps_at_most_a_step_and_a_gap_of_old_members() {
        // SPEC: a steady rate keeps at most g plus one gap between calls of
        // members older than the longest window. Calls every `gap` ms for
        // 20 windows, the key's expiry tracked as Redis keeps it.
        for (window, gap) in [(1000, 7), (1000, 125), (60_000, 1_000), (8, 1), (64, 3)] {
            let r = rules(&[(i64::MAX / 4, window)]);
            let g = (window / 8).max(1);
            let mut log = VecLog::new(vec![]);
            let mut expiry: Option<i64> = None;
            let (mut moves, mut calls) = (0, 0);
            let mut t = 1_000_000;
            while t < 1_000_000 + 20 * window {
                let newest = log.newest();
                let a = admission(&r, 1, t, newest, t, expiry, b"stream");
                if let Some(e) = a.expire_at {
                    moves += 1;
                    expiry = Some(e);
                }
                log.apply(&a);
                // Nothing the call relies on has expired, and the key lives
                // at most g past the newest member's window.
                let e = expiry.unwrap();
                assert!(
                    e >= t + window && e < t + window + g + gap,
                    "{window} {gap} t {t} e {e}"
                );
                let old = log.0.iter().filter(|&&s| s <= (t - window) as f64).count() as i64;
                assert!(
                    old <= (g + gap) / gap + 1,
                    "{window}/{gap}: {old} old members at {t}"
                );
                calls += 1;
                t += gap;
            }
            // The expiry moves about once a step: calls / (g / gap) + 1.
            let steps = 20 * window / g;
            assert!(
                moves <= steps + 2,
                "{window}/{gap}: {moves} moves over {steps} steps ({calls} calls)"
            );
        }
    }

    #[test]
    fn a_longer_rule_set_holds_the_key() {
        // The rollout: the hour's rule set left the key expiring at
        // t0 + 1 h (on its grid); a deploy calls it with `1 60000` only.
        let hour = rules(&[(1, 60000), (5, 3_600_000)]);
        let minute = rules(&[(1, 60000)]);
        let t0 = 1_000_000_000;
        let mut log = VecLog::new(vec![]);
        let mut expiry = None;
        let call = |log: &mut VecLog, r: &[Rule], t: i64, expiry: &mut Option<i64>| {
            let newest = log.newest();
            let d = decide(r, 1, t, newest, log).unwrap();
            if !d.limited {
                let a = admission(r, 1, t, newest, t, *expiry, b"k");
                log.apply(&a);
                *expiry = a.expire_at.or(*expiry);
            }
            d.reply()[0]
        };
        for k in 0..4 {
            assert_eq!(call(&mut log, &hour, t0 + k * 61_000, &mut expiry), 0);
        }
        let held = Grid::new(b"k", 3_600_000).at_or_after(t0 + 3 * 61_000 + 3_600_000);
        assert_eq!(expiry, Some(held));
        // The minute-only deploy: admitted, trims nothing, keeps the expiry.
        assert_eq!(call(&mut log, &minute, t0 + 4 * 61_000, &mut expiry), 0);
        assert_eq!(log.0.len(), 5);
        assert_eq!(expiry, Some(held));
        // The rollback: the hour still counts all five.
        assert_eq!(call(&mut log, &hour, t0 + 5 * 61_000, &mut expiry), 1);
        // Equal expiry: kept (SPEC: E >= X), nothing trimmed; one ms short:
        // the call trims and sets its own grid point.
        let a = admission(&minute, 1, 100_000, None, 100_000, Some(160_000), b"k");
        assert_eq!((a.trim_through, a.expire_at), (None, None));
        let a = admission(&minute, 1, 100_000, None, 100_000, Some(159_999), b"k");
        let own = Grid::new(b"k", 60_000).at_or_after(160_000);
        assert_eq!((a.trim_through, a.expire_at), (Some(40_000), Some(own)));
    }

    #[test]
    fn refunds_take_at_most_what_the_longest_window_holds() {
        let r = rules(&[(5, 1000), (10, 60000)]);
        let mut log = VecLog::new(vec![0.0, 50_000.0, 59_000.0, 70_000.0]);
        let newest = log.newest();
        // At t = 60 000 the minute holds 50 000, 59 000 and the future
        // 70 000; 0 is exactly a window old.
        assert_eq!(refund_units(&r, 2, 60_000, newest, &mut log).unwrap(), 2);
        assert_eq!(refund_units(&r, 9, 60_000, newest, &mut log).unwrap(), 3);
        let mut empty = VecLog::new(vec![]);
        assert_eq!(refund_units(&r, 3, 60_000, None, &mut empty).unwrap(), 0);
    }

    #[test]
    fn retry_after_is_when_the_request_would_pass() {
        // Walk time forward from a rejection: the first admitted time is t + retry_after.
        let r = rules(&[(3, 1000), (5, 5000)]);
        let mut log = VecLog::new(vec![]);
        let mut t = 100_000;
        let mut rejections = 0;
        for step in 0..200 {
            let reply = check(&mut log, &r, 1 + (step % 2), t);
            if reply[0] == 1 {
                rejections += 1;
                let retry = reply[4];
                assert!(retry > 0);
                let mut probe = VecLog(log.0.clone());
                let n = probe.newest();
                let cost = 1 + (step % 2);
                assert!(
                    decide(&r, cost, t + retry - 1, n, &mut probe)
                        .unwrap()
                        .limited,
                    "too early at step {step}"
                );
                assert!(
                    !decide(&r, cost, t + retry, n, &mut probe).unwrap().limited,
                    "not admitted at step {step}"
                );
            }
            t += 137;
        }
        assert!(
            rejections > 10,
            "the walk should hit the limits: {rejections}"
        );
    }

    #[test]
    fn with_debits_retry_after_is_still_when_the_request_would_pass() {
        // The walk above with debits among the calls: a debit (up to 3x the
        // smallest count) is recorded whatever the rules say, answers the
        // state now, and every later rejection's retry_after is exact.
        let r = rules(&[(3, 1000), (5, 5000)]);
        let mut log = VecLog::new(vec![]);
        let mut t = 100_000;
        let (mut debits, mut limited_after_debit, mut rejections) = (0, 0, 0);
        for step in 0..400 {
            if step % 7 == 3 {
                let cost = 1 + (step % 9);
                let newest = log.newest();
                log.apply(&admission(&r, cost, t, newest, t, None, b"k"));
                let newest = log.newest();
                let now = decide(&r, 0, t, newest, &mut log).unwrap();
                // Over a limit iff some window holds more than its count.
                let over = r.iter().any(|rule| {
                    log.0
                        .iter()
                        .filter(|&&s| s > (t - rule.window) as f64)
                        .count() as i64
                        > rule.count
                });
                assert_eq!(now.limited, over, "step {step}");
                if now.limited {
                    limited_after_debit += 1;
                    let mut probe = VecLog(log.0.clone());
                    let at = t + now.retry_after;
                    assert!(decide(&r, 0, at - 1, newest, &mut probe).unwrap().limited);
                    assert!(!decide(&r, 0, at, newest, &mut probe).unwrap().limited);
                }
                debits += 1;
            } else {
                let reply = check(&mut log, &r, 1, t);
                if reply[0] == 1 {
                    rejections += 1;
                    let mut probe = VecLog(log.0.clone());
                    let n = probe.newest();
                    let at = t + reply[4];
                    assert!(decide(&r, 1, at - 1, n, &mut probe).unwrap().limited);
                    assert!(!decide(&r, 1, at, n, &mut probe).unwrap().limited);
                }
            }
            t += 91;
        }
        assert!(debits > 50 && limited_after_debit > 20 && rejections > 50);
    }

    #[test]
    fn admitted_units_never_exceed_any_rule_in_any_window() {
        let r = rules(&[(4, 1000), (10, 10000)]);
        let mut log = VecLog::new(vec![]);
        let mut admitted: Vec<i64> = Vec::new();
        let mut t = 0;
        for i in 0..2000 {
            t += [0, 1, 7, 50, 300][i % 5];
            if check(&mut log, &r, 1, t)[0] == 0 {
                admitted.push(t);
            }
        }
        for rule in &r {
            for &end in &admitted {
                let n = admitted
                    .iter()
                    .filter(|&&s| s > end - rule.window && s <= end)
                    .count() as i64;
                assert!(
                    n <= rule.count,
                    "{n} in window {} ending {end}",
                    rule.window
                );
            }
        }
    }
}

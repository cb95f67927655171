//! The token bucket in its GCRA form behind RL.THROTTLE and RL.THROTTLEPEEK.
//!
//! Each rule `(burst, count, window)` refills one unit every emission
//! interval `T = floor(window * 10^6 / count)` ns and lets up to `burst` units
//! through at once (tolerance `tau = T * burst` ns). Its whole state is one
//! number, the theoretical arrival time `TAT` in ns since the Unix epoch,
//! stored as a decimal in a hash field named by the rule's `window` in ms.
//!
//! Units: arguments, replies and expiry are in **ms** (`i64`); stored times
//! and all internal arithmetic are in **ns**, exact, in 128-bit integers (no
//! floating point).
//!
//! # Bounds
//!
//! Let `M = (2^53-1) * 10^6` ns ([`MAX_TOLERANCE_NS`], about 2^73). A valid
//! rule has `1 <= T <= M` and `tau <= M` ([`gcra`]); `t_ns <= M`; a stored TAT
//! is at most `2M` ([`parse_tat`]); `cost` is at most the smallest burst, so
//! `T_i * cost <= tau_i <= M`. Hence `base <= 2M` and `new <= 3M < 2^75`: no
//! overflow in `i128`. An admitted call has `new <= t_ns + tau <= 2M`, so every
//! TAT this module writes is one [`parse_tat`] reads back. Every reply integer
//! is at most `3 * (2^53-1)` ms (`remaining` at most `burst`), well inside
//! `i64`. The arithmetic saturates all the same, so a caller that breaks a
//! precondition gets a wrong number, never a panic.

use smallvec::SmallVec;

use crate::core::binding::{binding, RuleOutcome};
use crate::core::decision::Decision;
use crate::core::grid::Grid;
use crate::core::int::MAX_SAFE;
use crate::error::{show, Error};

/// Nanoseconds per millisecond.
pub const NS_PER_MS: u128 = 1_000_000;

/// Largest tolerance `tau` a rule may have: `(2^53-1) * 10^6` ns, i.e.
/// `2^53-1` ms.
pub const MAX_TOLERANCE_NS: u128 = MAX_SAFE as u128 * NS_PER_MS;

/// Largest stored TAT: `2 * (2^53-1) * 10^6` ns (`now` plus the largest
/// tolerance).
pub const MAX_TAT_NS: u128 = 2 * MAX_TOLERANCE_NS;

/// Size of the buffer [`format_tat`] writes into (`u128::MAX` has 39 digits).
pub const TAT_BUF_LEN: usize = 40;

/// `NS_PER_MS` for signed arithmetic.
const NS: i128 = 1_000_000;

/// One `burst count window` triple as given (all in `[1, 2^53-1]`; `window`
/// in ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThrottleRule {
    /// Units that may pass at once from a full bucket.
    pub burst: i64,
    /// Units refilled per `window`.
    pub count: i64,
    /// Refill period in ms; also the name of the rule's hash field.
    pub window: i64,
}

/// A validated rule, ready for [`decide`] and [`refund`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    /// Window in ms: names the hash field ([`field_name`]).
    pub window: i64,
    /// The rule's `burst`: the `limit` of a reply bound by this rule.
    pub burst: i64,
    /// Emission interval `T = floor(window * 10^6 / count)` ns, at least 1.
    pub interval_ns: u128,
    /// Tolerance `tau = T * burst` ns, at most [`MAX_TOLERANCE_NS`].
    pub tolerance_ns: u128,
}

/// Validates `rule`, the `n`-th (1-based, as named in messages) of its call:
/// each number in `[1, 2^53-1]` (the parser's job, checked again), `T >= 1` ns
/// and `tau <= (2^53-1) * 10^6` ns.
pub fn gcra(rule: ThrottleRule, n: usize) -> Result<Gcra, Error> {
    for (what, value) in [
        ("burst", rule.burst),
        ("count", rule.count),
        ("window", rule.window),
    ] {
        if !(1..=MAX_SAFE).contains(&value) {
            return Err(Error::Arg(format!(
                "invalid {what} '{value}' for rule {n}: expected an integer from 1 to {MAX_SAFE}"
            )));
        }
    }
    // In range, so these conversions and products are exact (< 2^127).
    let window_ns = as_u128(rule.window) * NS_PER_MS;
    let interval_ns = window_ns / as_u128(rule.count);
    if interval_ns < 1 {
        return Err(Error::Arg(format!(
            "invalid rule {n}: count {} over window {} gives an emission interval below 1 ns",
            rule.count, rule.window
        )));
    }
    let tolerance_ns = interval_ns.saturating_mul(as_u128(rule.burst));
    if tolerance_ns > MAX_TOLERANCE_NS {
        return Err(Error::Arg(format!(
            "invalid rule {n}: burst {} * emission interval {interval_ns} ns (count {} over window {}) is above {MAX_SAFE} ms",
            rule.burst, rule.count, rule.window
        )));
    }
    Ok(Gcra {
        window: rule.window,
        burst: rule.burst,
        interval_ns,
        tolerance_ns,
    })
}

/// Two rules with the same window are an argument error (state is kept per
/// window). `first` and `again` are 0-based.
pub fn duplicate_window(first: usize, again: usize, window: i64) -> Error {
    Error::Arg(format!(
        "invalid rule {}: window {window} is also the window of rule {} (state is kept per window)",
        again + 1,
        first + 1
    ))
}

/// The hash field of a rule: its window in ms, in decimal (`"60000"`),
/// written into `buf` (no allocation).
pub fn field_name(window: i64, buf: &mut [u8; 20]) -> &[u8] {
    crate::core::int::decimal(window, buf)
}

/// Parses a stored TAT (ns): decimal digits only, no sign, no leading zeros
/// (`"0"` alone is fine), any length, value in `[0, MAX_TAT_NS]`. `None` for
/// anything else; see [`stored_error`].
pub fn parse_tat(bytes: &[u8]) -> Option<u128> {
    match bytes {
        [] => return None,
        [b'0'] => return Some(0),
        [b'0', ..] => return None,
        _ => {}
    }
    let mut value: u128 = 0;
    for &b in bytes {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u128::from(b - b'0'))?;
        // Stops long inputs early; also keeps `value` far from overflow.
        if value > MAX_TAT_NS {
            return None;
        }
    }
    Some(value)
}

/// Writes `v` (a TAT in ns) as decimal digits into `buf`, returning them.
/// The inverse of [`parse_tat`]; no allocation.
pub fn format_tat(v: u128, buf: &mut [u8; TAT_BUF_LEN]) -> &[u8] {
    let mut rest = v;
    let mut len = 0;
    for slot in buf.iter_mut().rev() {
        // `rest % 10 < 10`: the cast is exact.
        *slot = b'0' + (rest % 10) as u8;
        rest /= 10;
        len += 1;
        if rest == 0 {
            break;
        }
    }
    // `len <= TAT_BUF_LEN`, so the split point is in range.
    buf.split_at(TAT_BUF_LEN - len).1
}

/// The error for a field whose value [`parse_tat`] refuses.
pub fn stored_error(key: &[u8], field: &[u8], value: &[u8]) -> Error {
    Error::Stored(format!(
        "hash at '{}' field '{}' holds '{}', not a theoretical arrival time in ns (a decimal integer from 0 to {MAX_TAT_NS})",
        show(key),
        show(field),
        show(value)
    ))
}

/// The outcome of RL.THROTTLE / RL.THROTTLEPEEK at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Throttle {
    /// The six reply integers (`limit` is the binding rule's `burst`).
    pub decision: Decision,
    /// Admitted: the new TAT of every rule in ns, in rule order — what
    /// RL.THROTTLE writes (each at most [`MAX_TAT_NS`]). Rejected: `None`.
    pub new_tats: Option<Tats>,
}

/// TATs in ns, one per rule: on the stack for up to two rules (the usual
/// call has one or two), so an admission allocates nothing.
pub type Tats = SmallVec<[u128; 2]>;

/// Stored TATs, one per rule (`None`: no field), on the stack as [`Tats`].
pub type StoredTats = SmallVec<[Option<u128>; 2]>;

/// One rule's arithmetic at `t_ns`, all in ns.
struct Step {
    /// `max(TAT, t_ns)`.
    base: i128,
    /// `base + T * cost`.
    new: i128,
    interval: i128,
    tolerance: i128,
}

impl Step {
    /// `new - tau <= t_ns`, written without the subtraction.
    fn allows(&self, t_ns: i128) -> bool {
        self.new <= t_ns.saturating_add(self.tolerance)
    }
}

/// Decides a request of `cost` units at `t_ms` (Unix ms) against `rules`,
/// where `tats[i]` is rule i's stored TAT in ns (`None`: missing field or
/// key, a full bucket). Pure: RL.THROTTLEPEEK calls it and writes nothing.
///
/// Preconditions (checked by the command layer): at least one rule, rules
/// from [`gcra`] with distinct windows, `0 <= cost <=` the smallest burst
/// (0: the state now), `0 <= t_ms <= 2^53-1`, TATs from [`parse_tat`],
/// `tats.len() == rules.len()` (a missing entry counts as `None`). With no
/// rules the call is admitted with the reply `[0, 1, 0, 0, -1, 0]`.
pub fn decide(rules: &[Gcra], cost: i64, t_ms: i64, tats: &[Option<u128>]) -> Throttle {
    decide_reserving(rules, cost, t_ms, tats, None)
}

/// [`decide`] for a call with `RESERVE max_wait` (`reserve`: `max_wait` in
/// ms, with `t_ms + max_wait <= 2^53-1`; `None`: no `RESERVE`). The request
/// is admitted iff every rule allows it at `t_ns + max_wait_ns`, i.e.
/// `new_i - tau_i <= t_ns + max_wait_ns`, and then writes as any admission.
/// Admitted, `retry_after` is the delay before the caller may act,
/// `max(0, ceil((max_i (new_i - tau_i) - t_ns) / 10^6))` ms, and a delay
/// above 0 binds the rule with the largest `new_i - tau_i` in exact ns (ties
/// to the lower index). Rejected, `retry_after` is the ms until this call
/// with this `max_wait` would be admitted. So with `RESERVE 0` the decision
/// is an ordinary call's, only an admitted reply says 0 instead of -1.
pub fn decide_reserving(
    rules: &[Gcra],
    cost: i64,
    t_ms: i64,
    tats: &[Option<u128>],
    reserve: Option<i64>,
) -> Throttle {
    let t_ns = i128::from(t_ms) * NS;
    // The latest instant a unit may be due: `t` plus the wait accepted.
    let horizon = t_ns.saturating_add(i128::from(reserve.unwrap_or(0).max(0)) * NS);
    let cost = i128::from(cost.max(0));
    let steps: SmallVec<[Step; 4]> = rules
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            let tat = tats.get(i).copied().flatten().map_or(t_ns, as_i128);
            let base = tat.max(t_ns);
            let interval = as_i128(rule.interval_ns);
            Step {
                base,
                new: base.saturating_add(interval.saturating_mul(cost)),
                interval,
                tolerance: as_i128(rule.tolerance_ns),
            }
        })
        .collect();
    let admitted = steps.iter().all(|s| s.allows(horizon));

    let outcome = |(s, rule): (&Step, &Gcra)| {
        // The state the call leaves: `L >= t_ns`.
        let level = if admitted { s.new } else { s.base };
        let used = level.saturating_sub(t_ns);
        let remaining = if used > s.tolerance {
            0
        } else {
            // Both sides non-negative: truncation is the floor.
            (s.tolerance - used)
                .checked_div(s.interval)
                .unwrap_or(0)
                .min(i128::from(rule.burst))
        };
        let violated = !s.allows(horizon);
        RuleOutcome {
            violated,
            remaining: saturate(remaining),
            retry_after: if violated {
                ceil_ms(s.new.saturating_sub(s.tolerance).saturating_sub(horizon))
            } else {
                -1
            },
            reset_after: ceil_ms(used),
        }
    };

    // An admitted reservation: when its units are due, `new_i - tau_i`,
    // latest first (ties to the lower index).
    let due = steps
        .iter()
        .enumerate()
        .map(|(i, s)| (i, s.new.saturating_sub(s.tolerance)))
        .reduce(|best, next| if next.1 > best.1 { next } else { best });
    let delay = due.map_or(0, |(_, at)| ceil_ms(at.saturating_sub(t_ns)).max(0));
    // The binding rule and its outcome, in one pass without collecting.
    let bound = match due {
        Some((i, _)) if admitted && reserve.is_some() && delay > 0 => steps
            .get(i)
            .zip(rules.get(i))
            .map(|pair| (i, outcome(pair))),
        _ => binding(steps.iter().zip(rules).map(outcome)),
    };
    let retry_after = match reserve {
        Some(_) if admitted => delay,
        _ => -1,
    };
    let decision = match bound.and_then(|(b, o)| rules.get(b).map(|rule| (b, rule, o))) {
        Some((b, rule, o)) => Decision {
            limited: !admitted,
            rule: b + 1,
            limit: rule.burst,
            remaining: o.remaining,
            retry_after: if admitted { retry_after } else { o.retry_after },
            reset_after: o.reset_after,
        },
        None => Decision {
            limited: false,
            rule: 1,
            limit: 0,
            remaining: 0,
            retry_after: -1,
            reset_after: 0,
        },
    };
    let new_tats = admitted.then(|| steps.iter().map(|s| as_u128_ns(s.new)).collect());
    Throttle { decision, new_tats }
}

/// The time `X` (Unix ms) until which an admitted RL.THROTTLE's key must
/// live: `ceil(max_i new_i / 10^6) + max(0, server_time - t)` — when every
/// bucket is full again, later by the caller's lag when its clock runs
/// behind the server's. Later than `server_time_ms` whenever `new_tats`
/// comes from an admitted [`decide`] (each new TAT is above `t_ns`).
/// Saturates at `i64::MAX`.
pub fn needed_until(new_tats: &[u128], server_time_ms: i64, t_ms: i64) -> i64 {
    let newest = new_tats.iter().copied().max().unwrap_or(0);
    let full = as_i128(newest.div_ceil(NS_PER_MS));
    let lag = (i128::from(server_time_ms) - i128::from(t_ms)).max(0);
    saturate(full.saturating_add(lag))
}

/// The grid window `W` of an RL.THROTTLE key (SPEC "Expiries on a grid"):
/// the longest bucket depth `ceil(max_i tau_i / 10^6)` ms, the time the
/// deepest bucket takes to refill.
pub fn grid_window(rules: &[Gcra]) -> i64 {
    let deepest = rules.iter().map(|r| r.tolerance_ns).max().unwrap_or(0);
    saturate(as_i128(deepest.div_ceil(NS_PER_MS)))
}

/// The expiry an admitted RL.THROTTLE sets on `key`: `None` keeps the key's
/// own `existing_expiry_ms` (at or after [`needed_until`]), else the first
/// point of the key's grid at or after it.
pub fn expire_at(
    key: &[u8],
    rules: &[Gcra],
    new_tats: &[u128],
    existing_expiry_ms: Option<i64>,
    server_time_ms: i64,
    t_ms: i64,
) -> Option<i64> {
    let x = needed_until(new_tats, server_time_ms, t_ms);
    Grid::new(key, grid_window(rules)).expiry(existing_expiry_ms, x)
}

/// The TATs (ns) after a refund of `cost` units at `t_ms`:
/// `TAT_i - T_i * cost`, or `None` when that is at most `t_ns` (the bucket is
/// full again: the field is removed) or the field was missing (it stays
/// missing). So a field present in `tats` and `None` here is to be deleted,
/// and the key with it when no field of any window is left. Same
/// preconditions as [`decide`].
pub fn refund(rules: &[Gcra], cost: i64, t_ms: i64, tats: &[Option<u128>]) -> Vec<Option<u128>> {
    let t_ns = i128::from(t_ms) * NS;
    let cost = i128::from(cost.max(0));
    rules
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            let tat = as_i128(tats.get(i).copied().flatten()?);
            let back = tat.saturating_sub(as_i128(rule.interval_ns).saturating_mul(cost));
            (back > t_ns).then(|| as_u128_ns(back))
        })
        .collect()
}

/// The TATs (ns) after a debit of `cost` units at `t_ms` (SPEC "Debits"):
/// `min(2 * (2^53-1) * 10^6, max(TAT_i, t_ns) + T_i * cost)` — the units
/// are recorded whether or not they fit, so a bucket may end up beyond its
/// tolerance (in debt), clamped to what [`parse_tat`] reads back. `cost` may
/// be any integer from 1 to 2^53-1 (`T_i * cost < 2^127`). Written as an
/// admission is: every named field, expiry by [`expire_at`].
pub fn debit(rules: &[Gcra], cost: i64, t_ms: i64, tats: &[Option<u128>]) -> Vec<u128> {
    let t_ns = i128::from(t_ms) * NS;
    let cost = i128::from(cost.max(0));
    rules
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            let tat = tats.get(i).copied().flatten().map_or(t_ns, as_i128);
            let new = tat
                .max(t_ns)
                .saturating_add(as_i128(rule.interval_ns).saturating_mul(cost));
            as_u128_ns(new).min(MAX_TAT_NS)
        })
        .collect()
}

/// `ceil(ns / 10^6)` in ms (also right for negative `ns`: truncation rounds
/// those up), saturated to `i64`.
fn ceil_ms(ns: i128) -> i64 {
    let q = ns / NS;
    saturate(if ns % NS > 0 { q + 1 } else { q })
}

fn saturate(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

fn as_i128(v: u128) -> i128 {
    i128::try_from(v).unwrap_or(i128::MAX)
}

/// Only for values known non-negative (0 otherwise).
fn as_u128_ns(v: i128) -> u128 {
    u128::try_from(v).unwrap_or(0)
}

/// Only for values known non-negative (0 otherwise).
fn as_u128(v: i64) -> u128 {
    u128::try_from(v).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::cmp::Reverse;

    const MS: u128 = NS_PER_MS;

    fn rule(burst: i64, count: i64, window: i64) -> Gcra {
        gcra(
            ThrottleRule {
                burst,
                count,
                window,
            },
            1,
        )
        .unwrap()
    }

    fn arg_err<T: std::fmt::Debug>(r: Result<T, Error>) -> String {
        match r {
            Err(Error::Arg(m)) => m,
            other => panic!("expected an argument error, got {other:?}"),
        }
    }

    /// One key: its rules and their fields, as the command layer keeps them.
    struct Bucket {
        rules: Vec<Gcra>,
        tats: Vec<Option<u128>>,
    }

    impl Bucket {
        fn new(rules: &[(i64, i64, i64)]) -> Self {
            let rules: Vec<Gcra> = rules.iter().map(|&(b, c, w)| rule(b, c, w)).collect();
            let tats = vec![None; rules.len()];
            Bucket { rules, tats }
        }
        /// RL.THROTTLE: decide, write when admitted.
        fn throttle(&mut self, cost: i64, t: i64) -> [i64; 6] {
            let r = decide(&self.rules, cost, t, &self.tats);
            assert_eq!(r.new_tats.is_some(), !r.decision.limited);
            if let Some(new) = r.new_tats {
                self.tats = new.into_iter().map(Some).collect();
            }
            r.decision.reply()
        }
        /// RL.THROTTLEPEEK.
        fn peek(&self, cost: i64, t: i64) -> [i64; 6] {
            decide(&self.rules, cost, t, &self.tats).decision.reply()
        }
        /// RL.THROTTLE ... REFUND: its reply is the state now, the peek
        /// with COST 0 after the refund.
        fn refund(&mut self, cost: i64, t: i64) -> [i64; 6] {
            self.tats = refund(&self.rules, cost, t, &self.tats);
            self.peek(0, t)
        }
    }

    #[test]
    fn spec_example() {
        let mut b = Bucket::new(&[(2, 2, 1000)]);
        assert_eq!(b.throttle(1, 5000), [0, 1, 2, 1, -1, 500]);
        assert_eq!(b.throttle(1, 5000), [0, 1, 2, 0, -1, 1000]);
        assert_eq!(b.throttle(1, 5000), [1, 1, 2, 0, 500, 1000]);
        assert_eq!(b.tats, vec![Some(6000 * MS)]);
        assert_eq!(b.throttle(1, 5499), [1, 1, 2, 0, 1, 501]);
        assert_eq!(b.throttle(1, 5500), [0, 1, 2, 0, -1, 1000]);
    }

    #[test]
    fn replies_table() {
        struct Case {
            name: &'static str,
            rules: Vec<(i64, i64, i64)>,
            tats: Vec<Option<u128>>,
            cost: i64,
            t: i64,
            want: [i64; 6],
        }
        let t = 1_000_000;
        let t_ns = t as u128 * MS;
        let cases = vec![
            Case {
                name: "full bucket",
                rules: vec![(1, 1, 1000)],
                tats: vec![None],
                cost: 1,
                t,
                want: [0, 1, 1, 0, -1, 1000],
            },
            Case {
                name: "TAT exactly now: full",
                rules: vec![(1, 1, 1000)],
                tats: vec![Some(t_ns)],
                cost: 1,
                t,
                want: [0, 1, 1, 0, -1, 1000],
            },
            Case {
                name: "TAT 1 ns after now: refused for 1 ms",
                rules: vec![(1, 1, 1000)],
                tats: vec![Some(t_ns + 1)],
                cost: 1,
                t,
                want: [1, 1, 1, 0, 1, 1],
            },
            Case {
                name: "stale TAT long past: full",
                rules: vec![(1, 1, 1000)],
                tats: vec![Some(0)],
                cost: 1,
                t,
                want: [0, 1, 1, 0, -1, 1000],
            },
            Case {
                name: "cost = burst on a full bucket",
                rules: vec![(5, 5, 1000)],
                tats: vec![None],
                cost: 5,
                t,
                want: [0, 1, 5, 0, -1, 1000],
            },
            Case {
                name: "cost = burst after one unit: refused",
                rules: vec![(5, 5, 1000)],
                tats: vec![Some(t_ns + 200 * MS)],
                cost: 5,
                t,
                want: [1, 1, 5, 4, 200, 200],
            },
            Case {
                name: "one of two rules refuses: binding is the violated one",
                rules: vec![(10, 10, 1000), (2, 2, 60000)],
                tats: vec![Some(t_ns + 200 * MS), Some(t_ns + 60000 * MS)],
                cost: 1,
                t,
                want: [1, 2, 2, 0, 30000, 60000],
            },
            Case {
                name: "two violated: the largest retry_after binds",
                rules: vec![(1, 1, 1000), (1, 1, 5000), (100, 100, 1000 - 1)],
                tats: vec![Some(t_ns + 1000 * MS), Some(t_ns + 5000 * MS), None],
                cost: 1,
                t,
                want: [1, 2, 1, 0, 5000, 5000],
            },
            Case {
                name: "violated tie: lower index",
                rules: vec![(1, 2, 2000), (1, 1, 1000)],
                tats: vec![Some(t_ns + 700 * MS), Some(t_ns + 700 * MS)],
                cost: 1,
                t,
                want: [1, 1, 1, 0, 700, 700],
            },
            Case {
                name: "admitted: remaining tie goes to the larger reset_after",
                rules: vec![(2, 2, 1000), (2, 2, 60000)],
                tats: vec![None, None],
                cost: 1,
                t,
                want: [0, 2, 2, 1, -1, 30000],
            },
            Case {
                name: "admitted: smallest remaining binds",
                rules: vec![(2, 2, 60000), (10, 10, 1000)],
                tats: vec![None, Some(t_ns + 850 * MS)],
                cost: 1,
                t,
                want: [0, 2, 10, 0, -1, 950],
            },
            Case {
                name: "admitted full tie: lower index",
                rules: vec![(3, 3, 3000), (3, 1, 1000)],
                tats: vec![None, None],
                cost: 1,
                t,
                want: [0, 1, 3, 2, -1, 1000],
            },
            Case {
                name: "3 per second: T = 333333333 ns, reset rounds up",
                rules: vec![(3, 3, 1000)],
                tats: vec![None],
                cost: 1,
                t,
                want: [0, 1, 3, 2, -1, 334],
            },
            Case {
                name: "3 per second drained: retry rounds up",
                rules: vec![(3, 3, 1000)],
                tats: vec![Some(t_ns + 999_999_999)],
                cost: 1,
                t,
                want: [1, 1, 3, 0, 334, 1000],
            },
            Case {
                name: "over-full state (burst lowered): remaining clamps at 0",
                rules: vec![(1, 1, 1000)],
                tats: vec![Some(t_ns + 5000 * MS)],
                cost: 1,
                t,
                want: [1, 1, 1, 0, 5000, 5000],
            },
            Case {
                name: "now 0",
                rules: vec![(1, 1, 1)],
                tats: vec![None],
                cost: 1,
                t: 0,
                want: [0, 1, 1, 0, -1, 1],
            },
            Case {
                name: "T of 1 ns, huge burst",
                rules: vec![(MAX_SAFE, 1_000_000, 1)],
                tats: vec![None],
                cost: MAX_SAFE - 1,
                t,
                want: [0, 1, MAX_SAFE, 1, -1, 9_007_199_255],
            },
        ];
        for c in cases {
            let rules: Vec<Gcra> = c.rules.iter().map(|&(b, n, w)| rule(b, n, w)).collect();
            let got = decide(&rules, c.cost, c.t, &c.tats);
            assert_eq!(got.decision.reply(), c.want, "{}", c.name);
            assert_eq!(got.new_tats.is_some(), c.want[0] == 0, "{}", c.name);
        }
    }

    #[test]
    fn refill_at_exactly_one_interval() {
        let mut b = Bucket::new(&[(1, 1, 1000)]);
        assert_eq!(b.throttle(1, 10_000), [0, 1, 1, 0, -1, 1000]);
        assert_eq!(b.throttle(1, 10_999), [1, 1, 1, 0, 1, 1]);
        assert_eq!(b.throttle(1, 11_000), [0, 1, 1, 0, -1, 1000]);
        // A TAT 1 ns past now refuses, exactly now admits.
        let r = rule(1, 1, 1000);
        assert!(decide(&[r], 1, 5, &[Some(5 * MS + 1)]).decision.limited);
        assert!(!decide(&[r], 1, 5, &[Some(5 * MS)]).decision.limited);
    }

    #[test]
    fn uneven_interval_rounding() {
        let mut b = Bucket::new(&[(3, 3, 1000)]);
        assert_eq!(b.rules[0].interval_ns, 333_333_333);
        assert_eq!(b.rules[0].tolerance_ns, 999_999_999);
        assert_eq!(b.throttle(1, 0), [0, 1, 3, 2, -1, 334]);
        assert_eq!(b.throttle(2, 0), [0, 1, 3, 0, -1, 1000]);
        assert_eq!(b.throttle(1, 0), [1, 1, 3, 0, 334, 1000]);
        assert_eq!(b.throttle(1, 333), [1, 1, 3, 0, 1, 667]);
        assert_eq!(b.throttle(1, 334), [0, 1, 3, 0, -1, 1000]);
        // Three more whole intervals (999.999999 ms) refill it: full at 1334.
        assert_eq!(b.peek(3, 1333), [1, 1, 3, 2, 1, 1]);
        assert_eq!(b.peek(3, 1334), [0, 1, 3, 0, -1, 1000]);
    }

    #[test]
    fn rejection_writes_nothing() {
        let mut b = Bucket::new(&[(10, 10, 1000), (1, 1, 60000)]);
        assert_eq!(b.throttle(1, 0)[0], 0);
        let before = b.tats.clone();
        assert_eq!(b.throttle(1, 100), [1, 2, 1, 0, 59900, 59900]);
        assert_eq!(b.tats, before);
        assert!(decide(&b.rules, 1, 100, &b.tats).new_tats.is_none());
    }

    #[test]
    fn refunds() {
        let mut b = Bucket::new(&[(5, 5, 1000)]);
        assert_eq!(b.throttle(3, 0), [0, 1, 5, 2, -1, 600]);
        // Partial: one unit back; the reply is the state now (3 can pass).
        assert_eq!(b.refund(1, 0), [0, 1, 5, 3, -1, 400]);
        assert_eq!(b.tats, vec![Some(400 * MS)]);
        // Partial, 100 ms later: TAT 200 ms > now 100 ms stays.
        assert_eq!(b.refund(1, 100), [0, 1, 5, 4, -1, 100]);
        assert_eq!(b.tats, vec![Some(200 * MS)]);
        // More than the key holds: never beyond a full bucket, field removed.
        // (The reply is the state now: a full bucket.)
        assert_eq!(b.refund(5, 100), [0, 1, 5, 5, -1, 0]);
        assert_eq!(b.tats, vec![None]);
        // A missing field stays missing.
        assert_eq!(b.refund(1, 100), [0, 1, 5, 5, -1, 0]);
        assert_eq!(b.tats, vec![None]);
        // Reaching exactly now removes the field.
        assert_eq!(refund(&b.rules, 1, 0, &[Some(200 * MS)]), vec![None]);
        assert_eq!(refund(&b.rules, 1, 0, &[Some(200 * MS + 1)]), vec![Some(1)]);
        // A stale field is removed.
        assert_eq!(refund(&b.rules, 1, 5000, &[Some(4000 * MS)]), vec![None]);
        // Per rule: one field removed, the other kept.
        let mut b = Bucket::new(&[(10, 10, 1000), (2, 2, 60000)]);
        b.throttle(1, 0);
        b.throttle(1, 0);
        assert_eq!(b.tats, vec![Some(200 * MS), Some(60000 * MS)]);
        assert_eq!(b.refund(1, 150), [0, 2, 2, 1, -1, 29850]);
        assert_eq!(b.tats, vec![None, Some(30000 * MS)]);
        // Saturates at zero, never wraps.
        assert_eq!(
            refund(&[rule(1, 1, MAX_SAFE)], 1, 0, &[Some(5)]),
            vec![None]
        );
    }

    #[test]
    fn cost_0_answers_the_state_now() {
        // Burst 2, T = 500 ms, tau = 1000 ms.
        let r = [rule(2, 2, 1000)];
        let t = 5000;
        let now = |tat: Option<u128>| decide(&r, 0, t, &[tat]);
        // Empty (no field): a full bucket.
        assert_eq!(now(None).decision.reply(), [0, 1, 2, 2, -1, 0]);
        // An old TAT is a full bucket too.
        assert_eq!(now(Some(10 * MS)).decision.reply(), [0, 1, 2, 2, -1, 0]);
        // Emptied: nothing can pass, nothing is over.
        assert_eq!(
            now(Some(6000 * MS)).decision.reply(),
            [0, 1, 2, 0, -1, 1000]
        );
        // In debt (TAT 2.5 s ahead): limited until it is back at tau.
        assert_eq!(
            now(Some(7500 * MS)).decision.reply(),
            [1, 1, 2, 0, 1500, 2500]
        );
        // A peek with cost 0 writes nothing even when "admitted".
        assert_eq!(
            now(Some(6000 * MS)).new_tats.map(|t| t.to_vec()),
            Some(vec![6000 * MS])
        );
    }

    #[test]
    fn a_debit_3x_the_burst_and_the_exact_time_the_key_admits_again() {
        // Burst 2, T = 500 ms, tau = 1000 ms: a debit of 6 at 5000 ms
        // leaves TAT = 8000 ms, 2000 ms beyond the tolerance.
        let mut b = Bucket::new(&[(2, 2, 1000)]);
        b.tats = debit(&b.rules, 6, 5000, &b.tats)
            .into_iter()
            .map(Some)
            .collect();
        assert_eq!(b.tats, vec![Some(8000 * MS)]);
        // The state now: over the limit for 2000 ms.
        assert_eq!(b.peek(0, 5000), [1, 1, 2, 0, 2000, 3000]);
        // A request of 1 waits until TAT + T - tau = 7500 ms.
        assert_eq!(b.peek(1, 5000), [1, 1, 2, 0, 2500, 3000]);
        assert_eq!(b.throttle(1, 7499)[0], 1);
        assert_eq!(b.throttle(1, 7500), [0, 1, 2, 0, -1, 1000]);
        // A debit on a bucket already in debt adds on top; never refused.
        let mut b = Bucket::new(&[(2, 2, 1000), (10, 1, 60_000)]);
        b.throttle(1, 0);
        let new = debit(&b.rules, 6, 0, &b.tats);
        assert_eq!(new, vec![3500 * MS, 420_000 * MS]);
        // The faster rule is in debt (3500 ms > tau 1000 ms), the slower
        // one is not (420 s < tau 600 s): the faster binds, 3000 ms.
        b.tats = new.into_iter().map(Some).collect();
        assert_eq!(b.peek(1, 0), [1, 1, 2, 0, 3000, 3500]);
        assert_eq!(b.peek(0, 0), [1, 1, 2, 0, 2500, 3500]);
        // Clamped to the storable range.
        let top = debit(&[rule(1, 1, MAX_SAFE)], MAX_SAFE, MAX_SAFE, &[None]);
        assert_eq!(top, vec![MAX_TAT_NS]);
        // A refund of the same cost undoes a debit.
        let mut b = Bucket::new(&[(2, 2, 1000)]);
        b.throttle(1, 5000);
        let before = b.tats.clone();
        b.tats = debit(&b.rules, 40, 5000, &b.tats)
            .into_iter()
            .map(Some)
            .collect();
        b.tats = refund(&b.rules, 40, 5000, &b.tats);
        assert_eq!(b.tats, before);
    }

    impl Bucket {
        /// RL.THROTTLE ... RESERVE max_wait: decide, write when admitted.
        fn reserve(&mut self, cost: i64, t: i64, max_wait: i64) -> [i64; 6] {
            let r = decide_reserving(&self.rules, cost, t, &self.tats, Some(max_wait));
            if let Some(new) = r.new_tats {
                self.tats = new.into_iter().map(Some).collect();
            }
            r.decision.reply()
        }
    }

    #[test]
    fn a_chain_of_reservations_at_one_instant() {
        // Burst 1, one per 100 ms: T = tau = 100 ms, a whole number of ms.
        let mut b = Bucket::new(&[(1, 1, 100)]);
        let t = 1000;
        let chain: Vec<[i64; 6]> = (0..5).map(|_| b.reserve(1, t, 10_000)).collect();
        assert_eq!(
            chain,
            [
                [0, 1, 1, 0, 0, 100],
                [0, 1, 1, 0, 100, 200],
                [0, 1, 1, 0, 200, 300],
                [0, 1, 1, 0, 300, 400],
                [0, 1, 1, 0, 400, 500],
            ]
        );
        assert_eq!(b.tats, vec![Some(1500 * MS)]);
        // The last gives up: a refund of its cost cancels it, and the next
        // reservation takes its place.
        b.refund(1, t);
        assert_eq!(b.tats, vec![Some(1400 * MS)]);
        assert_eq!(b.reserve(1, t, 10_000), [0, 1, 1, 0, 400, 500]);
        // A wait longer than accepted: rejected, nothing written, and the
        // retry is when this call with this max_wait would pass.
        let before = b.tats.clone();
        assert_eq!(b.reserve(1, t, 450), [1, 1, 1, 0, 50, 500]);
        assert_eq!(b.tats, before);
        assert_eq!(b.reserve(1, t + 49, 450)[0], 1);
        assert_eq!(b.reserve(1, t + 50, 450), [0, 1, 1, 0, 450, 550]);
        // Exactly max_wait is admitted.
        let mut b = Bucket::new(&[(1, 1, 100)]);
        b.reserve(1, t, 0);
        assert_eq!(b.reserve(1, t, 100), [0, 1, 1, 0, 100, 200]);
    }

    #[test]
    fn reserve_0_is_an_ordinary_call_that_answers_0() {
        let mut plain = Bucket::new(&[(2, 2, 1000)]);
        let mut reserved = Bucket::new(&[(2, 2, 1000)]);
        for t in [5000, 5000, 5000, 5400, 5500, 5500, 9000] {
            let a = plain.throttle(1, t);
            let b = reserved.reserve(1, t, 0);
            assert_eq!(a[..4], b[..4], "at {t}");
            assert_eq!(a[5], b[5], "at {t}");
            assert_eq!(b[4], if a[0] == 0 { 0 } else { a[4] }, "at {t}");
            assert_eq!(plain.tats, reserved.tats);
        }
    }

    #[test]
    fn a_reservation_binds_the_rule_with_the_largest_delay() {
        // Rule 1: burst 3, T 100 ms; rule 2: burst 1, T 250 ms.
        let mut b = Bucket::new(&[(3, 30, 3000), (1, 4, 1000)]);
        assert_eq!(b.reserve(1, 0, 1000), [0, 2, 1, 0, 0, 250]);
        // Rule 2 is due at 250 ms, rule 1 at once: rule 2 binds.
        assert_eq!(b.reserve(1, 0, 1000), [0, 2, 1, 0, 250, 500]);
        // Delays compared in exact ns before rounding. Rule 1: T = tau =
        // 100 ms; rule 2: T = 50 ms, tau = 100 ms. Both due at t + 100 ms:
        // the lower index binds.
        let rules = [rule(1, 10, 1000), rule(2, 40, 2000)];
        let t = 1000;
        let tats = [Some(1100 * MS), Some(1150 * MS)];
        let r = decide_reserving(&rules, 1, t, &tats, Some(5000));
        assert_eq!(r.decision.reply(), [0, 1, 1, 0, 100, 200]);
        // One ns later for rule 2: it binds, and the delay rounds up.
        let tats = [Some(1100 * MS), Some(1150 * MS + 1)];
        let r = decide_reserving(&rules, 1, t, &tats, Some(5000));
        assert_eq!(r.decision.reply(), [0, 2, 2, 0, 101, 201]);
        // A rejected reservation: the violated rule with the largest wait.
        let r = decide_reserving(&rules, 1, t, &[Some(9000 * MS), None], Some(10));
        assert_eq!(r.decision.reply()[..2], [1, 1]);
        assert!(r.new_tats.is_none());
    }

    #[test]
    fn a_reservation_never_stores_beyond_the_storable_range() {
        // t + max_wait <= 2^53-1 (the parser's rule): new - tau <= that.
        let r = rule(1, 1, MAX_SAFE);
        let t = MAX_SAFE / 2;
        let got = decide_reserving(&[r], 1, t, &[Some(MAX_TAT_NS - 1)], Some(MAX_SAFE - t));
        if let Some(new) = got.new_tats {
            assert!(new.iter().all(|&n| n <= MAX_TAT_NS));
        }
        let got = decide_reserving(&[r], 1, t, &[None], Some(MAX_SAFE - t));
        assert_eq!(got.decision.retry_after, 0);
    }

    #[test]
    fn rule_validation() {
        let bad = |burst, count, window, n| {
            arg_err(gcra(
                ThrottleRule {
                    burst,
                    count,
                    window,
                },
                n,
            ))
        };
        assert_eq!(
            bad(1, 5_000_000_000, 1, 3),
            "invalid rule 3: count 5000000000 over window 1 gives an emission interval below 1 ns"
        );
        assert!(bad(1, 1_000_001, 1, 1).contains("below 1 ns"));
        assert_eq!(rule(1, 1_000_000, 1).interval_ns, 1);
        // The tolerance cap, exactly at the boundary.
        let top = rule(1, 1, MAX_SAFE);
        assert_eq!(top.interval_ns, MAX_TOLERANCE_NS);
        assert_eq!(top.tolerance_ns, MAX_TOLERANCE_NS);
        assert_eq!(
            bad(2, 1, MAX_SAFE, 2),
            "invalid rule 2: burst 2 * emission interval 9007199254740991000000 ns (count 1 over window 9007199254740991) is above 9007199254740991 ms"
        );
        assert_eq!(
            rule(MAX_SAFE, 1, 1).tolerance_ns,
            MAX_TOLERANCE_NS,
            "T = 1 ms, burst 2^53-1"
        );
        assert!(bad(MAX_SAFE, 1, 2, 1).contains("above"));
        assert_eq!(
            rule(MAX_SAFE, MAX_SAFE, MAX_SAFE).tolerance_ns,
            MAX_TOLERANCE_NS
        );
        // Largest inputs: no overflow in T * burst.
        assert!(bad(MAX_SAFE, 1, MAX_SAFE, 1).contains("above"));
        // Ranges, should a caller skip the parser.
        assert_eq!(
            bad(0, 1, 1, 4),
            "invalid burst '0' for rule 4: expected an integer from 1 to 9007199254740991"
        );
        assert!(bad(1, -1, 1, 1).contains("count '-1'"));
        assert!(bad(1, 1, MAX_SAFE + 1, 1).contains("window '9007199254740992'"));
    }

    #[test]
    fn top_of_the_range() {
        let top = MAX_SAFE;
        let mut b = Bucket::new(&[(1, 1, top)]);
        assert_eq!(b.throttle(1, top), [0, 1, 1, 0, -1, top]);
        assert_eq!(b.tats, vec![Some(MAX_TAT_NS)]);
        assert_eq!(b.throttle(1, top), [1, 1, 1, 0, top, top]);
        assert_eq!(needed_until(&[MAX_TAT_NS], top, top), 2 * top);
        // The largest stored TAT read at now 0.
        assert_eq!(b.peek(1, 0), [1, 1, 1, 0, 2 * top, 2 * top]);
        // Caller far behind a server: saturates rather than wraps.
        assert_eq!(needed_until(&[MAX_TAT_NS], i64::MAX, 0), i64::MAX);
        // Full bucket with a 1 ms interval and burst 2^53-1 at the top of time.
        let mut b = Bucket::new(&[(top, 1, 1)]);
        assert_eq!(b.throttle(top, top), [0, 1, top, 0, -1, top]);
        assert_eq!(b.throttle(1, top), [1, 1, top, 0, 1, top]);
        assert_eq!(b.throttle(1, top), [1, 1, top, 0, 1, top]);
        // Misuse (cost beyond the burst, foreign huge TAT) does not panic.
        let r = rule(1, 1, top);
        let d = decide(&[r], i64::MAX, top, &[Some(u128::MAX)]).decision;
        assert!(d.limited);
        assert_eq!(d.retry_after, i64::MAX);
        let d = decide(&[r], -5, -5, &[None]).decision;
        assert_eq!(d.reply(), [0, 1, 1, 1, -1, 0]);
        assert_eq!(decide(&[], 1, 0, &[]).decision.reply(), [0, 1, 0, 0, -1, 0]);
        assert_eq!(
            decide(&[r, r], 1, 0, &[]).new_tats.map(|v| v.len()),
            Some(2)
        );
    }

    #[test]
    fn decide_uses_only_the_tats_it_is_given() {
        // A call with rules (1 s, 60 s) leaves both fields; a later call naming
        // only the 60 s rule sees only that field.
        let mut long = Bucket::new(&[(2, 2, 1000), (3, 3, 60000)]);
        long.throttle(2, 0);
        assert_eq!(long.tats, vec![Some(1000 * MS), Some(40000 * MS)]);
        let mut short = Bucket {
            rules: vec![long.rules[1]],
            tats: vec![long.tats[1]],
        };
        assert_eq!(short.throttle(1, 0), [0, 1, 3, 0, -1, 60000]);
        assert_eq!(short.tats, vec![Some(60000 * MS)]);
        // The 1 s rule alone, from its own field: empty, refused.
        let one = decide(&long.rules[..1], 1, 0, &long.tats[..1]);
        assert_eq!(one.decision.reply(), [1, 1, 2, 0, 500, 1000]);
    }

    #[test]
    fn expiry() {
        let r = rule(2, 2, 1000);
        let t = 1_000_000;
        let new = decide(&[r], 1, t, &[None]).new_tats.unwrap();
        // A caller 10 s behind the server: the state is kept 10 s longer.
        assert_eq!(needed_until(&new, t + 10_000, t), t + 10_500);
        assert_eq!(needed_until(&new, t, t), t + 500);
        // A caller ahead of the server: no lag added.
        assert_eq!(needed_until(&new, t - 10_000, t), t + 500);
        // The largest new TAT decides; rounded up.
        assert_eq!(needed_until(&[5 * MS, 7 * MS + 1], 0, 0), 8);
    }

    #[test]
    fn expiry_on_the_grid() {
        // Burst 2 of 2 a second: tau = 1 s, W = 1000 ms, g = 125 ms.
        let r = rule(2, 2, 1000);
        assert_eq!(grid_window(&[r]), 1000);
        let key = b"bucket";
        let grid = Grid::new(key, 1000);
        assert_eq!(grid.step, 125);
        let o = grid.offset;
        let t = 1_000_000 + o; // X = t + 500 lies on a grid point
        let new = decide(&[r], 1, t, &[None]).new_tats.unwrap();
        assert_eq!((t + 500 - o) % 125, 0);
        // A new key: X itself when X is a grid point.
        assert_eq!(expire_at(key, &[r], &new, None, t, t), Some(t + 500));
        // One ms later X is past the point: the next point, 124 ms on.
        let new1 = decide(&[r], 1, t + 1, &[None]).new_tats.unwrap();
        assert_eq!(
            expire_at(key, &[r], &new1, None, t + 1, t + 1),
            Some(t + 625)
        );
        // An expiry at or after X stays (None); one ms short of X moves.
        assert_eq!(expire_at(key, &[r], &new, Some(t + 500), t, t), None);
        assert_eq!(expire_at(key, &[r], &new, Some(t + 99_999), t, t), None);
        assert_eq!(
            expire_at(key, &[r], &new, Some(t + 499), t, t),
            Some(t + 500)
        );
        // W from the deepest bucket, not the longest window: burst 10 of 1
        // per 100 ms is a 1 s bucket; burst 1 of 60 per minute a 1 s one.
        let deep = rule(10, 1, 100);
        let wide = rule(1, 60, 60_000);
        assert_eq!(grid_window(&[deep]), 1000);
        assert_eq!(grid_window(&[wide, deep]), 1000);
        assert_eq!(grid_window(&[rule(3, 3, 1)]), 1);
        // A fractional depth rounds up: 1 of 3 per 1 ms, tau = 333 334 ns.
        assert_eq!(grid_window(&[rule(1, 3, 1)]), 1);
        assert_eq!(grid_window(&[rule(7, 3, 10)]), 24); // tau = 7 * 3 333 333 ns
                                                        // Saturates at the top of time instead of wrapping.
        let top = MAX_SAFE;
        assert_eq!(
            expire_at(key, &[rule(1, 1, top)], &[MAX_TAT_NS], None, i64::MAX, 0),
            Some(i64::MAX)
        );
    }

    #[test]
    fn tat_codec() {
        let mut buf = [0u8; TAT_BUF_LEN];
        for v in [
            0,
            1,
            9,
            10,
            1_000_000,
            u128::from(u64::MAX),
            u128::from(u64::MAX) + 1,
            MAX_TOLERANCE_NS,
            MAX_TAT_NS,
        ] {
            let text = format_tat(v, &mut buf);
            assert_eq!(text, v.to_string().as_bytes());
            assert_eq!(parse_tat(text), Some(v), "{v}");
        }
        assert_eq!(
            format_tat(u128::MAX, &mut buf),
            u128::MAX.to_string().as_bytes()
        );
        assert_eq!(
            parse_tat(b"18014398509481982000000"),
            Some(18_014_398_509_481_982_000_000)
        );
        let long = "9".repeat(1000);
        for bad in [
            "",
            "+1",
            "-1",
            "01",
            "00",
            "-0",
            " 1",
            "1 ",
            "1.0",
            "1e3",
            "0x10",
            "abc",
            "18014398509481982000001",
            "99999999999999999999999999999999999999999",
            "٣",
            long.as_str(),
        ] {
            assert_eq!(parse_tat(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse_tat(b"\xff"), None);
        assert_eq!(field_name(60000, &mut [0; 20]), b"60000");
        assert_eq!(field_name(MAX_SAFE, &mut [0; 20]), b"9007199254740991");
        assert_eq!(
            stored_error(b"k", b"60000", b"abc").reply_text(),
            "ERR hash at 'k' field '60000' holds 'abc', not a theoretical arrival time in ns (a decimal integer from 0 to 18014398509481982000000)"
        );
    }

    // ---- Model test -------------------------------------------------------

    /// The same GCRA in its continuous-state leaky-bucket form (ITU-T I.371):
    /// a bucket content `x` ns drained at 1 ns per ns since the last
    /// conformance time `lct`; a request of `c` units conforms iff
    /// `max(0, x - (t - lct)) + c*T <= tau`, and then the bucket takes `c*T`.
    /// `None` is an empty bucket with no history. Built from the raw triple,
    /// not from [`gcra`].
    struct LeakyBucket {
        interval: i128,
        tolerance: i128,
        burst: i64,
        state: Option<(i128, i128)>,
    }

    impl LeakyBucket {
        fn new(burst: i64, count: i64, window: i64) -> Self {
            let interval = i128::from(window) * 1_000_000 / i128::from(count);
            LeakyBucket {
                interval,
                tolerance: interval * i128::from(burst),
                burst,
                state: None,
            }
        }
        /// Content at `t` (ns) after draining; a clock going back refills nothing.
        fn content(&self, t: i128) -> i128 {
            self.state.map_or(0, |(x, lct)| (x - (t - lct)).max(0))
        }
        fn tat(&self) -> Option<u128> {
            self.state.map(|(x, lct)| (x + lct) as u128)
        }
    }

    fn div_ceil_ms(ns: i128) -> i64 {
        ((ns + 999_999).div_euclid(1_000_000)) as i64
    }

    /// The model's RL.THROTTLE (applied when `apply`) / RL.THROTTLEPEEK,
    /// with `RESERVE wait` when `wait` is given: a request conforms when
    /// its bucket overflows by at most the wait, `x + c*T - tau <= wait`.
    fn model_throttle(
        buckets: &mut [LeakyBucket],
        cost: i64,
        t: i64,
        apply: bool,
        wait: Option<i64>,
    ) -> [i64; 6] {
        let t_ns = i128::from(t) * 1_000_000;
        let wait_ns = i128::from(wait.unwrap_or(0)) * 1_000_000;
        let c = i128::from(cost);
        let xs: Vec<i128> = buckets.iter().map(|b| b.content(t_ns)).collect();
        // How long each bucket overflows after taking the request, in ns.
        let over: Vec<i128> = buckets
            .iter()
            .zip(&xs)
            .map(|(b, &x)| x + c * b.interval - b.tolerance)
            .collect();
        let conform: Vec<bool> = over.iter().map(|&o| o <= wait_ns).collect();
        let admitted = conform.iter().all(|&ok| ok);
        // (remaining, retry_after, reset_after) per rule.
        let rows: Vec<(i64, i64, i64)> = buckets
            .iter()
            .zip(&xs)
            .map(|(b, &x)| {
                let after = if admitted { x + c * b.interval } else { x };
                let remaining = (b.tolerance - after)
                    .div_euclid(b.interval)
                    .clamp(0, i128::from(b.burst)) as i64;
                let retry = div_ceil_ms(x + c * b.interval - b.tolerance - wait_ns);
                (remaining, retry, div_ceil_ms(after))
            })
            .collect();
        let n = buckets.len();
        let latest = (0..n).max_by_key(|&i| (over[i], Reverse(i))).unwrap();
        let delay = div_ceil_ms(over[latest]).max(0);
        let b = if admitted && wait.is_some() && delay > 0 {
            latest
        } else if admitted {
            (0..n)
                .min_by_key(|&i| (rows[i].0, Reverse(rows[i].2), i))
                .unwrap()
        } else {
            (0..n)
                .filter(|&i| !conform[i])
                .max_by_key(|&i| (rows[i].1, Reverse(i)))
                .unwrap()
        };
        if admitted && apply {
            for (bucket, &x) in buckets.iter_mut().zip(&xs) {
                bucket.state = Some((x + c * bucket.interval, t_ns));
            }
        }
        [
            i64::from(!admitted),
            b as i64 + 1,
            buckets[b].burst,
            rows[b].0,
            match (admitted, wait) {
                (true, Some(_)) => delay,
                (true, None) => -1,
                (false, _) => rows[b].1,
            },
            rows[b].2,
        ]
    }

    /// The model's debit: the bucket takes `c*T` whether or not it
    /// overflows, up to the storable TAT.
    fn model_debit(buckets: &mut [LeakyBucket], cost: i64, t: i64) {
        let t_ns = i128::from(t) * 1_000_000;
        for b in buckets.iter_mut() {
            let x = b.content(t_ns) + i128::from(cost) * b.interval;
            b.state = Some((x.min(MAX_TAT_NS as i128 - t_ns), t_ns));
        }
    }

    /// The model's refund: the bucket gives back `c*T`; empty means no state.
    fn model_refund(buckets: &mut [LeakyBucket], cost: i64, t: i64) {
        let t_ns = i128::from(t) * 1_000_000;
        for b in buckets.iter_mut() {
            if b.state.is_some() {
                let x = b.content(t_ns) - i128::from(cost) * b.interval;
                b.state = (x > 0).then_some((x, t_ns));
            }
        }
    }

    /// Checks what `retry_after` and `remaining` promise, by asking again.
    fn probe(rules: &[Gcra], tats: &[Option<u128>], cost: i64, t: i64, d: &Decision) {
        if d.limited {
            let at = t + d.retry_after;
            assert!(d.retry_after >= 1);
            assert!(decide(rules, cost, at - 1, tats).decision.limited, "early");
            assert!(!decide(rules, cost, at, tats).decision.limited, "late");
        } else {
            assert_eq!(d.retry_after, -1);
        }
        // `remaining` units pass the binding rule at once, one more does not.
        let b = d.rule - 1;
        let (r, s) = (&rules[b..=b], &tats[b..=b]);
        let state: Vec<Option<u128>> = if d.limited {
            s.to_vec()
        } else {
            decide(r, cost, t, s)
                .new_tats
                .unwrap()
                .into_iter()
                .map(Some)
                .collect()
        };
        if d.remaining > 0 {
            assert!(!decide(r, d.remaining, t, &state).decision.limited);
        }
        assert!(decide(r, d.remaining + 1, t, &state).decision.limited);
    }

    #[test]
    fn model_agrees_on_random_timelines() {
        let mut rng = StdRng::seed_from_u64(0x5EED_6C8A);
        let mut buf = [0u8; TAT_BUF_LEN];
        let (mut admissions, mut rejections, mut refunds) = (0u32, 0u32, 0u32);
        let (mut debits, mut reservations, mut delayed) = (0u32, 0u32, 0u32);
        for timeline in 0..2000 {
            let top = timeline % 10 == 9;
            let with_refunds = timeline % 2 == 0;
            // Rules with distinct windows, kept only when valid.
            let mut triples: Vec<(i64, i64, i64)> = Vec::new();
            let rule_count = rng.gen_range(1..=3);
            while triples.len() < rule_count {
                let (burst, count, window) = if top {
                    (
                        rng.gen_range(1..=3),
                        rng.gen_range(1..=10),
                        rng.gen_range(MAX_SAFE / 4..=MAX_SAFE),
                    )
                } else {
                    (
                        rng.gen_range(1..=6),
                        rng.gen_range(1..=7),
                        rng.gen_range(1..=3000),
                    )
                };
                let ok = gcra(
                    ThrottleRule {
                        burst,
                        count,
                        window,
                    },
                    1,
                )
                .is_ok();
                if ok && triples.iter().all(|&(_, _, w)| w != window) {
                    triples.push((burst, count, window));
                }
            }
            let mut bucket = Bucket::new(&triples);
            let mut model: Vec<LeakyBucket> = triples
                .iter()
                .map(|&(b, c, w)| LeakyBucket::new(b, c, w))
                .collect();
            let min_burst = triples.iter().map(|t| t.0).min().unwrap();
            let (scale, mut t) = if top {
                (MAX_SAFE / 8, rng.gen_range(0..=MAX_SAFE))
            } else {
                (1, rng.gen_range(0..=1_000_000))
            };
            // (t, units admitted) of every state-changing call, for the
            // rate bound below.
            let mut history: Vec<(i64, i64)> = Vec::new();
            for _ in 0..50 {
                let step: i64 = match rng.gen_range(0..10) {
                    0 => 0,
                    1 => -rng.gen_range(1..=800),
                    2 => rng.gen_range(0..=10_000),
                    _ => rng.gen_range(0..=600),
                };
                t = t
                    .saturating_add(step.saturating_mul(scale))
                    .clamp(0, MAX_SAFE);
                let cost = rng.gen_range(1..=min_burst);
                let action = rng.gen_range(0..20);
                if with_refunds && action < 3 {
                    bucket.refund(cost, t);
                    model_refund(&mut model, cost, t);
                    refunds += 1;
                } else if with_refunds && action == 3 {
                    // A debit, up to 3x the smallest burst; its reply is
                    // the state now.
                    let cost = rng.gen_range(1..=min_burst.saturating_mul(3));
                    bucket.tats = debit(&bucket.rules, cost, t, &bucket.tats)
                        .into_iter()
                        .map(Some)
                        .collect();
                    model_debit(&mut model, cost, t);
                    let got = bucket.peek(0, t);
                    let want = model_throttle(&mut model, 0, t, false, None);
                    assert_eq!(got, want, "timeline {timeline}: debit {cost} at {t}");
                    debits += 1;
                } else if with_refunds && action < 7 {
                    // A reservation, written unless `action` is 4 (a peek).
                    // `t + wait <= 2^53-1`, as the parser requires.
                    let wait = if top {
                        rng.gen_range(0..=MAX_SAFE - t)
                    } else {
                        rng.gen_range(0..=(MAX_SAFE - t).min(3000))
                    };
                    let before = bucket.tats.clone();
                    let got = decide_reserving(&bucket.rules, cost, t, &bucket.tats, Some(wait));
                    let want = model_throttle(&mut model, cost, t, action > 4, Some(wait));
                    assert_eq!(
                        got.decision.reply(),
                        want,
                        "timeline {timeline}: rules {triples:?} tats {before:?} cost {cost} t {t} reserve {wait}"
                    );
                    if action > 4 {
                        if let Some(new) = got.new_tats {
                            bucket.tats = new.into_iter().map(Some).collect();
                        }
                    }
                    reservations += u32::from(!got.decision.limited);
                    delayed += u32::from(!got.decision.limited && got.decision.retry_after > 0);
                } else {
                    let apply = action >= 5;
                    let before = bucket.tats.clone();
                    let got = decide(&bucket.rules, cost, t, &bucket.tats);
                    let want = model_throttle(&mut model, cost, t, apply, None);
                    assert_eq!(
                        got.decision.reply(),
                        want,
                        "timeline {timeline}: rules {triples:?} tats {before:?} cost {cost} t {t}"
                    );
                    probe(&bucket.rules, &before, cost, t, &got.decision);
                    if got.decision.limited {
                        rejections += 1;
                    } else {
                        admissions += 1;
                        let new = got.new_tats.as_deref().unwrap();
                        let need = needed_until(new, t, t);
                        let step = (grid_window(&bucket.rules) / 8).max(1);
                        let exp = expire_at(b"k", &bucket.rules, new, None, t, t);
                        assert!(exp.is_some_and(|e| e >= need && e < need + step));
                        assert!(need > t);
                        assert!(new.iter().all(|&n| need >= n.div_ceil(MS) as i64));
                    }
                    if apply {
                        bucket.throttle(cost, t);
                        if !got.decision.limited {
                            history.push((t, cost));
                        }
                    }
                }
                // Same state, and every stored TAT reads back.
                let model_tats: Vec<Option<u128>> = model.iter().map(LeakyBucket::tat).collect();
                assert_eq!(bucket.tats, model_tats, "timeline {timeline}");
                for tat in bucket.tats.iter().flatten() {
                    assert_eq!(parse_tat(format_tat(*tat, &mut buf)), Some(*tat));
                }
            }
            // Without refunds: between admitted calls i <= j, at most
            // burst + floor((t_j - t_i) / T) units pass, whatever the clocks do.
            if !with_refunds {
                for r in &bucket.rules {
                    for i in 0..history.len() {
                        let mut units = 0;
                        for j in i..history.len() {
                            units += i128::from(history[j].1);
                            let span = i128::from(history[j].0 - history[i].0) * 1_000_000;
                            let cap = i128::from(r.burst) + span.div_euclid(r.interval_ns as i128);
                            assert!(units <= cap, "timeline {timeline}: {units} > {cap}");
                        }
                    }
                }
            }
        }
        // The walk must exercise both outcomes and refunds.
        assert!(admissions > 20_000, "{admissions}");
        assert!(rejections > 10_000, "{rejections}");
        assert!(refunds > 3_000, "{refunds}");
        assert!(debits > 1_000, "{debits}");
        assert!(reservations > 2_000, "{reservations}");
        assert!(delayed > 500, "{delayed}");
    }
}

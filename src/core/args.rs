//! Argument parsing for every command, over plain byte slices (the arguments
//! after the command name). Each error names the argument it refuses.

use std::collections::HashMap;

use smallvec::SmallVec;

use super::calendar::{check_now, parse_zone, Period, Zone, MAX_NOW};
use super::gcra::{duplicate_window, gcra, Gcra, ThrottleRule};
// The sliding-window rule is the window core's; the parser builds it (the
// cores never import the parser, so `core/` has no cycle).
use super::int::{parse_i64, parse_in_range, MAX_SAFE};
pub use super::window::Rule;
use crate::error::{show, Error};

/// Largest `COST` accepted by RL.CHECK: one call adds at most this many members.
pub const MAX_COST: i64 = 10_000;

/// Most rules one RL.CHECK, RL.PEEK, RL.THROTTLE or RL.THROTTLEPEEK call may
/// give: bounds the work of one call (SPEC "Bounded calls").
pub const MAX_RULES: usize = 64;

/// The time a call is evaluated at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Now {
    /// `*`: the server's clock, read once per call.
    Server,
    /// Unix time in ms given by the caller.
    At(i64),
}

/// `RL.CHECK` / `RL.PEEK key now count window [count window ...] [COST cost]
/// [REFUND | DEBIT]` without the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckArgs {
    pub now: Now,
    /// On the stack for the usual few rules.
    pub rules: SmallVec<[Rule; 8]>,
    /// 0 only in RL.PEEK (the state now).
    pub cost: i64,
    /// `REFUND` (RL.CHECK only).
    pub refund: bool,
    /// `DEBIT` (RL.CHECK only).
    pub debit: bool,
}

/// `RL.DAYHOUR daykey hourkey daylimit hourlimit dayttl hourttl` without keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DayHourArgs {
    pub daylimit: i64,
    pub hourlimit: i64,
    pub dayttl: i64,
    pub hourttl: i64,
}

/// `RL.LOCKCOUNT lockkey countkey window max locktime` without keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockCountArgs {
    pub window: i64,
    pub max: i64,
    pub locktime: i64,
}

fn expected(lo: i64, hi: i64) -> String {
    format!("expected an integer from {lo} to {hi}")
}

#[inline]
pub(super) fn ranged(arg: &[u8], what: &str, lo: i64, hi: i64) -> Result<i64, Error> {
    match parse_in_range(arg, lo, hi) {
        Some(v) => Ok(v),
        None => Err(range_error(arg, what, lo, hi)),
    }
}

/// [`ranged`]'s error, out of the way of the parsing inlined where it is
/// called.
#[cold]
#[inline(never)]
fn range_error(arg: &[u8], what: &str, lo: i64, hi: i64) -> Error {
    Error::Arg(format!(
        "invalid {what} '{}': {}",
        show(arg),
        expected(lo, hi)
    ))
}

fn duration(arg: &[u8], what: &str) -> Result<i64, Error> {
    ranged(arg, what, 1, MAX_SAFE)
}

fn limit(arg: &[u8], what: &str) -> Result<i64, Error> {
    ranged(arg, what, 0, MAX_SAFE)
}

/// What `now` is checked against: the server clock read once for the call,
/// and the clock guards `ratelimit.max-future-ms` and
/// `ratelimit.max-past-ms` (0 = off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    pub server_time: i64,
    pub max_future_ms: i64,
    pub max_past_ms: i64,
}

impl Clock {
    /// No guard and a clock at 0, for tests.
    #[cfg(test)]
    pub const UNGUARDED: Clock = Clock {
        server_time: 0,
        max_future_ms: 0,
        max_past_ms: 0,
    };

    /// The call's time in ms: the server's for `*`.
    pub fn resolve(&self, now: Now) -> i64 {
        match now {
            Now::Server => self.server_time,
            Now::At(t) => t,
        }
    }
}

/// Parses `now`: `*` or an integer in `[0, 2^53-1]`, and with the clock
/// guards on, at most `max_future_ms` ahead of the server clock (a caller
/// sending microseconds would otherwise stamp units ~55,000 years ahead)
/// and at most `max_past_ms` behind it (seconds read as January 1970).
pub fn parse_now(arg: &[u8], clock: &Clock) -> Result<Now, Error> {
    if arg == b"*" {
        return Ok(Now::Server);
    }
    let t = parse_in_range(arg, 0, MAX_SAFE).ok_or_else(|| {
        Error::Arg(format!(
            "invalid now '{}': expected '*' or an integer from 0 to {MAX_SAFE}",
            show(arg)
        ))
    })?;
    if clock.max_future_ms > 0 && t - clock.server_time > clock.max_future_ms {
        return Err(Error::Arg(format!(
            "invalid now '{}': {} ms ahead of the server clock, more than ratelimit.max-future-ms ({}); is it in ms?",
            show(arg),
            t - clock.server_time,
            clock.max_future_ms
        )));
    }
    if clock.max_past_ms > 0 && clock.server_time - t > clock.max_past_ms {
        return Err(Error::Arg(format!(
            "invalid now '{}': {} ms behind the server clock, more than ratelimit.max-past-ms ({}); is it in ms?",
            show(arg),
            clock.server_time - t,
            clock.max_past_ms
        )));
    }
    Ok(Now::At(t))
}

/// An argument starts the options when it begins with a letter: option names
/// are words, and anything else in a rule position (`+5`, `05`, `-1`) is
/// reported as a bad count rather than as an unknown option.
pub(super) fn starts_options(arg: &[u8]) -> bool {
    arg.first().is_some_and(u8::is_ascii_alphabetic)
}

/// Arguments as byte strings.
type Words<'b, 'a> = &'b [&'a [u8]];

/// Splits `now rule... option...` (RL.CHECK, RL.THROTTLE and their peeks)
/// into the parsed `now`, the rule arguments and the option arguments.
fn split_rules<'a, 'b>(
    args: Words<'b, 'a>,
    clock: &Clock,
) -> Result<(Now, Words<'b, 'a>, Words<'b, 'a>), Error> {
    let Some((now_arg, rest)) = args.split_first() else {
        return Err(Error::Arg("missing now".into()));
    };
    let now = parse_now(now_arg, clock)?;
    let split = rest
        .iter()
        .position(|a| starts_options(a))
        .unwrap_or(rest.len());
    let (rules, options) = rest.split_at(split);
    Ok((now, rules, options))
}

/// Parses the arguments of RL.CHECK (`write`: `REFUND` and `DEBIT` allowed)
/// or RL.PEEK (`COST 0` allowed) after the key.
pub fn parse_check(args: &[&[u8]], write: bool, clock: &Clock) -> Result<CheckArgs, Error> {
    let (now, rule_args, option_args) = split_rules(args, clock)?;

    let mut rules: SmallVec<[Rule; 8]> = SmallVec::with_capacity(rule_args.len() / 2);
    for (i, pair) in rule_args.chunks(2).enumerate() {
        let n = i + 1;
        let (count_arg, window_arg) = match *pair {
            [count_arg, window_arg] => (count_arg, window_arg),
            _ => {
                return Err(Error::Arg(format!(
                    "missing window for rule {n}: rules are 'count window' pairs"
                )))
            }
        };
        let count = parse_in_range(count_arg, 1, MAX_SAFE)
            .ok_or_else(|| rule_error("count", count_arg, n))?;
        let window = parse_in_range(window_arg, 1, MAX_SAFE)
            .ok_or_else(|| rule_error("window", window_arg, n))?;
        rules.push(Rule { count, window });
    }
    if rules.is_empty() {
        return Err(Error::Arg(
            "at least one rule 'count window' is required".into(),
        ));
    }

    if rules.len() > MAX_RULES {
        return Err(too_many_rules(rules.len()));
    }
    let accepts = Accepts {
        refund: write,
        debit: write,
        reserve: false,
    };
    let options = parse_options(option_args, accepts, clock.resolve(now))?;
    let smallest = rules.iter().map(|r| r.count).min().unwrap_or(1);
    // A refund or a debit is not capped by the rules, only by the members
    // one call may add or remove.
    let cost = if options.refund || options.debit {
        options.cost(1, MAX_COST)?
    } else {
        options.cost(lowest_cost(write), smallest.min(MAX_COST))?
    };
    Ok(CheckArgs {
        now,
        rules,
        cost,
        refund: options.refund,
        debit: options.debit,
    })
}

/// The smallest `COST`: 0 in the peeks (the state now), 1 in the writing
/// commands.
fn lowest_cost(write: bool) -> i64 {
    i64::from(write)
}

fn too_many_rules(n: usize) -> Error {
    Error::Arg(format!(
        "too many rules: {n} given, at most {MAX_RULES} per call"
    ))
}

/// The options a command takes besides `COST`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Accepts {
    /// `REFUND` (the writing commands).
    pub refund: bool,
    /// `DEBIT` (the writing commands).
    pub debit: bool,
    /// `RESERVE max_wait` (RL.THROTTLE and RL.THROTTLEPEEK).
    pub reserve: bool,
}

impl Accepts {
    /// The option names, for "unknown option" messages: `COST, REFUND or DEBIT`.
    fn names(&self) -> String {
        let mut names = vec!["COST"];
        for (on, name) in [
            (self.refund, "REFUND"),
            (self.debit, "DEBIT"),
            (self.reserve, "RESERVE"),
        ] {
            if on {
                names.push(name);
            }
        }
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        }
    }
}

/// The options after the rules: `COST cost` and, where the command takes
/// them, `REFUND`, `DEBIT`, `RESERVE max_wait`; names case-insensitive, each
/// at most once, and at most one of `REFUND`, `DEBIT`, `RESERVE` (SPEC: an
/// argument error naming the second). `COST`'s value is checked against the
/// rules afterwards ([`Options::cost`]), as the SPEC orders argument errors.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options<'a> {
    cost_arg: Option<&'a [u8]>,
    pub refund: bool,
    pub debit: bool,
    /// `RESERVE`'s `max_wait` in ms.
    pub reserve: Option<i64>,
}

impl Options<'_> {
    /// The cost: 1 by default, else `COST`'s value within `[lo, max]` (`lo`
    /// 0 in the peeks, where `COST 0` asks for the state now).
    pub fn cost(&self, lo: i64, max: i64) -> Result<i64, Error> {
        match self.cost_arg {
            None => Ok(1),
            Some(arg) => ranged(arg, "cost", lo, max),
        }
    }

    /// The option among `REFUND`, `DEBIT`, `RESERVE` already given.
    fn mode(&self) -> Option<&'static str> {
        if self.refund {
            Some("REFUND")
        } else if self.debit {
            Some("DEBIT")
        } else if self.reserve.is_some() {
            Some("RESERVE")
        } else {
            None
        }
    }
}

/// Parses the options of RL.CHECK, RL.THROTTLE, RL.QUOTA and their peeks.
/// `t` is the call's time in ms: `RESERVE`'s `max_wait` must keep `t +
/// max_wait` within `2^53-1`.
pub fn parse_options<'a>(
    args: &[&'a [u8]],
    accepts: Accepts,
    t: i64,
) -> Result<Options<'a>, Error> {
    let mut options = Options::default();
    let mut args = args.iter();
    while let Some(&name) = args.next() {
        let upper = name.to_ascii_uppercase();
        let given_twice = match upper.as_slice() {
            b"COST" => options.cost_arg.is_some(),
            b"REFUND" if accepts.refund => options.refund,
            b"DEBIT" if accepts.debit => options.debit,
            b"RESERVE" if accepts.reserve => options.reserve.is_some(),
            _ => {
                return Err(Error::Arg(format!(
                    "syntax error: unknown option '{}' (expected {})",
                    show(name),
                    accepts.names()
                )))
            }
        };
        let upper = String::from_utf8_lossy(&upper).into_owned();
        if given_twice {
            return Err(Error::Arg(format!(
                "syntax error: option {upper} given twice"
            )));
        }
        if upper != "COST" {
            if let Some(first) = options.mode() {
                return Err(Error::Arg(format!(
                    "syntax error: option {upper} cannot be combined with {first}"
                )));
            }
        }
        match upper.as_str() {
            "COST" => {
                let Some(&value) = args.next() else {
                    return Err(Error::Arg("syntax error: option COST needs a value".into()));
                };
                options.cost_arg = Some(value);
            }
            "REFUND" => options.refund = true,
            "DEBIT" => options.debit = true,
            _ => {
                let Some(&value) = args.next() else {
                    return Err(Error::Arg(
                        "syntax error: option RESERVE needs a value".into(),
                    ));
                };
                // `t + max_wait <= 2^53-1`: no reservation stores a time
                // beyond the storable range.
                let most = MAX_SAFE.saturating_sub(t.max(0));
                let wait = parse_in_range(value, 0, most).ok_or_else(|| {
                    Error::Arg(format!(
                        "invalid RESERVE max_wait '{}': {} (now + max_wait at most {MAX_SAFE})",
                        show(value),
                        expected(0, most)
                    ))
                })?;
                options.reserve = Some(wait);
            }
        }
    }
    Ok(options)
}

/// `RL.THROTTLE` / `RL.THROTTLEPEEK key now burst count window [...]
/// [COST cost] [REFUND | DEBIT | RESERVE max_wait]` without the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThrottleArgs {
    pub now: Now,
    /// (A Vec: a `Gcra` is 48 bytes, and moving eight inline ones cost more,
    /// measured, than the allocation they saved.)
    pub rules: Vec<Gcra>,
    /// 0 only in RL.THROTTLEPEEK (the state now).
    pub cost: i64,
    pub refund: bool,
    pub debit: bool,
    /// `RESERVE`'s `max_wait` in ms.
    pub reserve: Option<i64>,
}

/// Parses the arguments of RL.THROTTLE (`write`: `REFUND` and `DEBIT`
/// allowed) or RL.THROTTLEPEEK (`COST 0` allowed) after the key; both take
/// `RESERVE`. Left to right: `now`; each rule's burst, count, window, then
/// its emission interval and tolerance, then that its window is new; the
/// cap; the options; `COST` against the smallest burst (any cost up to
/// 2^53-1 with `REFUND` or `DEBIT`).
pub fn parse_throttle(args: &[&[u8]], write: bool, clock: &Clock) -> Result<ThrottleArgs, Error> {
    let (now, rule_args, option_args) = split_rules(args, clock)?;

    let mut rules: Vec<Gcra> = Vec::with_capacity((rule_args.len() / 3).min(MAX_RULES + 1));
    // Windows seen, for calls with many rules (a linear scan serves the rest).
    let mut windows: HashMap<i64, usize> = HashMap::new();
    for (i, triple) in rule_args.chunks(3).enumerate() {
        let n = i + 1;
        let [burst, count, window] = *triple else {
            return Err(Error::Arg(format!(
                "incomplete rule {n}: rules are 'burst count window' triples"
            )));
        };
        let rule = ThrottleRule {
            burst: parse_in_range(burst, 1, MAX_SAFE)
                .ok_or_else(|| rule_error("burst", burst, n))?,
            count: parse_in_range(count, 1, MAX_SAFE)
                .ok_or_else(|| rule_error("count", count, n))?,
            window: parse_in_range(window, 1, MAX_SAFE)
                .ok_or_else(|| rule_error("window", window, n))?,
        };
        let rule = gcra(rule, n)?;
        let earlier = if i < MAX_RULES {
            rules.iter().position(|r| r.window == rule.window)
        } else {
            if windows.is_empty() {
                windows.extend(rules.iter().enumerate().map(|(j, r)| (r.window, j)));
            }
            windows.insert(rule.window, i)
        };
        if let Some(first) = earlier {
            return Err(duplicate_window(first, i, rule.window));
        }
        if i < MAX_RULES {
            rules.push(rule);
        }
    }
    let given = rule_args.len() / 3;
    if given > MAX_RULES {
        return Err(too_many_rules(given));
    }
    if rules.is_empty() {
        return Err(Error::Arg(
            "at least one rule 'burst count window' is required".into(),
        ));
    }
    let accepts = Accepts {
        refund: write,
        debit: write,
        reserve: true,
    };
    let options = parse_options(option_args, accepts, clock.resolve(now))?;
    let smallest = rules.iter().map(|r| r.burst).min().unwrap_or(1);
    let cost = if options.refund || options.debit {
        options.cost(1, MAX_SAFE)?
    } else {
        options.cost(lowest_cost(write), smallest)?
    };
    Ok(ThrottleArgs {
        now,
        rules,
        cost,
        refund: options.refund,
        debit: options.debit,
        reserve: options.reserve,
    })
}

/// `RL.QUOTA` / `RL.QUOTAPEEK key now zone period limit [...] [COST cost]
/// [REFUND | DEBIT]` without the key.
#[derive(Debug, Clone)]
pub struct QuotaArgs {
    pub now: Now,
    pub zone: Zone,
    /// Each period once, with its limit, in argument order.
    pub periods: smallvec::SmallVec<[(Period, i64); 6]>,
    /// 0 only in RL.QUOTAPEEK (the state now).
    pub cost: i64,
    pub refund: bool,
    pub debit: bool,
}

/// Parses the arguments of RL.QUOTA (`write`: `REFUND` and `DEBIT` allowed)
/// or RL.QUOTAPEEK (`COST 0` allowed) after the key. Left to right: `now`
/// (at most the end of year 9999), the zone, the `period limit` pairs (they
/// end at the first argument that is not a period name), the options, then
/// `COST`'s value (to 2^53-1: a cost above a limit is that period's refusal,
/// not an argument error).
pub fn parse_quota(args: &[&[u8]], write: bool, clock: &Clock) -> Result<QuotaArgs, Error> {
    let [now_arg, zone_arg, rest @ ..] = args else {
        return Err(Error::Arg("missing now or zone".into()));
    };
    let now = match parse_now(now_arg, clock)? {
        Now::At(t) if t > MAX_NOW => {
            return Err(Error::Arg(format!(
                "invalid now '{}': expected '*' or an integer from 0 to {MAX_NOW} (the end of year 9999)",
                show(now_arg)
            )))
        }
        now => now,
    };
    let zone = parse_zone(zone_arg)?;
    // `now` comes first: one whose local time in the zone is past year 9999
    // is reported before any later argument.
    check_now(&zone, clock.resolve(now))?;
    let mut periods: smallvec::SmallVec<[(Period, i64); 6]> = smallvec::SmallVec::new();
    let mut rest = rest;
    while let [name, tail @ ..] = rest {
        let Some(period) = Period::parse(name) else {
            break;
        };
        let [limit_arg, tail @ ..] = tail else {
            return Err(Error::Arg(format!(
                "missing limit for period {}",
                show(name)
            )));
        };
        if periods.iter().any(|&(p, _)| p == period) {
            return Err(Error::Arg(format!("period {} given twice", show(name))));
        }
        let limit = parse_in_range(limit_arg, 0, MAX_SAFE).ok_or_else(|| {
            Error::Arg(format!(
                "invalid limit '{}' for period {}: {}",
                show(limit_arg),
                show(name),
                expected(0, MAX_SAFE)
            ))
        })?;
        periods.push((period, limit));
        rest = tail;
    }
    // No pair, and a word where the first period must stand that is no
    // option either: a misspelt period (`DAYS`); name it and the accepted
    // periods. (After a pair, SPEC makes such a word an unknown option.)
    if let ([word, ..], true) = (rest, periods.is_empty()) {
        if !word.eq_ignore_ascii_case(b"COST") && !word.eq_ignore_ascii_case(b"REFUND") {
            return Err(Error::Arg(format!(
                "invalid period '{}': expected MINUTE, HOUR, DAY, WEEK, MONTH or YEAR",
                show(word)
            )));
        }
    }
    if periods.is_empty() {
        return Err(Error::Arg(
            "at least one 'period limit' pair is required (period: MINUTE, HOUR, DAY, WEEK, MONTH or YEAR)".into(),
        ));
    }
    let accepts = Accepts {
        refund: write,
        debit: write,
        reserve: false,
    };
    let options = parse_options(rest, accepts, clock.resolve(now))?;
    Ok(QuotaArgs {
        now,
        zone,
        periods,
        cost: options.cost(lowest_cost(write), MAX_SAFE)?,
        refund: options.refund,
        debit: options.debit,
    })
}

fn rule_error(what: &str, arg: &[u8], n: usize) -> Error {
    Error::Arg(format!(
        "invalid {what} '{}' for rule {n}: {}",
        show(arg),
        expected(1, MAX_SAFE)
    ))
}

/// Parses `daylimit hourlimit dayttl hourttl`.
pub fn parse_dayhour(args: &[&[u8]; 4]) -> Result<DayHourArgs, Error> {
    Ok(DayHourArgs {
        daylimit: limit(args[0], "daylimit")?,
        hourlimit: limit(args[1], "hourlimit")?,
        dayttl: duration(args[2], "dayttl")?,
        hourttl: duration(args[3], "hourttl")?,
    })
}

/// Parses `window max locktime`.
pub fn parse_lockcount(args: &[&[u8]; 3]) -> Result<LockCountArgs, Error> {
    Ok(LockCountArgs {
        window: duration(args[0], "window")?,
        max: limit(args[1], "max")?,
        locktime: duration(args[2], "locktime")?,
    })
}

/// Two keys that must differ.
pub fn distinct_keys(first: &[u8], second: &[u8], names: (&str, &str)) -> Result<(), Error> {
    if first == second {
        return Err(Error::Arg(format!(
            "{} and {} must be different keys, got '{}' twice",
            names.0,
            names.1,
            show(first)
        )));
    }
    Ok(())
}

/// Reads a stored counter the way `INCR` reads it, within `±(2^53-1)`.
pub fn parse_counter(stored: &[u8], role: &str) -> Result<i64, Error> {
    parse_i64(stored)
        .filter(|v| v.abs() <= MAX_SAFE)
        .ok_or_else(|| {
            Error::Stored(format!(
                "value '{}' of {role} is not an integer from -{MAX_SAFE} to {MAX_SAFE}",
                show(stored)
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(line: &str) -> Result<CheckArgs, Error> {
        let words: Vec<&[u8]> = line
            .split(' ')
            .filter(|w| !w.is_empty())
            .map(str::as_bytes)
            .collect();
        parse_check(&words, true, &Clock::UNGUARDED)
    }

    fn arg_err<T: std::fmt::Debug>(r: Result<T, Error>) -> String {
        match r {
            Err(Error::Arg(m)) => m,
            other => panic!("expected an argument error, got {other:?}"),
        }
    }

    #[test]
    fn parses_rules_and_cost() {
        let a = check("* 10 1000 100 60000 cost 3").unwrap();
        assert_eq!(a.now, Now::Server);
        assert_eq!(
            a.rules.as_slice(),
            [
                Rule {
                    count: 10,
                    window: 1000
                },
                Rule {
                    count: 100,
                    window: 60000
                }
            ]
        );
        assert_eq!(a.cost, 3);
        let b = check("1700000000000 2 1000").unwrap();
        assert_eq!(b.now, Now::At(1_700_000_000_000));
        assert_eq!(b.cost, 1);
        assert_eq!(check("0 1 9007199254740991 CoSt 1").unwrap().cost, 1);
    }

    fn throttle(line: &str, refund: bool) -> Result<ThrottleArgs, Error> {
        let words: Vec<&[u8]> = line
            .split(' ')
            .filter(|w| !w.is_empty())
            .map(str::as_bytes)
            .collect();
        parse_throttle(&words, refund, &Clock::UNGUARDED)
    }

    #[test]
    fn throttle_arguments() {
        let a = throttle("* 5 10 1000 2 1 60000 cost 2 refund", true).unwrap();
        assert_eq!(a.now, Now::Server);
        assert_eq!(
            a.rules
                .iter()
                .map(|r| (r.burst, r.window))
                .collect::<Vec<_>>(),
            [(5, 1000), (2, 60000)]
        );
        assert_eq!(a.rules[0].interval_ns, 100_000_000);
        assert_eq!((a.cost, a.refund), (2, true));
        assert!(!throttle("5 1 1 1", false).unwrap().refund);
        // Left to right: the first bad argument is reported.
        let table: &[(&str, &str)] = &[
            ("x 1 1 1", "invalid now 'x'"),
            ("* 0 1 1", "invalid burst '0' for rule 1"),
            ("* 1 0 1", "invalid count '0' for rule 1"),
            ("* 1 1 0", "invalid window '0' for rule 1"),
            ("* 1 1", "incomplete rule 1"),
            ("* 1 1 1 1 1", "incomplete rule 2"),
            ("* COST 1", "at least one rule"),
            (
                "* 1 2000000 1 0 1 1",
                "invalid rule 1: count 2000000 over window 1",
            ),
            ("* 1 1 1000 1 2 1000 0 1 1", "invalid rule 2: window 1000"),
            ("* 2 1 9007199254740991", "invalid rule 1: burst 2"),
            ("* 1 1 1000 COST 2", "invalid cost '2'"),
            ("* 1 1 1000 COST 0", "invalid cost '0'"),
            ("* 1 1 1000 COST 2 BAD", "unknown option 'BAD'"),
            ("* 1 1 1000 REFUND REFUND", "REFUND given twice"),
        ];
        for (line, want) in table {
            let got = arg_err(throttle(line, true));
            assert!(got.contains(want), "{line}: got {got:?}, want {want:?}");
        }
        assert!(arg_err(throttle("* 1 1 1 REFUND", false)).contains("unknown option 'REFUND'"));
        // A refund takes any cost to 2^53-1 (what a debit may have charged).
        assert_eq!(
            throttle("* 1 1 1000 COST 9007199254740991 REFUND", true)
                .unwrap()
                .cost,
            MAX_SAFE
        );
        assert!(
            arg_err(throttle("* 1 1 1000 COST 9007199254740992 REFUND", true))
                .contains("invalid cost")
        );
    }

    #[test]
    fn debit_ranges_and_exclusions() {
        let words = |line: &'static str| -> Vec<&'static [u8]> {
            line.split(' ').map(str::as_bytes).collect()
        };
        let c = Clock::UNGUARDED;
        // Not capped by the rules: to 10000 members for RL.CHECK, to 2^53-1
        // for RL.THROTTLE and RL.QUOTA.
        let a = parse_check(&words("* 2 1000 COST 10000 debit"), true, &c).unwrap();
        assert_eq!((a.cost, a.debit, a.refund), (10_000, true, false));
        assert!(
            arg_err(parse_check(&words("* 2 1000 COST 10001 DEBIT"), true, &c))
                .starts_with("invalid cost '10001': expected an integer from 1 to 10000")
        );
        assert!(
            arg_err(parse_check(&words("* 2 1000 DEBIT COST 0"), true, &c))
                .contains("invalid cost '0'")
        );
        let a = parse_throttle(&words("* 1 1 1000 DEBIT COST 9007199254740991"), true, &c).unwrap();
        assert_eq!((a.cost, a.debit), (MAX_SAFE, true));
        let a = parse_quota(&words("* UTC DAY 0 COST 9007199254740991 DEBIT"), true, &c).unwrap();
        assert_eq!((a.cost, a.debit), (MAX_SAFE, true));
        // DEBIT and REFUND exclude each other: the error names the second.
        for (line, want) in [
            (
                "* 2 1000 DEBIT REFUND",
                "syntax error: option REFUND cannot be combined with DEBIT",
            ),
            (
                "* 2 1000 refund COST 1 Debit",
                "syntax error: option DEBIT cannot be combined with REFUND",
            ),
            (
                "* 2 1000 DEBIT DEBIT",
                "syntax error: option DEBIT given twice",
            ),
            (
                "* 2 1000 DEBIT COST 0 REFUND",
                "syntax error: option REFUND cannot be combined with DEBIT",
            ),
        ] {
            assert_eq!(arg_err(parse_check(&words(line), true, &c)), want, "{line}");
        }
        assert_eq!(
            arg_err(parse_quota(&words("* UTC DAY 5 REFUND DEBIT"), true, &c)),
            "syntax error: option DEBIT cannot be combined with REFUND"
        );
        // The peeks take neither.
        assert_eq!(
            arg_err(parse_check(&words("* 2 1000 DEBIT"), false, &c)),
            "syntax error: unknown option 'DEBIT' (expected COST)"
        );
        assert_eq!(
            arg_err(parse_check(&words("* 2 1000 LIMIT"), true, &c)),
            "syntax error: unknown option 'LIMIT' (expected COST, REFUND or DEBIT)"
        );
        assert!(arg_err(parse_quota(&words("* UTC DAY 5 DEBIT"), false, &c))
            .contains("unknown option 'DEBIT'"));
    }

    #[test]
    fn reserve_arguments() {
        let words = |line: &'static str| -> Vec<&'static [u8]> {
            line.split(' ').map(str::as_bytes).collect()
        };
        let c = Clock {
            server_time: 1_000,
            max_future_ms: 0,
            max_past_ms: 0,
        };
        let a = parse_throttle(&words("* 1 1 100 RESERVE 5000"), true, &c).unwrap();
        assert_eq!((a.reserve, a.cost), (Some(5000), 1));
        let a = parse_throttle(&words("* 1 1 100 reserve 0 COST 0"), false, &c).unwrap();
        assert_eq!((a.reserve, a.cost), (Some(0), 0), "the peek takes it too");
        // t + max_wait <= 2^53-1, with t the server's time for `*`.
        let most = format!("* 1 1 100 RESERVE {}", MAX_SAFE - 1_000);
        let most: Vec<&[u8]> = most.split(' ').map(str::as_bytes).collect();
        assert!(parse_throttle(&most, true, &c).is_ok());
        for (line, want) in [
            (
                "* 1 1 100 RESERVE 9007199254739992",
                "invalid RESERVE max_wait '9007199254739992': expected an integer from 0 to 9007199254739991",
            ),
            (
                "9007199254740991 1 1 100 RESERVE 1",
                "invalid RESERVE max_wait '1': expected an integer from 0 to 0",
            ),
            ("* 1 1 100 RESERVE -1", "invalid RESERVE max_wait '-1'"),
            ("* 1 1 100 RESERVE x", "invalid RESERVE max_wait 'x'"),
            ("* 1 1 100 RESERVE", "syntax error: option RESERVE needs a value"),
            ("* 1 1 100 RESERVE 1 RESERVE 1", "syntax error: option RESERVE given twice"),
            ("* 1 1 100 RESERVE 1 REFUND", "syntax error: option REFUND cannot be combined with RESERVE"),
            ("* 1 1 100 DEBIT RESERVE 1", "syntax error: option RESERVE cannot be combined with DEBIT"),
            ("* 1 1 100 RESERVE 1 COST 2", "invalid cost '2'"),
            // Options in order: a bad RESERVE before a bad COST.
            ("* 1 1 100 RESERVE x COST 2", "invalid RESERVE max_wait 'x'"),
        ] {
            let got = arg_err(parse_throttle(&words(line), true, &c));
            assert!(got.starts_with(want), "{line}: {got}");
        }
        assert_eq!(
            arg_err(parse_throttle(&words("* 1 1 100 REFUND"), false, &c)),
            "syntax error: unknown option 'REFUND' (expected COST or RESERVE)"
        );
        assert_eq!(
            arg_err(parse_throttle(&words("* 1 1 100 X"), true, &c)),
            "syntax error: unknown option 'X' (expected COST, REFUND, DEBIT or RESERVE)"
        );
        // RL.CHECK and RL.QUOTA take no RESERVE.
        assert!(arg_err(parse_check(&words("* 1 100 RESERVE 1"), true, &c))
            .contains("unknown option 'RESERVE'"));
        assert!(
            arg_err(parse_quota(&words("* UTC DAY 1 RESERVE 1"), true, &c))
                .contains("unknown option 'RESERVE'")
        );
    }

    #[test]
    fn peeks_take_cost_0_and_the_writing_commands_do_not() {
        let words = |line: &'static str| -> Vec<&'static [u8]> {
            line.split(' ').map(str::as_bytes).collect()
        };
        let c = Clock::UNGUARDED;
        assert_eq!(
            parse_check(&words("* 10 1000 COST 0"), false, &c)
                .unwrap()
                .cost,
            0
        );
        assert!(
            arg_err(parse_check(&words("* 10 1000 COST 0"), true, &c)).contains("invalid cost '0'")
        );
        assert_eq!(
            parse_throttle(&words("* 1 1 1000 COST 0"), false, &c)
                .unwrap()
                .cost,
            0
        );
        assert!(
            arg_err(parse_throttle(&words("* 1 1 1000 COST 0"), true, &c))
                .contains("invalid cost '0'")
        );
        assert_eq!(
            parse_quota(&words("* UTC DAY 0 COST 0"), false, &c)
                .unwrap()
                .cost,
            0
        );
        assert!(arg_err(parse_quota(&words("* UTC DAY 5 COST 0"), true, &c))
            .contains("invalid cost '0'"));
        assert!(arg_err(parse_check(&words("* 10 1000 COST -1"), false, &c))
            .contains("invalid cost '-1'"));
        // A refund's cost is not capped by the rules (up to 10000 members).
        assert_eq!(
            parse_check(&words("* 10 1000 COST 10000 REFUND"), true, &c)
                .unwrap()
                .cost,
            10_000
        );
        assert!(
            arg_err(parse_check(&words("* 10 1000 COST 10001 REFUND"), true, &c))
                .contains("invalid cost '10001'")
        );
    }

    #[test]
    fn the_clock_guard_refuses_a_now_too_far_ahead() {
        let guarded = Clock {
            server_time: 1_000_000,
            max_future_ms: 60_000,
            max_past_ms: 0,
        };
        let now = |arg: &str| parse_now(arg.as_bytes(), &guarded);
        assert_eq!(now("1060000"), Ok(Now::At(1_060_000)));
        assert_eq!(now("0"), Ok(Now::At(0)), "the past is fine");
        assert_eq!(now("*"), Ok(Now::Server));
        let e = arg_err(now("1060001"));
        assert!(
            e.starts_with("invalid now '1060001': 60001 ms ahead"),
            "{e}"
        );
        // Microseconds today: refused; off (0), accepted.
        assert!(now("1796054400000000").is_err());
        assert!(parse_now(b"1796054400000000", &Clock::UNGUARDED).is_ok());
        // `now` comes first: reported before a bad rule.
        let words: Vec<&[u8]> = vec![b"9999999", b"0", b"1000"];
        assert!(arg_err(parse_check(&words, false, &guarded)).starts_with("invalid now"));
        let e = arg_err(parse_throttle(&words, false, &guarded));
        assert!(e.starts_with("invalid now"), "{e}");
    }

    #[test]
    fn the_past_guard_refuses_a_now_too_far_behind() {
        let t = 1_796_148_730_000;
        let guarded = Clock {
            server_time: t,
            max_future_ms: 0,
            max_past_ms: 86_400_000,
        };
        let now = |arg: &str| parse_now(arg.as_bytes(), &guarded);
        assert_eq!(
            now(&(t - 86_400_000).to_string()),
            Ok(Now::At(t - 86_400_000))
        );
        assert_eq!(now("*"), Ok(Now::Server));
        // Far ahead is the other guard's business (off here).
        assert_eq!(now("9007199254740991"), Ok(Now::At(MAX_SAFE)));
        let e = arg_err(now(&(t - 86_400_001).to_string()));
        assert!(
            e.contains(
                "86400001 ms behind the server clock, more than ratelimit.max-past-ms (86400000)"
            ),
            "{e}"
        );
        // The case: seconds instead of ms.
        let e = arg_err(now("1796148730"));
        assert!(e.starts_with("invalid now '1796148730'"), "{e}");
        // Off (0): accepted.
        assert!(parse_now(b"1796148730", &Clock::UNGUARDED).is_ok());
        // Before the rules.
        let words: Vec<&[u8]> = vec![b"1796148730", b"0", b"1000"];
        assert!(arg_err(parse_check(&words, true, &guarded)).starts_with("invalid now"));
        let words: Vec<&[u8]> = vec![b"1796148730", b"UTC", b"DAY", b"x"];
        assert!(arg_err(parse_quota(&words, true, &guarded)).starts_with("invalid now"));
    }

    #[test]
    fn at_most_64_rules_after_the_rules_are_checked() {
        let rules = |n: usize, per: &dyn Fn(usize) -> String| {
            (1..=n).map(per).collect::<Vec<_>>().join(" ")
        };
        let ok = rules(64, &|i| format!("1 1 {i}"));
        assert_eq!(throttle(&format!("* {ok}"), true).unwrap().rules.len(), 64);
        let over = rules(65, &|i| format!("1 1 {i}"));
        assert_eq!(
            arg_err(throttle(&format!("* {over} COST x"), true)),
            "too many rules: 65 given, at most 64 per call"
        );
        // A bad rule past the cap is still a rule error: rules come first.
        let bad = format!("* {over} 1 0 9");
        assert!(arg_err(throttle(&bad, true)).contains("invalid count '0' for rule 66"));
        let dup = format!("* {over} 1 1 3");
        assert!(arg_err(throttle(&dup, true)).contains("invalid rule 66: window 3"));
        let check_ok = rules(64, &|i| format!("1 {i}"));
        assert_eq!(check(&format!("* {check_ok}")).unwrap().rules.len(), 64);
        let check_over = rules(65, &|i| format!("1 {i}"));
        assert!(arg_err(check(&format!("* {check_over}"))).starts_with("too many rules: 65"));
    }

    #[test]
    fn every_bad_argument_is_named() {
        let table: &[(&str, &str)] = &[
            ("* 10 0", "invalid window '0' for rule 1"),
            ("* 10 1000 5 0", "invalid window '0' for rule 2"),
            (
                "* 10 9223372036854775807",
                "invalid window '9223372036854775807' for rule 1",
            ),
            ("* 10 9007199254740992", "invalid window"),
            ("* +5 1000", "invalid count '+5' for rule 1"),
            ("* 05 1000", "invalid count '05' for rule 1"),
            ("* 0 1000", "invalid count '0' for rule 1"),
            ("* -1 1000", "invalid count '-1' for rule 1"),
            ("* 5.0 1000", "invalid count '5.0' for rule 1"),
            ("* 10 1000 20", "missing window for rule 2"),
            ("9007199254740993 10 1000", "invalid now '9007199254740993'"),
            ("-1 10 1000", "invalid now '-1'"),
            ("now 10 1000", "invalid now 'now'"),
            ("* 10 1000 COST 0", "invalid cost '0'"),
            (
                "* 20000 1000 COST 10001",
                "invalid cost '10001': expected an integer from 1 to 10000",
            ),
            (
                "* 10 1000 5 60000 COST 6",
                "invalid cost '6': expected an integer from 1 to 5",
            ),
            ("* 10 1000 COST x", "invalid cost 'x'"),
            ("* 10 1000 COST", "COST needs a value"),
            ("* 10 1000 COST 1 COST 1", "COST given twice"),
            ("* 10 1000 LIMIT 1", "unknown option 'LIMIT'"),
            ("* COST 1", "at least one rule"),
            ("* 10 1000 COST 1 5", "unknown option '5'"),
        ];
        for (line, want) in table {
            let got = arg_err(check(line));
            assert!(got.contains(want), "{line}: got {got:?}, want {want:?}");
        }
    }

    #[test]
    fn the_first_bad_argument_is_reported() {
        let got = arg_err(check("* 0 1000 10 0 COST 0"));
        assert!(got.contains("count '0' for rule 1"), "{got}");
    }

    #[test]
    fn dayhour_limits_may_be_zero_but_ttls_may_not() {
        let ok = parse_dayhour(&[b"0", b"5", b"86400000", b"3600000"]).unwrap();
        assert_eq!((ok.daylimit, ok.hourlimit), (0, 5));
        for (args, want) in [
            ([&b"-1"[..], b"5", b"1", b"1"], "invalid daylimit '-1'"),
            ([&b"1"[..], b"x", b"1", b"1"], "invalid hourlimit 'x'"),
            ([&b"1"[..], b"1", b"0", b"1"], "invalid dayttl '0'"),
            (
                [&b"1"[..], b"1", b"1", b"9007199254740992"],
                "invalid hourttl",
            ),
        ] {
            match parse_dayhour(&args) {
                Err(Error::Arg(m)) => assert!(m.contains(want), "{m}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn lockcount_arguments() {
        let ok = parse_lockcount(&[b"1000", b"0", b"60000"]).unwrap();
        assert_eq!((ok.window, ok.max, ok.locktime), (1000, 0, 60000));
        assert!(
            matches!(parse_lockcount(&[b"0", b"1", b"1"]), Err(Error::Arg(m)) if m.contains("window '0'"))
        );
        assert!(
            matches!(parse_lockcount(&[b"1", b"-1", b"1"]), Err(Error::Arg(m)) if m.contains("max '-1'"))
        );
        assert!(
            matches!(parse_lockcount(&[b"1", b"1", b"05"]), Err(Error::Arg(m)) if m.contains("locktime '05'"))
        );
    }

    #[test]
    fn keys_must_differ() {
        assert!(distinct_keys(b"a", b"b", ("daykey", "hourkey")).is_ok());
        assert!(
            matches!(distinct_keys(b"a", b"a", ("daykey", "hourkey")), Err(Error::Arg(m)) if m.contains("daykey and hourkey"))
        );
    }

    #[test]
    fn stored_counters_read_like_incr() {
        assert_eq!(parse_counter(b"42", "daykey"), Ok(42));
        assert_eq!(parse_counter(b"-3", "daykey"), Ok(-3));
        for bad in [
            &b"abc"[..],
            b"",
            b"05",
            b"+1",
            b"1.5",
            b"9007199254740992",
            b"-9007199254740992",
        ] {
            assert!(
                matches!(parse_counter(bad, "countkey"), Err(Error::Stored(m)) if m.contains("countkey"))
            );
        }
    }
}

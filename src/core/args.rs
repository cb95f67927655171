//! What every command's argument parsing shares, over plain byte slices (the
//! arguments after the command name): `now` and the clock guards, the
//! options (`COST`, `REFUND`, `DEBIT`, `RESERVE`), the rule and cost bounds;
//! and the seed counters' arguments (RL.DAYHOUR, RL.LOCKCOUNT). Each
//! limiter parses its own rules in its folder (`limiters::*::args`). Each
//! error names the argument it refuses.

use super::int::{parse_i64, parse_in_range, MAX_SAFE};
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

pub(crate) fn expected(lo: i64, hi: i64) -> String {
    format!("expected an integer from {lo} to {hi}")
}

#[inline]
pub(crate) fn ranged(arg: &[u8], what: &str, lo: i64, hi: i64) -> Result<i64, Error> {
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
pub(crate) fn starts_options(arg: &[u8]) -> bool {
    arg.first().is_some_and(u8::is_ascii_alphabetic)
}

/// Arguments as byte strings.
pub(crate) type Words<'b, 'a> = &'b [&'a [u8]];

/// Splits `now rule... option...` (RL.CHECK, RL.THROTTLE and their peeks)
/// into the parsed `now`, the rule arguments and the option arguments.
pub(crate) fn split_rules<'a, 'b>(
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

/// The smallest `COST`: 0 in the peeks (the state now), 1 in the writing
/// commands.
pub(crate) fn lowest_cost(write: bool) -> i64 {
    i64::from(write)
}

pub(crate) fn too_many_rules(n: usize) -> Error {
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

pub(crate) fn rule_error(what: &str, arg: &[u8], n: usize) -> Error {
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

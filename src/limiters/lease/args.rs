//! Argument parsing for RL.LEASE, RL.LEASEPEEK, RL.RELEASE and RL.RENEW,
//! over plain byte slices (the arguments after the key). Left to right, the
//! first bad argument is reported: `now`, then the positional arguments,
//! then the options in order, then `COST`'s value against `limit`.

use std::collections::HashSet;

use smallvec::SmallVec;

use crate::core::args::{parse_now, ranged, starts_options, Clock, Now, MAX_COST};
use crate::core::int::MAX_SAFE;
use crate::error::{show, Error};

/// Longest token: a request id or a job id.
pub const MAX_TOKEN_LEN: usize = 64;

/// Most tokens one RL.RELEASE or RL.RENEW call may give (SPEC "Bounded calls").
pub const MAX_TOKENS: usize = 64;

/// `RL.LEASE key now limit ttl [COST cost] [TOKEN token]` and
/// `RL.LEASEPEEK key now limit [COST cost] [TOKEN token]` (no `ttl`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseArgs<'a> {
    pub now: Now,
    pub limit: i64,
    /// RL.LEASE only (0 for the peek).
    pub ttl: i64,
    /// From 1 (RL.LEASE) or 0 (the peek) to `min(limit, 10000)`.
    pub cost: i64,
    pub token: Option<&'a [u8]>,
}

/// `RL.RELEASE key now token [token ...]` and `RL.RENEW key now ttl token
/// [token ...]` (`ttl` 0 for RL.RELEASE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokensArgs<'a> {
    pub now: Now,
    pub ttl: i64,
    /// On the stack for up to four tokens.
    pub tokens: SmallVec<[&'a [u8]; 4]>,
}

/// A lease's name: 1 to 64 bytes, each printable ASCII other than space and
/// `#` (`#` separates a lease's unit numbers: `tok`, `tok#2`, ...).
pub fn is_token(arg: &[u8]) -> bool {
    (1..=MAX_TOKEN_LEN).contains(&arg.len())
        && arg.iter().all(|&b| b.is_ascii_graphic() && b != b'#')
}

fn token(arg: &[u8]) -> Result<&[u8], Error> {
    if is_token(arg) {
        Ok(arg)
    } else {
        Err(Error::Arg(format!(
            "invalid token '{}': expected 1 to {MAX_TOKEN_LEN} printable ASCII characters other than space and '#'",
            show(arg)
        )))
    }
}

/// `ttl` in `[1, 2^53-1]` with `t + ttl <= 2^53-1`, so no unit's expiry
/// leaves the range a sorted-set score holds exactly.
fn ttl(arg: &[u8], t: i64) -> Result<i64, Error> {
    let ttl = ranged(arg, "ttl", 1, MAX_SAFE)?;
    if ttl > MAX_SAFE - t {
        return Err(Error::Arg(format!(
            "invalid ttl '{}': now + ttl must be at most {MAX_SAFE}",
            show(arg)
        )));
    }
    Ok(ttl)
}

/// Parses RL.LEASE (`peek` false: `ttl` present, `COST` from 1) or
/// RL.LEASEPEEK (`peek` true: no `ttl`, `COST` from 0).
pub fn parse_lease<'a>(
    args: &[&'a [u8]],
    peek: bool,
    clock: &Clock,
) -> Result<LeaseArgs<'a>, Error> {
    parse_lease_with(args, !peek, if peek { 0 } else { 1 }, clock)
}

/// A `LEASE` clause of RL.ALL (`min_cost` 1) or RL.ALLPEEK (`min_cost` 0):
/// RL.LEASE's arguments, `ttl` included.
pub fn parse_lease_clause<'a>(
    args: &[&'a [u8]],
    min_cost: i64,
    clock: &Clock,
) -> Result<LeaseArgs<'a>, Error> {
    parse_lease_with(args, true, min_cost, clock)
}

fn parse_lease_with<'a>(
    args: &[&'a [u8]],
    with_ttl: bool,
    min_cost: i64,
    clock: &Clock,
) -> Result<LeaseArgs<'a>, Error> {
    let Some((&now_arg, rest)) = args.split_first() else {
        return Err(Error::Arg("missing now".into()));
    };
    let now = parse_now(now_arg, clock)?;
    let t = clock.resolve(now);
    let Some((&limit_arg, rest)) = rest.split_first() else {
        return Err(Error::Arg("missing limit".into()));
    };
    let limit = ranged(limit_arg, "limit", 1, MAX_SAFE)?;
    let (ttl, rest) = if !with_ttl {
        (0, rest)
    } else {
        let Some((&ttl_arg, rest)) = rest.split_first() else {
            return Err(Error::Arg("missing ttl".into()));
        };
        (ttl(ttl_arg, t)?, rest)
    };
    let mut cost_arg: Option<&[u8]> = None;
    let mut token_arg: Option<&[u8]> = None;
    let mut options = rest.iter();
    while let Some(&name) = options.next() {
        let is_cost = name.eq_ignore_ascii_case(b"COST");
        if !starts_options(name) {
            return Err(Error::Arg(format!(
                "syntax error: unexpected argument '{}' (expected COST or TOKEN)",
                show(name)
            )));
        } else if !is_cost && !name.eq_ignore_ascii_case(b"TOKEN") {
            return Err(Error::Arg(format!(
                "syntax error: unknown option '{}' (expected COST or TOKEN)",
                show(name)
            )));
        }
        let (upper, slot) = if is_cost {
            ("COST", &mut cost_arg)
        } else {
            ("TOKEN", &mut token_arg)
        };
        if slot.is_some() {
            return Err(Error::Arg(format!(
                "syntax error: option {upper} given twice"
            )));
        }
        let Some(&value) = options.next() else {
            return Err(Error::Arg(format!(
                "syntax error: option {upper} needs a value"
            )));
        };
        if !is_cost {
            token(value)?;
        }
        *slot = Some(value);
    }
    let cost = match cost_arg {
        None => 1,
        Some(arg) => ranged(arg, "cost", min_cost, limit.min(MAX_COST))?,
    };
    Ok(LeaseArgs {
        now,
        limit,
        ttl,
        cost,
        token: token_arg,
    })
}

/// Parses RL.RELEASE (`renew` false) or RL.RENEW (`renew` true: `ttl`
/// before the tokens). Each token is checked, and against the earlier ones,
/// left to right; the cap after them all.
pub fn parse_tokens<'a>(
    args: &[&'a [u8]],
    renew: bool,
    clock: &Clock,
) -> Result<TokensArgs<'a>, Error> {
    let Some((&now_arg, rest)) = args.split_first() else {
        return Err(Error::Arg("missing now".into()));
    };
    let now = parse_now(now_arg, clock)?;
    let t = clock.resolve(now);
    let (ttl, rest) = if renew {
        let Some((&ttl_arg, rest)) = rest.split_first() else {
            return Err(Error::Arg("missing ttl".into()));
        };
        (ttl(ttl_arg, t)?, rest)
    } else {
        (0, rest)
    };
    if rest.is_empty() {
        return Err(Error::Arg("at least one token is required".into()));
    }
    // Up to the cap a scan of the earlier tokens is cheaper than hashing;
    // past it (an argument error anyway) a set keeps the check linear.
    let mut seen: HashSet<&[u8]> = HashSet::new();
    for (i, &arg) in rest.iter().enumerate() {
        token(arg)?;
        let repeated = if rest.len() <= MAX_TOKENS {
            rest[..i].contains(&arg)
        } else {
            !seen.insert(arg)
        };
        if repeated {
            return Err(Error::Arg(format!(
                "token '{}' given twice (token {})",
                show(arg),
                i + 1
            )));
        }
    }
    if rest.len() > MAX_TOKENS {
        return Err(Error::Arg(format!(
            "too many tokens: {} given, at most {MAX_TOKENS} per call",
            rest.len()
        )));
    }
    Ok(TokensArgs {
        now,
        ttl,
        tokens: rest.iter().copied().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<&[u8]> {
        line.split_whitespace().map(str::as_bytes).collect()
    }

    const CLOCK: Clock = Clock {
        server_time: 1000,
        max_future_ms: 0,
        max_past_ms: 0,
    };

    fn lease(line: &str) -> Result<LeaseArgs<'_>, String> {
        parse_lease(&words(line), false, &CLOCK).map_err(|e| e.reply_text())
    }

    fn peek(line: &str) -> Result<LeaseArgs<'_>, String> {
        parse_lease(&words(line), true, &CLOCK).map_err(|e| e.reply_text())
    }

    #[test]
    fn lease_arguments() {
        let a = lease("* 5 1000").unwrap();
        assert_eq!(
            (a.now, a.limit, a.ttl, a.cost, a.token),
            (Now::Server, 5, 1000, 1, None)
        );
        let a = lease("7 5 1000 token job-1 cost 3").unwrap();
        assert_eq!(
            (a.now, a.cost, a.token),
            (Now::At(7), 3, Some(&b"job-1"[..]))
        );
        // t + ttl at the top of the range, and one past it (t = server time).
        assert!(lease(&format!("0 1 {MAX_SAFE}")).is_ok());
        assert!(lease(&format!("* 1 {}", MAX_SAFE - 1000)).is_ok());
        let e = lease(&format!("* 1 {}", MAX_SAFE - 999)).unwrap_err();
        assert!(e.starts_with("ERR invalid ttl"), "{e}");
        let cases = [
            ("x 5 1000", "ERR invalid now 'x'"),
            ("* 0 1000", "ERR invalid limit '0'"),
            ("* 5 0", "ERR invalid ttl '0'"),
            ("* 5", "ERR missing ttl"),
            ("* 5 1000 7", "ERR syntax error: unexpected argument '7'"),
            (
                "* 5 1000 COST",
                "ERR syntax error: option COST needs a value",
            ),
            (
                "* 5 1000 COST 1 cost 1",
                "ERR syntax error: option COST given twice",
            ),
            (
                "* 5 1000 TOKEN a TOKEN b",
                "ERR syntax error: option TOKEN given twice",
            ),
            (
                "* 5 1000 REFUND",
                "ERR syntax error: unknown option 'REFUND'",
            ),
            ("* 5 1000 COST 6", "ERR invalid cost '6'"),
            ("* 5 1000 COST 0", "ERR invalid cost '0'"),
            ("* 5 1000 TOKEN a#2", "ERR invalid token 'a#2'"),
            // Options in order, COST's value last.
            ("* 5 1000 COST 9 TOKEN a#2", "ERR invalid token 'a#2'"),
            ("* 0 0", "ERR invalid limit '0'"),
        ];
        for (line, want) in cases {
            let e = lease(line).unwrap_err();
            assert!(e.starts_with(want), "{line}: {e}");
        }
        // COST is capped by min(limit, 10000).
        assert!(lease("* 20000 1000 COST 10000").is_ok());
        assert!(lease("* 20000 1000 COST 10001").is_err());
        let long = "t".repeat(64);
        assert!(lease(&format!("* 5 1000 TOKEN {long}")).is_ok());
        assert!(lease(&format!("* 5 1000 TOKEN {long}x")).is_err());
    }

    #[test]
    fn peek_arguments() {
        let a = peek("* 5 COST 0 TOKEN a").unwrap();
        assert_eq!((a.cost, a.ttl, a.token), (0, 0, Some(&b"a"[..])));
        assert!(peek("* 5 1000").is_err(), "no ttl in the peek");
        // TOKEN is validated even with COST 0.
        assert!(peek("* 5 COST 0 TOKEN a#").is_err());
    }

    #[test]
    fn token_rule() {
        assert!(is_token(b"req-42:~!"));
        for bad in [&b""[..], b"a b", b"a#", b"\x7f", b"\xc3\xa9", b"\t", b"a\n"] {
            assert!(!is_token(bad), "{bad:?}");
        }
    }

    #[test]
    fn token_lists() {
        let tokens = |line: &str, renew| {
            parse_tokens(&words(line), renew, &CLOCK)
                .map(|a| (a.ttl, a.tokens.len()))
                .map_err(|e| e.reply_text())
        };
        assert_eq!(tokens("* a b c", false), Ok((0, 3)));
        assert_eq!(tokens("* 500 a b", true), Ok((500, 2)));
        assert!(tokens("* a b a", false)
            .unwrap_err()
            .contains("'a' given twice"));
        assert!(tokens("*", false)
            .unwrap_err()
            .contains("at least one token"));
        assert!(tokens("* 500", true)
            .unwrap_err()
            .contains("at least one token"));
        assert!(tokens("* 0 a", true).unwrap_err().contains("invalid ttl"));
        let many: Vec<String> = (0..65).map(|i| format!("t{i}")).collect();
        let line = format!("* {}", many.join(" "));
        assert!(tokens(&line, false)
            .unwrap_err()
            .contains("too many tokens: 65"));
        // The cap comes after the tokens themselves.
        let line = format!("* {} bad#", many.join(" "));
        assert!(tokens(&line, false)
            .unwrap_err()
            .contains("invalid token 'bad#'"));
        let line = format!("* {}", many[..64].join(" "));
        assert_eq!(tokens(&line, false), Ok((0, 64)));
    }
}

//! RL.QUOTA's and RL.QUOTAPEEK's arguments: `now zone period limit [...]
//! [COST cost] [REFUND | DEBIT]` after the key.

use smallvec::SmallVec;

use super::buckets::{check_now, parse_zone, Period, Zone, MAX_NOW};
use crate::core::args::{expected, lowest_cost, parse_now, parse_options, Accepts, Clock, Now};
use crate::core::int::{parse_in_range, MAX_SAFE};
use crate::error::{show, Error};

/// `RL.QUOTA` / `RL.QUOTAPEEK key now zone period limit [...] [COST cost]
/// [REFUND | DEBIT]` without the key.
#[derive(Debug, Clone)]
pub struct QuotaArgs {
    pub now: Now,
    pub zone: Zone,
    /// Each period once, with its limit, in argument order.
    /// On the stack (a call names each of the six periods at most once).
    pub periods: SmallVec<[(Period, i64); 6]>,
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
    let mut periods: SmallVec<[(Period, i64); 6]> = SmallVec::new();
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

//! RL.THROTTLE's and RL.THROTTLEPEEK's arguments: `now burst count window
//! [...] [COST cost] [REFUND | DEBIT | RESERVE max_wait]` after the key.

use std::collections::HashMap;

use smallvec::SmallVec;

use super::tat::{duplicate_window, gcra, Gcra, ThrottleRule};
use crate::core::args::{
    lowest_cost, parse_options, rule_error, split_rules, too_many_rules, Accepts, Clock, Now,
    MAX_RULES,
};
use crate::core::int::{parse_in_range, MAX_SAFE};
use crate::error::Error;

/// `RL.THROTTLE` / `RL.THROTTLEPEEK key now burst count window [...]
/// [COST cost] [REFUND | DEBIT | RESERVE max_wait]` without the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThrottleArgs {
    pub now: Now,
    /// On the stack for up to two rules (a `Gcra` is 48 bytes: eight
    /// inline ones cost more in moves, measured, than the allocation they
    /// saved).
    pub rules: SmallVec<[Gcra; 2]>,
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

    let mut rules: SmallVec<[Gcra; 2]> =
        SmallVec::with_capacity((rule_args.len() / 3).min(MAX_RULES + 1));
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

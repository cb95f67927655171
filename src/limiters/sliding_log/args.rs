//! RL.CHECK's and RL.PEEK's arguments: `now count window [count window
//! ...] [COST cost] [REFUND | DEBIT]` after the key.

use smallvec::SmallVec;

pub use super::window::Rule;
use crate::core::args::{
    lowest_cost, parse_options, rule_error, split_rules, too_many_rules, Accepts, Clock, Now,
    MAX_COST, MAX_RULES,
};
use crate::core::int::{parse_in_range, MAX_SAFE};
use crate::error::Error;

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

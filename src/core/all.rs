//! RL.ALL and RL.ALLPEEK, the pure part: splitting the arguments into keys
//! and clauses, the checks that span clauses (distinct keys, every key used
//! by exactly one clause, at most 64 rules in all), and the binding clause
//! of the composite reply. Each clause's own arguments are parsed by its
//! limiter (`crate::limiters`) and decided by it.

use smallvec::SmallVec;

use super::args::MAX_RULES;
use super::int::parse_in_range;
use crate::error::{show, Error};

/// Keys per call, and so clauses per call (each key has one clause).
pub const MAX_KEYS: usize = 64;

/// The limiter a clause runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Check,
    Throttle,
    Quota,
    Lease,
}

impl Kind {
    /// The kind a word names (case-insensitive), if any.
    pub fn of(word: &[u8]) -> Option<Kind> {
        [
            (b"CHECK".as_slice(), Kind::Check),
            (b"THROTTLE", Kind::Throttle),
            (b"QUOTA", Kind::Quota),
            (b"LEASE", Kind::Lease),
        ]
        .into_iter()
        .find(|(name, _)| word.eq_ignore_ascii_case(name))
        .map(|(_, kind)| kind)
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Check => "CHECK",
            Kind::Throttle => "THROTTLE",
            Kind::Quota => "QUOTA",
            Kind::Lease => "LEASE",
        }
    }
}

/// `numkeys key [key ...]`: the number of keys, checked to be 1 to 64 and
/// present, and the keys pairwise distinct (an error naming the second of
/// two equal keys by its position). `args` starts at `numkeys`.
pub fn parse_keys(args: &[&[u8]]) -> Result<usize, Error> {
    let Some((&numkeys, rest)) = args.split_first() else {
        return Err(Error::Arg("missing numkeys".into()));
    };
    let n = parse_in_range(numkeys, 1, MAX_KEYS as i64).ok_or_else(|| {
        Error::Arg(format!(
            "invalid numkeys '{}': expected an integer from 1 to {MAX_KEYS}",
            show(numkeys)
        ))
    })? as usize;
    let Some(keys) = rest.get(..n) else {
        return Err(Error::Arg(format!(
            "numkeys is {n} but only {} arguments follow it",
            rest.len()
        )));
    };
    for (j, key) in keys.iter().enumerate() {
        if let Some(i) = keys[..j].iter().position(|k| k == key) {
            return Err(Error::Arg(format!(
                "key {} repeats key {} ('{}'): the keys must be distinct",
                j + 1,
                i + 1,
                show(key)
            )));
        }
    }
    Ok(n)
}

/// One clause as written: its kind, its key index argument (absent when the
/// clause stops right after its kind) and its own arguments after the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span<'b, 'a> {
    pub kind: Kind,
    pub index: Option<&'a [u8]>,
    pub args: &'b [&'a [u8]],
    /// A `REFUND` or `DETAILS` among `args` that does not end the call:
    /// where the first such word stands in `args`, and the word the error
    /// names (`DETAILS` when one of them is, else `REFUND`).
    pub misplaced: Option<(usize, Tail)>,
}

/// The words that may only end RL.ALL (`REFUND`, then `DETAILS`) or
/// RL.ALLPEEK (`DETAILS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    Refund,
    Details,
}

impl Tail {
    pub fn name(self) -> &'static str {
        match self {
            Tail::Refund => "REFUND",
            Tail::Details => "DETAILS",
        }
    }

    /// Why the word cannot stand where it does.
    pub fn rule(self) -> &'static str {
        match self {
            Tail::Refund => "REFUND may only end the call, or come right before a last DETAILS",
            Tail::Details => "DETAILS may only be the last argument of the call",
        }
    }
}

/// What ends the call: `REFUND` (RL.ALL only), `DETAILS` (both).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ending {
    pub refund: bool,
    pub details: bool,
}

/// The clauses after `now`, and what ends the call (`refund_allowed`:
/// RL.ALL, not its peek). A clause ends where the next kind begins; the
/// argument after `COST` or `TOKEN` is that option's value, never a kind,
/// `REFUND` nor `DETAILS`. `DETAILS` ends the call only as its last
/// argument, `REFUND` only as its last or right before a last `DETAILS`;
/// elsewhere either stays among its clause's arguments and is marked there
/// ([`Span::misplaced`]), so that the arguments before it are checked
/// first. On the stack for up to four clauses.
pub fn split_clauses<'b, 'a>(
    args: &'b [&'a [u8]],
    refund_allowed: bool,
) -> Result<(SmallVec<[Span<'b, 'a>; 4]>, Ending), Error> {
    let mut spans: SmallVec<[Span<'b, 'a>; 4]> = SmallVec::new();
    let mut ending = Ending::default();
    // Which tail word a word is, if any: by its length first (most words
    // are numbers of other lengths, or option names).
    let tail_of = |w: &[u8]| match w.len() {
        7 if w.eq_ignore_ascii_case(b"DETAILS") => Some(Tail::Details),
        6 if refund_allowed && w.eq_ignore_ascii_case(b"REFUND") => Some(Tail::Refund),
        _ => None,
    };
    // Where the last clause's arguments start (after its index).
    let mut start = 0;
    let mut i = 0;
    while let Some(&word) = args.get(i) {
        i += 1;
        let is_last = i == args.len();
        if let Some(kind) = Kind::of(word) {
            spans.push(Span {
                kind,
                index: None,
                args: &[],
                misplaced: None,
            });
            start = i;
            continue;
        }
        let tail = tail_of(word);
        if tail.is_some() && !spans.is_empty() {
            let before_last_details = i + 1 == args.len()
                && args
                    .get(i)
                    .is_some_and(|&w| tail_of(w) == Some(Tail::Details));
            match tail {
                Some(Tail::Details) if is_last => {
                    ending.details = true;
                    continue;
                }
                Some(Tail::Refund) if is_last || before_last_details => {
                    ending.refund = true;
                    continue;
                }
                _ => {}
            }
        }
        let Some(span) = spans.last_mut() else {
            return Err(Error::Arg(format!(
                "syntax error: expected a clause (CHECK, THROTTLE, QUOTA or LEASE) after now, got '{}'",
                show(word)
            )));
        };
        if span.index.is_none() && span.args.is_empty() {
            span.index = Some(word);
            start = i;
            continue;
        }
        if let Some(tail) = tail {
            let at = i - 1 - start;
            span.misplaced = match span.misplaced {
                None => Some((at, tail)),
                // The first one's place; DETAILS named before REFUND.
                Some((first, _)) if tail == Tail::Details => Some((first, Tail::Details)),
                kept => kept,
            };
        }
        let takes_value = word.eq_ignore_ascii_case(b"COST")
            || (span.kind == Kind::Lease && word.eq_ignore_ascii_case(b"TOKEN"));
        if takes_value && i < args.len() {
            i += 1;
        }
        span.args = args.get(start..i).unwrap_or(&[]);
    }
    if spans.is_empty() {
        return Err(Error::Arg(
            "at least one clause (CHECK, THROTTLE, QUOTA or LEASE) is required".into(),
        ));
    }
    Ok((spans, ending))
}

/// The 0-based key a clause names with its index argument, checked to be
/// an integer from 1 to `numkeys` and not named by an earlier clause
/// (`used[k]`, updated). `n` is the clause's 1-based position.
pub fn clause_key(
    index: Option<&[u8]>,
    n: usize,
    numkeys: usize,
    used: &mut [bool],
) -> Result<usize, Error> {
    let Some(arg) = index else {
        return Err(Error::Arg(format!("missing key index for clause {n}")));
    };
    let k = parse_in_range(arg, 1, numkeys as i64).ok_or_else(|| {
        Error::Arg(format!(
            "invalid key index '{}' for clause {n}: expected an integer from 1 to {numkeys}",
            show(arg)
        ))
    })? as usize
        - 1;
    match used.get_mut(k) {
        Some(true) => Err(Error::Arg(format!(
            "key index {} for clause {n} is used by an earlier clause: each key belongs to exactly one clause",
            k + 1
        ))),
        Some(slot) => {
            *slot = true;
            Ok(k)
        }
        None => Err(Error::Internal("key index out of range".into())),
    }
}

/// The cap over all clauses: `total` rules so far (a QUOTA period and a
/// LEASE clause count as one each).
pub fn check_rule_cap(total: usize) -> Result<(), Error> {
    if total > MAX_RULES {
        return Err(Error::Arg(format!(
            "too many rules: {total} given over all clauses, at most {MAX_RULES} per call"
        )));
    }
    Ok(())
}

/// Every key is named by a clause: the first unused one is an error.
pub fn check_all_used(used: &[bool]) -> Result<(), Error> {
    match used.iter().position(|&u| !u) {
        Some(k) => Err(Error::Arg(format!(
            "key {} is used by no clause: each key belongs to exactly one clause",
            k + 1
        ))),
        None => Ok(()),
    }
}

/// One clause's answer in its command's reply terms: `[limited, rule,
/// limit, remaining, retry_after, reset_after]`, and the cost it asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClauseReply {
    pub ints: [i64; 6],
    pub cost: i64,
}

impl ClauseReply {
    fn limited(&self) -> bool {
        self.ints[0] != 0
    }
    fn retry_after(&self) -> i64 {
        self.ints[4]
    }
    fn reset_after(&self) -> i64 {
        self.ints[5]
    }
    /// Requests of this shape left: `floor(remaining / max(cost, 1))`.
    fn headroom(&self) -> i64 {
        self.ints[3].max(0) / self.cost.max(1)
    }
}

/// The 0-based index of the binding clause (0 when there is none).
/// Rejected (any clause limited): a refusal waiting cannot help
/// (`retry_after` -1) first, else the largest `retry_after`, ties to the
/// lower index. Admitted: the fewest requests of this shape left, ties to
/// the larger `reset_after`, then to the lower index.
pub fn binding_clause(replies: &[ClauseReply]) -> usize {
    let wait = |r: &ClauseReply| match r.retry_after() {
        -1 => i64::MAX,
        w => w,
    };
    let mut refused: Option<(usize, &ClauseReply)> = None;
    let mut admitted: Option<(usize, &ClauseReply)> = None;
    for (i, r) in replies.iter().enumerate() {
        if r.limited() {
            if refused.is_none_or(|(_, b)| wait(r) > wait(b)) {
                refused = Some((i, r));
            }
        } else if admitted.is_none_or(|(_, b)| {
            r.headroom() < b.headroom()
                || (r.headroom() == b.headroom() && r.reset_after() > b.reset_after())
        }) {
            admitted = Some((i, r));
        }
    }
    refused.or(admitted).map_or(0, |(i, _)| i)
}

/// The seven integers of the reply: `[limited, clause, rule, limit,
/// remaining, retry_after, reset_after]`, `clause` 1-based.
pub fn reply(replies: &[ClauseReply]) -> [i64; 7] {
    let i = binding_clause(replies);
    let ints = replies.get(i).map_or([0; 6], |r| r.ints);
    let limited = i64::from(replies.iter().any(ClauseReply::limited));
    [
        limited,
        i as i64 + 1,
        ints[1],
        ints[2],
        ints[3],
        ints[4],
        ints[5],
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<&[u8]> {
        s.split_whitespace().map(str::as_bytes).collect()
    }

    fn ok(remaining: i64, reset_after: i64, cost: i64) -> ClauseReply {
        ClauseReply {
            ints: [0, 1, 10, remaining, -1, reset_after],
            cost,
        }
    }

    fn refused(retry_after: i64) -> ClauseReply {
        ClauseReply {
            ints: [1, 2, 10, 0, retry_after, 500],
            cost: 1,
        }
    }

    #[test]
    fn binding_clause_table() {
        let cases: &[(&str, Vec<ClauseReply>, usize)] = &[
            ("one clause", vec![ok(3, 10, 1)], 0),
            ("fewest left", vec![ok(3, 10, 1), ok(1, 5, 1)], 1),
            (
                "left is scaled by the cost: 9/3 = 3 beats 4/1",
                vec![ok(4, 10, 1), ok(9, 10, 3)],
                1,
            ),
            (
                "scaled headroom floors: 5/3 = 1 ties 1/1, the longer reset wins",
                vec![ok(1, 10, 1), ok(5, 20, 3)],
                1,
            ),
            ("cost 0 counts as 1", vec![ok(2, 10, 0), ok(3, 10, 1)], 0),
            ("full tie: lower index", vec![ok(2, 10, 1), ok(2, 10, 1)], 0),
            (
                "rejected: only refusals bind",
                vec![ok(0, 99_999, 1), refused(5)],
                1,
            ),
            (
                "rejected: largest retry_after",
                vec![refused(5), refused(50), refused(7)],
                1,
            ),
            (
                "rejected: ties to the lower index",
                vec![refused(50), ok(0, 1, 1), refused(50)],
                0,
            ),
            (
                "rejected: -1 (waiting cannot help) binds first",
                vec![refused(50), refused(-1), refused(9_000)],
                1,
            ),
            (
                "rejected: two -1 tie to the lower index",
                vec![refused(5), refused(-1), refused(-1)],
                1,
            ),
        ];
        for (name, replies, want) in cases {
            assert_eq!(binding_clause(replies), *want, "{name}");
        }
    }

    #[test]
    fn reply_layout() {
        let r = reply(&[ok(3, 10, 1), refused(70)]);
        assert_eq!(r, [1, 2, 2, 10, 0, 70, 500]);
        let r = reply(&[ok(3, 10, 1), ok(1, 20, 1)]);
        assert_eq!(r, [0, 2, 1, 10, 1, -1, 20]);
    }

    #[test]
    fn keys_table() {
        let cases: &[(&str, Result<usize, &str>)] = &[
            ("1 a", Ok(1)),
            ("3 a b c now", Ok(3)),
            ("", Err("missing numkeys")),
            (
                "0 a",
                Err("invalid numkeys '0': expected an integer from 1 to 64"),
            ),
            ("65 a", Err("invalid numkeys '65'")),
            ("01 a", Err("invalid numkeys '01'")),
            ("x a", Err("invalid numkeys 'x'")),
            ("3 a b", Err("numkeys is 3 but only 2 arguments follow it")),
            (
                "3 a b a",
                Err("key 3 repeats key 1 ('a'): the keys must be distinct"),
            ),
            ("2 b b", Err("key 2 repeats key 1")),
        ];
        for (input, want) in cases {
            let got = parse_keys(&words(input));
            match (got, want) {
                (Ok(n), Ok(w)) => assert_eq!(n, *w, "{input}"),
                (Err(Error::Arg(m)), Err(w)) => assert!(m.starts_with(w), "{input}: {m}"),
                (got, want) => panic!("{input}: got {got:?}, want {want:?}"),
            }
        }
        let many = format!(
            "64 {}",
            (0..64).map(|i| format!("k{i} ")).collect::<String>()
        );
        assert_eq!(parse_keys(&words(&many)).unwrap(), 64);
    }

    #[test]
    fn clauses_split_where_a_kind_begins() {
        let w = words("CHECK 1 5 1000 throttle 2 1 1 10 COST 2");
        let (spans, ending) = split_clauses(&w, true).unwrap();
        assert_eq!(ending, Ending::default());
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].kind, Kind::Check);
        assert_eq!(spans[0].index, Some(b"1".as_slice()));
        assert_eq!(spans[0].args, words("5 1000"));
        assert_eq!(spans[1].kind, Kind::Throttle);
        assert_eq!(spans[1].args, words("1 1 10 COST 2"));
        assert_eq!(spans[1].misplaced, None);

        // TOKEN's and COST's values are never kinds, nor REFUND or DETAILS.
        let w = words("LEASE 1 2 100 TOKEN quota COST 1 REFUND");
        let (spans, ending) = split_clauses(&w, true).unwrap();
        assert!(ending.refund && !ending.details);
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].args, words("2 100 TOKEN quota COST 1"));
        let w = words("CHECK 1 5 10 COST REFUND");
        let (spans, ending) = split_clauses(&w, true).unwrap();
        assert!(!ending.refund);
        assert_eq!(spans[0].args, words("5 10 COST REFUND"));
        assert_eq!(spans[0].misplaced, None);
        let w = words("LEASE 1 2 100 TOKEN details");
        let (spans, ending) = split_clauses(&w, true).unwrap();
        assert_eq!(ending, Ending::default());
        assert_eq!(spans[0].args, words("2 100 TOKEN details"));
        let w = words("LEASE 1 2 100 COST DETAILS DETAILS");
        let (spans, ending) = split_clauses(&w, false).unwrap();
        assert!(ending.details);
        assert_eq!(spans[0].args, words("2 100 COST DETAILS"));
        // In a CHECK clause, TOKEN is not an option: a kind after it begins a clause.
        let w = words("CHECK 1 TOKEN LEASE 2");
        let (spans, _) = split_clauses(&w, true).unwrap();
        assert_eq!(spans.len(), 2);

        // REFUND only in RL.ALL: in its peek it is a clause's argument.
        let w = words("CHECK 1 5 10 REFUND");
        let (spans, ending) = split_clauses(&w, false).unwrap();
        assert!(!ending.refund);
        assert_eq!(spans[0].args, words("5 10 REFUND"));
        assert_eq!(spans[0].misplaced, None);

        // A clause with nothing after its kind.
        let w = words("check quota 2");
        let (spans, _) = split_clauses(&w, true).unwrap();
        assert_eq!(spans[0].index, None);
        assert_eq!(spans[1].index, Some(b"2".as_slice()));

        for (input, want) in [
            ("", "at least one clause"),
            ("REFUND", "syntax error: expected a clause"),
            ("DETAILS", "syntax error: expected a clause"),
            ("5 CHECK 1 5 10", "syntax error: expected a clause (CHECK, THROTTLE, QUOTA or LEASE) after now, got '5'"),
        ] {
            match split_clauses(&words(input), true) {
                Err(Error::Arg(m)) => assert!(m.starts_with(want), "{input}: {m}"),
                other => panic!("{input}: {other:?}"),
            }
        }
    }

    /// `REFUND` then `DETAILS` end the call, each at most once; elsewhere
    /// the first such word of a clause is marked where it stands, named
    /// `DETAILS` when the clause holds a misplaced `DETAILS`.
    #[test]
    fn refund_and_details_end_the_call() {
        use Tail::{Details, Refund};
        // input, refund allowed, refund, details, last clause's args, misplaced
        type Case = (
            &'static str,
            bool,
            bool,
            bool,
            &'static str,
            Option<(usize, Tail)>,
        );
        let cases: &[Case] = &[
            ("CHECK 1 5 10 DETAILS", true, false, true, "5 10", None),
            (
                "CHECK 1 5 10 refund details",
                true,
                true,
                true,
                "5 10",
                None,
            ),
            ("CHECK 1 5 10 DETAILS", false, false, true, "5 10", None),
            (
                "CHECK 1 5 10 DETAILS REFUND",
                true,
                true,
                false,
                "5 10 DETAILS",
                Some((2, Details)),
            ),
            (
                "CHECK 1 5 10 REFUND DETAILS DETAILS",
                true,
                false,
                true,
                "5 10 REFUND DETAILS",
                Some((2, Details)),
            ),
            (
                "CHECK 1 5 10 DETAILS DETAILS",
                true,
                false,
                true,
                "5 10 DETAILS",
                Some((2, Details)),
            ),
            (
                "CHECK 1 5 10 REFUND REFUND",
                true,
                true,
                false,
                "5 10 REFUND",
                Some((2, Refund)),
            ),
            (
                "CHECK 1 5 10 REFUND REFUND DETAILS",
                true,
                true,
                true,
                "5 10 REFUND",
                Some((2, Refund)),
            ),
            (
                "CHECK 1 5 REFUND 10",
                true,
                false,
                false,
                "5 REFUND 10",
                Some((1, Refund)),
            ),
            (
                "CHECK 1 5 10 COST 2 DETAILS DETAILS",
                false,
                false,
                true,
                "5 10 COST 2 DETAILS",
                Some((4, Details)),
            ),
            (
                "CHECK 1 5 DETAILS 10 CHECK 2 5 10",
                true,
                false,
                false,
                "5 10",
                None,
            ),
        ];
        for &(input, allowed, refund, details, last, misplaced) in cases {
            let w = words(input);
            let (spans, ending) = split_clauses(&w, allowed).unwrap();
            assert_eq!(ending, Ending { refund, details }, "{input}");
            let span = spans.last().unwrap();
            assert_eq!(span.args, words(last), "{input}");
            assert_eq!(span.misplaced, misplaced, "{input}");
        }
        let w = words("CHECK 1 5 DETAILS 10 CHECK 2 5 10");
        let (spans, _) = split_clauses(&w, true).unwrap();
        assert_eq!(spans[0].args, words("5 DETAILS 10"));
        assert_eq!(spans[0].misplaced, Some((1, Details)));
    }

    #[test]
    fn key_indexes_and_the_cap() {
        let mut used = vec![false; 3];
        assert_eq!(clause_key(Some(b"2"), 1, 3, &mut used).unwrap(), 1);
        let cases: &[(Option<&[u8]>, &str)] = &[
            (None, "missing key index for clause 2"),
            (
                Some(b"0"),
                "invalid key index '0' for clause 2: expected an integer from 1 to 3",
            ),
            (Some(b"4"), "invalid key index '4'"),
            (Some(b"+1"), "invalid key index '+1'"),
            (
                Some(b"2"),
                "key index 2 for clause 2 is used by an earlier clause",
            ),
        ];
        for (arg, want) in cases {
            match clause_key(*arg, 2, 3, &mut used) {
                Err(Error::Arg(m)) => assert!(m.starts_with(want), "{m}"),
                other => panic!("{arg:?}: {other:?}"),
            }
        }
        assert_eq!(
            check_all_used(&used),
            Err(Error::Arg(
                "key 1 is used by no clause: each key belongs to exactly one clause".into()
            ))
        );
        assert!(check_all_used(&[true, true]).is_ok());
        assert!(check_rule_cap(64).is_ok());
        assert_eq!(
            check_rule_cap(65),
            Err(Error::Arg(
                "too many rules: 65 given over all clauses, at most 64 per call".into()
            ))
        );
    }
}

//! Table tests of the limiters' argument parsers (RL.CHECK, RL.THROTTLE,
//! RL.QUOTA and their peeks), with the options and clock guards they share.

use super::calendar::args::*;
use super::gcra::args::*;
use super::sliding_log::args::*;
use crate::core::args::*;
use crate::core::int::MAX_SAFE;
use crate::error::Error;

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
        arg_err(throttle("* 1 1 1000 COST 9007199254740992 REFUND", true)).contains("invalid cost")
    );
}

#[test]
fn debit_ranges_and_exclusions() {
    let words =
        |line: &'static str| -> Vec<&'static [u8]> { line.split(' ').map(str::as_bytes).collect() };
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
    let words =
        |line: &'static str| -> Vec<&'static [u8]> { line.split(' ').map(str::as_bytes).collect() };
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
    let words =
        |line: &'static str| -> Vec<&'static [u8]> { line.split(' ').map(str::as_bytes).collect() };
    let c = Clock::UNGUARDED;
    assert_eq!(
        parse_check(&words("* 10 1000 COST 0"), false, &c)
            .unwrap()
            .cost,
        0
    );
    assert!(arg_err(parse_check(&words("* 10 1000 COST 0"), true, &c)).contains("invalid cost '0'"));
    assert_eq!(
        parse_throttle(&words("* 1 1 1000 COST 0"), false, &c)
            .unwrap()
            .cost,
        0
    );
    assert!(
        arg_err(parse_throttle(&words("* 1 1 1000 COST 0"), true, &c)).contains("invalid cost '0'")
    );
    assert_eq!(
        parse_quota(&words("* UTC DAY 0 COST 0"), false, &c)
            .unwrap()
            .cost,
        0
    );
    assert!(
        arg_err(parse_quota(&words("* UTC DAY 5 COST 0"), true, &c)).contains("invalid cost '0'")
    );
    assert!(
        arg_err(parse_check(&words("* 10 1000 COST -1"), false, &c)).contains("invalid cost '-1'")
    );
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
    let rules =
        |n: usize, per: &dyn Fn(usize) -> String| (1..=n).map(per).collect::<Vec<_>>().join(" ");
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

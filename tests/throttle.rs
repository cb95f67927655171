//! RL.THROTTLE and RL.THROTTLEPEEK against a real server: the SPEC's
//! example, the hash layout, expiry, refunds, errors with nothing written,
//! other fields left alone, and 50 connections at one instant.

mod common;

use common::*;
use redis::Connection;

const T: i64 = 1_700_000_000_000;

fn hgetall(con: &mut Connection, key: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = redis::cmd("HGETALL").arg(key).query(con).unwrap();
    v.sort();
    v
}

#[test]
fn spec_example_and_hash_layout() {
    let s = Server::start();
    let mut con = s.con();
    let before_ms = server_ms(&mut con);
    let line = format!("RL.THROTTLE k {T} 2 2 1000");
    assert_eq!(ints(&mut con, &line), [0, 1, 2, 1, -1, 500]);
    assert_eq!(ints(&mut con, &line), [0, 1, 2, 0, -1, 1000]);
    assert_eq!(ints(&mut con, &line), [1, 1, 2, 0, 500, 1000]);
    // One field per window, the TAT in ns.
    assert_eq!(
        hgetall(&mut con, "k"),
        [("1000".to_string(), format!("{}", (T + 1000) * 1_000_000))]
    );
    // The key expires when the bucket is full again, later by the lag of
    // an explicit now behind the server's clock.
    let after_ms = server_ms(&mut con);
    // On the key's grid: W = the bucket's depth, 1000 ms.
    let at = pexpiretime(&mut con, "k");
    assert!(
        (before_ms..=after_ms).any(|c| at == grid_at("k", 1000, c + 1000)),
        "{at}"
    );
    // Refill at exactly T = 500 ms.
    let later = format!("RL.THROTTLE k {} 2 2 1000", T + 499);
    assert_eq!(ints(&mut con, &later), [1, 1, 2, 0, 1, 501]);
    let later = format!("RL.THROTTLE k {} 2 2 1000", T + 500);
    assert_eq!(ints(&mut con, &later), [0, 1, 2, 0, -1, 1000]);
}

#[test]
fn peek_writes_nothing_and_matches_the_next_call() {
    let s = Server::start();
    let mut con = s.con();
    run(&mut con, &format!("RL.THROTTLE p {T} 5 1 1000"));
    let before = snapshot(&mut con);
    let peek = ints(&mut con, &format!("RL.THROTTLEPEEK p {T} 5 1 1000 COST 2"));
    assert_same_keyspace(&before, &snapshot(&mut con), "THROTTLEPEEK");
    assert_eq!(peek, [0, 1, 5, 2, -1, 3000]);
    assert_eq!(
        ints(&mut con, &format!("RL.THROTTLE p {T} 5 1 1000 COST 2")),
        peek
    );
    // A peek on a missing key creates nothing.
    assert_eq!(
        ints(&mut con, &format!("RL.THROTTLEPEEK none {T} 5 1 1000")),
        [0, 1, 5, 4, -1, 1000]
    );
    assert!(!exists(&mut con, "none"));
}

#[test]
fn several_rules_are_all_or_nothing_and_other_fields_stay() {
    let s = Server::start();
    let mut con = s.con();
    // A longer rule set wrote a field the shorter one does not name.
    run(
        &mut con,
        &format!("RL.THROTTLE m {T} 3 3 1000 100 100 3600000"),
    );
    let hour_field = hgetall(&mut con, "m")[1].clone();
    let expiry = pexpiretime(&mut con, "m");
    for _ in 0..2 {
        assert_eq!(ints(&mut con, &format!("RL.THROTTLE m {T} 3 3 1000"))[0], 0);
    }
    assert_eq!(hgetall(&mut con, "m")[1], hour_field);
    // The expiry never moves back (the hour's bucket holds the key).
    assert_eq!(pexpiretime(&mut con, "m"), expiry);
    // Rule 1 refuses: nothing is written for rule 2 either.
    let before = snapshot(&mut con);
    let r = ints(
        &mut con,
        &format!("RL.THROTTLE m {T} 3 3 1000 100 100 3600000"),
    );
    assert_eq!(r[..2], [1, 1]);
    assert_same_keyspace(&before, &snapshot(&mut con), "rejected");
}

#[test]
fn refunds_give_units_back_never_beyond_a_full_bucket() {
    let s = Server::start();
    let mut con = s.con();
    for _ in 0..3 {
        run(&mut con, &format!("RL.THROTTLE r {T} 3 1 1000"));
    }
    let expiry = pexpiretime(&mut con, "r");
    // The reply is the state now: one unit can pass at once, and the
    // bucket is full again in 2 s.
    assert_eq!(
        ints(&mut con, &format!("RL.THROTTLE r {T} 3 1 1000 REFUND")),
        [0, 1, 3, 1, -1, 2000]
    );
    assert_eq!(
        hgetall(&mut con, "r"),
        [("1000".to_string(), format!("{}", (T + 2000) * 1_000_000))]
    );
    assert_eq!(
        pexpiretime(&mut con, "r"),
        expiry,
        "a refund keeps the expiry"
    );
    assert_eq!(
        ints(
            &mut con,
            &format!("RL.THROTTLE r {T} 3 1 1000 COST 3 REFUND")
        ),
        [0, 1, 3, 3, -1, 0]
    );
    assert!(!exists(&mut con, "r"), "a full bucket is no state");
    // Refunding into nothing writes nothing.
    ints(&mut con, &format!("RL.THROTTLE r {T} 3 1 1000 REFUND"));
    assert!(!exists(&mut con, "r"));
    if !functions_backend() {
        // INFO ratelimit: not covered by the library
        let stats = rl_stats(&mut con);
        assert_eq!(stats["ratelimit_throttle_refunds"], 3);
        assert_eq!(stats["ratelimit_throttle_admitted"], 3);
    }
}

#[test]
fn errors_write_nothing() {
    let s = Server::start();
    let mut con = s.con();
    run(&mut con, "SET str x");
    run(&mut con, "HSET bad 1000 12x");
    run(&mut con, &format!("RL.THROTTLE good {T} 2 2 1000"));
    let before = snapshot(&mut con);
    let cases = [
        (
            format!("RL.THROTTLE good {T} 2 2 1000 2 2 1000"),
            "ERR invalid rule 2: window 1000 is also the window of rule 1",
        ),
        (
            format!("RL.THROTTLE good {T} 0 2 1000"),
            "ERR invalid burst '0' for rule 1",
        ),
        (
            format!("RL.THROTTLE good {T} 1 2000000 1"),
            "ERR invalid rule 1: count 2000000 over window 1",
        ),
        (
            format!("RL.THROTTLE good {T} 2 2 1000 COST 3"),
            "ERR invalid cost '3': expected an integer from 1 to 2",
        ),
        (
            format!("RL.THROTTLEPEEK good {T} 2 2 1000 REFUND"),
            "ERR syntax error: unknown option 'REFUND' (expected COST or RESERVE)",
        ),
        (format!("RL.THROTTLE str {T} 2 2 1000"), "WRONGTYPE"),
        (
            format!("RL.THROTTLE bad {T} 2 2 1000"),
            "ERR hash at 'bad' field '1000' holds '12x'",
        ),
        (
            format!("RL.THROTTLE bad {T} 2 2 1000 REFUND"),
            "ERR hash at 'bad' field '1000' holds '12x'",
        ),
    ];
    for (line, want) in &cases {
        let got = err(&mut con, line);
        assert!(got.starts_with(want), "{line}: {got}");
    }
    // A field of another window with a bad value is not read.
    assert_eq!(
        ints(&mut con, &format!("RL.THROTTLEPEEK bad {T} 2 2 60000"))[0],
        0
    );
    assert_same_keyspace(&before, &snapshot(&mut con), "errors");
}

#[test]
fn fifty_connections_at_one_instant_admit_exactly_burst() {
    let s = Server::start();
    let replies = burst(&s, 50, &format!("RL.THROTTLE burst {T} 10 1 60000"));
    let mut remaining: Vec<i64> = replies.iter().filter(|r| r[0] == 0).map(|r| r[3]).collect();
    remaining.sort_unstable();
    assert_eq!(remaining, (0..10).collect::<Vec<i64>>(), "{replies:?}");
    for r in replies.iter().filter(|r| r[0] == 1) {
        // One unit per minute: the next in 60 s, full in 10 minutes.
        assert_eq!(r, &vec![1, 1, 10, 0, 60000, 600000]);
    }
}

//! `RESERVE max_wait` on RL.THROTTLE and RL.THROTTLEPEEK against a real
//! server (SPEC "Reservations"): a chain at one instant answers delays
//! spaced by the emission interval, a refund cancels a reservation, a wait
//! above `max_wait` is refused with the time it would pass, `RESERVE 0`,
//! the peek writes nothing, and 50 connections at one instant get 50
//! distinct delays.

mod common;

use common::*;
use redis::Connection;

const T: i64 = 1_796_054_400_000;
const NS: i64 = 1_000_000;

fn tat(con: &mut Connection, key: &str, field: &str) -> Option<i64> {
    let v: Option<String> = redis::cmd("HGET").arg(key).arg(field).query(con).unwrap();
    v.map(|v| v.parse::<i64>().unwrap())
}

#[test]
fn a_chain_at_one_instant_and_a_refund_that_cancels_the_last() {
    let s = Server::start();
    let mut con = s.con();
    // Burst 1, 10 per second: T = tau = 100 ms.
    let line = format!("RL.THROTTLE api {T} 1 10 1000 RESERVE 60000");
    let delays: Vec<i64> = (0..5).map(|_| ints(&mut con, &line)[4]).collect();
    assert_eq!(delays, [0, 100, 200, 300, 400]);
    assert_eq!(ints(&mut con, &line), [0, 1, 1, 0, 500, 600]);
    assert_eq!(tat(&mut con, "api", "1000"), Some((T + 600) * NS));
    // The last caller gives up: a refund of its cost; the next reservation
    // takes its slot.
    assert_eq!(
        ints(&mut con, &format!("RL.THROTTLE api {T} 1 10 1000 REFUND")),
        [1, 1, 1, 0, 400, 500]
    );
    assert_eq!(tat(&mut con, "api", "1000"), Some((T + 500) * NS));
    assert_eq!(ints(&mut con, &line)[4], 500);
    // A wait above max_wait: refused, nothing written, and retry_after is
    // when this call with this max_wait would pass.
    let before = snapshot(&mut con);
    let short = format!("RL.THROTTLE api {T} 1 10 1000 RESERVE 250");
    assert_eq!(ints(&mut con, &short), [1, 1, 1, 0, 350, 600]);
    assert_same_keyspace(&before, &snapshot(&mut con), "a refused reservation");
    let later = format!("RL.THROTTLE api {} 1 10 1000 RESERVE 250", T + 350);
    assert_eq!(ints(&mut con, &later), [0, 1, 1, 0, 250, 350]);
    // The peek answers what the reservation would, and writes nothing.
    let before = snapshot(&mut con);
    assert_eq!(
        ints(
            &mut con,
            &format!("RL.THROTTLEPEEK api {T} 1 10 1000 RESERVE 60000")
        ),
        [0, 1, 1, 0, 700, 800]
    );
    assert_same_keyspace(&before, &snapshot(&mut con), "RL.THROTTLEPEEK RESERVE");
    if !functions_backend() {
        // INFO ratelimit: not covered by the library
        let stats = rl_stats(&mut con);
        assert_eq!(stats["ratelimit_throttle_admitted"], 8);
        assert_eq!(stats["ratelimit_throttle_rejected"], 1);
        assert_eq!(stats["ratelimit_throttle_refunds"], 1);
    }
}

#[test]
fn reserve_0_is_an_ordinary_call_that_answers_0() {
    let s = Server::start();
    let mut con = s.con();
    let plain = format!("RL.THROTTLE a {T} 2 2 1000");
    let zero = format!("RL.THROTTLE b {T} 2 2 1000 RESERVE 0");
    assert_eq!(ints(&mut con, &plain), [0, 1, 2, 1, -1, 500]);
    assert_eq!(ints(&mut con, &zero), [0, 1, 2, 1, 0, 500]);
    assert_eq!(ints(&mut con, &plain), [0, 1, 2, 0, -1, 1000]);
    assert_eq!(ints(&mut con, &zero), [0, 1, 2, 0, 0, 1000]);
    assert_eq!(ints(&mut con, &plain), [1, 1, 2, 0, 500, 1000]);
    assert_eq!(ints(&mut con, &zero), [1, 1, 2, 0, 500, 1000]);
    assert_eq!(tat(&mut con, "a", "1000"), tat(&mut con, "b", "1000"));
}

#[test]
fn reservation_arguments() {
    let s = Server::start();
    let mut con = s.con();
    let before = snapshot(&mut con);
    for (line, want) in [
        (
            format!("RL.THROTTLE k {T} 1 1 1000 RESERVE -1"),
            "ERR invalid RESERVE max_wait '-1'",
        ),
        (
            "RL.THROTTLE k 9007199254740000 1 1 1000 RESERVE 992".to_string(),
            "ERR invalid RESERVE max_wait '992': expected an integer from 0 to 991",
        ),
        (
            format!("RL.THROTTLE k {T} 1 1 1000 RESERVE 1 REFUND"),
            "ERR syntax error: option REFUND cannot be combined with RESERVE",
        ),
        (
            format!("RL.THROTTLE k {T} 1 1 1000 DEBIT RESERVE 1"),
            "ERR syntax error: option RESERVE cannot be combined with DEBIT",
        ),
        (
            format!("RL.THROTTLE k {T} 1 1 1000 RESERVE"),
            "ERR syntax error: option RESERVE needs a value",
        ),
        (
            format!("RL.CHECK k {T} 1 1000 RESERVE 1"),
            "ERR syntax error: unknown option 'RESERVE' (expected COST, REFUND or DEBIT)",
        ),
        (
            format!("RL.QUOTA k {T} UTC DAY 1 RESERVE 1"),
            "ERR syntax error: unknown option 'RESERVE' (expected COST, REFUND or DEBIT)",
        ),
    ] {
        let got = err(&mut con, &line);
        assert!(got.starts_with(want), "{line}: {got}");
    }
    assert_same_keyspace(&before, &snapshot(&mut con), "argument errors");
    // The last ms a reservation may reach is accepted.
    assert_eq!(
        ints(
            &mut con,
            "RL.THROTTLE k 9007199254740000 1 1 1000 RESERVE 991"
        )[..2],
        [0, 1]
    );
}

#[test]
fn fifty_connections_at_one_instant_get_delays_spaced_by_t() {
    let s = Server::start();
    // Burst 1, 4 per second: T = 250 ms.
    let replies = burst(
        &s,
        50,
        &format!("RL.THROTTLE q {T} 1 4 1000 RESERVE 3600000"),
    );
    assert!(replies.iter().all(|r| r[0] == 0), "{replies:?}");
    let mut delays: Vec<i64> = replies.iter().map(|r| r[4]).collect();
    delays.sort_unstable();
    assert_eq!(delays, (0..50).map(|k| k * 250).collect::<Vec<i64>>());
    let mut con = s.con();
    assert_eq!(tat(&mut con, "q", "1000"), Some((T + 50 * 250) * NS));
}

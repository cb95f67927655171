//! `DEBIT` on RL.CHECK, RL.THROTTLE and RL.QUOTA against a real server
//! (SPEC "Debits"): usage charged after the fact is recorded whether or not
//! it fits, written as an admission, answered with the state now; later
//! calls are refused until the debt clears; a refund of the same cost
//! undoes it; INFO counts debits apart.

mod common;

use std::collections::BTreeMap;

use common::*;
use redis::Connection;

const T: i64 = 1_796_054_400_000; // 2026-11-30T16:00Z

/// Asserts that `key` expires at `x`, later by the lag of `T` behind the
/// server clock, read before (`before`) and now — on the key's grid of
/// window `w` for RL.CHECK and RL.THROTTLE (SPEC "Expiries on a grid"), as
/// it is for RL.QUOTA (`None`).
fn assert_expires_at(con: &mut Connection, key: &str, x: i64, before: i64, w: Option<i64>) {
    let after = server_ms(con);
    let at = pexpiretime(con, key);
    let on_grid = |x| w.map_or(x, |w| grid_at(key, w, x));
    assert!(
        (x + before - T..=x + after - T).any(|x| at == on_grid(x)),
        "{key} expires at {at}, want {x} plus the lag (on the grid of {w:?})"
    );
}

fn hgetall(con: &mut Connection, key: &str) -> BTreeMap<String, String> {
    redis::cmd("HGETALL").arg(key).query(con).unwrap()
}

#[test]
fn rl_check_debit() {
    let s = Server::start();
    let mut con = s.con();
    let clock = server_ms(&mut con);
    run(&mut con, &format!("RL.CHECK k {T} 2 1000"));
    // 3x the count, not capped by it: the state now is over the limit
    // until the debit's members leave the window.
    let r = ints(&mut con, &format!("RL.CHECK k {T} 2 1000 COST 6 DEBIT"));
    assert_eq!(r, [1, 1, 2, 0, 1000, 1000]);
    assert_eq!(r, ints(&mut con, &format!("RL.PEEK k {T} 2 1000 COST 0")));
    assert_eq!(zrange(&mut con, "k").len(), 7, "one member per unit");
    assert!(zrange(&mut con, "k")
        .iter()
        .all(|(_, s)| s == &T.to_string()));
    // Written as an admission: expires a window after its newest member
    // (from the server's clock, as for a caller whose clock runs behind).
    assert_expires_at(&mut con, "k", T + 1000, clock, Some(1000));
    // Refused until the debt has left the window, admitted exactly then.
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK k {} 2 1000", T + 999)),
        [1, 1, 2, 0, 1, 1]
    );
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK k {} 2 1000", T + 1000))[..4],
        [0, 1, 2, 1]
    );
    // A debit into an empty key under the limit answers not limited.
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK e {T} 5 60000 DEBIT")),
        [0, 1, 5, 4, -1, 60000]
    );
    // A refund of the same cost undoes a debit.
    run(&mut con, &format!("RL.CHECK e {T} 5 60000 COST 40 DEBIT"));
    assert_eq!(zrange(&mut con, "e").len(), 41);
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK e {T} 5 60000 COST 40 REFUND")),
        [0, 1, 5, 4, -1, 60000]
    );
    // Ranges and exclusions; nothing written by an error.
    let before = snapshot(&mut con);
    for (line, want) in [
        (
            format!("RL.CHECK e {T} 5 60000 COST 10001 DEBIT"),
            "ERR invalid cost '10001': expected an integer from 1 to 10000",
        ),
        (
            format!("RL.CHECK e {T} 5 60000 DEBIT REFUND"),
            "ERR syntax error: option REFUND cannot be combined with DEBIT",
        ),
        (
            format!("RL.PEEK e {T} 5 60000 DEBIT"),
            "ERR syntax error: unknown option 'DEBIT' (expected COST)",
        ),
    ] {
        assert_eq!(err(&mut con, &line), want, "{line}");
    }
    assert_same_keyspace(&before, &snapshot(&mut con), "errors");
    if !functions_backend() {
        // INFO ratelimit: not covered by the library
        let stats = rl_stats(&mut con);
        assert_eq!(stats["ratelimit_check_debits"], 3);
        assert_eq!(stats["ratelimit_check_calls"], 9);
        assert_eq!(stats["ratelimit_check_errors"], 2);
        assert_eq!(stats["ratelimit_check_admitted"], 2);
        assert_eq!(stats["ratelimit_check_rejected"], 1);
    }
}

#[test]
fn rl_throttle_debit() {
    let s = Server::start();
    let mut con = s.con();
    let clock = server_ms(&mut con);
    // Burst 2, 2 per second: T = 500 ms, tau = 1000 ms. A debit of 6 on a
    // full bucket: TAT = T + 3000 ms, 2000 ms beyond the tolerance.
    let r = ints(
        &mut con,
        &format!("RL.THROTTLE k {T} 2 2 1000 COST 6 DEBIT"),
    );
    assert_eq!(r, [1, 1, 2, 0, 2000, 3000]);
    assert_eq!(
        r,
        ints(&mut con, &format!("RL.THROTTLEPEEK k {T} 2 2 1000 COST 0"))
    );
    assert_eq!(
        hgetall(&mut con, "k"),
        BTreeMap::from([("1000".to_string(), ((T + 3000) * 1_000_000).to_string())])
    );
    assert_expires_at(&mut con, "k", T + 3000, clock, Some(1000));
    // A request of 1 is refused until TAT + T - tau = T + 2500 ms.
    assert_eq!(
        ints(&mut con, &format!("RL.THROTTLE k {T} 2 2 1000")),
        [1, 1, 2, 0, 2500, 3000]
    );
    assert_eq!(
        ints(&mut con, &format!("RL.THROTTLE k {} 2 2 1000", T + 2499))[0],
        1
    );
    assert_eq!(
        ints(&mut con, &format!("RL.THROTTLE k {} 2 2 1000", T + 2500)),
        [0, 1, 2, 0, -1, 1000]
    );
    // Any cost to 2^53-1: clamped to the storable TAT, never refused.
    let top = 2 * ((1i128 << 53) - 1) * 1_000_000;
    ints(
        &mut con,
        &format!("RL.THROTTLE big {T} 1 1 1000 COST 9007199254740991 DEBIT"),
    );
    assert_eq!(hgetall(&mut con, "big")["1000"], top.to_string());
    // Expiries may exceed 2^53-1 ms (SPEC "Expiries on a grid").
    assert!(pexpiretime(&mut con, "big") > (1 << 53));
    // Undone by a refund of the same cost.
    run(&mut con, &format!("RL.THROTTLE u {T} 5 10 1000"));
    let before = hgetall(&mut con, "u");
    run(
        &mut con,
        &format!("RL.THROTTLE u {T} 5 10 1000 COST 1000 DEBIT"),
    );
    run(
        &mut con,
        &format!("RL.THROTTLE u {T} 5 10 1000 COST 1000 REFUND"),
    );
    assert_eq!(hgetall(&mut con, "u"), before);
    assert_eq!(
        err(&mut con, &format!("RL.THROTTLEPEEK u {T} 5 10 1000 DEBIT")),
        "ERR syntax error: unknown option 'DEBIT' (expected COST or RESERVE)"
    );
    if !functions_backend() {
        // INFO ratelimit: not covered by the library
        assert_eq!(rl_stats(&mut con)["ratelimit_throttle_debits"], 3);
    }
}

#[test]
fn rl_quota_debit() {
    let s = Server::start();
    let mut con = s.con();
    let until_midnight = 8 * 3_600_000;
    let midnight = T + until_midnight;
    let clock = server_ms(&mut con);
    // 3x the day's limit; the month is under its own.
    let r = ints(
        &mut con,
        &format!("RL.QUOTA q {T} UTC DAY 10 MONTH 1000 COST 30 DEBIT"),
    );
    assert_eq!(r, [1, 1, 10, 0, until_midnight, until_midnight]);
    assert_eq!(
        hgetall(&mut con, "q"),
        BTreeMap::from([
            ("day:2026-11-30T00:00+00:00".to_string(), "30".to_string()),
            ("month:2026-11-01T00:00+00:00".to_string(), "30".to_string()),
        ])
    );
    // Written as an admission: the key lives until the longest bucket ends.
    assert_expires_at(&mut con, "q", midnight, clock, None);
    // Refused until the day ends; the next day admits at once.
    assert_eq!(
        ints(
            &mut con,
            &format!("RL.QUOTA q {} UTC DAY 10 MONTH 1000", midnight - 1)
        )[..5],
        [1, 1, 10, 0, 1]
    );
    assert_eq!(
        ints(
            &mut con,
            &format!("RL.QUOTA q {midnight} UTC DAY 10 MONTH 1000")
        )[..4],
        [0, 1, 10, 9]
    );
    // A stored negative count counts as 0; saturates at 2^53-1.
    run(&mut con, "HSET n day:2026-11-30T00:00+00:00 -5");
    ints(&mut con, &format!("RL.QUOTA n {T} UTC DAY 10 COST 3 DEBIT"));
    assert_eq!(hgetall(&mut con, "n")["day:2026-11-30T00:00+00:00"], "3");
    ints(
        &mut con,
        &format!("RL.QUOTA n {T} UTC DAY 10 COST 9007199254740991 DEBIT"),
    );
    assert_eq!(
        hgetall(&mut con, "n")["day:2026-11-30T00:00+00:00"],
        "9007199254740991"
    );
    assert_eq!(
        err(&mut con, &format!("RL.QUOTA n {T} UTC DAY 10 REFUND DEBIT")),
        "ERR syntax error: option DEBIT cannot be combined with REFUND"
    );
    if !functions_backend() {
        // INFO ratelimit: not covered by the library
        assert_eq!(rl_stats(&mut con)["ratelimit_quota_debits"], 3);
    }
}

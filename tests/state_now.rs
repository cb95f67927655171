//! `COST 0` in RL.PEEK, RL.THROTTLEPEEK and RL.QUOTAPEEK against a real
//! server (SPEC "The state now"): an empty key, a full key, a refund's reply
//! equal to the peek with `COST 0` right after it, nothing written, and
//! `COST 0` refused by the writing commands.

mod common;

use common::*;

const T: i64 = 1_796_054_400_000; // 2026-11-30T16:00Z

#[test]
fn rl_peek_cost_0() {
    let s = Server::start();
    let mut con = s.con();
    let peek = |con: &mut redis::Connection| ints(con, &format!("RL.PEEK k {T} 3 60000 COST 0"));
    assert_eq!(peek(&mut con), [0, 1, 3, 3, -1, 0], "empty: all can pass");
    for _ in 0..3 {
        run(&mut con, &format!("RL.CHECK k {T} 3 60000"));
    }
    let before = snapshot(&mut con);
    // Full: nothing can pass, nothing is over the limit.
    assert_eq!(peek(&mut con), [0, 1, 3, 0, -1, 60000]);
    assert_same_keyspace(&before, &snapshot(&mut con), "RL.PEEK COST 0");
    // The next request's view (COST 1) is refused; the state now is not.
    assert_eq!(
        ints(&mut con, &format!("RL.PEEK k {T} 3 60000"))[..2],
        [1, 1]
    );
    // A refund answers exactly the peek with COST 0 right after it.
    let refund = ints(&mut con, &format!("RL.CHECK k {T} 3 60000 REFUND"));
    assert_eq!(refund, peek(&mut con));
    assert_eq!(refund, [0, 1, 3, 1, -1, 60000]);
    assert!(err(&mut con, &format!("RL.CHECK k {T} 3 60000 COST 0"))
        .starts_with("ERR invalid cost '0'"));
}

#[test]
fn rl_throttlepeek_cost_0() {
    let s = Server::start();
    let mut con = s.con();
    let peek = |con: &mut redis::Connection| {
        ints(con, &format!("RL.THROTTLEPEEK k {T} 5 10 60000 COST 0"))
    };
    // The case: redis-cell's quantity 0 answers the state now.
    assert_eq!(peek(&mut con), [0, 1, 5, 5, -1, 0]);
    assert!(!exists(&mut con, "k"));
    for _ in 0..5 {
        run(&mut con, &format!("RL.THROTTLE k {T} 5 10 60000"));
    }
    assert_eq!(peek(&mut con), [0, 1, 5, 0, -1, 30000]);
    let refund = ints(
        &mut con,
        &format!("RL.THROTTLE k {T} 5 10 60000 COST 2 REFUND"),
    );
    assert_eq!(refund, peek(&mut con));
    assert_eq!(refund, [0, 1, 5, 2, -1, 18000]);
    assert!(
        err(&mut con, &format!("RL.THROTTLE k {T} 5 10 60000 COST 0"))
            .starts_with("ERR invalid cost '0'")
    );
}

#[test]
fn rl_quotapeek_cost_0() {
    let s = Server::start();
    let mut con = s.con();
    let until_midnight = 8 * 3_600_000;
    let peek = |con: &mut redis::Connection, limit: i64| {
        ints(con, &format!("RL.QUOTAPEEK q {T} UTC DAY {limit} COST 0"))
    };
    assert_eq!(peek(&mut con, 2), [0, 1, 2, 2, -1, until_midnight]);
    run(&mut con, &format!("RL.QUOTA q {T} UTC DAY 2 COST 2"));
    assert_eq!(peek(&mut con, 2), [0, 1, 2, 0, -1, until_midnight]);
    // A limit of 0: nothing can pass, nothing is over.
    assert_eq!(
        ints(&mut con, &format!("RL.QUOTAPEEK z {T} UTC DAY 0 COST 0")),
        [0, 1, 0, 0, -1, until_midnight]
    );
    // A limit lowered under the count: over it until the bucket ends.
    assert_eq!(
        peek(&mut con, 1),
        [1, 1, 1, 0, until_midnight, until_midnight]
    );
    let refund = ints(&mut con, &format!("RL.QUOTA q {T} UTC DAY 2 REFUND"));
    assert_eq!(refund, peek(&mut con, 2));
    assert_eq!(refund, [0, 1, 2, 1, -1, until_midnight]);
    assert!(err(&mut con, &format!("RL.QUOTA q {T} UTC DAY 2 COST 0"))
        .starts_with("ERR invalid cost '0'"));
    // Counted as what it would have done.
    if !functions_backend() {
        // INFO ratelimit: not covered by the library
        let stats = rl_stats(&mut con);
        assert_eq!(stats["ratelimit_quotapeek_admitted"], 4);
        assert_eq!(stats["ratelimit_quotapeek_rejected"], 1);
    }
}

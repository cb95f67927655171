//! RL.DAYHOUR and RL.LOCKCOUNT against a real redis-server.

mod common;

use common::*;
use redis::Connection;

/// Asserts `key` expires at `ttl` ms after a server time in `[before, after]`.
fn assert_expires_in(con: &mut Connection, key: &str, ttl: i64, before: i64, after: i64) {
    let at = pexpiretime(con, key);
    assert!(
        at >= before + ttl && at <= after + ttl,
        "{key} expires at {at}, expected within [{}, {}]",
        before + ttl,
        after + ttl
    );
}

// ---------------------------------------------------------------- RL.DAYHOUR

#[test]
fn dayhour_counts_both_and_refuses_all_or_nothing() {
    let s = Server::start();
    let mut con = s.con();
    let before = server_ms(&mut con);
    assert_eq!(
        ints(&mut con, "RL.DAYHOUR d h 3 2 86400000 3600000"),
        [1, 1]
    );
    let after = server_ms(&mut con);
    assert_expires_in(&mut con, "d", 86_400_000, before, after);
    assert_expires_in(&mut con, "h", 3_600_000, before, after);
    assert_eq!(
        ints(&mut con, "RL.DAYHOUR d h 3 2 86400000 3600000"),
        [2, 2]
    );
    // The hour refuses: the day does not move either.
    let snap = snapshot(&mut con);
    assert_eq!(
        ints(&mut con, "RL.DAYHOUR d h 3 2 86400000 3600000"),
        [2, 3]
    );
    assert_same_keyspace(&snap, &snapshot(&mut con), "hour refusal");
    assert_eq!(get(&mut con, "d").as_deref(), Some("2"));
    assert_eq!(get(&mut con, "h").as_deref(), Some("2"));
    // A new hour (new key): the day refuses now, the hour does not move.
    assert_eq!(
        ints(&mut con, "RL.DAYHOUR d h2 3 2 86400000 3600000"),
        [3, 1]
    );
    let snap = snapshot(&mut con);
    assert_eq!(
        ints(&mut con, "RL.DAYHOUR d h2 3 2 86400000 3600000"),
        [4, 1]
    );
    assert_same_keyspace(&snap, &snapshot(&mut con), "day refusal");
    // Both refuse.
    assert_eq!(ints(&mut con, "RL.DAYHOUR d h 3 2 1000 1000"), [4, 3]);
    assert_same_keyspace(&snap, &snapshot(&mut con), "both refuse");
    assert_eq!(get(&mut con, "d").as_deref(), Some("3"));
    assert_eq!(get(&mut con, "h2").as_deref(), Some("1"));
}

#[test]
fn dayhour_limit_zero_refuses_even_a_missing_key() {
    let s = Server::start();
    let mut con = s.con();
    assert_eq!(ints(&mut con, "RL.DAYHOUR d h 0 5 1000 1000"), [1, 0]);
    assert_eq!(ints(&mut con, "RL.DAYHOUR d h 5 0 1000 1000"), [0, 1]);
    assert_eq!(ints(&mut con, "RL.DAYHOUR d h 0 0 1000 1000"), [1, 1]);
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    assert!(keys.is_empty(), "a refusal created keys: {keys:?}");
    // With existing counters too.
    run(&mut con, "SET d 3 PX 100000");
    run(&mut con, "SET h 1 PX 100000");
    let snap = snapshot(&mut con);
    assert_eq!(ints(&mut con, "RL.DAYHOUR d h 10 0 1000 1000"), [3, 2]);
    assert_same_keyspace(&snap, &snapshot(&mut con), "hour limit 0");
}

#[test]
fn dayhour_existing_counter_keeps_its_ttl_and_one_without_gets_it() {
    let s = Server::start();
    let mut con = s.con();
    run(&mut con, "SET d 5 PX 500000");
    run(&mut con, "SET h 3");
    let day_at = pexpiretime(&mut con, "d");
    let before = server_ms(&mut con);
    assert_eq!(
        ints(&mut con, "RL.DAYHOUR d h 100 100 86400000 60000"),
        [6, 4]
    );
    let after = server_ms(&mut con);
    assert_eq!(pexpiretime(&mut con, "d"), day_at, "day kept its expiry");
    assert_expires_in(&mut con, "h", 60_000, before, after);
    let ttl = pttl(&mut con, "h");
    assert!(ttl > 0 && ttl <= 60_000, "hour PTTL {ttl}");
    assert_eq!(get(&mut con, "d").as_deref(), Some("6"));
    assert_eq!(get(&mut con, "h").as_deref(), Some("4"));
    // Later calls keep both expiries.
    let hour_at = pexpiretime(&mut con, "h");
    assert_eq!(ints(&mut con, "RL.DAYHOUR d h 100 100 1 1"), [7, 5]);
    assert_eq!(pexpiretime(&mut con, "d"), day_at);
    assert_eq!(pexpiretime(&mut con, "h"), hour_at);
}

#[test]
fn dayhour_negative_counter_counts_as_zero_and_is_written_as_one() {
    let s = Server::start();
    let mut con = s.con();
    run(&mut con, "SET d -4 PX 400000");
    run(&mut con, "SET h -1");
    let day_at = pexpiretime(&mut con, "d");
    // A limit of 0 still refuses a negative counter.
    assert_eq!(ints(&mut con, "RL.DAYHOUR d h 0 5 1000 1000"), [1, 0]);
    assert_eq!(get(&mut con, "d").as_deref(), Some("-4"));
    let before = server_ms(&mut con);
    assert_eq!(ints(&mut con, "RL.DAYHOUR d h 1 1 1000 70000"), [1, 1]);
    let after = server_ms(&mut con);
    assert_eq!(get(&mut con, "d").as_deref(), Some("1"));
    assert_eq!(get(&mut con, "h").as_deref(), Some("1"));
    assert_eq!(pexpiretime(&mut con, "d"), day_at, "kept its expiry");
    assert_expires_in(&mut con, "h", 70_000, before, after);
    // Full now.
    assert_eq!(ints(&mut con, "RL.DAYHOUR d h 1 1 1000 70000"), [2, 2]);
}

#[test]
fn dayhour_largest_values() {
    let s = Server::start();
    let mut con = s.con();
    run(&mut con, "SET d 9007199254740990 PX 100000");
    assert_eq!(
        ints(
            &mut con,
            "RL.DAYHOUR d h 9007199254740991 9007199254740991 9007199254740991 9007199254740991"
        ),
        [9007199254740991, 1]
    );
    assert_eq!(
        ints(
            &mut con,
            "RL.DAYHOUR d h 9007199254740991 9007199254740991 1000 1000"
        ),
        [9007199254740992, 1]
    );
    assert_eq!(get(&mut con, "d").as_deref(), Some("9007199254740991"));
}

// -------------------------------------------------------------- RL.LOCKCOUNT

#[test]
fn lockcount_counts_then_locks() {
    let s = Server::start();
    let mut con = s.con();
    let before = server_ms(&mut con);
    let first = ints(&mut con, "RL.LOCKCOUNT lock cnt 100000 3 50000");
    let after = server_ms(&mut con);
    assert_eq!(first, [0, 1, 100_000]);
    assert_expires_in(&mut con, "cnt", 100_000, before, after);
    let window_end = pexpiretime(&mut con, "cnt");
    for c in 2..=3 {
        let before = server_ms(&mut con);
        let r = ints(&mut con, "RL.LOCKCOUNT lock cnt 100000 3 50000");
        let after = server_ms(&mut con);
        assert_eq!(&r[..2], &[0, c]);
        // ms until the count key expires.
        assert!(
            r[2] >= window_end - after && r[2] <= window_end - before,
            "ttl {} for an expiry at {window_end}",
            r[2]
        );
        assert_eq!(get(&mut con, "cnt"), Some(c.to_string()));
        assert_eq!(pexpiretime(&mut con, "cnt"), window_end, "window fixed");
    }
    assert!(!exists(&mut con, "lock"));
    // The request that trips the lock is rejected; the count key is deleted.
    let before = server_ms(&mut con);
    assert_eq!(
        ints(&mut con, "RL.LOCKCOUNT lock cnt 100000 3 50000"),
        [1, 3, 50000]
    );
    let after = server_ms(&mut con);
    assert!(!exists(&mut con, "cnt"), "the count key is deleted");
    assert_eq!(get(&mut con, "lock").as_deref(), Some("1"));
    assert_expires_in(&mut con, "lock", 50_000, before, after);
    // Locked: rejected, nothing written, ttl until the lock lifts.
    let snap = snapshot(&mut con);
    let lock_at = pexpiretime(&mut con, "lock");
    let before = server_ms(&mut con);
    let r = ints(&mut con, "RL.LOCKCOUNT lock cnt 100000 3 50000");
    let after = server_ms(&mut con);
    assert_eq!(&r[..2], &[1, 0]);
    assert!(
        r[2] >= lock_at - after && r[2] <= lock_at - before && r[2] > 0,
        "lock ttl {} for a lock expiring at {lock_at}",
        r[2]
    );
    assert_same_keyspace(&snap, &snapshot(&mut con), "locked call");
}

#[test]
fn lockcount_window_is_fixed_by_the_first_request() {
    let s = Server::start();
    let mut con = s.con();
    ints(&mut con, "RL.LOCKCOUNT l c 60000 100 1000");
    let at = pexpiretime(&mut con, "c");
    for n in 2..=5 {
        // Let the clock move so a re-armed TTL would show.
        std::thread::sleep(std::time::Duration::from_millis(3));
        let r = ints(&mut con, "RL.LOCKCOUNT l c 60000 100 1000");
        assert_eq!(&r[..2], &[0, n]);
        assert!(r[2] > 0 && r[2] < 60_000, "ttl {}", r[2]);
        assert_eq!(pexpiretime(&mut con, "c"), at, "call {n} moved the window");
    }
}

#[test]
fn lockcount_never_touches_an_existing_lock() {
    let s = Server::start();
    let mut con = s.con();
    // A lock without expiry stays permanent.
    run(&mut con, "SET lock manual");
    run(&mut con, "SET cnt 2 PX 100000");
    let snap = snapshot(&mut con);
    assert_eq!(
        ints(&mut con, "RL.LOCKCOUNT lock cnt 1000 5 1000"),
        [1, 2, -1]
    );
    assert_eq!(pttl(&mut con, "lock"), -1);
    assert_same_keyspace(&snap, &snapshot(&mut con), "permanent lock");
    // Even when the count is past max: no re-lock, no delete.
    run(&mut con, "SET cnt 9 PX 100000");
    let snap = snapshot(&mut con);
    assert_eq!(
        ints(&mut con, "RL.LOCKCOUNT lock cnt 1000 5 1000"),
        [1, 9, -1]
    );
    assert_same_keyspace(&snap, &snapshot(&mut con), "permanent lock, full count");
    // A lock with an expiry keeps it.
    run(&mut con, "SET lock2 x PX 30000");
    let at = pexpiretime(&mut con, "lock2");
    let before = server_ms(&mut con);
    let r = ints(&mut con, "RL.LOCKCOUNT lock2 cnt2 1000 5 99999");
    let after = server_ms(&mut con);
    assert_eq!(&r[..2], &[1, 0]);
    assert!(r[2] >= at - after && r[2] <= at - before, "ttl {}", r[2]);
    assert_eq!(pexpiretime(&mut con, "lock2"), at);
    assert!(!exists(&mut con, "cnt2"), "a locked call creates nothing");
}

#[test]
fn lockcount_lock_key_of_any_type_locks() {
    let s = Server::start();
    let mut con = s.con();
    run(&mut con, "RPUSH llist a b");
    run(&mut con, "HSET lhash f v");
    run(&mut con, "ZADD lzset 1 m");
    run(&mut con, "SADD lset m");
    run(&mut con, "SET cnt -3");
    for lock in ["llist", "lhash", "lzset", "lset"] {
        let snap = snapshot(&mut con);
        assert_eq!(
            ints(&mut con, &format!("RL.LOCKCOUNT {lock} cnt 1000 5 1000")),
            [1, 0, -1],
            "lock key {lock}"
        );
        assert_same_keyspace(&snap, &snapshot(&mut con), lock);
    }
    // Missing count key too.
    assert_eq!(
        ints(&mut con, "RL.LOCKCOUNT llist nocnt 1000 5 1000"),
        [1, 0, -1]
    );
    assert!(!exists(&mut con, "nocnt"));
}

#[test]
fn lockcount_negative_and_ttl_less_counters() {
    let s = Server::start();
    let mut con = s.con();
    // Negative with an expiry: counts as 0, written as 1, keeps its expiry.
    run(&mut con, "SET neg -5 PX 200000");
    let at = pexpiretime(&mut con, "neg");
    let r = ints(&mut con, "RL.LOCKCOUNT lk neg 1000 3 1000");
    assert_eq!(&r[..2], &[0, 1]);
    assert!(r[2] > 1000 && r[2] <= 200_000, "ttl {}", r[2]);
    assert_eq!(get(&mut con, "neg").as_deref(), Some("1"));
    assert_eq!(pexpiretime(&mut con, "neg"), at);
    // Negative without expiry: gets the window.
    run(&mut con, "SET neg2 -5");
    let before = server_ms(&mut con);
    assert_eq!(
        ints(&mut con, "RL.LOCKCOUNT lk neg2 40000 3 1000"),
        [0, 1, 40000]
    );
    let after = server_ms(&mut con);
    assert_expires_in(&mut con, "neg2", 40_000, before, after);
    // Positive without expiry: incremented, gets the window.
    run(&mut con, "SET plain 1");
    let before = server_ms(&mut con);
    assert_eq!(
        ints(&mut con, "RL.LOCKCOUNT lk plain 40000 3 1000"),
        [0, 2, 40000]
    );
    let after = server_ms(&mut con);
    assert_expires_in(&mut con, "plain", 40_000, before, after);
    // A negative counter when tripping a lock with max 0: count reported as 0.
    run(&mut con, "SET neg3 -2 PX 100000");
    assert_eq!(
        ints(&mut con, "RL.LOCKCOUNT lk3 neg3 1000 0 7000"),
        [1, 0, 7000]
    );
    assert!(!exists(&mut con, "neg3"));
    assert_eq!(get(&mut con, "lk3").as_deref(), Some("1"));
    // Locked with a negative counter: reported as 0, left as it is.
    run(&mut con, "SET neg4 -2 PX 100000");
    let r = ints(&mut con, "RL.LOCKCOUNT lk3 neg4 1000 0 7000");
    assert_eq!(&r[..2], &[1, 0]);
    assert_eq!(get(&mut con, "neg4").as_deref(), Some("-2"));
}

#[test]
fn lockcount_max_zero_locks_at_once_without_creating_the_counter() {
    let s = Server::start();
    let mut con = s.con();
    let before = server_ms(&mut con);
    assert_eq!(
        ints(&mut con, "RL.LOCKCOUNT lk cnt 1000 0 20000"),
        [1, 0, 20000]
    );
    let after = server_ms(&mut con);
    assert!(!exists(&mut con, "cnt"));
    assert_expires_in(&mut con, "lk", 20_000, before, after);
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    assert_eq!(keys, ["lk"]);
}

#[test]
fn a_stored_counter_that_is_not_an_integer_is_named_by_its_value_and_role() {
    let s = Server::start();
    let mut con = s.con();
    run(&mut con, "SET {x}d abc");
    let e = err(&mut con, "RL.DAYHOUR {x}d {x}h 1 1 1000 1000");
    assert_eq!(
        e,
        "ERR value 'abc' of daykey is not an integer from -9007199254740991 to 9007199254740991"
    );
    run(&mut con, "SET {y}c 1.5");
    let e = err(&mut con, "RL.LOCKCOUNT {y}l {y}c 1000 3 1000");
    assert!(
        e.starts_with("ERR value '1.5' of countkey is not an integer"),
        "{e}"
    );
    // Nothing written by either error.
    assert!(!exists(&mut con, "{x}h") && !exists(&mut con, "{y}l"));
}

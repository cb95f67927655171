//! RL.CHECK and RL.PEEK against a real redis-server: replies, members,
//! scores, trimming, expiry, and PEEK writing nothing.

mod common;

use std::collections::HashSet;

use common::*;
use redis::Connection;

/// A base time one day ahead of the server's clock: keys written at explicit
/// times around it expire at exactly `max(newest, now) + max_window`, and never
/// during the test.
fn base(con: &mut Connection) -> i64 {
    server_ms(con) + 86_400_000
}

fn zadd(con: &mut Connection, key: &str, score: &str, member: &str) {
    run(con, &format!("ZADD {key} {score} {member}"));
}

#[test]
fn demo_sequence_with_server_clock() {
    let s = Server::start();
    let mut con = s.con();
    assert_eq!(
        ints(&mut con, "RL.CHECK demo * 2 1000"),
        [0, 1, 2, 1, -1, 1000]
    );
    assert_eq!(
        ints(&mut con, "RL.CHECK demo * 2 1000"),
        [0, 1, 2, 0, -1, 1000]
    );
    let third = ints(&mut con, "RL.CHECK demo * 2 1000");
    assert_eq!(&third[..4], &[1, 1, 2, 0], "third call: {third:?}");
    assert!(
        third[4] > 0 && third[4] <= 1000,
        "retry-after must be in 1..=1000: {third:?}"
    );
    assert!(
        third[5] >= third[4] && third[5] <= 1000,
        "reset-after: {third:?}"
    );
    // The rejected call wrote nothing: two members.
    assert_eq!(zrange(&mut con, "demo").len(), 2);
}

#[test]
fn explicit_now_sequence_and_window_edge() {
    let s = Server::start();
    let mut con = s.con();
    let t = base(&mut con);
    let c = |con: &mut Connection, now: i64| ints(con, &format!("RL.CHECK k {now} 2 1000"));
    assert_eq!(c(&mut con, t), [0, 1, 2, 1, -1, 1000]);
    assert_eq!(c(&mut con, t), [0, 1, 2, 0, -1, 1000]);
    assert_eq!(c(&mut con, t), [1, 1, 2, 0, 1000, 1000]);
    assert_eq!(c(&mut con, t + 400), [1, 1, 2, 0, 600, 600]);
    assert_eq!(c(&mut con, t + 999), [1, 1, 2, 0, 1, 1]);
    // Exactly `window` old: both members have left the window.
    assert_eq!(c(&mut con, t + 1000), [0, 1, 2, 1, -1, 1000]);
    // The admission trimmed the two members that are exactly window old.
    let members = zrange(&mut con, "k");
    let scores: Vec<&str> = members.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(scores, [(t + 1000).to_string()]);
}

#[test]
fn same_millisecond_requests_get_distinct_members_scored_exactly_now() {
    let s = Server::start();
    let mut con = s.con();
    let t = base(&mut con);
    for i in 0..50 {
        let r = ints(&mut con, &format!("RL.CHECK same {t} 100 1000"));
        assert_eq!(r, [0, 1, 100, 99 - i, -1, 1000], "call {i}");
    }
    // COST adds `cost` members in one call, all scored `now` too.
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK same {t} 100 1000 COST 7")),
        [0, 1, 100, 43, -1, 1000]
    );
    let members = zrange(&mut con, "same");
    assert_eq!(members.len(), 57);
    let mut names = HashSet::new();
    for (member, score) in &members {
        assert_eq!(score, &t.to_string(), "score of {}", show(member));
        let name = std::str::from_utf8(member).expect("member names are ASCII");
        assert_eq!(name.len(), 8, "member name {name:?} is not 8 chars");
        assert!(!looks_numeric(name), "member {name:?} looks like a number");
        assert!(!looks_like_uuid(name), "member {name:?} looks like a UUID");
        assert!(names.insert(name.to_string()), "duplicate member {name:?}");
    }
}

#[test]
fn future_members_count_and_push_reset() {
    let s = Server::start();
    let mut con = s.con();
    let t = base(&mut con);
    zadd(&mut con, "f", &(t + 5000).to_string(), "skewed-clock");
    // Counted by the rule although it lies in the future.
    assert_eq!(
        ints(&mut con, &format!("RL.PEEK f {t} 1 1000")),
        [1, 1, 1, 0, 6000, 6000]
    );
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK f {t} 1 1000")),
        [1, 1, 1, 0, 6000, 6000]
    );
    // Admitted with room left: reset follows the future member.
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK f {t} 2 1000")),
        [0, 1, 2, 0, -1, 6000]
    );
    // Expiry follows the newest (future) member, on the key's grid.
    assert_eq!(
        pexpiretime(&mut con, "f"),
        grid_at("f", 1000, t + 5000 + 1000)
    );
}

#[test]
fn foreign_members_count_by_score_only() {
    let s = Server::start();
    let mut con = s.con();
    let t = base(&mut con);
    // Names the seed scripts write: a UUID and a timestamp.
    zadd(
        &mut con,
        "mix",
        &(t - 300).to_string(),
        "3f2b8a7e-1c2d-4e5f-8a9b-0c1d2e3f4a5b",
    );
    zadd(
        &mut con,
        "mix",
        &(t - 200).to_string(),
        &(t - 200).to_string(),
    );
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK mix {t} 3 1000")),
        [0, 1, 3, 0, -1, 1000]
    );
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK mix {t} 3 1000")),
        [1, 1, 3, 0, 700, 1000]
    );
    // A fractional foreign score is used as it is; times round up.
    zadd(&mut con, "frac", &format!("{}.5", t - 1000), "x");
    assert_eq!(
        ints(&mut con, &format!("RL.PEEK frac {t} 1 1000")),
        [1, 1, 1, 0, 1, 1]
    );
    zadd(&mut con, "frac2", &format!("{}.25", t + 100), "y");
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK frac2 {t} 2 1000")),
        [0, 1, 2, 0, -1, 1101]
    );
    assert_eq!(
        pexpiretime(&mut con, "frac2"),
        grid_at("frac2", 1000, t + 101 + 1000)
    );
}

#[test]
fn binding_rule_on_admission_is_the_smallest_remaining() {
    let s = Server::start();
    let mut con = s.con();
    let t = base(&mut con);
    for d in [500, 400, 300] {
        zadd(&mut con, "a", &(t - d).to_string(), &format!("m{d}"));
    }
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK a {t} 10 1000 5 60000")),
        [0, 2, 5, 1, -1, 60000]
    );
    // Ties in remaining go to the larger reset-after (SPEC: the rule a
    // client must wait for longest), whatever its index.
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK tie {t} 3 1000 3 2000")),
        [0, 2, 3, 2, -1, 2000]
    );
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK tie2 {t} 3 2000 3 1000")),
        [0, 1, 3, 2, -1, 2000]
    );
    // The same window given twice counts once per rule.
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK tie3 {t} 4 1000 2 1000")),
        [0, 2, 2, 1, -1, 1000]
    );
}

#[test]
fn binding_rule_on_rejection_has_the_largest_retry_after() {
    let s = Server::start();
    let mut con = s.con();
    let t = base(&mut con);
    for (d, m) in [(9000, "a"), (5000, "b"), (100, "c")] {
        zadd(&mut con, "r", &(t - d).to_string(), m);
    }
    // 1 per second: retry 900. 3 per minute: oldest at t-9000 -> 51000.
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK r {t} 1 1000 3 60000")),
        [1, 2, 3, 0, 51000, 59900]
    );
    // The larger retry-after wins whatever its index.
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK r {t} 3 60000 1 1000")),
        [1, 1, 3, 0, 51000, 59900]
    );
    // Only the violated rules compete: rule 1 is violated, rule 2 is not.
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK r {t} 1 1000 10 60000")),
        [1, 1, 1, 0, 900, 900]
    );
    // Ties go to the lower index.
    zadd(&mut con, "rt", &(t - 500).to_string(), "x");
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK rt {t} 1 1000 1 1000")),
        [1, 1, 1, 0, 500, 500]
    );
    // Nothing was written by any rejection.
    assert_eq!(zrange(&mut con, "r").len(), 3);
    assert_eq!(zrange(&mut con, "rt").len(), 1);
}

#[test]
fn cost_uses_the_kth_oldest_member_in_the_window() {
    let s = Server::start();
    let mut con = s.con();
    let t = base(&mut con);
    for d in [2000, 800, 700, 600, 500] {
        zadd(&mut con, "c", &(t - d).to_string(), &format!("m{d}"));
    }
    // used 4, cost 3, count 5: k = 2 -> second oldest in the window (t-700).
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK c {t} 5 1000 COST 3")),
        [1, 1, 5, 1, 300, 500]
    );
    assert_eq!(zrange(&mut con, "c").len(), 5, "a rejection writes nothing");
    // Cost 1 fits; option names are case-insensitive.
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK c {t} 5 1000 cost 1")),
        [0, 1, 5, 0, -1, 1000]
    );
    // A cost that fits exactly is admitted and adds that many members.
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK c2 {t} 5 1000 CoSt 5")),
        [0, 1, 5, 0, -1, 1000]
    );
    assert_eq!(zrange(&mut con, "c2").len(), 5);
    // Cost equal to the smallest count of several rules.
    assert_eq!(
        ints(
            &mut con,
            &format!("RL.CHECK c3 {t} 100 1000 3 60000 COST 3")
        ),
        [0, 2, 3, 0, -1, 60000]
    );
}

#[test]
fn expiry_is_newest_or_server_time_plus_longest_window() {
    let s = Server::start();
    let mut con = s.con();
    let t = base(&mut con);
    // Explicit now ahead of the server: now + max window.
    ints(
        &mut con,
        &format!("RL.CHECK e1 {t} 10 1000 20 5000 30 2000"),
    );
    // (Every expiry is the grid point at or after the time SPEC gives.)
    assert_eq!(pexpiretime(&mut con, "e1"), grid_at("e1", 5000, t + 5000));
    // A future member newer than now: its score + max window.
    zadd(&mut con, "e2", &(t + 7000).to_string(), "future");
    ints(&mut con, &format!("RL.CHECK e2 {t} 10 1000 20 5000"));
    assert_eq!(
        pexpiretime(&mut con, "e2"),
        grid_at("e2", 5000, t + 7000 + 5000)
    );
    // A caller whose clock runs behind: server time + max window.
    let before = server_ms(&mut con);
    ints(
        &mut con,
        &format!("RL.CHECK e3 {} 10 600000", before - 100_000),
    );
    let after = server_ms(&mut con);
    let at = pexpiretime(&mut con, "e3");
    assert!(
        (before..=after).any(|c| at == grid_at("e3", 600_000, c + 600_000)),
        "{at} not the grid point after [{}, {}]",
        before + 600_000,
        after + 600_000
    );
    // `*`: server time + max window, and the member is scored that time.
    let before = server_ms(&mut con);
    ints(&mut con, "RL.CHECK e4 * 10 1000 5 600000");
    let after = server_ms(&mut con);
    let at = pexpiretime(&mut con, "e4");
    let members = zrange(&mut con, "e4");
    assert_eq!(members.len(), 1);
    let scored: i64 = members[0].1.parse().unwrap();
    assert!((before..=after).contains(&scored), "{scored}");
    assert_eq!(at, grid_at("e4", 600_000, scored + 600_000));
    // A rejection leaves the expiry alone.
    let e1 = pexpiretime(&mut con, "e1");
    ints(&mut con, &format!("RL.CHECK e1 {} 1 1000", t + 1));
    assert_eq!(pexpiretime(&mut con, "e1"), e1);
    // An explicit now at the top of its range is accepted (W = 1: a grid
    // of every ms).
    assert_eq!(
        ints(&mut con, "RL.CHECK e5 9007199254740991 1 1"),
        [0, 1, 1, 0, -1, 1]
    );
    assert_eq!(pexpiretime(&mut con, "e5"), 9007199254740991 + 1);
}

#[test]
fn admission_trims_members_older_than_the_longest_window() {
    let s = Server::start();
    let mut con = s.con();
    let t = base(&mut con);
    for (d, m) in [
        (-500, "future"),
        (5000, "old"),
        (3000, "edge"),
        (2999, "kept"),
        (1500, "kept2"),
    ] {
        zadd(&mut con, "tr", &(t - d).to_string(), m);
    }
    // A rejection trims nothing.
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK tr {t} 1 1000 10 3000")),
        [1, 1, 1, 0, 1500, 1500]
    );
    assert_eq!(zrange(&mut con, "tr").len(), 5);
    // Admitted: members at or below t - 3000 go, whatever the shorter windows.
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK tr {t} 5 1000 10 3000")),
        [0, 1, 5, 3, -1, 1500]
    );
    let left: Vec<(String, String)> = zrange(&mut con, "tr")
        .into_iter()
        .map(|(m, s)| (show(&m), s))
        .collect();
    let scores: Vec<&str> = left.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(
        scores,
        [
            (t - 2999).to_string(),
            (t - 1500).to_string(),
            t.to_string(),
            (t + 500).to_string()
        ]
    );
    assert_eq!(left[0].0, "kept");
    assert_eq!(left[1].0, "kept2");
    assert_eq!(left[3].0, "future");
    assert_eq!(
        pexpiretime(&mut con, "tr"),
        grid_at("tr", 3000, t + 500 + 3000)
    );
    // RL.PEEK trims nothing either.
    zadd(&mut con, "tr", &(t - 10_000).to_string(), "old2");
    ints(&mut con, &format!("RL.PEEK tr {t} 100 1000"));
    assert_eq!(zrange(&mut con, "tr").len(), 5);
}

#[test]
fn peek_answers_like_check_and_writes_nothing() {
    let s = Server::start();
    let mut con = s.con();
    let t = base(&mut con);
    run(&mut con, "SET other 1 PX 500000");
    let lines = [
        format!("p {t} 3 1000"),
        format!("p {t} 3 1000"),
        format!("p {} 3 1000 5 60000", t + 10),
        format!("p {} 3 1000 COST 2", t + 20),
        format!("p {} 3 1000", t + 30),
        format!("p {} 3 1000 4 5000 COST 3", t + 2000),
        format!("p {} 2 1000 3 60000", t + 2100),
        format!("p {} 100 100000 COST 50", t + 2200),
        format!("p {} 1 1", t + 3000),
    ];
    let mut admitted = 0;
    let mut rejected = 0;
    for line in &lines {
        let before = snapshot(&mut con);
        let peek = ints(&mut con, &format!("RL.PEEK {line}"));
        let after = snapshot(&mut con);
        assert_same_keyspace(&before, &after, &format!("RL.PEEK {line}"));
        let check = ints(&mut con, &format!("RL.CHECK {line}"));
        assert_eq!(peek, check, "RL.PEEK vs RL.CHECK for {line}");
        if check[0] == 0 {
            admitted += 1;
        } else {
            rejected += 1;
        }
    }
    assert!(
        admitted >= 3 && rejected >= 3,
        "the sequence must cover both: {admitted} admitted, {rejected} rejected"
    );
    // On a missing key: the reply of a first request, and no key created.
    assert_eq!(
        ints(&mut con, "RL.PEEK missing * 5 1000 COST 2"),
        [0, 1, 5, 3, -1, 1000]
    );
    assert!(!exists(&mut con, "missing"));
}

#[test]
fn peek_with_server_clock_writes_nothing() {
    let s = Server::start();
    let mut con = s.con();
    ints(&mut con, "RL.CHECK ps * 2 600000");
    ints(&mut con, "RL.CHECK ps * 2 600000");
    let before = snapshot(&mut con);
    let r = ints(&mut con, "RL.PEEK ps * 2 600000");
    assert_eq!(&r[..4], &[1, 1, 2, 0]);
    assert!(r[4] > 0 && r[4] <= 600_000, "{r:?}");
    assert_eq!(
        ints(&mut con, "RL.PEEK ps * 3 600000"),
        [0, 1, 3, 0, -1, 600_000]
    );
    assert_same_keyspace(&before, &snapshot(&mut con), "RL.PEEK");
}

#[test]
fn times_are_exact_at_the_top_of_the_score_range() {
    // Scores and `now` up to 2^53-1 are allowed; times derived from them
    // must be exact integers of ms, not rounded through a double.
    let s = Server::start();
    let mut con = s.con();
    let top = 9_007_199_254_740_991_i64;
    zadd(&mut con, "top", &top.to_string(), "a");
    assert_eq!(
        ints(&mut con, &format!("RL.PEEK top {top} 1 1000")),
        [1, 1, 1, 0, 1000, 1000],
        "rejected at the top of the range"
    );
    assert_eq!(
        ints(&mut con, &format!("RL.PEEK top {top} 2 1000")),
        [0, 1, 2, 0, -1, 1000],
        "admitted at the top of the range"
    );
    // s + window - t = top + 2 - (top - 1) = 3: never too early.
    assert_eq!(
        ints(&mut con, &format!("RL.PEEK top {} 1 2", top - 1)),
        [1, 1, 1, 0, 3, 3],
        "retry-after past 2^53"
    );
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK top {} 2 3", top - 1)),
        [0, 1, 2, 0, -1, 4],
        "a member 1 ms in the future"
    );
    assert_eq!(pexpiretime(&mut con, "top"), top + 3);
}

#[test]
fn a_shorter_rule_set_does_not_trim_what_a_longer_one_counts() {
    // The issue's rollout: an SMS key under (1/min, 5/h); one deploy calls
    // it with `1 60000` only, then the rollback.
    let s = Server::start();
    let mut con = s.con();
    let t0 = base(&mut con) - 10 * 60_000;
    for k in 0..4 {
        let r = ints(
            &mut con,
            &format!("RL.CHECK sms {} 1 60000 5 3600000", t0 + k * 61_000),
        );
        assert_eq!(r[0], 0, "{r:?}");
    }
    let held = pexpiretime(&mut con, "sms");
    let t = t0 + 4 * 61_000;
    assert_eq!(ints(&mut con, &format!("RL.CHECK sms {t} 1 60000"))[0], 0);
    assert_eq!(zrange(&mut con, "sms").len(), 5, "nothing trimmed");
    assert_eq!(
        pexpiretime(&mut con, "sms"),
        held,
        "the longer expiry stays"
    );
    // After the rollback the hour still counts all five units.
    let r = ints(
        &mut con,
        &format!("RL.CHECK sms {} 1 60000 5 3600000", t + 61_000),
    );
    assert_eq!(r[..4], [1, 2, 5, 0]);
    // A key an operator made persistent is trimmed and given an expiry as
    // before (no expiry is not a later one).
    run(&mut con, "PERSIST sms");
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK sms {} 10 60000", t + 122_000))[0],
        0
    );
    assert!(pexpiretime(&mut con, "sms") > 0);
    assert!(zrange(&mut con, "sms").len() < 6);
}

#[test]
fn refunds_remove_the_newest_units_and_reply_with_the_state_now() {
    let s = Server::start();
    let mut con = s.con();
    let t = base(&mut con);
    zadd(&mut con, "r", &(t - 5000).to_string(), "old");
    zadd(&mut con, "r", &t.to_string(), "zzz-foreign");
    zadd(&mut con, "r", &(t - 100_000).to_string(), "outside");
    ints(&mut con, &format!("RL.CHECK r {t} 10 60000 COST 2"));
    let expiry = pexpiretime(&mut con, "r");
    assert_eq!(zrange(&mut con, "r").len(), 4, "trimmed 'outside'");
    // Refund 2: the highest scores go, ties to the greatest name (byte
    // order): 'zzz-foreign' and one of the module's (which sort lower).
    // The reply is the state now: 8 can pass at once, and the window is
    // empty a window after its newest member.
    let r = ints(&mut con, &format!("RL.CHECK r {t} 10 60000 COST 2 REFUND"));
    assert_eq!(r, [0, 1, 10, 8, -1, 60000]);
    let left: Vec<String> = zrange(&mut con, "r")
        .into_iter()
        .map(|(m, _)| show(&m))
        .collect();
    assert_eq!(left.len(), 2);
    assert!(left.contains(&"old".to_string()) && !left.contains(&"zzz-foreign".to_string()));
    assert_eq!(
        pexpiretime(&mut con, "r"),
        expiry,
        "a refund keeps the expiry"
    );
    // Never more than the window holds; the key goes with its last member.
    ints(&mut con, &format!("RL.CHECK r {t} 10 60000 COST 10 REFUND"));
    assert!(!exists(&mut con, "r"));
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK r {t} 10 60000 REFUND")),
        [0, 1, 10, 10, -1, 0]
    );
    assert!(!exists(&mut con, "r"));
    if !functions_backend() {
        // INFO ratelimit: not covered by the library
        let stats = rl_stats(&mut con);
        assert_eq!(stats["ratelimit_check_refunds"], 3);
    }
    // A peek takes no REFUND.
    assert!(err(&mut con, &format!("RL.PEEK r {t} 10 60000 REFUND"))
        .contains("unknown option 'REFUND'"));
}

#[test]
fn the_clock_guard_is_a_module_configuration() {
    if module_only(
        "CONFIG ratelimit.* parameters: SPEC 'The Functions library', not covered (CONFIG parameters)",
    ) {
        return;
    }
    let s = Server::start();
    let mut con = s.con();
    let t = server_ms(&mut con);
    let micros = t * 1000;
    let got: Vec<String> = words("CONFIG GET ratelimit.max-future-ms")
        .query(&mut con)
        .unwrap();
    assert_eq!(got, ["ratelimit.max-future-ms", "0"], "off by default");
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK off {micros} 5 1000"))[0],
        0
    );
    run(&mut con, "CONFIG SET ratelimit.max-future-ms 60000");
    for line in [
        format!("RL.CHECK g {micros} 5 1000"),
        format!("RL.PEEK g {micros} 5 1000"),
        format!("RL.THROTTLE g {micros} 5 1 1000"),
        format!("RL.QUOTA g {} UTC DAY 5", t + 3_600_000),
    ] {
        let e = err(&mut con, &line);
        assert!(
            e.starts_with("ERR invalid now '") && e.contains("ratelimit.max-future-ms"),
            "{line}: {e}"
        );
    }
    assert!(!exists(&mut con, "g"));
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK g {} 5 1000", t + 30_000))[0],
        0
    );
    assert!(err(&mut con, "CONFIG SET ratelimit.max-future-ms -1").contains("ERR"));
}

#[test]
fn the_trim_waits_for_the_expiry_to_move_on_the_grid() {
    // One rule of 1 s: grid step 125 ms. SPEC "Expiries on a grid": a call
    // whose X = newest + 1000 is at or before the key's expiry keeps it and
    // trims nothing; the first call past it trims and moves a whole step.
    let s = Server::start();
    let mut con = s.con();
    let t = base(&mut con);
    assert_eq!(ints(&mut con, &format!("RL.CHECK g {t} 100 1000"))[0], 0);
    let e = pexpiretime(&mut con, "g");
    assert_eq!(e, grid_at("g", 1000, t + 1000));
    assert!(e >= t + 1000 && e < t + 1125);
    // A member older than the window, written by someone else.
    zadd(&mut con, "g", &(t - 5000).to_string(), "stale");
    // Up to the call whose X is E exactly: expiry kept, "stale" kept.
    for now in [t, e - 1000] {
        assert_eq!(ints(&mut con, &format!("RL.CHECK g {now} 100 1000"))[0], 0);
        assert_eq!(pexpiretime(&mut con, "g"), e, "now {now}");
        assert_eq!(zrange(&mut con, "g")[0].1, (t - 5000).to_string());
    }
    // One ms later: trimmed, and the expiry moves to the next grid point.
    let now = e - 999;
    assert_eq!(ints(&mut con, &format!("RL.CHECK g {now} 100 1000"))[0], 0);
    assert_eq!(pexpiretime(&mut con, "g"), e + 125);
    let scores: Vec<String> = zrange(&mut con, "g").into_iter().map(|m| m.1).collect();
    assert_eq!(scores.len(), 4, "{scores:?}");
    assert!(!scores.contains(&(t - 5000).to_string()));
    // RL.THROTTLE's grid comes from the bucket depth: 10 of 1 per 100 ms
    // is a 1 s bucket (step 125 ms) although its window is 100 ms.
    assert_eq!(ints(&mut con, &format!("RL.THROTTLE b {t} 10 1 100"))[0], 0);
    let e = pexpiretime(&mut con, "b");
    assert_eq!(e, grid_at("b", 1000, t + 100));
    // A second unit needs X = t + 200: kept when E is already there, else
    // the next grid point.
    assert_eq!(ints(&mut con, &format!("RL.THROTTLE b {t} 10 1 100"))[0], 0);
    let want = if e >= t + 200 {
        e
    } else {
        grid_at("b", 1000, t + 200)
    };
    assert_eq!(pexpiretime(&mut con, "b"), want);
}

#[test]
fn the_past_guard_is_a_module_configuration() {
    if module_only(
        "CONFIG ratelimit.* parameters: SPEC 'The Functions library', not covered (CONFIG parameters)",
    ) {
        return;
    }
    let s = Server::start();
    let mut con = s.con();
    let t = server_ms(&mut con);
    let seconds = t / 1000;
    let got: Vec<String> = words("CONFIG GET ratelimit.max-past-ms")
        .query(&mut con)
        .unwrap();
    assert_eq!(got, ["ratelimit.max-past-ms", "0"], "off by default");
    // Off: seconds are read as January 1970 and counted there.
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK off {seconds} 5 1000"))[0],
        0
    );
    run(&mut con, "CONFIG SET ratelimit.max-past-ms 86400000");
    for line in [
        format!("RL.CHECK g {seconds} 5 1000"),
        format!("RL.PEEK g {seconds} 5 1000"),
        format!("RL.THROTTLE g {seconds} 5 1 1000"),
        format!("RL.THROTTLEPEEK g {seconds} 5 1 1000"),
        format!("RL.QUOTA g {} UTC DAY 5", t - 2 * 86_400_000),
        format!("RL.QUOTAPEEK g {seconds} UTC DAY 5"),
    ] {
        let e = err(&mut con, &line);
        assert!(
            e.starts_with("ERR invalid now '")
                && e.contains("behind the server clock")
                && e.contains("ratelimit.max-past-ms (86400000)"),
            "{line}: {e}"
        );
    }
    assert!(!exists(&mut con, "g"));
    // An hour behind is fine, and so is `*`.
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK g {} 5 1000", t - 3_600_000))[0],
        0
    );
    assert_eq!(ints(&mut con, "RL.CHECK g * 5 1000")[0], 0);
    let e = err(&mut con, "CONFIG SET ratelimit.max-past-ms -1");
    assert!(e.contains("ERR") || e.contains("argument"), "{e}");
    run(&mut con, "CONFIG SET ratelimit.max-past-ms 0");
    assert_eq!(
        ints(&mut con, &format!("RL.CHECK g2 {seconds} 5 1000"))[0],
        0
    );
}

//! RL.QUOTA and RL.QUOTAPEEK against a real server: seed 001's day/hour
//! case next to RL.DAYHOUR, the New York fall-back day, stale and previous
//! buckets, refunds, errors with nothing written, 50 connections at once.

mod common;

use std::collections::BTreeMap;

use common::*;
use redis::Connection;

const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;

fn hgetall(con: &mut Connection, key: &str) -> BTreeMap<String, String> {
    redis::cmd("HGETALL").arg(key).query(con).unwrap()
}

/// Asia/Shanghai is UTC+8 all year: its day and hour keys and their TTLs,
/// as a service calling RL.DAYHOUR must compute them.
fn shanghai_keys(t: i64) -> (String, String, i64, i64) {
    let local = t + 8 * HOUR;
    let (day_no, hour) = (local.div_euclid(DAY), local.rem_euclid(DAY) / HOUR);
    let day_end = (day_no + 1) * DAY - 8 * HOUR;
    let hour_end = (local.div_euclid(HOUR) + 1) * HOUR - 8 * HOUR;
    (
        format!("{{u}}:day:{day_no}"),
        format!("{{u}}:hour:{day_no}:{hour}"),
        day_end - t,
        hour_end - t,
    )
}

#[test]
fn seed_001_day_10_hour_3_in_shanghai_matches_rl_dayhour() {
    let s = Server::start();
    let mut con = s.con();
    // 2026-12-01T00:00+08:00, a simulated day with explicit now: bursts at
    // the start of some hours, spread calls in others, up to the next day.
    let start = 1_796_054_400_000;
    let mut times = Vec::new();
    for h in 0..26 {
        let calls = [5, 1, 0, 4, 2][h as usize % 5];
        for k in 0..calls {
            times.push(start + h * HOUR + k * 7 * 60_000 + 1234);
        }
    }
    let (mut admitted, mut refused) = (0, 0);
    for &t in &times {
        let (day, hour, dayttl, hourttl) = shanghai_keys(t);
        let q = ints(
            &mut con,
            &format!("RL.QUOTA q {t} Asia/Shanghai DAY 10 HOUR 3"),
        );
        let d = ints(
            &mut con,
            &format!("RL.DAYHOUR {day} {hour} 10 3 {dayttl} {hourttl}"),
        );
        let dayhour_admitted = d[0] <= 10 && d[1] <= 3;
        assert_eq!(q[0] == 0, dayhour_admitted, "t={t}: {q:?} vs {d:?}");
        // Same counts in both layouts.
        let fields = hgetall(&mut con, "q");
        let day_count = fields
            .iter()
            .filter(|(f, _)| f.starts_with("day:"))
            .map(|(_, v)| v.parse::<i64>().unwrap())
            .next_back();
        assert_eq!(
            day_count.unwrap_or(0),
            get(&mut con, &day).map_or(0, |v| v.parse().unwrap()),
            "t={t}: {fields:?}"
        );
        if q[0] == 0 {
            admitted += 1;
            // remaining = min(daylimit - d, hourlimit - h) after the call.
            assert_eq!(q[3], (10 - d[0]).min(3 - d[1]), "t={t}");
        } else {
            refused += 1;
        }
    }
    // 10 on the first day, then 2 + 3 in the next day's first two hours.
    assert_eq!(admitted, 15);
    assert!(refused > 0);
    // The key holds the current day and hour, the previous hour, nothing older.
    let fields = hgetall(&mut con, "q");
    assert!(
        fields
            .keys()
            .all(|f| f.starts_with("day:2026-12-0") || f.starts_with("hour:2026-12-02T0")),
        "{fields:?}"
    );
}

#[test]
fn new_york_fall_back_day_lasts_25_hours_and_does_not_reopen() {
    if module_only(
        "daylight saving in RL.QUOTA: SPEC 'The Functions library', not covered (UTC and fixed offsets)",
    ) {
        return;
    }
    let s = Server::start();
    let mut con = s.con();
    // 2026-11-01 in America/New_York: 00:00-04:00 (04:00Z) to 00:00-05:00
    // next day (05:00Z): 90,000,000 ms.
    let day_start = 1_793_505_600_000;
    let q = |con: &mut Connection, t: i64| {
        ints(
            con,
            &format!("RL.QUOTA ny {t} America/New_York DAY 3 HOUR 2"),
        )
    };
    // 01:00 local happens twice (05:00Z with -04:00, 06:00Z with -05:00):
    // two hour buckets, one per offset.
    assert_eq!(q(&mut con, day_start + HOUR + 1000)[..4], [0, 2, 2, 1]);
    assert_eq!(q(&mut con, day_start + HOUR + 2000)[..4], [0, 2, 2, 0]);
    let third = day_start + 2 * HOUR + 10;
    assert_eq!(q(&mut con, third)[..4], [0, 1, 3, 0]);
    let fields = hgetall(&mut con, "ny");
    assert_eq!(fields["day:2026-11-01T00:00-04:00"], "3");
    assert_eq!(fields["hour:2026-11-01T01:00-04:00"], "2", "{fields:?}");
    assert_eq!(fields["hour:2026-11-01T01:00-05:00"], "1", "{fields:?}");
    // 23:30 local is 24.5 h after midnight: still the same day, refused,
    // and the retry is at local midnight (05:00Z), 30 minutes on.
    let late = day_start + 24 * HOUR + HOUR / 2;
    assert_eq!(q(&mut con, late), [1, 1, 3, 0, HOUR / 2, HOUR / 2]);
    // The day's key expires at the end of the 25-hour day, later by the lag
    // of an explicit now behind the server's clock — the first call's, the
    // largest (the expiry never moves back).
    let lag = server_ms(&mut con) - (day_start + HOUR + 1000);
    let at = pexpiretime(&mut con, "ny");
    assert!(
        (day_start + 25 * HOUR + lag - 5000..=day_start + 25 * HOUR + lag).contains(&at),
        "{at}"
    );
    // The next day opens at local midnight.
    assert_eq!(q(&mut con, day_start + 25 * HOUR)[..4], [0, 2, 2, 1]);
}

#[test]
fn refunds_peeks_and_fields_of_other_periods() {
    let s = Server::start();
    let mut con = s.con();
    let t: i64 = 1_796_054_400_000; // 2026-11-30T16:00Z
    run(&mut con, "HSET r week:1999-01-04T00:00+00:00 7 note x");
    assert_eq!(
        ints(&mut con, &format!("RL.QUOTA r {t} UTC DAY 5 COST 3"))[..4],
        [0, 1, 5, 2]
    );
    let expiry = pexpiretime(&mut con, "r");
    // The peek answers what the next call would; writes nothing.
    let before = snapshot(&mut con);
    let peek = ints(&mut con, &format!("RL.QUOTAPEEK r {t} UTC DAY 5 COST 2"));
    assert_same_keyspace(&before, &snapshot(&mut con), "QUOTAPEEK");
    assert_eq!(peek[..4], [0, 1, 5, 0]);
    // A refund lowers the current bucket and replies with the state now:
    // 3 can pass at once.
    assert_eq!(
        ints(&mut con, &format!("RL.QUOTA r {t} UTC DAY 5 REFUND"))[..4],
        [0, 1, 5, 3]
    );
    assert_eq!(hgetall(&mut con, "r")["day:2026-11-30T00:00+00:00"], "2");
    assert_eq!(
        pexpiretime(&mut con, "r"),
        expiry,
        "a refund keeps the expiry"
    );
    // Never below empty: the field goes, other fields stay (a week bucket
    // the call does not name, a field that is no bucket).
    ints(&mut con, &format!("RL.QUOTA r {t} UTC DAY 5 COST 5 REFUND"));
    let fields = hgetall(&mut con, "r");
    assert_eq!(fields.len(), 2, "{fields:?}");
    assert!(!fields.contains_key("day:2026-11-30T00:00+00:00"));
    if !functions_backend() {
        // INFO ratelimit: not covered by the library
        let stats = rl_stats(&mut con);
        assert_eq!(stats["ratelimit_quota_refunds"], 2);
    }
    // A stale field of a named period goes on the next admission; the
    // previous bucket stays.
    run(
        &mut con,
        "HSET r day:2026-11-28T00:00+00:00 9 day:2026-11-29T00:00+00:00 4",
    );
    ints(&mut con, &format!("RL.QUOTA r {t} UTC DAY 5"));
    let fields = hgetall(&mut con, "r");
    assert!(
        !fields.contains_key("day:2026-11-28T00:00+00:00"),
        "{fields:?}"
    );
    assert_eq!(fields["day:2026-11-29T00:00+00:00"], "4");
    assert_eq!(fields["week:1999-01-04T00:00+00:00"], "7");
    assert_eq!(fields["note"], "x");
}

#[test]
fn errors_write_nothing() {
    let s = Server::start();
    let mut con = s.con();
    let t: i64 = 1_796_054_400_000;
    run(&mut con, "SET str x");
    run(&mut con, "HSET bad day:2026-11-30T00:00+00:00 1x");
    let before = snapshot(&mut con);
    let cases = [
        (
            format!("RL.QUOTA q {t} asia/shanghai DAY 1"),
            "ERR invalid zone 'asia/shanghai'",
        ),
        (
            format!("RL.QUOTA q {t} +5:00 DAY 1"),
            "ERR invalid zone '+5:00'",
        ),
        (
            "RL.QUOTA q 253402300800000 UTC DAY 1".to_string(),
            "ERR invalid now '253402300800000'",
        ),
        (
            "RL.QUOTA q 253402300799999 Asia/Tokyo DAY 1".to_string(),
            "ERR invalid now '253402300799999'",
        ),
        (
            // `now` first: past year 9999 in Tokyo, reported before the limit.
            "RL.QUOTA q 253402300799999 Asia/Tokyo DAY -1".to_string(),
            "ERR invalid now '253402300799999': in zone Asia/Tokyo",
        ),
        (
            format!("RL.QUOTA q {t} UTC DAY 1 HOUR 2 day 3"),
            "ERR period day given twice",
        ),
        (
            format!("RL.QUOTA q {t} UTC DAY 1 HOUR"),
            "ERR missing limit for period HOUR",
        ),
        (
            format!("RL.QUOTA q {t} UTC DAY -1"),
            "ERR invalid limit '-1' for period DAY",
        ),
        (
            format!("RL.QUOTA q {t} UTC FORTNIGHT 1"),
            "ERR invalid period 'FORTNIGHT': expected MINUTE, HOUR, DAY, WEEK, MONTH or YEAR",
        ),
        (
            format!("RL.QUOTA q {t} Asia/Shanghai DAYS 10"),
            "ERR invalid period 'DAYS': expected MINUTE, HOUR, DAY, WEEK, MONTH or YEAR",
        ),
        (
            format!("RL.QUOTA q {t} UTC DAY 10 HOURS 3"),
            "ERR syntax error: unknown option 'HOURS'",
        ),
        (
            format!("RL.QUOTA q {t} UTC COST 1"),
            "ERR at least one 'period limit' pair",
        ),
        (
            format!("RL.QUOTA q {t} UTC DAY 1 COST 0"),
            "ERR invalid cost '0'",
        ),
        (
            format!("RL.QUOTAPEEK q {t} UTC DAY 1 REFUND"),
            "ERR syntax error: unknown option 'REFUND'",
        ),
        (format!("RL.QUOTA str {t} UTC DAY 1"), "WRONGTYPE"),
        (
            format!("RL.QUOTA bad {t} UTC DAY 1"),
            "ERR value of field 'day:2026-11-30T00:00+00:00' of key 'bad'",
        ),
    ];
    for (line, want) in &cases {
        if functions_backend() && line.contains("Asia/Tokyo") {
            // sent to the library as +09:00, which its error names
            continue;
        }
        let got = err(&mut con, line);
        assert!(got.starts_with(want), "{line}: {got}");
    }
    // A cost above a limit is a rejection (the limit may be raised), and a
    // limit of 0 refuses everything; waiting cannot help: retry_after -1.
    assert_eq!(
        ints(&mut con, &format!("RL.QUOTA q {t} UTC DAY 1 COST 2"))[..5],
        [1, 1, 1, 1, -1]
    );
    assert_eq!(
        ints(&mut con, &format!("RL.QUOTA q {t} UTC HOUR 5 DAY 0"))[..5],
        [1, 2, 0, 0, -1]
    );
    // It binds before a period that refuses until its bucket ends.
    run(&mut con, &format!("RL.QUOTA q2 {t} UTC DAY 3 COST 3"));
    assert_eq!(
        ints(
            &mut con,
            &format!("RL.QUOTA q2 {t} UTC DAY 3 HOUR 2 COST 3")
        )[..5],
        [1, 2, 2, 2, -1]
    );
    run(&mut con, "DEL q2");
    assert_same_keyspace(&before, &snapshot(&mut con), "errors and rejections");
}

#[test]
fn fifty_connections_at_once_admit_exactly_the_limit() {
    let s = Server::start();
    let replies = burst(&s, 50, "RL.QUOTA burst * Europe/Berlin DAY 10 MONTH 100");
    let mut remaining: Vec<i64> = replies.iter().filter(|r| r[0] == 0).map(|r| r[3]).collect();
    remaining.sort_unstable();
    assert_eq!(remaining, (0..10).collect::<Vec<i64>>(), "{replies:?}");
    let mut con = s.con();
    let fields = hgetall(&mut con, "burst");
    assert_eq!(
        fields.values().map(String::as_str).collect::<Vec<_>>(),
        ["10", "10"]
    );
    assert!(pttl(&mut con, "burst") > 0);
}

#[test]
fn a_hash_of_more_than_64_fields_is_cleaned_from_a_sample() {
    let s = Server::start();
    let mut con = s.con();
    let t: i64 = 1_796_054_400_000;
    let day: i64 = 86_400_000;
    run(&mut con, "HSET small day:2026-11-01T00:00+00:00 3");
    ints(&mut con, &format!("RL.QUOTA small {t} UTC DAY 5"));
    assert!(!hgetall(&mut con, "small").contains_key("day:2026-11-01T00:00+00:00"));
    // Explicit `now` values going backwards: each call's bucket is a day
    // earlier, and the newer buckets are not stale for it (SPEC: a caller
    // never deletes a newer bucket). 70 calls leave 70 fields.
    for i in 0..70 {
        ints(
            &mut con,
            &format!("RL.QUOTA back {} UTC DAY 5", t - i * day),
        );
    }
    assert_eq!(hgetall(&mut con, "back").len(), 70);
    // Two days after the newest, all 70 are stale. The first call examines
    // 64 fields drawn at random and removes them; the hash is then small
    // enough to scan whole, and the second call removes the rest.
    let later = t + 2 * day;
    ints(&mut con, &format!("RL.QUOTA back {later} UTC DAY 5"));
    assert_eq!(hgetall(&mut con, "back").len(), 70 - 64 + 1);
    ints(&mut con, &format!("RL.QUOTA back {later} UTC DAY 5"));
    let fields = hgetall(&mut con, "back");
    assert_eq!(fields.len(), 1, "{fields:?}");
    assert_eq!(fields["day:2026-12-02T00:00+00:00"], "2");
    // Foreign fields keep a hash large: a stale bucket among them still goes
    // (each call examines 64 of the 72 fields).
    let mut cmd = redis::cmd("HSET");
    cmd.arg("big").arg("day:2026-11-01T00:00+00:00").arg(3);
    for i in 0..70 {
        cmd.arg(format!("junk{i}")).arg(1);
    }
    let _: i64 = cmd.query(&mut con).unwrap();
    for _ in 0..20 {
        ints(&mut con, &format!("RL.QUOTA big {t} UTC DAY 100"));
    }
    let fields = hgetall(&mut con, "big");
    assert!(
        !fields.contains_key("day:2026-11-01T00:00+00:00"),
        "{}",
        fields.len()
    );
    assert_eq!(fields.len(), 71);
    assert_eq!(fields["day:2026-11-30T00:00+00:00"], "20");
}

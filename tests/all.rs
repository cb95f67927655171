//! RL.ALL and RL.ALLPEEK against a real server: random clause sets agree
//! with the single commands (the decision is the AND of each clause's own
//! peek; the writes are each command's writes, compared key by key on the
//! same key names), a refusal writes nothing and fires no keyspace event,
//! 50 connections at one instant, REFUND, the reply's binding clause,
//! errors in the contract's order with nothing written, and the OOM rule.

mod common;

use std::collections::BTreeMap;

use common::*;
use redis::{Connection, Value};

/// A small deterministic generator (xorshift), so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The limiters of the agreement test, one per key: (key, clause kind,
/// its arguments after the key index without COST, the single command,
/// its peek).
const LIMITERS: [(&str, &str, &str, &str, &str); 5] = [
    ("{t}:check", "CHECK", "4 1000 6 5000", "RL.CHECK", "RL.PEEK"),
    (
        "{t}:throttle",
        "THROTTLE",
        "3 2 1000 5 4 10000",
        "RL.THROTTLE",
        "RL.THROTTLEPEEK",
    ),
    (
        "{t}:quota",
        "QUOTA",
        "Europe/Paris minute 5 hour 12",
        "RL.QUOTA",
        "RL.QUOTAPEEK",
    ),
    ("{t}:lease", "LEASE", "3 1500", "RL.LEASE", "RL.LEASEPEEK"),
    ("{t}:check2", "CHECK", "2 300", "RL.CHECK", "RL.PEEK"),
];

/// Which clause binds, written from the SPEC independently of the module:
/// rejected, a -1 refusal first, else the largest `retry_after`, ties to
/// the lower index; admitted, the fewest `floor(remaining / max(cost, 1))`,
/// ties to the larger `reset_after`, then the lower index.
fn expected_reply(replies: &[(Vec<i64>, i64)]) -> Vec<i64> {
    let limited = replies.iter().any(|(r, _)| r[0] == 1);
    let mut best: Option<usize> = None;
    for (i, (r, cost)) in replies.iter().enumerate() {
        if (r[0] == 1) != limited {
            continue;
        }
        let better = match best {
            None => true,
            Some(b) => {
                let (br, bcost) = &replies[b];
                if limited {
                    let wait = |x: i64| if x == -1 { i64::MAX } else { x };
                    wait(r[4]) > wait(br[4])
                } else {
                    let left = r[3] / cost.max(&1);
                    let bleft = br[3] / bcost.max(&1);
                    left < bleft || (left == bleft && r[5] > br[5])
                }
            }
        };
        if better {
            best = Some(i);
        }
    }
    let b = best.unwrap();
    let r = &replies[b].0;
    vec![
        i64::from(limited),
        b as i64 + 1,
        r[1],
        r[2],
        r[3],
        r[4],
        r[5],
    ]
}

/// The first six integers of a reply (RL.LEASE adds its token).
fn six(con: &mut Connection, line: &str) -> Vec<i64> {
    let v: Vec<Value> = words(line)
        .query(con)
        .unwrap_or_else(|e| panic!("{line}: {e}"));
    v[..6]
        .iter()
        .map(|x| match x {
            Value::Int(n) => *n,
            other => panic!("{line}: {other:?}"),
        })
        .collect()
}

/// Puts the keyspace back to `snap` (same key names, so the same expiry
/// grids), expiry times included.
fn restore(con: &mut Connection, snap: &Snapshot) {
    run(con, "FLUSHALL");
    for (k, s) in snap {
        let ttl = if s.pexpiretime > 0 { s.pexpiretime } else { 0 };
        redis::cmd("RESTORE")
            .arg(k)
            .arg(ttl)
            .arg(&s.dump)
            .arg("ABSTTL")
            .query::<Value>(con)
            .unwrap_or_else(|e| panic!("RESTORE {}: {e}", show(k)));
    }
}

/// What a key holds, comparable across runs: RL.CHECK members are named at
/// random, so a sorted set compares by its scores (and, for the lease, by
/// its members too); everything else by DUMP. Expiry times always.
fn state(con: &mut Connection, snap: &Snapshot) -> BTreeMap<String, (String, i64)> {
    let mut out = BTreeMap::new();
    for (k, s) in snap {
        let name = show(k);
        let value = if name.contains("check") {
            let scores: Vec<String> = zrange(con, &name).into_iter().map(|(_, s)| s).collect();
            format!("{scores:?}")
        } else {
            format!("{:?}", s.dump)
        };
        out.insert(name, (value, s.pexpiretime));
    }
    out
}

#[test]
fn random_clause_sets_agree_with_the_single_commands() {
    let s = Server::start();
    let mut con = s.con();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // `now` ahead of the server clock: no expiry depends on the caller's
    // lag, so the two runs of a step (seconds apart) compute the same.
    let mut t = server_ms(&mut con) + 86_400_000;
    let (mut admitted, mut rejected) = (0, 0);
    for step in 0..400 {
        t += rng.below(400) as i64;
        // A random non-empty subset of the limiters, keys in random order,
        // clauses in another random order.
        let mut chosen: Vec<usize> = (0..LIMITERS.len()).filter(|_| rng.below(2) == 0).collect();
        if chosen.is_empty() {
            chosen.push(rng.below(LIMITERS.len() as u64) as usize);
        }
        let mut key_order = chosen.clone();
        for i in (1..key_order.len()).rev() {
            key_order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let mut clause_order = chosen.clone();
        for i in (1..clause_order.len()).rev() {
            clause_order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let mut line = format!("RL.ALL {}", key_order.len());
        for &l in &key_order {
            line += &format!(" {}", LIMITERS[l].0);
        }
        line += &format!(" {t}");
        let mut singles = Vec::new();
        for &l in &clause_order {
            let (key, kind, args, cmd, peek) = LIMITERS[l];
            let cost = 1 + rng.below(2) as i64;
            let index = key_order.iter().position(|&k| k == l).unwrap() + 1;
            let extra = if kind == "LEASE" {
                format!(" TOKEN tok{}", rng.below(3))
            } else {
                String::new()
            };
            line += &format!(" {kind} {index} {args} COST {cost}{extra}");
            let single = format!("{cmd} {key} {t} {args} COST {cost}{extra}");
            let peek_args = if kind == "LEASE" {
                args.split_whitespace().next().unwrap().to_string()
            } else {
                args.to_string()
            };
            let peek = format!("{peek} {key} {t} {peek_args} COST {cost}{extra}");
            singles.push((single, peek, cost));
        }

        let before = snapshot(&mut con);
        let peek_line = line.replacen("RL.ALL", "RL.ALLPEEK", 1);
        let peeked = ints(&mut con, &peek_line);
        let got = ints(&mut con, &line);
        assert_eq!(
            peeked, got,
            "step {step}: RL.ALLPEEK answers what RL.ALL does"
        );
        let after_all = snapshot(&mut con);
        let all_state = state(&mut con, &after_all);

        // The same step with the single commands on the state before.
        restore(&mut con, &before);
        let peeks: Vec<(Vec<i64>, i64)> = singles
            .iter()
            .map(|(_, p, cost)| (six(&mut con, p), *cost))
            .collect();
        let admit = peeks.iter().all(|(r, _)| r[0] == 0);
        assert_eq!(got[0], i64::from(!admit), "step {step}: {line}: {peeks:?}");
        if admit {
            admitted += 1;
            let replies: Vec<(Vec<i64>, i64)> = singles
                .iter()
                .map(|(c, _, cost)| (six(&mut con, c), *cost))
                .collect();
            assert_eq!(got, expected_reply(&replies), "step {step}: {line}");
            let after_single = snapshot(&mut con);
            assert_eq!(
                all_state,
                state(&mut con, &after_single),
                "step {step}: {line}: RL.ALL's writes are each command's"
            );
        } else {
            rejected += 1;
            assert_eq!(got, expected_reply(&peeks), "step {step}: {line}");
            assert_same_keyspace(&before, &after_all, &format!("step {step}: rejected"));
        }
        // Go on from RL.ALL's own state.
        restore(&mut con, &after_all);
    }
    assert!(admitted > 50 && rejected > 50, "{admitted} {rejected}");
}

#[test]
fn a_refusal_by_the_last_clause_writes_nothing_and_fires_no_event() {
    let s = Server::start();
    let mut con = s.con();
    run(&mut con, "CONFIG SET notify-keyspace-events KEA");
    let all = "RL.ALL 4 c t q l * CHECK 1 5 60000 THROTTLE 2 5 1 60000 QUOTA 3 UTC day 9 LEASE 4 2 60000 TOKEN a";
    assert_eq!(ints(&mut con, all)[0], 0);
    // The lease is full for another token: the last clause refuses.
    assert_eq!(six(&mut con, "RL.LEASE l * 2 60000 TOKEN b")[..2], [0, 1]);
    let refused = all.replace("TOKEN a", "TOKEN c");
    let before = snapshot(&mut con);

    let mut sub = s.con();
    let mut pubsub = sub.as_pubsub();
    pubsub.psubscribe("__key*__:*").unwrap();
    pubsub
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let reply = ints(&mut con, &refused);
    assert_eq!(reply[..2], [1, 4], "{reply:?}");
    assert_same_keyspace(&before, &snapshot(&mut con), "refused by its last clause");
    run(&mut con, "SET marker 1");
    let msg = pubsub.get_message().unwrap();
    assert_eq!(
        msg.get_channel_name(),
        "__keyspace@0__:marker",
        "the first event after the refusal is the marker's"
    );
}

#[test]
fn fifty_connections_per_user_5_and_global_20() {
    let s = Server::start();
    let mut cons: Vec<(usize, Connection)> = (0..50).map(|i| (i % 8, s.con())).collect();
    let barrier = std::sync::Barrier::new(cons.len());
    let replies: Vec<(usize, Vec<i64>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = cons
            .iter_mut()
            .map(|(user, con)| {
                let barrier = &barrier;
                let user = *user;
                scope.spawn(move || {
                    let line =
                        format!("RL.ALL 2 user:{user} global * CHECK 1 5 60000 CHECK 2 20 60000");
                    barrier.wait();
                    (user, ints(con, &line))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let admitted: Vec<usize> = replies
        .iter()
        .filter(|(_, r)| r[0] == 0)
        .map(|(u, _)| *u)
        .collect();
    assert_eq!(admitted.len(), 20, "the global budget binds");
    let mut con = s.con();
    let card =
        |con: &mut Connection, k: &str| -> i64 { redis::cmd("ZCARD").arg(k).query(con).unwrap() };
    assert_eq!(card(&mut con, "global"), 20);
    let mut total = 0;
    for user in 0..8 {
        let n = admitted.iter().filter(|&&u| u == user).count() as i64;
        assert!(n <= 5, "user {user}: {n}");
        assert_eq!(card(&mut con, &format!("user:{user}")), n, "user {user}");
        total += n;
    }
    assert_eq!(total, 20);
    // Every refusal names its binding clause: a full user (1) or the
    // global budget (2).
    for (user, r) in &replies {
        if r[0] == 1 {
            assert!(r[1] == 1 || r[1] == 2, "user {user}: {r:?}");
        }
    }
}

#[test]
fn refund_undoes_every_clause() {
    let s = Server::start();
    let mut con = s.con();
    let clauses = "CHECK 1 5 60000 THROTTLE 2 5 1 60000 QUOTA 3 UTC day 9 COST 2 LEASE 4 3 60000 TOKEN job COST 2";
    let all = format!("RL.ALL 4 c t q l 1000000 {clauses}");
    let empty = snapshot(&mut con);
    assert_eq!(ints(&mut con, &all), [0, 4, 1, 3, 1, -1, 60000]);
    assert_eq!(snapshot(&mut con).len(), 4);
    // The reply is the state now: RL.ALLPEEK with every COST 0.
    let refund = ints(&mut con, &format!("{all} REFUND"));
    let state_now = "CHECK 1 5 60000 COST 0 THROTTLE 2 5 1 60000 COST 0 QUOTA 3 UTC day 9 COST 0 LEASE 4 3 60000 COST 0";
    assert_eq!(
        refund,
        ints(
            &mut con,
            &format!("RL.ALLPEEK 4 c t q l 1000000 {state_now}")
        )
    );
    assert_eq!(refund, [0, 4, 1, 3, 3, -1, 0]);
    // Each refund as its command's: every key back at its empty state.
    assert_same_keyspace(&empty, &snapshot(&mut con), "refunded");
    if !functions_backend() {
        assert_eq!(rl_stats(&mut con)["ratelimit_all_refunds"], 1);
    }

    // A refund runs above maxmemory; an admission does not.
    ints(&mut con, &all);
    run(&mut con, "CONFIG SET maxmemory-policy noeviction");
    run(&mut con, "CONFIG SET maxmemory 1");
    let before = snapshot(&mut con);
    assert_eq!(
        err(&mut con, &all),
        "OOM command not allowed when used memory > 'maxmemory'."
    );
    assert_same_keyspace(&before, &snapshot(&mut con), "refused above maxmemory");
    // Argument errors come before the OOM error (on the library Redis
    // refuses the call before the function runs: SPEC "The Functions library").
    if !functions_backend() {
        assert!(err(&mut con, "RL.ALL 1 c 1000000 CHECK 1 5 0").starts_with("ERR clause 1"));
    }
    assert_eq!(ints(&mut con, &format!("{all} REFUND"))[0], 0);
    run(&mut con, "CONFIG SET maxmemory 0");
    assert_same_keyspace(&empty, &snapshot(&mut con), "refunded above maxmemory");
    // The peek is read-only: it runs above maxmemory too.
}

#[test]
fn allpeek_cost_0_and_lease_clauses() {
    let s = Server::start();
    let mut con = s.con();
    let t = 5_000_000;
    // A lease's reset_after counts the ttl the call would give its units.
    let peek = ints(
        &mut con,
        &format!("RL.ALLPEEK 1 l {t} LEASE 1 2 30000 TOKEN a"),
    );
    assert_eq!(peek, [0, 1, 1, 2, 1, -1, 30000]);
    assert_eq!(
        ints(&mut con, &format!("RL.ALL 1 l {t} LEASE 1 2 30000 TOKEN a")),
        peek
    );
    // Renewing with a shorter ttl: the token's own unit no longer holds the
    // top, the reply is what RL.ALL then answers.
    let peek = ints(
        &mut con,
        &format!("RL.ALLPEEK 1 l {} LEASE 1 2 1000 TOKEN a", t + 10),
    );
    assert_eq!(peek, [0, 1, 1, 2, 1, -1, 1000]);
    // Without TOKEN: held 0, a new unit counted.
    assert_eq!(
        ints(
            &mut con,
            &format!("RL.ALLPEEK 1 l {} LEASE 1 2 1000", t + 10)
        ),
        [0, 1, 1, 2, 0, -1, 30000 - 10]
    );
    // COST 0: RL.LEASEPEEK's state now (token ignored, ttl not counted).
    assert_eq!(
        ints(
            &mut con,
            &format!("RL.ALLPEEK 1 l {} LEASE 1 2 99999 TOKEN a COST 0", t + 10)
        ),
        [0, 1, 1, 2, 1, -1, 30000 - 10]
    );
    assert_eq!(
        ints(
            &mut con,
            &format!("RL.ALL 1 l {} LEASE 1 2 1000 TOKEN a", t + 10)
        ),
        [0, 1, 1, 2, 1, -1, 1000]
    );
    // COST 0 in every clause: the state now, never refused; the full
    // lease (one live unit of one) binds.
    assert_eq!(
        ints(
            &mut con,
            &format!("RL.ALLPEEK 2 c l {t} CHECK 1 1 1000 COST 0 LEASE 2 1 5 COST 0")
        )[..2],
        [0, 2]
    );
    assert!(
        err(&mut con, &format!("RL.ALL 1 c {t} CHECK 1 1 1000 COST 0"))
            .starts_with("ERR clause 1 (CHECK): invalid cost '0'")
    );
}

#[test]
fn errors_in_order_with_nothing_written() {
    let s = Server::start();
    let mut con = s.con();
    run(&mut con, "SET str x");
    run(&mut con, "HSET badq day:x notanumber");
    run(&mut con, "ZADD badz inf m");
    ints(&mut con, "RL.CHECK keep * 5 1000");
    let before = snapshot(&mut con);
    let many_rules = (0..40)
        .map(|i| format!("1 {}", i + 1))
        .collect::<Vec<_>>()
        .join(" ");
    let cases: Vec<(String, &str)> = vec![
        ("RL.ALL 0 a * CHECK 1 5 1000".into(), "ERR invalid numkeys '0': expected an integer from 1 to 64"),
        ("RL.ALL 65 a * CHECK 1 5 1000".into(), "ERR invalid numkeys '65'"),
        ("RL.ALL 4 a b c".into(), "ERR numkeys is 4 but only 3 arguments follow it"),
        ("RL.ALL 2 a a x CHECK 1 5 1000".into(), "ERR key 2 repeats key 1 ('a'): the keys must be distinct"),
        ("RL.ALL 3 a b c".into(), "ERR missing now"),
        ("RL.ALL 1 a x CHECK 1 5 1000".into(), "ERR invalid now 'x'"),
        // numkeys one too many: a clause word where now must be.
        ("RL.ALL 2 a * CHECK 1 5 1000".into(), "ERR invalid now 'CHECK': expected '*' or an integer from 0 to 9007199254740991 (now is the argument after the 2 keys numkeys counts)"),
        ("RL.ALL 2 a b *".into(), "ERR at least one clause"),
        ("RL.ALL 1 a * 5 1000".into(), "ERR syntax error: expected a clause"),
        ("RL.ALL 1 a * CHECK".into(), "ERR missing key index for clause 1"),
        ("RL.ALL 1 a * CHECK 2 5 1000".into(), "ERR invalid key index '2' for clause 1: expected an integer from 1 to 1"),
        ("RL.ALL 2 a b * CHECK 1 5 1000 CHECK 1 5 1000".into(), "ERR key index 1 for clause 2 is used by an earlier clause"),
        ("RL.ALL 2 a b * CHECK 1 5 1000".into(), "ERR key 2 is used by no clause"),
        ("RL.ALL 2 a b * CHECK 1 5 0 CHECK 3 5 1000".into(), "ERR clause 1 (CHECK): invalid window '0' for rule 1"),
        ("RL.ALL 2 a b * CHECK 1 5 1000 THROTTLE 2 5 1".into(), "ERR clause 2 (THROTTLE):"),
        ("RL.ALL 1 a * QUOTA 1 Mars/Base day 5".into(), "ERR clause 1 (QUOTA):"),
        ("RL.ALL 1 a * LEASE 1 2 1000".into(), "ERR clause 1 (LEASE): TOKEN is required in a LEASE clause of RL.ALL"),
        ("RL.ALL 1 a * CHECK 1 5 1000 COST 6".into(), "ERR clause 1 (CHECK): invalid cost '6'"),
        ("RL.ALL 1 a * CHECK 1 5 1000 DEBIT".into(), "ERR clause 1 (CHECK): DEBIT is not an option of a clause"),
        ("RL.ALL 1 a * THROTTLE 1 5 1 1000 RESERVE 10".into(), "ERR clause 1 (THROTTLE): RESERVE is not an option of a clause"),
        ("RL.ALL 2 a b * CHECK 1 5 1000 REFUND CHECK 2 5 1000".into(), "ERR clause 1 (CHECK): REFUND is not an option of a clause (REFUND may only end the call, or come right before a last DETAILS)"),
        ("RL.ALLPEEK 1 a * CHECK 1 5 1000 REFUND".into(), "ERR clause 1 (CHECK): syntax error"),
        (
            format!("RL.ALL 2 a b * CHECK 1 {many_rules} CHECK 2 {many_rules}"),
            "ERR too many rules: 80 given over all clauses, at most 64 per call",
        ),
        // Argument errors before WRONGTYPE, WRONGTYPE in key order before
        // stored values.
        ("RL.ALL 2 str a * CHECK 1 5 1000 CHECK 2 5 0".into(), "ERR clause 2 (CHECK): invalid window"),
        ("RL.ALL 2 badz str * CHECK 1 5 1000 CHECK 2 5 1000".into(), "WRONGTYPE"),
        ("RL.ALL 2 badz fresh2 * THROTTLE 2 5 1 1000 CHECK 1 5 1000".into(), "ERR sorted set at 'badz' holds a score"),
        ("RL.ALL 2 badq badz * QUOTA 1 UTC day 5 CHECK 2 5 1000".into(), "ERR sorted set at 'badz'"),
        ("RL.ALL 2 badz badq * CHECK 1 5 1000 CHECK 2 5 1000".into(), "WRONGTYPE"),
        ("RL.ALL 2 str keep * CHECK 2 1 1000 CHECK 1 5 1000".into(), "WRONGTYPE"),
    ];
    for (line, want) in &cases {
        let got = err(&mut con, line);
        assert!(
            got.starts_with(want),
            "{line}: got '{got}', want '{want}...'"
        );
    }
    assert_same_keyspace(&before, &snapshot(&mut con), "errors");
    // A stored value's error in the second key: the first clause (which
    // would admit) writes nothing.
    let badq = run_day_field(&mut con);
    let line = "RL.ALL 2 fresh badq * CHECK 1 5 1000 QUOTA 2 UTC day 5";
    let e = err(&mut con, line);
    assert!(e.starts_with("ERR") && e.contains(&badq), "{e}");
    assert!(!exists(&mut con, "fresh"));
    // 64 rules over all clauses is allowed.
    let rules32 = (0..32)
        .map(|i| format!("1 {}", i + 1))
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(
        ints(
            &mut con,
            &format!("RL.ALLPEEK 2 a b * CHECK 1 {rules32} CHECK 2 {rules32}")
        )[0],
        0
    );
}

/// Writes today's UTC `day` bucket of `badq` as a bad counter; its field.
fn run_day_field(con: &mut Connection) -> String {
    let now = server_ms(con);
    let days = now / 86_400_000;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let field = format!("day:{y:04}-{m:02}-{d:02}T00:00+00:00");
    run(con, "DEL badq");
    redis::cmd("HSET")
        .arg("badq")
        .arg(&field)
        .arg("x")
        .query::<Value>(con)
        .unwrap();
    field
}

/// In a call that ends with `REFUND`, an option a clause cannot take
/// (`DEBIT`, `RESERVE`, a `REFUND` inside the clause) is still the first bad
/// argument, named as it is without the call's `REFUND` — not reported as
/// clashing with the call's `REFUND`, which comes after it.
#[test]
fn a_refund_call_names_the_clause_option_first() {
    let s = Server::start();
    let mut con = s.con();
    let cases = [
        (
            "RL.ALL 1 a * CHECK 1 5 1000 DEBIT REFUND",
            "ERR clause 1 (CHECK): DEBIT is not an option of a clause",
        ),
        (
            "RL.ALL 1 a * CHECK 1 5 1000 COST 20 DEBIT REFUND",
            "ERR clause 1 (CHECK): DEBIT is not an option of a clause",
        ),
        (
            "RL.ALL 1 a * QUOTA 1 UTC DAY 5 DEBIT REFUND",
            "ERR clause 1 (QUOTA): DEBIT is not an option of a clause",
        ),
        (
            "RL.ALL 1 a * THROTTLE 1 5 1 1000 RESERVE 10 REFUND",
            "ERR clause 1 (THROTTLE): RESERVE is not an option of a clause",
        ),
        (
            "RL.ALL 1 a * CHECK 1 5 1000 REFUND REFUND",
            "ERR clause 1 (CHECK): REFUND is not an option of a clause (REFUND may only end the call, or come right before a last DETAILS)",
        ),
    ];
    for (line, want) in cases {
        assert_eq!(err(&mut con, line), want, "{line}");
    }
    // A refund's COST has DEBIT's range (above the rule's count), and an
    // argument error before the option is still reported first.
    assert_eq!(
        ints(&mut con, "RL.ALL 1 a * CHECK 1 5 1000 COST 20 REFUND")[0],
        0
    );
    assert_eq!(
        err(&mut con, "RL.ALL 1 a * CHECK 1 5 0 DEBIT REFUND"),
        "ERR clause 1 (CHECK): invalid window '0' for rule 1: expected an integer from 1 to 9007199254740991"
    );
    assert!(!exists(&mut con, "a"));
}

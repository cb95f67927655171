//! RL.LEASE, RL.LEASEPEEK, RL.RELEASE and RL.RENEW against a real server:
//! the set's layout and expiry on the grid, 50 connections at one instant,
//! a holder that stops renewing, a retried acquire after a lost reply,
//! reaping of expired units, errors with nothing written, and the OOM rule.

mod common;

use common::*;
use redis::{Connection, Value};

const T: i64 = 1_700_000_000_000;

/// A lease reply: the six integers and the token (None for nil).
fn lease(con: &mut Connection, line: &str) -> (Vec<i64>, Option<String>) {
    let v: Vec<Value> = words(line)
        .query(con)
        .unwrap_or_else(|e| panic!("{line}: {e}"));
    assert_eq!(v.len(), 7, "{line}: {v:?}");
    let ints = v[..6]
        .iter()
        .map(|x| match x {
            Value::Int(n) => *n,
            other => panic!("{line}: not an integer: {other:?}"),
        })
        .collect();
    let token = match &v[6] {
        Value::Nil => None,
        Value::BulkString(b) => Some(String::from_utf8(b.clone()).unwrap()),
        other => panic!("{line}: seventh element {other:?}"),
    };
    (ints, token)
}

fn members(con: &mut Connection, key: &str) -> Vec<(String, String)> {
    zrange(con, key)
        .into_iter()
        .map(|(m, s)| (show(&m), s))
        .collect()
}

/// The first point at or after `x` on a grid of step `max(1, ttl/8)`
/// offset by the key's CRC16 (the key's slot before `mod 16384`: taken
/// from `CLUSTER KEYSLOT` only for keys whose CRC is below 16384, so the
/// tests compute it).
fn grid_point(key: &str, ttl: i64, x: i64) -> i64 {
    let mut crc: u16 = 0;
    for &b in key.as_bytes() {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    let g = (ttl / 8).max(1);
    let o = i64::from(crc) % g;
    let late = (x - o).rem_euclid(g);
    if late == 0 {
        x
    } else {
        x + g - late
    }
}

#[test]
fn layout_reply_and_expiry() {
    let s = Server::start();
    let mut con = s.con();
    let now = server_ms(&mut con);
    // An explicit now at the server's clock: no lag.
    let (r, tok) = lease(
        &mut con,
        &format!("RL.LEASE k {now} 3 8000 COST 2 TOKEN job-1"),
    );
    assert_eq!(
        (r, tok.as_deref()),
        (vec![0, 1, 3, 1, -1, 8000], Some("job-1"))
    );
    // The first unit of a lease of 2 or more half a ms before the others:
    // a first unit with a whole score is a lease of one unit.
    assert_eq!(
        members(&mut con, "k"),
        [
            ("job-1".into(), format!("{}.5", now + 8000 - 1)),
            ("job-1#2".into(), (now + 8000).to_string())
        ]
    );
    let expire = pexpiretime(&mut con, "k");
    let lag = server_ms(&mut con) - now;
    let lo = grid_point("k", 8000, now + 8000);
    let hi = grid_point("k", 8000, now + 8000 + lag + 1);
    assert!((lo..=hi).contains(&expire), "{lo} <= {expire} <= {hi}");
    // A module-named lease: 8 characters, not a number, not a UUID.
    let (r, tok) = lease(&mut con, &format!("RL.LEASE k {now} 3 1000"));
    assert_eq!(r, [0, 1, 3, 0, -1, 8000]);
    let tok = tok.unwrap();
    assert_eq!(tok.len(), 8);
    assert!(!looks_numeric(&tok) && !looks_like_uuid(&tok), "{tok}");
    // Full: refused with nil, retry_after from the earliest unit of others.
    let (r, tok2) = lease(&mut con, &format!("RL.LEASE k {now} 3 1000 TOKEN other"));
    assert_eq!((r, tok2), (vec![1, 1, 3, 0, 1000, 8000], None));
    // The peek answers the same without writing.
    let before = snapshot(&mut con);
    assert_eq!(
        ints(&mut con, &format!("RL.LEASEPEEK k {now} 3 TOKEN other")),
        [1, 1, 3, 0, 1000, 8000]
    );
    assert_eq!(
        ints(
            &mut con,
            &format!("RL.LEASEPEEK k {now} 3 COST 0 TOKEN job-1")
        ),
        [0, 1, 3, 0, -1, 8000]
    );
    // job-1 resizing down to 1 fits.
    assert_eq!(
        ints(
            &mut con,
            &format!("RL.LEASEPEEK k {now} 3 COST 1 TOKEN job-1")
        ),
        [0, 1, 3, 1, -1, 8000]
    );
    assert_same_keyspace(&before, &snapshot(&mut con), "RL.LEASEPEEK");
    assert_eq!(
        ints(&mut con, &format!("RL.RELEASE k {now} job-1 {tok} nope")),
        [2, 1, 0]
    );
    assert!(!exists(&mut con, "k"), "the emptied set is gone");
}

#[test]
fn fifty_connections_at_one_instant_get_exactly_the_limit() {
    let s = Server::start();
    let mut con = s.con();
    let mut cons: Vec<Connection> = (0..50).map(|_| s.con()).collect();
    let barrier = std::sync::Barrier::new(50);
    let replies: Vec<(Vec<i64>, Option<String>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = cons
            .iter_mut()
            .enumerate()
            .map(|(i, c)| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    lease(c, &format!("RL.LEASE sem * 7 60000 TOKEN req-{i}"))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let admitted: Vec<_> = replies.iter().filter(|(r, _)| r[0] == 0).collect();
    assert_eq!(admitted.len(), 7);
    assert!(admitted.iter().all(|(_, t)| t.is_some()));
    assert!(replies
        .iter()
        .filter(|(r, _)| r[0] == 1)
        .all(|(r, t)| t.is_none() && r[3] == 0 && r[4] > 0));
    // Remaining goes 6, 5, ..., 0 across the admitted ones.
    let mut remaining: Vec<i64> = admitted.iter().map(|(r, _)| r[3]).collect();
    remaining.sort_unstable();
    assert_eq!(remaining, [0, 1, 2, 3, 4, 5, 6]);
    let n: i64 = redis::cmd("ZCARD").arg("sem").query(&mut con).unwrap();
    assert_eq!(n, 7);
}

#[test]
fn a_holder_that_stops_renewing_loses_its_units() {
    let s = Server::start();
    let mut con = s.con();
    assert_eq!(
        lease(&mut con, &format!("RL.LEASE k {T} 1 1000 TOKEN a")).0[0],
        0
    );
    // A heartbeat before the expiry renews it.
    assert_eq!(
        ints(&mut con, &format!("RL.RENEW k {} 1000 a", T + 900)),
        [1]
    );
    assert_eq!(
        lease(&mut con, &format!("RL.LEASE k {} 1 1000 TOKEN b", T + 1000)).0[0],
        1
    );
    // The holder goes silent: at T+1900 its unit expires, b takes the slot.
    let (r, tok) = lease(&mut con, &format!("RL.LEASE k {} 1 1000 TOKEN b", T + 1900));
    assert_eq!((r[0], tok.as_deref()), (0, Some("b")));
    // a's late heartbeat answers 0 and does not revive it.
    let before = members(&mut con, "k");
    assert_eq!(
        ints(&mut con, &format!("RL.RENEW k {} 1000 a", T + 1950)),
        [0]
    );
    assert_eq!(members(&mut con, "k"), before);
    assert_eq!(ints(&mut con, &format!("RL.RELEASE k {} a", T + 1950)), [0]);
    if !functions_backend() {
        // INFO ratelimit: not covered by the library
        let stats = rl_stats(&mut con);
        assert_eq!(stats["ratelimit_renew_calls"], 2);
        assert_eq!(stats["ratelimit_renewed_units"], 1);
        assert_eq!(stats["ratelimit_renew_lost"], 1);
        assert_eq!(stats["ratelimit_release_calls"], 1);
        assert_eq!(stats["ratelimit_released_units"], 0);
    }
}

#[test]
fn a_retried_lease_after_a_lost_reply_takes_no_second_slot() {
    let s = Server::start();
    let mut con = s.con();
    let line = format!("RL.LEASE k {T} 2 5000 TOKEN job-9");
    assert_eq!(lease(&mut con, &line).0, [0, 1, 2, 1, -1, 5000]);
    // The reply was lost; the client retries the same call.
    assert_eq!(lease(&mut con, &line).0, [0, 1, 2, 1, -1, 5000]);
    assert_eq!(members(&mut con, "k").len(), 1);
    // Another job still finds its slot.
    assert_eq!(
        lease(&mut con, &format!("RL.LEASE k {T} 2 5000 TOKEN job-10")).0[0],
        0
    );
    assert_eq!(
        lease(&mut con, &format!("RL.LEASE k {T} 2 5000 TOKEN job-11")).0[0],
        1
    );
}

#[test]
fn expired_units_are_reaped_by_either_trigger() {
    let s = Server::start();
    let mut con = s.con();
    // Times behind the server's clock: units expired by both clocks (a
    // caller ahead of the server removes only what the server sees expired).
    let now = server_ms(&mut con) - 100_000;
    // One long lease holds the expiry.
    lease(&mut con, &format!("RL.LEASE k {now} 3 10000000 TOKEN long"));
    let held = pexpiretime(&mut con, "k");
    for (i, dt) in [1, 2, 3].into_iter().enumerate() {
        lease(
            &mut con,
            &format!("RL.LEASE k {} 3 10 TOKEN s{i}", now + dt),
        );
    }
    assert_eq!(
        members(&mut con, "k").len(),
        3,
        "s2 was refused: s0, s1 live"
    );
    // Later, s0 and s1 expired: 2 < limit 3, the expiry stays: no reap.
    lease(&mut con, &format!("RL.LEASE k {} 3 10 TOKEN s3", now + 100));
    assert_eq!(members(&mut con, "k").len(), 4);
    // At +200, 3 expired (s0, s1, s3) >= limit: this call reaps them.
    lease(&mut con, &format!("RL.LEASE k {} 3 10 TOKEN s4", now + 200));
    let names = |con: &mut Connection| -> Vec<String> {
        members(con, "k").into_iter().map(|(m, _)| m).collect()
    };
    assert_eq!(names(&mut con), ["s4", "long"]);
    // At +300, one expired (s4): kept.
    lease(&mut con, &format!("RL.LEASE k {} 3 10 TOKEN s5", now + 300));
    assert_eq!(names(&mut con), ["s4", "s5", "long"]);
    assert_eq!(
        pexpiretime(&mut con, "k"),
        held,
        "the long lease holds the key"
    );
}

#[test]
fn renew_moves_the_expiry_on_the_grid_and_replies_per_token() {
    let s = Server::start();
    let mut con = s.con();
    let now = server_ms(&mut con);
    lease(&mut con, &format!("RL.LEASE k {now} 5 800 TOKEN a COST 2"));
    lease(&mut con, &format!("RL.LEASE k {now} 5 800 TOKEN b"));
    let first = pexpiretime(&mut con, "k");
    assert_eq!(
        ints(&mut con, &format!("RL.RENEW k {now} 100000 a zz b")),
        [2, 0, 1]
    );
    let (at, half) = ((now + 100000).to_string(), format!("{}.5", now + 99999));
    let mut got = members(&mut con, "k");
    got.sort();
    assert_eq!(
        got,
        [
            ("a".into(), half),
            ("a#2".into(), at.clone()),
            ("b".into(), at)
        ]
    );
    let expire = pexpiretime(&mut con, "k");
    assert!(expire > first);
    assert!(
        expire >= now + 100000 && expire < now + 100000 + 12500 + 1000,
        "{expire}"
    );
    // Renewing shorter keeps the later expiry.
    assert_eq!(ints(&mut con, &format!("RL.RENEW k {now} 10 a")), [2]);
    assert_eq!(pexpiretime(&mut con, "k"), expire);
}

#[test]
fn errors_write_nothing() {
    let s = Server::start();
    let mut con = s.con();
    run(&mut con, "SET str x");
    lease(&mut con, &format!("RL.LEASE k {T} 2 5000 TOKEN a"));
    let before = snapshot(&mut con);
    let cases = [
        ("RL.LEASE k x 2 5000", "ERR invalid now 'x'"),
        ("RL.LEASE k * 0 5000", "ERR invalid limit '0'"),
        ("RL.LEASE k * 2 0", "ERR invalid ttl '0'"),
        ("RL.LEASE k * 2 5000 COST 3", "ERR invalid cost '3'"),
        ("RL.LEASE k * 2 5000 TOKEN a#b", "ERR invalid token 'a#b'"),
        (
            "RL.LEASE k * 2 5000 TOKEN a TOKEN a",
            "ERR syntax error: option TOKEN given twice",
        ),
        (
            "RL.LEASE k * 2 5000 5",
            "ERR syntax error: unexpected argument '5'",
        ),
        ("RL.LEASE k 9007199254740991 2 1", "ERR invalid ttl '1'"),
        ("RL.LEASE str * 2 5000", "WRONGTYPE"),
        ("RL.LEASE str * 0 5000", "ERR invalid limit"),
        ("RL.LEASEPEEK k * 2 COST 3", "ERR invalid cost '3'"),
        ("RL.LEASEPEEK str * 2", "WRONGTYPE"),
        ("RL.RELEASE k * a a", "ERR token 'a' given twice"),
        ("RL.RELEASE k * a#2", "ERR invalid token 'a#2'"),
        ("RL.RELEASE str * a", "WRONGTYPE"),
        ("RL.RENEW k * 0 a", "ERR invalid ttl '0'"),
        ("RL.RENEW k * 1000 a a", "ERR token 'a' given twice"),
        ("RL.RENEW str * 1000 a", "WRONGTYPE"),
        ("RL.LEASE k", "ERR wrong number of arguments"),
        ("RL.RELEASE k *", "ERR wrong number of arguments"),
        ("RL.RENEW k * 1000", "ERR wrong number of arguments"),
    ];
    for (line, want) in cases {
        let e = err(&mut con, line);
        assert!(e.starts_with(want), "{line}: {e}");
    }
    let many: Vec<String> = (0..65).map(|i| format!("t{i}")).collect();
    let e = err(&mut con, &format!("RL.RELEASE k * {}", many.join(" ")));
    assert!(e.contains("too many tokens: 65"), "{e}");
    let e = err(&mut con, &format!("RL.RENEW k * 100 {}", many.join(" ")));
    assert!(e.contains("too many tokens: 65"), "{e}");
    assert_same_keyspace(&before, &snapshot(&mut con), "errors");
    // A stored score outside the safe range is an error in a stored value.
    run(&mut con, "ZADD bad inf x");
    for line in [
        "RL.LEASE bad * 2 5000",
        "RL.LEASEPEEK bad * 2",
        "RL.RELEASE bad * x",
        "RL.RENEW bad * 5 x",
    ] {
        assert!(err(&mut con, line).contains("not finite"), "{line}");
    }
    // A huge finite score (1e300) gets the same message from every lease
    // command and from the sliding-window log: the score is not printed.
    run(&mut con, "ZADD huge 1e300 x");
    let want = "ERR sorted set at 'huge' holds a score that is not finite or outside -9007199254740991..9007199254740991";
    for line in [
        "RL.LEASE huge * 2 5000",
        "RL.LEASEPEEK huge * 2",
        "RL.RELEASE huge * x",
        "RL.RENEW huge * 5 x",
        "RL.CHECK huge * 2 1000",
    ] {
        assert_eq!(err(&mut con, line), want, "{line}");
    }
}

#[test]
fn above_maxmemory_lease_is_refused_release_and_renew_run() {
    if module_only(
        "the OOM error after argument errors: SPEC 'The Functions library' (an admission above maxmemory gets Redis's own OOM error, given before any function runs)",
    ) {
        return;
    }
    let s = Server::start();
    let mut con = s.con();
    lease(&mut con, &format!("RL.LEASE k {T} 5 5000 TOKEN a"));
    lease(&mut con, &format!("RL.LEASE k {T} 5 5000 TOKEN b"));
    run(&mut con, "CONFIG SET maxmemory-policy noeviction");
    run(&mut con, "CONFIG SET maxmemory 1");
    let e = err(&mut con, &format!("RL.LEASE k {T} 5 5000 TOKEN c"));
    assert_eq!(e, "OOM command not allowed when used memory > 'maxmemory'.");
    // Argument errors come first.
    assert!(err(&mut con, "RL.LEASE k * 0 5000").starts_with("ERR invalid limit"));
    assert_eq!(
        ints(&mut con, &format!("RL.LEASEPEEK k {T} 5")),
        [0, 1, 5, 2, -1, 5000]
    );
    assert_eq!(ints(&mut con, &format!("RL.RENEW k {} 5000 a", T + 1)), [1]);
    assert_eq!(
        ints(&mut con, &format!("RL.RELEASE k {} a b", T + 1)),
        [1, 1]
    );
    run(&mut con, "CONFIG SET maxmemory 0");
    assert_eq!(rl_stats(&mut con)["ratelimit_lease_errors"], 2);
}

/// A lease whose unit chain has a gap (`tok`..`tok#8`, then `tok#10`):
/// here left by RL.CHECK's `REFUND` on the same key, which removes the
/// greatest member name among equal scores — `tok#9`, since `tok#10` sorts
/// before it. The walk stops at the gap, so `tok#10` is not the token's
/// own unit; an admission of cost 10 re-scores it instead of adding a
/// unit. The reply's `remaining` is `limit - live` after the call (SPEC
/// RL.LEASE), the same as a peek with `COST 0` right after it answers.
#[test]
fn remaining_counts_a_live_unit_past_a_gap_in_the_chain_once() {
    let s = Server::start();
    let mut con = s.con();
    lease(
        &mut con,
        &format!("RL.LEASE k {T} 20 10000 TOKEN tok COST 10"),
    );
    ints(&mut con, &format!("RL.CHECK k {T} 100 1000 REFUND"));
    let names: Vec<String> = members(&mut con, "k").into_iter().map(|(m, _)| m).collect();
    assert!(names.contains(&"tok#10".to_string()) && !names.contains(&"tok#9".to_string()));

    let peek = ints(
        &mut con,
        &format!("RL.LEASEPEEK k {T} 20 TOKEN tok COST 10"),
    );
    let (reply, _) = lease(
        &mut con,
        &format!("RL.LEASE k {T} 20 10000 TOKEN tok COST 10"),
    );
    let now = ints(&mut con, &format!("RL.LEASEPEEK k {T} 20 COST 0"));
    assert_eq!(members(&mut con, "k").len(), 10);
    assert_eq!(now[3], 10, "state now: 20 - 10 live");
    assert_eq!(
        reply[3], now[3],
        "RL.LEASE's remaining is limit - live after it"
    );
    assert_eq!(
        peek[3], now[3],
        "RL.LEASEPEEK's remaining is what RL.LEASE leaves"
    );
}

/// The same gap in a chain, where the live unit past it holds the set's
/// highest score (the chain renewed to a shorter lease): an admission re-scores it down to `t + ttl`, so the
/// reply's `reset_after` (and RL.ALLPEEK's, which answers what RL.LEASE
/// would) is `ttl`, as a peek with `COST 0` answers right after.
#[test]
fn reset_after_follows_a_unit_past_a_gap_that_moves_down() {
    let s = Server::start();
    let mut con = s.con();
    lease(
        &mut con,
        &format!("RL.LEASE k {T} 20 5000 TOKEN tok COST 10"),
    );
    ints(&mut con, &format!("RL.CHECK k {T} 100 1000 REFUND"));
    // A heartbeat renews the chain (`tok`..`tok#8`) only: `tok#10` alone
    // holds the top.
    assert_eq!(ints(&mut con, &format!("RL.RENEW k {T} 500 tok")), [8]);
    let peek = ints(
        &mut con,
        &format!("RL.ALLPEEK 1 k {T} LEASE 1 20 1000 TOKEN tok COST 10"),
    );
    let (reply, _) = lease(
        &mut con,
        &format!("RL.LEASE k {T} 20 1000 TOKEN tok COST 10"),
    );
    let now = ints(&mut con, &format!("RL.LEASEPEEK k {T} 20 COST 0"));
    assert_eq!(now[5], 1000, "every unit now expires at t + 1000");
    assert_eq!(reply[5], now[5], "RL.LEASE's reset_after");
    assert_eq!(peek[6], now[5], "RL.ALLPEEK's reset_after");
}

/// A small deterministic generator (xorshift), so a failure replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Random leases on one key mixed with what leaves gaps in chains and
/// strangers' unit names (RL.CHECK `REFUND` on the same key, RL.RENEW and
/// RL.RELEASE of one token, a `ZADD` of `tok#i`): every admitted RL.LEASE
/// replies `remaining = limit - live` and the `reset_after` of the set it
/// leaves (as RL.LEASEPEEK `COST 0` answers right after), and RL.ALLPEEK's
/// LEASE clause just before answers what RL.LEASE does.
#[test]
fn lease_replies_describe_the_set_they_leave() {
    let s = Server::start();
    let mut con = s.con();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut t = server_ms(&mut con);
    let tokens = ["a", "b", "c", "job"];
    let limit = 30;
    let mut admitted = 0;
    for i in 0..1500 {
        t += [0, 0, 5, 1000, 20_000][rng.below(5) as usize];
        let tok = tokens[rng.below(4) as usize];
        match rng.below(100) {
            0..=14 => {
                let cost = 1 + rng.below(3);
                ints(
                    &mut con,
                    &format!("RL.CHECK k {t} 1000 1000 REFUND COST {cost}"),
                );
                continue;
            }
            15..=21 => {
                ints(&mut con, &format!("RL.RELEASE k {t} {tok}"));
                continue;
            }
            22..=29 => {
                let ttl = [10_000, 50_000][rng.below(2) as usize];
                ints(&mut con, &format!("RL.RENEW k {t} {ttl} {tok}"));
                continue;
            }
            30..=32 => {
                let score = t + rng.below(60_000) as i64 - 1000;
                run(
                    &mut con,
                    &format!("ZADD k {score} {tok}#{}", 2 + rng.below(11)),
                );
                continue;
            }
            _ => {}
        }
        let cost = 1 + rng.below(12);
        let ttl = [10_000, 50_000, 200_000][rng.below(3) as usize];
        let peek = ints(
            &mut con,
            &format!("RL.ALLPEEK 1 k {t} LEASE 1 {limit} {ttl} TOKEN {tok} COST {cost}"),
        );
        let line = format!("RL.LEASE k {t} {limit} {ttl} TOKEN {tok} COST {cost}");
        let (reply, _) = lease(&mut con, &line);
        let what = format!("call {i}: {line}");
        assert_eq!(
            peek[0], reply[0],
            "{what}: RL.ALLPEEK {peek:?}, RL.LEASE {reply:?}"
        );
        assert_eq!(
            peek[2..],
            reply[1..],
            "{what}: RL.ALLPEEK {peek:?}, RL.LEASE {reply:?}"
        );
        if reply[0] != 0 {
            continue;
        }
        admitted += 1;
        let now = ints(&mut con, &format!("RL.LEASEPEEK k {t} {limit} COST 0"));
        let live: i64 = redis::cmd("ZCOUNT")
            .arg("k")
            .arg(format!("({t}"))
            .arg("+inf")
            .query(&mut con)
            .unwrap();
        assert_eq!(reply[3], limit - live, "{what}: {reply:?}, {live} live");
        assert_eq!(reply[3], now[3], "{what}: {reply:?}, state now {now:?}");
        assert_eq!(reply[5], now[5], "{what}: {reply:?}, state now {now:?}");
    }
    assert!(admitted > 500, "{admitted} admitted");
}

/// A new token's admission adds its first unit only where the name is free
/// (no walk first): here `tok` is free but a stranger's `tok#2` (a live
/// unit, the set's highest) lies past it. The admission of cost 3 makes it
/// the lease's second unit, re-scored to `t + ttl` rather than added, so
/// it counts once in `remaining`, and `reset_after` follows it down.
#[test]
fn a_new_token_takes_a_strangers_later_unit_name_as_its_own() {
    let s = Server::start();
    let mut con = s.con();
    run(
        &mut con,
        &format!("ZADD k {} tok#2 {} other", T + 5000, T + 300),
    );
    let (reply, token) = lease(
        &mut con,
        &format!("RL.LEASE k {T} 10 1000 TOKEN tok COST 3"),
    );
    assert_eq!(token.as_deref(), Some("tok"));
    assert_eq!(
        reply,
        [0, 1, 10, 6, -1, 1000],
        "4 live after: other + 3 units"
    );
    let mut got = members(&mut con, "k");
    got.sort();
    let at = (T + 1000).to_string();
    assert_eq!(
        got,
        [
            ("other".to_string(), (T + 300).to_string()),
            ("tok".to_string(), format!("{}.5", T + 999)),
            ("tok#2".to_string(), at.clone()),
            ("tok#3".to_string(), at),
        ]
    );
    // The same call again: the token's lease is walked (held 3), a renewal.
    let (again, _) = lease(
        &mut con,
        &format!("RL.LEASE k {T} 10 1000 TOKEN tok COST 3"),
    );
    assert_eq!(again, [0, 1, 10, 6, -1, 1000]);
    assert_eq!(members(&mut con, "k").len(), 4);
}

/// A refusal's `retry_after` is when the earliest-expiring unit goes, read
/// from the set both when every unit is live (the lowest score is then
/// not read up front) and when an expired one lies below it.
#[test]
fn a_refusal_waits_for_the_earliest_expiring_unit() {
    let s = Server::start();
    let mut con = s.con();
    run(
        &mut con,
        &format!("ZADD k {} a {} b {} c", T + 700, T + 300, T + 500),
    );
    let (reply, token) = lease(&mut con, &format!("RL.LEASE k {T} 3 1000 TOKEN x"));
    assert_eq!(token, None);
    assert_eq!(reply, [1, 1, 3, 0, 300, 700]);
    run(&mut con, &format!("ZADD k {} old", T - 5));
    let (reply, _) = lease(&mut con, &format!("RL.LEASE k {T} 3 1000 TOKEN x COST 2"));
    assert_eq!(
        reply,
        [1, 1, 3, 0, 500, 700],
        "two of the three live must go"
    );
    assert_eq!(members(&mut con, "k").len(), 4, "a refusal writes nothing");
}

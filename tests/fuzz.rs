//! Random and malformed argument lists to every command. The seed is printed
//! (shown on failure) and can be replayed with `RL_FUZZ_SEED=<seed>`.
//!
//! Every reply must be a well-formed integer array or an `ERR`/`WRONGTYPE`
//! error; an error (and any peek) must leave the keyspace unchanged; keys
//! only ever come from a known set; the server answers `PING` at the end and
//! its INFO counters match what the calls got. RL.THROTTLE and
//! RL.THROTTLEPEEK are also checked against a model of the SPEC's GCRA:
//! with the hash read just before the call, the reply, the fields and the
//! expiry it leaves are known exactly (for `*`, for one of the server times
//! the call can have seen). RL.CHECK and RL.PEEK replies are checked the
//! same way against the SPEC's sliding-window log over the set read just
//! before, and so is what an RL.CHECK `REFUND` leaves: the newest members
//! removed, the expiry kept, and the reply of RL.PEEK right after it.
//! RL.LEASE, RL.LEASEPEEK, RL.RELEASE and RL.RENEW: arguments against the
//! SPEC's rules (tokens, `t + ttl`, `COST` against `limit`, the token cap),
//! reply shapes (RL.LEASE's token or nil, one count per token), writes to
//! their own key only, and their INFO counters (units and lost tokens).
//! RL.ALL and RL.ALLPEEK ([`fuzz_all_clauses`]): random clause sets, half
//! of them mutated, against reply shapes, writes to named keys only (none
//! for errors, refusals and peeks), RL.ALLPEEK agreeing with RL.ALL, and
//! their INFO counters.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::{Connection, Value};

/// Every key a fuzz call may name, with [`THROTTLE_KEYS`]: the only keys
/// that may ever exist.
const KEYS: &[&[u8]] = &[
    b"fz:a",
    b"fz:b",
    b"fz:c",
    b"fz:\xff\xfe",
    b"fz:\x00\r\n",
    b"",
    b"fz:list",
    b"fz:hash",
    b"fz:zinf",
    b"fz:abc",
];

/// Keys only the structured throttle calls name (besides [`KEYS`]), so that
/// their buckets fill up and empty again.
const THROTTLE_KEYS: &[&[u8]] = &[b"fz:t1", b"fz:t2"];

/// Keys of the wrong type or holding bad values, which no call may change.
/// (`fz:hash` is the wrong type for most commands but RL.THROTTLE's own: it
/// may change, but never in [`HASH_FIXED`].)
const FIXTURES: &[&[u8]] = &[b"fz:list", b"fz:zinf", b"fz:abc"];

/// A hash with bad stored times under some window fields: an error in a
/// stored value for a throttle call naming one of them, a valid bucket for
/// one that does not.
const HASH_FIXTURE: &[u8] = b"fz:hash";

/// Fields of [`HASH_FIXTURE`] no call may change: one no rule can name, and
/// stored times the SPEC refuses (not a number, just above `2 * (2^53-1) *
/// 10^6`, a leading zero, a sign).
const HASH_FIXED: &[(&str, &str)] = &[
    ("f", "v"),
    ("1000", "abc"),
    ("2000", "18014398509481982000001"),
    ("3000", "07"),
    ("5000", "-1"),
];

/// A valid stored time in [`HASH_FIXTURE`]: the largest, `2 * (2^53-1) *
/// 10^6` ns (it always rejects; a refund lowers it).
const HASH_MAX_TAT: (&str, &str) = ("4000", "18014398509481982000000");

/// The windows of [`HASH_FIXTURE`]'s fields, drawn often by structured calls.
const FIXTURE_WINDOWS: &[i64] = &[1000, 2000, 3000, 4000, 5000];

/// [`HASH_FIXTURE`]'s TTL, ms: far enough that it never expires during a
/// run (an admitted call only extends it).
const HASH_FIXTURE_TTL: i64 = 10_000_000_000;

const COMMANDS: &[&str] = &[
    "RL.CHECK",
    "RL.PEEK",
    "RL.DAYHOUR",
    "RL.LOCKCOUNT",
    "RL.THROTTLE",
    "RL.THROTTLEPEEK",
    "RL.LEASE",
    "RL.LEASEPEEK",
    "RL.RELEASE",
    "RL.RENEW",
];

fn is_lease(cmd: &str) -> bool {
    matches!(cmd, "RL.LEASE" | "RL.LEASEPEEK" | "RL.RELEASE" | "RL.RENEW")
}

/// The commands that answer one count per token.
fn per_token(cmd: &str) -> bool {
    matches!(cmd, "RL.RELEASE" | "RL.RENEW")
}

fn is_throttle(cmd: &str) -> bool {
    matches!(cmd, "RL.THROTTLE" | "RL.THROTTLEPEEK")
}

fn is_window(cmd: &str) -> bool {
    matches!(cmd, "RL.CHECK" | "RL.PEEK")
}

/// The commands with rules and options (`COST`, `REFUND` or not).
fn takes_rules(cmd: &str) -> bool {
    is_throttle(cmd) || is_window(cmd)
}

fn seed() -> u64 {
    let seed = std::env::var("RL_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
    eprintln!("fuzz seed: {seed} (replay with RL_FUZZ_SEED={seed})");
    seed
}

fn reset_keyspace(con: &mut Connection) {
    redis::cmd("FLUSHALL").query::<()>(con).expect("FLUSHALL");
    for line in [
        "RPUSH fz:list a b",
        "ZADD fz:zinf inf a 1 b",
        "SET fz:abc abc",
    ] {
        run(con, line);
    }
    let mut hset = redis::cmd("HSET");
    hset.arg(HASH_FIXTURE);
    for (f, v) in HASH_FIXED.iter().chain([&HASH_MAX_TAT]) {
        hset.arg(*f).arg(*v);
    }
    hset.query::<()>(con).expect("HSET");
    redis::cmd("PEXPIRE")
        .arg(HASH_FIXTURE)
        .arg(HASH_FIXTURE_TTL)
        .query::<()>(con)
        .expect("PEXPIRE");
}

/// [`HASH_FIXTURE`] still holds [`HASH_FIXED`] and an expiry no earlier than
/// `expiry`.
fn assert_hash_fixture(con: &mut Connection, expiry: i64, what: &str) {
    let mut hmget = redis::cmd("HMGET");
    hmget.arg(HASH_FIXTURE);
    for (f, _) in HASH_FIXED {
        hmget.arg(*f);
    }
    let got: Vec<Option<String>> = hmget.query(con).expect("HMGET");
    let want: Vec<Option<String>> = HASH_FIXED
        .iter()
        .map(|(_, v)| Some(v.to_string()))
        .collect();
    assert_eq!(got, want, "{what}: fields of the hash fixture changed");
    let at = pexpiretime_bytes(con, HASH_FIXTURE);
    assert!(
        at >= expiry,
        "{what}: hash fixture expiry went from {expiry} to {at}"
    );
}

/// One argument: valid numbers, boundaries, malformed numbers, option names,
/// random bytes, huge strings. For the commands that take rules, also
/// `REFUND` and window words.
fn token(rng: &mut StdRng, cmd: &str, t0: i64) -> Vec<u8> {
    const THROTTLE_SPECIAL: &[&str] = &[
        "REFUND",
        "refund",
        "ReFuNd",
        "REFUNDS",
        "DEBIT",
        "debit",
        "RESERVE",
        "Reserve",
        "1000",
        "2000",
        "3000",
        "4000",
        "5000",
        "1000000",
        "1000001",
        "9007199254",
    ];
    const SPECIAL: &[&str] = &[
        "0",
        "1",
        "-1",
        "-0",
        "+5",
        "05",
        " 5",
        "5 ",
        "5.0",
        "1e3",
        "0x10",
        "inf",
        "-inf",
        "nan",
        "*",
        "**",
        "9007199254740991",
        "9007199254740992",
        "9007199254740993",
        "-9007199254740991",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "18446744073709551616",
        "10000",
        "10001",
        "COST",
        "cost",
        "CoSt",
        "COSTS",
        "LIMIT",
        "NX",
        "WITHSCORES",
        "",
        "\u{663}",
    ];
    const LEASE_SPECIAL: &[&str] = &[
        "TOKEN",
        "token",
        "ToKeN",
        "j1",
        "j2",
        "a#2",
        "#",
        "a b",
        "\u{e9}",
        "tttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttt",
        "ttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttt",
    ];
    match rng.gen_range(0..12) {
        0 | 1 => rng.gen_range(0..20).to_string().into_bytes(),
        3 | 4 if is_lease(cmd) && rng.gen_bool(0.3) => LEASE_SPECIAL
            [rng.gen_range(0..LEASE_SPECIAL.len())]
        .as_bytes()
        .to_vec(),
        2 => rng.gen_range(1..200_000).to_string().into_bytes(),
        3 | 4 if takes_rules(cmd) && rng.gen_bool(0.3) => THROTTLE_SPECIAL
            [rng.gen_range(0..THROTTLE_SPECIAL.len())]
        .as_bytes()
        .to_vec(),
        3 | 4 => SPECIAL[rng.gen_range(0..SPECIAL.len())].as_bytes().to_vec(),
        5 => (t0 + rng.gen_range(-5000..5000)).to_string().into_bytes(),
        6 => {
            let n = rng.gen_range(0..16);
            (0..n).map(|_| rng.gen::<u8>()).collect()
        }
        7 => {
            let n = rng.gen_range(1..10);
            (0..n)
                .map(|_| rng.gen_range(b'A'..=b'z'))
                .filter(u8::is_ascii_alphabetic)
                .collect()
        }
        8 => {
            let n = rng.gen_range(17..400);
            let mut s: Vec<u8> = (0..n).map(|_| rng.gen_range(b'0'..=b'9')).collect();
            if rng.gen_bool(0.3) {
                s.insert(0, b'-');
            }
            s
        }
        9 => rng.gen_range(-100i64..0).to_string().into_bytes(),
        10 => {
            if rng.gen_bool(0.02) {
                vec![b'7'; 70_000]
            } else {
                format!("{}", rng.gen::<f64>() * 1e6).into_bytes()
            }
        }
        _ => rng.gen::<i64>().to_string().into_bytes(),
    }
}

fn key(rng: &mut StdRng) -> Vec<u8> {
    KEYS[rng.gen_range(0..KEYS.len())].to_vec()
}

/// `word` with each letter's case picked at random.
fn random_case(rng: &mut StdRng, word: &str) -> Vec<u8> {
    word.bytes()
        .map(|b| {
            if rng.gen_bool(0.5) {
                b.to_ascii_lowercase()
            } else {
                b.to_ascii_uppercase()
            }
        })
        .collect()
}

/// A `burst count window` triple at a boundary of the SPEC: `T` just 1 ns or
/// just 0, `tau` just at `(2^53-1) * 10^6` ns or just above.
fn edge_rule(rng: &mut StdRng) -> [i64; 3] {
    let w = rng.gen_range(1..=5000);
    let b = rng.gen_range(1..=12);
    match rng.gen_range(0..9) {
        0 => [1, 1, MAX_SAFE],
        1 => [2, 1, MAX_SAFE],
        2 => [MAX_SAFE, 1, 1],
        3 => [MAX_SAFE, 1, 2],
        4 => [b, w * 1_000_000, w],
        5 => [b, w * 1_000_000 + 1, w],
        6 => [b, MAX_SAFE, MAX_SAFE],
        7 => [MAX_SAFE, MAX_SAFE, 1],
        _ => [b, 3, 1],
    }
}

/// A well-formed (or at a boundary) RL.THROTTLE / RL.THROTTLEPEEK argument
/// list: triples, `COST`, and `REFUND` for RL.THROTTLE (now and then for the
/// peek too, which refuses it), options in any order and case.
fn throttle_args(rng: &mut StdRng, cmd: &str, t0: i64) -> Vec<Vec<u8>> {
    let mut args = vec![if rng.gen_bool(0.6) {
        THROTTLE_KEYS[rng.gen_range(0..THROTTLE_KEYS.len())].to_vec()
    } else {
        key(rng)
    }];
    // `*`, or a time on a coarse grid (so that calls, refunds among them,
    // meet at the same ms), or any time, now and then at an end of the range.
    args.push(match rng.gen_range(0..40) {
        0 => [0, 1, MAX_SAFE - 1, MAX_SAFE][rng.gen_range(0..4)]
            .to_string()
            .into_bytes(),
        1..=20 => b"*".to_vec(),
        21..=30 => (t0 + 100 * rng.gen_range(-30..30)).to_string().into_bytes(),
        _ => (t0 + rng.gen_range(-3000..3000)).to_string().into_bytes(),
    });
    // Most calls use one of a few fixed rule sets, as a service does,
    // so that buckets fill up; now and then about the cap of 64 rules, each
    // with its own window.
    const PROFILES: &[&[[i64; 3]]] = &[
        &[[2, 2, 1000]],
        &[[1, 1, 2000]],
        &[[3, 10, 1000], [2, 1, 4000]],
        // Two rules that always tie.
        &[[2, 2, 1000], [2, 4, 2000]],
    ];
    let profile = rng
        .gen_bool(0.6)
        .then(|| PROFILES[rng.gen_range(0..PROFILES.len())]);
    let many = profile.is_none() && rng.gen_bool(0.02);
    let rules = match profile {
        Some(p) => p.len(),
        None if many => rng.gen_range(63..=65),
        None => rng.gen_range(1..=3),
    };
    let mut windows: Vec<i64> = Vec::new();
    let mut smallest = i64::MAX;
    for i in 0..rules {
        let [burst, count, window] = if let Some(p) = profile {
            p[i]
        } else if many {
            [
                rng.gen_range(1..=12),
                rng.gen_range(1..=20),
                60_000 + i as i64,
            ]
        } else if rng.gen_bool(0.05) {
            edge_rule(rng)
        } else {
            let window = if !windows.is_empty() && rng.gen_bool(0.04) {
                // Two rules with the same window: an argument error.
                windows[rng.gen_range(0..windows.len())]
            } else if rng.gen_bool(0.5) {
                // Shared by many calls (and the hash fixture's fields).
                FIXTURE_WINDOWS[rng.gen_range(0..FIXTURE_WINDOWS.len())]
            } else {
                rng.gen_range(1..=5000)
            };
            let burst = if rng.gen_bool(0.7) {
                rng.gen_range(1..=4)
            } else {
                rng.gen_range(1..=12)
            };
            [burst, rng.gen_range(1..=20), window]
        };
        windows.push(window);
        smallest = smallest.min(burst);
        for n in [burst, count, window] {
            args.push(n.to_string().into_bytes());
        }
    }
    let mut options: Vec<Vec<Vec<u8>>> = Vec::new();
    if rng.gen_bool(0.4) {
        let cost = match rng.gen_range(0..20) {
            0 => smallest,
            1 => smallest.saturating_add(1),
            // The state now (peeks), refused by RL.THROTTLE.
            2 => 0,
            // Beyond the burst: a refund's or a debit's.
            3 => smallest.saturating_mul(3),
            _ => rng.gen_range(1..=smallest.min(12)),
        };
        options.push(vec![
            random_case(rng, "COST"),
            cost.to_string().into_bytes(),
        ]);
    }
    let refund = if cmd == "RL.THROTTLE" { 0.2 } else { 0.03 };
    if rng.gen_bool(refund) {
        options.push(vec![random_case(rng, "REFUND")]);
    }
    // DEBIT (RL.THROTTLE; the peek refuses it) and RESERVE (both); now and
    // then with REFUND, which either excludes.
    let debit = if cmd == "RL.THROTTLE" { 0.12 } else { 0.03 };
    if rng.gen_bool(debit) && (options.len() < 2 || rng.gen_bool(0.1)) {
        options.push(vec![random_case(rng, "DEBIT")]);
    }
    if rng.gen_bool(0.2) && (options.len() < 2 || rng.gen_bool(0.1)) {
        let now = std::str::from_utf8(&args[1])
            .ok()
            .and_then(|a| a.parse::<i64>().ok());
        let wait = match (rng.gen_range(0..20), now) {
            (0, _) => 0,
            (1, _) => -1,
            // The last ms a reservation may reach, and one past it.
            (2, Some(t)) => MAX_SAFE - t,
            (3, Some(t)) => MAX_SAFE - t + 1,
            (4..=9, _) => rng.gen_range(0..=600),
            _ => rng.gen_range(0..=20_000),
        };
        options.push(vec![
            random_case(rng, "RESERVE"),
            wait.to_string().into_bytes(),
        ]);
    }
    if rng.gen_bool(0.5) {
        options.reverse();
    }
    args.extend(options.into_iter().flatten());
    args
}

/// A well-formed argument list (after the command name) for `cmd`.
fn valid_args(rng: &mut StdRng, cmd: &str, t0: i64) -> Vec<Vec<u8>> {
    let small =
        |rng: &mut StdRng, lo: i64, hi: i64| rng.gen_range(lo..=hi).to_string().into_bytes();
    match cmd {
        "RL.CHECK" | "RL.PEEK" => {
            let mut args = vec![key(rng)];
            args.push(if rng.gen_bool(0.5) {
                b"*".to_vec()
            } else {
                (t0 + rng.gen_range(-3000..3000)).to_string().into_bytes()
            });
            let rules = rng.gen_range(1..=3);
            let mut smallest = i64::MAX;
            for _ in 0..rules {
                let count = rng.gen_range(1..=12);
                smallest = smallest.min(count);
                args.push(count.to_string().into_bytes());
                args.push(small(rng, 1, 5000));
            }
            // `COST` and, for RL.CHECK (now and then for RL.PEEK, which
            // refuses it), `REFUND`, now and then twice; in any order and case.
            let mut options: Vec<Vec<Vec<u8>>> = Vec::new();
            if rng.gen_bool(0.4) {
                // Now and then 0 (the state now: RL.PEEK only).
                let lowest = i64::from(!rng.gen_bool(0.1));
                options.push(vec![random_case(rng, "COST"), small(rng, lowest, smallest)]);
            }
            let refund = if cmd == "RL.CHECK" { 0.1 } else { 0.03 };
            if rng.gen_bool(refund) {
                options.push(vec![random_case(rng, "REFUND")]);
                if rng.gen_bool(0.05) {
                    options.push(vec![random_case(rng, "REFUND")]);
                }
            }
            // DEBIT (RL.CHECK; RL.PEEK refuses it), now and then with
            // REFUND or twice; its cost up to 3x the smallest count.
            let debit = if cmd == "RL.CHECK" { 0.1 } else { 0.03 };
            if rng.gen_bool(debit) && (options.len() < 2 || rng.gen_bool(0.1)) {
                options.push(vec![random_case(rng, "DEBIT")]);
                if rng.gen_bool(0.05) {
                    options.push(vec![random_case(rng, "DEBIT")]);
                }
                if rng.gen_bool(0.5) {
                    options.retain(|o| !o[0].eq_ignore_ascii_case(b"COST"));
                    options.push(vec![random_case(rng, "COST"), small(rng, 1, 3 * smallest)]);
                }
            }
            if options.len() > 1 {
                let i = rng.gen_range(0..options.len());
                options.swap(0, i);
            }
            args.extend(options.into_iter().flatten());
            args
        }
        "RL.THROTTLE" | "RL.THROTTLEPEEK" => throttle_args(rng, cmd, t0),
        "RL.LEASE" | "RL.LEASEPEEK" | "RL.RELEASE" | "RL.RENEW" => lease_args(rng, cmd, t0),
        "RL.DAYHOUR" => vec![
            key(rng),
            key(rng),
            small(rng, 0, 8),
            small(rng, 0, 5),
            small(rng, 1, 100_000),
            small(rng, 1, 100_000),
        ],
        _ => vec![
            key(rng),
            key(rng),
            small(rng, 1, 100_000),
            small(rng, 0, 4),
            small(rng, 1, 100_000),
        ],
    }
}

/// Lease tokens the structured calls draw from, so leases are taken,
/// renewed and released again.
const LEASE_TOKENS: &[&str] = &["j1", "j2", "j3", "job:42", "a"];

/// A well-formed lease call: `now limit ttl [COST c] [TOKEN t]` (the peek
/// without `ttl`, `COST` from 0), or `now [ttl] token...`.
fn lease_args(rng: &mut StdRng, cmd: &str, t0: i64) -> Vec<Vec<u8>> {
    let small =
        |rng: &mut StdRng, lo: i64, hi: i64| rng.gen_range(lo..=hi).to_string().into_bytes();
    let mut args = vec![key(rng)];
    args.push(if rng.gen_bool(0.5) {
        b"*".to_vec()
    } else {
        (t0 + rng.gen_range(-3000..3000)).to_string().into_bytes()
    });
    let tok = |rng: &mut StdRng| {
        LEASE_TOKENS[rng.gen_range(0..LEASE_TOKENS.len())]
            .as_bytes()
            .to_vec()
    };
    if per_token(cmd) {
        if cmd == "RL.RENEW" {
            args.push(small(rng, 1, 5000));
        }
        let mut tokens: Vec<Vec<u8>> = Vec::new();
        for _ in 0..rng.gen_range(1..=3) {
            let t = tok(rng);
            if !tokens.contains(&t) {
                tokens.push(t);
            }
        }
        args.extend(tokens);
        return args;
    }
    let limit = rng.gen_range(1..=5);
    args.push(limit.to_string().into_bytes());
    if cmd == "RL.LEASE" {
        args.push(small(rng, 1, 5000));
    }
    let mut options: Vec<Vec<Vec<u8>>> = Vec::new();
    if rng.gen_bool(0.5) {
        let lo = i64::from(cmd == "RL.LEASE");
        options.push(vec![random_case(rng, "COST"), small(rng, lo, limit)]);
    }
    if rng.gen_bool(0.7) {
        options.push(vec![random_case(rng, "TOKEN"), tok(rng)]);
    }
    if options.len() > 1 && rng.gen_bool(0.5) {
        options.swap(0, 1);
    }
    args.extend(options.into_iter().flatten());
    args
}

/// Replaces, inserts, deletes or duplicates a few arguments.
fn mutate(rng: &mut StdRng, cmd: &str, args: &mut Vec<Vec<u8>>, t0: i64) {
    for _ in 0..rng.gen_range(0..=2) {
        let n = args.len();
        match rng.gen_range(0..5) {
            0 if n > 0 => {
                let i = rng.gen_range(0..n);
                args[i] = token(rng, cmd, t0);
            }
            1 => {
                let i = rng.gen_range(1..=n.max(1));
                args.insert(i.min(n), token(rng, cmd, t0));
            }
            2 if n > 1 => {
                args.remove(rng.gen_range(1..n));
            }
            3 if n > 0 => {
                let i = rng.gen_range(0..n);
                let dup = args[i].clone();
                args.insert(i, dup);
            }
            _ => {}
        }
    }
}

/// How many leading arguments (after the name) are keys.
fn key_slots(cmd: &str) -> usize {
    match cmd {
        "RL.CHECK" | "RL.PEEK" | "RL.THROTTLE" | "RL.THROTTLEPEEK" => 1,
        c if is_lease(c) => 1,
        _ => 2,
    }
}

/// A random argument list: key positions from the known set, anything else.
fn random_args(rng: &mut StdRng, cmd: &str, t0: i64) -> Vec<Vec<u8>> {
    let n = if rng.gen_bool(0.05) {
        rng.gen_range(13..200)
    } else {
        rng.gen_range(0..=12)
    };
    (0..n)
        .map(|i| {
            if i < key_slots(cmd) {
                key(rng)
            } else {
                token(rng, cmd, t0)
            }
        })
        .collect()
}

/// Arguments after the name that the command's arity accepts.
fn arity_ok(cmd: &str, n: usize) -> bool {
    match cmd {
        "RL.CHECK" | "RL.PEEK" => n >= 4,
        "RL.THROTTLE" | "RL.THROTTLEPEEK" => n >= 5,
        "RL.DAYHOUR" => n == 6,
        "RL.LEASE" | "RL.RENEW" => n >= 4,
        "RL.LEASEPEEK" | "RL.RELEASE" => n >= 3,
        _ => n == 5,
    }
}

fn brief(args: &[Vec<u8>]) -> String {
    let shown: Vec<String> = args
        .iter()
        .map(|a| {
            let s = format!("{:?}", show(&a[..a.len().min(60)]));
            if a.len() > 60 {
                format!("{s}..({} bytes)", a.len())
            } else {
                s
            }
        })
        .collect();
    shown.join(" ")
}

/// Like [`assert_same_keyspace`], but a key whose expiry time has passed by
/// `now_ms` may have gone (Redis expires keys on its own).
fn assert_unchanged_but_expired(before: &Snapshot, after: &Snapshot, now_ms: i64, what: &str) {
    assert_unchanged_except(before, after, now_ms, &[], what);
}

/// [`assert_unchanged_but_expired`] for every key but `except`.
fn assert_unchanged_except(
    before: &Snapshot,
    after: &Snapshot,
    now_ms: i64,
    except: &[&[u8]],
    what: &str,
) {
    for k in after.keys() {
        if !except.contains(&k.as_slice()) {
            assert!(before.contains_key(k), "{what}: key {:?} appeared", show(k));
        }
    }
    for (k, b) in before {
        if except.contains(&k.as_slice()) {
            continue;
        }
        // A key the snapshot's `DUMP` saw may have expired by its
        // `PEXPIRETIME` (-2): gone, then.
        match after.get(k).filter(|a| a.pexpiretime != -2) {
            Some(a) => {
                assert_eq!(b.dump, a.dump, "{what}: value of {:?} changed", show(k));
                assert_eq!(
                    b.pexpiretime,
                    a.pexpiretime,
                    "{what}: expiry of {:?} changed",
                    show(k)
                );
            }
            None => assert!(
                b.pexpiretime != -1 && b.pexpiretime <= now_ms + 1,
                "{what}: key {:?} vanished before its expiry {}",
                show(k),
                b.pexpiretime
            ),
        }
    }
}

/// Sanity of a successful reply.
fn check_reply(cmd: &str, args: &[Vec<u8>], v: &[i64], what: &str) {
    match cmd {
        "RL.THROTTLE" | "RL.THROTTLEPEEK" => {
            let call = spec_throttle(cmd, args)
                .unwrap_or_else(|| panic!("{what}: accepted invalid arguments: {v:?}"));
            assert_eq!(v.len(), 6, "{what}: {v:?}");
            let [limited, rule, limit, remaining, retry, reset] =
                [v[0], v[1], v[2], v[3], v[4], v[5]];
            assert!(limited == 0 || limited == 1, "{what}: {v:?}");
            let index = usize::try_from(rule).unwrap_or(0);
            assert!(
                (1..=call.rules.len()).contains(&index),
                "{what}: rule index out of range: {v:?}"
            );
            let burst = call.rules[index - 1].burst;
            assert_eq!(limit, burst, "{what}: limit is not the rule's burst: {v:?}");
            assert!((0..=burst).contains(&remaining), "{what}: {v:?}");
            // A refund or a debit answers the state now: cost 0.
            let cost = if call.refund || call.debit {
                0
            } else {
                call.cost
            };
            // Admitted: the call took `cost` units, `retry_after` is -1
            // (a reservation: the delay, 0 or more). Rejected: fewer than
            // `cost` units can pass (none while over the limit), a wait of
            // at least 1 ms.
            if limited == 0 {
                let want_retry = if call.reserve.is_some() {
                    retry.max(0)
                } else {
                    -1
                };
                assert_eq!(retry, want_retry, "{what}: {v:?}");
                assert!(remaining <= burst - cost, "{what}: {v:?}");
            } else {
                assert!(retry >= 1, "{what}: {v:?}");
                assert!(remaining < cost.max(1), "{what}: {v:?}");
            }
            // The reply's state holds at least the call's own units (or the
            // binding rule's bucket is over its tolerance): never full.
            // The state now may be a full bucket.
            assert!(
                reset >= i64::from(cost > 0 || limited == 1),
                "{what}: {v:?}"
            );
        }
        "RL.CHECK" | "RL.PEEK" => {
            assert_eq!(v.len(), 6, "{what}: {v:?}");
            let [limited, rule, limit, remaining, retry, reset] =
                [v[0], v[1], v[2], v[3], v[4], v[5]];
            assert!(limited == 0 || limited == 1, "{what}: {v:?}");
            assert!(rule >= 1 && limit >= 1, "{what}: {v:?}");
            assert!((0..=limit).contains(&remaining), "{what}: {v:?}");
            if limited == 0 {
                assert_eq!(retry, -1, "{what}: {v:?}");
            } else {
                assert!(retry >= 1, "{what}: {v:?}");
            }
            // The state now (COST 0, a refund) may be an empty window.
            let now_only = spec_check(cmd, args).is_ok_and(|c| c.refund || c.cost == 0);
            assert!(
                reset >= i64::from(!now_only || limited == 1),
                "{what}: {v:?}"
            );
        }
        "RL.LEASE" | "RL.LEASEPEEK" => {
            let call = spec_lease(cmd, args)
                .unwrap_or_else(|| panic!("{what}: accepted invalid arguments: {v:?}"));
            assert_eq!(v.len(), 6, "{what}: {v:?}");
            let [limited, rule, limit, remaining, retry, reset] =
                [v[0], v[1], v[2], v[3], v[4], v[5]];
            assert!(limited == 0 || limited == 1, "{what}: {v:?}");
            assert_eq!((rule, limit), (1, call.limit), "{what}: {v:?}");
            assert!((0..=limit).contains(&remaining), "{what}: {v:?}");
            assert!(reset >= 0, "{what}: {v:?}");
            if limited == 0 {
                assert_eq!(retry, -1, "{what}: {v:?}");
                assert!(remaining <= limit - call.cost, "{what}: {v:?}");
                if cmd == "RL.LEASE" && call.now.is_some() {
                    // The new lease's units expire at t + ttl.
                    assert!(reset >= call.ttl, "{what}: {v:?}");
                }
            } else {
                assert!(retry >= 1, "{what}: {v:?}");
            }
        }
        "RL.RELEASE" | "RL.RENEW" => {
            let call = spec_lease(cmd, args)
                .unwrap_or_else(|| panic!("{what}: accepted invalid arguments: {v:?}"));
            assert_eq!(
                v.len(),
                call.tokens.len(),
                "{what}: one count per token: {v:?}"
            );
            assert!(v.iter().all(|&n| n >= 0), "{what}: {v:?}");
        }
        "RL.DAYHOUR" => {
            assert_eq!(v.len(), 2, "{what}: {v:?}");
            assert!(v[0] >= 0 && v[1] >= 0, "{what}: {v:?}");
        }
        _ => {
            assert_eq!(v.len(), 3, "{what}: {v:?}");
            assert!(v[0] == 0 || v[0] == 1, "{what}: {v:?}");
            assert!(v[1] >= 0 && v[2] >= -1, "{what}: {v:?}");
            if v[0] == 0 {
                assert!(v[1] >= 1 && v[2] >= 0, "{what}: {v:?}");
            }
        }
    }
}

/// An argument a successful call accepted as an integer.
fn parse(arg: &[u8]) -> i64 {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("accepted a non-integer {:?}", show(arg)))
}

// ------------------------------------------------------------------ oracle

const MAX_SAFE: i64 = (1 << 53) - 1;

/// An integer as the contract writes it: optional `-`, digits, no `+`, no
/// leading zeros, no `-0`, within i64.
fn spec_int(arg: &[u8]) -> Option<i64> {
    let digits = arg.strip_prefix(b"-").unwrap_or(arg);
    let well_formed = !digits.is_empty()
        && digits.iter().all(u8::is_ascii_digit)
        && (digits == b"0" || digits[0] != b'0')
        && arg != b"-0";
    if !well_formed {
        return None;
    }
    std::str::from_utf8(arg).ok()?.parse().ok()
}

fn in_range(arg: &[u8], lo: i64, hi: i64) -> bool {
    spec_int(arg).is_some_and(|v| (lo..=hi).contains(&v))
}

/// Whether the arguments after the name (arity already fine) are valid by
/// the contract, before any key is looked at.
fn args_valid(cmd: &str, args: &[Vec<u8>]) -> bool {
    match cmd {
        "RL.CHECK" | "RL.PEEK" => spec_check(cmd, args).is_ok(),
        "RL.THROTTLE" | "RL.THROTTLEPEEK" => spec_throttle(cmd, args).is_some(),
        c if is_lease(c) => spec_lease(cmd, args).is_some(),
        "RL.DAYHOUR" => {
            args[0] != args[1]
                && in_range(&args[2], 0, MAX_SAFE)
                && in_range(&args[3], 0, MAX_SAFE)
                && in_range(&args[4], 1, MAX_SAFE)
                && in_range(&args[5], 1, MAX_SAFE)
        }
        _ => {
            args[0] != args[1]
                && in_range(&args[2], 1, MAX_SAFE)
                && in_range(&args[3], 0, MAX_SAFE)
                && in_range(&args[4], 1, MAX_SAFE)
        }
    }
}

// ------------------------------------------------------------ lease oracle

/// A lease call's arguments as the SPEC reads them.
#[derive(Debug)]
struct LeaseCall {
    /// `None` for `*`.
    now: Option<i64>,
    limit: i64,
    ttl: i64,
    cost: i64,
    token: Option<Vec<u8>>,
    /// RL.RELEASE / RL.RENEW.
    tokens: Vec<Vec<u8>>,
}

/// 1 to 64 bytes, each printable ASCII other than space and `#`.
fn spec_token(arg: &[u8]) -> bool {
    (1..=64).contains(&arg.len()) && arg.iter().all(|&b| (0x21..=0x7e).contains(&b) && b != b'#')
}

/// The arguments after the name (arity already fine) of a lease command,
/// or `None` where the contract makes them an argument error. `*` is the
/// server's clock, which this process shares: `t + ttl` is checked
/// against it (a ttl within minutes of that edge never comes up).
fn spec_lease(cmd: &str, args: &[Vec<u8>]) -> Option<LeaseCall> {
    let rest = &args[1..];
    let (now_arg, rest) = rest.split_first()?;
    let now = if now_arg.as_slice() == b"*" {
        None
    } else {
        Some(spec_int(now_arg).filter(|v| (0..=MAX_SAFE).contains(v))?)
    };
    let t = now.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    });
    let ttl_of = |a: &[u8]| spec_int(a).filter(|&v| v >= 1 && v <= MAX_SAFE - t);
    let mut call = LeaseCall {
        now,
        limit: 0,
        ttl: 0,
        cost: 1,
        token: None,
        tokens: Vec::new(),
    };
    if per_token(cmd) {
        let mut rest = rest;
        if cmd == "RL.RENEW" {
            let (ttl, tail) = rest.split_first()?;
            call.ttl = ttl_of(ttl)?;
            rest = tail;
        }
        let mut seen = BTreeSet::new();
        for tok in rest {
            if !spec_token(tok) || !seen.insert(tok.clone()) {
                return None;
            }
        }
        if rest.is_empty() || rest.len() > 64 {
            return None;
        }
        call.tokens = rest.to_vec();
        return Some(call);
    }
    let (limit, mut rest) = rest.split_first()?;
    call.limit = spec_int(limit).filter(|&v| (1..=MAX_SAFE).contains(&v))?;
    if cmd == "RL.LEASE" {
        let (ttl, tail) = rest.split_first()?;
        call.ttl = ttl_of(ttl)?;
        rest = tail;
    }
    let mut cost: Option<&[u8]> = None;
    while let [name, tail @ ..] = rest {
        let value = tail.first()?;
        if name.eq_ignore_ascii_case(b"COST") && cost.is_none() {
            cost = Some(value);
        } else if name.eq_ignore_ascii_case(b"TOKEN") && call.token.is_none() && spec_token(value) {
            call.token = Some(value.clone());
        } else {
            return None;
        }
        rest = &tail[1..];
    }
    if let Some(c) = cost {
        let lo = i64::from(cmd == "RL.LEASE");
        call.cost = spec_int(c).filter(|&v| v >= lo && v <= call.limit.min(10_000))?;
    }
    Some(call)
}

/// RL.LEASE's seventh element: the token (the one given, or a name of 8
/// letters and digits) when admitted, nil when not; an admitted lease's
/// units are in the set, scored `t + ttl` for an explicit `now` (its first
/// unit `t + ttl - 0.5` when it has 2 or more: SPEC's half-ms marker).
fn check_lease_token(con: &mut Connection, args: &[Vec<u8>], v: &[i64], last: &Value, what: &str) {
    let call = spec_lease("RL.LEASE", args).expect("valid arguments");
    match (v[0], last) {
        (1, Value::Nil) => {}
        (0, Value::BulkString(tok)) => {
            match &call.token {
                Some(given) => assert_eq!(tok, given, "{what}: token"),
                None => assert!(
                    tok.len() == 8 && tok.iter().all(u8::is_ascii_alphanumeric),
                    "{what}: module-named token {:?}",
                    show(tok)
                ),
            }
            let score: Option<f64> = redis::cmd("ZSCORE")
                .arg(&args[0])
                .arg(tok)
                .query(con)
                .expect("ZSCORE");
            if let Some(t) = call.now {
                // SPEC's lease marker: a cost-2+ lease's first unit half a
                // ms early (the module and the library alike).
                let marked = call.cost >= 2;
                let want = (t + call.ttl) as f64 - if marked { 0.5 } else { 0.0 };
                // A lease of a few ms may be gone (expired) when read back.
                let gone = score.is_none() && server_ms(con) >= t + call.ttl;
                if !gone {
                    assert_eq!(score, Some(want), "{what}: unit score");
                }
            }
        }
        other => panic!("{what}: seventh element {other:?}"),
    }
}

// ----------------------------------------------------------- window oracle

/// The largest `COST` of RL.CHECK and RL.PEEK.
const MAX_CHECK_COST: i64 = 10_000;

/// An RL.CHECK / RL.PEEK call's arguments as the SPEC reads them.
#[derive(Debug, Clone)]
struct CheckCall {
    /// `None` for `*`.
    now: Option<i64>,
    /// `(count, window)` pairs.
    rules: Vec<(i64, i64)>,
    cost: i64,
    refund: bool,
    debit: bool,
    /// Where the options start among the arguments after the name.
    options_at: usize,
}

impl CheckCall {
    fn max_window(&self) -> i64 {
        self.rules.iter().map(|r| r.1).max().expect("a rule")
    }
}

/// The arguments after the name (arity already fine) of RL.CHECK or
/// RL.PEEK, or `Err` where the contract makes them an argument error: with
/// the exact reply where the first bad argument is a `REFUND` (given twice
/// to RL.CHECK, given at all to RL.PEEK).
fn spec_check(cmd: &str, args: &[Vec<u8>]) -> Result<CheckCall, Option<String>> {
    let now = match args[1].as_slice() {
        b"*" => None,
        a => Some(
            spec_int(a)
                .filter(|v| (0..=MAX_SAFE).contains(v))
                .ok_or(None)?,
        ),
    };
    let rest = &args[2..];
    // The options start at the first argument that begins with a letter.
    let split = rest
        .iter()
        .position(|a| a.first().is_some_and(u8::is_ascii_alphabetic))
        .unwrap_or(rest.len());
    let (rule_args, option_args) = rest.split_at(split);
    if rule_args.is_empty() || !rule_args.len().is_multiple_of(2) {
        return Err(None);
    }
    let mut rules = Vec::new();
    for pair in rule_args.chunks(2) {
        let n = |i: usize| {
            spec_int(&pair[i])
                .filter(|v| (1..=MAX_SAFE).contains(v))
                .ok_or(None)
        };
        rules.push((n(0)?, n(1)?));
    }
    if rules.len() > MAX_RULES {
        return Err(None);
    }
    let (mut cost, mut refund, mut debit) = (None, false, false);
    let mut options = option_args.iter();
    while let Some(name) = options.next() {
        let is = |word: &[u8]| name.eq_ignore_ascii_case(word);
        if is(b"COST") && cost.is_none() {
            cost = Some(options.next().ok_or(None)?);
        } else if (is(b"REFUND") || is(b"DEBIT")) && cmd == "RL.CHECK" {
            // Each once, and not both: the error names the second.
            let (this, other) = if is(b"REFUND") {
                (("REFUND", refund), ("DEBIT", debit))
            } else {
                (("DEBIT", debit), ("REFUND", refund))
            };
            if this.1 {
                return Err(Some(format!(
                    "ERR syntax error: option {} given twice",
                    this.0
                )));
            }
            if other.1 {
                return Err(Some(format!(
                    "ERR syntax error: option {} cannot be combined with {}",
                    this.0, other.0
                )));
            }
            refund |= is(b"REFUND");
            debit |= is(b"DEBIT");
        } else if is(b"REFUND") || is(b"DEBIT") {
            return Err(Some(format!(
                "ERR syntax error: unknown option '{}' (expected COST)",
                show(name)
            )));
        } else {
            return Err(None);
        }
    }
    let smallest = rules.iter().map(|r| r.0).min().expect("a rule");
    // RL.PEEK takes COST 0 (the state now); a refund or a debit any cost
    // to 10000.
    let lowest = i64::from(cmd == "RL.CHECK");
    let highest = if refund || debit {
        MAX_CHECK_COST
    } else {
        smallest.min(MAX_CHECK_COST)
    };
    let cost = match cost {
        None => 1,
        Some(c) => spec_int(c)
            .filter(|v| (lowest..=highest).contains(v))
            .ok_or(None)?,
    };
    Ok(CheckCall {
        now,
        rules,
        cost,
        refund,
        debit,
        options_at: 2 + split,
    })
}

/// A sorted set's members with their scores, lowest first (ties by name in
/// byte order, as Redis orders them).
type Members = Vec<(Vec<u8>, f64)>;

/// A key's sorted set, its `PEXPIRETIME` and the server clock, read in one
/// transaction (an empty set for a missing key), and the reply of an
/// RL.PEEK (`peek`: its arguments after the name) run in the same
/// transaction after them.
struct ZsetRead {
    members: Members,
    expiry: i64,
    clock: i64,
    peek: Option<Vec<i64>>,
}

fn read_zset(
    con: &mut Connection,
    key: &[u8],
    peek: Option<&[Vec<u8>]>,
) -> redis::RedisResult<ZsetRead> {
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .cmd("PEXPIRETIME")
        .arg(key)
        .cmd("TIME");
    if let Some(args) = peek {
        let mut parts = vec![b"RL.PEEK".to_vec()];
        parts.extend(args.iter().cloned());
        pipe.add_command(raw_cmd(&parts));
    }
    let values: Vec<Value> = pipe.query(con)?;
    let pairs: Vec<(Vec<u8>, String)> = redis::from_redis_value(&values[0])?;
    let members = pairs
        .into_iter()
        .map(|(m, s)| {
            let score = s.parse().unwrap_or_else(|_| panic!("score {s:?}"));
            (m, score)
        })
        .collect();
    let (secs, micros): (i64, i64) = redis::from_redis_value(&values[2])?;
    Ok(ZsetRead {
        members,
        expiry: redis::from_redis_value(&values[1])?,
        clock: secs * 1000 + micros / 1000,
        peek: match values.get(3) {
            Some(v) => Some(redis::from_redis_value(v)?),
            None => None,
        },
    })
}

/// The arguments of the RL.PEEK a refund's reply must equal: the refund's
/// own up to the options, then `COST 0` (the state now).
fn peek_of_refund(call: &CheckCall, args: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut peek = args[..call.options_at].to_vec();
    peek.extend([b"COST".to_vec(), b"0".to_vec()]);
    peek
}

/// Ms from `t` until a member scored `s` leaves a window of `w` ms, rounded
/// up.
fn leaves_after(s: f64, w: i64, t: i64) -> i64 {
    if s.fract() == 0.0 {
        s as i64 + w - t
    } else {
        (s + w as f64 - t as f64).ceil() as i64
    }
}

/// The contract's reply of RL.PEEK (and of RL.CHECK) for `call` at `t` ms
/// over a set holding `scores` (lowest first).
fn window_decide(call: &CheckCall, t: i64, scores: &[f64]) -> [i64; 6] {
    let used = |w: i64| scores.iter().filter(|&&s| s > (t - w) as f64).count() as i64;
    let cost = call.cost;
    let admitted = call.rules.iter().all(|&(count, w)| used(w) + cost <= count);
    let newest = scores.last().copied();
    // (index, remaining, retry_after, reset_after) of the binding rule.
    let mut binding: Option<(usize, i64, i64, i64)> = None;
    for (i, &(count, w)) in call.rules.iter().enumerate() {
        let u = used(w);
        if admitted {
            // The state the admission leaves: `cost` more members at `t`
            // (none for `COST 0`, the state now: a window with no member
            // resets at once).
            let remaining = count - u - cost;
            let reset = if cost == 0 {
                newest.map_or(0, |n| leaves_after(n, w, t).max(0))
            } else {
                leaves_after(newest.map_or(t as f64, |n| n.max(t as f64)), w, t)
            };
            let better =
                binding.is_none_or(|(_, r, _, s)| remaining < r || (remaining == r && reset > s));
            if better {
                binding = Some((i, remaining, -1, reset));
            }
        } else if u + cost > count {
            // The k-th oldest member inside the window.
            let k = u + cost - count;
            let s = scores[scores.len() - u as usize + k as usize - 1];
            let retry = leaves_after(s, w, t);
            let reset = leaves_after(newest.expect("a member"), w, t);
            if binding.is_none_or(|(_, _, r, _)| retry > r) {
                binding = Some((i, (count - u).max(0), retry, reset));
            }
        }
    }
    let (b, remaining, retry, reset) = binding.expect("a binding rule");
    [
        i64::from(!admitted),
        b as i64 + 1,
        call.rules[b].0,
        remaining,
        retry,
        reset,
    ]
}

/// An RL.CHECK / RL.PEEK call as it is about to run: its arguments and its
/// key's set.
struct CheckPlan {
    call: CheckCall,
    members: Members,
    /// `PEXPIRETIME` of the key: -1 without expiry, -2 without key.
    expiry: i64,
    /// The server clock just before the call, ms.
    clock: i64,
}

/// A successful RL.CHECK / RL.PEEK's reply is the contract's, for one of the
/// server times the call can have read; so is the set it leaves (`after`),
/// except after an admission (not modelled here). A refund removes the
/// `min(cost, used)` newest members (ties: the greatest names), keeps the
/// expiry (or the key is gone), and answers what RL.PEEK answers right
/// after it (`after.peek`, when run). Returns the members refunded.
fn check_window_model(
    cmd: &str,
    plan: &CheckPlan,
    v: &[i64],
    after: &ZsetRead,
    what: &str,
) -> usize {
    let call = &plan.call;
    let (lo, hi) = (plan.clock, after.clock);
    if hi - lo > 1000 {
        return 0; // too slow a machine to pin the clock down
    }
    let mut first = None;
    for c in lo..=hi {
        let t = call.now.unwrap_or(c);
        let (want, removed) = if call.refund {
            let used = plan
                .members
                .iter()
                .filter(|m| m.1 > (t - call.max_window()) as f64)
                .count();
            let n = used.min(call.cost as usize);
            let kept = plan.members[..plan.members.len() - n].to_vec();
            let expiry = if kept.is_empty() { -2 } else { plan.expiry };
            (Some((kept, expiry)), n)
        } else if call.debit || (cmd == "RL.CHECK" && v[0] == 0) {
            // New members' names: the set is not modelled.
            (None, 0)
        } else {
            (Some((plan.members.clone(), plan.expiry)), 0)
        };
        let mut scores: Vec<f64> = want
            .as_ref()
            .map_or(&plan.members, |w| &w.0)
            .iter()
            .map(|m| m.1)
            .collect();
        if call.debit {
            // `cost` members scored `t`, whatever the rules say (the trim
            // removes only members no rule counts).
            scores.extend(std::iter::repeat_n(t as f64, call.cost as usize));
            scores.sort_by(f64::total_cmp);
        }
        // A refund or a debit answers the state now: the peek with `COST 0`.
        let reply = if call.refund || call.debit {
            let now = CheckCall {
                cost: 0,
                ..call.clone()
            };
            window_decide(&now, t, &scores)
        } else {
            window_decide(call, t, &scores)
        };
        let state_ok = want
            .as_ref()
            .is_none_or(|(m, e)| *m == after.members && *e == after.expiry);
        if reply == v && state_ok {
            if let Some(p) = &after.peek {
                assert_eq!(
                    p, v,
                    "{what}: RL.PEEK right after the refund answers {p:?}, the refund {v:?}"
                );
            }
            return removed;
        }
        first.get_or_insert((c, reply, want));
    }
    let (c, reply, want) = first.expect("a clock");
    let shown = |m: &Members| {
        m.iter()
            .map(|(k, s)| format!("{}={s}", show(k)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let want = want.map_or("(not modelled)".to_string(), |(m, e)| {
        format!("members [{}], expiry {e}", shown(&m))
    });
    panic!(
        "{what}: the contract expects (clock {c}, of {lo}..={hi}) {reply:?}, {want}; got {v:?}, members [{}], expiry {} (before: members [{}], expiry {})",
        shown(&after.members),
        after.expiry,
        shown(&plan.members),
        plan.expiry
    );
}

// --------------------------------------------------------- throttle oracle

/// Nanoseconds per millisecond.
const NS: i128 = 1_000_000;

/// The largest tolerance, `(2^53-1) * 10^6` ns.
const MAX_TAU: i128 = MAX_SAFE as i128 * NS;

/// Most rules one call may give.
const MAX_RULES: usize = 64;

/// One `burst count window` triple.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    burst: i64,
    count: i64,
    window: i64,
}

impl Bucket {
    /// The emission interval `T`, ns.
    fn interval(&self) -> i128 {
        i128::from(self.window) * NS / i128::from(self.count)
    }

    /// The tolerance `tau`, ns.
    fn tau(&self) -> i128 {
        self.interval() * i128::from(self.burst)
    }

    /// The hash field holding the rule's TAT.
    fn field(&self) -> Vec<u8> {
        self.window.to_string().into_bytes()
    }
}

/// A throttle call's arguments as the SPEC reads them.
#[derive(Debug, Clone)]
struct ThrottleCall {
    /// `None` for `*`.
    now: Option<i64>,
    rules: Vec<Bucket>,
    cost: i64,
    refund: bool,
    debit: bool,
    /// `RESERVE`'s `max_wait` in ms.
    reserve: Option<i64>,
}

/// The arguments after the name (arity already fine) of RL.THROTTLE or
/// RL.THROTTLEPEEK, or `None` where the contract makes them an argument
/// error.
fn spec_throttle(cmd: &str, args: &[Vec<u8>]) -> Option<ThrottleCall> {
    let now = match args[1].as_slice() {
        b"*" => None,
        a => Some(spec_int(a).filter(|v| (0..=MAX_SAFE).contains(v))?),
    };
    let rest = &args[2..];
    // The options start at the first argument that begins with a letter.
    let split = rest
        .iter()
        .position(|a| a.first().is_some_and(u8::is_ascii_alphabetic))
        .unwrap_or(rest.len());
    let (rule_args, option_args) = rest.split_at(split);
    if rule_args.is_empty() || !rule_args.len().is_multiple_of(3) || rule_args.len() / 3 > MAX_RULES
    {
        return None;
    }
    let mut rules: Vec<Bucket> = Vec::new();
    for triple in rule_args.chunks(3) {
        let n = |i: usize| spec_int(&triple[i]).filter(|v| (1..=MAX_SAFE).contains(v));
        let rule = Bucket {
            burst: n(0)?,
            count: n(1)?,
            window: n(2)?,
        };
        if rule.interval() < 1
            || rule.tau() > MAX_TAU
            || rules.iter().any(|r| r.window == rule.window)
        {
            return None;
        }
        rules.push(rule);
    }
    let (mut cost, mut refund, mut debit, mut reserve) = (None, false, false, None);
    let mut options = option_args.iter();
    while let Some(name) = options.next() {
        let is = |word: &[u8]| name.eq_ignore_ascii_case(word);
        // At most one of REFUND, DEBIT, RESERVE (the peek: only RESERVE).
        let free = !refund && !debit && reserve.is_none();
        if is(b"COST") && cost.is_none() {
            cost = Some(options.next()?);
        } else if is(b"REFUND") && cmd == "RL.THROTTLE" && free {
            refund = true;
        } else if is(b"DEBIT") && cmd == "RL.THROTTLE" && free {
            debit = true;
        } else if is(b"RESERVE") && free {
            // `t + max_wait <= 2^53-1`; for `*` the wall clock stands for
            // the server's (the generator keeps away from the edge).
            let t = now.unwrap_or_else(wall_ms);
            reserve = Some(spec_int(options.next()?).filter(|w| (0..=MAX_SAFE - t).contains(w))?);
        } else {
            return None;
        }
    }
    let smallest = rules.iter().map(|r| r.burst).min()?;
    // RL.THROTTLEPEEK takes COST 0 (the state now); a refund or a debit
    // any cost.
    let lowest = i64::from(cmd == "RL.THROTTLE");
    let highest = if refund || debit { MAX_SAFE } else { smallest };
    let cost = match cost {
        None => 1,
        Some(c) => spec_int(c).filter(|v| (lowest..=highest).contains(v))?,
    };
    Some(ThrottleCall {
        now,
        rules,
        cost,
        refund,
        debit,
        reserve,
    })
}

/// This machine's clock in ms.
fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A stored TAT as the contract reads it: digits, no sign, no leading zero,
/// at most `2 * (2^53-1) * 10^6`.
fn spec_tat(v: &[u8]) -> Option<i128> {
    let well_formed = !v.is_empty()
        && v.len() <= 30
        && v.iter().all(u8::is_ascii_digit)
        && (v == b"0" || v[0] != b'0');
    if !well_formed {
        return None;
    }
    let n: i128 = std::str::from_utf8(v).ok()?.parse().ok()?;
    (n <= 2 * MAX_TAU).then_some(n)
}

/// `ns / 10^6` rounded up, for `ns >= 0`.
fn ceil_ms(ns: i128) -> i64 {
    i64::try_from((ns + NS - 1).div_euclid(NS)).expect("ms within i64")
}

/// The contract's GCRA for `call` at `t` ms over the stored TATs (`None`: a
/// full bucket): the reply, and each rule's new TAT when admitted.
fn gcra(call: &ThrottleCall, t: i64, tats: &[Option<i128>]) -> ([i64; 6], Option<Vec<i128>>) {
    let t_ns = i128::from(t) * NS;
    let cost = i128::from(call.cost);
    // With RESERVE: admitted when every unit is due by `t + max_wait`.
    let horizon = t_ns + i128::from(call.reserve.unwrap_or(0)) * NS;
    // Per rule: T, tau, base, new.
    let per: Vec<[i128; 4]> = call
        .rules
        .iter()
        .zip(tats)
        .map(|(r, tat)| {
            let base = tat.unwrap_or(t_ns).max(t_ns);
            [r.interval(), r.tau(), base, base + r.interval() * cost]
        })
        .collect();
    let admitted = per.iter().all(|&[_, tau, _, new]| new - tau <= horizon);
    // (index, remaining, retry_after, reset_after) of the binding rule.
    let mut binding: Option<(usize, i64, i64, i64)> = None;
    for (i, (&[interval, tau, base, new], rule)) in per.iter().zip(&call.rules).enumerate() {
        let left = if admitted { new } else { base };
        let remaining = (tau - (left - t_ns))
            .div_euclid(interval)
            .clamp(0, i128::from(rule.burst));
        let remaining = i64::try_from(remaining).expect("remaining within i64");
        let reset = ceil_ms(left - t_ns);
        if admitted {
            let better =
                binding.is_none_or(|(_, r, _, s)| remaining < r || (remaining == r && reset > s));
            if better {
                binding = Some((i, remaining, -1, reset));
            }
        } else if new - tau > horizon {
            let retry = ceil_ms(new - tau - horizon);
            if binding.is_none_or(|(_, _, r, _)| retry > r) {
                binding = Some((i, remaining, retry, reset));
            }
        }
    }
    let (mut b, mut remaining, mut retry, mut reset) = binding.expect("a binding rule");
    if admitted && call.reserve.is_some() {
        // The delay: until the latest rule's units are due (ties to the
        // lower index), which binds when above 0.
        let (latest, due) = per
            .iter()
            .enumerate()
            .map(|(i, &[_, tau, _, new])| (i, new - tau))
            .fold(None, |best: Option<(usize, i128)>, (i, d)| match best {
                Some((_, bd)) if bd >= d => best,
                _ => Some((i, d)),
            })
            .expect("a rule");
        retry = ceil_ms(due - t_ns).max(0);
        if retry > 0 {
            let [interval, tau, _, new] = per[latest];
            b = latest;
            let left = (tau - (new - t_ns))
                .div_euclid(interval)
                .clamp(0, i128::from(call.rules[b].burst));
            remaining = i64::try_from(left).expect("remaining within i64");
            reset = ceil_ms(new - t_ns);
        }
    }
    let reply = [
        i64::from(!admitted),
        b as i64 + 1,
        call.rules[b].burst,
        remaining,
        retry,
        reset,
    ];
    (reply, admitted.then(|| per.iter().map(|p| p[3]).collect()))
}

/// The TATs a refund at `t` ms leaves: each stored one back by `cost`
/// intervals, gone at `t_ns` or less.
fn refunded(call: &ThrottleCall, t: i64, tats: &[Option<i128>]) -> Vec<Option<i128>> {
    let t_ns = i128::from(t) * NS;
    call.rules
        .iter()
        .zip(tats)
        .map(|(r, tat)| {
            tat.map(|v| v - r.interval() * i128::from(call.cost))
                .filter(|&v| v > t_ns)
        })
        .collect()
}

type Fields = BTreeMap<Vec<u8>, Vec<u8>>;

/// A throttle call as it is about to run: its arguments and its key's hash.
struct ThrottlePlan {
    call: ThrottleCall,
    key: Vec<u8>,
    fields: Fields,
    /// `PEXPIRETIME` of the key: -1 without expiry, -2 without key.
    expiry: i64,
    /// The server clock just before the call, ms.
    clock: i64,
    /// The stored TAT of each rule (`None`: missing, or refused below).
    tats: Vec<Option<i128>>,
    /// Named fields whose stored value the contract refuses.
    bad: Vec<Vec<u8>>,
}

/// A key's hash fields, its `PEXPIRETIME` and the server clock, read in one
/// transaction (an empty hash for a missing key; an error for another type).
fn read_hash(con: &mut Connection, key: &[u8]) -> redis::RedisResult<(Fields, i64, i64)> {
    let (fields, expiry, (secs, micros)): (Fields, i64, (i64, i64)) = redis::pipe()
        .atomic()
        .cmd("HGETALL")
        .arg(key)
        .cmd("PEXPIRETIME")
        .arg(key)
        .cmd("TIME")
        .query(con)?;
    Ok((fields, expiry, secs * 1000 + micros / 1000))
}

/// The reply, the fields and the `PEXPIRETIME` the contract expects of a
/// successful `cmd` per `plan` that read the server clock `clock`.
fn throttle_expect(cmd: &str, plan: &ThrottlePlan, clock: i64) -> ([i64; 6], Fields, i64) {
    let call = &plan.call;
    let t = call.now.unwrap_or(clock);
    let mut fields = plan.fields.clone();
    let set = |fields: &mut Fields, r: &Bucket, tat: Option<i128>| match tat {
        Some(v) => fields.insert(r.field(), v.to_string().into_bytes()),
        None => fields.remove(&r.field()),
    };
    if call.refund {
        let after = refunded(call, t, &plan.tats);
        for ((r, before), tat) in call.rules.iter().zip(&plan.tats).zip(&after) {
            if before.is_some() {
                set(&mut fields, r, *tat);
            }
        }
        let expiry = if fields.is_empty() { -2 } else { plan.expiry };
        // Its reply is the state now: the peek with `COST 0`.
        let now = ThrottleCall {
            cost: 0,
            ..call.clone()
        };
        return (gcra(&now, t, &after).0, fields, expiry);
    }
    // A debit: every TAT moves by `cost` intervals from at least now,
    // whatever the rules say, up to the storable range; the reply is the
    // state now (the peek with `COST 0`).
    let (reply, new) = if call.debit {
        let t_ns = i128::from(t) * NS;
        let new: Vec<i128> = call
            .rules
            .iter()
            .zip(&plan.tats)
            .map(|(r, tat)| {
                let base = tat.unwrap_or(t_ns).max(t_ns);
                (base + r.interval() * i128::from(call.cost)).min(2 * MAX_TAU)
            })
            .collect();
        let now = ThrottleCall {
            cost: 0,
            debit: false,
            ..call.clone()
        };
        let after: Vec<Option<i128>> = new.iter().copied().map(Some).collect();
        (gcra(&now, t, &after).0, Some(new))
    } else {
        gcra(call, t, &plan.tats)
    };
    match new {
        Some(new) if cmd == "RL.THROTTLE" => {
            for (r, tat) in call.rules.iter().zip(&new) {
                set(&mut fields, r, Some(*tat));
            }
            let latest = new.iter().copied().max().expect("a rule");
            let x = ceil_ms(latest) + (clock - t).max(0);
            // Kept when already at or after X, else X on the key's grid of
            // step W / 8, W the deepest bucket in ms.
            let deepest = call.rules.iter().map(Bucket::tau).max().expect("a rule");
            let w = i64::try_from((deepest + NS - 1) / NS).expect("depth within i64");
            let expiry = if plan.expiry >= 0 && plan.expiry >= x {
                plan.expiry
            } else {
                grid_at(&plan.key, w, x)
            };
            (reply, fields, expiry)
        }
        _ => (reply, fields, plan.expiry),
    }
}

/// A successful throttle call's reply, and its key's hash and expiry right
/// after it (`after`), are what the contract expects for one of the server
/// times the call can have read.
fn check_throttle_model(
    cmd: &str,
    plan: &ThrottlePlan,
    v: &[i64],
    after: &(Fields, i64, i64),
    what: &str,
) {
    let (fields, expiry, clock) = after;
    let (lo, hi) = (plan.clock, *clock);
    if hi - lo > 1000 {
        return; // too slow a machine to pin the clock down
    }
    let mut first = None;
    for c in lo..=hi {
        let (reply, want_fields, want_expiry) = throttle_expect(cmd, plan, c);
        // The key may have expired by the time it was read back.
        let expired =
            *expiry == -2 && fields.is_empty() && want_expiry >= 0 && want_expiry <= hi + 1;
        if same_reply(&reply, v) && (expired || (fields == &want_fields && *expiry == want_expiry))
        {
            return;
        }
        first.get_or_insert((c, reply, want_fields, want_expiry));
    }
    let (c, reply, want_fields, want_expiry) = first.expect("a clock");
    let shown = |f: &Fields| {
        f.iter()
            .map(|(k, v)| format!("{}={}", show(k), show(v)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    panic!(
        "{what}: the contract expects (clock {c}, of {lo}..={hi}) {reply:?}, fields [{}], expiry {want_expiry}; got {v:?}, fields [{}], expiry {expiry} (before: fields [{}], expiry {})",
        shown(&want_fields),
        shown(fields),
        shown(&plan.fields),
        plan.expiry
    );
}

/// What a call is about to see, for a model of its reply and writes.
enum Plan {
    Throttle(ThrottlePlan),
    Check(CheckPlan),
}

/// What the contract says a call with arity-valid arguments answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// An argument error (`ERR`).
    ArgError,
    WrongType,
    /// An error in a stored value (`ERR`).
    StoredError,
    Success,
}

fn key_type(con: &mut Connection, key: &[u8]) -> String {
    redis::cmd("TYPE").arg(key).query(con).expect("TYPE")
}

/// The expected outcome, and the latest expiry time among the keys it
/// depends on (-1 when none expires): a key of the wrong type that expires
/// before the call runs changes the outcome. For the commands with rules,
/// also what the call is about to see (for the models); then any expiry of
/// the key counts, as its value is the state the model starts from.
fn expect(con: &mut Connection, cmd: &str, args: &[Vec<u8>]) -> (Expect, i64, Option<Plan>) {
    if is_throttle(cmd) {
        let (e, expires, plan) = expect_throttle(con, cmd, args);
        return (e, expires, plan.map(Plan::Throttle));
    }
    if !args_valid(cmd, args) {
        return (Expect::ArgError, -1, None);
    }
    // The keys whose type matters, the type they need, and the fixture
    // holding a value the command must refuse.
    let (typed, want, bad): (&[Vec<u8>], &str, &[u8]) = match cmd {
        "RL.CHECK" | "RL.PEEK" => (&args[..1], "zset", b"fz:zinf"),
        "RL.DAYHOUR" => (&args[..2], "string", b"fz:abc"),
        c if is_lease(c) => (&args[..1], "zset", b"fz:zinf"),
        // The lock key may be of any type.
        _ => (&args[1..2], "string", b"fz:abc"),
    };
    let mut stored_error = false;
    let mut wrong_type = false;
    let mut expires = -1;
    for k in typed {
        let t = key_type(con, k);
        if t != "none" && t != want {
            wrong_type = true;
            expires = expires.max(expiry_of(con, k));
        }
        stored_error |= k.as_slice() == bad;
    }
    // RL.RELEASE reads only its leases' scores: of the fixture's members
    // (`a` at inf, `b` at 1) only a lease named `a` holds a bad one.
    if cmd == "RL.RELEASE" && stored_error {
        stored_error = args[2..].iter().any(|t| t.as_slice() == b"a");
    }
    let e = if wrong_type {
        Expect::WrongType
    } else if stored_error {
        Expect::StoredError
    } else {
        Expect::Success
    };
    if e == Expect::Success && is_window(cmd) {
        let call = spec_check(cmd, args).expect("valid arguments");
        let z = read_zset(con, &args[0], None).expect("ZRANGE PEXPIRETIME TIME");
        let plan = CheckPlan {
            call,
            members: z.members,
            expiry: z.expiry,
            clock: z.clock,
        };
        return (e, plan.expiry.max(-1), Some(Plan::Check(plan)));
    }
    (e, expires, None)
}

/// [`expect`] for RL.THROTTLE and RL.THROTTLEPEEK: any type but a hash is
/// `WRONGTYPE`; a named field holding what the contract refuses is an error
/// in a stored value. Any expiry of the key counts: its hash is the state the
/// model starts from.
fn expect_throttle(
    con: &mut Connection,
    cmd: &str,
    args: &[Vec<u8>],
) -> (Expect, i64, Option<ThrottlePlan>) {
    let Some(call) = spec_throttle(cmd, args) else {
        return (Expect::ArgError, -1, None);
    };
    let key = &args[0];
    let t = key_type(con, key);
    if t != "none" && t != "hash" {
        return (Expect::WrongType, expiry_of(con, key), None);
    }
    let (fields, expiry, clock) = read_hash(con, key).expect("HGETALL PEXPIRETIME TIME");
    let mut tats = Vec::new();
    let mut bad = Vec::new();
    for r in &call.rules {
        let tat = fields.get(&r.field()).and_then(|v| {
            let tat = spec_tat(v);
            if tat.is_none() {
                bad.push(r.field());
            }
            tat
        });
        tats.push(tat);
    }
    let e = if bad.is_empty() {
        Expect::Success
    } else {
        Expect::StoredError
    };
    let plan = ThrottlePlan {
        call,
        key: key.clone(),
        fields,
        expiry,
        clock,
        tats,
        bad,
    };
    (e, expiry.max(-1), Some(plan))
}

/// A key's expiry time as [`expect`] reports it: 0 (long past) when the key
/// is already gone, as it may be after `TYPE` saw it.
fn expiry_of(con: &mut Connection, key: &[u8]) -> i64 {
    match pexpiretime_bytes(con, key) {
        -2 => 0,
        at => at,
    }
}

fn pexpiretime_bytes(con: &mut Connection, key: &[u8]) -> i64 {
    redis::cmd("PEXPIRETIME")
        .arg(key)
        .query(con)
        .expect("PEXPIRETIME")
}

#[derive(Default, Debug, PartialEq, Eq)]
struct Tally {
    calls: u64,
    admitted: u64,
    rejected: u64,
    errors: u64,
    refunds: u64,
    debits: u64,
    /// RL.RELEASE / RL.RENEW: units released or renewed, tokens lost.
    units: u64,
    lost: u64,
}

/// Runs `calls` random calls, a share `structured` of them mutated from valid
/// argument lists. With `all_outcomes`, every command must have met every
/// kind of outcome (the structured run reaches them all).
fn fuzz(calls: usize, structured: f64, all_outcomes: bool) {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut server = Server::start();
    let mut con = server.con();
    reset_keyspace(&mut con);
    let fixtures: HashMap<&[u8], Vec<u8>> = FIXTURES
        .iter()
        .map(|k| {
            let d: Vec<u8> = redis::cmd("DUMP").arg(*k).query(&mut con).unwrap();
            (*k, d)
        })
        .collect();
    let mut hash_expiry = pexpiretime_bytes(&mut con, HASH_FIXTURE);
    let allowed: BTreeSet<Vec<u8>> = KEYS
        .iter()
        .chain(THROTTLE_KEYS)
        .map(|k| k.to_vec())
        .collect();
    let t0 = server_ms(&mut con);
    let mut tallies: HashMap<&str, Tally> = HashMap::new();
    let mut outcomes: HashMap<(&str, String), u32> = HashMap::new();
    // The arguments of the last admitted RL.THROTTLE and RL.CHECK, for a
    // refund of it.
    let mut last_admitted: HashMap<&str, Vec<Vec<u8>>> = HashMap::new();
    // RL.CHECK refunds that removed members, and the members they removed.
    let (mut check_refunds_removing, mut check_refunded) = (0u64, 0usize);

    for i in 0..calls {
        if i % 250 == 249 {
            for (k, d) in &fixtures {
                let now: Vec<u8> = redis::cmd("DUMP").arg(*k).query(&mut con).unwrap();
                assert_eq!(&now, d, "seed {seed}: fixture {:?} changed", show(k));
            }
            assert_hash_fixture(&mut con, hash_expiry, &format!("seed {seed} call {i}"));
            reset_keyspace(&mut con);
            hash_expiry = pexpiretime_bytes(&mut con, HASH_FIXTURE);
        }
        let cmd = COMMANDS[rng.gen_range(0..COMMANDS.len())];
        let refund_last = match cmd {
            "RL.THROTTLE" => rng.gen_bool(structured * 0.3),
            "RL.CHECK" => rng.gen_bool(structured * 0.15),
            _ => false,
        };
        let last = refund_last.then(|| last_admitted.remove(cmd)).flatten();
        let args = if let Some(mut a) = last {
            // As the SPEC says a service gives units back: the same
            // arguments plus REFUND.
            a.push(random_case(&mut rng, "REFUND"));
            a
        } else if rng.gen_bool(structured) {
            let mut a = valid_args(&mut rng, cmd, t0);
            mutate(&mut rng, cmd, &mut a, t0);
            // Key positions stay within the known set.
            for slot in a.iter_mut().take(key_slots(cmd)) {
                if !allowed.contains(slot) {
                    *slot = key(&mut rng);
                }
            }
            a
        } else {
            random_args(&mut rng, cmd, t0)
        };
        let name = if rng.gen_bool(0.2) {
            cmd.to_lowercase()
        } else {
            cmd.to_string()
        };
        let what = format!("seed {seed} call {i}: {name} {}", brief(&args));

        let arity_fits = arity_ok(cmd, args.len());
        let prediction = arity_fits.then(|| expect(&mut con, cmd, &args));
        let before = snapshot(&mut con);
        let mut parts: Vec<&[u8]> = vec![name.as_bytes()];
        parts.extend(args.iter().map(Vec::as_slice));
        let result = raw_cmd(&parts).query::<Value>(&mut con);
        // A throttle call's key read back at once, for the model.
        let hash_after = if is_throttle(cmd) && result.is_ok() {
            read_hash(&mut con, &args[0]).ok()
        } else {
            None
        };
        // An RL.CHECK / RL.PEEK call's key read back at once, for the model;
        // after a refund at an explicit `now`, with the RL.PEEK whose reply
        // the refund's must equal.
        let call = (is_window(cmd) && arity_fits)
            .then(|| spec_check(cmd, &args).ok())
            .flatten();
        let zset_after = match (&call, &result) {
            (Some(call), Ok(_)) => {
                let peek = ((call.refund || call.debit) && call.now.is_some())
                    .then(|| peek_of_refund(call, &args));
                let z = read_zset(&mut con, &args[0], peek.as_deref())
                    .unwrap_or_else(|e| panic!("{what}: reading the set back: {e}"));
                if let Some(p) = &z.peek {
                    let peeks = tallies.entry("RL.PEEK").or_default();
                    peeks.calls += 1;
                    if p[0] == 1 {
                        peeks.rejected += 1;
                    } else {
                        peeks.admitted += 1;
                    }
                }
                Some(z)
            }
            _ => None,
        };
        let after = snapshot(&mut con);
        let now_ms = server_ms(&mut con);
        // No prediction when a key it rests on may have expired meanwhile.
        let (expected, plan) = match prediction {
            Some((_, expires, _)) if expires != -1 && expires <= now_ms + 1 => (None, None),
            Some((e, _, plan)) => (Some(e), plan),
            None => (None, None),
        };
        if let Some(e) = expected {
            *outcomes.entry((cmd, format!("{e:?}"))).or_insert(0u32) += 1;
        }

        for k in after.keys() {
            assert!(allowed.contains(k), "{what}: unexpected key {:?}", show(k));
        }
        let tally = tallies.entry(cmd).or_default();
        match result {
            Ok(Value::Array(mut items)) => {
                assert!(arity_fits, "{what}: accepted a wrong arity");
                let lease_last = (cmd == "RL.LEASE").then(|| {
                    assert_eq!(items.len(), 7, "{what}: {items:?}");
                    items.pop().expect("seven elements")
                });
                if let Some(e) = expected {
                    assert_eq!(e, Expect::Success, "{what}: succeeded");
                }
                let v: Vec<i64> = items
                    .iter()
                    .map(|x| match x {
                        Value::Int(n) => *n,
                        other => panic!("{what}: non-integer element {other:?}"),
                    })
                    .collect();
                check_reply(cmd, &args, &v, &what);
                if let Some(last) = &lease_last {
                    check_lease_token(&mut con, &args, &v, last, &what);
                }
                tally.calls += 1;
                if per_token(cmd) {
                    // Only its own key may change.
                    tally.units += v.iter().sum::<i64>() as u64;
                    if cmd == "RL.RENEW" {
                        tally.lost += v.iter().filter(|&&n| n == 0).count() as u64;
                    }
                    let key = args[0].as_slice();
                    assert_unchanged_except(&before, &after, now_ms, &[key], &what);
                    if i % 500 == 0 {
                        server.assert_alive();
                    }
                    continue;
                }
                let limited = match cmd {
                    // Refused iff an element exceeds its limit.
                    "RL.DAYHOUR" => v[0] > parse(&args[2]) || v[1] > parse(&args[3]),
                    _ => v[0] == 1,
                };
                // A refund counts as a call and a refund only; a debit as a
                // call and a debit.
                let (refund, debit) = match cmd {
                    "RL.THROTTLE" => {
                        spec_throttle(cmd, &args).map_or((false, false), |c| (c.refund, c.debit))
                    }
                    "RL.CHECK" => call
                        .as_ref()
                        .map_or((false, false), |c| (c.refund, c.debit)),
                    _ => (false, false),
                };
                if matches!(cmd, "RL.THROTTLE" | "RL.CHECK") && !refund && !debit && !limited {
                    last_admitted.insert(cmd, args.clone());
                }
                if refund {
                    tally.refunds += 1;
                } else if debit {
                    tally.debits += 1;
                } else if limited {
                    tally.rejected += 1;
                } else {
                    tally.admitted += 1;
                }
                // A lock key that was there may have expired just before the
                // call (it may be a throttle hash living a few ms): the call
                // then tripped the lock if it wrote a new one.
                let lock = args[0].as_slice();
                let trips = match before.get(lock) {
                    None => true,
                    Some(b) => {
                        b.pexpiretime != -1
                            && b.pexpiretime <= now_ms + 1
                            && after.get(lock).is_some_and(|a| {
                                (&a.dump, a.pexpiretime) != (&b.dump, b.pexpiretime)
                            })
                    }
                };
                if cmd == "RL.LOCKCOUNT" && limited && trips {
                    // The call that trips the lock: sets the lock, deletes
                    // the counter, touches nothing else.
                    let count = args[1].as_slice();
                    assert!(after.contains_key(lock), "{what}: no lock set");
                    assert!(!after.contains_key(count), "{what}: counter kept");
                    assert_eq!(v[2], parse(&args[4]), "{what}: lock ttl");
                    assert_unchanged_except(&before, &after, now_ms, &[lock, count], &what);
                } else if is_throttle(cmd) {
                    // Only an admission, a refund or a debit writes, and
                    // only its key.
                    if cmd == "RL.THROTTLE" && (refund || debit || !limited) {
                        let key = args[0].as_slice();
                        assert_unchanged_except(&before, &after, now_ms, &[key], &what);
                    } else {
                        assert_unchanged_but_expired(&before, &after, now_ms, &what);
                    }
                    if let (Some(Plan::Throttle(plan)), Some(hash)) = (&plan, &hash_after) {
                        check_throttle_model(cmd, plan, &v, hash, &what);
                    }
                } else if is_window(cmd) {
                    // Only an admission, a refund or a debit writes, and
                    // only its key.
                    if cmd == "RL.CHECK" && (refund || debit || !limited) {
                        let key = args[0].as_slice();
                        assert_unchanged_except(&before, &after, now_ms, &[key], &what);
                    } else {
                        assert_unchanged_but_expired(&before, &after, now_ms, &what);
                    }
                    if let (Some(Plan::Check(plan)), Some(z)) = (&plan, &zset_after) {
                        let n = check_window_model(cmd, plan, &v, z, &what);
                        if n > 0 {
                            check_refunds_removing += 1;
                            check_refunded += n;
                        }
                    }
                } else if is_lease(cmd) {
                    // Only an admitted RL.LEASE writes, and only its key.
                    if cmd == "RL.LEASE" && !limited {
                        let key = args[0].as_slice();
                        assert_unchanged_except(&before, &after, now_ms, &[key], &what);
                    } else {
                        assert_unchanged_but_expired(&before, &after, now_ms, &what);
                    }
                } else if limited {
                    assert_unchanged_but_expired(&before, &after, now_ms, &what);
                }
            }
            Ok(other) => panic!("{what}: unexpected reply {other:?}"),
            Err(e) => {
                let text = error_text(&e);
                assert!(
                    e.code() == Some("ERR") || e.code() == Some("WRONGTYPE"),
                    "{what}: unexpected error {text:?} ({e})"
                );
                let arity_msg = text.starts_with("ERR wrong number of arguments");
                assert_eq!(arity_msg, !arity_fits, "{what}: {text:?}");
                match expected {
                    None => {}
                    Some(Expect::WrongType) => assert!(
                        text.starts_with("WRONGTYPE "),
                        "{what}: expected WRONGTYPE, got {text:?}"
                    ),
                    Some(Expect::ArgError | Expect::StoredError) => assert!(
                        text.starts_with("ERR ") && !arity_msg,
                        "{what}: expected {expected:?}, got {text:?}"
                    ),
                    Some(Expect::Success) => panic!("{what}: expected success, got {text:?}"),
                }
                // An error in a stored hash field names the key and a field.
                if let (Some(Expect::StoredError), Some(Plan::Throttle(plan))) = (expected, &plan) {
                    let key = &args[0];
                    if key.iter().all(u8::is_ascii_graphic) {
                        assert!(
                            text.contains(&*show(key)),
                            "{what}: key not named: {text:?}"
                        );
                    }
                    assert!(
                        plan.bad.iter().any(|f| text.contains(&*show(f))),
                        "{what}: no bad field of {:?} named: {text:?}",
                        plan.bad.iter().map(|f| show(f)).collect::<Vec<_>>()
                    );
                }
                // A `REFUND` given twice to RL.CHECK, or at all to RL.PEEK.
                if expected == Some(Expect::ArgError) && is_window(cmd) {
                    if let Err(Some(want)) = spec_check(cmd, &args) {
                        assert_eq!(text, want, "{what}");
                    }
                }
                if !arity_msg {
                    tally.calls += 1;
                    tally.errors += 1;
                    assert!(text.len() > 4, "{what}: empty error message");
                }
                assert!(
                    !text.contains(['\r', '\n', '\0']),
                    "{what}: error is not one line: {text:?}"
                );
                assert_unchanged_but_expired(&before, &after, now_ms, &what);
            }
        }
        if i % 500 == 0 {
            server.assert_alive();
        }
    }

    server.assert_alive();
    let pong: String = redis::cmd("PING").query(&mut con).expect("PING");
    assert_eq!(pong, "PONG", "seed {seed}");
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    for k in &keys {
        assert!(
            allowed.contains(k),
            "seed {seed}: unexpected key {:?}",
            show(k)
        );
    }
    for (k, d) in &fixtures {
        let now: Vec<u8> = redis::cmd("DUMP").arg(*k).query(&mut con).unwrap();
        assert_eq!(&now, d, "seed {seed}: fixture {:?} changed", show(k));
    }
    assert_hash_fixture(&mut con, hash_expiry, &format!("seed {seed}"));
    // Every command met every kind of outcome the oracle knows.
    let kinds: &[Expect] = if all_outcomes {
        &[
            Expect::ArgError,
            Expect::WrongType,
            Expect::StoredError,
            Expect::Success,
        ]
    } else {
        &[Expect::ArgError, Expect::Success]
    };
    for cmd in COMMANDS {
        for &e in kinds {
            let n = outcomes
                .get(&(*cmd, format!("{e:?}")))
                .copied()
                .unwrap_or(0);
            assert!(
                n > 0,
                "seed {seed}: no {cmd} call expected {e:?}: {outcomes:?}"
            );
        }
    }
    // The INFO counters saw exactly the calls that reached the module.
    if functions_backend() {
        return; // INFO ratelimit: not covered by the library
    }
    let info: String = redis::cmd("INFO")
        .arg("ratelimit")
        .query(&mut con)
        .expect("INFO ratelimit");
    let stats = info_map(&info);
    check_per_token_counters(&stats, &mut tallies, seed);
    let field = |name: String| -> u64 {
        let v = stats
            .get(&name)
            .unwrap_or_else(|| panic!("seed {seed}: no {name} in INFO"));
        v.parse()
            .unwrap_or_else(|_| panic!("seed {seed}: INFO {name} is not a number: {v}"))
    };
    for (cmd, prefix, refunds) in [
        ("RL.CHECK", "check", true),
        ("RL.PEEK", "peek", false),
        ("RL.DAYHOUR", "dayhour", false),
        ("RL.LOCKCOUNT", "lockcount", false),
        ("RL.THROTTLE", "throttle", true),
        ("RL.THROTTLEPEEK", "throttlepeek", false),
        ("RL.LEASE", "lease", false),
        ("RL.LEASEPEEK", "leasepeek", false),
    ] {
        let want = tallies.remove(cmd).unwrap_or_default();
        let got = Tally {
            calls: field(format!("ratelimit_{prefix}_calls")),
            admitted: field(format!("ratelimit_{prefix}_admitted")),
            rejected: field(format!("ratelimit_{prefix}_rejected")),
            errors: field(format!("ratelimit_{prefix}_errors")),
            refunds: if refunds {
                field(format!("ratelimit_{prefix}_refunds"))
            } else {
                0
            },
            debits: if refunds {
                field(format!("ratelimit_{prefix}_debits"))
            } else {
                0
            },
            ..Tally::default()
        };
        eprintln!("{cmd}: {want:?}");
        if cmd == "RL.CHECK" {
            eprintln!(
                "RL.CHECK refunds that removed members: {check_refunds_removing} ({check_refunded} members)"
            );
        }
        assert_eq!(got, want, "seed {seed}: INFO counters of {cmd}");
        assert!(
            want.errors > 0 && want.admitted + want.rejected > 0,
            "seed {seed}: {cmd} was not exercised both ways: {want:?}"
        );
        if all_outcomes && is_throttle(cmd) {
            assert!(
                want.admitted > 0 && want.rejected > 0,
                "seed {seed}: {cmd} was not exercised every way: {want:?}"
            );
            if cmd == "RL.THROTTLE" {
                assert!(want.refunds > 0, "seed {seed}: no refund: {want:?}");
                assert!(want.debits > 0, "seed {seed}: no debit: {want:?}");
            }
        }
        if all_outcomes && cmd == "RL.CHECK" {
            assert!(
                want.refunds > 0 && check_refunds_removing > 0,
                "seed {seed}: no RL.CHECK refund removed a member: {want:?}"
            );
        }
    }
}

/// The INFO counters of RL.RELEASE and RL.RENEW against the calls made.
fn check_per_token_counters(
    stats: &HashMap<String, String>,
    tallies: &mut HashMap<&str, Tally>,
    seed: u64,
) {
    let field = |name: &str| -> u64 {
        stats
            .get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("seed {seed}: no number {name} in INFO"))
    };
    for (cmd, prefix, units, lost) in [
        ("RL.RELEASE", "release", "released_units", None),
        ("RL.RENEW", "renew", "renewed_units", Some("renew_lost")),
    ] {
        let want = tallies.remove(cmd).unwrap_or_default();
        let got = Tally {
            calls: field(&format!("ratelimit_{prefix}_calls")),
            errors: field(&format!("ratelimit_{prefix}_errors")),
            units: field(&format!("ratelimit_{units}")),
            lost: lost.map_or(0, |l| field(&format!("ratelimit_{l}"))),
            ..Tally::default()
        };
        eprintln!("{cmd}: {want:?}");
        assert_eq!(got, want, "seed {seed}: INFO counters of {cmd}");
        assert!(
            want.errors > 0 && want.calls > want.errors,
            "seed {seed}: {cmd} was not exercised both ways: {want:?}"
        );
    }
}

#[test]
fn fuzz_random_argument_lists() {
    // About 500 calls per command (ten commands).
    fuzz(5000, 0.1, false);
}

#[test]
fn fuzz_mutated_valid_argument_lists() {
    // About 650 calls per command: each meets every outcome the oracle
    // knows, the rarest (a stored-value error) a few dozen times.
    fuzz(6500, 0.9, true);
}

/// Keys an RL.ALL fuzz call draws from, and the fixtures one call in six
/// also names: a list, a set with an infinite score, a string, the hash
/// with its boundary TATs.
const ALL_KEYS: &[&[u8]] = &[b"fz:a", b"fz:b", b"fz:c", b"fz:t1", b"fz:t2"];
const ALL_FIXTURES: &[&[u8]] = &[b"fz:list", b"fz:zinf", b"fz:abc", b"fz:hash"];

/// One random clause on key index `i` (1-based), valid for RL.ALL most of
/// the time (costs 0 and missing tokens only for the peek).
fn all_clause(rng: &mut StdRng, key: &[u8], i: usize, peek: bool) -> Vec<Vec<u8>> {
    let mut out: Vec<String> = Vec::new();
    // Mostly the kind the key was made for, so that most calls reach a
    // decision; now and then another (a WRONGTYPE, or a zset shared).
    let usual = match key {
        b"fz:a" => Some("CHECK"),
        b"fz:b" => Some("LEASE"),
        b"fz:t1" => Some("THROTTLE"),
        b"fz:t2" => Some("QUOTA"),
        _ => None,
    };
    let kind = match usual {
        Some(k) if rng.gen_bool(0.9) => k,
        _ => ["CHECK", "THROTTLE", "QUOTA", "LEASE"][rng.gen_range(0..4)],
    };
    out.push(String::from_utf8(random_case(rng, kind)).unwrap_or_default());
    out.push(i.to_string());
    let max_cost = match kind {
        "CHECK" => {
            for _ in 0..rng.gen_range(1..=3) {
                out.push(rng.gen_range(1..=5).to_string());
                out.push((1000 * rng.gen_range(1..=5)).to_string());
            }
            1
        }
        "THROTTLE" => {
            for w in 1..=rng.gen_range(1..=2) {
                out.push(rng.gen_range(1..=5).to_string());
                out.push(rng.gen_range(1..=5).to_string());
                out.push((1000 * w).to_string());
            }
            1
        }
        "QUOTA" => {
            out.push(["UTC", "Europe/Paris", "Asia/Kolkata"][rng.gen_range(0..3)].into());
            for (p, l) in [("MINUTE", 3), ("hour", 10), ("Day", 40)] {
                if rng.gen_bool(0.5) || out.len() == 3 {
                    out.push(p.into());
                    out.push(rng.gen_range(1..=l).to_string());
                }
            }
            3
        }
        _ => {
            out.push(rng.gen_range(1..=4).to_string());
            out.push(rng.gen_range(100..=5000).to_string());
            if !peek || rng.gen_bool(0.7) {
                out.push("TOKEN".into());
                out.push(LEASE_TOKENS[rng.gen_range(0..LEASE_TOKENS.len())].into());
            }
            1
        }
    };
    if rng.gen_bool(0.4) {
        out.push("COST".into());
        let lo = i64::from(!peek);
        out.push(rng.gen_range(lo..=max_cost).to_string());
    }
    out.into_iter().map(String::into_bytes).collect()
}

/// The keys an RL.ALL argument list names (after the name), when its
/// `numkeys` is a count the module accepts.
fn all_named_keys(args: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let n = args
        .first()
        .and_then(|a| std::str::from_utf8(a).ok())
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|n| (1..=64).contains(n))
        .unwrap_or(0);
    args.iter().skip(1).take(n).cloned().collect()
}

/// RL.ALL and RL.ALLPEEK: random clause sets over known keys (wrong types
/// and bad stored values among them), half of them mutated (a word
/// replaced, inserted, removed or repeated). Every reply is seven integers
/// or an `ERR`/`WRONGTYPE` error; an error, a refusal and every peek leave
/// the keyspace unchanged; a call that writes writes only the keys it
/// names; with an explicit `now`, RL.ALLPEEK answers what RL.ALL then does;
/// the INFO counters match the calls.
#[test]
fn fuzz_all_clauses() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let s = Server::start();
    let mut con = s.con();
    reset_keyspace(&mut con);
    let t0 = server_ms(&mut con);
    // [calls, admitted, rejected, errors, refunds] of RL.ALL, then RL.ALLPEEK.
    let mut want = [[0u64; 5]; 2];
    let mut agreed = 0;
    for step in 0..2500 {
        if step % 500 == 499 {
            reset_keyspace(&mut con);
        }
        let peek = rng.gen_bool(0.3);
        let cmd = if peek { "RL.ALLPEEK" } else { "RL.ALL" };
        let n = rng.gen_range(1..=4);
        let mut pool: Vec<&[u8]> = ALL_KEYS.to_vec();
        let mut args: Vec<Vec<u8>> = vec![n.to_string().into_bytes()];
        for _ in 0..n {
            let k = pool.remove(rng.gen_range(0..pool.len()));
            args.push(k.to_vec());
        }
        if rng.gen_bool(1.0 / 6.0) {
            let i = rng.gen_range(1..=n);
            args[i] = ALL_FIXTURES[rng.gen_range(0..ALL_FIXTURES.len())].to_vec();
        }
        let explicit = rng.gen_bool(0.6);
        args.push(if explicit {
            (t0 + step * 7).to_string().into_bytes()
        } else {
            b"*".to_vec()
        });
        let mut order: Vec<usize> = (1..=n).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.gen_range(0..=i));
        }
        for i in order {
            let key = args[i].clone();
            args.extend(all_clause(&mut rng, &key, i, peek));
        }
        if !peek && rng.gen_bool(0.2) {
            args.push(random_case(&mut rng, "REFUND"));
        }
        let mutated = rng.gen_bool(0.5);
        if mutated {
            mutate(&mut rng, cmd, &mut args, t0);
        }
        let what = format!("seed {seed} step {step}: {cmd} {}", brief(&args));

        // The peek of an unmutated explicit-`now` call, to compare.
        let twin = (!peek && !mutated && explicit).then(|| {
            let mut parts = vec![b"RL.ALLPEEK".to_vec()];
            parts.extend(args.iter().cloned());
            let c = raw_cmd(&parts);
            let got = c.query::<Vec<i64>>(&mut con);
            let t = &mut want[1];
            t[0] += 1;
            match &got {
                Ok(v) if v.first() == Some(&0) => t[1] += 1,
                Ok(_) => t[2] += 1,
                Err(_) => t[3] += 1,
            }
            got.ok()
        });
        let before = snapshot(&mut con);
        let mut parts = vec![cmd.as_bytes().to_vec()];
        parts.extend(args.iter().cloned());
        let reply = raw_cmd(&parts).query::<Value>(&mut con);
        let now_ms = server_ms(&mut con);
        let after = snapshot(&mut con);
        let tally = &mut want[usize::from(peek)];
        let counted = args.len() >= 4; // Redis's arity error is not counted
        match reply {
            Err(e) => {
                let code = e.code().unwrap_or("");
                assert!(
                    code == "ERR" || code == "WRONGTYPE",
                    "{what}: {}",
                    error_text(&e)
                );
                assert_unchanged_but_expired(&before, &after, now_ms, &what);
                if counted {
                    tally[0] += 1;
                    tally[3] += 1;
                }
            }
            Ok(Value::Array(items)) => {
                let v: Vec<i64> = items
                    .iter()
                    .map(|x| match x {
                        Value::Int(i) => *i,
                        other => panic!("{what}: {other:?}"),
                    })
                    .collect();
                assert_eq!(v.len(), 7, "{what}: {v:?}");
                assert!(v[0] == 0 || v[0] == 1, "{what}: {v:?}");
                assert!(v[1] >= 1 && v[1] <= 64, "{what}: {v:?}");
                // (A QUOTA limit may be 0: `limit` from 0.)
                assert!(
                    v[3] >= 0 && v[4] >= 0 && v[5] >= -1 && v[6] >= 0,
                    "{what}: {v:?}"
                );
                let last = args.last().map(|a| a.to_ascii_uppercase());
                let before_last = args
                    .len()
                    .checked_sub(2)
                    .map(|i| args[i].to_ascii_uppercase());
                let refund = !peek
                    && last.as_deref() == Some(b"REFUND".as_slice())
                    && !matches!(before_last.as_deref(), Some(b"COST") | Some(b"TOKEN"));
                tally[0] += 1;
                if refund {
                    // Its reply is the state now: limited only where a
                    // key holds more than a (lowered) limit.
                    tally[4] += 1;
                } else if v[0] == 0 {
                    tally[1] += 1;
                } else {
                    tally[2] += 1;
                }
                if peek || (v[0] == 1 && !refund) {
                    assert_unchanged_but_expired(&before, &after, now_ms, &what);
                } else {
                    let named = all_named_keys(&args);
                    let named: Vec<&[u8]> = named.iter().map(Vec::as_slice).collect();
                    assert_unchanged_except(&before, &after, now_ms, &named, &what);
                }
                if let Some(Some(p)) = twin {
                    if !refund {
                        assert_eq!(p, v, "{what}: RL.ALLPEEK answered otherwise");
                        agreed += 1;
                    }
                }
            }
            Ok(other) => panic!("{what}: {other:?}"),
        }
    }
    if functions_backend() {
        return; // INFO ratelimit: not covered by the library
    }
    let stats = rl_stats(&mut con);
    for (i, prefix) in ["all", "allpeek"].iter().enumerate() {
        let f = |s: &str| stats[&format!("ratelimit_{prefix}_{s}")];
        let mut got = [f("calls"), f("admitted"), f("rejected"), f("errors"), 0];
        if i == 0 {
            got[4] = f("refunds");
        }
        eprintln!("{prefix}: {:?}", want[i]);
        assert_eq!(got, want[i], "seed {seed}: INFO counters of {prefix}");
        assert!(
            want[i][1] > 50 && want[i][2] > 20 && want[i][3] > 50,
            "seed {seed}: {prefix} {:?}",
            want[i]
        );
    }
    assert!(want[0][4] > 20, "seed {seed}: refunds {:?}", want[0]);
    assert!(agreed > 50, "seed {seed}: {agreed} peeks compared");
    run(&mut con, "PING");
}

/// Replies equal; on the Functions library, integers above 2^53 as equal as
/// a double carries them (SPEC "The Functions library", not covered:
/// replies above 2^53).
fn same_reply(want: &[i64], got: &[i64]) -> bool {
    want.len() == got.len()
        && want.iter().zip(got).all(|(&w, &g)| {
            w == g || (functions_backend() && w.unsigned_abs() > 1 << 53 && w as f64 == g as f64)
        })
}

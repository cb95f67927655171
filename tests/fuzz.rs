//! Random and malformed argument lists to every command. The seed is printed
//! (shown on failure) and can be replayed with `RL_FUZZ_SEED=<seed>`.
//!
//! Every reply must be a well-formed integer array or an `ERR`/`WRONGTYPE`
//! error; an error (and any RL.PEEK) must leave the keyspace unchanged; keys
//! only ever come from a known set; the server answers `PING` at the end and
//! its INFO counters match what the calls got.

mod common;

use std::collections::{BTreeSet, HashMap};

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::{Connection, Value};

/// Every key a fuzz call may name: the only keys that may ever exist.
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

/// Keys of the wrong type or holding bad values, which no call may change.
const FIXTURES: &[&[u8]] = &[b"fz:list", b"fz:hash", b"fz:zinf", b"fz:abc"];

const COMMANDS: &[&str] = &["RL.CHECK", "RL.PEEK", "RL.DAYHOUR", "RL.LOCKCOUNT"];

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
        "HSET fz:hash f v",
        "ZADD fz:zinf inf a 1 b",
        "SET fz:abc abc",
    ] {
        run(con, line);
    }
}

/// One argument: valid numbers, boundaries, malformed numbers, option names,
/// random bytes, huge strings.
fn token(rng: &mut StdRng, t0: i64) -> Vec<u8> {
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
    match rng.gen_range(0..12) {
        0 | 1 => rng.gen_range(0..20).to_string().into_bytes(),
        2 => rng.gen_range(1..200_000).to_string().into_bytes(),
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
            if rng.gen_bool(0.4) {
                args.push(if rng.gen_bool(0.5) {
                    b"COST".to_vec()
                } else {
                    b"cost".to_vec()
                });
                args.push(small(rng, 1, smallest));
            }
            args
        }
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

/// Replaces, inserts, deletes or duplicates a few arguments.
fn mutate(rng: &mut StdRng, args: &mut Vec<Vec<u8>>, t0: i64) {
    for _ in 0..rng.gen_range(0..=2) {
        let n = args.len();
        match rng.gen_range(0..5) {
            0 if n > 0 => {
                let i = rng.gen_range(0..n);
                args[i] = token(rng, t0);
            }
            1 => {
                let i = rng.gen_range(1..=n.max(1));
                args.insert(i.min(n), token(rng, t0));
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
        "RL.CHECK" | "RL.PEEK" => 1,
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
                token(rng, t0)
            }
        })
        .collect()
}

/// Arguments after the name that the command's arity accepts.
fn arity_ok(cmd: &str, n: usize) -> bool {
    match cmd {
        "RL.CHECK" | "RL.PEEK" => n >= 4,
        "RL.DAYHOUR" => n == 6,
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
        match after.get(k) {
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
fn check_reply(cmd: &str, v: &[i64], what: &str) {
    match cmd {
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
            assert!(reset >= 1, "{what}: {v:?}");
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
        "RL.CHECK" | "RL.PEEK" => {
            let rest = &args[1..];
            if !(rest[0] == b"*" || in_range(&rest[0], 0, MAX_SAFE)) {
                return false;
            }
            let rules_end = rest[1..]
                .iter()
                .position(|a| spec_int(a).is_none())
                .map_or(rest.len(), |p| p + 1);
            let rules = &rest[1..rules_end];
            if rules.is_empty() || rules.len() % 2 != 0 {
                return false;
            }
            if !rules.iter().all(|a| in_range(a, 1, MAX_SAFE)) {
                return false;
            }
            let smallest = rules
                .chunks(2)
                .filter_map(|pair| spec_int(&pair[0]))
                .min()
                .unwrap_or(1);
            match &rest[rules_end..] {
                [] => true,
                [name, value] => {
                    name.eq_ignore_ascii_case(b"COST") && in_range(value, 1, smallest.min(10_000))
                }
                _ => false,
            }
        }
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
/// before the call runs changes the outcome.
fn expect(con: &mut Connection, cmd: &str, args: &[Vec<u8>]) -> (Expect, i64) {
    if !args_valid(cmd, args) {
        return (Expect::ArgError, -1);
    }
    // The keys whose type matters, the type they need, and the fixture
    // holding a value the command must refuse.
    let (typed, want, bad): (&[Vec<u8>], &str, &[u8]) = match cmd {
        "RL.CHECK" | "RL.PEEK" => (&args[..1], "zset", b"fz:zinf"),
        "RL.DAYHOUR" => (&args[..2], "string", b"fz:abc"),
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
            expires = expires.max(pexpiretime_bytes(con, k));
        }
        stored_error |= k.as_slice() == bad;
    }
    let e = if wrong_type {
        Expect::WrongType
    } else if stored_error {
        Expect::StoredError
    } else {
        Expect::Success
    };
    (e, expires)
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
    let allowed: BTreeSet<Vec<u8>> = KEYS.iter().map(|k| k.to_vec()).collect();
    let t0 = server_ms(&mut con);
    let mut tallies: HashMap<&str, Tally> = HashMap::new();
    let mut outcomes: HashMap<(&str, String), u32> = HashMap::new();

    for i in 0..calls {
        if i % 250 == 249 {
            for (k, d) in &fixtures {
                let now: Vec<u8> = redis::cmd("DUMP").arg(*k).query(&mut con).unwrap();
                assert_eq!(&now, d, "seed {seed}: fixture {:?} changed", show(k));
            }
            reset_keyspace(&mut con);
        }
        let cmd = COMMANDS[rng.gen_range(0..COMMANDS.len())];
        let args = if rng.gen_bool(structured) {
            let mut a = valid_args(&mut rng, cmd, t0);
            mutate(&mut rng, &mut a, t0);
            // Key positions stay within the known set.
            for slot in a.iter_mut().take(key_slots(cmd)) {
                if !KEYS.contains(&slot.as_slice()) {
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
        let after = snapshot(&mut con);
        let now_ms = server_ms(&mut con);
        // No prediction when a key it rests on may have expired meanwhile.
        let expected = match prediction {
            Some((_, expires)) if expires != -1 && expires <= now_ms + 1 => None,
            Some((e, _)) => Some(e),
            None => None,
        };
        if let Some(e) = expected {
            *outcomes.entry((cmd, format!("{e:?}"))).or_insert(0u32) += 1;
        }

        for k in after.keys() {
            assert!(allowed.contains(k), "{what}: unexpected key {:?}", show(k));
        }
        let tally = tallies.entry(cmd).or_default();
        match result {
            Ok(Value::Array(items)) => {
                assert!(arity_fits, "{what}: accepted a wrong arity");
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
                check_reply(cmd, &v, &what);
                tally.calls += 1;
                let limited = match cmd {
                    // Refused iff an element exceeds its limit.
                    "RL.DAYHOUR" => v[0] > parse(&args[2]) || v[1] > parse(&args[3]),
                    _ => v[0] == 1,
                };
                if limited {
                    tally.rejected += 1;
                } else {
                    tally.admitted += 1;
                }
                if cmd == "RL.LOCKCOUNT" && limited && !before.contains_key(&args[0]) {
                    // The call that trips the lock: sets the lock, deletes
                    // the counter, touches nothing else.
                    let (lock, count) = (args[0].as_slice(), args[1].as_slice());
                    assert!(after.contains_key(lock), "{what}: no lock set");
                    assert!(!after.contains_key(count), "{what}: counter kept");
                    assert_eq!(v[2], parse(&args[4]), "{what}: lock ttl");
                    assert_unchanged_except(&before, &after, now_ms, &[lock, count], &what);
                } else if cmd == "RL.PEEK" || limited {
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
    let stats = rl_stats(&mut con);
    for (cmd, prefix) in [
        ("RL.CHECK", "check"),
        ("RL.PEEK", "peek"),
        ("RL.DAYHOUR", "dayhour"),
        ("RL.LOCKCOUNT", "lockcount"),
    ] {
        let want = tallies.remove(cmd).unwrap_or_default();
        let got = Tally {
            calls: stats[&format!("ratelimit_{prefix}_calls")],
            admitted: stats[&format!("ratelimit_{prefix}_admitted")],
            rejected: stats[&format!("ratelimit_{prefix}_rejected")],
            errors: stats[&format!("ratelimit_{prefix}_errors")],
        };
        assert_eq!(got, want, "seed {seed}: INFO counters of {cmd}");
        assert!(
            want.errors > 0 && want.admitted + want.rejected > 0,
            "seed {seed}: {cmd} was not exercised both ways: {want:?}"
        );
    }
}

#[test]
fn fuzz_random_argument_lists() {
    fuzz(3000, 0.1, false);
}

#[test]
fn fuzz_mutated_valid_argument_lists() {
    fuzz(4000, 0.9, true);
}

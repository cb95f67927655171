//! The lease's half-ms marker (SPEC RL.LEASE "State"): the first unit of a
//! lease of 2 or more units is scored `expiry - 0.5`, so a first unit with
//! a whole score is a lease of one unit.
//!
//! - Nothing a caller sees changes: a seeded random lease workload (costs 1
//!   to 5, resizes, renewals, releases, peeks, RL.ALL / RL.ALLPEEK `LEASE`
//!   clauses, lowered limits, module-named leases) answers exactly what the
//!   build before the marker answered, and leaves every key with the same
//!   expiry and the same members at the same scores rounded up to the ms.
//!   With `RL_MODULE_BEFORE` set to that build
//!   (`RL_MODULE_BEFORE=$(scripts/lease_before_marker.sh)`) both servers run
//!   side by side; without it the replies are compared with that build's
//!   transcript, `tests/fixtures/lease_marker_before.txt` (written by the
//!   same run with `RL_LEASE_MARKER_WRITE=1`). `now` is fixed (2100, ahead
//!   of the server clock: no lag moves an expiry), so replies are
//!   deterministic.
//! - A lease of cost 3 written before the marker (a DUMP the earlier build
//!   made, `tests/fixtures/lease_before_marker.dump.hex`, see
//!   `tests/fixtures/make_lease_dump.py`) is read as one unit: RL.RELEASE
//!   and RL.RENEW act on that unit, and its other units count as live until
//!   their scores pass.

mod common;

use std::path::PathBuf;

use common::*;
use redis::{Connection, Value};

/// 2100-01-01 in ms: ahead of the server clock, so an expiry is the grid
/// point after the highest score, with no lag added, on every run.
const T: i64 = 4_102_444_800_000;
const KEYS: [&str; 3] = ["lm:a", "lm:b", "lm:c"];
const LIMITS: [u64; 3] = [4, 8, 12];
const TOKENS: [&str; 6] = ["t1", "t2", "t3", "job", "x", "y"];
const TTLS: [u64; 4] = [30, 120, 500, 2000];
const SEEDS: [u64; 3] = [0x9e37_79b9_7f4a_7c15, 0x2545_f491_4f6c_dd1d, 7];
const STEPS: usize = 500;

/// A small deterministic generator (xorshift), so a run replays exactly.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len() as u64) as usize]
    }
}

/// One step of the workload: the command's words, and whether its reply
/// names a lease the module named (random: masked in the transcript).
fn step(rng: &mut Rng, t: i64) -> (Vec<String>, bool) {
    let k = rng.below(3) as usize;
    let key = KEYS[k].to_string();
    // Now and then a lowered limit: a key over its limit.
    let limit = match rng.below(10) {
        0 => LIMITS[k].saturating_sub(2).max(1),
        _ => LIMITS[k],
    };
    let ttl = TTLS[rng.below(4) as usize];
    let tok = rng.pick(&TOKENS).to_string();
    let cost = 1 + rng.below(5);
    let w = |parts: &[&dyn ToString]| parts.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    let other = |rng: &mut Rng| {
        let j = (k + 1 + rng.below(2) as usize) % 3;
        (KEYS[j], LIMITS[j])
    };
    match rng.below(100) {
        0..=34 => {
            let mut c = w(&[&"RL.LEASE", &key, &t, &limit, &ttl]);
            if rng.below(2) == 0 {
                c.extend(w(&[&"COST", &cost, &"TOKEN", &tok]));
            } else {
                c.extend(w(&[&"TOKEN", &tok, &"COST", &cost]));
            }
            (c, false)
        }
        35..=39 => (
            w(&[&"RL.LEASE", &key, &t, &limit, &ttl, &"COST", &cost]),
            true,
        ),
        40..=52 => {
            let mut c = w(&[&"RL.LEASEPEEK", &key, &t, &limit]);
            if rng.below(3) > 0 {
                c.extend(w(&[&"COST", &rng.below(6)]));
            }
            if rng.below(3) > 0 {
                c.extend(w(&[&"TOKEN", &tok]));
            }
            (c, false)
        }
        53..=64 => {
            let mut c = w(&[&"RL.RELEASE", &key, &t, &tok]);
            if rng.below(2) == 0 {
                c.push(rng.pick(&TOKENS).to_string());
            }
            (c, false)
        }
        65..=78 => {
            let mut c = w(&[&"RL.RENEW", &key, &t, &ttl, &tok]);
            if rng.below(2) == 0 {
                c.push(rng.pick(&TOKENS).to_string());
            }
            (c, false)
        }
        79..=90 => {
            let (key2, limit2) = other(rng);
            let (tok2, cost2) = (rng.pick(&TOKENS), 1 + rng.below(5));
            let mut c = w(&[
                &"RL.ALL", &2, &key, &key2, &t, &"LEASE", &1, &limit, &ttl, &"TOKEN", &tok,
                &"COST", &cost, &"LEASE", &2, &limit2, &ttl, &"TOKEN", &tok2, &"COST", &cost2,
            ]);
            if rng.below(4) == 0 {
                c.push("REFUND".into());
            }
            if rng.below(2) == 0 {
                c.push("DETAILS".into());
            }
            (c, false)
        }
        _ => {
            let (key2, limit2) = other(rng);
            let mut c = w(&[
                &"RL.ALLPEEK",
                &2,
                &key,
                &key2,
                &t,
                &"LEASE",
                &1,
                &limit,
                &ttl,
            ]);
            if rng.below(3) > 0 {
                c.extend(w(&[&"TOKEN", &tok]));
            }
            c.extend(w(&[&"COST", &rng.below(6)]));
            c.extend(w(&[
                &"LEASE",
                &2,
                &limit2,
                &ttl,
                &"TOKEN",
                &rng.pick(&TOKENS),
            ]));
            c.extend(w(&[&"COST", &rng.below(6)]));
            if rng.below(2) == 0 {
                c.push("DETAILS".into());
            }
            (c, false)
        }
    }
}

/// A reply, one line: integers, `nil`, strings, `[...]` arrays, `!error`.
fn render(v: &redis::RedisResult<Value>, named: bool) -> String {
    fn go(v: &Value, named: bool, out: &mut String) {
        match v {
            Value::Int(n) => out.push_str(&n.to_string()),
            Value::Nil => out.push_str("nil"),
            Value::BulkString(_) if named => out.push_str("<named>"),
            Value::BulkString(b) => out.push_str(&String::from_utf8_lossy(b)),
            Value::SimpleString(s) => out.push_str(s),
            Value::Array(items) => {
                out.push('[');
                for (i, x) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    go(x, named, out);
                }
                out.push(']');
            }
            other => out.push_str(&format!("{other:?}")),
        }
    }
    match v {
        Ok(v) => {
            let mut s = String::new();
            go(v, named, &mut s);
            s
        }
        Err(e) => format!("!{}", error_text(e)),
    }
}

/// A key as far as replies can tell it: its expiry and its members with
/// their scores rounded up to the ms (module-named leases as `<named>`),
/// sorted.
fn state(con: &mut Connection, key: &str) -> String {
    let mut members: Vec<String> = zrange(con, key)
        .into_iter()
        .map(|(m, s)| {
            let m = String::from_utf8(m).expect("ascii member");
            let base = m.split('#').next().unwrap_or_default();
            let name = if TOKENS.contains(&base) {
                m.clone()
            } else {
                m.replacen(base, "<named>", 1)
            };
            let score: f64 = s.parse().expect("a score");
            format!("{name}={}", score.ceil() as i64)
        })
        .collect();
    members.sort();
    format!(
        "state {key} {} {}",
        pexpiretime(con, key),
        members.join(",")
    )
}

/// The marker as SPEC words it, on the build under test: a first unit
/// (a member without `#`) has a whole score iff no `#2` follows it, and a
/// marked one lies half a ms before its `#2`. Returns the marked leases.
fn check_marker(con: &mut Connection, key: &str) -> usize {
    let members: std::collections::HashMap<String, f64> = zrange(con, key)
        .into_iter()
        .map(|(m, s)| (String::from_utf8(m).unwrap(), s.parse().unwrap()))
        .collect();
    let mut marked = 0;
    for (m, &s) in members.iter().filter(|(m, _)| !m.contains('#')) {
        match members.get(&format!("{m}#2")) {
            Some(&next) => {
                assert_eq!(s, next - 0.5, "{key}: {m} {s}, {m}#2 {next}");
                marked += 1;
            }
            None => assert_eq!(s.fract(), 0.0, "{key}: {m} {s} without {m}#2"),
        }
    }
    marked
}

/// The workload's transcript on one server: a line per reply, a state
/// line per key every 25 steps and at the end of each seed.
fn transcript(con: &mut Connection, check: bool) -> (Vec<(String, String)>, usize) {
    let mut lines = Vec::new();
    let mut marked = 0;
    for (n, &seed) in SEEDS.iter().enumerate() {
        run(con, "FLUSHALL");
        let mut rng = Rng(seed);
        let mut t = T + n as i64 * 10_000_000;
        for i in 0..STEPS {
            let (cmd, named) = step(&mut rng, t);
            let reply = raw_cmd(&cmd).query::<Value>(con);
            lines.push((cmd.join(" "), render(&reply, named)));
            if i % 25 == 24 || i == STEPS - 1 {
                for key in KEYS {
                    lines.push((format!("state {key}"), state(con, key)));
                    if check {
                        marked += check_marker(con, key);
                    }
                }
            }
            // Mostly small steps (leases overlap, a unit's expiry is met
            // exactly now and then), sometimes a long one.
            t += match rng.below(10) {
                0 => 0,
                1 => 400,
                _ => rng.below(40) as i64,
            };
        }
    }
    (lines, marked)
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

const TRANSCRIPT: &str = "lease_marker_before.txt";

#[test]
fn replies_are_the_earlier_builds_over_a_random_workload() {
    let after = Server::start();
    let (got, marked) = transcript(&mut after.con(), true);
    // The marker was written (and checked) on many leases.
    assert!(marked > 50, "{marked} marked leases seen");
    let replies: Vec<&String> = got.iter().map(|(_, r)| r).collect();
    let admitted = replies.iter().filter(|r| r.starts_with("[0 1 ")).count();
    let refused = replies.iter().filter(|r| r.starts_with("[1 1 ")).count();
    assert!(
        admitted > 300 && refused > 100,
        "{admitted} admitted, {refused} refused"
    );

    // (Under `RL_BACKEND=functions` the library answers the workload and is
    // compared with the transcript: commands go as FCALL to every server.)
    let before: Vec<String> = match std::env::var_os("RL_MODULE_BEFORE") {
        Some(path) if !path.is_empty() && !functions_backend() => {
            let server = Server::start_with(&PathBuf::from(path));
            let (lines, _) = transcript(&mut server.con(), false);
            let lines: Vec<String> = lines.into_iter().map(|(_, r)| r).collect();
            if std::env::var_os("RL_LEASE_MARKER_WRITE").is_some() {
                let mut text = String::from(
                    "# tests/lease_marker.rs's workload, replies of the build before the half-ms\n\
                     # marker (commit 44abc84, scripts/lease_before_marker.sh), one per line:\n\
                     # RL_LEASE_MARKER_WRITE=1 RL_MODULE_BEFORE=$(scripts/lease_before_marker.sh) \\\n\
                     #   cargo test --release --test lease_marker\n",
                );
                for l in &lines {
                    text.push_str(l);
                    text.push('\n');
                }
                std::fs::write(fixture(TRANSCRIPT), text).expect("write the transcript");
            }
            lines
        }
        _ => std::fs::read_to_string(fixture(TRANSCRIPT))
            .expect("the transcript fixture")
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect(),
    };
    assert_eq!(before.len(), got.len(), "transcript lengths");
    for (i, ((cmd, now), then)) in got.iter().zip(&before).enumerate() {
        assert_eq!(now, then, "line {i}: {cmd}");
    }
}

/// The DUMP's bytes: a key holding `old` (cost 3) and `one` (cost 1), every
/// unit at `E`, written by the build before the marker.
fn restore(con: &mut Connection, key: &str) {
    let hex = std::fs::read_to_string(fixture("lease_before_marker.dump.hex")).expect("the DUMP");
    let hex = hex.trim();
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect();
    redis::cmd("RESTORE")
        .arg(key)
        .arg(0)
        .arg(bytes)
        .query::<()>(con)
        .expect("RESTORE");
}

/// Every unit of the DUMP's leases expires at this.
const E: i64 = T + 60_000;

fn members(con: &mut Connection, key: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = zrange(con, key)
        .into_iter()
        .map(|(m, s)| (show(&m), s))
        .collect();
    v.sort();
    v
}

fn pairs(list: &[(&str, i64)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = list
        .iter()
        .map(|&(m, s)| (m.to_string(), s.to_string()))
        .collect();
    v.sort();
    v
}

#[test]
fn a_lease_written_before_the_marker_is_read_as_one_unit() {
    let s = Server::start();
    let mut con = s.con();
    let t = T + 1000;
    let lease = |con: &mut Connection, line: &str| -> String {
        render(&words(line).query::<Value>(con), false)
    };

    // RL.RELEASE gives back its first unit only; the others stay, live
    // until their scores pass: a new lease does not over-admit.
    restore(&mut con, "lm:1");
    assert_eq!(
        ints(&mut con, &format!("RL.LEASEPEEK lm:1 {t} 10 COST 0")),
        [0, 1, 10, 6, -1, 59_000]
    );
    assert_eq!(ints(&mut con, &format!("RL.RELEASE lm:1 {t} old")), [1]);
    assert_eq!(
        members(&mut con, "lm:1"),
        pairs(&[("old#2", E), ("old#3", E), ("one", E)])
    );
    assert_eq!(
        lease(
            &mut con,
            &format!("RL.LEASE lm:1 {t} 4 1000 COST 2 TOKEN new")
        ),
        "[1 1 4 1 59000 59000 nil]",
        "3 units still live: 3 + 2 > 4"
    );
    assert_eq!(
        lease(
            &mut con,
            &format!("RL.LEASE lm:1 {E} 4 1000 COST 2 TOKEN new")
        ),
        "[0 1 4 2 -1 1000 new]",
        "at their expiry they count no more"
    );
    assert_eq!(
        ints(&mut con, &format!("RL.RELEASE lm:1 {E} new old")),
        [2, 0]
    );

    // RL.RENEW re-scores the first unit only (whole: a lease of one unit).
    restore(&mut con, "lm:2");
    assert_eq!(ints(&mut con, &format!("RL.RENEW lm:2 {t} 5000 old")), [1]);
    assert_eq!(
        members(&mut con, "lm:2"),
        pairs(&[("old", t + 5000), ("old#2", E), ("old#3", E), ("one", E)])
    );

    // Taken again at cost 3, the lease makes the stranded units its own:
    // re-scored (not added), counted once, the first marked.
    restore(&mut con, "lm:3");
    assert_eq!(
        lease(
            &mut con,
            &format!("RL.LEASE lm:3 {t} 10 5000 COST 3 TOKEN old")
        ),
        "[0 1 10 6 -1 59000 old]"
    );
    assert_eq!(
        members(&mut con, "lm:3"),
        vec![
            ("old".to_string(), format!("{}.5", t + 4999)),
            ("old#2".to_string(), (t + 5000).to_string()),
            ("old#3".to_string(), (t + 5000).to_string()),
            ("one".to_string(), E.to_string()),
        ]
    );
    assert_eq!(ints(&mut con, &format!("RL.RELEASE lm:3 {t} old")), [3]);

    // RL.ALL's REFUND of a LEASE clause releases as RL.RELEASE does.
    restore(&mut con, "lm:4");
    assert_eq!(
        ints(
            &mut con,
            &format!("RL.ALL 1 lm:4 {t} LEASE 1 10 5000 TOKEN old REFUND")
        ),
        [0, 1, 1, 10, 7, -1, 59_000]
    );
    assert_eq!(
        members(&mut con, "lm:4"),
        pairs(&[("old#2", E), ("old#3", E), ("one", E)])
    );

    // The earlier build read the same DUMP as a lease of three units.
    let before = std::env::var_os("RL_MODULE_BEFORE").filter(|p| !p.is_empty());
    if let Some(path) = before.filter(|_| !functions_backend()) {
        let before = Server::start_with(&PathBuf::from(path));
        let mut con = before.con();
        restore(&mut con, "lm:1");
        assert_eq!(ints(&mut con, &format!("RL.RELEASE lm:1 {t} old")), [3]);
    }
}

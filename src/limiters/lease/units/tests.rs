//! Table tests of the lease core, and a model test: the core driven the way
//! the command layer drives it, over an in-memory sorted set, against a
//! brute-force simulation of leases over random timelines.

use std::collections::{BTreeMap, HashMap};

use super::*;
// The set's scores, ascending, as the core reads them: the window core's
// test view of a sorted set.
use crate::limiters::sliding_log::window::tests::VecLog as Scores;

/// A sorted set in memory: member name -> score, plus the key's expiry.
#[derive(Default, Clone)]
struct SimKey {
    members: BTreeMap<Vec<u8>, f64>,
    expire: Option<i64>,
    next_name: u64,
}

const KEY: &[u8] = b"lease:key";

impl SimKey {
    fn with(units: &[(&str, f64)]) -> SimKey {
        let mut k = SimKey::default();
        for &(m, s) in units {
            k.members.insert(m.as_bytes().to_vec(), s);
        }
        k
    }

    fn scores(&self) -> Scores {
        let mut v: Vec<f64> = self.members.values().copied().collect();
        v.sort_by(f64::total_cmp);
        Scores(v)
    }

    fn top(&self) -> Option<f64> {
        self.members.values().copied().max_by(f64::total_cmp)
    }

    /// The names and scores of `token`'s units, walking `tok`, `tok#2`, ...
    /// (only `tok` when its score is whole: a lease of one unit).
    fn walk(&self, token: &[u8]) -> (Vec<Vec<u8>>, Vec<f64>) {
        let (mut names, mut scores) = (Vec::new(), Vec::new());
        let mut buf = [0u8; 85];
        for i in 1.. {
            let name = unit_name(token, i, &mut buf).to_vec();
            let Some(&s) = self.members.get(&name) else {
                break;
            };
            names.push(name);
            scores.push(s);
            if i == 1 && !has_siblings(s) {
                break;
            }
        }
        (names, scores)
    }

    /// Redis removes a key whose expiry has passed.
    fn expire_by(&mut self, server_time: i64) {
        if self.expire.is_some_and(|e| e <= server_time) {
            *self = SimKey {
                next_name: self.next_name,
                ..SimKey::default()
            };
        }
    }

    fn set_expiry(&mut self, at: Option<i64>) {
        if let Some(at) = at {
            self.expire = Some(at);
        }
    }

    /// RL.LEASE as the command layer runs it; the reply and the token.
    #[allow(clippy::too_many_arguments)]
    fn lease(
        &mut self,
        limit: i64,
        ttl: i64,
        cost: i64,
        token: Option<&str>,
        t: i64,
        server_time: i64,
    ) -> ([i64; 6], Option<Vec<u8>>) {
        let (names, own) = token.map_or_else(Default::default, |tok| self.walk(tok.as_bytes()));
        let v = decide(limit, cost, t, &own, &mut self.scores()).unwrap();
        if !v.admitted {
            return (v.reply(limit, cost, self.top(), t).ints(), None);
        }
        let bound = reap_bound(t, server_time);
        let expired_before = self
            .members
            .values()
            .filter(|&&s| s <= bound as f64)
            .count() as u64;
        for name in names.iter().skip(cost as usize) {
            self.members.remove(name);
        }
        let tok = match token {
            Some(tok) => tok.as_bytes().to_vec(),
            None => loop {
                self.next_name += 1;
                let name = format!("G{:07}", self.next_name).into_bytes();
                if !self.members.contains_key(&name) {
                    break name;
                }
            },
        };
        let mut buf = [0u8; 85];
        for i in 1..=cost as u64 {
            let score = match i {
                1 => first_unit_score(t + ttl, cost as u64),
                _ => (t + ttl) as f64,
            };
            self.members
                .insert(unit_name(&tok, i, &mut buf).to_vec(), score);
        }
        let top = self.top().unwrap();
        let grid = Grid::new(KEY, ttl);
        let at = expiry(&grid, self.expire, top, t, server_time);
        if reaps(at.is_some(), expired_before, limit) {
            self.members.retain(|_, s| *s > bound as f64);
        }
        self.set_expiry(at);
        (v.reply(limit, cost, Some(top), t).ints(), Some(tok))
    }

    /// RL.LEASEPEEK.
    fn peek(&self, limit: i64, cost: i64, token: Option<&str>, t: i64) -> [i64; 6] {
        let own = match token {
            Some(tok) if cost > 0 => self.walk(tok.as_bytes()).1,
            _ => vec![],
        };
        let v = decide(limit, cost, t, &own, &mut self.scores()).unwrap();
        v.reply(limit, cost, self.top(), t).ints()
    }

    /// RL.RELEASE: live units released per token.
    fn release(&mut self, tokens: &[&str], t: i64) -> Vec<i64> {
        tokens
            .iter()
            .map(|tok| {
                let (names, scores) = self.walk(tok.as_bytes());
                for n in &names {
                    self.members.remove(n);
                }
                live_units(&scores, t) as i64
            })
            .collect()
    }

    /// RL.RENEW: units renewed per token.
    fn renew(&mut self, tokens: &[&str], ttl: i64, t: i64, server_time: i64) -> Vec<i64> {
        let counts: Vec<i64> = tokens
            .iter()
            .map(|tok| {
                let (names, scores) = self.walk(tok.as_bytes());
                if live_units(&scores, t) == 0 {
                    return 0;
                }
                for (i, n) in names.iter().enumerate() {
                    let score = match i {
                        0 => first_unit_score(t + ttl, names.len() as u64),
                        _ => (t + ttl) as f64,
                    };
                    self.members.insert(n.clone(), score);
                }
                names.len() as i64
            })
            .collect();
        if counts.iter().any(|&n| n > 0) {
            let top = self.top().unwrap();
            let at = expiry(&Grid::new(KEY, ttl), self.expire, top, t, server_time);
            self.set_expiry(at);
        }
        counts
    }
}

/// The scores of a lease of `n` units expiring at `e`: the first half a ms
/// before the others when there are others.
fn lease_scores(e: i64, n: usize) -> Vec<f64> {
    let mut v = vec![e as f64; n];
    if n >= 2 {
        v[0] = e as f64 - 0.5;
    }
    v
}

#[test]
fn the_half_ms_marker() {
    assert_eq!(first_unit_score(1000, 1), 1000.0);
    assert_eq!(first_unit_score(1000, 2), 999.5);
    assert_eq!(
        first_unit_score(9_007_199_254_740_991 >> 1, 10_000),
        4_503_599_627_370_494.5
    );
    assert!(!has_siblings(1000.0) && has_siblings(999.5));
    // Live exactly as long as its siblings at a whole `t`; replies round
    // it up to the lease's expiry.
    for t in [998, 999, 1000, 1001] {
        assert_eq!(999.5 > t as f64, 1000.0 > t as f64, "t {t}");
    }
    assert_eq!(reset_after(Some(999.5), 900), 100);
}

#[test]
fn unit_names() {
    let mut buf = [0u8; 85];
    assert_eq!(unit_name(b"job", 1, &mut buf), b"job");
    assert_eq!(unit_name(b"job", 2, &mut buf), b"job#2");
    assert_eq!(unit_name(b"job", 10000, &mut buf), b"job#10000");
    let long = [b'x'; 64];
    assert_eq!(unit_name(&long, u64::MAX >> 1, &mut buf).len(), 64 + 1 + 19);
}

#[test]
fn table_of_edges() {
    struct Case {
        name: &'static str,
        units: Vec<(&'static str, f64)>,
        limit: i64,
        cost: i64,
        token: Option<&'static str>,
        t: i64,
        want: [i64; 6],
    }
    let ttl = 1000;
    let cases = vec![
        Case {
            name: "empty key admits; reset is the new lease's ttl",
            units: vec![],
            limit: 1,
            cost: 1,
            token: None,
            t: 5000,
            want: [0, 1, 1, 0, -1, 1000],
        },
        Case {
            name: "a unit expiring exactly at t is not live",
            units: vec![("a", 5000.0)],
            limit: 1,
            cost: 1,
            token: None,
            t: 5000,
            want: [0, 1, 1, 0, -1, 1000],
        },
        Case {
            name: "a unit expiring one ms after t is live",
            units: vec![("a", 5001.0)],
            limit: 1,
            cost: 1,
            token: None,
            t: 5000,
            want: [1, 1, 1, 0, 1, 1],
        },
        Case {
            name: "cost 3 needs the 2nd earliest-expiring unit of others",
            units: vec![("a", 5100.0), ("b", 5200.0), ("c", 5300.0), ("d", 5400.0)],
            limit: 5,
            cost: 3,
            token: None,
            t: 5000,
            want: [1, 1, 5, 1, 200, 400],
        },
        Case {
            name: "the token's own units are excluded from retry_after",
            // tok holds 2 units expiring first; k = 4 - 2 + 4 - 5 = 1: the
            // earliest unit of others is c (5300), not tok's (5100).
            units: vec![
                ("tok", 5099.5),
                ("tok#2", 5100.0),
                ("c", 5300.0),
                ("d", 5400.0),
            ],
            limit: 5,
            cost: 4,
            token: Some("tok"),
            t: 5000,
            want: [1, 1, 5, 1, 300, 400],
        },
        Case {
            name: "own units interleaved with others at equal scores",
            units: vec![("tok", 5200.0), ("a", 5200.0), ("b", 5300.0)],
            limit: 2,
            cost: 2,
            token: Some("tok"),
            t: 5000,
            // live 3, held 1: k = 3 - 1 + 2 - 2 = 2: a (5200), then b (5300).
            want: [1, 1, 2, 0, 300, 300],
        },
        Case {
            name: "resize up within the limit: own units do not count",
            units: vec![("tok", 5499.5), ("tok#2", 5500.0), ("x", 5100.0)],
            limit: 4,
            cost: 3,
            token: Some("tok"),
            t: 5000,
            want: [0, 1, 4, 0, -1, 1000],
        },
        Case {
            // Written before the half-ms marker: a whole first unit is a
            // lease of one unit, `tok#2` a live unit of another.
            name: "a lease of 2 written before the marker holds one unit",
            units: vec![("tok", 5500.0), ("tok#2", 5500.0), ("x", 5100.0)],
            limit: 4,
            cost: 3,
            token: Some("tok"),
            t: 5000,
            // live 3, held 1: 3 - 1 + 3 = 5 > 4; k = 1: x (5100).
            want: [1, 1, 4, 1, 100, 500],
        },
        Case {
            name: "resize up past the limit is refused",
            units: vec![("tok", 5500.0), ("x", 5100.0), ("y", 5200.0)],
            limit: 4,
            cost: 3,
            token: Some("tok"),
            t: 5000,
            want: [1, 1, 4, 1, 100, 500],
        },
        Case {
            name: "resize down frees units",
            units: vec![("tok", 5499.5), ("tok#2", 5500.0), ("tok#3", 5500.0)],
            limit: 3,
            cost: 1,
            token: Some("tok"),
            t: 5000,
            want: [0, 1, 3, 2, -1, 1000],
        },
        Case {
            name: "expired own units are not held",
            units: vec![("tok", 4000.0), ("x", 5500.0)],
            limit: 1,
            cost: 1,
            token: Some("tok"),
            t: 5000,
            want: [1, 1, 1, 0, 500, 500],
        },
        Case {
            name: "over the limit (lowered): k = 3 units must expire",
            units: vec![("a", 6000.0), ("b", 7000.0), ("c", 8000.0)],
            limit: 1,
            cost: 1,
            token: None,
            t: 5000,
            want: [1, 1, 1, 0, 3000, 3000],
        },
        Case {
            name: "fractional foreign scores round up",
            units: vec![("a", 5000.5)],
            limit: 1,
            cost: 1,
            token: None,
            t: 5000,
            want: [1, 1, 1, 0, 1, 1],
        },
    ];
    for c in cases {
        let mut key = SimKey::with(&c.units);
        let (got, tok) = key.lease(c.limit, ttl, c.cost, c.token, c.t, c.t);
        assert_eq!(got, c.want, "{}", c.name);
        assert_eq!(tok.is_some(), got[0] == 0, "{}", c.name);
        if got[0] == 0 {
            // The lease holds exactly `cost` units, all at t + ttl.
            let (_, own) = key.walk(&tok.unwrap());
            assert_eq!(own, lease_scores(c.t + ttl, c.cost as usize), "{}", c.name);
        } else {
            assert_eq!(key.members, SimKey::with(&c.units).members, "{}", c.name);
        }
    }
}

#[test]
fn limits_of_one_and_ten_thousand() {
    let mut key = SimKey::default();
    assert_eq!(
        key.lease(1, 100, 1, Some("a"), 0, 0).0,
        [0, 1, 1, 0, -1, 100]
    );
    assert_eq!(
        key.lease(1, 100, 1, Some("b"), 0, 0).0,
        [1, 1, 1, 0, 100, 100]
    );
    // The holder renews through a repeated LEASE.
    assert_eq!(
        key.lease(1, 100, 1, Some("a"), 50, 50).0,
        [0, 1, 1, 0, -1, 100]
    );

    let mut key = SimKey::default();
    let (r, tok) = key.lease(10_000, 1000, 10_000, None, 0, 0);
    assert_eq!(r, [0, 1, 10_000, 0, -1, 1000]);
    assert_eq!(key.members.len(), 10_000);
    let tok = tok.unwrap();
    assert_eq!(tok.len(), 8);
    assert_eq!(key.peek(10_000, 1, None, 10), [1, 1, 10_000, 0, 990, 990]);
    assert_eq!(key.peek(10_000, 0, None, 10), [0, 1, 10_000, 0, -1, 990]);
    let tok = std::str::from_utf8(&tok).unwrap().to_string();
    assert_eq!(key.release(&[&tok], 10), vec![10_000]);
    assert!(key.members.is_empty());
}

#[test]
fn renew_against_expired() {
    let mut key = SimKey::default();
    key.lease(3, 100, 2, Some("a"), 0, 0);
    key.lease(3, 100, 1, Some("b"), 50, 50);
    // At 100 a's units expire exactly: not live, not revived.
    assert_eq!(key.renew(&["a", "b", "zz"], 100, 100, 100), vec![0, 1, 0]);
    assert_eq!(key.walk(b"a").1, vec![99.5, 100.0]);
    assert_eq!(key.walk(b"b").1, vec![200.0]);
    // Renew may shorten a lease.
    assert_eq!(key.renew(&["b"], 10, 120, 120), vec![1]);
    assert_eq!(key.walk(b"b").1, vec![130.0]);
    // Release counts live units only.
    assert_eq!(key.release(&["a", "b"], 120), vec![0, 1]);
    assert!(key.members.is_empty());
}

#[test]
fn peek_with_cost_zero_is_the_state_now() {
    let key = SimKey::with(&[("a", 200.0), ("b", 300.0), ("c", 50.0)]);
    assert_eq!(key.peek(5, 0, Some("a"), 100), [0, 1, 5, 3, -1, 200]);
    // Over the limit (lowered): limited until enough units expire.
    assert_eq!(key.peek(1, 0, None, 100), [1, 1, 1, 0, 100, 200]);
    // With a cost the token's units are excluded.
    assert_eq!(key.peek(2, 1, Some("a"), 100), [0, 1, 2, 0, -1, 200]);
    assert_eq!(key.peek(2, 1, None, 100), [1, 1, 2, 0, 100, 200]);
}

#[test]
fn expiry_on_the_grid_and_reaping() {
    // ttl 800: grid step 100.
    let grid = Grid::new(KEY, 800);
    let mut key = SimKey::default();
    key.lease(10, 800, 1, Some("a"), 1000, 1000);
    assert_eq!(key.expire, Some(grid.at_or_after(1800)));
    let first = key.expire;
    // A later lease within the same grid step keeps the expiry.
    let at = first.unwrap() - 1800;
    if at > 0 {
        key.lease(10, 800, 1, Some("b"), 1000 + at, 1000 + at);
        assert_eq!(key.expire, first);
    }
    // A caller whose clock lags by 500 ms gets 500 ms more.
    let mut key = SimKey::default();
    key.lease(10, 800, 1, Some("a"), 1000, 1500);
    assert_eq!(key.expire, Some(grid.at_or_after(2300)));

    // One long lease holds the expiry; short ones expire under it and are
    // reaped once `limit` of them are there.
    let mut key = SimKey::default();
    key.lease(3, 1_000_000, 1, Some("long"), 0, 0);
    for (i, t) in [10, 20, 30].into_iter().enumerate() {
        key.lease(3, 5, 1, Some(["s1", "s2", "s3"][i]), t, t);
    }
    // At 100: s1..s3 expired (3 >= limit 3), so this call reaps them.
    assert_eq!(key.members.len(), 4);
    key.lease(3, 5, 1, Some("s4"), 100, 100);
    let names: Vec<&[u8]> = key.members.keys().map(Vec::as_slice).collect();
    assert_eq!(names, [&b"long"[..], b"s4"]);
    // A caller ahead of the server removes only what the server sees expired.
    let mut key = SimKey::with(&[("x", 150.0), ("y", 90.0)]);
    key.lease(1, 10, 1, Some("z"), 200, 100);
    // Expiry moved (new key): reaped through min(t, server) = 100.
    let names: Vec<&[u8]> = key.members.keys().map(Vec::as_slice).collect();
    assert_eq!(names, [&b"x"[..], b"z"]);
}

/// The leases as a brute-force model: token -> (units, expiry).
#[derive(Default)]
struct Model {
    leases: HashMap<String, (i64, i64)>,
}

impl Model {
    fn live(&self, t: i64) -> impl Iterator<Item = (&String, &(i64, i64))> {
        self.leases.iter().filter(move |(_, &(_, e))| e > t)
    }

    fn lease(&mut self, limit: i64, ttl: i64, cost: i64, token: Option<&str>, t: i64) -> [i64; 6] {
        let live: i64 = self.live(t).map(|(_, &(n, _))| n).sum();
        let held = token
            .and_then(|tok| self.leases.get(tok))
            .filter(|&&(_, e)| e > t)
            .map_or(0, |&(n, _)| n);
        let top = |m: &Model| m.live(t).map(|(_, &(_, e))| e).max().map_or(0, |e| e - t);
        if live - held + cost <= limit {
            if let Some(tok) = token {
                self.leases.insert(tok.to_string(), (cost, t + ttl));
            }
            let after = live - held + cost;
            return [0, 1, limit, (limit - after).max(0), -1, top(self).max(ttl)];
        }
        let k = (live - held + cost - limit) as usize;
        let mut others: Vec<i64> = self
            .live(t)
            .filter(|(name, _)| Some(name.as_str()) != token)
            .flat_map(|(_, &(n, e))| std::iter::repeat_n(e, n as usize))
            .collect();
        others.sort_unstable();
        [
            1,
            1,
            limit,
            (limit - live).max(0),
            others[k - 1] - t,
            top(self),
        ]
    }

    fn release(&mut self, tok: &str, t: i64) -> i64 {
        self.leases
            .remove(tok)
            .filter(|&(_, e)| e > t)
            .map_or(0, |(n, _)| n)
    }

    fn renew(&mut self, tok: &str, ttl: i64, t: i64) -> i64 {
        match self.leases.get_mut(tok) {
            Some((n, e)) if *e > t => {
                *e = t + ttl;
                *n
            }
            _ => 0,
        }
    }
}

#[test]
fn model_against_brute_force_over_random_timelines() {
    use rand::{Rng, SeedableRng};
    let tokens = ["a", "b", "c", "d", "e", "f"];
    for seed in 0..300u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let limit = rng.gen_range(1..=6);
        let mut key = SimKey::default();
        let mut model = Model::default();
        let mut t = rng.gen_range(0..1000);
        for step in 0..200 {
            t += rng.gen_range(0..15);
            key.expire_by(t);
            let ttl = rng.gen_range(1..60);
            let what = format!("seed {seed} step {step} t {t}");
            match rng.gen_range(0..10) {
                // Acquire (or re-acquire, resize) with a token.
                0..=3 => {
                    let tok = tokens[rng.gen_range(0..tokens.len())];
                    let cost = rng.gen_range(1..=limit.min(3));
                    let (got, name) = key.lease(limit, ttl, cost, Some(tok), t, t);
                    let want = model.lease(limit, ttl, cost, Some(tok), t);
                    assert_eq!(got, want, "{what}: lease {tok} cost {cost}");
                    assert_eq!(name.is_some(), got[0] == 0, "{what}");
                }
                // Acquire without a token: the module names it; the holder
                // then crashes (never renews nor releases).
                4 => {
                    let cost = rng.gen_range(1..=limit.min(2));
                    let (got, name) = key.lease(limit, ttl, cost, None, t, t);
                    let want = model.lease(limit, ttl, cost, None, t);
                    assert_eq!(got, want, "{what}: anonymous lease");
                    if let Some(name) = name {
                        let name = String::from_utf8(name).unwrap();
                        assert!(!model.leases.contains_key(&name), "{what}: name reused");
                        model.leases.insert(name, (cost, t + ttl));
                    }
                }
                5..=6 => {
                    let tok = tokens[rng.gen_range(0..tokens.len())];
                    let got = key.renew(&[tok], ttl, t, t);
                    assert_eq!(got, vec![model.renew(tok, ttl, t)], "{what}: renew {tok}");
                }
                7..=8 => {
                    let tok = tokens[rng.gen_range(0..tokens.len())];
                    let got = key.release(&[tok], t);
                    assert_eq!(got, vec![model.release(tok, t)], "{what}: release {tok}");
                }
                _ => {
                    let cost = rng.gen_range(0..=limit.min(3));
                    let tok = tokens[rng.gen_range(0..tokens.len())];
                    let got = key.peek(limit, cost, Some(tok), t);
                    // The peek is the lease's answer without its writes.
                    let mut copy = Model {
                        leases: model.leases.clone(),
                    };
                    let mut want = copy.lease(limit, 1, cost, (cost > 0).then_some(tok), t);
                    if want[0] == 0 {
                        want[5] = model.live(t).map(|(_, &(_, e))| e - t).max().unwrap_or(0);
                    }
                    assert_eq!(got, want, "{what}: peek cost {cost}");
                }
            }
            // The key never expires while a unit is live, and every live
            // unit of the model is in the set with its expiry.
            for (tok, &(n, e)) in model.live(t) {
                let (_, scores) = key.walk(tok.as_bytes());
                assert_eq!(scores, lease_scores(e, n as usize), "{what}: {tok}");
                assert!(key.expire.is_some_and(|x| x >= e), "{what}: key expiry");
            }
            // Expired units never pile up to more than the limit plus the
            // units one step can add.
            let expired = key.members.values().filter(|&&s| s <= t as f64).count() as i64;
            assert!(
                expired < limit + 3 + 1,
                "{what}: {expired} expired units kept"
            );
        }
    }
}

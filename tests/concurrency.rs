//! The race the seeds' client code has: many clients at once must never be
//! admitted past the limit. 50 connections, each opened before a barrier,
//! send one command at the same moment.

mod common;

use common::*;
use redis::Connection;

const CLIENTS: usize = 50;

fn burst(server: &Server, line: &str) -> Vec<Vec<i64>> {
    common::burst(server, CLIENTS, line)
}

fn assert_all_keys_expire(con: &mut Connection, keys: &[&str]) {
    for k in keys {
        let ttl = pttl(con, k);
        assert!(ttl > 0, "{k}: PTTL {ttl}");
    }
}

#[test]
fn concurrent_check_admits_exactly_the_limit() {
    let s = Server::start();
    let mut con = s.con();
    for round in 0..3 {
        let key = format!("k{round}");
        let replies = burst(&s, &format!("RL.CHECK {key} * 10 1000"));
        let admitted = replies.iter().filter(|r| r[0] == 0).count();
        assert_eq!(admitted, 10, "round {round}: {replies:?}");
        for r in &replies {
            assert_eq!(r.len(), 6);
            assert_eq!(&r[1..3], &[1, 10]);
            if r[0] == 1 {
                assert!(r[4] > 0 && r[4] <= 1000, "{r:?}");
            }
        }
        // Each admitted call saw a different remaining count.
        let mut remaining: Vec<i64> = replies.iter().filter(|r| r[0] == 0).map(|r| r[3]).collect();
        remaining.sort_unstable();
        assert_eq!(remaining, (0..10).collect::<Vec<i64>>());
        assert_eq!(zrange(&mut con, &key).len(), 10);
        assert_all_keys_expire(&mut con, &[&key]);
    }
}

#[test]
fn concurrent_dayhour_admits_exactly_the_hour_limit() {
    let s = Server::start();
    let mut con = s.con();
    for round in 0..3 {
        let (day, hour) = (format!("{{u{round}}}:day"), format!("{{u{round}}}:hour"));
        let replies = burst(
            &s,
            &format!("RL.DAYHOUR {day} {hour} 1000000 10 86400000 3600000"),
        );
        let admitted: Vec<&Vec<i64>> = replies.iter().filter(|r| r[1] <= 10).collect();
        assert_eq!(admitted.len(), 10, "round {round}: {replies:?}");
        let mut hours: Vec<i64> = admitted.iter().map(|r| r[1]).collect();
        hours.sort_unstable();
        assert_eq!(hours, (1..=10).collect::<Vec<i64>>());
        for r in &replies {
            if r[1] > 10 {
                assert_eq!(r, &vec![10, 11], "a refusal after the hour filled");
            }
        }
        assert_eq!(get(&mut con, &day).as_deref(), Some("10"));
        assert_eq!(get(&mut con, &hour).as_deref(), Some("10"));
        assert_all_keys_expire(&mut con, &[&day, &hour]);
    }
}

#[test]
fn concurrent_lockcount_admits_exactly_max() {
    let s = Server::start();
    let mut con = s.con();
    for round in 0..3 {
        let (lock, count) = (format!("{{l{round}}}:lock"), format!("{{l{round}}}:count"));
        let replies = burst(&s, &format!("RL.LOCKCOUNT {lock} {count} 60000 5 30000"));
        let admitted = replies.iter().filter(|r| r[0] == 0).count();
        assert_eq!(admitted, 5, "round {round}: {replies:?}");
        let trips: Vec<&Vec<i64>> = replies.iter().filter(|r| r[..2] == [1, 5]).collect();
        assert_eq!(
            trips.len(),
            1,
            "exactly one call trips the lock: {replies:?}"
        );
        assert_eq!(trips[0][2], 30000);
        for r in &replies {
            if r[0] == 1 && r[1] != 5 {
                assert_eq!(r[1], 0, "{r:?}");
                assert!(r[2] > 0 && r[2] <= 30000, "{r:?}");
            }
        }
        assert!(!exists(&mut con, &count), "the count key is deleted");
        assert_eq!(get(&mut con, &lock).as_deref(), Some("1"));
        assert_all_keys_expire(&mut con, &[&lock]);
    }
}

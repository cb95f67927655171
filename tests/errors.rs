//! Every error reply names what is wrong and leaves the keyspace byte for
//! byte unchanged; errors come in the contract's order (arguments, then
//! WRONGTYPE, then stored values).

mod common;

use common::*;
use redis::Connection;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// Keys of every kind the commands meet, each with an expiry or without.
fn fixtures(con: &mut Connection) {
    for line in [
        "ZADD z 100 a 200 b",
        "PEXPIRE z 900000",
        "ZADD zperm 100 a",
        "ZADD zinf inf a 100 b",
        "ZADD zneginf -inf a",
        "ZADD zbig 1e16 a",
        "ZADD znegbig -1e16 a 5 b",
        "ZADD z2p53 9007199254740992 a",
        "SET s 5 PX 900000",
        "SET sperm 2",
        "SET sabc abc PX 900000",
        "SET sxyz xyz",
        "SET s05 05",
        "SET splus +1",
        "SET sfrac 1.5",
        "SET shuge 9007199254740992",
        "SET sneghuge -9007199254740992",
        "RPUSH l a b",
        "HSET h f v",
        "PEXPIRE h 900000",
        "SADD set m",
    ] {
        run(con, line);
    }
    redis::cmd("SET")
        .arg("sempty")
        .arg("")
        .query::<()>(con)
        .expect("SET sempty");
}

/// Runs `line`, expects an error whose text starts with `prefix` and contains
/// every needle (case-insensitive), and checks the keyspace did not move.
fn check_error(con: &mut Connection, line: &str, prefix: &str, needles: &[&str]) {
    let before = snapshot(con);
    let text = err(con, line);
    let after = snapshot(con);
    assert!(
        text.starts_with(prefix),
        "{line}: error {text:?} should start with {prefix:?}"
    );
    let lower = text.to_lowercase();
    for n in needles {
        assert!(
            lower.contains(&n.to_lowercase()),
            "{line}: error {text:?} should name {n:?}"
        );
    }
    assert!(
        !text.contains('\n') && !text.contains('\r'),
        "{line}: {text:?}"
    );
    assert_same_keyspace(&before, &after, line);
}

fn arg_error(con: &mut Connection, line: &str, needles: &[&str]) {
    check_error(con, line, "ERR ", needles);
}

fn wrongtype(con: &mut Connection, line: &str) {
    let text = err(con, line);
    assert_eq!(text, WRONGTYPE, "{line}");
    check_error(con, line, WRONGTYPE, &[]);
}

fn arity(con: &mut Connection, line: &str) {
    let name = line
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_lowercase();
    check_error(
        con,
        line,
        &format!("ERR wrong number of arguments for '{name}' command"),
        &[],
    );
}

#[test]
fn check_and_peek_argument_errors() {
    let s = Server::start();
    let mut con = s.con();
    fixtures(&mut con);
    for cmd in ["RL.CHECK", "RL.PEEK"] {
        // Both on a missing key (must not be created) and on an existing one.
        for key in ["missing", "z"] {
            let cases: &[(&str, &[&str])] = &[
                ("* 10 0", &["window", "'0'", "rule 1"]),
                ("* 10 1000 5 0", &["window", "'0'", "rule 2"]),
                (
                    "* 10 9223372036854775807",
                    &["window", "9223372036854775807"],
                ),
                ("* 10 9007199254740992", &["window", "9007199254740992"]),
                ("* 10 -5", &["window", "-5"]),
                ("* 10 1.5", &["window", "1.5"]),
                ("* +5 1000", &["count", "+5"]),
                ("* 05 1000", &["count", "05"]),
                ("* 0 1000", &["count", "'0'"]),
                ("* -1 1000", &["count", "-1"]),
                ("* 5.0 1000", &["count", "5.0"]),
                ("* 10 1000 -0 1000", &["count", "-0", "rule 2"]),
                ("* 9007199254740992 1000", &["count", "9007199254740992"]),
                ("* 10 1000 20", &["window", "rule 2"]),
                ("9007199254740993 10 1000", &["now", "9007199254740993"]),
                ("9007199254740992 10 1000", &["now", "9007199254740992"]),
                ("-1 10 1000", &["now", "-1"]),
                ("12.5 10 1000", &["now", "12.5"]),
                ("** 10 1000", &["now", "**"]),
                ("* 10 1000 LIMIT 1", &["LIMIT"]),
                ("* 10 1000 NX", &["NX"]),
                ("* 10 1000 COST -1", &["cost", "-1"]),
                ("* 20000 1000 COST 10001", &["cost", "10001"]),
                ("* 10 1000 5 60000 COST 6", &["cost", "'6'"]),
                ("* 10 1000 COST 11", &["cost", "11"]),
                ("* 10 1000 COST x", &["cost", "'x'"]),
                ("* 10 1000 COST 1.5", &["cost", "1.5"]),
                ("* 10 1000 COST", &["cost"]),
                ("* 10 1000 COST 1 COST 1", &["cost"]),
                ("* 10 1000 cost 1 Cost 2", &["cost"]),
            ];
            for (rest, needles) in cases {
                arg_error(&mut con, &format!("{cmd} {key} {rest}"), needles);
            }
            // COST 0 is the state now: a peek's, an argument error of RL.CHECK.
            if cmd == "RL.CHECK" {
                arg_error(
                    &mut con,
                    &format!("{cmd} {key} * 10 1000 COST 0"),
                    &["cost", "'0'"],
                );
            }
        }
    }
    assert!(!exists(&mut con, "missing"));
}

#[test]
fn check_and_peek_type_stored_and_arity_errors() {
    let s = Server::start();
    let mut con = s.con();
    fixtures(&mut con);
    for cmd in ["RL.CHECK", "RL.PEEK"] {
        for key in ["s", "sperm", "l", "h", "set"] {
            wrongtype(&mut con, &format!("{cmd} {key} * 10 1000"));
            wrongtype(&mut con, &format!("{cmd} {key} 1000 10 1000 COST 2"));
        }
        for key in ["zinf", "zneginf", "zbig", "znegbig", "z2p53"] {
            check_error(&mut con, &format!("{cmd} {key} * 10 1000"), "ERR ", &[key]);
            check_error(&mut con, &format!("{cmd} {key} 5000 1 10"), "ERR ", &[key]);
        }
        arity(&mut con, cmd);
        arity(&mut con, &format!("{cmd} z"));
        arity(&mut con, &format!("{cmd} z *"));
        arity(&mut con, &format!("{cmd} z * 10"));
        arity(&mut con, &format!("{cmd} missing * 0"));
    }
    // The extremes of the allowed score range are not stored-value errors.
    run(&mut con, "ZADD zmax 9007199254740991 a -9007199254740991 b");
    for cmd in ["RL.PEEK", "RL.CHECK"] {
        let r = ints(&mut con, &format!("{cmd} zmax * 5 1000"));
        assert_eq!(r[0], 0, "{cmd}: {r:?}");
    }
}

#[test]
fn dayhour_errors() {
    let s = Server::start();
    let mut con = s.con();
    fixtures(&mut con);
    for (args, needles) in [
        ("d hr -1 5 1000 1000", &["daylimit", "-1"][..]),
        ("d hr +5 5 1000 1000", &["daylimit", "+5"]),
        ("d hr 5 05 1000 1000", &["hourlimit", "05"]),
        ("d hr 5 x 1000 1000", &["hourlimit", "'x'"]),
        ("d hr 9007199254740992 5 1000 1000", &["daylimit"]),
        ("d hr 5 5 0 1000", &["dayttl", "'0'"]),
        ("d hr 5 5 1000 0", &["hourttl", "'0'"]),
        ("d hr 5 5 1000 9007199254740992", &["hourttl"]),
        ("d hr 5 5 9223372036854775807 1000", &["dayttl"]),
        ("d hr 5 5 1.5 1000", &["dayttl", "1.5"]),
        ("d d 5 5 1000 1000", &["daykey", "hourkey"]),
        ("s s 5 5 1000 1000", &["daykey", "hourkey"]),
    ] {
        arg_error(&mut con, &format!("RL.DAYHOUR {args}"), needles);
    }
    for args in ["l hr", "d l", "z hr", "d h", "s set", "h l"] {
        wrongtype(&mut con, &format!("RL.DAYHOUR {args} 5 5 1000 1000"));
    }
    // Stored values that INCR would refuse: each names its key's role.
    for bad in [
        "sabc", "sxyz", "s05", "splus", "sfrac", "shuge", "sneghuge", "sempty",
    ] {
        check_error(
            &mut con,
            &format!("RL.DAYHOUR {bad} hr 5 5 1000 1000"),
            "ERR ",
            &["daykey"],
        );
        check_error(
            &mut con,
            &format!("RL.DAYHOUR s {bad} 5 5 1000 1000"),
            "ERR ",
            &["hourkey"],
        );
    }
    // Also when a limit of 0 would refuse anyway.
    check_error(
        &mut con,
        "RL.DAYHOUR d sabc 0 5 1000 1000",
        "ERR ",
        &["hourkey"],
    );
    arity(&mut con, "RL.DAYHOUR");
    arity(&mut con, "RL.DAYHOUR d hr 5 5 1000");
    arity(&mut con, "RL.DAYHOUR d hr 5 5 1000 1000 1000");
    arity(&mut con, "RL.DAYHOUR d hr x 5 1000");
    assert!(!exists(&mut con, "d") && !exists(&mut con, "hr"));
}

#[test]
fn lockcount_errors() {
    let s = Server::start();
    let mut con = s.con();
    fixtures(&mut con);
    for (args, needles) in [
        ("lk c 0 5 1000", &["window", "'0'"][..]),
        ("lk c 9007199254740992 5 1000", &["window"]),
        ("lk c 05 5 1000", &["window", "05"]),
        ("lk c 1000 -1 1000", &["max", "-1"]),
        ("lk c 1000 +1 1000", &["max", "+1"]),
        ("lk c 1000 abc 1000", &["max", "abc"]),
        ("lk c 1000 5 0", &["locktime", "'0'"]),
        ("lk c 1000 5 -7", &["locktime", "-7"]),
        ("lk c 1000 5 9223372036854775807", &["locktime"]),
        ("lk lk 1000 5 1000", &["lockkey", "countkey"]),
        ("s s 1000 5 1000", &["lockkey", "countkey"]),
    ] {
        arg_error(&mut con, &format!("RL.LOCKCOUNT {args}"), needles);
    }
    // The count key is validated first, even when the lock key exists.
    for args in ["lk l", "lk h", "lk z", "s l", "l h", "zinf set"] {
        wrongtype(&mut con, &format!("RL.LOCKCOUNT {args} 1000 5 1000"));
    }
    for bad in ["sabc", "s05", "sfrac", "shuge", "sneghuge", "sempty"] {
        for lock in ["lk", "s", "l"] {
            check_error(
                &mut con,
                &format!("RL.LOCKCOUNT {lock} {bad} 1000 5 1000"),
                "ERR ",
                &["countkey"],
            );
        }
        // max 0 would trip the lock: still refused, no lock set.
        check_error(
            &mut con,
            &format!("RL.LOCKCOUNT lk {bad} 1000 0 1000"),
            "ERR ",
            &["countkey"],
        );
    }
    arity(&mut con, "RL.LOCKCOUNT");
    arity(&mut con, "RL.LOCKCOUNT lk c 1000 5");
    arity(&mut con, "RL.LOCKCOUNT lk c 1000 5 1000 1");
    arity(&mut con, "RL.LOCKCOUNT lk lk 0 5");
    assert!(!exists(&mut con, "lk") && !exists(&mut con, "c"));
}

#[test]
fn errors_come_in_contract_order() {
    let s = Server::start();
    let mut con = s.con();
    fixtures(&mut con);
    // Argument errors before WRONGTYPE.
    arg_error(&mut con, "RL.DAYHOUR l hr x 5 1000 1000", &["daylimit"]);
    arg_error(&mut con, "RL.DAYHOUR d l 5 5 1000 0", &["hourttl"]);
    arg_error(
        &mut con,
        "RL.DAYHOUR l l 5 5 1000 1000",
        &["daykey", "hourkey"],
    );
    arg_error(&mut con, "RL.CHECK l * 0 1000", &["count"]);
    arg_error(&mut con, "RL.CHECK h * 10 1000 COST 0", &["cost"]);
    arg_error(&mut con, "RL.PEEK h * 10 1000 COST -1", &["cost"]);
    arg_error(&mut con, "RL.LOCKCOUNT lk l 1000 x 1000", &["max"]);
    arg_error(&mut con, "RL.LOCKCOUNT h h 1000 5 1000", &["lockkey"]);
    // Argument errors before stored-value errors.
    arg_error(&mut con, "RL.CHECK zinf * 10 1000 COST 11", &["cost"]);
    arg_error(&mut con, "RL.PEEK zbig 9007199254740993 10 1000", &["now"]);
    arg_error(&mut con, "RL.DAYHOUR sabc sxyz 5 5 0 1000", &["dayttl"]);
    arg_error(&mut con, "RL.LOCKCOUNT lk sabc 0 5 1000", &["window"]);
    arg_error(&mut con, "RL.DAYHOUR sabc sabc 5 5 1000 1000", &["daykey"]);
    // WRONGTYPE before stored-value errors, whatever the key order.
    wrongtype(&mut con, "RL.DAYHOUR sabc l 5 5 1000 1000");
    wrongtype(&mut con, "RL.DAYHOUR h sabc 5 5 1000 1000");
    wrongtype(&mut con, "RL.LOCKCOUNT sabc z 1000 5 1000");
    // Stored-value errors in key order.
    check_error(
        &mut con,
        "RL.DAYHOUR sabc sxyz 5 5 1000 1000",
        "ERR ",
        &["daykey", "abc"],
    );
    check_error(
        &mut con,
        "RL.DAYHOUR s05 sabc 5 5 1000 1000",
        "ERR ",
        &["daykey", "05"],
    );
    // Arity before everything.
    arity(&mut con, "RL.DAYHOUR l l x x x");
    arity(&mut con, "RL.LOCKCOUNT h h x x");
    arity(&mut con, "RL.CHECK l x x");
}

#[test]
fn errors_on_binary_arguments_are_one_line() {
    let s = Server::start();
    let mut con = s.con();
    fixtures(&mut con);
    let cases: Vec<Vec<&[u8]>> = vec![
        vec![b"RL.CHECK", b"k", b"*", b"10", b"\r\n0"],
        vec![b"RL.CHECK", b"k", b"\xff\xfe", b"10", b"1000"],
        vec![b"RL.CHECK", b"k", b"", b"10", b"1000"],
        vec![b"RL.CHECK", b"k", b"*", b"", b"1000"],
        vec![b"RL.PEEK", b"k\x00", b"*", b"10", b"1000", b"C\x00ST", b"1"],
        vec![b"RL.DAYHOUR", b"d", b"h", b"1\x00", b"1", b"1", b"1"],
        vec![b"RL.LOCKCOUNT", b"a", b"b", b"1", b"1", b"\n"],
        vec![b"RL.LOCKCOUNT", b"\xff", b"\xff", b"1", b"1", b"1"],
    ];
    for parts in cases {
        let what = format!("{parts:?}");
        let before = snapshot(&mut con);
        let text = expect_error(&mut con, &raw_cmd(&parts), &what);
        assert!(text.starts_with("ERR "), "{what}: {text:?}");
        assert!(!text.contains(['\r', '\n', '\0']), "{what}: {text:?}");
        assert_same_keyspace(&before, &snapshot(&mut con), &what);
    }
    // A long bad argument is reported, not echoed whole.
    let long = "9".repeat(100_000);
    let text = err(&mut con, &format!("RL.CHECK k * 10 {long}"));
    assert!(
        text.starts_with("ERR ") && text.contains("window"),
        "{text:.200}"
    );
}

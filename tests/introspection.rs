//! What Redis knows about the commands: INFO counters, COMMAND GETKEYS,
//! COMMAND INFO flags and key specs, and ACL key permissions built on them.

mod common;

use std::collections::HashMap;

use common::*;
use redis::{Connection, Value};

const PREFIXES: [&str; 12] = [
    "check",
    "peek",
    "dayhour",
    "lockcount",
    "throttle",
    "throttlepeek",
    "quota",
    "quotapeek",
    "lease",
    "leasepeek",
    "all",
    "allpeek",
];

/// `[calls, admitted, rejected, errors]` per command prefix.
fn counters(con: &mut Connection) -> HashMap<&'static str, [u64; 4]> {
    let stats = rl_stats(con);
    PREFIXES
        .iter()
        .map(|p| {
            let f = |s: &str| {
                *stats
                    .get(&format!("ratelimit_{p}_{s}"))
                    .unwrap_or_else(|| panic!("INFO ratelimit lacks ratelimit_{p}_{s}: {stats:?}"))
            };
            (*p, [f("calls"), f("admitted"), f("rejected"), f("errors")])
        })
        .collect()
}

#[test]
fn info_counters_move_by_the_right_amounts() {
    if module_only(
        "the module's command table, INFO section, ACL key specs and MODULE LIST: SPEC 'The Functions library', not covered (FCALL's numkeys, the INFO section, ACL by command)",
    ) {
        return;
    }
    let s = Server::start();
    let mut con = s.con();
    let mut want: HashMap<&str, [u64; 4]> = PREFIXES.iter().map(|p| (*p, [0; 4])).collect();
    assert_eq!(counters(&mut con), want, "fresh server");
    // Four per command, `_refunds` and `_debits` for the commands that take
    // REFUND and DEBIT; RL.RELEASE three and RL.RENEW four (units and lost
    // tokens), RL.ALL four and `all_refunds` (it has no DEBIT) (SPEC
    // "Observability").
    assert_eq!(rl_stats(&mut con).len(), 62, "exactly the 62 counters");
    assert_eq!(rl_stats(&mut con)["ratelimit_all_refunds"], 0);
    assert!(!rl_stats(&mut con).contains_key("ratelimit_all_debits"));
    for name in ["check", "throttle", "quota"] {
        for kind in ["refunds", "debits"] {
            assert_eq!(rl_stats(&mut con)[&format!("ratelimit_{name}_{kind}")], 0);
        }
    }
    let info: String = redis::cmd("INFO").arg("ratelimit").query(&mut con).unwrap();
    let tzdb = info_field(&info, "ratelimit_tzdb_version").expect("tzdb_version");
    assert!(tzdb.len() == 5 && tzdb.starts_with("20"), "{tzdb}");
    assert_eq!(
        info_field(&info, "ratelimit_version").as_deref(),
        Some(env!("CARGO_PKG_VERSION")),
        "INFO ratelimit shows the crate's version"
    );
    // Two text fields and the counters, nothing else.
    let fields = info_map(&info);
    let section: Vec<&String> = fields
        .keys()
        .filter(|k| k.starts_with("ratelimit_"))
        .collect();
    assert_eq!(section.len(), 62 + INFO_TEXT_FIELDS.len(), "{section:?}");
    run(&mut con, "RPUSH list a");

    // RL.CHECK: 2 admitted, 1 rejected, 2 errors; an arity error is not counted.
    ints(&mut con, "RL.CHECK c * 2 100000");
    ints(&mut con, "RL.CHECK c * 2 100000");
    assert_eq!(ints(&mut con, "RL.CHECK c * 2 100000")[0], 1);
    err(&mut con, "RL.CHECK c * 2 0");
    err(&mut con, "RL.CHECK list * 2 1000");
    err(&mut con, "RL.CHECK c * 2");
    want.insert("check", [5, 2, 1, 2]);
    assert_eq!(counters(&mut con), want, "after RL.CHECK");

    // RL.PEEK counts what it would do; RL.CHECK's counters do not move.
    assert_eq!(ints(&mut con, "RL.PEEK c * 2 100000")[0], 1);
    assert_eq!(ints(&mut con, "RL.PEEK c * 3 100000")[0], 0);
    assert_eq!(ints(&mut con, "RL.PEEK other * 3 100000")[0], 0);
    err(&mut con, "RL.PEEK c * 3 100000 COST 4");
    err(&mut con, "RL.PEEK c");
    want.insert("peek", [4, 2, 1, 1]);
    assert_eq!(counters(&mut con), want, "after RL.PEEK");

    // RL.DAYHOUR: 1 admitted, 2 refused (a limit of 0 too), 2 errors.
    assert_eq!(ints(&mut con, "RL.DAYHOUR d h 5 1 100000 100000"), [1, 1]);
    assert_eq!(ints(&mut con, "RL.DAYHOUR d h 5 1 100000 100000"), [1, 2]);
    assert_eq!(ints(&mut con, "RL.DAYHOUR d2 h2 0 1 100000 100000"), [1, 0]);
    err(&mut con, "RL.DAYHOUR d d 5 1 100000 100000");
    err(&mut con, "RL.DAYHOUR list h 5 1 100000 100000");
    err(&mut con, "RL.DAYHOUR d h 5 1 100000");
    want.insert("dayhour", [5, 1, 2, 2]);
    assert_eq!(counters(&mut con), want, "after RL.DAYHOUR");

    // RL.LOCKCOUNT: 2 admitted, the trip and a locked call rejected, 1 error.
    assert_eq!(
        ints(&mut con, "RL.LOCKCOUNT lk n 100000 2 100000")[..2],
        [0, 1]
    );
    assert_eq!(
        ints(&mut con, "RL.LOCKCOUNT lk n 100000 2 100000")[..2],
        [0, 2]
    );
    assert_eq!(
        ints(&mut con, "RL.LOCKCOUNT lk n 100000 2 100000"),
        [1, 2, 100000]
    );
    assert_eq!(
        ints(&mut con, "RL.LOCKCOUNT lk n 100000 2 100000")[..2],
        [1, 0]
    );
    err(&mut con, "RL.LOCKCOUNT lk n 100000 -2 100000");
    err(&mut con, "RL.LOCKCOUNT lk n 100000 2 100000 extra");
    want.insert("lockcount", [5, 2, 2, 1]);
    assert_eq!(counters(&mut con), want, "after RL.LOCKCOUNT");

    // RL.THROTTLE: 1 admitted, 1 rejected, 1 refund and 1 debit (neither
    // admitted nor rejected: a debit that leaves the bucket over its limit
    // answers limited 1 all the same), 1 error; its peek counts what it
    // would do.
    assert_eq!(ints(&mut con, "RL.THROTTLE th 5 1 1 100000")[0], 0);
    assert_eq!(ints(&mut con, "RL.THROTTLE th 5 1 1 100000")[0], 1);
    assert_eq!(ints(&mut con, "RL.THROTTLE th 5 1 1 100000 REFUND")[0], 0);
    assert_eq!(
        ints(&mut con, "RL.THROTTLE th 5 1 1 100000 COST 3 DEBIT")[0],
        1
    );
    err(&mut con, "RL.THROTTLE th 5 1 1 100000 COST 2");
    want.insert("throttle", [5, 1, 1, 1]);
    assert_eq!(ints(&mut con, "RL.THROTTLEPEEK th 5 1 1 100000")[0], 1);
    err(&mut con, "RL.THROTTLEPEEK th 5 1 1 100000 REFUND");
    want.insert("throttlepeek", [2, 0, 1, 1]);
    assert_eq!(counters(&mut con), want, "after RL.THROTTLE");
    assert_eq!(rl_stats(&mut con)["ratelimit_throttle_refunds"], 1);
    assert_eq!(rl_stats(&mut con)["ratelimit_throttle_debits"], 1);
    assert_eq!(rl_stats(&mut con)["ratelimit_check_refunds"], 0);
    assert_eq!(rl_stats(&mut con)["ratelimit_check_debits"], 0);

    // RL.ALL: 1 admitted, 1 rejected, 1 refund (neither), 2 errors (an
    // argument error, WRONGTYPE); an arity error is not counted. Its
    // clauses do not move their commands' counters.
    let all = "RL.ALL 2 a:c a:t * CHECK 1 1 100000 THROTTLE 2 5 1 100000";
    assert_eq!(ints(&mut con, all)[0], 0);
    assert_eq!(ints(&mut con, all)[0], 1);
    assert_eq!(ints(&mut con, &format!("{all} REFUND"))[0], 0);
    err(
        &mut con,
        "RL.ALL 2 a:c a:c * CHECK 1 1 100000 THROTTLE 2 5 1 100000",
    );
    err(&mut con, "RL.ALL 1 list * CHECK 1 1 100000");
    err(&mut con, "RL.ALL 1 a:c");
    want.insert("all", [5, 1, 1, 2]);
    assert_eq!(
        ints(
            &mut con,
            "RL.ALLPEEK 2 a:c a:t * CHECK 1 1 100000 THROTTLE 2 5 1 100000"
        )[0],
        0
    );
    err(&mut con, "RL.ALLPEEK 1 a:c * CHECK 1 1 100000 REFUND");
    want.insert("allpeek", [2, 1, 0, 1]);
    assert_eq!(counters(&mut con), want, "after RL.ALL");
    assert_eq!(rl_stats(&mut con)["ratelimit_all_refunds"], 1);

    // CONFIG RESETSTAT clears Redis's own command stats but not these.
    let before: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut con)
        .unwrap();
    assert!(before.contains("cmdstat_rl.check:"), "{before}");
    run(&mut con, "CONFIG RESETSTAT");
    let after: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut con)
        .unwrap();
    assert!(
        !after.contains("cmdstat_rl.check:"),
        "RESETSTAT ran: {after}"
    );
    assert_eq!(counters(&mut con), want, "after CONFIG RESETSTAT");

    // The same fields in INFO modules and INFO everything.
    for section in ["modules", "everything"] {
        let info: String = redis::cmd("INFO").arg(section).query(&mut con).unwrap();
        let map = info_map(&info);
        for p in PREFIXES {
            let w = want[p];
            for (i, s) in ["calls", "admitted", "rejected", "errors"]
                .iter()
                .enumerate()
            {
                let field = format!("ratelimit_{p}_{s}");
                assert_eq!(
                    map.get(&field).map(String::as_str),
                    Some(w[i].to_string().as_str()),
                    "INFO {section}: {field}"
                );
            }
        }
    }
}

/// A reply flattened to strings (status, bulk and integers alike).
fn flat(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) | Value::Set(items) => items.iter().flat_map(flat).collect(),
        Value::Map(pairs) => pairs
            .iter()
            .flat_map(|(k, v)| flat(k).into_iter().chain(flat(v)))
            .collect(),
        Value::BulkString(b) => vec![show(b)],
        Value::SimpleString(s) => vec![s.clone()],
        Value::Okay => vec!["OK".into()],
        Value::Int(n) => vec![n.to_string()],
        other => vec![format!("{other:?}")],
    }
}

/// `COMMAND INFO name`: (arity, flags, flags of each key spec).
fn command_info(con: &mut Connection, name: &str) -> (i64, Vec<String>, Vec<Vec<String>>) {
    let reply: Vec<Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg(name)
        .query(con)
        .unwrap();
    let Some(Value::Array(entry)) = reply.first() else {
        panic!("COMMAND INFO {name}: {reply:?}");
    };
    let arity = match &entry[1] {
        Value::Int(n) => *n,
        other => panic!("arity {other:?}"),
    };
    let flags = flat(&entry[2]);
    let specs = match &entry[8] {
        Value::Array(specs) => specs
            .iter()
            .map(|spec| {
                let Value::Array(kv) = spec else {
                    panic!("key spec {spec:?}")
                };
                let i = kv
                    .iter()
                    .position(|x| flat(x) == ["flags"])
                    .expect("key spec flags");
                flat(&kv[i + 1])
            })
            .collect(),
        other => panic!("key specs of {name}: {other:?}"),
    };
    (arity, flags, specs)
}

#[test]
fn command_info_flags_arity_and_key_specs() {
    if module_only(
        "the module's command table, INFO section, ACL key specs and MODULE LIST: SPEC 'The Functions library', not covered (FCALL's numkeys, the INFO section, ACL by command)",
    ) {
        return;
    }
    let s = Server::start();
    let mut con = s.con();
    let (arity, flags, specs) = command_info(&mut con, "rl.peek");
    assert_eq!(arity, -5);
    assert!(flags.iter().any(|f| f == "readonly"), "{flags:?}");
    assert!(!flags.iter().any(|f| f == "write"), "{flags:?}");
    assert_eq!(specs.len(), 1);
    assert!(specs[0].iter().any(|f| f == "RO"), "{specs:?}");
    assert!(!flags.iter().any(|f| f == "fast"), "{flags:?}");
    let (arity, flags, specs) = command_info(&mut con, "rl.throttlepeek");
    assert_eq!(arity, -6);
    assert!(flags.iter().any(|f| f == "readonly"), "{flags:?}");
    assert!(flags.iter().any(|f| f == "fast"), "{flags:?}");
    assert!(specs[0].iter().any(|f| f == "RO"), "{specs:?}");
    let (arity, flags, specs) = command_info(&mut con, "rl.leasepeek");
    assert_eq!(arity, -4);
    assert!(flags.iter().any(|f| f == "readonly"), "{flags:?}");
    assert!(flags.iter().any(|f| f == "fast"), "{flags:?}");
    assert!(specs[0].iter().any(|f| f == "RO"), "{specs:?}");
    let (arity, flags, specs) = command_info(&mut con, "rl.allpeek");
    assert_eq!(arity, -5);
    assert!(flags.iter().any(|f| f == "readonly"), "{flags:?}");
    assert!(flags.iter().any(|f| f == "movablekeys"), "{flags:?}");
    assert!(!flags.iter().any(|f| f == "fast"), "{flags:?}");
    assert_eq!(specs.len(), 1);
    assert!(specs[0].iter().any(|f| f == "RO"), "{specs:?}");
    for (name, arity) in [
        ("rl.lease", -5),
        ("rl.release", -4),
        ("rl.renew", -5),
        ("rl.all", -5),
    ] {
        let (a, flags, _) = command_info(&mut con, name);
        assert_eq!(a, arity, "{name}");
        assert!(!flags.iter().any(|f| f == "fast"), "{name}: {flags:?}");
        assert!(!flags.iter().any(|f| f == "denyoom"), "{name}: {flags:?}");
    }
    for (name, arity, nkeys) in [
        ("rl.lease", -5, 1),
        ("rl.release", -4, 1),
        ("rl.renew", -5, 1),
        ("rl.check", -5, 1),
        ("rl.throttle", -6, 1),
        ("rl.dayhour", 7, 2),
        ("rl.lockcount", 6, 2),
        // One key-count spec for all its keys.
        ("rl.all", -5, 1),
    ] {
        let (a, flags, specs) = command_info(&mut con, name);
        assert_eq!(a, arity, "{name}");
        assert!(flags.iter().any(|f| f == "write"), "{name}: {flags:?}");
        assert!(!flags.iter().any(|f| f == "readonly"), "{name}: {flags:?}");
        assert_eq!(specs.len(), nkeys, "{name}: {specs:?}");
        for spec in &specs {
            assert!(spec.iter().any(|f| f == "RW"), "{name}: {specs:?}");
        }
    }
}

#[test]
fn command_getkeys_names_every_key() {
    if module_only(
        "the module's command table, INFO section, ACL key specs and MODULE LIST: SPEC 'The Functions library', not covered (FCALL's numkeys, the INFO section, ACL by command)",
    ) {
        return;
    }
    let s = Server::start();
    let mut con = s.con();
    for (line, keys) in [
        ("RL.CHECK k1 * 10 1000", vec!["k1"]),
        ("RL.CHECK k1 * 10 1000 100 60000 COST 2", vec!["k1"]),
        ("RL.PEEK {u}:k 123 10 1000", vec!["{u}:k"]),
        ("RL.THROTTLE t:1 * 5 1 1000 COST 2", vec!["t:1"]),
        ("RL.THROTTLEPEEK t:2 * 5 1 1000", vec!["t:2"]),
        ("RL.LEASE {u}:jobs * 3 60000 TOKEN j1", vec!["{u}:jobs"]),
        ("RL.LEASEPEEK l:1 * 3", vec!["l:1"]),
        ("RL.RELEASE l:2 * a b", vec!["l:2"]),
        ("RL.RENEW l:3 * 1000 a", vec!["l:3"]),
        (
            "RL.DAYHOUR {u}:day {u}:hour 10 5 86400000 3600000",
            vec!["{u}:day", "{u}:hour"],
        ),
        (
            "RL.LOCKCOUNT lock:1 count:1 1000 5 60000",
            vec!["lock:1", "count:1"],
        ),
        (
            "RL.ALL 3 {u}:a {u}:b {u}:c * CHECK 1 5 1000 THROTTLE 2 5 1 1000 QUOTA 3 UTC day 9",
            vec!["{u}:a", "{u}:b", "{u}:c"],
        ),
        (
            "RL.ALLPEEK 2 x y 100 LEASE 2 3 1000 CHECK 1 5 1000",
            vec!["x", "y"],
        ),
        ("RL.ALL 1 only * CHECK 1 5 1000", vec!["only"]),
    ] {
        let got: Vec<String> = words(&format!("COMMAND GETKEYS {line}"))
            .query(&mut con)
            .unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(got, keys, "{line}");
    }
}

#[test]
fn acl_key_permissions_follow_the_key_specs() {
    if module_only(
        "the module's command table, INFO section, ACL key specs and MODULE LIST: SPEC 'The Functions library', not covered (FCALL's numkeys, the INFO section, ACL by command)",
    ) {
        return;
    }
    let s = Server::start();
    let mut admin = s.con();
    run(&mut admin, "ACL SETUSER ro on >pw %R~* +@all");
    run(&mut admin, "ACL SETUSER peeker on >pw ~* -@all +rl.peek");
    run(&mut admin, "ACL SETUSER app on >pw ~app:* +@all");
    ints(&mut admin, "RL.CHECK app:k * 5 100000");
    let stats_before = counters(&mut admin);
    let user = |name: &str| {
        let client =
            redis::Client::open(format!("redis://{name}:pw@127.0.0.1:{}/", s.port)).unwrap();
        client.get_connection().unwrap()
    };
    let snap = snapshot(&mut admin);

    let mut ro = user("ro");
    assert_eq!(
        ints(&mut ro, "RL.PEEK app:k * 5 100000"),
        [0, 1, 5, 3, -1, 100000]
    );
    assert_eq!(
        ints(&mut ro, "RL.ALLPEEK 1 app:k * CHECK 1 5 100000"),
        [0, 1, 1, 5, 3, -1, 100000]
    );
    let mut refused = 0;
    for line in [
        "RL.ALL 1 app:k * CHECK 1 5 100000",
        "RL.CHECK app:k * 5 100000",
        "RL.DAYHOUR app:d app:h 5 5 1000 1000",
        "RL.LOCKCOUNT app:l app:c 1000 5 1000",
    ] {
        assert!(err(&mut ro, line).starts_with("NOPERM"), "ro: {line}");
        refused += 1;
    }

    let mut peeker = user("peeker");
    assert_eq!(ints(&mut peeker, "RL.PEEK app:k * 5 100000")[0], 0);
    assert!(err(&mut peeker, "RL.CHECK app:k * 5 100000").starts_with("NOPERM"));

    let mut app = user("app");
    assert_eq!(ints(&mut app, "RL.PEEK app:k * 5 100000")[0], 0);
    assert_eq!(
        ints(
            &mut app,
            "RL.ALLPEEK 2 app:k app:t * CHECK 1 5 100000 THROTTLE 2 5 1 1000"
        )[0],
        0
    );
    for line in [
        "RL.ALL 2 app:k other * CHECK 1 5 100000 THROTTLE 2 5 1 1000",
        "RL.ALL 2 other app:k * CHECK 2 5 100000 THROTTLE 1 5 1 1000",
        "RL.ALLPEEK 2 app:k other * CHECK 1 5 100000 THROTTLE 2 5 1 1000",
        "RL.PEEK other * 5 1000",
        "RL.CHECK other * 5 1000",
        "RL.DAYHOUR app:d other:h 5 5 1000 1000",
        "RL.DAYHOUR other:d app:h 5 5 1000 1000",
        "RL.LOCKCOUNT app:l other:c 1000 5 1000",
        "RL.LOCKCOUNT other:l app:c 1000 5 1000",
    ] {
        assert!(err(&mut app, line).starts_with("NOPERM"), "app: {line}");
        refused += 1;
    }
    assert_eq!(refused, 13);
    assert_same_keyspace(&snap, &snapshot(&mut admin), "refused by ACL");
    assert_eq!(
        ints(&mut app, "RL.DAYHOUR app:d app:h 5 5 100000 100000"),
        [1, 1]
    );

    // ACL refusals never reach the module: only the successful calls count.
    let mut want = stats_before;
    want.get_mut("allpeek").unwrap()[..2]
        .iter_mut()
        .for_each(|x| *x += 2);
    want.get_mut("peek").unwrap()[..2]
        .iter_mut()
        .for_each(|x| *x += 3);
    want.get_mut("dayhour").unwrap()[..2]
        .iter_mut()
        .for_each(|x| *x += 1);
    assert_eq!(counters(&mut admin), want);
}

/// `MODULE LIST`'s `ver` is the crate's semver as Redis modules encode it
/// (major * 10000 + minor * 100 + patch: 0.2.0 -> 200), read here from the
/// same Cargo.toml the module was built from.
#[test]
fn module_list_reports_the_crate_version() {
    if module_only(
        "the module's command table, INFO section, ACL key specs and MODULE LIST: SPEC 'The Functions library', not covered (FCALL's numkeys, the INFO section, ACL by command)",
    ) {
        return;
    }
    let s = Server::start();
    let mut con = s.con();
    let list: Vec<HashMap<String, Value>> =
        redis::cmd("MODULE").arg("LIST").query(&mut con).unwrap();
    let ours: Vec<_> = list
        .iter()
        .filter(
            |m| matches!(m.get("name"), Some(Value::BulkString(n)) if n.as_slice() == b"ratelimit"),
        )
        .collect();
    assert_eq!(ours.len(), 1, "{list:?}");
    let parts: Vec<i64> = env!("CARGO_PKG_VERSION")
        .split(['-', '+'])
        .next()
        .unwrap()
        .split('.')
        .map(|p| p.parse().unwrap())
        .collect();
    let want = parts[0] * 10000 + parts[1] * 100 + parts[2];
    assert!(want > 1, "a real version, not the old constant 1");
    assert_eq!(ours[0].get("ver"), Some(&Value::Int(want)), "{:?}", ours[0]);
}

//! Harness for the integration tests: a real `redis-server` with the module
//! loaded, on a free loopback port chosen at run time, in its own temporary
//! directory, killed when the [`Server`] guard is dropped. Plus helpers to run
//! commands, read error replies, and compare keyspace snapshots.
//!
//! Each test binary uses a subset of these helpers.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::{Connection, RedisError, RedisResult, Value};

/// The module under test: `$RL_MODULE`, else the release build of this crate.
pub fn module_path() -> PathBuf {
    let path = match std::env::var_os("RL_MODULE") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/libredis_ratelimit.so"),
    };
    let path = std::fs::canonicalize(&path).unwrap_or_else(|e| {
        panic!(
            "module not found at {} ({e}); run `cargo build --release` or set RL_MODULE",
            path.display()
        )
    });
    assert!(path.is_file(), "{} is not a file", path.display());
    path
}

/// `RL_BACKEND=functions`: the servers load the Functions library
/// (`functions/ratelimit.lua`) instead of the module, and [`words`] and
/// [`raw_cmd`] send `RL.X ...` as `FCALL rl_x numkeys key... arg...`, so the
/// same tests prove the library answers as the module does (SPEC.md, "The
/// Functions library"). Tests that cannot apply skip with [`module_only`].
pub fn functions_backend() -> bool {
    std::env::var("RL_BACKEND").is_ok_and(|b| b == "functions")
}

/// The library's source.
pub fn library_source() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("functions/ratelimit.lua");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// True (and says why) when the test cannot apply to the Functions
/// library: `reason` names the clause of SPEC.md that exempts it. A test
/// calls `if module_only("...") { return; }` first.
pub fn module_only(reason: &str) -> bool {
    if functions_backend() {
        eprintln!("not applicable to the Functions library: {reason}");
        return true;
    }
    false
}

/// `RL.X ...` as the library's FCALL (the keys as `COMMAND GETKEYS` reports
/// them for the module's command; a call the module refuses before its keys
/// goes with none, so the library answers the module's error); any other
/// command, and every command without `RL_BACKEND=functions`, as is.
pub fn to_fcall(parts: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let Some(name) = parts.first() else {
        return parts;
    };
    let upper = String::from_utf8_lossy(name).to_ascii_uppercase();
    if !functions_backend() || !upper.starts_with("RL.") {
        return parts;
    }
    let peek = matches!(
        upper.as_str(),
        "RL.PEEK" | "RL.THROTTLEPEEK" | "RL.QUOTAPEEK" | "RL.LEASEPEEK" | "RL.ALLPEEK"
    );
    let call: &[u8] = if peek { b"FCALL_RO" } else { b"FCALL" };
    let command = upper[3..].to_ascii_lowercase();
    let function = format!("rl_{command}").into_bytes();
    let mut rest = parts[1..].to_vec();
    let words: Vec<String> = rest
        .iter()
        .map(|w| String::from_utf8_lossy(w).to_ascii_uppercase())
        .collect();
    // Zones that keep one offset all year go as their offset, as the
    // clients send them to the library (SPEC: UTC and fixed offsets only).
    for i in 0..rest.len() {
        let zone_at = match upper.as_str() {
            "RL.QUOTA" | "RL.QUOTAPEEK" => i == 2,
            "RL.ALL" | "RL.ALLPEEK" => i >= 2 && words[i - 2] == "QUOTA",
            _ => false,
        };
        if let Some(offset) = zone_at.then(|| fixed_zone(&rest[i])).flatten() {
            rest[i] = offset.as_bytes().to_vec();
        }
    }
    // Refunds go through rl_refund (flagged allow-oom: SPEC "Memory").
    let refund = match upper.as_str() {
        "RL.CHECK" | "RL.THROTTLE" | "RL.QUOTA" => words.iter().skip(2).any(|w| w == "REFUND"),
        "RL.ALL" => {
            words.last().is_some_and(|w| w == "REFUND")
                || words.ends_with(&["REFUND".to_string(), "DETAILS".to_string()])
        }
        _ => false,
    };
    if upper == "RL.ALL" || upper == "RL.ALLPEEK" {
        let valid = rest.first().and_then(|n| {
            let text = std::str::from_utf8(n).ok()?;
            let v: usize = text.parse().ok()?;
            (text == v.to_string() && (1..=64).contains(&v) && v < rest.len()).then_some(v)
        });
        let Some(n) = valid else {
            let mut out = vec![call.to_vec(), function, b"0".to_vec()];
            out.extend(rest);
            return out;
        };
        if refund {
            let mut out = vec![b"FCALL".to_vec(), b"rl_refund".to_vec()];
            out.extend(rest[..=n].iter().cloned());
            out.push(b"all".to_vec());
            out.extend(rest[n + 1..].iter().cloned());
            return out;
        }
        let mut out = vec![call.to_vec(), function];
        out.extend(rest);
        return out;
    }
    let keys = if matches!(upper.as_str(), "RL.DAYHOUR" | "RL.LOCKCOUNT") {
        2
    } else {
        1
    };
    if refund && !rest.is_empty() {
        let mut out = vec![b"FCALL".to_vec(), b"rl_refund".to_vec(), b"1".to_vec()];
        out.push(rest[0].clone());
        out.push(command.into_bytes());
        out.extend(rest[1..].iter().cloned());
        return out;
    }
    let mut out = vec![call.to_vec(), function];
    out.push(keys.min(rest.len()).to_string().into_bytes());
    out.extend(rest);
    out
}

/// The offset of an IANA zone that keeps one all year (since 1992), as the
/// clients send it to the library. Also Europe/Paris and Europe/Berlin as
/// their standard offset: the tests that use them compare calls with each
/// other, not with daylight-saving buckets (the library does not cover
/// daylight saving: SPEC "The Functions library"; the tests about it skip).
fn fixed_zone(zone: &[u8]) -> Option<&'static str> {
    Some(match zone {
        b"Europe/Paris" | b"Europe/Berlin" => "+01:00",
        b"Asia/Shanghai" | b"Asia/Singapore" | b"Asia/Hong_Kong" => "+08:00",
        b"Asia/Tokyo" | b"Asia/Seoul" => "+09:00",
        b"Asia/Kolkata" => "+05:30",
        b"Asia/Dubai" => "+04:00",
        _ => return None,
    })
}

fn server_binary() -> String {
    std::env::var("RL_SERVER").unwrap_or_else(|_| "redis-server".to_string())
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

fn unique_dir() -> PathBuf {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "rl-rust-it-{}-{}-{nanos}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("create the server's temp dir");
    dir
}

/// One `redis-server` process with the module loaded. Killed (only this
/// child) and its directory removed on drop.
pub struct Server {
    child: Child,
    pub port: u16,
    dir: PathBuf,
}

impl Server {
    /// Starts a server; retries on another port if the chosen one was taken.
    pub fn start() -> Server {
        if functions_backend() {
            Server::launch(None)
        } else {
            Server::launch(Some(&module_path()))
        }
    }

    /// Starts a server with another build of the module loaded (never the
    /// library, whatever `RL_BACKEND` says).
    pub fn start_with(module: &Path) -> Server {
        Server::launch(Some(module))
    }

    /// Starts a server with `module` loaded, or the Functions library.
    fn launch(module: Option<&Path>) -> Server {
        let functions = module.is_none();
        let mut last_error = String::new();
        for _ in 0..5 {
            let dir = unique_dir();
            let port = free_port();
            let mut command = Command::new(server_binary());
            command
                .arg("--port")
                .arg(port.to_string())
                .args(["--bind", "127.0.0.1"])
                .arg("--dir")
                .arg(&dir)
                .args(["--save", "", "--appendonly", "no"])
                .args(["--logfile", "server.log"]);
            if let Some(module) = module {
                command.arg("--loadmodule").arg(module);
            }
            let child = command
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server (is it installed?)");
            let mut server = Server { child, port, dir };
            match server.wait_ready() {
                Ok(()) if functions => {
                    let mut con = server.con();
                    redis::cmd("FUNCTION")
                        .arg("LOAD")
                        .arg("REPLACE")
                        .arg(library_source())
                        .query::<String>(&mut con)
                        .expect("FUNCTION LOAD the library");
                    return server;
                }
                Ok(()) => return server,
                Err(e) => last_error = format!("{e}\n{}", server.log_tail()),
            }
            // Dropping kills the child and removes its directory.
        }
        panic!("redis-server did not start: {last_error}");
    }

    /// Waits until this very process answers on its port.
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("redis-server exited: {status}"));
            }
            if let Ok(mut con) = self.try_connect() {
                // The port may have been taken by another test's server: make
                // sure the one answering is ours.
                if let Ok(info) = redis::cmd("INFO").arg("server").query::<String>(&mut con) {
                    let pid = info_field(&info, "process_id");
                    if pid.as_deref() == Some(self.child.id().to_string().as_str()) {
                        return Ok(());
                    }
                    return Err("another server answered on the port".into());
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err("timed out waiting for redis-server".into())
    }

    fn try_connect(&self) -> RedisResult<Connection> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?;
        let con = client.get_connection_with_timeout(Duration::from_secs(2))?;
        con.set_read_timeout(Some(Duration::from_secs(30)))?;
        con.set_write_timeout(Some(Duration::from_secs(30)))?;
        Ok(con)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).expect("client")
    }

    /// A new connection with read/write timeouts, so a hang fails the test.
    pub fn con(&self) -> Connection {
        self.try_connect()
            .unwrap_or_else(|e| panic!("connect to 127.0.0.1:{}: {e}", self.port))
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Panics if the server process is gone (for example after a crash).
    pub fn assert_alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("redis-server died ({status}); log:\n{}", self.log_tail());
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let crashed = matches!(self.child.try_wait(), Ok(Some(_)));
        let log = if crashed {
            self.log_tail()
        } else {
            String::new()
        };
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
        if crashed && !std::thread::panicking() {
            panic!("redis-server exited before the test ended; log:\n{log}");
        }
    }
}

/// A `key:value` line of an INFO reply.
pub fn info_field(info: &str, name: &str) -> Option<String> {
    info.lines().find_map(|line| {
        let (k, v) = line.trim_end().split_once(':')?;
        (k == name).then(|| v.to_string())
    })
}

/// Every `key:value` line of an INFO reply.
pub fn info_map(info: &str) -> HashMap<String, String> {
    info.lines()
        .filter_map(|line| {
            let (k, v) = line.trim_end().split_once(':')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

/// Builds a command from whitespace-separated words.
pub fn words(line: &str) -> redis::Cmd {
    let parts: Vec<&str> = line.split_whitespace().collect();
    raw_cmd(&parts)
}

/// Builds a command from raw byte arguments (any bytes, empty ones too).
pub fn raw_cmd<A: AsRef<[u8]>>(parts: &[A]) -> redis::Cmd {
    let parts = to_fcall(parts.iter().map(|p| p.as_ref().to_vec()).collect());
    let (name, rest) = parts.split_first().expect("a command name");
    let mut cmd = redis::cmd(std::str::from_utf8(name).expect("ascii command name"));
    for p in rest {
        cmd.arg(p.as_slice());
    }
    cmd
}

/// Runs `line`, expects an array of integers.
pub fn ints(con: &mut Connection, line: &str) -> Vec<i64> {
    words(line)
        .query::<Vec<i64>>(con)
        .unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// Runs `line`, expects `OK`/any success (setup commands).
pub fn run(con: &mut Connection, line: &str) {
    words(line)
        .query::<Value>(con)
        .unwrap_or_else(|e| panic!("{line}: {e}"));
}

/// The full text of an error reply: `CODE detail`.
pub fn error_text(e: &RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => format!("{e}"),
    }
}

/// Runs `cmd`, expects an error reply; returns its full text.
pub fn expect_error(con: &mut Connection, cmd: &redis::Cmd, what: &str) -> String {
    match cmd.query::<Value>(con) {
        Ok(v) => panic!("{what}: expected an error reply, got {v:?}"),
        Err(e) => {
            assert!(
                e.code().is_some(),
                "{what}: expected a server error reply, got {e}"
            );
            error_text(&e)
        }
    }
}

/// Runs `line`, expects an error reply; returns its full text.
pub fn err(con: &mut Connection, line: &str) -> String {
    expect_error(con, &words(line), line)
}

/// The server's clock in ms (`TIME`), the clock `PEXPIRE` uses.
pub fn server_ms(con: &mut Connection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(con).expect("TIME");
    secs * 1000 + micros / 1000
}

pub fn get(con: &mut Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(con).expect("GET")
}

pub fn pttl(con: &mut Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(con).expect("PTTL")
}

pub fn pexpiretime(con: &mut Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME")
        .arg(key)
        .query(con)
        .expect("PEXPIRETIME")
}

pub fn exists(con: &mut Connection, key: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(key)
        .query::<i64>(con)
        .expect("EXISTS")
        == 1
}

/// `ZRANGE key 0 -1 WITHSCORES` as (member, score text).
pub fn zrange(con: &mut Connection, key: &str) -> Vec<(Vec<u8>, String)> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(con)
        .expect("ZRANGE")
}

/// What a key holds, as far as the tests can observe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyState {
    pub dump: Vec<u8>,
    /// Absolute expiry in ms, -1 without one.
    pub pexpiretime: i64,
    /// Remaining ms, -1 without expiry (moves with the clock).
    pub pttl: i64,
}

pub type Snapshot = BTreeMap<Vec<u8>, KeyState>;

/// Every key with its `DUMP`, `PEXPIRETIME` and `PTTL`.
pub fn snapshot(con: &mut Connection) -> Snapshot {
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(con).expect("KEYS");
    let mut pipe = redis::pipe();
    for k in &keys {
        pipe.cmd("DUMP").arg(k);
        pipe.cmd("PEXPIRETIME").arg(k);
        pipe.cmd("PTTL").arg(k);
    }
    let values: Vec<Value> = pipe.query(con).expect("snapshot pipeline");
    let mut out = Snapshot::new();
    for (k, v) in keys.into_iter().zip(values.chunks(3)) {
        let (dump, at, ttl) = match v {
            [Value::BulkString(d), Value::Int(at), Value::Int(ttl)] => (d.clone(), *at, *ttl),
            // The key expired or vanished between KEYS and DUMP.
            [Value::Nil, ..] => continue,
            other => panic!("unexpected snapshot reply for {k:?}: {other:?}"),
        };
        out.insert(
            k,
            KeyState {
                dump,
                pexpiretime: at,
                pttl: ttl,
            },
        );
    }
    out
}

/// Asserts two snapshots hold the same keys, values and expiry times. The
/// remaining TTL may only have gone down (the clock moved), never appear or
/// disappear.
pub fn assert_same_keyspace(before: &Snapshot, after: &Snapshot, what: &str) {
    let bk: Vec<String> = before.keys().map(|k| show(k)).collect();
    let ak: Vec<String> = after.keys().map(|k| show(k)).collect();
    assert_eq!(bk, ak, "{what}: the key set changed");
    for (k, b) in before {
        let a = &after[k];
        let name = show(k);
        assert_eq!(b.dump, a.dump, "{what}: the value of '{name}' changed");
        assert_eq!(
            b.pexpiretime, a.pexpiretime,
            "{what}: the expiry time of '{name}' changed"
        );
        if b.pttl == -1 {
            assert_eq!(a.pttl, -1, "{what}: '{name}' got a TTL");
        } else {
            assert!(
                a.pttl > 0 && a.pttl <= b.pttl,
                "{what}: PTTL of '{name}' went from {} to {}",
                b.pttl,
                a.pttl
            );
        }
    }
}

/// Bytes shown for messages.
pub fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The text fields of `INFO ratelimit`: every other field is a counter.
pub const INFO_TEXT_FIELDS: [&str; 2] = ["ratelimit_version", "ratelimit_tzdb_version"];

/// The counters of `INFO ratelimit` as `field -> value` (all but the
/// [`INFO_TEXT_FIELDS`]).
pub fn rl_stats(con: &mut Connection) -> HashMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("ratelimit")
        .query(con)
        .expect("INFO ratelimit");
    info_map(&info)
        .into_iter()
        .filter(|(k, _)| k.starts_with("ratelimit_") && !INFO_TEXT_FIELDS.contains(&k.as_str()))
        .map(|(k, v)| {
            let n = v
                .parse()
                .unwrap_or_else(|_| panic!("INFO field {k} is not a number: {v}"));
            (k, n)
        })
        .collect()
}

/// True when a member name looks like a decimal number.
pub fn looks_numeric(s: &str) -> bool {
    let s = s.strip_prefix('-').unwrap_or(s);
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    digits(int) && frac.is_none_or(digits)
}

/// True when a member name looks like a UUID (8-4-4-4-12 hex, any case).
pub fn looks_like_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Runs `line` once on each of `clients` connections, all opened first and
/// released together by a barrier; returns the replies.
pub fn burst(server: &Server, clients: usize, line: &str) -> Vec<Vec<i64>> {
    let mut cons: Vec<Connection> = (0..clients).map(|_| server.con()).collect();
    let barrier = std::sync::Barrier::new(clients);
    std::thread::scope(|scope| {
        let handles: Vec<_> = cons
            .iter_mut()
            .map(|con| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    ints(con, line)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect()
    })
}

/// The expiry RL.CHECK / RL.THROTTLE set on `key` when the key must live
/// until `x` and its expiry moves (SPEC "Expiries on a grid"): the first
/// point at or after `x` of the grid with step `g = max(1, floor(w / 8))`
/// and offset `crc16(key) mod g` (CRC16/XMODEM, as Redis Cluster hashes).
/// Written here from the SPEC, independently of the module's code.
pub fn grid_at(key: impl AsRef<[u8]>, w: i64, x: i64) -> i64 {
    let g = (w / 8).max(1);
    let o = i64::from(crc::Crc::<u16>::new(&crc::CRC_16_XMODEM).checksum(key.as_ref())) % g;
    let late = (x - o).rem_euclid(g);
    if late == 0 {
        x
    } else {
        x.saturating_add(g - late)
    }
}

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
        Server::start_with(&module_path())
    }

    /// Starts a server with another build of the module loaded.
    pub fn start_with(module: &Path) -> Server {
        let mut last_error = String::new();
        for _ in 0..5 {
            let dir = unique_dir();
            let port = free_port();
            let child = Command::new(server_binary())
                .arg("--port")
                .arg(port.to_string())
                .args(["--bind", "127.0.0.1"])
                .arg("--dir")
                .arg(&dir)
                .args(["--save", "", "--appendonly", "no"])
                .args(["--logfile", "server.log"])
                .arg("--loadmodule")
                .arg(module)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server (is it installed?)");
            let mut server = Server { child, port, dir };
            match server.wait_ready() {
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
    let mut parts = line.split_whitespace();
    let mut cmd = redis::cmd(parts.next().expect("a command name"));
    for p in parts {
        cmd.arg(p);
    }
    cmd
}

/// Builds a command from raw byte arguments (any bytes, empty ones too).
pub fn raw_cmd<A: AsRef<[u8]>>(parts: &[A]) -> redis::Cmd {
    let (name, rest) = parts.split_first().expect("a command name");
    let mut cmd = redis::cmd(std::str::from_utf8(name.as_ref()).expect("ascii command name"));
    for p in rest {
        cmd.arg(p.as_ref());
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

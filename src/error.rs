//! The one error type of the module and its mapping to Redis error replies.

use std::fmt::Write;

/// Why a command refused to run. Every variant is reported before the first
/// write, so an error reply always means the keyspace is untouched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A bad argument: syntax, range or arity. Replied as `ERR <message>`.
    Arg(String),
    /// A key holds a value of another type. Replied as Redis's own `WRONGTYPE`.
    WrongType,
    /// A stored value (a counter or a score) that the command cannot use.
    Stored(String),
    /// The server refused an internal operation (never expected).
    Internal(String),
    /// Above `maxmemory`: Redis's own refusal of a command that may grow
    /// the keyspace (SPEC "Memory").
    OutOfMemory,
}

impl Error {
    /// The full error reply text, prefix included.
    pub fn reply_text(&self) -> String {
        match self {
            Error::Arg(m) | Error::Stored(m) | Error::Internal(m) => format!("ERR {m}"),
            Error::WrongType => {
                "WRONGTYPE Operation against a key holding the wrong kind of value".to_string()
            }
            // Redis's own text (server.c, shared.oomerr), prefix included.
            Error::OutOfMemory => {
                "OOM command not allowed when used memory > 'maxmemory'.".to_string()
            }
        }
    }
}

/// Shows an argument inside an error message: lossy UTF-8, control
/// characters replaced (an error reply is a single line), at most 64 chars.
pub fn show(arg: &[u8]) -> String {
    const MAX_CHARS: usize = 64;
    let text = String::from_utf8_lossy(arg);
    let mut out = String::with_capacity(text.len().min(MAX_CHARS + 3));
    for (i, c) in text.chars().enumerate() {
        if i == MAX_CHARS {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            let _ = write!(out, "?");
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_carry_redis_prefixes() {
        assert_eq!(Error::Arg("x".into()).reply_text(), "ERR x");
        assert_eq!(Error::Stored("y".into()).reply_text(), "ERR y");
        assert!(Error::WrongType.reply_text().starts_with("WRONGTYPE "));
        assert_eq!(
            Error::OutOfMemory.reply_text(),
            "OOM command not allowed when used memory > 'maxmemory'."
        );
    }

    #[test]
    fn shown_arguments_are_one_short_line() {
        assert_eq!(show(b"abc"), "abc");
        assert_eq!(show(b"a\r\nb"), "a??b");
        assert_eq!(show(b"\xff"), "\u{fffd}");
        let long = vec![b'x'; 100];
        assert_eq!(show(&long).chars().count(), 67);
    }
}

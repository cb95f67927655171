//! Fixed-window counters behind RL.DAYHOUR and RL.LOCKCOUNT.
//!
//! A counter is a string holding a decimal integer with a PX expiry. The
//! decisions here take the stored values (already validated) and say what to
//! write; the command layer reads and writes the keys.

use super::args::{DayHourArgs, LockCountArgs};

/// A counter key as read before the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    /// The stored value; `None` when the key is missing.
    pub value: Option<i64>,
    /// Absolute expiry in ms; `None` when the key is missing or has none.
    pub expire_at: Option<i64>,
}

impl Counter {
    pub const MISSING: Counter = Counter {
        value: None,
        expire_at: None,
    };

    /// The count used by the decisions: 0 when missing, and a negative value
    /// (left by the seed's roll-back racing an expiry) counts as 0.
    pub fn count(&self) -> i64 {
        self.value.unwrap_or(0).max(0)
    }

    /// The write of one increment: the new value and its absolute expiry. A
    /// key keeps its expiry; a new key, or one without expiry, gets `ttl`.
    pub fn increment(&self, ttl: i64, server_time: i64) -> CounterWrite {
        CounterWrite {
            value: self.count() + 1,
            expire_at: self.expire_at.unwrap_or(server_time + ttl),
            plain_increment: self.value.is_some_and(|v| v >= 0) && self.expire_at.is_some(),
        }
    }
}

/// Set a counter to `value`, expiring at the absolute time `expire_at` (ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterWrite {
    pub value: i64,
    pub expire_at: i64,
    /// The stored value goes up by one and the expiry stays: what `INCR`
    /// does. Otherwise the key is created, gets an expiry, or a negative
    /// value becomes 1: what `SET value PXAT expire_at` does.
    pub plain_increment: bool,
}

/// The outcome of RL.DAYHOUR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DayHour {
    /// `[day, hour]`: the new values when admitted; otherwise the current
    /// values, plus one on each counter that refused.
    pub reply: [i64; 2],
    /// The writes when admitted; `None` when refused (nothing is written).
    pub writes: Option<(CounterWrite, CounterWrite)>,
}

/// Decides RL.DAYHOUR: admitted iff `d < daylimit` and `h < hourlimit`.
pub fn dayhour(day: Counter, hour: Counter, args: &DayHourArgs, server_time: i64) -> DayHour {
    let (d, h) = (day.count(), hour.count());
    let day_refuses = d >= args.daylimit;
    let hour_refuses = h >= args.hourlimit;
    if day_refuses || hour_refuses {
        return DayHour {
            reply: [d + i64::from(day_refuses), h + i64::from(hour_refuses)],
            writes: None,
        };
    }
    DayHour {
        reply: [d + 1, h + 1],
        writes: Some((
            day.increment(args.dayttl, server_time),
            hour.increment(args.hourttl, server_time),
        )),
    }
}

/// The outcome of RL.LOCKCOUNT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockCount {
    /// The lock key exists: rejected, nothing written.
    Locked { count: i64 },
    /// Counted: write the counter.
    Admitted { write: CounterWrite },
    /// The count reached `max`: set the lock (expiring at `lock_expire_at`),
    /// delete the counter, reject.
    Trips { count: i64, lock_expire_at: i64 },
}

/// Decides RL.LOCKCOUNT.
pub fn lockcount(
    lock_exists: bool,
    counter: Counter,
    args: &LockCountArgs,
    server_time: i64,
) -> LockCount {
    let c = counter.count();
    if lock_exists {
        LockCount::Locked { count: c }
    } else if c < args.max {
        LockCount::Admitted {
            write: counter.increment(args.window, server_time),
        }
    } else {
        LockCount::Trips {
            count: c,
            lock_expire_at: server_time + args.locktime,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000_000;

    fn dh(daylimit: i64, hourlimit: i64) -> DayHourArgs {
        DayHourArgs {
            daylimit,
            hourlimit,
            dayttl: 86_400_000,
            hourttl: 3_600_000,
        }
    }

    fn at(value: i64, expire_at: Option<i64>) -> Counter {
        Counter {
            value: Some(value),
            expire_at,
        }
    }

    #[test]
    fn dayhour_table() {
        let m = Counter::MISSING;
        type Case = (&'static str, Counter, Counter, DayHourArgs, [i64; 2], bool);
        let cases: Vec<Case> = vec![
            ("both missing", m, m, dh(10, 5), [1, 1], true),
            (
                "below both",
                at(3, Some(NOW + 10)),
                at(2, Some(NOW + 5)),
                dh(10, 5),
                [4, 3],
                true,
            ),
            (
                "hour full",
                at(3, None),
                at(5, None),
                dh(10, 5),
                [3, 6],
                false,
            ),
            (
                "day full",
                at(10, None),
                at(1, None),
                dh(10, 5),
                [11, 1],
                false,
            ),
            (
                "both full",
                at(10, None),
                at(5, None),
                dh(10, 5),
                [11, 6],
                false,
            ),
            (
                "day limit 0 refuses a missing key",
                m,
                m,
                dh(0, 5),
                [1, 0],
                false,
            ),
            (
                "hour limit 0 refuses",
                at(2, None),
                m,
                dh(10, 0),
                [2, 1],
                false,
            ),
            (
                "negative counts as 0",
                at(-3, None),
                at(-1, None),
                dh(10, 5),
                [1, 1],
                true,
            ),
            (
                "negative refused by limit 0",
                at(-3, None),
                m,
                dh(0, 5),
                [1, 0],
                false,
            ),
            (
                "largest values",
                at(crate::core::int::MAX_SAFE, None),
                m,
                dh(crate::core::int::MAX_SAFE, 1),
                [9007199254740992, 0],
                false,
            ),
        ];
        for (name, day, hour, args, reply, admitted) in cases {
            let out = dayhour(day, hour, &args, NOW);
            assert_eq!(out.reply, reply, "{name}");
            assert_eq!(out.writes.is_some(), admitted, "{name}");
            // A reply element above its limit marks the refusing counter.
            assert_eq!(
                out.reply[0] <= args.daylimit && out.reply[1] <= args.hourlimit,
                admitted,
                "{name}"
            );
        }
    }

    #[test]
    fn dayhour_ttl_rule() {
        let out = dayhour(at(3, Some(NOW + 10)), Counter::MISSING, &dh(10, 5), NOW);
        let (day, hour) = out.writes.unwrap();
        assert_eq!(
            day,
            CounterWrite {
                value: 4,
                expire_at: NOW + 10,
                plain_increment: true,
            },
            "keeps its expiry"
        );
        assert_eq!(
            hour,
            CounterWrite {
                value: 1,
                expire_at: NOW + 3_600_000,
                plain_increment: false,
            },
            "new key gets its ttl"
        );
        let out = dayhour(at(3, None), at(-2, None), &dh(10, 5), NOW);
        let (day, hour) = out.writes.unwrap();
        assert_eq!(
            day.expire_at,
            NOW + 86_400_000,
            "a counter without expiry gets one"
        );
        assert_eq!(
            hour,
            CounterWrite {
                value: 1,
                expire_at: NOW + 3_600_000,
                plain_increment: false,
            },
            "negative is written as 1"
        );
    }

    #[test]
    fn lockcount_table() {
        let args = LockCountArgs {
            window: 10_000,
            max: 3,
            locktime: 60_000,
        };
        assert_eq!(
            lockcount(false, Counter::MISSING, &args, NOW),
            LockCount::Admitted {
                write: CounterWrite {
                    value: 1,
                    expire_at: NOW + 10_000,
                    plain_increment: false,
                }
            }
        );
        assert_eq!(
            lockcount(false, at(2, Some(NOW + 7)), &args, NOW),
            LockCount::Admitted {
                write: CounterWrite {
                    value: 3,
                    expire_at: NOW + 7,
                    plain_increment: true,
                }
            },
            "the window is fixed by the first request"
        );
        assert_eq!(
            lockcount(false, at(3, Some(NOW + 7)), &args, NOW),
            LockCount::Trips {
                count: 3,
                lock_expire_at: NOW + 60_000
            },
            "the request that trips the lock is rejected"
        );
        assert_eq!(
            lockcount(true, at(2, None), &args, NOW),
            LockCount::Locked { count: 2 }
        );
        assert_eq!(
            lockcount(true, at(-5, None), &args, NOW),
            LockCount::Locked { count: 0 }
        );
        assert_eq!(
            lockcount(false, at(-5, None), &args, NOW),
            LockCount::Admitted {
                write: CounterWrite {
                    value: 1,
                    expire_at: NOW + 10_000,
                    plain_increment: false,
                }
            }
        );
        let zero = LockCountArgs { max: 0, ..args };
        assert_eq!(
            lockcount(false, Counter::MISSING, &zero, NOW),
            LockCount::Trips {
                count: 0,
                lock_expire_at: NOW + 60_000
            }
        );
    }
}

//! Per-command counters shown by `INFO ratelimit`. Monotonic since the module
//! was loaded; `CONFIG RESETSTAT` does not reset them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub struct CommandStats {
    /// The prefix of the INFO fields: `check`, `peek`, `dayhour`, ...
    pub name: &'static str,
    /// The command takes `REFUND` and `DEBIT`: INFO shows `<name>_refunds`
    /// and `<name>_debits`.
    pub refunds_shown: bool,
    pub calls: AtomicU64,
    pub admitted: AtomicU64,
    pub rejected: AtomicU64,
    pub errors: AtomicU64,
    pub refunds: AtomicU64,
    pub debits: AtomicU64,
}

/// How a call that reached the module ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Admitted,
    Rejected,
    Refund,
    /// A `DEBIT`: never refused, so neither admitted nor rejected.
    Debit,
    Error,
}

impl CommandStats {
    const fn new(name: &'static str, refunds_shown: bool) -> Self {
        CommandStats {
            name,
            refunds_shown,
            calls: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            refunds: AtomicU64::new(0),
            debits: AtomicU64::new(0),
        }
    }

    /// Records one call that reached the module.
    pub fn record(&self, outcome: Kind) {
        self.calls.fetch_add(1, Relaxed);
        let counter = match outcome {
            Kind::Admitted => &self.admitted,
            Kind::Rejected => &self.rejected,
            Kind::Refund => &self.refunds,
            Kind::Debit => &self.debits,
            Kind::Error => &self.errors,
        };
        counter.fetch_add(1, Relaxed);
    }

    /// `(field suffix, value)` pairs in INFO order.
    pub fn fields(&self) -> Vec<(&'static str, u64)> {
        let mut fields = vec![
            ("calls", self.calls.load(Relaxed)),
            ("admitted", self.admitted.load(Relaxed)),
            ("rejected", self.rejected.load(Relaxed)),
            ("errors", self.errors.load(Relaxed)),
        ];
        if self.refunds_shown {
            fields.push(("refunds", self.refunds.load(Relaxed)));
            fields.push(("debits", self.debits.load(Relaxed)));
        }
        fields
    }
}

pub static CHECK: CommandStats = CommandStats::new("check", true);
pub static PEEK: CommandStats = CommandStats::new("peek", false);
pub static DAYHOUR: CommandStats = CommandStats::new("dayhour", false);
pub static LOCKCOUNT: CommandStats = CommandStats::new("lockcount", false);
pub static THROTTLE: CommandStats = CommandStats::new("throttle", true);
pub static THROTTLEPEEK: CommandStats = CommandStats::new("throttlepeek", false);
pub static QUOTA: CommandStats = CommandStats::new("quota", true);
pub static QUOTAPEEK: CommandStats = CommandStats::new("quotapeek", false);

pub static ALL: [&CommandStats; 8] = [
    &CHECK,
    &PEEK,
    &DAYHOUR,
    &LOCKCOUNT,
    &THROTTLE,
    &THROTTLEPEEK,
    &QUOTA,
    &QUOTAPEEK,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_land_in_their_counters() {
        let s = CommandStats::new("t", true);
        s.record(Kind::Admitted);
        s.record(Kind::Rejected);
        s.record(Kind::Rejected);
        s.record(Kind::Error);
        s.record(Kind::Refund);
        s.record(Kind::Debit);
        s.record(Kind::Debit);
        assert_eq!(
            s.fields(),
            [
                ("calls", 7),
                ("admitted", 1),
                ("rejected", 2),
                ("errors", 1),
                ("refunds", 1),
                ("debits", 2)
            ]
        );
        assert_eq!(CommandStats::new("p", false).fields().len(), 4);
    }
}

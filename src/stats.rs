//! Per-command counters shown by `INFO ratelimit`. Monotonic since the module
//! was loaded; `CONFIG RESETSTAT` does not reset them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub struct CommandStats {
    /// The prefix of the INFO fields: `check`, `peek`, `dayhour`, `lockcount`.
    pub name: &'static str,
    pub calls: AtomicU64,
    pub admitted: AtomicU64,
    pub rejected: AtomicU64,
    pub errors: AtomicU64,
}

impl CommandStats {
    const fn new(name: &'static str) -> Self {
        CommandStats {
            name,
            calls: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    /// Records one call that reached the module.
    pub fn record(&self, outcome: Option<bool>) {
        self.calls.fetch_add(1, Relaxed);
        let counter = match outcome {
            Some(true) => &self.admitted,
            Some(false) => &self.rejected,
            None => &self.errors,
        };
        counter.fetch_add(1, Relaxed);
    }

    /// `(field suffix, value)` pairs in INFO order.
    pub fn fields(&self) -> [(&'static str, u64); 4] {
        [
            ("calls", self.calls.load(Relaxed)),
            ("admitted", self.admitted.load(Relaxed)),
            ("rejected", self.rejected.load(Relaxed)),
            ("errors", self.errors.load(Relaxed)),
        ]
    }
}

pub static CHECK: CommandStats = CommandStats::new("check");
pub static PEEK: CommandStats = CommandStats::new("peek");
pub static DAYHOUR: CommandStats = CommandStats::new("dayhour");
pub static LOCKCOUNT: CommandStats = CommandStats::new("lockcount");

pub static ALL: [&CommandStats; 4] = [&CHECK, &PEEK, &DAYHOUR, &LOCKCOUNT];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_land_in_their_counters() {
        let s = CommandStats::new("t");
        s.record(Some(true));
        s.record(Some(false));
        s.record(Some(false));
        s.record(None);
        assert_eq!(
            s.fields(),
            [
                ("calls", 4),
                ("admitted", 1),
                ("rejected", 2),
                ("errors", 1)
            ]
        );
    }
}

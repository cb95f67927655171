//! Per-command counters shown by `INFO ratelimit`. Monotonic since the module
//! was loaded; `CONFIG RESETSTAT` does not reset them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub struct CommandStats {
    /// The prefix of the INFO fields: `check`, `peek`, `dayhour`, ...
    pub name: &'static str,
    /// The command takes `REFUND` and `DEBIT`: INFO shows `<name>_refunds`
    /// and `<name>_debits`.
    pub refunds_shown: bool,
    /// `<name>_debits` shown with the refunds (RL.ALL has no `DEBIT`).
    pub debits_shown: bool,
    /// RL.RELEASE and RL.RENEW: INFO shows this units field (`released_units`,
    /// `renewed_units`) instead of admitted and rejected, and RL.RENEW the
    /// tokens it found lost (`renew_lost`).
    pub units_field: Option<&'static str>,
    pub lost_field: Option<&'static str>,
    pub calls: AtomicU64,
    pub admitted: AtomicU64,
    pub rejected: AtomicU64,
    pub errors: AtomicU64,
    pub refunds: AtomicU64,
    pub debits: AtomicU64,
    pub units: AtomicU64,
    pub lost: AtomicU64,
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
    /// RL.RELEASE / RL.RENEW: units released or renewed, tokens found lost.
    Tokens {
        units: u64,
        lost: u64,
    },
}

impl CommandStats {
    const fn new(name: &'static str, refunds_shown: bool) -> Self {
        CommandStats {
            name,
            refunds_shown,
            debits_shown: refunds_shown,
            units_field: None,
            lost_field: None,
            calls: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            refunds: AtomicU64::new(0),
            debits: AtomicU64::new(0),
            units: AtomicU64::new(0),
            lost: AtomicU64::new(0),
        }
    }

    /// `<name>_refunds` without debits (RL.ALL).
    const fn refunds_only(name: &'static str) -> Self {
        let mut s = Self::new(name, true);
        s.debits_shown = false;
        s
    }

    /// The counters of a command that answers per token.
    const fn per_token(
        name: &'static str,
        units_field: &'static str,
        lost_field: Option<&'static str>,
    ) -> Self {
        let mut s = Self::new(name, false);
        s.units_field = Some(units_field);
        s.lost_field = lost_field;
        s
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
            Kind::Tokens { units, lost } => {
                self.units.fetch_add(units, Relaxed);
                self.lost.fetch_add(lost, Relaxed);
                return;
            }
        };
        counter.fetch_add(1, Relaxed);
    }

    /// `(field name, value)` pairs in INFO order (Redis adds the module's
    /// `ratelimit_` prefix).
    pub fn fields(&self) -> Vec<(String, u64)> {
        let field =
            |suffix: &str, v: &AtomicU64| (format!("{}_{suffix}", self.name), v.load(Relaxed));
        let mut fields = vec![field("calls", &self.calls)];
        if let Some(units) = self.units_field {
            fields.push((units.to_string(), self.units.load(Relaxed)));
            if let Some(lost) = self.lost_field {
                fields.push((lost.to_string(), self.lost.load(Relaxed)));
            }
        } else {
            fields.push(field("admitted", &self.admitted));
            fields.push(field("rejected", &self.rejected));
        }
        fields.push(field("errors", &self.errors));
        if self.refunds_shown {
            fields.push(field("refunds", &self.refunds));
            if self.debits_shown {
                fields.push(field("debits", &self.debits));
            }
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
pub static LEASE: CommandStats = CommandStats::new("lease", false);
pub static LEASEPEEK: CommandStats = CommandStats::new("leasepeek", false);
pub static RELEASE: CommandStats = CommandStats::per_token("release", "released_units", None);
pub static RENEW: CommandStats =
    CommandStats::per_token("renew", "renewed_units", Some("renew_lost"));

pub static ALL: CommandStats = CommandStats::refunds_only("all");
pub static ALLPEEK: CommandStats = CommandStats::new("allpeek", false);

pub static EVERY: [&CommandStats; 14] = [
    &CHECK,
    &PEEK,
    &DAYHOUR,
    &LOCKCOUNT,
    &THROTTLE,
    &THROTTLEPEEK,
    &QUOTA,
    &QUOTAPEEK,
    &LEASE,
    &LEASEPEEK,
    &RELEASE,
    &RENEW,
    &ALL,
    &ALLPEEK,
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
        let named = |pairs: &[(&str, u64)]| -> Vec<(String, u64)> {
            pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect()
        };
        assert_eq!(
            s.fields(),
            named(&[
                ("t_calls", 7),
                ("t_admitted", 1),
                ("t_rejected", 2),
                ("t_errors", 1),
                ("t_refunds", 1),
                ("t_debits", 2)
            ])
        );
        assert_eq!(CommandStats::new("p", false).fields().len(), 4);
        let r = CommandStats::per_token("renew", "renewed_units", Some("renew_lost"));
        r.record(Kind::Tokens { units: 3, lost: 1 });
        r.record(Kind::Tokens { units: 2, lost: 0 });
        r.record(Kind::Error);
        assert_eq!(
            r.fields(),
            named(&[
                ("renew_calls", 3),
                ("renewed_units", 5),
                ("renew_lost", 1),
                ("renew_errors", 1)
            ])
        );
    }
}

//! The six integers every single-limiter decision answers (RL.CHECK,
//! RL.THROTTLE, RL.QUOTA and their peeks).

/// The reply of RL.CHECK / RL.PEEK (and of RL.THROTTLE, RL.QUOTA).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// The request was refused.
    pub limited: bool,
    /// 1-based index of the binding rule.
    pub rule: usize,
    /// `count` of the binding rule.
    pub limit: i64,
    /// `count_b - used_b` after the call, never below 0.
    pub remaining: i64,
    /// Rejected: ms until a request of this cost would be admitted; admitted: -1.
    pub retry_after: i64,
    /// ms until the binding rule's window holds no members.
    pub reset_after: i64,
}

impl Decision {
    /// The six integers of the reply, in contract order.
    pub fn reply(&self) -> [i64; 6] {
        [
            i64::from(self.limited),
            self.rule as i64,
            self.limit,
            self.remaining,
            self.retry_after,
            self.reset_after,
        ]
    }
}

//! How a decision reads a sorted set of scored units (the sliding-window
//! log, the lease's units): counts by score and one score by rank, so a
//! store answers it in O(log n) whatever the limit.

/// Read access to the sorted set a decision is made on. Implemented over a
/// Redis key by the limiters (`limiters::sorted_set`) and over a `Vec` in unit tests.
pub trait LogView {
    type Error;
    /// Number of members with score strictly greater than `min_exclusive`.
    fn count_newer_than(&mut self, min_exclusive: i64) -> Result<u64, Self::Error>;
    /// Total number of members.
    fn total(&mut self) -> Result<u64, Self::Error>;
    /// Score of the member at 0-based ascending `rank` (`rank < len`).
    fn score_at_rank(&mut self, rank: u64) -> Result<f64, Self::Error>;
}

//! Leases: "at most `limit` units in flight" (RL.LEASE, RL.LEASEPEEK,
//! RL.RELEASE, RL.RENEW).
//!
//! The state is a sorted set, one member per unit held, scored with the
//! unit's expiry (absolute ms). A lease of cost `n` named `tok` is the
//! members `tok`, `tok#2`, ..., `tok#n`, found by walking those names up to
//! the first missing one. The first unit of a lease of 2 or more units is
//! scored half a ms before its siblings ([`first_unit_score`]), so a first
//! unit with a whole score is a lease of one unit ([`has_siblings`]): the
//! usual lease of cost 1 is found with one lookup, not two (the lookup of a
//! missing `tok#2` scans the whole set while it is a listpack). Replies
//! round scores up to the whole ms, and for a whole `t` the marked unit is
//! live exactly as long as its siblings, so nothing a caller sees changes.
//! A unit is live iff its score is greater than `t`:
//! expired units never count, removed yet or not. The decision needs the
//! number of live members, the scores of the token's own units, and one
//! score by rank, so it reads the set through [`LogView`] in O(log n) plus
//! the token's units.

use crate::core::grid::Grid;
use crate::core::int::ceil_ms;
use crate::core::log_view::LogView;

/// The six integers of RL.LEASE's and RL.LEASEPEEK's reply (`rule` is
/// always 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub limited: bool,
    pub limit: i64,
    /// `limit - live` after the call, never below 0.
    pub remaining: i64,
    /// Rejected: ms until enough units of others expire; admitted: -1.
    pub retry_after: i64,
    /// ms until no unit is live (0 when none is).
    pub reset_after: i64,
}

impl Reply {
    pub fn ints(&self) -> [i64; 6] {
        [
            i64::from(self.limited),
            1,
            self.limit,
            self.remaining,
            self.retry_after,
            self.reset_after,
        ]
    }
}

/// Number of live units among a lease's unit scores.
pub fn live_units(own: &[f64], t: i64) -> u64 {
    own.iter().filter(|&&s| s > t as f64).count() as u64
}

/// The admission decision of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub admitted: bool,
    /// Live members before the call.
    pub live: u64,
    /// Live units of the token's own lease before the call.
    pub held: u64,
    /// Rejected: ms until the call would fit if nothing is released;
    /// admitted: -1.
    pub retry_after: i64,
    /// Live members past a gap in the token's chain that the admission
    /// re-scores as its units instead of adding them (`tok#i`, `i` from
    /// the first missing name up to `cost`): counted in `live` already.
    pub reused: u64,
}

impl Verdict {
    /// Live units once the call's writes are applied (as if admitted, for
    /// a peek): the token's live units are replaced by `cost` new ones,
    /// of which `reused` were live members already.
    pub fn live_after(&self, cost: i64) -> i64 {
        if self.admitted {
            self.live as i64 - self.held as i64 + cost - self.reused as i64
        } else {
            self.live as i64
        }
    }

    /// The reply, with `top` the highest score in the set the call leaves
    /// (for a peek: the set as it is now).
    pub fn reply(&self, limit: i64, cost: i64, top: Option<f64>, t: i64) -> Reply {
        Reply {
            limited: !self.admitted,
            limit,
            remaining: (limit - self.live_after(cost)).max(0),
            retry_after: self.retry_after,
            reset_after: reset_after(top, t),
        }
    }
}

/// ms until no unit is live: the highest score minus `t`, 0 when none is.
pub fn reset_after(top: Option<f64>, t: i64) -> i64 {
    top.map_or(0, |s| (ceil_ms(s) - t).max(0))
}

/// Decides a request of `cost` units at `t` under `limit`; `own` holds the
/// scores of the token's units in name order (empty without a token, or
/// for `COST 0`, where the token is ignored). Callers check the set's
/// scores are finite and within `±(2^53-1)` first.
///
/// Admitted iff `live - held + cost <= limit`. Rejected, `retry_after` is
/// when the k-th earliest-expiring live unit that is not the token's own
/// expires, `k = live - held + cost - limit`.
pub fn decide<L: LogView>(
    limit: i64,
    cost: i64,
    t: i64,
    own: &[f64],
    log: &mut L,
) -> Result<Verdict, L::Error> {
    let live = log.count_newer_than(t)?;
    let held = live_units(own, t).min(live);
    let needed = live as i64 - held as i64 + cost;
    if needed <= limit {
        return Ok(Verdict {
            admitted: true,
            live,
            held,
            retry_after: -1,
            reused: 0,
        });
    }
    let k = (needed - limit) as u64;
    let mut own_live: Vec<f64> = own.iter().copied().filter(|&s| s > t as f64).collect();
    own_live.sort_by(f64::total_cmp);
    let len = log.total()?;
    let score = kth_other(log, len - live, k, &own_live)?;
    Ok(Verdict {
        admitted: false,
        live,
        held,
        retry_after: ceil_ms(score) - t,
        reused: 0,
    })
}

/// The score of the k-th lowest live member that is not one of `own_live`
/// (sorted ascending, all live), `first_live` the rank of the lowest live
/// member. Starts at the k-th live member and moves up by the number of own
/// units at or below the score found, until that number stops growing: then
/// at least k others lie at or below it, and never fewer than k below the
/// true k-th other's score, so it is that score. One or two steps usually
/// (a lease's units share one score).
fn kth_other<L: LogView>(
    log: &mut L,
    first_live: u64,
    k: u64,
    own_live: &[f64],
) -> Result<f64, L::Error> {
    let mut own_below = 0u64;
    loop {
        let score = log.score_at_rank(first_live + k - 1 + own_below)?;
        let n = own_live.partition_point(|&s| s <= score) as u64;
        if n == own_below {
            return Ok(score);
        }
        own_below = n;
    }
}

/// The key's new expiry after a write, `None` to keep it: with
/// `X = ceil(top) + max(0, server_time - t)` (when the last lease expires,
/// later by the caller's lag when its clock runs behind the server's), an
/// expiry `E >= X` is kept, else the grid point at or after `X`.
pub fn expiry(
    grid: &Grid,
    existing: Option<i64>,
    top: f64,
    t: i64,
    server_time: i64,
) -> Option<i64> {
    let x = ceil_ms(top).saturating_add((server_time - t).max(0));
    grid.expiry(existing, x)
}

/// Expired units are the members with a score at or below this: a caller
/// whose clock runs ahead never removes units still live by the server's.
pub fn reap_bound(t: i64, server_time: i64) -> i64 {
    t.min(server_time)
}

/// Whether an admitted RL.LEASE removes expired units: when the expiry
/// moves, or when the set held `limit` or more of them before the call (so
/// one long lease holding the expiry cannot let short ones pile up).
pub fn reaps(expiry_moves: bool, expired_before: u64, limit: i64) -> bool {
    expiry_moves || expired_before as i64 >= limit
}

/// The score of the first unit of a lease of `units` units expiring at
/// `expiry`: half a ms before it when the lease has siblings (`tok#2`...),
/// the expiry itself for a lease of one unit. Computed in doubles, as a
/// Lua script computes `expiry - 0.5`: exact below 2^52 ms (the year
/// 144,683); past it no half ms exists, and the lease reads as one unit.
pub fn first_unit_score(expiry: i64, units: u64) -> f64 {
    if units >= 2 {
        expiry as f64 - 0.5
    } else {
        expiry as f64
    }
}

/// Whether a lease whose first unit is scored `score` has units after it:
/// a whole score is a lease of one unit, whatever else the set holds (a
/// lease of 2 or more written before the half-ms marker is read as its
/// first unit; its other units expire by their scores).
pub fn has_siblings(score: f64) -> bool {
    score.fract() != 0.0
}

/// The member name of unit `i` (1-based) of lease `token`: `token` for the
/// first, `token#i` after it. Written into `buf` (a token is at most 64
/// bytes, so 85 bytes always suffice).
pub fn unit_name<'b>(token: &[u8], i: u64, buf: &'b mut [u8; 85]) -> &'b [u8] {
    let n = token.len().min(64);
    buf[..n].copy_from_slice(&token[..n]);
    if i <= 1 {
        return &buf[..n];
    }
    buf[n] = b'#';
    let mut digits = [0u8; 20];
    let d = crate::core::int::decimal(i as i64, &mut digits);
    buf[n + 1..n + 1 + d.len()].copy_from_slice(d);
    &buf[..n + 1 + d.len()]
}

#[cfg(test)]
mod tests;

//! A sorted set of scored units as the pure cores see it ([`LogView`]):
//! the sliding-window log (`sliding_log`) and the lease's units (`lease`)
//! both read their key through [`RedisLog`]; and the member names the module
//! gives the units it adds.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Once;

use smallvec::SmallVec;

use crate::core::int::is_safe_score;
use crate::core::log_view::LogView;
use crate::error::{show, Error};
use crate::redis_api::{bytes, Ctx, Key, RString};

/// Members a call steps through, from the nearer end of the set, before it
/// counts by rank instead (`ZCOUNT` / `ZRANGE`, O(log N) on a skiplist).
/// Stepping costs a few hundred instructions a member; a `RedisModule_Call`
/// several thousand.
pub(super) const STEP_CAP: u64 = 24;

/// Redis's and Valkey's default `zset-max-listpack-entries`: a set this
/// small is a listpack, where `ZCOUNT` and `ZRANGE` walk the entries one by
/// one as stepping does (no ranks to jump by), so a `RedisModule_Call` only
/// adds its own cost: such a set is always stepped through, from the side
/// that holds fewer. (On a server configured otherwise, only the speed
/// changes.)
const LISTPACK_MAX: u64 = 128;

/// Counts a call has made over its set as read (`min_exclusive` → members
/// newer), kept across the views of one call: RL.ALL's `DETAILS` asks each
/// rule again what the decision counted. Forgotten (with [`Counted::clear`])
/// whenever the set is read again after a write.
#[derive(Debug, Default)]
pub(super) struct Counted(RefCell<SmallVec<[(i64, u64); COUNTED_MAX]>>);

/// Distinct edges remembered per call (more are counted again when asked).
const COUNTED_MAX: usize = 8;

impl Counted {
    fn get(&self, min_exclusive: i64) -> Option<u64> {
        let counts = self.0.try_borrow().ok()?;
        counts
            .iter()
            .find(|&&(edge, _)| edge == min_exclusive)
            .map(|&(_, n)| n)
    }

    fn put(&self, min_exclusive: i64, n: u64) {
        if let Ok(mut counts) = self.0.try_borrow_mut() {
            if counts.len() < COUNTED_MAX {
                counts.push((min_exclusive, n));
            }
        }
    }

    pub(super) fn clear(&self) {
        if let Ok(mut counts) = self.0.try_borrow_mut() {
            counts.clear();
        }
    }
}

/// A sorted set's size and extremes: what a call reads of it first.
#[derive(Debug, Clone, Copy)]
pub(super) struct Extremes {
    pub(super) len: u64,
    /// Lowest and highest scores, `None` when empty.
    pub(super) bounds: Option<(f64, f64)>,
    /// Whether the lowest is the set's (else a stand-in, see
    /// [`Extremes::read_above`]).
    pub(super) lowest_exact: bool,
}

impl Extremes {
    /// Reads the set's size and extremes; a score that is not finite or
    /// outside `±(2^53-1)` is an error in a stored value (sorted, so the
    /// extremes bound every score).
    pub(super) fn read(name: RString, key: &Key) -> Result<Self, Error> {
        let bounds = key.zscore_bounds()?;
        if let Some((lowest, highest)) = bounds {
            if !is_safe_score(lowest) || !is_safe_score(highest) {
                return Err(unsafe_score(name));
            }
        }
        Ok(Extremes {
            len: key.size()?,
            bounds,
            lowest_exact: true,
        })
    }

    /// As [`Extremes::read`], for a reader that asks nothing of the lowest
    /// score but how it compares with `t` or below (a lease: its units score
    /// their expiry, and `t` tells live from expired), unless some member
    /// is at or below `t`. One walk over the members at or below `t` reads
    /// the lowest when there is one; when there is none (every unit live,
    /// the usual lease key) no member is read (reading one costs a string):
    /// the lowest lies above `t >= 0`, so within range, and the next float
    /// above `t` stands in for it — it compares with `t` and below as the
    /// lowest does; [`RedisLog`] reads the lowest when asked for rank 0.
    pub(super) fn read_above(name: RString, key: &Key, t: i64) -> Result<Self, Error> {
        let edge = t as f64;
        if edge < 0.0 {
            return Self::read(name, key);
        }
        // One walk: the lowest when at or below `t`.
        let lowest = key.zscore_lowest_through(edge)?;
        let Some(highest) = key.zscore_from_end(true, 0)? else {
            return Ok(Extremes {
                len: 0,
                bounds: None,
                lowest_exact: true,
            });
        };
        let (lowest, lowest_exact) = match lowest {
            Some(lowest) => (lowest, true),
            None => (f64::from_bits(edge.to_bits() + 1), false),
        };
        if !is_safe_score(lowest) || !is_safe_score(highest) {
            return Err(unsafe_score(name));
        }
        Ok(Extremes {
            len: key.size()?,
            bounds: Some((lowest, highest)),
            lowest_exact,
        })
    }

    /// The highest score.
    pub(super) fn newest(&self) -> Option<f64> {
        self.bounds.map(|(_, highest)| highest)
    }
}

fn unsafe_score(name: RString) -> Error {
    Error::Stored(format!(
        "sorted set at '{}' holds a score that is not finite or outside -9007199254740991..9007199254740991",
        show(bytes(name))
    ))
}

/// The sorted set as the decision core sees it, over what [`Extremes`]
/// found.
pub(super) struct RedisLog<'a> {
    ctx: Ctx,
    name: RString,
    key: &'a Key,
    len: u64,
    bounds: Option<(f64, f64)>,
    lowest_exact: bool,
    counted: Option<&'a Counted>,
}

impl<'a> RedisLog<'a> {
    pub(super) fn new(ctx: Ctx, name: RString, key: &'a Key, extremes: Extremes) -> Self {
        RedisLog {
            ctx,
            name,
            key,
            len: extremes.len,
            bounds: extremes.bounds,
            lowest_exact: extremes.lowest_exact,
            counted: None,
        }
    }

    /// Remembers the counts made in `counted` and answers from it: the
    /// caller clears it when the set changes.
    pub(super) fn remembering(mut self, counted: &'a Counted) -> Self {
        self.counted = Some(counted);
        self
    }

    /// Members newer than `edge` by stepping from one end of the set (the
    /// one the guess says holds fewer; past [`STEP_CAP`] members on a
    /// skiplist, `None`). On a listpack the other side is stepped when
    /// the first holds more than half (so it holds less than half).
    fn step_newer_than(&self, edge: f64, newer_share: f64) -> Result<Option<u64>, Error> {
        let from_top = newer_share <= 0.5;
        let newer = |from_top: bool, n: u64| {
            if from_top {
                n
            } else {
                self.len.saturating_sub(n)
            }
        };
        let small = self.len <= LISTPACK_MAX;
        let cap = if small { self.len / 2 } else { STEP_CAP };
        if let Some(n) = self.key.zcount_from_end(from_top, edge, cap)? {
            return Ok(Some(newer(from_top, n)));
        }
        if !small {
            return Ok(None);
        }
        Ok(self
            .key
            .zcount_from_end(!from_top, edge, self.len)?
            .map(|n| newer(!from_top, n)))
    }
}

impl LogView for RedisLog<'_> {
    type Error = Error;

    /// The extremes answer when the window's edge lies outside them (the
    /// usual case for the longest window, which admissions trim), and a
    /// count made before over the same set (see [`Counted`]). Otherwise the
    /// members on the side of the edge that holds fewer (guessed from the
    /// extremes, as if scores were spread evenly) are stepped through, on a
    /// skiplist past [`STEP_CAP`] counted with `len - ZCOUNT key -inf edge`
    /// (O(log N) by rank; see [`LISTPACK_MAX`] for the small sets).
    fn count_newer_than(&mut self, min_exclusive: i64) -> Result<u64, Error> {
        let edge = min_exclusive as f64;
        let Some((lowest, highest)) = self.bounds else {
            return Ok(0);
        };
        if lowest > edge {
            return Ok(self.len);
        }
        if highest <= edge {
            return Ok(0);
        }
        if let Some(n) = self.counted.and_then(|c| c.get(min_exclusive)) {
            return Ok(n);
        }
        let newer_share = (highest - edge) / (highest - lowest);
        let n = match self.step_newer_than(edge, newer_share)? {
            Some(n) => n,
            None => {
                let older = self.ctx.zcount_through(self.name, min_exclusive)?;
                self.len.saturating_sub(older)
            }
        };
        if let Some(counted) = self.counted {
            counted.put(min_exclusive, n);
        }
        Ok(n)
    }

    fn total(&mut self) -> Result<u64, Error> {
        Ok(self.len)
    }

    fn score_at_rank(&mut self, rank: u64) -> Result<f64, Error> {
        let from_top = self.len.saturating_sub(1).saturating_sub(rank);
        // The extremes are known already (the usual retry-after of a full
        // window is its oldest member).
        match self.bounds {
            Some((lowest, _)) if rank == 0 && self.lowest_exact => return Ok(lowest),
            Some((_, highest)) if from_top == 0 => return Ok(highest),
            _ => {}
        }
        let (top, steps) = if from_top < rank {
            (true, from_top)
        } else {
            (false, rank)
        };
        if steps <= STEP_CAP {
            if let Some(score) = self.key.zscore_from_end(top, steps)? {
                return Ok(score);
            }
        }
        self.ctx.zscore_at_rank(self.name, rank)
    }
}

/// The next member counter. It starts at a random point per load and jumps
/// to a new random point after a clash, so names written before a restart or
/// by another primary rarely meet ours.
static NEXT_MEMBER: AtomicU64 = AtomicU64::new(0);

pub(super) fn next_member() -> u64 {
    static SEEDED: Once = Once::new();
    SEEDED.call_once(reseed);
    NEXT_MEMBER.fetch_add(1, Relaxed)
}

pub(super) fn reseed() {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(nanos);
    NEXT_MEMBER.store(h.finish(), Relaxed);
}

/// Clashes tolerated for one unit before the call gives up (and undoes its
/// additions). Each clash moves to a fresh random name, so reaching this
/// needs a set holding nearly all 1.8e14 names.
pub(super) const MAX_NAME_CLASHES: usize = 64;

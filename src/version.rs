//! The module's version, from the crate's (`CARGO_PKG_VERSION`, set by Cargo
//! from Cargo.toml), so `MODULE LIST` and `INFO ratelimit` move with each
//! release and no constant is typed twice.

/// `INFO ratelimit`'s `version` field (`ratelimit_version:0.2.0`).
pub const TEXT: &str = env!("CARGO_PKG_VERSION");

/// `MODULE LIST`'s `ver`: major * 10000 + minor * 100 + patch (0.2.0 -> 200,
/// 1.4.12 -> 10412), the encoding Redis's own modules use (RedisJSON 2.6.0
/// reports 20600). Computed at compile time: a version that does not fit
/// (a part above 99, or not `x.y.z`) fails the build.
pub const NUMBER: i32 = encode(TEXT);

const fn encode(version: &str) -> i32 {
    let b = version.as_bytes();
    let mut parts = [0i32; 3];
    let mut part = 0;
    let mut digits = 0;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'.' {
            assert!(
                digits > 0 && part < 2,
                "version: expected major.minor.patch"
            );
            part += 1;
            digits = 0;
        } else if c == b'-' || c == b'+' {
            // A pre-release or build suffix (0.3.0-rc.1) reports its x.y.z.
            break;
        } else {
            assert!(c.is_ascii_digit(), "version: expected major.minor.patch");
            parts[part] = parts[part] * 10 + (c - b'0') as i32;
            digits += 1;
            assert!(
                parts[part] <= 99 || part == 0,
                "version: minor and patch must be below 100"
            );
        }
        i += 1;
    }
    assert!(
        part == 2 && digits > 0,
        "version: expected major.minor.patch"
    );
    parts[0] * 10000 + parts[1] * 100 + parts[2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_semver_as_redis_modules_do() {
        assert_eq!(encode("0.2.0"), 200);
        assert_eq!(encode("0.1.0"), 100);
        assert_eq!(encode("1.4.12"), 10412);
        assert_eq!(encode("2.6.0"), 20600);
        assert_eq!(encode("0.3.0-rc.1"), 300);
        assert_eq!(encode("10.0.1+build.5"), 100001);
    }

    #[test]
    fn the_module_number_is_the_crate_version() {
        // Parsed at run time the plain way, against the const fn's result.
        let parts: Vec<i32> = TEXT
            .split(['-', '+'])
            .next()
            .unwrap_or_default()
            .split('.')
            .map(|p| p.parse().unwrap_or(-1))
            .collect();
        assert_eq!(parts.len(), 3, "{TEXT}");
        assert_eq!(NUMBER, parts[0] * 10000 + parts[1] * 100 + parts[2]);
    }

    #[test]
    #[should_panic(expected = "minor and patch")]
    fn refuses_a_part_above_99() {
        encode("0.100.0");
    }

    #[test]
    #[should_panic(expected = "major.minor.patch")]
    fn refuses_two_parts() {
        encode("1.2");
    }
}

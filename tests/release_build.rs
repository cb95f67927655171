//! The module `make build` ships (target/release/libredis_ratelimit.so,
//! Cargo.toml `[profile.release]`): no debug info, so it is small, with the
//! function names kept for Redis's crash reports and the entry point
//! exported. `make bench-profile` builds its own copy with line tables.

use std::path::Path;

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn le(bytes: &[u8], at: usize, len: usize) -> usize {
    bytes[at..at + len]
        .iter()
        .rev()
        .fold(0, |n, &b| n << 8 | usize::from(b))
}

/// The section names of a 64-bit little-endian ELF file (the string data
/// alone would not do: std's backtrace code names `.debug_info` itself).
fn section_names(elf: &[u8]) -> Vec<String> {
    assert_eq!(
        &elf[..6],
        b"\x7fELF\x02\x01",
        "a 64-bit little-endian ELF file"
    );
    let (shoff, shentsize, shnum, shstrndx) = (
        le(elf, 0x28, 8),
        le(elf, 0x3a, 2),
        le(elf, 0x3c, 2),
        le(elf, 0x3e, 2),
    );
    let header = |i: usize| shoff + i * shentsize;
    let strtab = le(elf, header(shstrndx) + 0x18, 8);
    (0..shnum)
        .map(|i| {
            let name = strtab + le(elf, header(i), 4);
            let end = elf[name..].iter().position(|&b| b == 0).unwrap() + name;
            String::from_utf8_lossy(&elf[name..end]).into_owned()
        })
        .collect()
}

#[test]
fn release_module_has_no_debug_info_and_keeps_its_names() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/libredis_ratelimit.so");
    let bytes = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run `make build`)", path.display()));
    let sections = section_names(&bytes);
    let debug: Vec<_> = sections
        .iter()
        .filter(|s| s.starts_with(".debug"))
        .collect();
    assert!(debug.is_empty(), "{} has {debug:?}", path.display());
    assert!(
        bytes.len() < 6 << 20,
        "{} is {} bytes",
        path.display(),
        bytes.len()
    );
    assert!(
        sections.iter().any(|s| s == ".symtab"),
        "function names were stripped"
    );
    assert!(contains(&bytes, b"RedisModule_OnLoad"));
}

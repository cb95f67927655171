//! `scripts/deps.sh` decides whether to install clang by looking for a
//! library bindgen can load: `libclang.so*` or `libclang-<version>.so*`. The
//! machine image ships `libclang-cpp.so.14` (a different library), which once
//! fooled the check and left fresh machines unable to build.

use std::path::Path;
use std::process::Command;

fn has_libclang(files: &[&str]) -> bool {
    let dir = std::env::temp_dir().join(format!(
        "rl-libclang-{}-{}",
        std::process::id(),
        files.join("+")
    ));
    std::fs::create_dir_all(&dir).unwrap();
    for f in files {
        std::fs::write(dir.join(f), b"").unwrap();
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/deps.sh");
    let status = Command::new("bash")
        .arg(script)
        .arg("has-libclang")
        .arg(&dir)
        .status()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    status.success()
}

#[test]
fn libclang_cpp_alone_counts_as_missing() {
    assert!(!has_libclang(&[]));
    assert!(!has_libclang(&["libclang-cpp.so.14"]));
    assert!(!has_libclang(&["libclang-cpp.so"]));
    assert!(!has_libclang(&["libclang-cpp.so.14", "libclangBasic.a"]));
}

#[test]
fn a_library_bindgen_loads_counts_as_present() {
    assert!(has_libclang(&["libclang-14.so.1"]));
    assert!(has_libclang(&["libclang-cpp.so.14", "libclang-14.so.1"]));
    assert!(has_libclang(&["libclang.so"]));
    assert!(has_libclang(&["libclang.so.1"]));
    assert!(has_libclang(&["libclang-16.so"]));
}

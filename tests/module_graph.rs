//! The source's import graph has no cycle (issue 16: "no file imports one
//! that imports it back"): each `use crate::…`, `use super::…`, `use
//! self::…`, `use child::…` and inline `crate::…` path of a file under `src/` names the
//! file of the longest module prefix it reaches; the graph of those edges,
//! `#[cfg(test)] mod tests` blocks left out, must be acyclic. No server.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

type Module = Vec<String>;

/// Every `.rs` file under `src/` by its module path (`limiters/gcra/mod.rs`
/// is `limiters::gcra`, `lib.rs` the root).
fn modules(dir: &Path, root: &Path, out: &mut BTreeMap<Module, String>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .expect("src/ is readable")
        .flatten()
        .collect();
    entries.sort_by_key(|e| e.path());
    for entry in entries {
        let path = entry.path();
        if path.is_dir() {
            modules(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).expect("under src/");
            let mut parts: Module = rel
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
                parts.pop();
            }
            let text = fs::read_to_string(&path).expect("a source file is readable");
            out.insert(parts, text);
        }
    }
}

/// The code before a file's unit-test module, comment lines left out.
fn code(text: &str) -> String {
    let end = [
        "#[cfg(test)]\nmod tests",
        "#[cfg(test)]\npub(crate) mod tests",
    ]
    .iter()
    .filter_map(|m| text.find(m))
    .min()
    .unwrap_or(text.len());
    text[..end]
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `a::{b, c::{d, e}}` as its paths.
fn expand(prefix: &[String], body: &str) -> Vec<Vec<String>> {
    let (mut parts, mut depth, mut cur) = (Vec::new(), 0, String::new());
    for ch in body.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if ch == ',' && depth == 0 {
            parts.push(std::mem::take(&mut cur));
        } else {
            cur.push(ch);
        }
    }
    parts.push(cur);
    let mut out = Vec::new();
    for part in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        let segs = |s: &str| -> Vec<String> {
            s.split("::")
                .map(|x| x.split(" as ").next().unwrap_or("").trim().to_string())
                .filter(|x| !x.is_empty())
                .collect()
        };
        let mut path = prefix.to_vec();
        match part.split_once('{') {
            Some((head, rest)) => {
                path.extend(segs(head));
                let inner = rest.rsplit_once('}').map_or(rest, |(a, _)| a);
                out.extend(expand(&path, inner));
            }
            None => {
                path.extend(segs(part));
                out.push(path);
            }
        }
    }
    out
}

/// The file a path in module `from` reaches: its longest module prefix.
fn resolve(from: &Module, path: &[String], files: &BTreeMap<Module, String>) -> Option<Module> {
    let (mut base, rest): (Module, &[String]) = match path.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &path[1..]),
        Some("self") => (from.clone(), &path[1..]),
        Some("super") => {
            let mut base = from.clone();
            let mut rest = path;
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
            (base, rest)
        }
        // A child module named without `self::` (Rust 2018 paths).
        Some(first) => {
            let mut child = from.clone();
            child.push(first.to_string());
            if !files.contains_key(&child) {
                return None;
            }
            (from.clone(), path)
        }
        None => return None,
    };
    base.extend(rest.iter().cloned());
    (0..=base.len())
        .rev()
        .map(|i| base[..i].to_vec())
        .find(|m| files.contains_key(m))
}

fn edges(files: &BTreeMap<Module, String>) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, text) in files {
        let text = code(text);
        let mut paths = Vec::new();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("use ") {
            let at_line_start = rest[..i]
                .rsplit('\n')
                .next()
                .is_some_and(|l| l.trim().is_empty() || l.trim().starts_with("pub"));
            let tail = &rest[i + 4..];
            let end = tail.find(';').unwrap_or(tail.len());
            if at_line_start {
                let stmt = tail[..end].replace('\n', " ");
                paths.extend(expand(&[], &stmt));
            }
            rest = &tail[end.min(tail.len())..];
        }
        for (i, _) in text.match_indices("crate::") {
            let word: String = text[i..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            paths.push(word.split("::").map(str::to_string).collect());
        }
        for path in paths {
            if let Some(target) = resolve(module, &path, files) {
                if &target != module {
                    graph.entry(module.clone()).or_default().insert(target);
                }
            }
        }
    }
    graph
}

#[test]
fn no_file_imports_one_that_imports_it_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    modules(&root, &root, &mut files);
    assert!(files.len() > 30, "found {} source files", files.len());
    let graph = edges(&files);
    // The runner imports the limiters, a limiter the trait (a check that
    // the graph holds the edges it should).
    let module = |path: &str| -> Module { path.split("::").map(str::to_string).collect() };
    let imports = |from: &str, to: &str| {
        graph
            .get(&module(from))
            .is_some_and(|t| t.contains(&module(to)))
    };
    assert!(imports("commands::runner", "limiters"));
    assert!(imports("limiters::gcra", "limiters::limiter"));

    // Depth-first search for a back edge; the cycle is printed.
    fn visit(
        m: &Module,
        graph: &BTreeMap<Module, BTreeSet<Module>>,
        state: &mut BTreeMap<Module, u8>,
        stack: &mut Vec<Module>,
    ) -> Option<Vec<Module>> {
        state.insert(m.clone(), 1);
        stack.push(m.clone());
        for next in graph.get(m).into_iter().flatten() {
            match state.get(next) {
                Some(1) => {
                    let from = stack.iter().position(|x| x == next).unwrap_or(0);
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(next, graph, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(m.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in files.keys() {
        if !state.contains_key(m) {
            if let Some(cycle) = visit(m, &graph, &mut state, &mut Vec::new()) {
                let names: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
                panic!("import cycle: {}", names.join(" -> "));
            }
        }
    }
}

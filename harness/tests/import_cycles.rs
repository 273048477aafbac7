//! No import circle between the files of `harness/src`.
//!
//! A file-level module graph is built from the source text: an edge A → B when file A
//! names a path into file B (`use crate::x::y`, `crate::x::y::f()`, `super::z`,
//! `self::child`, a child module by its bare name, and in the binary's files
//! `splitbrain::x`). Two things are not edges: declaring a child (`mod x;`), and a module
//! naming its own direct children (`cli/mod.rs` dispatching to `cli/test.rs`, a registry
//! listing the workload files beside it) — a folder's `mod.rs` and its children are one
//! unit, and the child reaching back for the parent's shared items is how Rust modules
//! compose. Any other circle fails this test, unless it goes through an edge listed in
//! [`KNOWN_BACK_EDGES`]; a listed edge that no longer exists fails too, so the list
//! only shrinks.
//!
//! This reads text, not the compiler's resolution: paths inside string literals count,
//! and `super::` inside an inline `mod name { … }` block is taken as the file itself
//! (inline modules here are test modules). Both err on the side of reporting an edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Edges that close a circle not yet untangled (issue 34), as (from, to), files relative
/// to `harness/src`, each with why it exists. Remove an entry when its edge goes; add one
/// only with the reason the circle cannot be broken now.
const KNOWN_BACK_EDGES: &[(&str, &str, &str)] = &[
    (
        "spec.rs",
        "maelstrom/mod.rs",
        "TestSpec holds a MaelstromSpec defined by the Maelstrom runner, which in turn \
         enters the controller through its internals (open_run, drive, finish_run); \
         issue 34's second circle: the spec should own the type and the controller offer \
         one public run(TestSpec)",
    ),
    (
        "target/mod.rs",
        "cluster.rs",
        "the Target trait's hooks take the cluster's NodeLayout and RunAs while cluster.rs \
         starts a Target's nodes; the layout types belong in a leaf of their own",
    ),
    (
        "maelstrom/kafka.rs",
        "maelstrom/workloads.rs",
        "the kafka consumer answers with workloads.rs's Reply, which dispatches to kafka",
    ),
    (
        "remote/leash.rs",
        "remote/cluster.rs",
        "the leash script reads the remote cluster's START_TIME_FN, and the cluster holds \
         the leashes",
    ),
];

/// One source file: its crate (`lib` or `bin`), its module path, and its text.
struct SourceFile {
    rel: String,
    krate: &'static str,
    module: Vec<String>,
    text: String,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file: `a/b.rs` and `a/b/mod.rs` → `[a, b]`; `lib.rs`/`main.rs` → `[]`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("file name");
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

/// The source without comments (line and block), so that paths named in prose do not count.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut in_str = false;
    while i < bytes.len() {
        let c = bytes[i];
        if in_str {
            out.push(c as char);
            if c == b'\\' && i + 1 < bytes.len() {
                out.push(bytes[i + 1] as char);
                i += 2;
                continue;
            }
            if c == b'"' {
                in_str = false;
            }
            i += 1;
            continue;
        }
        if c == b'"' {
            in_str = true;
            out.push('"');
            i += 1;
        } else if text[i..].starts_with("//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if text[i..].starts_with("/*") {
            let mut depth = 0;
            while i < bytes.len() {
                if text[i..].starts_with("/*") {
                    depth += 1;
                    i += 2;
                } else if text[i..].starts_with("*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else {
            // Non-ASCII bytes only occur in strings and comments here; keep them whole.
            let ch = text[i..].chars().next().expect("char");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Expands a path tree starting at `s` (just after `root::`): `a::b::{c, d::e}` →
/// `[[a,b,c],[a,b,d,e]]`. Stops at the first character that cannot continue a path.
fn expand_tree(s: &[u8], i: &mut usize) -> Vec<Vec<String>> {
    let skip_ws = |i: &mut usize| {
        while *i < s.len() && s[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    skip_ws(i);
    if *i < s.len() && s[*i] == b'{' {
        *i += 1;
        let mut all = Vec::new();
        loop {
            skip_ws(i);
            if *i >= s.len() {
                return all;
            }
            if s[*i] == b'}' {
                *i += 1;
                return all;
            }
            if s[*i] == b',' {
                *i += 1;
                continue;
            }
            let before = *i;
            all.extend(expand_tree(s, i));
            // `x as y`, `*`, or anything unparsed: skip to the next separator.
            while *i < s.len() && !matches!(s[*i], b',' | b'}') {
                if s[*i] == b'{' {
                    break;
                }
                *i += 1;
            }
            if *i == before {
                *i += 1;
            }
        }
    }
    let start = *i;
    while *i < s.len() && is_ident_byte(s[*i]) {
        *i += 1;
    }
    if start == *i {
        return vec![Vec::new()];
    }
    let seg = String::from_utf8_lossy(&s[start..*i]).into_owned();
    if s[*i..].starts_with(b"::") {
        *i += 2;
        let mut rest = expand_tree(s, i);
        for r in &mut rest {
            r.insert(0, seg.clone());
        }
        rest
    } else {
        vec![vec![seg]]
    }
}

/// Every path (as written, first segment included) that starts with one of `roots`.
fn paths_from(text: &str, roots: &BTreeSet<String>) -> Vec<(usize, Vec<String>)> {
    let s = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        if !is_ident_byte(s[i]) || (i > 0 && (is_ident_byte(s[i - 1]) || s[i - 1] == b':')) {
            i += 1;
            continue;
        }
        let start = i;
        while i < s.len() && is_ident_byte(s[i]) {
            i += 1;
        }
        let word = &text[start..i];
        if roots.contains(word) && s[i..].starts_with(b"::") {
            let mut j = i + 2;
            for mut p in expand_tree(s, &mut j) {
                p.insert(0, word.to_string());
                out.push((start, p));
            }
            i = j.max(i);
        }
    }
    out
}

/// Byte offset where the first inline `mod name {` block starts (test modules), if any.
fn inline_module_start(text: &str) -> Option<usize> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        // `mod x {`, `pub mod x {`, `pub(crate) mod x {`
        let t = match t.strip_prefix("pub") {
            Some(rest) if rest.starts_with('(') => rest.split_once(") ").map_or(t, |(_, r)| r),
            Some(rest) => rest.trim_start(),
            None => t,
        };
        if let Some(rest) = t.strip_prefix("mod ") {
            if rest.trim_end().ends_with('{') {
                return Some(offset);
            }
        }
        offset += line.len();
    }
    None
}

/// Child modules a file declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn declared_children(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let t = l.trim();
            let pos = t.find("mod ")?;
            let head = &t[..pos];
            if !(head.is_empty() || head.starts_with("pub")) || !t.ends_with(';') {
                return None;
            }
            Some(t[pos + 4..].trim_end_matches(';').trim().to_string())
        })
        .collect()
}

fn load(src: &Path) -> Vec<SourceFile> {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    paths.sort();
    let main = std::fs::read_to_string(src.join("main.rs")).expect("main.rs");
    let bin_roots = declared_children(&main);
    paths
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(src).expect("under src").to_path_buf();
            let module = module_path(&rel);
            let rel_str = rel.to_string_lossy().replace('\\', "/");
            let in_bin =
                rel_str == "main.rs" || module.first().is_some_and(|m| bin_roots.contains(m));
            let text = strip_comments(&std::fs::read_to_string(&p).expect("read source"));
            SourceFile {
                rel: rel_str,
                krate: if in_bin { "bin" } else { "lib" },
                module,
                text,
            }
        })
        .collect()
}

/// The file-level import graph: file → files it names.
fn graph(files: &[SourceFile]) -> BTreeMap<String, BTreeSet<String>> {
    let by_module: BTreeMap<(&str, Vec<String>), &str> = files
        .iter()
        .map(|f| ((f.krate, f.module.clone()), f.rel.as_str()))
        .collect();
    // The longest prefix of `path` that is a file of `krate`.
    let resolve = |krate: &str, path: &[String]| -> Option<&str> {
        (0..=path.len())
            .rev()
            .find_map(|n| by_module.get(&(krate, path[..n].to_vec())).copied())
    };
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let children = declared_children(&f.text);
        // The module `super` names (for `a/mod.rs` and `a/b.rs` alike: one up).
        let parent: Vec<String> = f.module[..f.module.len().saturating_sub(1)].to_vec();
        let inline_at = inline_module_start(&f.text).unwrap_or(usize::MAX);
        let mut roots: BTreeSet<String> = ["crate", "super", "self"].map(String::from).into();
        roots.extend(children.iter().cloned());
        if f.krate == "bin" {
            roots.insert("splitbrain".into());
        }
        let out = edges.entry(f.rel.clone()).or_default();
        for (at, p) in paths_from(&f.text, &roots) {
            let (krate, full): (&str, Vec<String>) = match p[0].as_str() {
                "crate" => (f.krate, p[1..].to_vec()),
                "splitbrain" => ("lib", p[1..].to_vec()),
                // Inside an inline (test) module, `super` is the file itself.
                "super" if at >= inline_at => (f.krate, [&f.module[..], &p[1..]].concat()),
                "super" => (f.krate, [&parent[..], &p[1..]].concat()),
                "self" => (f.krate, [&f.module[..], &p[1..]].concat()),
                // A child module named by its bare name.
                _ => (f.krate, [&f.module[..], &p[..]].concat()),
            };
            if let Some(target) = resolve(krate, &full) {
                let direct_child = by_module.iter().any(|((k, m), rel)| {
                    *rel == target
                        && *k == f.krate
                        && m.len() == f.module.len() + 1
                        && m.starts_with(&f.module)
                });
                if target != f.rel && !(krate == f.krate && direct_child) {
                    out.insert(target.to_string());
                }
            }
        }
    }
    edges
}

/// Strongly connected components of more than one node (Tarjan).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(st: &mut State<'a>, v: &'a str) {
        st.index.insert(v, st.next);
        st.low.insert(v, st.next);
        st.next += 1;
        st.stack.push(v);
        st.on_stack.insert(v);
        let edges = st.edges;
        for w in edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !st.index.contains_key(w) {
                visit(st, w);
                let lw = st.low[w];
                let lv = st.low.get_mut(v).expect("low");
                *lv = (*lv).min(lw);
            } else if st.on_stack.contains(w) {
                let iw = st.index[w];
                let lv = st.low.get_mut(v).expect("low");
                *lv = (*lv).min(iw);
            }
        }
        if st.low[v] == st.index[v] {
            let mut component = Vec::new();
            loop {
                let w = st.stack.pop().expect("stack");
                st.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                st.out.push(component);
            }
        }
    }
    let mut st = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !st.index.contains_key(v.as_str()) {
            visit(&mut st, v);
        }
    }
    st.out.sort();
    st.out
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_import_circle_between_harness_files_beyond_the_known_back_edges() {
    let files = load(&src_dir());
    let mut edges = graph(&files);
    let mut stale = Vec::new();
    for (from, to, _why) in KNOWN_BACK_EDGES {
        let removed = edges.get_mut(*from).is_some_and(|out| out.remove(*to));
        if !removed {
            stale.push(format!("  {from} -> {to}"));
        }
    }
    let found = circles(&edges);
    let describe = |c: &Vec<String>| {
        c.iter()
            .map(|f| {
                let inside: Vec<&str> = edges[f]
                    .iter()
                    .filter(|t| c.contains(t))
                    .map(String::as_str)
                    .collect();
                format!("    {f} -> {}", inside.join(", "))
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let new: Vec<String> = found
        .iter()
        .map(|c| format!("  circle of {} files:\n{}", c.len(), describe(c)))
        .collect();
    assert!(
        new.is_empty() && stale.is_empty(),
        "import circles in harness/src (break one edge of each):\n{}\n\
         KNOWN_BACK_EDGES entries whose edge is gone (remove them):\n{}",
        new.join("\n"),
        stale.join("\n")
    );
}

/// The graph builder itself: a two-file circle through `crate::` is found, a child's
/// `super::` is an edge while its parent naming it is not, and an inline test module's
/// `super` is no edge either.
#[test]
fn the_checker_finds_a_planted_circle_and_ignores_test_modules() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::create_dir_all(src.join("cli")).unwrap();
    std::fs::write(src.join("main.rs"), "mod cli;\nfn main() {}\n").unwrap();
    std::fs::write(src.join("cli/mod.rs"), "use splitbrain::b::B;\n").unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod b;\npub mod c;\n").unwrap();
    std::fs::write(
        src.join("a/mod.rs"),
        "pub mod x;\npub fn all() { x::X; }\n// crate::c is only prose\n",
    )
    .unwrap();
    std::fs::write(src.join("a/x.rs"), "use super::Trait;\n").unwrap();
    std::fs::write(src.join("b.rs"), "use crate::{c::{C, D as E}};\n").unwrap();
    std::fs::write(
        src.join("c.rs"),
        "pub fn f() { crate::b::g(); }\n#[cfg(test)]\nmod tests {\n    use super::f;\n}\n",
    )
    .unwrap();
    let edges = graph(&load(src));
    assert!(edges["cli/mod.rs"].contains("b.rs"), "{edges:?}");
    assert!(edges["a/x.rs"].contains("a/mod.rs"), "{edges:?}");
    assert!(!edges["a/mod.rs"].contains("a/x.rs"), "{edges:?}");
    assert!(!edges["a/mod.rs"].contains("c.rs"), "{edges:?}");
    assert!(!edges["c.rs"].contains("lib.rs"), "{edges:?}");
    assert_eq!(
        circles(&edges),
        vec![vec!["b.rs".to_string(), "c.rs".to_string()]]
    );
}

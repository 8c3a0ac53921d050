//! The import graph between top-level modules has no cycle: lower modules define the types
//! and traits, higher ones use them, and nothing points back (issue 18). Checked for this
//! crate and for the extension's `src/`, from the sources: every `crate::m` path outside
//! comments, strings and `#[cfg(test)]` items is an edge to top-level module `m` (a name the
//! crate root re-exports counts as its module), as is `super::super::m` from nested files.
//! Test code may reach up: a test builds its fixtures with the higher modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Edges `from -> {to}` between the top-level modules of the crate whose sources are `src`.
type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn grid_core_has_no_module_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    assert_acyclic(&src);
}

#[test]
fn extension_has_no_module_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../src");
    if !src.join("lib.rs").exists() {
        eprintln!("SKIPPED: no extension sources at {}", src.display());
        return;
    }
    assert_acyclic(&src);
}

/// The checker finds what it is meant to find (a checker that sees no edge passes every tree).
#[test]
fn checker_sees_edges_and_cycles() {
    let code = "use crate::{a::X, b::{self, Y}};\n// use crate::c;\nfn f() { crate::d::g(\"crate::e\"); super::super::h::i(); }\n#[cfg(test)]\nmod tests { use crate::z; }\nuse crate::Top;\n";
    let reexports = BTreeMap::from([("Top".to_string(), "t".to_string())]);
    let to = references(code, &reexports);
    let want: BTreeSet<String> = ["a", "b", "d", "h", "t"].map(String::from).into();
    assert_eq!(to, want);
    let mut g = Graph::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    assert!(cycle(&g).is_none());
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(
        cycle(&g),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}

fn assert_acyclic(src: &Path) {
    let g = graph(src);
    let listing: Vec<String> = g
        .iter()
        .map(|(from, to)| {
            format!(
                "{from} -> {}",
                to.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    eprintln!("{}:\n  {}", src.display(), listing.join("\n  "));
    if let Some(c) = cycle(&g) {
        let tangles: Vec<String> = tangles(&g).iter().map(|t| t.join(" ")).collect();
        panic!(
            "module cycle in {}: {}\n(modules on cycles, by strongly connected component: {})",
            src.display(),
            c.join(" -> "),
            tangles.join("; ")
        );
    }
}

/// The strongly connected components of `g` with more than one module (each sorted).
fn tangles(g: &Graph) -> Vec<Vec<String>> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(m) = todo.pop() {
            for n in g.get(&m).into_iter().flatten() {
                if seen.insert(n.clone()) {
                    todo.push(n.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> = g.keys().map(|m| (m, reach(m))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for (m, r) in &reaches {
        let comp: Vec<String> = r
            .iter()
            .filter(|n| reaches.get(n).is_some_and(|back| back.contains(*m)))
            .cloned()
            .collect();
        if comp.len() > 1 && !out.contains(&comp) {
            out.push(comp);
        }
    }
    out
}

fn graph(src: &Path) -> Graph {
    let root = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let reexports = root_reexports(&strip(&root));
    let mut g = Graph::new();
    for file in rust_files(src) {
        let rel = file.strip_prefix(src).expect("under src");
        let mut parts = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned());
        let first = parts.next().expect("a file name");
        if first == "lib.rs" {
            continue;
        }
        let module = first.trim_end_matches(".rs").to_string();
        let text = std::fs::read_to_string(&file).expect("readable source");
        let to = g.entry(module.clone()).or_default();
        to.extend(
            references(&text, &reexports)
                .into_iter()
                .filter(|m| *m != module),
        );
    }
    g
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("readable directory") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The names the crate root re-exports (`pub use m::{A, B};`), each to its module `m`.
fn root_reexports(root: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for stmt in root.split(';') {
        let Some(rest) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let mut paths = Vec::new();
        expand(rest.trim(), String::new(), &mut paths);
        for p in paths {
            let segs: Vec<&str> = p.split("::").collect();
            let segs = if segs.first() == Some(&"crate") {
                &segs[1..]
            } else {
                &segs[..]
            };
            if let (Some(m), Some(name)) = (segs.first(), segs.last()) {
                if segs.len() > 1 {
                    out.insert(name.to_string(), m.to_string());
                }
            }
        }
    }
    out
}

/// Expands a use tree (`a::{b, c::{d}}`) into its paths.
fn expand(tree: &str, prefix: String, out: &mut Vec<String>) {
    let tree = tree.trim();
    match tree.find('{') {
        None => {
            let leaf = tree.split(" as ").next().unwrap_or(tree).trim();
            if !leaf.is_empty() {
                out.push(format!("{prefix}{leaf}"));
            }
        }
        Some(open) => {
            let head = &tree[..open];
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let mut depth = 0;
            let mut start = 0;
            for (i, ch) in inner.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(&inner[start..i], format!("{prefix}{head}"), out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            expand(&inner[start..], format!("{prefix}{head}"), out);
        }
    }
}

/// The top-level modules a source file refers to outside its test code.
fn references(text: &str, reexports: &BTreeMap<String, String>) -> BTreeSet<String> {
    let code = drop_test_items(&strip(text));
    let mut out = BTreeSet::new();
    let mut add = |seg: &str| {
        let seg = seg.trim();
        if let Some(m) = reexports.get(seg) {
            out.insert(m.clone());
        } else if seg.starts_with(|c: char| c.is_ascii_lowercase()) && seg != "self" {
            out.insert(seg.to_string());
        }
    };
    for (i, _) in code.match_indices("crate::") {
        if code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$') {
            continue; // `grid_core::`, `$crate::`
        }
        let rest = &code[i + "crate::".len()..];
        if let Some(inner) = rest.strip_prefix('{') {
            let mut paths = Vec::new();
            let end = matching_brace(inner).unwrap_or(inner.len());
            expand(&format!("{{{}}}", &inner[..end]), String::new(), &mut paths);
            for p in paths {
                add(p.split("::").next().unwrap_or(""));
            }
        } else {
            add(&rest[..rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len())]);
        }
    }
    for (i, _) in code.match_indices("super::super::") {
        let rest = &code[i + "super::super::".len()..];
        if !rest.starts_with("super::") {
            add(&rest[..rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len())]);
        }
    }
    out
}

/// The index of the `}` that closes a block whose `{` is just before `s`.
fn matching_brace(s: &str) -> Option<usize> {
    let mut depth = 1;
    for (i, ch) in s.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `code` without the items under `#[cfg(test)]` (or `#[cfg(any(test, ...))]`).
fn drop_test_items(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(") {
        let attr_end = match rest[at..].find(")]") {
            Some(e) => at + e + 2,
            None => break,
        };
        let attr = &rest[at..attr_end];
        if !(attr == "#[cfg(test)]" || attr.starts_with("#[cfg(any(test")) {
            out.push_str(&rest[..attr_end]);
            rest = &rest[attr_end..];
            continue;
        }
        out.push_str(&rest[..at]);
        let item = &rest[attr_end..];
        // The item ends at its first `;` outside braces, or at the brace closing its body.
        let semi = item.find(';');
        let open = item.find('{');
        let end = match (semi, open) {
            (Some(s), Some(o)) if s < o => s + 1,
            (_, Some(o)) => {
                o + 1 + matching_brace(&item[o + 1..]).unwrap_or(item.len() - o - 1) + 1
            }
            (Some(s), None) => s + 1,
            (None, None) => item.len(),
        };
        rest = &item[end.min(item.len())..];
    }
    out.push_str(rest);
    out
}

/// `text` with comments and the contents of string and char literals blanked out.
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if let Some(n) = raw_string_len(&b[i..]) {
            out.push_str("\"\"");
            i += n;
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if let Some(n) = char_literal_len(&text[i..]) {
            out.push_str("' '");
            i += n;
        } else {
            let ch = text[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The length of a raw string literal (`r"..."`, `r#"..."#`, `br"..."`) at the start of `b`.
fn raw_string_len(b: &[u8]) -> Option<usize> {
    let start = if b.starts_with(b"br") {
        2
    } else if b.starts_with(b"r") {
        1
    } else {
        return None;
    };
    let hashes = b[start..].iter().take_while(|&&c| c == b'#').count();
    if b.get(start + hashes) != Some(&b'"') {
        return None;
    }
    let close: Vec<u8> = std::iter::once(b'"')
        .chain(std::iter::repeat_n(b'#', hashes))
        .collect();
    let body = start + hashes + 1;
    b[body..]
        .windows(close.len())
        .position(|w| w == close)
        .map(|p| body + p + close.len())
}

/// The length of a char literal (`'a'`, `'\n'`, `'\''`, `'\u{..}'`) at the start of `s`;
/// `None` for anything else, such as a lifetime.
fn char_literal_len(s: &str) -> Option<usize> {
    let body = s.strip_prefix('\'')?;
    if let Some(esc) = body.strip_prefix('\\') {
        // The escaped character, then anything up to the closing quote (`u{..}`).
        let close = esc.get(1..)?.find('\'')?;
        return Some(2 + 1 + close + 1);
    }
    let ch = body.chars().next()?;
    body[ch.len_utf8()..]
        .starts_with('\'')
        .then_some(1 + ch.len_utf8() + 1)
}

/// One cycle of `g` (its modules in order, the first repeated at the end), if there is one.
fn cycle(g: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        g: &Graph,
        m: &str,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(m) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = path.iter().position(|p| p == m).unwrap_or(0);
                let mut c = path[from..].to_vec();
                c.push(m.to_string());
                return Some(c);
            }
            None => {}
        }
        marks.insert(m.to_string(), Mark::Open);
        path.push(m.to_string());
        for next in g.get(m).into_iter().flatten() {
            if let Some(c) = visit(g, next, marks, path) {
                return Some(c);
            }
        }
        path.pop();
        marks.insert(m.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    g.keys()
        .find_map(|m| visit(g, m, &mut marks, &mut Vec::new()))
}

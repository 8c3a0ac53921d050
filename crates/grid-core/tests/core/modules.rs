//! The import graph between top-level modules has no cycle, in every crate of the
//! workspace: lower modules define the types and traits, higher ones use them, and nothing
//! points back (issues 18 and 36). Checked from the sources of each member of the
//! workspace's `Cargo.toml` (its `src/lib.rs`, and its `src/main.rs` when that declares
//! modules of its own): every `crate::m` path outside comments, strings and `#[cfg(test)]`
//! items is an edge to top-level module `m` (a name the crate root re-exports counts as its
//! module), as is a `super::` path that climbs to the crate root from a nested file or
//! inline module. Test code may reach up: a test builds its fixtures with the higher
//! modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Edges `from -> {to}` between the top-level modules of one crate.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// Where the workspace's `Cargo.toml` is, seen from this crate.
const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

#[test]
fn no_crate_of_the_workspace_has_a_module_cycle() {
    let roots = crate_roots(Path::new(WORKSPACE));
    let failures: Vec<String> = roots
        .iter()
        .filter_map(|(name, root)| check(name, root).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A cycle planted in a crate is caught and named, across a nested file's `super::` path;
/// the same edge back from test code is not one.
#[test]
fn a_planted_cycle_is_named() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("planted_cycle");
    let _ = std::fs::remove_dir_all(&dir);
    let files = [
        ("lib.rs", "mod a;\npub mod b;\nmod c;\n"),
        ("a.rs", "use crate::b::X;\n"),
        ("b/mod.rs", "mod inner;\npub struct X;\n"),
        ("b/inner.rs", "use super::super::c::Y;\n"),
        ("c.rs", "pub struct Y;\nfn f() { crate::a::g() }\n"),
    ];
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("a directory");
        std::fs::write(&path, text).expect("a file");
    }
    let root = dir.join("lib.rs");
    let err = check("planted", &root).expect_err("the cycle was missed");
    assert!(
        err.contains("module cycle in planted: a -> b -> c -> a"),
        "{err}"
    );
    let test_only = "pub struct Y;\n#[cfg(test)]\nmod tests { use crate::a::g; }\n";
    std::fs::write(dir.join("c.rs"), test_only).expect("a file");
    assert_eq!(check("planted", &root), Ok(()));
}

/// The checker finds what it is meant to find (a checker that sees no edge passes every tree).
#[test]
fn checker_sees_edges_and_cycles() {
    let code = "use crate::{a::X, b::{self, Y}};\n// use crate::c;\nfn f() { crate::d::g(\"crate::e\"); super::super::h::i(); }\n#[cfg(test)]\nmod tests { use crate::z; }\nuse crate::Top;\n";
    let reexports = BTreeMap::from([("Top".to_string(), "t".to_string())]);
    let to = references(code, &reexports, 2);
    let want: BTreeSet<String> = ["a", "b", "d", "h", "t"].map(String::from).into();
    assert_eq!(to, want);
    // `super::` reaches the crate root only from as deep as it climbs: a file two levels
    // down (`m/n.rs`) climbs out with two, and an inline module adds a level.
    let code = "use super::x::A;\nuse super::super::{y, w::B};\nmod inner { use super::super::super::z; fn g() { super::super::v(); } }\n";
    let to = references(code, &BTreeMap::new(), 2);
    let want: BTreeSet<String> = ["y", "w", "z"].map(String::from).into();
    assert_eq!(to, want);
    let mut g = Graph::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    assert!(cycle(&g).is_none());
    assert_eq!(depths(&g)["a"], 2);
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(
        cycle(&g),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}

/// The crate roots of the workspace's members, each with its name (its path from the
/// workspace): `src/lib.rs`, and `src/main.rs` when it declares modules (a binary that
/// only calls its library has no graph of its own). Only grid-core's own root when the
/// workspace is not there (grid-core built on its own).
fn crate_roots(workspace: &Path) -> Vec<(String, PathBuf)> {
    let Ok(manifest) = std::fs::read_to_string(workspace.join("Cargo.toml")) else {
        eprintln!("SKIPPED: no workspace at {}", workspace.display());
        let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
        return vec![("crates/grid-core/src/lib.rs".into(), lib)];
    };
    let members = members(&manifest);
    // A manifest this reads wrong must not pass for a workspace without cycles.
    assert!(
        members.iter().any(|m| m == "crates/grid-core"),
        "no grid-core among the workspace's members {members:?}"
    );
    let mut roots = Vec::new();
    for member in members {
        let before = roots.len();
        for file in ["lib.rs", "main.rs"] {
            let name = match member.as_str() {
                "." => format!("src/{file}"),
                m => format!("{m}/src/{file}"),
            };
            let path = workspace.join(&name);
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            if file == "lib.rs" || !declared_modules(&drop_test_items(&strip(&text))).is_empty() {
                roots.push((name, path));
            }
        }
        assert!(roots.len() > before, "no crate root of member {member}");
    }
    roots
}

/// The `members` of a workspace manifest (on one line or several).
fn members(manifest: &str) -> Vec<String> {
    let Some((_, list)) = manifest.split_once("\nmembers = [") else {
        return Vec::new();
    };
    let list = &list[..list.find(']').unwrap_or(list.len())];
    list.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Ok, or the crate's cycle named (`name: a -> b -> a`) with every tangle.
fn check(name: &str, root: &Path) -> Result<(), String> {
    let g = graph(root);
    match cycle(&g) {
        None => {
            let depths = depths(&g);
            let listing: Vec<String> = g
                .iter()
                .map(|(from, to)| {
                    let to: Vec<&str> = to.iter().map(String::as_str).collect();
                    format!("[{}] {from} -> {}", depths[from], to.join(", "))
                })
                .collect();
            eprintln!(
                "{name} ([depth] module -> what it imports):\n  {}",
                listing.join("\n  ")
            );
            Ok(())
        }
        Some(c) => {
            let tangles: Vec<String> = tangles(&g).iter().map(|t| t.join(" ")).collect();
            Err(format!(
                "module cycle in {name}: {}\n  (modules on cycles, by strongly connected component: {})",
                c.join(" -> "),
                tangles.join("; ")
            ))
        }
    }
}

/// Each module's depth in an acyclic graph: 0 for one that imports no other module, else
/// one more than the deepest it imports.
fn depths(g: &Graph) -> BTreeMap<String, usize> {
    fn depth(g: &Graph, m: &str, memo: &mut BTreeMap<String, usize>) -> usize {
        if let Some(&d) = memo.get(m) {
            return d;
        }
        let d = g
            .get(m)
            .into_iter()
            .flatten()
            .map(|n| depth(g, n, memo) + 1)
            .max()
            .unwrap_or(0);
        memo.insert(m.to_string(), d);
        d
    }
    let mut memo = BTreeMap::new();
    for m in g.keys() {
        depth(g, m, &mut memo);
    }
    memo
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

/// The graph of the crate whose root file is `root`: its top-level modules are the ones
/// the root declares (`mod m;`, outside test code), each the file `m.rs` and the files
/// under `m/`.
fn graph(root: &Path) -> Graph {
    let src = root.parent().expect("the root's directory");
    let code = drop_test_items(&strip(
        &std::fs::read_to_string(root).expect("the crate root"),
    ));
    let reexports = root_reexports(&code);
    let modules = declared_modules(&code);
    let mut g = Graph::new();
    for module in &modules {
        let mut files: Vec<PathBuf> = vec![src.join(format!("{module}.rs"))];
        files.retain(|f| f.exists());
        if src.join(module).is_dir() {
            files.extend(rust_files(&src.join(module)));
        }
        let to = g.entry(module.clone()).or_default();
        for file in files {
            let rel = file.strip_prefix(src).expect("under src");
            let text = std::fs::read_to_string(&file).expect("readable source");
            to.extend(
                references(&text, &reexports, nesting(rel))
                    .into_iter()
                    .filter(|m| m != module && modules.contains(m)),
            );
        }
    }
    g
}

/// How many `super::` lead from the file at `rel` (under `src`) to the crate root:
/// `m.rs` and `m/mod.rs` 1, `m/n.rs` 2, ...
fn nesting(rel: &Path) -> usize {
    let parts = rel.components().count();
    if rel.file_name().is_some_and(|f| f == "mod.rs") {
        parts - 1
    } else {
        parts
    }
}

/// The modules `code` declares from files (`mod m;`, `pub mod m;`, `pub(crate) mod m;`).
fn declared_modules(code: &str) -> BTreeSet<String> {
    item_names(code, "mod ")
        .filter(|(_, after)| after.trim_start().starts_with(';'))
        .map(|(name, _)| name.to_string())
        .collect()
}

/// Each `keyword` item of `code` (at a word boundary): its name, and the text after it.
fn item_names<'c>(code: &'c str, keyword: &'c str) -> impl Iterator<Item = (&'c str, &'c str)> {
    code.match_indices(keyword).filter_map(move |(i, _)| {
        if code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            return None;
        }
        let rest = &code[i + keyword.len()..];
        let name = rest.trim_start();
        let end = name
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(name.len());
        (end > 0).then(|| (&name[..end], &name[end..]))
    })
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

/// The top-level modules a source file refers to outside its test code; `nesting` is how
/// many `super::` lead from the file to the crate root ([`nesting`]).
fn references(
    text: &str,
    reexports: &BTreeMap<String, String>,
    nesting: usize,
) -> BTreeSet<String> {
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
    // The first segment after a path's root, or each first segment of a use tree there.
    let mut add_after = |rest: &str| {
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
    };
    let after_path = |i: usize| {
        code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$' || c == ':')
    };
    for (i, _) in code.match_indices("crate::") {
        if after_path(i) {
            continue; // `grid_core::`, `$crate::`
        }
        add_after(&code[i + "crate::".len()..]);
    }
    // Inline modules (outside test code) add a level to the `super::` inside them.
    let inline: Vec<(usize, usize)> = item_names(&code, "mod ")
        .filter_map(|(_, after)| {
            let body = after.trim_start().strip_prefix('{')?;
            let start = code.len() - body.len();
            Some((start, start + matching_brace(body).unwrap_or(body.len())))
        })
        .collect();
    for (i, _) in code.match_indices("super::") {
        if after_path(i) {
            continue; // the second `super::` of a run
        }
        let mut rest = &code[i..];
        let mut climbs = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            rest = r;
            climbs += 1;
        }
        let depth = nesting + inline.iter().filter(|(s, e)| *s <= i && i < *e).count();
        if climbs == depth {
            add_after(rest);
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

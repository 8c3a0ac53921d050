//! Expansion of the grammar template (see `grammars/README.md`).
//!
//! A rule whose name ends in `@` is emitted twice: a plain copy (`@` deleted, alternatives
//! marked `/*only_w*/` dropped) and a `_w` copy (`@` replaced by `_w`, every alternative
//! kept). This keeps "a CTE name is a FROM item only inside a WITH" context-free.

use crate::error::{GridError, Result};

const MARKER: &str = "/*only_w*/";

/// Expands the template; the result is plain grmtools yacc.
pub fn expand(src: &str) -> Result<String> {
    let Some(split) = find_section_break(src, 0) else {
        return Err(GridError::Template(
            "no %% separating declarations and rules".into(),
        ));
    };
    let (decls, rest) = src.split_at(split);
    let rest = &rest[2..];
    let (rules, programs) = match find_section_break(rest, 0) {
        Some(i) => (&rest[..i], Some(&rest[i + 2..])),
        None => (rest, None),
    };
    let mut out = String::with_capacity(src.len() * 2);
    out.push_str(decls);
    out.push_str("%%\n");
    for rule in split_rules(rules)? {
        let (name, body) = rule;
        if let Some(base) = name.strip_suffix('@') {
            if base.contains('@') {
                return Err(GridError::Template(format!("rule {name}: more than one @")));
            }
            let alts = split_alternatives(body);
            let plain: Vec<&str> = alts
                .iter()
                .copied()
                .filter(|a| !a.contains(MARKER))
                .collect();
            if plain.is_empty() {
                return Err(GridError::Template(format!(
                    "rule {name}: every alternative is /*only_w*/, so its plain copy would be empty"
                )));
            }
            emit_rule(&mut out, base, &plain, "");
            emit_rule(&mut out, &format!("{base}_w"), &alts, "_w");
        } else {
            if body.contains('@') {
                return Err(GridError::Template(format!(
                    "rule {name} is not a template but uses @; name a variant explicitly"
                )));
            }
            if body.contains(MARKER) {
                return Err(GridError::Template(format!(
                    "rule {name}: /*only_w*/ outside a template"
                )));
            }
            out.push_str(&format!("{name}:{body};\n"));
        }
    }
    if let Some(p) = programs {
        out.push_str("%%");
        out.push_str(p);
    }
    Ok(out)
}

fn emit_rule(out: &mut String, name: &str, alts: &[&str], suffix: &str) {
    out.push_str(name);
    out.push(':');
    for (i, alt) in alts.iter().enumerate() {
        if i > 0 {
            out.push_str("\n    |");
        }
        out.push_str(&alt.replace(MARKER, "").replace('@', suffix));
    }
    out.push_str(";\n");
}

/// Byte offset of the next `%%` outside comments and quotes.
fn find_section_break(s: &str, from: usize) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = from;
    while i + 1 < b.len() {
        match b[i] {
            b'/' if b[i + 1] == b'*' => i = skip_block_comment(b, i),
            b'/' if b[i + 1] == b'/' => i = skip_line(b, i),
            b'\'' | b'"' => i = skip_quoted(b, i),
            b'%' if b[i + 1] == b'%' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

fn skip_block_comment(b: &[u8], i: usize) -> usize {
    let mut j = i + 2;
    while j + 1 < b.len() && !(b[j] == b'*' && b[j + 1] == b'/') {
        j += 1;
    }
    (j + 2).min(b.len())
}

fn skip_line(b: &[u8], i: usize) -> usize {
    let mut j = i;
    while j < b.len() && b[j] != b'\n' {
        j += 1;
    }
    j
}

fn skip_quoted(b: &[u8], i: usize) -> usize {
    let q = b[i];
    let mut j = i + 1;
    while j < b.len() && b[j] != q {
        j += 1;
    }
    (j + 1).min(b.len())
}

/// Splits the rules section into `(name, body)` pairs; the body excludes the `:` and `;`.
fn split_rules(s: &str) -> Result<Vec<(&str, &str)>> {
    let b = s.as_bytes();
    let mut rules = Vec::new();
    let mut i = 0;
    loop {
        // Skip whitespace and comments between rules.
        loop {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if i + 1 < b.len() && b[i] == b'/' && b[i + 1] == b'*' {
                i = skip_block_comment(b, i);
            } else if i + 1 < b.len() && b[i] == b'/' && b[i + 1] == b'/' {
                i = skip_line(b, i);
            } else {
                break;
            }
        }
        if i >= b.len() {
            return Ok(rules);
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'@') {
            i += 1;
        }
        let name = &s[start..i];
        if name.is_empty() {
            return Err(GridError::Template(format!(
                "expected a rule name at byte {start}"
            )));
        }
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() || b[i] != b':' {
            return Err(GridError::Template(format!("rule {name}: expected ':'")));
        }
        i += 1;
        let body_start = i;
        loop {
            if i >= b.len() {
                return Err(GridError::Template(format!("rule {name}: missing ';'")));
            }
            match b[i] {
                b';' => break,
                b'/' if i + 1 < b.len() && b[i + 1] == b'*' => i = skip_block_comment(b, i),
                b'/' if i + 1 < b.len() && b[i + 1] == b'/' => i = skip_line(b, i),
                b'\'' | b'"' => i = skip_quoted(b, i),
                _ => i += 1,
            }
        }
        rules.push((name, &s[body_start..i]));
        i += 1;
    }
}

/// Splits a rule body on top-level `|`.
fn split_alternatives(body: &str) -> Vec<&str> {
    let b = body.as_bytes();
    let mut alts = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'|' => {
                alts.push(&body[start..i]);
                i += 1;
                start = i;
            }
            b'/' if i + 1 < b.len() && b[i + 1] == b'*' => {
                let end = skip_block_comment(b, i);
                // The marker belongs to the alternative it ends.
                i = end;
            }
            b'/' if i + 1 < b.len() && b[i + 1] == b'/' => i = skip_line(b, i),
            b'\'' | b'"' => i = skip_quoted(b, i),
            _ => i += 1,
        }
    }
    alts.push(&body[start..]);
    alts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_both_copies() {
        let src = "%start s\n%token A B C\n%%\ns: t | t_w ;\nt@: A u@ | B /*only_w*/ ;\nu@: C ;\n";
        let out = expand(src)
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(out.contains("t: A u ;"), "{out}");
        assert!(out.contains("t_w: A u_w | B ;"), "{out}");
        assert!(out.contains("u: C ; u_w: C ;"), "{out}");
    }

    #[test]
    fn rejects_misplaced_markers() {
        assert!(expand("%start s\n%%\ns: a@ ;\n").is_err());
        assert!(expand("%start s\n%%\ns@: A /*only_w*/ ;\n").is_err());
        assert!(expand("%start s\n%%\ns: A /*only_w*/ ;\n").is_err());
    }
}

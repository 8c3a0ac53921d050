//! Mutated gold must be refused: one schema identifier swapped for a name the schema lacks,
//! or a verb the policy lacks. Each family has a positive control that must still parse.

use crate::common;

use std::collections::HashSet;

use common::{gold, spider_or_skip, Langs};
use grid_core::{Policy, Session};

/// Word occurrences outside string literals: (byte range, word).
fn words(sql: &str) -> Vec<(usize, usize)> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\'' {
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                i += 1;
            }
            i += 1;
        } else if b[i].is_ascii_alphabetic() || b[i] == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((s, i));
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn identifier_swaps_are_refused() {
    let Some(dir) = spider_or_skip("identifier_swaps_are_refused") else {
        return;
    };
    let mut langs = Langs::new(&dir, Policy::default());
    let (mut tried, mut controls) = (0usize, 0usize);
    let mut accepted = Vec::new();
    for g in gold(&dir) {
        let lang = langs.get(&g.db);
        let schema = langs.schema(&g.db).clone();
        let mut names: HashSet<String> = HashSet::new();
        for t in &schema.tables {
            names.insert(t.name.to_ascii_lowercase());
            for c in &t.columns {
                names.insert(c.name.to_ascii_lowercase());
            }
        }
        let mut s = Session::new(&lang);
        assert!(s.complete(g.sql.as_bytes()), "control: {}", g.sql);
        controls += 1;
        let occ = words(&g.sql);
        for (k, &(a, b)) in occ.iter().enumerate() {
            let word = g.sql[a..b].to_ascii_lowercase();
            if !names.contains(&word) {
                continue;
            }
            // A name right after AS defines an alias, and any alias is allowed.
            if k > 0 && g.sql[occ[k - 1].0..occ[k - 1].1].eq_ignore_ascii_case("as") {
                continue;
            }
            for fresh in [
                format!("{word}_zz"),
                format!("zz{word}"),
                word[..word.len() - 1].to_string(),
            ] {
                if fresh.is_empty() || names.contains(&fresh) {
                    continue;
                }
                let m = format!("{}{}{}", &g.sql[..a], fresh, &g.sql[b..]);
                tried += 1;
                if s.complete(m.as_bytes()) {
                    accepted.push(m);
                }
            }
        }
    }
    eprintln!(
        "{controls} controls parsed, {tried} identifier mutations tried, {} accepted",
        accepted.len()
    );
    assert!(tried >= 3000, "only {tried} mutations");
    assert!(
        accepted.is_empty(),
        "mutations accepted:\n{}",
        accepted.join("\n")
    );
}

#[test]
fn verbs_outside_the_policy_are_refused() {
    let Some(dir) = spider_or_skip("verbs_outside_the_policy_are_refused") else {
        return;
    };
    let mut select_only = Langs::new(&dir, Policy::select_only());
    let mut all = Langs::new(&dir, Policy::default());
    let mut tried = 0;
    for g in gold(&dir) {
        let schema = all.schema(&g.db).clone();
        let t = &schema.tables[0];
        let table = grid_core::lexicon::spellings(&t.name, &|w| common::dialect().is_reserved(w))
            .pop()
            .unwrap_or_default();
        let col = grid_core::lexicon::spellings(&t.columns[0].name, &|w| {
            common::dialect().is_reserved(w)
        })
        .pop()
        .unwrap_or_default();
        let body = g.sql.trim_end().trim_end_matches(';');
        let writes = [
            format!("INSERT INTO {table} {body}"),
            format!("DELETE FROM {table}"),
            format!("DELETE FROM {table} WHERE {col} = 1"),
            format!("UPDATE {table} SET {col} = 1"),
            format!("UPDATE {table} SET {col} = NULL WHERE {col} IN ({body})"),
        ];
        let ro = select_only.get(&g.db);
        let rw = all.get(&g.db);
        let (mut s_ro, mut s_rw) = (Session::new(&ro), Session::new(&rw));
        for w in &writes {
            tried += 1;
            assert!(
                s_rw.complete(w.as_bytes()),
                "control must parse with every verb: {w}"
            );
            assert!(!s_ro.complete(w.as_bytes()), "select-only accepted: {w}");
        }
    }
    assert!(tried >= 5000, "{tried}");
}

#[test]
fn per_verb_target_tables_are_enforced() {
    let Some(dir) = spider_or_skip("per_verb_target_tables_are_enforced") else {
        return;
    };
    let schemas = common::schemas(&dir);
    let reserved = |w: &str| common::dialect().is_reserved(w);
    let mut checked = 0;
    for schema in schemas.values().filter(|s| s.tables.len() >= 2) {
        let (a, b) = (&schema.tables[0], &schema.tables[1]);
        let policy = Policy::from_json(&format!(
            r#"{{"verbs":["select","insert","delete"],"insert_tables":[{:?}],"delete_tables":[{:?}]}}"#,
            a.name, b.name
        ))
        .unwrap();
        let lx = grid_core::Lexicon::from_schema(schema, &policy, &reserved).unwrap();
        let lang = grid_core::Language::build(common::dialect(), &policy, &lx).unwrap();
        let mut s = Session::new(&lang);
        let spell = |n: &str| {
            grid_core::lexicon::spellings(n, &reserved)
                .pop()
                .unwrap_or_default()
        };
        let (ta, tb) = (spell(&a.name), spell(&b.name));
        assert!(
            s.complete(format!("INSERT INTO {ta} DEFAULT VALUES").as_bytes()),
            "{ta}"
        );
        assert!(
            !s.complete(format!("INSERT INTO {tb} DEFAULT VALUES").as_bytes()),
            "{tb}"
        );
        assert!(s.complete(format!("DELETE FROM {tb}").as_bytes()));
        assert!(!s.complete(format!("DELETE FROM {ta}").as_bytes()));
        assert!(!s.viable(b"UPDATE "));
        checked += 1;
    }
    assert!(checked > 100);
}

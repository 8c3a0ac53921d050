//! The engine against SQL written by others: Spider dev gold, in each database's language.

use crate::common;

use common::{gold, gold_all, refused_by_postgres, spider_or_skip, Langs};
use grid_core::{Policy, Session};

/// The language refuses exactly the gold lines PostgreSQL 15 refuses (listed in
/// tests/spider_refused_by_postgres.tsv: a JOIN without ON, a subquery in FROM without
/// an alias) and parses every other one.
#[test]
fn every_gold_statement_postgres_parses_parses_and_no_other() {
    let Some(dir) = spider_or_skip("every_gold_statement_postgres_parses_parses_and_no_other")
    else {
        return;
    };
    let gold = gold_all(&dir);
    assert_eq!(gold.len(), 1034);
    let refused_by_pg = refused_by_postgres();
    assert_eq!(refused_by_pg.len(), 4);
    let mut langs = Langs::new(&dir, Policy::default());
    let mut failures = Vec::new();
    let mut refused = std::collections::BTreeSet::new();
    for g in &gold {
        let lang = langs.get(&g.db);
        let mut s = Session::new(&lang);
        if let Err(stop) = s.check(g.sql.as_bytes()) {
            refused.insert(g.line);
            if !refused_by_pg.contains(&g.line) {
                failures.push(format!(
                    "line {}: {} at byte {}: {:?}",
                    g.line, g.sql, stop.offset, stop.kind
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 1034 fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(refused, refused_by_pg, "PostgreSQL refuses these lines");
}

/// Every byte prefix of a sentence is viable, and only the whole sentence (or it plus
/// trailing blanks) is complete at the end.
#[test]
fn every_prefix_of_gold_is_viable() {
    let Some(dir) = spider_or_skip("every_prefix_of_gold_is_viable") else {
        return;
    };
    let mut langs = Langs::new(&dir, Policy::default());
    let mut checked = 0usize;
    for g in gold(&dir) {
        let lang = langs.get(&g.db);
        let mut s = Session::new(&lang);
        let mut cfg = s.start();
        for (i, &b) in g.sql.as_bytes().iter().enumerate() {
            assert!(
                s.feed(&mut cfg, &[b]).is_ok(),
                "{}: byte {i} refused",
                g.sql
            );
            assert!(
                s.is_viable(&cfg),
                "{}: prefix of {} bytes not viable",
                g.sql,
                i + 1
            );
            checked += 1;
        }
        assert!(s.is_complete(&cfg), "{}", g.sql);
    }
    assert!(checked > 50_000, "{checked}");
}

/// With a select-only policy the gold still parses, and no write verb can even start.
#[test]
fn select_only_policy_keeps_gold_and_blocks_writes() {
    let Some(dir) = spider_or_skip("select_only_policy_keeps_gold_and_blocks_writes") else {
        return;
    };
    let mut langs = Langs::new(&dir, Policy::select_only());
    for g in gold(&dir).iter().step_by(7) {
        let lang = langs.get(&g.db);
        let mut s = Session::new(&lang);
        assert!(s.complete(g.sql.as_bytes()), "{}", g.sql);
        for w in [
            "INSERT",
            "insert into",
            "UPDATE",
            "update ",
            "DELETE",
            "delete from ",
            "WITH x AS (DELETE",
        ] {
            assert!(!s.viable(w.as_bytes()), "{w} is viable under select-only");
        }
    }
}

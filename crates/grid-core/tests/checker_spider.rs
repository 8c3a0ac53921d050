//! The semantic checker against the Spider dev gold: with every privilege granted, every
//! gold statement checks clean; with one column revoked, exactly the statements that use it
//! are flagged, as an independent token scan predicts.

mod common;

use grid_core::catalog::CatalogSnapshot;
use grid_core::checker::Checker;

#[test]
fn gold_checks_clean_with_every_privilege() {
    let Some(dir) = common::spider_or_skip("gold_checks_clean_with_every_privilege") else {
        return;
    };
    let schemas = common::schemas(&dir);
    let gold = common::gold(&dir);
    let mut bad = Vec::new();
    for g in &gold {
        let snap = CatalogSnapshot::granting_all(&schemas[&g.db], "spider");
        let v = Checker::new(&snap).check(&g.sql);
        if !v.is_empty() {
            bad.push(format!(
                "{} | {} | {}",
                g.db,
                g.sql,
                v.iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
    }
    for b in &bad {
        eprintln!("{b}");
    }
    assert!(
        bad.is_empty(),
        "{} of {} gold statements flagged",
        bad.len(),
        gold.len()
    );
}

//! The semantic checker against the Spider dev gold: with every privilege granted, every
//! gold statement checks clean; with one column revoked, exactly the statements that use it
//! are flagged, as an independent token scan predicts.

use crate::common;

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

/// Identifier and symbol tokens of `sql` outside string literals, identifiers folded as
/// PostgreSQL folds them.
fn tokens(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = sql.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'\'' {
            i += 1;
            while i < b.len() {
                if b[i] == b'\'' {
                    if b.get(i + 1) == Some(&b'\'') {
                        i += 2;
                        continue;
                    }
                    break;
                }
                i += 1;
            }
            i += 1;
        } else if c == b'"' {
            let start = i + 1;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += 1;
            }
            out.push(sql[start..i.min(b.len())].to_string());
            i += 1;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$') {
                i += 1;
            }
            out.push(sql[start..i].to_ascii_lowercase());
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else {
            out.push((c as char).to_string());
            i += 1;
        }
    }
    out
}

/// Whether the statement uses column `column` of `table` (which is the only table of its
/// database with that column), or reads `table` through `*`, by tokens alone.
fn uses_by_scan(sql: &str, table: &str, column: &str) -> bool {
    let t = tokens(sql);
    if !t.iter().any(|x| x == table) {
        return false;
    }
    let star = t.iter().enumerate().any(|(i, x)| {
        x == "*" && i > 0 && matches!(t[i - 1].as_str(), "select" | "distinct" | "," | ".")
    });
    star || t.iter().any(|x| x == column)
}

#[test]
fn revoked_columns_flag_exactly_the_statements_that_use_them() {
    use grid_core::checker::ViolationKind;
    use grid_core::policy::Verb;
    let Some(dir) =
        common::spider_or_skip("revoked_columns_flag_exactly_the_statements_that_use_them")
    else {
        return;
    };
    let schemas = common::schemas(&dir);
    let gold = common::gold(&dir);
    let mut dbs: Vec<&String> = schemas.keys().collect();
    dbs.sort();
    let (mut checked, mut flagged, mut cases) = (0usize, 0usize, 0usize);
    let mut disagreements = Vec::new();
    for db in dbs {
        let schema = &schemas[db];
        let stmts: Vec<&common::Gold> = gold.iter().filter(|g| &g.db == db).collect();
        if stmts.is_empty() {
            continue;
        }
        let table_names: Vec<&str> = schema.tables.iter().map(|t| t.name.as_str()).collect();
        // Columns unique to one table, spelled simply, used by some statement of the db:
        // up to five per database.
        let mut picked = Vec::new();
        for t in &schema.tables {
            for c in &t.columns {
                let unique = schema
                    .tables
                    .iter()
                    .filter(|u| u.columns.iter().any(|x| x.name == c.name))
                    .count()
                    == 1;
                let simple = c.name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
                let used = stmts.iter().any(|g| tokens(&g.sql).contains(&c.name));
                if unique && simple && used && !table_names.contains(&c.name.as_str()) {
                    picked.push((t.name.clone(), c.name.clone()));
                }
            }
        }
        picked.truncate(5);
        for (n, (table, column)) in picked.into_iter().enumerate() {
            cases += 1;
            let mut snap = CatalogSnapshot::granting_all(schema, "reader");
            let rel = snap
                .relations
                .iter_mut()
                .find(|r| r.name == table)
                .expect("picked table");
            rel.privileges.remove(&Verb::Select);
            let col_pos = rel
                .columns
                .iter()
                .position(|c| c.name == column)
                .expect("picked column");
            // Alternate: the column stays listed (other privileges held) or disappears.
            if n % 2 == 0 {
                rel.columns[col_pos].privileges.remove(&Verb::Select);
            } else {
                rel.columns.remove(col_pos);
            }
            let checker = Checker::new(&snap);
            for g in &stmts {
                checked += 1;
                let v = checker.check(&g.sql);
                let expected = uses_by_scan(&g.sql, &table, &column);
                flagged += !v.is_empty() as usize;
                let about_it = v.iter().all(|v| match &v.kind {
                    ViolationKind::ColumnPrivilege {
                        table: t,
                        column: c,
                        privilege,
                    } => *t == table && *c == column && *privilege == Verb::Select,
                    ViolationKind::UnknownColumn { column: c, .. } => *c == column,
                    ViolationKind::Wildcard { table: t } => *t == table,
                    _ => false,
                });
                if expected == v.is_empty() || !about_it {
                    disagreements.push(format!(
                        "{db}: revoked {table}.{column}: scan says {expected}, checker says {:?} for {}",
                        v.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
                        g.sql
                    ));
                }
            }
        }
    }
    for d in &disagreements {
        eprintln!("{d}");
    }
    eprintln!("{cases} revocations, {checked} checks, {flagged} flagged");
    assert!(
        cases >= 50 && flagged > 300,
        "too few cases to mean anything"
    );
    assert!(
        disagreements.is_empty(),
        "{} disagreements",
        disagreements.len()
    );
}

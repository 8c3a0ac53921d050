//! Schemas shared by the tests and the fuzz targets (fuzz/src/fixtures.rs includes this
//! file), so that both exercise the same names, and the one comparison of two masks.

use std::sync::Arc;

use grid_core::mask::Mask;
use grid_core::schema::{Schema, Table};
use grid_core::{Dialect, Language, Lexicon, Policy};
use grid_vocab::Vocabulary;

/// `employees` is a prefix of `employees_public`; a quoted column needs quoting.
pub fn hr_schema() -> Schema {
    Schema {
        db_id: "hr".into(),
        tables: vec![
            Table::with_columns("employees", &["id", "name", "salary", "Rating_(millions)"]),
            Table::with_columns("employees_public", &["id", "name"]),
            Table::with_columns("orders", &["id", "total", "employee_id"]),
        ],
    }
}

/// Shares `orders` and some column names with `hr`, so positions of the two look alike.
pub fn shop_schema() -> Schema {
    Schema {
        db_id: "shop".into(),
        tables: vec![
            Table::with_columns("orders", &["id", "total", "customer"]),
            Table::with_columns("customers", &["id", "name", "email"]),
        ],
    }
}

/// The language of `schema` under `policy` in `dialect`.
pub fn language(dialect: &Arc<Dialect>, schema: &Schema, policy: &Policy) -> Arc<Language> {
    let reserved = |w: &str| dialect.is_reserved(w);
    let lx = Lexicon::from_schema(schema, policy, &reserved).expect("fixture lexicon");
    Arc::new(Language::build(dialect.clone(), policy, &lx).expect("fixture language"))
}

/// Asserts that two masks allow the same ids, EOS and counts (`what` says which two, and
/// where); with `classes`, also the same CI/CD split and CD classes, which the oracle does
/// not compute. A failure spells the first ids that differ in `vocab`.
pub fn assert_same_mask(a: &Mask, b: &Mask, vocab: &Vocabulary, what: &str, classes: bool) {
    let spell = |ids: &[u32]| -> Vec<String> {
        ids.iter()
            .take(12)
            .map(|&id| format!("{id}:{:?}", String::from_utf8_lossy(vocab.token_bytes(id))))
            .collect()
    };
    let (only_a, only_b) = a.diff(b);
    assert!(
        only_a.is_empty() && only_b.is_empty() && a.eos == b.eos,
        "{what}: only left {:?}, only right {:?}, eos {} vs {}",
        spell(&only_a),
        spell(&only_b),
        a.eos,
        b.eos
    );
    assert_eq!(
        (a.allowed, a.blocked),
        (b.allowed, b.blocked),
        "{what}: counts"
    );
    if classes {
        assert_eq!((a.ci, a.cd), (b.ci, b.cd), "{what}: CI/CD split");
        let ids =
            |m: &Mask| -> Vec<Vec<u32>> { m.cd_classes.iter().map(|c| c.ids.to_vec()).collect() };
        assert_eq!(ids(a), ids(b), "{what}: CD classes");
    }
}

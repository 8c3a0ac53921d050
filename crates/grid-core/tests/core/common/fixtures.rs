//! Schemas shared by the tests and the fuzz targets (fuzz/src/fixtures.rs includes this
//! file), so that both exercise the same names.

use std::sync::Arc;

use grid_core::schema::{Schema, Table};
use grid_core::{Dialect, Language, Lexicon, Policy};

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

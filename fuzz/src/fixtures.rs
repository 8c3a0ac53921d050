//! Languages and a vocabulary small enough for the oracle, built once per process.

use std::sync::{Arc, LazyLock};

use grid_core::schema::{Schema, Table};
use grid_core::{Dialect, Language, Lexicon, Policy};
use grid_vocab::Vocabulary;

/// `employees` is a prefix of `employees_public`; a quoted column needs quoting.
fn hr_schema() -> Schema {
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
fn shop_schema() -> Schema {
    Schema {
        db_id: "shop".into(),
        tables: vec![
            Table::with_columns("orders", &["id", "total", "customer"]),
            Table::with_columns("customers", &["id", "name", "email"]),
        ],
    }
}

fn lexicon(dialect: &Arc<Dialect>, schema: &Schema, policy: &Policy) -> Lexicon {
    let reserved = |w: &str| dialect.is_reserved(w);
    Lexicon::from_schema(schema, policy, &reserved).expect("fixture lexicon")
}

fn language(dialect: &Arc<Dialect>, schema: &Schema, policy: &Policy) -> Arc<Language> {
    let lx = lexicon(dialect, schema, policy);
    Arc::new(Language::build(dialect.clone(), policy, &lx).expect("fixture language"))
}

/// The lexicons of [`LANGUAGES`], in order.
pub static LEXICONS: LazyLock<Vec<Lexicon>> = LazyLock::new(|| {
    let full = Arc::new(Dialect::postgres().expect("postgres dialect"));
    let ext = Arc::new(Dialect::postgres_without_comments().expect("extension dialect"));
    vec![
        lexicon(&full, &hr_schema(), &Policy::default()),
        lexicon(&full, &hr_schema(), &Policy::select_only()),
        lexicon(&ext, &shop_schema(), &Policy::select_only()),
    ]
});

/// The roles the targets pick from: every verb and SELECT-only over `hr` with the full
/// dialect (comments), and SELECT-only over `shop` with the extension's dialect (no
/// comments, ASCII identifiers).
pub static LANGUAGES: LazyLock<Vec<Arc<Language>>> = LazyLock::new(|| {
    let full = Arc::new(Dialect::postgres().expect("postgres dialect"));
    let ext = Arc::new(Dialect::postgres_without_comments().expect("extension dialect"));
    vec![
        language(&full, &hr_schema(), &Policy::default()),
        language(&full, &hr_schema(), &Policy::select_only()),
        language(&ext, &shop_schema(), &Policy::select_only()),
    ]
});

#[rustfmt::skip]
const FRAGMENTS: &[&str] = &[
    "SELECT", " SELECT", "select", "sel", "ect", " FROM", " from", " WHERE", " name", "name",
    " *", "*", " emplo", "emplo", "loyees", "yees", "y", "yees;", "_public", " employees",
    "employees", " orders", "orders", " customers", "cust", "omers", "'),", "),", "')", "1;",
    ";", " 1", "1", " =", " = ", " (", "(", ")", "(*)", " count", "count(", "'it", "''", "s'",
    "' ", "'a", "\"", " \"", "\"employees\"", "\"Rating", "_(millions", ")\"", "/*", "*/",
    " --", "\n", "1.5", "e3", "1e", "e+", " AS", " T1", ".name", "T1.", " UNION", " INSERT",
    " INTO", " VALUES", " (1)", " x", "ex", "id", " id", " total", " 'x'", "::", "text", " <",
    " <=", "||", " AND", " OR", " IN", " NOT", " NULL", " IS", " JOIN", " ON", " GROUP",
    " BY", " ORDER", " LIMIT", " 2", "0", ".5", "e", "E", " AS uu", " email", " customer",
    ",", ", ", " ,", " sal", "sal", "ary", " salary", " DELETE", " UPDATE", " SET",
    // Names a statement introduces (the dynamic lexicon), and what uses them.
    " AS n", " n", "n", ".n", "n,", " uu", "uu", ".uu", " ORDER BY", " ORDER BY n",
    " GROUP BY", ") s", ") AS s", " s.", "s.", " WITH", " c AS (", " FROM c", " (SELECT",
];

/// Every byte, SQL fragments that cross lexeme boundaries, aliases (duplicate spellings),
/// EOS and one other special id.
pub static VOCAB: LazyLock<Vocabulary> = LazyLock::new(|| {
    let mut toks: Vec<Vec<u8>> = vec![b"<eos>".to_vec(), b"<pad>".to_vec()];
    toks.extend((0..=255u8).map(|b| vec![b]));
    toks.extend(FRAGMENTS.iter().map(|f| f.as_bytes().to_vec()));
    for d in ["yees", " FROM", "'),", "("] {
        toks.push(d.as_bytes().to_vec());
        toks.push(d.as_bytes().to_vec());
    }
    Vocabulary::from_served(toks, &[1], Some(0)).expect("fixture vocabulary")
});

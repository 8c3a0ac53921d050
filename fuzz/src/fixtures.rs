//! Languages and a vocabulary small enough for the oracle, built once per process.

use std::sync::{Arc, LazyLock};

use grid_core::schema::{Schema, Table};
use grid_core::{Dialect, Language, Policy};
use grid_vocab::Vocabulary;

// The schemas the tests use too, from their one place.
#[path = "../../crates/grid-core/tests/core/common/fixtures.rs"]
mod shared;
pub use shared::assert_same_mask;
use shared::{hr_schema, language, shop_schema};

/// `shop` plus another role's table off the search path, written `atk.inbox`.
fn shop_with_inbox() -> Schema {
    let mut s = shop_schema();
    let mut inbox = Table::with_columns("inbox", &["id", "note"]);
    inbox.qualifier = Some("atk".into());
    s.tables.push(inbox);
    s
}

/// The roles the targets pick from: every verb and SELECT-only over `hr` with the full
/// dialect (comments), and with the extension's dialect (no comments, ASCII
/// identifiers) SELECT-only over `shop` and every verb over `shop` with a qualified
/// relation.
pub static LANGUAGES: LazyLock<Vec<Arc<Language>>> = LazyLock::new(|| {
    let full = Arc::new(Dialect::postgres().expect("postgres dialect"));
    let ext = Arc::new(Dialect::postgres_without_comments().expect("extension dialect"));
    vec![
        language(&full, &hr_schema(), &Policy::default()),
        language(&full, &hr_schema(), &Policy::select_only()),
        language(&ext, &shop_schema(), &Policy::select_only()),
        language(&ext, &shop_with_inbox(), &Policy::default()),
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

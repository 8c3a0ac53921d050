//! L1 and L2 on the shipped dialect, without external data: the grammar builds
//! conflict-free and reduced, its examples parse, projections keep the terminal numbering,
//! and a conflicting grammar is refused.

use crate::common;

use common::{dialect, examples, language_for, permissive_schema};
use grid_core::grammar::table::LrTable;
use grid_core::policy::{Ban, Policy, Verb};
use grid_core::{Dialect, GridError, Session};

#[test]
fn dialect_is_conflict_free_and_reduced() {
    let d = dialect();
    assert!(d.table.n_states > 500, "{} states", d.table.n_states);
    assert!(d.cfg.useless_symbols().unwrap().is_empty());
    // The template made a CTE-scoped copy of the SELECT grammar.
    assert!(d.cfg.rule_id("select_stmt").is_some() && d.cfg.rule_id("select_stmt_w").is_some());
    let cte_ref = d.cfg.token_id("CTE_REF").unwrap();
    let plain_uses_cte = d.cfg.prods.iter().any(|p| {
        !d.cfg.rules[p.lhs as usize].ends_with("_w")
            && p.rhs.contains(&grid_core::grammar::cfg::Sym::T(cte_ref))
    });
    assert!(!plain_uses_cte, "a CTE reference outside a WITH");
}

#[test]
fn conflicting_grammars_are_refused() {
    let y = "%start s\n%token A\n%%\ns: e ;\ne: e A e | A ;\n";
    let lex = "KW A a\n";
    match Dialect::load(y, lex) {
        Err(GridError::Conflicts { sr, .. }) => assert!(sr > 0),
        other => panic!("expected a conflict error, got {other:?}"),
    }
    let useless = "%start s\n%token A B\n%%\ns: A ;\nt: B ;\n";
    assert!(matches!(
        Dialect::load(useless, "KW A a\nKW B b\n"),
        Err(GridError::NotReduced(_))
    ));
    assert!(matches!(
        Dialect::load("%start s\n%token A\n%%\ns: A ;\n", "KW B b\n"),
        Err(GridError::SpecMismatch(_))
    ));
}

#[test]
fn examples_parse() {
    let ex = examples();
    assert!(ex.len() >= 150, "{}", ex.len());
    let lang = language_for(&permissive_schema(&ex), &Policy::default());
    let mut s = Session::new(&lang);
    let bad: Vec<&String> = ex.iter().filter(|e| !s.complete(e.as_bytes())).collect();
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn refuses_what_postgres_refuses() {
    let ex = examples();
    let lang = language_for(&permissive_schema(&ex), &Policy::default());
    let mut s = Session::new(&lang);
    for bad in [
        "SELECT name FROM dogs WHERE",
        "SELECT name FROM dogs; DROP TABLE dogs",
        "SELECT name FROM dogs; SELECT 1",
        "SELECT FROM FROM dogs",
        "SELECT name FROM dogs WHERE age > 1 > 2",
        "SELECT name FROM dogs ORDER BY",
        "SELECT 1 LIKE 2 NOT LIKE 3",
        "SELECT 'unterminated",
        "SELECT name FROM dogs /* open comment",
        "SELECT 1ex",
        // PostgreSQL requires ON, USING, NATURAL or CROSS.
        "SELECT * FROM dogs JOIN owners",
        "SELECT * FROM dogs d JOIN owners o WHERE d.owner_id = o.owner_id",
        "SELECT * FROM dogs LEFT JOIN owners",
    ] {
        assert!(!s.complete(bad.as_bytes()), "accepted: {bad}");
    }
}

/// Statements PostgreSQL reads that the language leaves out on purpose: other statement
/// kinds, functions the lexicon does not offer, a reserved word as a bare label (PostgreSQL
/// takes `AS select`), and spellings whose meaning depends on a setting.
#[test]
fn leaves_out_what_postgres_reads_but_it_does_not_offer() {
    let ex = examples();
    let lang = language_for(&permissive_schema(&ex), &Policy::default());
    let mut s = Session::new(&lang);
    for left_out in [
        "DROP TABLE dogs",
        "COPY dogs TO '/tmp/x'",
        "SELECT pg_sleep(10)",
        "SELECT name AS select FROM dogs",
        // One meaning under every setting (tests/one_meaning.json has the rest).
        "SELECT 'a\\' FROM dogs",
        "SELECT E'\\'' FROM dogs",
    ] {
        assert!(!s.complete(left_out.as_bytes()), "accepted: {left_out}");
    }
}

/// Projections never renumber terminals: the table of every sampled policy is built with
/// the dialect's `%token` order (checked inside `LrTable::build`), is conflict-free, and
/// the verbs it lacks cannot start a statement.
#[test]
fn projections_keep_numbering_and_drop_what_they_ban() {
    let d = dialect();
    let ex = examples();
    let schema = permissive_schema(&ex);
    let policies = [
        (vec![Verb::Select], vec![]),
        (
            vec![Verb::Select],
            vec![
                Ban::SetOps,
                Ban::Subqueries,
                Ban::Window,
                Ban::Cte,
                Ban::Joins,
            ],
        ),
        (vec![Verb::Insert], vec![]),
        (vec![Verb::Update, Verb::Delete], vec![Ban::Subqueries]),
        (vec![Verb::Select, Verb::Insert], vec![Ban::Joins]),
    ];
    for (verbs, ban) in policies {
        let p = Policy {
            verbs: verbs.clone(),
            ban: ban.clone(),
            ..Policy::default()
        };
        let cfg = grid_core::grammar::project(&d, &p, &[]).unwrap();
        assert_eq!(cfg.tokens, d.cfg.tokens);
        assert!(cfg.useless_symbols().unwrap().is_empty());
        LrTable::build(&cfg).unwrap();
        let lang = language_for(&schema, &p);
        let mut s = Session::new(&lang);
        for (v, head) in [
            (Verb::Select, "SELECT "),
            (Verb::Insert, "INSERT "),
            (Verb::Update, "UPDATE "),
            (Verb::Delete, "DELETE "),
        ] {
            assert_eq!(
                s.viable(head.as_bytes()),
                verbs.contains(&v),
                "{head} under {verbs:?}"
            );
        }
        if ban.contains(&Ban::SetOps) {
            assert!(!s.viable(b"SELECT 1 UNION "));
        }
        if ban.contains(&Ban::Joins) && verbs.contains(&Verb::Select) {
            assert!(!s.viable(b"SELECT name FROM dogs JOIN "));
            assert!(!s.viable(b"SELECT name FROM dogs, "));
        }
        if ban.contains(&Ban::Subqueries) && verbs.contains(&Verb::Select) {
            assert!(!s.viable(b"SELECT name FROM dogs WHERE age IN (SELECT "));
            assert!(s.viable(b"SELECT name FROM dogs WHERE age IN (1"));
        }
    }
}

#[test]
fn an_empty_projection_is_an_error() {
    let d = dialect();
    let p = Policy {
        verbs: vec![Verb::Insert],
        ..Policy::default()
    };
    let empty = [grid_core::grammar::spec::LexiconKind::InsertTable];
    assert!(matches!(
        grid_core::grammar::project(&d, &p, &empty),
        Err(GridError::EmptyLanguage(_))
    ));
}

/// The process's shared dialect for generated SQL is built once and is that dialect: the
/// extension builds it in the postmaster and every backend inherits it.
#[test]
fn the_shared_dialect_is_built_once_and_is_the_generated_one() {
    let first = Dialect::generated().expect("builds");
    let built = Dialect::builds();
    let again = Dialect::generated().expect("kept");
    assert!(std::sync::Arc::ptr_eq(&first, &again));
    let fresh = Dialect::postgres_without_comments().expect("builds");
    assert_eq!(first.fingerprint, fresh.fingerprint);
    assert!(Dialect::builds() > built, "a dialect built is counted");
}

#[test]
fn the_dialect_for_generated_sql_has_no_comments_and_ascii_identifiers() {
    let ex = examples();
    let schema = permissive_schema(&ex);
    let plain = dialect();
    let bare = std::sync::Arc::new(Dialect::postgres_without_comments().expect("builds"));
    assert_ne!(plain.fingerprint, bare.fingerprint);
    let policy = Policy::default();
    let reserved = |w: &str| bare.is_reserved(w);
    let lx = grid_core::Lexicon::from_schema(&schema, &policy, &reserved).expect("lexicon");
    let lang = grid_core::Language::build(bare.clone(), &policy, &lx).expect("language");
    let mut s = Session::new(&lang);
    let with_comments: Vec<&String> = ex
        .iter()
        .filter(|e| e.contains("--") || e.contains("/*"))
        .collect();
    assert!(!with_comments.is_empty(), "the examples have comments");
    for e in &with_comments {
        assert!(!s.complete(e.as_bytes()), "a comment was accepted: {e}");
    }
    // Everything else parses as before.
    let bad: Vec<&String> = ex
        .iter()
        .filter(|e| !e.contains("--") && !e.contains("/*") && !s.complete(e.as_bytes()))
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
    // `--` still starts a comment, as in PostgreSQL: never two minus signs.
    let permissive = language_for(&schema, &policy);
    let mut p = Session::new(&permissive);
    assert!(p.complete(b"SELECT 1 --salaries"));
    assert!(!s.complete(b"SELECT 1 --salaries"));
    assert!(!s.complete(b"SELECT 1--1"));
    assert!(!s.complete(b"SELECT 1 /* x */"));
    assert!(s.complete(b"SELECT 1 - -1"));
    // Unquoted identifiers are ASCII: PostgreSQL's scanner takes any byte >= 0x80.
    assert!(p.complete("SELECT 1 AS naïve".as_bytes()));
    assert!(!s.complete("SELECT 1 AS naïve".as_bytes()));
    assert!(!s.complete(b"SELECT 1 AS n\xff"));
    assert!(s.complete("SELECT 1 AS \"naïve\"".as_bytes()));
}

/// A `schema.table` word is one lexeme exactly where the parser expects a relation, and
/// `x.y` is a qualifier and a column elsewhere: sound only if no position takes both. No
/// state has a move on a relation terminal and on a free identifier (which a qualifier is),
/// and no configuration reached by the examples, ambiguous ones included, allows both.
#[test]
fn no_position_takes_both_a_relation_and_a_qualifier() {
    let d = dialect();
    let t = &d.terms;
    let ident = t.free;
    assert!(!t.relation.is_empty() && !ident.is_empty());
    let table = &d.table;
    let moves = |s: u32, set: &grid_core::TermSet| {
        set.iter()
            .any(|x| table.action(s, x) != grid_core::grammar::table::Move::Error)
    };
    let both: Vec<u32> = (0..table.n_states as u32)
        .filter(|&s| moves(s, &t.relation) && moves(s, &ident))
        .collect();
    assert!(both.is_empty(), "states {both:?}");

    let ex = examples();
    let lang = language_for(&permissive_schema(&ex), &Policy::default());
    let mut s = Session::new(&lang);
    let mut relation_positions = 0;
    for e in &ex {
        let mut c = s.start();
        for &b in e.as_bytes() {
            if s.feed(&mut c, &[b]).is_err() {
                break;
            }
            let a = s.allowed(&c);
            if a.intersects(&t.relation) {
                relation_positions += 1;
                assert!(!a.intersects(&ident), "{e:?}: {:?}", t.names_of(&a));
            }
        }
    }
    assert!(relation_positions > 100, "{relation_positions}");
}

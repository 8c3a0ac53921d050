//! Next-token masks: the trie walk against the brute-force oracle, bit for bit, on the mini
//! dialect and the PostgreSQL dialect; the identifier rule; aliases, specials, EOS; forced
//! runs; CI/CD classes; soundness and completeness on hostile text. Data-free unless a test
//! says otherwise (those print SKIP without `../shared/data`).

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;

use common::masker::MaskFixture;
use common::{gold, spider_or_skip, Langs, Rng};
use grid_core::cd_class::{CdClass, CdKey};
use grid_core::grammar::spec::LexiconKind;
use grid_core::mask::Mask;
use grid_core::oracle::{oracle_mask, static_oracle_mask};
use grid_core::schema::{Schema, Table};
use grid_core::{Config, Dialect, Language, Lexicon, Policy, Session, TermSet};
use grid_vocab::Vocabulary;

// ---------------------------------------------------------------------------------------
// Languages

fn mini_dialect() -> Arc<Dialect> {
    Arc::new(
        Dialect::load(
            include_str!("fixtures/mini.y"),
            include_str!("fixtures/mini.lex"),
        )
        .expect("mini dialect"),
    )
}

/// `employees` is a prefix of `employees_public`; `salaries` exists but the role may not see
/// it (a relation, so no CTE may borrow its name, but not in the table lexicon).
fn hr_schema() -> Schema {
    Schema {
        db_id: "hr".into(),
        tables: vec![
            Table::with_columns("employees", &["id", "name", "salary", "Rating_(millions)"]),
            Table::with_columns("employees_public", &["id", "name"]),
            Table::with_columns("orders", &["id", "total", "employee_id"]),
            Table::with_columns("salaries", &["id", "amount"]),
        ],
    }
}

fn hr_language(dialect: Arc<Dialect>, policy: &Policy) -> Language {
    let reserved = |w: &str| dialect.is_reserved(w);
    let mut lx = Lexicon::from_schema(&hr_schema(), policy, &reserved).expect("lexicon");
    for kind in LexiconKind::ALL {
        if let Some(words) = lx.words.get_mut(&kind) {
            words.remove("salaries");
        }
    }
    assert!(lx.relations.contains("salaries"));
    Language::build(dialect, policy, &lx).expect("language")
}

// ---------------------------------------------------------------------------------------
// A synthetic vocabulary: every byte, SQL fragments that cross lexeme boundaries, duplicate
// spellings (aliases), and specials (one of them spelling a keyword).

const EOS: u32 = 0;
const PAD: u32 = 1;
const SPECIAL_SELECT: u32 = 2;

#[rustfmt::skip]
const FRAGMENTS: &[&str] = &[
    "SELECT", " SELECT", "select", "sel", "ect", " FROM", " from", "FROM", " WHERE", " where",
    " name", "name", " *", "*", " emplo", "emplo", "emp", "loyees", "oyees", "yees", "yee", "y",
    "yer", "yees where", "yees;", "_public", "_p", " employees", "employees", " orders",
    "orders", " sal", "sal", "aries", " salaries", "'),", "'),(", "),", "')", "1;", ";", " 1",
    "1", " =", " = ", " (", "(", ")", "(*)", " count", "count(", "'it", "''", "''s", "s'", "' ",
    "'a", "\"", " \"", "\"employees\"", "\"Rating", "_(millions", ")\"", "Rating_(millions)\"",
    "/*", "*/", " /*", " --", "--", "\n", " c", "1.5", "e3", "1e", "e+", " AS", " as", " T1",
    ".name", "T1.", " UNION", " INSERT", "INSERT", "ins", " INTO", " VALUES", " (1)", " x",
    "ex", "1ex", "id", " id", " total", " 'x'", "'x'", " E'", "E'", "\\'", "::", " ::", "text",
    " <", " <=", " <>", "||", " ||", " AND", " OR", " IN", " NOT", " NULL", " IS", " LIKE",
    " JOIN", " ON", " GROUP", " BY", " ORDER", " LIMIT", " DESC", " 2", "0", "00", ".5", "e",
    "E", " AS uu", " AS zz",
    // The decline (`CANNOT ANSWER 'reason'`) and its words as names.
    "CANNOT", "cannot", " cannot", "can", "not", " ANSWER", " answer", "ANSWER", "ans", "wer",
    " '", "'no", " table", " holds", "?';", ".'", "' ;", "(s)",
];

/// Spellings given twice more, so their ids form alias classes.
const DUPLICATED: &[&str] = &["yees", " FROM", "'),", "(", "sal"];

fn synthetic_vocab() -> Vocabulary {
    let mut toks: Vec<Vec<u8>> = vec![b"<eos>".to_vec(), b"<pad>".to_vec(), b"SELECT".to_vec()];
    toks.extend((0..=255u8).map(|b| vec![b]));
    toks.extend(FRAGMENTS.iter().map(|f| f.as_bytes().to_vec()));
    for d in DUPLICATED {
        toks.push(d.as_bytes().to_vec());
        toks.push(d.as_bytes().to_vec());
    }
    Vocabulary::from_served(toks, &[PAD, SPECIAL_SELECT], Some(EOS)).expect("vocabulary")
}

/// Every non-special id spelling `s`.
fn ids_of(v: &Vocabulary, s: &str) -> Vec<u32> {
    v.iter()
        .filter(|(id, b)| !v.is_special(*id) && *b == s.as_bytes())
        .map(|(id, _)| id)
        .collect()
}

/// Every non-special id spelling the single byte `b`.
fn byte_ids(v: &Vocabulary, b: u8) -> Vec<u32> {
    v.iter()
        .filter(|(id, t)| !v.is_special(*id) && *t == [b])
        .map(|(id, _)| id)
        .collect()
}

fn spell(v: &Vocabulary, ids: &[u32]) -> Vec<String> {
    ids.iter()
        .take(12)
        .map(|&id| format!("{id}:{:?}", String::from_utf8_lossy(v.token_bytes(id))))
        .collect()
}

fn config_after(s: &mut Session<'_>, text: &str) -> Config {
    let mut c = s.start();
    if let Err(e) = s.feed(&mut c, text.as_bytes()) {
        panic!("{text:?} refused: {e:?}");
    }
    c
}

/// Fast ≡ oracle at every byte offset of each statement, and the statement is complete at
/// its end ([`common::over_offsets_by`]).
fn differential_over_offsets(lang: &Language, fx: &mut MaskFixture, statements: &[&str]) -> usize {
    let ids: Vec<Vec<u32>> = (0..=255u8).map(|b| byte_ids(&fx.vocab, b)).collect();
    common::over_offsets_by(lang, &ids, statements, &mut |s, cfg, what| {
        fx.checked(s, cfg, what)
    })
}

// ---------------------------------------------------------------------------------------
// Differential tests

const MINI_STATEMENTS: &[&str] = &[
    "SELECT name FROM employees",
    "select NAME from EMPLOYEES;",
    "SELECT T1.name FROM employees AS T1",
    "SELECT count(*) FROM employees_public",
    "SELECT \"Rating_(millions)\" FROM employees",
    "SELECT 'it''s' , 1.5e3 FROM employees",
    "SELECT /* c */ name -- x\nFROM employees",
    "SELECT name FROM employees UNION SELECT name FROM employees_public",
    "WITH x AS (SELECT name FROM employees) SELECT name FROM x",
    "INSERT INTO orders VALUES (1)",
    "SELECT 1 FROM orders;",
];

#[test]
fn mini_dialect_fast_equals_oracle_at_every_offset() {
    let lang = hr_language(mini_dialect(), &Policy::default());
    let mut fx = MaskFixture::new(synthetic_vocab());
    let n = differential_over_offsets(&lang, &mut fx, MINI_STATEMENTS);
    assert!(n > 300, "{n}");
}

const PG_STATEMENTS: &[&str] = &[
    "SELECT name FROM employees WHERE id = 1;",
    "SELECT e.name, o.total FROM employees AS e JOIN orders o ON e.id = o.employee_id",
    "INSERT INTO orders VALUES ('a'),('b');",
    "SELECT \"Rating_(millions)\" FROM employees_public AS p, employees",
    "SELECT 'it''s', E'quote''s', E'tab\\t', 1.5e3, .5, 1e5 FROM employees",
    "SELECT /* c */ name -- x\nFROM employees_public WHERE name LIKE 'a%'",
    "SELECT count(*) FROM employees GROUP BY name ORDER BY count(*) DESC LIMIT 3",
    "SELECT id::text FROM orders WHERE total <> 0 AND id IN (SELECT id FROM employees)",
    "WITH t AS (SELECT id FROM orders) SELECT id FROM t",
    "CANNOT ANSWER 'no table holds (s) of salaries: sorry, 2/3 a_b-c!?';",
    "cannot answer'x'",
    "SELECT 1 AS cannot, 'CANNOT ANSWER' AS answer FROM orders",
];

#[test]
fn postgres_dialect_fast_equals_oracle_at_every_offset() {
    let lang = hr_language(common::dialect(), &Policy::default());
    let mut fx = MaskFixture::new(synthetic_vocab());
    let n = differential_over_offsets(&lang, &mut fx, PG_STATEMENTS);
    assert!(n > 500, "{n}");
}

/// The decline and its words as names, in the generated dialect over a schema that names
/// a table `answer` and columns `cannot` and `answer`: fast ≡ oracle at every offset, the
/// words' prefixes at the head of a statement (the decline) and at name positions alike.
#[test]
fn decline_and_its_words_fast_equals_oracle_at_every_offset() {
    let lang = crate::decline::generated_language(
        &crate::decline::decline_words_schema(),
        &Policy::default(),
    );
    let mut fx = MaskFixture::new(synthetic_vocab());
    let statements: Vec<&str> = crate::decline::DECLINES
        .iter()
        .copied()
        .chain([
            "SELECT cannot FROM answer",
            "SELECT answer.cannot, t.answer FROM answer JOIN t ON t.id = answer.id",
            "WITH cannot AS (SELECT answer FROM t) SELECT answer FROM cannot",
        ])
        .collect();
    let n = differential_over_offsets(&lang, &mut fx, &statements);
    assert!(n > 200, "{n}");
    // At the head, the decline's first word is offered beside the verbs; inside its
    // reason, what ends the reason or goes on with plain words, nothing else.
    let v = synthetic_vocab();
    let mut s = Session::new(&lang);
    let c = s.start();
    let m = fx.checked(&mut s, &c, "head");
    for t in ["CANNOT", "cannot", "can", " cannot"] {
        assert!(m.contains(ids_of(&v, t)[0]), "{t:?} blocked at the head");
    }
    assert!(!m.contains(ids_of(&v, " answer")[0]));
    let c = config_after(&mut s, "CANNOT ANSWER 'no");
    let m = fx.checked(&mut s, &c, "inside a reason");
    for t in [" table", " holds", "?';", ".'", "' ;", "(s)", "'"] {
        assert!(m.contains(ids_of(&v, t)[0]), "{t:?} blocked in a reason");
    }
    for t in ["''", "''s", "\n", "*", "\"", "'),"] {
        for id in ids_of(&v, t) {
            assert!(!m.contains(id), "{t:?} allowed in a reason");
        }
    }
    assert!(!m.eos, "a reason left open");
    let c = config_after(&mut s, "CANNOT ANSWER 'no'");
    let m = fx.checked(&mut s, &c, "after a reason");
    assert!(m.eos && m.contains(ids_of(&v, ";")[0]));
    assert!(!m.contains(ids_of(&v, " FROM")[0]));
}

/// Tokens that complete a lexeme and go on are decided on the live stack: the same token
/// is allowed at one stack and blocked at another with the same remainder.
#[test]
fn boundary_crossing_tokens_follow_the_stack() {
    let lang = hr_language(common::dialect(), &Policy::default());
    let mut fx = MaskFixture::new(synthetic_vocab());
    let mut s = Session::new(&lang);
    let v = synthetic_vocab();
    let one_semi = ids_of(&v, "1;")[0];
    let one = ids_of(&v, "1")[0];

    let c = config_after(&mut s, "SELECT name FROM employees WHERE id = ");
    let m = fx.checked(&mut s, &c, "after `= `");
    assert!(m.contains(one_semi) && m.contains(one));
    let class = m.cd_classes.iter().find(|k| k.ids.contains(&one_semi));
    assert!(class.is_some(), "`1;` is CD");
    assert!(
        m.cd_classes.iter().all(|k| !k.ids.contains(&one)),
        "`1` is CI"
    );

    let c = config_after(&mut s, "SELECT name FROM employees WHERE id = (");
    let m = fx.checked(&mut s, &c, "after `= (`");
    assert!(!m.contains(one_semi), "`1;` inside an open parenthesis");
    assert!(m.contains(one));

    let c = config_after(&mut s, "INSERT INTO orders VALUES ('a");
    let m = fx.checked(&mut s, &c, "inside a VALUES string");
    for t in ["'),", "'),(", "')", "'", "''s"] {
        for id in ids_of(&v, t) {
            assert!(m.contains(id), "{t:?} blocked inside a VALUES string");
        }
    }
    let crossing = ids_of(&v, "'),");
    assert!(crossing
        .iter()
        .all(|id| m.cd_classes.iter().any(|k| k.ids.contains(id))));

    let c = config_after(&mut s, "SELECT name");
    let m = fx.checked(&mut s, &c, "after `SELECT name`");
    for id in ids_of(&v, " FROM") {
        assert!(m.contains(id));
        assert!(m.cd_classes.iter().any(|k| k.ids.contains(&id)));
    }
    // No parenthesis is open: the string may close, `)` may not follow it.
    let c = config_after(&mut s, "SELECT name FROM employees WHERE name = 'a");
    let m = fx.checked(&mut s, &c, "inside a WHERE string");
    for id in ids_of(&v, "'),") {
        assert!(!m.contains(id), "`'),` with no open parenthesis");
    }
    assert!(m.contains(ids_of(&v, "''s")[0]) && m.contains(ids_of(&v, "' ")[0]));
}

/// A worked example: an identifier position under a schema lexicon.
fn identifier_rule(lang: &Language) {
    let v = synthetic_vocab();
    let mut fx = MaskFixture::new(synthetic_vocab());
    let mut s = Session::new(lang);
    let at = |s: &mut Session<'_>, fx: &mut MaskFixture, text: &str| {
        let c = config_after(s, text);
        fx.checked(s, &c, text)
    };
    let m = at(&mut s, &mut fx, "select * from ");
    for t in ["sal", "salaries" /* not a token: absent */] {
        for id in ids_of(&v, t) {
            assert!(
                !m.contains(id),
                "{t:?} allowed where only granted tables may go"
            );
        }
    }
    assert!(ids_of(&v, "sal").len() == 3);
    for t in ["emp", "emplo", "employees", "orders", "\"employees\""] {
        assert!(
            m.contains(ids_of(&v, t)[0]),
            "{t:?} blocked at a table position"
        );
    }
    let m = at(&mut s, &mut fx, "select * from");
    for t in [" sal", " salaries"] {
        assert!(!m.contains(ids_of(&v, t)[0]), "{t:?} allowed");
    }
    assert!(m.contains(ids_of(&v, " emplo")[0]));

    let m = at(&mut s, &mut fx, "select * from emplo");
    let yees = ids_of(&v, "yees");
    assert_eq!(yees.len(), 3, "aliases of `yees`");
    for &id in &yees {
        assert!(m.contains(id), "`yees` (id {id}) blocked after `emplo`");
    }
    assert!(
        m.cd_classes.iter().all(|k| !k.ids.contains(&yees[0])),
        "`yees` stays in the lexeme: CI"
    );
    assert!(m.contains(ids_of(&v, "y")[0]));
    assert!(!m.contains(ids_of(&v, "yer")[0]), "`yer` allowed");
    let crossing = ids_of(&v, "yees where")[0];
    assert!(m.contains(crossing));
    assert!(m.cd_classes.iter().any(|k| k.ids.contains(&crossing)));
    assert!(!m.eos, "`select * from emplo` is not a sentence");

    let m = at(&mut s, &mut fx, "select * from employees");
    assert!(m.eos, "a complete statement: EOS");
    assert!(m.contains(EOS));
    assert!(m.contains(ids_of(&v, "_p")[0]), "`employees_p…`");
    assert!(m.contains(ids_of(&v, "_public")[0]));
}

#[test]
fn identifier_rule_mini() {
    identifier_rule(&hr_language(mini_dialect(), &Policy::default()));
}

#[test]
fn identifier_rule_postgres() {
    identifier_rule(&hr_language(common::dialect(), &Policy::default()));
}

#[test]
fn select_only_policy_at_the_statement_head() {
    let v = synthetic_vocab();
    let mut fx = MaskFixture::new(synthetic_vocab());
    let d = common::dialect();
    let lang = hr_language(d.clone(), &Policy::select_only());
    let mut s = Session::new(&lang);
    let c = s.start();
    let m = fx.checked(&mut s, &c, "select-only head");
    for t in ["SELECT", " SELECT", "select", "sel"] {
        for id in ids_of(&v, t) {
            assert!(m.contains(id), "{t:?} blocked at the head");
        }
    }
    for t in ["INSERT", " INSERT", "ins"] {
        for id in ids_of(&v, t) {
            assert!(!m.contains(id), "{t:?} allowed under select-only");
        }
    }
    assert!(
        !m.contains(SPECIAL_SELECT),
        "a special token is never allowed"
    );
    assert!(!m.eos);
    // Control: with every verb, INSERT starts a statement.
    let all = hr_language(d, &Policy::default());
    let mut s = Session::new(&all);
    let c = s.start();
    let m = fx.checked(&mut s, &c, "head");
    assert!(m.contains(ids_of(&v, "INSERT")[0]) && m.contains(ids_of(&v, "ins")[0]));
}

// ---------------------------------------------------------------------------------------
// Forced runs

fn small_vocab(tokens: &[&str]) -> Vocabulary {
    let toks = tokens.iter().map(|t| t.as_bytes().to_vec()).collect();
    Vocabulary::from_served(toks, &[EOS], Some(EOS)).expect("vocabulary")
}

#[test]
fn singleton_masks_extend_to_forced_runs() {
    let lang = hr_language(mini_dialect(), &Policy::default());
    let mut s = Session::new(&lang);
    // (` FROM` alone could begin an identifier such as `fromage`; ` FROM ` cannot.)
    let mut fx = MaskFixture::new(small_vocab(&["<eos>", "SELECT", " *", " FROM ", "orders;"]));
    let c = s.start();
    let m = fx.checked(&mut s, &c, "start");
    assert_eq!(m.forced, Some(vec![1, 2, 3, 4]));
    // After the run the statement is complete and only EOS remains.
    let c = config_after(&mut s, "SELECT * FROM orders;");
    let m = fx.checked(&mut s, &c, "end");
    assert!(m.eos && m.allowed == 0 && m.forced.is_none());

    // `(` nests without end: the run stops at its bound.
    let long = "INSERT INTO orders VALUES (";
    let mut fx = MaskFixture::new(small_vocab(&["<eos>", long, "(", ")"]));
    let c = s.start();
    let m = fx.checked(&mut s, &c, "start");
    let run = m.forced.expect("forced");
    assert_eq!(run.len(), grid_core::mask::FORCED_MAX, "runs are bounded");
    assert_eq!(run[0], 1);
    assert!(run[1..].iter().all(|&t| t == 2));
    let c = config_after(&mut s, "INSERT INTO orders VALUES ((");
    let m = fx.checked(&mut s, &c, "nested");
    assert_eq!(m.forced.map(|r| r.len()), Some(grid_core::mask::FORCED_MAX));

    // With a number to choose as well, the run is the one forced token.
    let mut fx = MaskFixture::new(small_vocab(&["<eos>", long, "(", ")", "1"]));
    let c = s.start();
    let m = fx.checked(&mut s, &c, "start");
    assert_eq!(m.forced, Some(vec![1]));
    let c = config_after(&mut s, long);
    let m = fx.checked(&mut s, &c, "two choices");
    assert_eq!((m.allowed, m.forced), (2, None));
}

// ---------------------------------------------------------------------------------------
// CD classes

/// Two configurations with the same remainder but different stacks: every CD class of one
/// that the mask decides by its key gets a single verdict at the other from the oracle of
/// the language without the statement's own names ([`static_oracle_mask`]), which is what
/// the class's verdict is computed in. What those names add (range variables in scope as
/// qualifiers, their columns, output names) depends on the stack's words, not on its
/// states, so the mask finds those tokens one by one: at each configuration, its
/// [`CdKey::Dynamic`] class is exactly the tokens the oracle allows and the oracle without
/// the names does not. (`employees` and `orders` after `INSERT INTO orders VALUES (` are one
/// class, all allowed: any identifier may qualify a column there, the FROM it names is yet
/// to come. After `... WHERE id = (` only `employees`, in scope, may: that class is blocked
/// without the names, and the names add `employees` alone.)
#[test]
fn cd_classes_are_verdict_equivalent_across_stacks() {
    let lang = hr_language(common::dialect(), &Policy::default());
    let v = synthetic_vocab();
    let mut fx = MaskFixture::new(synthetic_vocab());
    let mut s = Session::new(&lang);
    // Prefixes grouped by the remainder they leave (the pending lexeme).
    let groups: &[&[&str]] = &[
        &[
            "SELECT name FROM employees WHERE id = ",
            "SELECT name FROM employees WHERE id = (",
            "SELECT ",
            "SELECT name, ",
            "SELECT name FROM ",
            "SELECT name FROM employees ",
            "INSERT INTO orders VALUES (",
        ],
        &[
            "SELECT name FROM employees WHERE id = 1",
            "SELECT 1",
            "SELECT name FROM employees LIMIT 1",
            "SELECT (1",
        ],
        &[
            "SELECT name",
            "SELECT e.name",
            "SELECT count(*) FROM employees GROUP BY name",
            // After `AS` only a type name: `uu` may begin `uuid`, `zz` nothing. (After
            // `SELECT name AS` any alias: the two share everything but the word-trie node.)
            "SELECT CAST(name",
        ],
        // A string that may be a decline's reason, and strings that may not.
        &[
            "CANNOT ANSWER 'no",
            "SELECT name FROM employees WHERE name = 'no",
            "INSERT INTO orders VALUES ('no",
            "SELECT 'no",
        ],
        // The decline's words, at the head and as names.
        &["CANNOT ANSWER 'x", "SELECT 'x"],
        &["can", "SELECT name can"],
    ];
    let is_dynamic = |c: &&CdClass| *c.key == CdKey::Dynamic;
    let mut classes_checked = 0;
    let mut by_names = 0;
    for group in groups {
        let cfgs: Vec<Config> = group.iter().map(|t| config_after(&mut s, t)).collect();
        for (i, a) in cfgs.iter().enumerate() {
            let m = fx.checked(&mut s, a, group[i]);
            // What the names add here, and the tokens the mask checked one by one.
            let without = static_oracle_mask(&mut s, a, &v);
            let added: Vec<u32> = m
                .ids()
                .filter(|&id| !v.is_special(id) && !without.contains(id))
                .collect();
            let mut one_by_one: Vec<u32> = m
                .cd_classes
                .iter()
                .filter(is_dynamic)
                .flat_map(|c| c.ids.iter().copied())
                .collect();
            one_by_one.sort_unstable();
            assert!(
                without.ids().all(|id| v.is_special(id) || m.contains(id)),
                "{:?}: the names take a token away",
                group[i]
            );
            assert!(
                one_by_one == added,
                "{:?}: checked one by one {:?}, added by the names {:?}",
                group[i],
                spell(&v, &one_by_one),
                spell(&v, &added)
            );
            by_names += added.len();
            for (j, b) in cfgs.iter().enumerate() {
                if i == j || a.scan.rem != b.scan.rem {
                    continue;
                }
                let o = static_oracle_mask(&mut s, b, &v);
                for class in m.cd_classes.iter().filter(|c| !is_dynamic(c)) {
                    let allowed = class.ids.iter().filter(|&&id| o.contains(id)).count();
                    assert!(
                        allowed == 0 || allowed == class.ids.len(),
                        "class {:?} of {:?} split at {:?}: {:?}",
                        class.key,
                        group[i],
                        group[j],
                        spell(&v, &class.ids)
                    );
                    classes_checked += 1;
                }
            }
        }
    }
    eprintln!("{classes_checked} classes across stacks; {by_names} tokens added by the names");
    assert!(classes_checked > 100, "{classes_checked}");
    assert!(by_names > 0, "no token allowed by the names alone");
    // The case above: one class of four tokens where any identifier may qualify a column;
    // where only a range variable in scope may, the names add the two of them that spell it.
    let relation_names = [" employees", "employees", " orders", "orders"];
    let ids: Vec<u32> = relation_names.iter().map(|t| ids_of(&v, t)[0]).collect();
    let c = config_after(&mut s, "INSERT INTO orders VALUES (");
    let m = fx.checked(&mut s, &c, "INSERT INTO orders VALUES (");
    let class = m.cd_classes.iter().find(|k| k.ids.contains(&ids[0]));
    assert!(
        class.is_some_and(|k| *k.key != CdKey::Dynamic && ids.iter().all(|i| k.ids.contains(i))),
        "{class:?}"
    );
    let c = config_after(&mut s, "SELECT name FROM employees WHERE id = (");
    let m = fx.checked(&mut s, &c, "WHERE id = (");
    let dynamic = m.cd_classes.iter().find(|k| *k.key == CdKey::Dynamic);
    assert!(
        dynamic.is_some_and(|k| k.ids.contains(&ids[0]) && k.ids.contains(&ids[1])),
        "{dynamic:?}"
    );
    assert!(!m.contains(ids[2]) && !m.contains(ids[3]));
    let c = config_after(&mut s, "SELECT name");
    let m = fx.checked(&mut s, &c, "SELECT name");
    let class_of = |t: &str| {
        let id = ids_of(&v, t)[0];
        m.cd_classes.iter().position(|k| k.ids.contains(&id))
    };
    assert!(class_of(" AS uu").is_some() && class_of(" AS zz").is_some());
    assert_ne!(class_of(" AS uu"), class_of(" AS zz"));
}

/// The ids a mask allows as CI (not EOS, not in a CD class).
fn ci_ids(m: &Mask, v: &Vocabulary) -> Vec<u32> {
    let cd: std::collections::HashSet<u32> = m
        .cd_classes
        .iter()
        .flat_map(|c| c.ids.iter().copied())
        .collect();
    m.ids()
        .filter(|id| !v.is_special(*id) && !cd.contains(id))
        .collect()
}

/// CI verdicts are a function of the remainder and the allowed set: at configurations with
/// the same remainder and the same `A(σ)` but different stacks, the CI ids are the same,
/// and the oracle allows each of them at the other configuration.
#[test]
fn ci_verdicts_depend_only_on_remainder_and_allowed_set() {
    let lang = hr_language(common::dialect(), &Policy::default());
    let v = synthetic_vocab();
    let mut fx = MaskFixture::new(synthetic_vocab());
    let mut s = Session::new(&lang);
    let mut groups: HashMap<(Vec<u8>, TermSet), Vec<Config>> = HashMap::new();
    let extra = [
        "CANNOT ANSWER 'no table holds it'",
        "cannot answer 'x';",
        "SELECT 1 + 2",
        "SELECT (1 + (2",
        "SELECT name FROM employees WHERE (id = 1 AND (name = 'a'",
        "SELECT count(name), lower(name) FROM employees",
    ];
    for text in PG_STATEMENTS.iter().chain(extra.iter()) {
        let mut c = s.start();
        for &b in text.as_bytes() {
            s.feed(&mut c, &[b]).expect("statement byte");
            let g = groups
                .entry((c.scan.rem.to_vec(), s.allowed(&c)))
                .or_default();
            if g.len() < 3 && g.iter().all(|o| o.stacks != c.stacks) {
                g.push(c.clone());
            }
        }
    }
    let mut pairs = 0;
    for cfgs in groups.values().filter(|g| g.len() >= 2) {
        let masks: Vec<Mask> = cfgs.iter().map(|c| fx.plain.mask(&mut s, c)).collect();
        for (i, a) in masks.iter().enumerate() {
            let ci = ci_ids(a, &v);
            for (j, b) in cfgs.iter().enumerate() {
                if i == j {
                    continue;
                }
                let other = ci_ids(&masks[j], &v);
                let only: Vec<u32> = ci
                    .iter()
                    .copied()
                    .filter(|id| !other.contains(id))
                    .collect();
                assert!(
                    ci.len() == other.len() && only.is_empty(),
                    "CI sets differ at equal (remainder, A): only in one {:?}",
                    spell(&v, &only)
                );
                let o = oracle_mask(&mut s, b, &v);
                let refused: Vec<u32> = ci.iter().copied().filter(|&id| !o.contains(id)).collect();
                assert!(
                    refused.is_empty(),
                    "CI ids refused elsewhere: {:?}",
                    spell(&v, &refused)
                );
                pairs += 1;
            }
        }
    }
    assert!(pairs >= 20, "only {pairs} pairs");
}

// ---------------------------------------------------------------------------------------
// Hostile text

/// A token sequence walked through the mask: every token that keeps the output viable is
/// in the mask, and the first one that leaves the language is not. Returns whether the
/// text left the language.
fn walk_hostile(s: &mut Session<'_>, fx: &mut MaskFixture, text: &str, check_oracle: bool) -> bool {
    let ids = fx.vocab.encode(text);
    let mut cfg = s.start();
    let mut prefix: Vec<u8> = Vec::new();
    for (k, &id) in ids.iter().enumerate() {
        let m = if check_oracle {
            fx.checked(s, &cfg, text)
        } else {
            fx.plain.mask(s, &cfg)
        };
        assert_eq!(m.eos, s.complete(&prefix), "{text:?}: EOS at token {k}");
        let bytes = fx.vocab.token_bytes(id);
        let mut next = prefix.clone();
        next.extend_from_slice(bytes);
        let viable = s.viable(&next);
        assert_eq!(
            m.contains(id),
            viable,
            "{text:?}: token {k} {:?} after {:?}",
            String::from_utf8_lossy(bytes),
            String::from_utf8_lossy(&prefix)
        );
        if !viable {
            return true;
        }
        s.feed(&mut cfg, bytes).expect("viable token");
        prefix = next;
    }
    false
}

fn mutate(text: &str, rng: &mut Rng) -> String {
    const NOISE: &[&str] = &[
        "'", "\"", "(", ")", ";", ",", " ", "x", "1", "*", "--", "/*", "sal", "emp", "e", ".",
        "::", "<", "|", "\\", "FROM", "select",
    ];
    let b = text.as_bytes();
    let i = rng.below(b.len() + 1);
    let j = (i + rng.below(4)).min(b.len());
    let noise = NOISE[rng.below(NOISE.len())];
    let (head, tail) = (&b[..i], &b[j..]);
    let mut out = head.to_vec();
    match rng.below(3) {
        0 => out.extend_from_slice(noise.as_bytes()),
        1 => {}
        _ => out.extend_from_slice(&b[i..j].to_ascii_uppercase()),
    }
    out.extend_from_slice(tail);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn hostile_text_is_refused_at_the_first_bad_token() {
    let mut fx = MaskFixture::new(synthetic_vocab());
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut left = 0;
    for (lang, statements) in [
        (
            hr_language(mini_dialect(), &Policy::default()),
            MINI_STATEMENTS,
        ),
        (
            hr_language(common::dialect(), &Policy::default()),
            PG_STATEMENTS,
        ),
    ] {
        let mut s = Session::new(&lang);
        for text in statements {
            assert!(!walk_hostile(&mut s, &mut fx, text, false), "{text}");
            for round in 0..12 {
                let m = mutate(text, &mut rng);
                left += usize::from(walk_hostile(&mut s, &mut fx, &m, round % 4 == 0));
            }
        }
    }
    assert!(left > 50, "only {left} mutations left the language");
}

// ---------------------------------------------------------------------------------------
// Real data: Spider gold with a real vocabulary

#[test]
fn spider_gold_fast_equals_oracle_with_gpt2() {
    let Some(dir) = spider_or_skip("spider_gold_fast_equals_oracle_with_gpt2") else {
        return;
    };
    let tok = dir.join("tokenizers/gpt2");
    if !tok.exists() {
        eprintln!(
            "SKIP spider_gold_fast_equals_oracle_with_gpt2: no {}",
            tok.display()
        );
        return;
    }
    let vocab = Vocabulary::load(&tok).expect("gpt2");
    let mut fx = MaskFixture::new(vocab);
    let mut langs = Langs::new(&dir, Policy::default());
    let mut rng = Rng(7);
    let (mut checked, mut left) = (0, 0);
    for g in gold(&dir).iter().step_by(97) {
        let lang = langs.get(&g.db);
        let mut s = Session::new(&lang);
        let ids = fx.vocab.encode(&g.sql);
        let mut cfg = s.start();
        let mut text = Vec::new();
        for (k, &id) in ids.iter().enumerate() {
            if rng.below(4) == 0 {
                let what = format!("{} at token {k}", g.sql);
                let m = fx.checked(&mut s, &cfg, &what);
                assert!(m.contains(id), "{what}: gold token blocked");
                checked += 1;
            }
            let b = fx.vocab.token_bytes(id).to_vec();
            s.feed(&mut cfg, &b).expect("gold token");
            text.extend_from_slice(&b);
        }
        let m = fx.checked(&mut s, &cfg, &g.sql);
        assert!(m.eos, "{}: EOS at the end", g.sql);
        // Hostile: the statement with a name the role lacks appended, and mutated.
        let hostile = format!("{} salaries_zz", g.sql.trim_end_matches(';'));
        left += usize::from(walk_hostile(&mut s, &mut fx, &hostile, false));
        for _ in 0..2 {
            let m = mutate(&g.sql, &mut rng);
            left += usize::from(walk_hostile(&mut s, &mut fx, &m, false));
        }
    }
    assert!(checked >= 20, "{checked}");
    assert!(
        left >= 10,
        "only {left} hostile statements left the language"
    );
}

// ---------------------------------------------------------------------------------------
// Relations off the search path, written `schema.table`

/// `hr.employees` lives off the search path beside the bare `employees`; the role may
/// update `hr.salaries` but not read it; `orders` exists on the path only, and one of its
/// columns is called `employees` (so `hr.employees` is also a qualifier and a column when
/// `hr` is an alias); `"Sales"."Leads"` needs quotes on both parts.
fn qualified_language(dialect: Arc<Dialect>) -> Language {
    let schema = common::qualified_schema();
    let reserved = |w: &str| dialect.is_reserved(w);
    let policy = Policy::default();
    let mut lx = Lexicon::from_schema(&schema, &policy, &reserved).expect("lexicon");
    lx.retain_relations(LexiconKind::Table, |k| k != "hr.salaries");
    Language::build(dialect, &policy, &lx).expect("language")
}

/// Fragments that spell qualified names, several of them after a lexeme they end (`,hr.`:
/// the dot is read on stacks the token itself changed).
#[rustfmt::skip]
const QUALIFIED_FRAGMENTS: &[&str] = &[
    "hr", "hr.", " hr.", ",hr.", "(hr.", ", hr.", ".employees", "hr.employees", " hr.employees",
    "\"hr\".", ".\"employees\"", "\"Employees\"", "\"Sales\".\"Leads\"", " \"Sales\"", ".\"Leads\"", "HR.", ".sal",
    ",\"hr\".employees", " hr.orders", "hr.emp", "s hr.", "e,hr.e", " Sales.", "\"hr\"",
];

fn qualified_vocab() -> Vocabulary {
    let mut toks: Vec<Vec<u8>> = vec![b"<eos>".to_vec(), b"<pad>".to_vec(), b"SELECT".to_vec()];
    toks.extend((0..=255u8).map(|b| vec![b]));
    toks.extend(
        FRAGMENTS
            .iter()
            .chain(QUALIFIED_FRAGMENTS)
            .map(|f| f.as_bytes().to_vec()),
    );
    Vocabulary::from_served(toks, &[PAD, SPECIAL_SELECT], Some(EOS)).expect("vocabulary")
}

const QUALIFIED_STATEMENTS: &[&str] = &[
    "SELECT name FROM hr.employees WHERE id = 1",
    "SELECT e.name, o.total FROM orders o JOIN hr.employees e ON e.id = o.id",
    "SELECT employees.name FROM hr.employees",
    "SELECT hr.employees, hr.id FROM orders AS hr",
    "SELECT hr.id FROM employees hr,hr.employees",
    "SELECT \"Leads\".id FROM \"Sales\".\"Leads\"",
    "SELECT id FROM \"hr\".employees UNION SELECT id FROM hr.\"employees\"",
    "SELECT id FROM HR.EMPLOYEES , \"hr\".\"employees\" x",
    "DELETE FROM hr.employees WHERE id = 1",
    "UPDATE hr.salaries SET amount = 1",
    "INSERT INTO hr.employees VALUES (1)",
    "WITH x AS (SELECT id FROM hr.employees) SELECT id FROM x,hr.employees",
];

#[test]
fn qualified_names_fast_equals_oracle_at_every_offset() {
    let lang = qualified_language(common::dialect());
    let mut fx = MaskFixture::new(qualified_vocab());
    let n = differential_over_offsets(&lang, &mut fx, QUALIFIED_STATEMENTS);
    assert!(n > 500, "{n}");
    let mini = qualified_language(mini_dialect());
    let mut s = Session::new(&mini);
    assert!(s.complete(b"SELECT name FROM hr.employees"), "mini dialect");
}

/// A `schema.table` word is one lexeme only where a relation may be named, and only for
/// pairs that exist and that the role may use there; elsewhere `hr.x` is a qualifier and
/// a column, as before.
#[test]
fn qualified_names_only_where_a_table_may_be_named() {
    let lang = qualified_language(common::dialect());
    let v = qualified_vocab();
    let mut fx = MaskFixture::new(qualified_vocab());
    let mut s = Session::new(&lang);
    let at = |s: &mut Session<'_>, fx: &mut MaskFixture, text: &str| {
        let c = config_after(s, text);
        fx.checked(s, &c, text)
    };
    let has = |m: &Mask, t: &str| {
        let ids = ids_of(&v, t);
        assert!(!ids.is_empty(), "{t:?} is not a token");
        ids.iter().all(|&id| m.contains(id))
    };

    let m = at(&mut s, &mut fx, "SELECT * FROM ");
    for t in [
        "hr.",
        "hr.employees",
        "hr.emp",
        "\"hr\".",
        "HR.",
        "\"Sales\".\"Leads\"",
    ] {
        assert!(has(&m, t), "{t:?} blocked at a table position");
    }
    // `hr` alone is no relation: only the dot may follow.
    let m = at(&mut s, &mut fx, "SELECT * FROM \"hr\"");
    assert!(!m.eos && has(&m, ".employees") && has(&m, ".\"employees\""));
    assert!(!has(&m, " ") && !has(&m, ",") && !has(&m, ".sal"));
    let m = at(&mut s, &mut fx, "SELECT * FROM");
    assert!(has(&m, " hr.employees") && has(&m, " hr.") && has(&m, " \"Sales\""));
    assert!(!has(&m, " hr.orders"), "a pair that does not exist");
    assert!(!has(&m, " Sales."), "`Sales` folds to `sales`");
    let m = at(&mut s, &mut fx, "SELECT * FROM hr.");
    assert!(has(&m, "employees") && has(&m, "emp") && has(&m, "\"employees\""));
    for t in ["sal", "aries", "orders", "\"Employees\"", ".employees"] {
        assert!(!has(&m, t), "{t:?} after `hr.`");
    }
    assert!(!m.eos);

    // Whole statements: the pair must exist and be granted for the verb; each part is
    // spelled as PostgreSQL folds it; no space around the dot.
    for ok in [
        "SELECT id FROM hr.\"employees\"",
        "SELECT id FROM \"hr\".EMPLOYEES",
        "SELECT id FROM \"Sales\".\"Leads\"",
        "UPDATE hr.salaries SET amount = 1",
        "SELECT hr.employees FROM orders hr",
        "SELECT hr.name FROM hr.employees hr",
        "SELECT T1.name FROM employees AS T1",
    ] {
        assert!(s.complete(ok.as_bytes()), "{ok}");
    }
    for bad in [
        "SELECT id FROM hr.salaries",
        "SELECT id FROM hr.orders",
        "SELECT id FROM public.employees",
        "SELECT id FROM \"HR\".employees",
        "SELECT id FROM Sales.Leads",
        "SELECT id FROM \"Sales\".leads",
        "SELECT id FROM hr . employees",
        "SELECT id FROM hr. employees",
        "SELECT id FROM hr.employees.id",
        "SELECT hr.employees.id FROM hr.employees",
        "UPDATE hr.employees_x SET id = 1",
    ] {
        assert!(!s.complete(bad.as_bytes()), "{bad}");
    }
    // A CTE may not take the bare name of a relation, on the path or off it.
    assert!(!s.viable(b"WITH salaries AS (SELECT 1 AS id) SELECT id FROM salaries "));
    assert!(s.complete(b"WITH pay AS (SELECT 1 AS id) SELECT id FROM pay"));

    // After a lexeme the token itself ends, the dot is decided on the stacks that lexeme
    // left: `,hr.` continues a FROM list here, and is an exact class.
    let c = config_after(&mut s, "SELECT hr.id FROM employees hr");
    let m = fx.checked(&mut s, &c, "after an alias");
    let id = ids_of(&v, ",hr.")[0];
    assert!(m.contains(id));
    let class = m.cd_classes.iter().find(|k| k.ids.contains(&id));
    assert!(
        matches!(
            class.map(|k| &*k.key),
            Some(grid_core::cd_class::CdKey::Exact { .. })
        ),
        "{class:?}"
    );
    // In a select list the same token reads `hr` as a qualifier.
    let c = config_after(&mut s, "SELECT 1");
    let m = fx.checked(&mut s, &c, "in a select list");
    assert!(m.contains(id) && has(&m, ", hr.") && !has(&m, "e,hr.e"));
}

#[test]
fn hostile_qualified_text_is_refused_at_the_first_bad_token() {
    let lang = qualified_language(common::dialect());
    let mut fx = MaskFixture::new(qualified_vocab());
    let mut rng = Rng(0x51ed_2701);
    let mut s = Session::new(&lang);
    let mut left = 0;
    for text in QUALIFIED_STATEMENTS {
        assert!(!walk_hostile(&mut s, &mut fx, text, true), "{text}");
        for round in 0..12 {
            let m = mutate(text, &mut rng);
            left += usize::from(walk_hostile(&mut s, &mut fx, &m, round % 3 == 0));
        }
    }
    assert!(left > 30, "only {left} mutations left the language");
}

/// W ⊆ R holds for qualified words too: only the relation categories scan `schema.table`.
#[test]
fn qualified_words_are_checked_against_their_terminal() {
    let d = common::dialect();
    let reserved = |w: &str| d.is_reserved(w);
    let schema = Schema {
        db_id: "q".into(),
        tables: vec![Table::qualified_with_columns("hr", "staff", &["id"])],
    };
    let policy = Policy::default();
    let mut lx = Lexicon::from_schema(&schema, &policy, &reserved).expect("lexicon");
    assert!(Language::build(d.clone(), &policy, &lx).is_ok());
    lx.qualified.insert(
        LexiconKind::Column,
        [grid_core::schema::QualifiedName::new("hr", "id")].into(),
    );
    match Language::build(d, &policy, &lx) {
        Err(grid_core::GridError::UnscannableWord { word, category, .. }) => {
            assert_eq!(
                (word.as_str(), category.as_str()),
                ("\"hr\".\"id\"", "column")
            );
        }
        other => panic!("a dotted column word was accepted: {other:?}"),
    }
}

/// Termination: from a qualified name in progress, or a position where only qualified
/// relations are granted (UPDATE, DELETE targets here), the reserve's completion is a
/// sentence, within the reserve's token count.
#[test]
fn reserve_completes_qualified_names() {
    use grid_core::reserve::{ReserveMemo, ReserveTable, Speller};
    let lang = qualified_language(common::dialect());
    let vocab = qualified_vocab();
    let speller = Speller::of(&vocab);
    let table = ReserveTable::build(&lang, &speller);
    let mut s = Session::new(&lang);
    for prefix in [
        "SELECT id FROM ",
        "SELECT id FROM hr.",
        "SELECT id FROM \"hr\"",
        "SELECT id FROM \"Sales\".\"Le",
        "UPDATE ",
        "UPDATE hr",
        "DELETE FROM ",
        "SELECT hr.",
    ] {
        let cfg = config_after(&mut s, prefix);
        let mut memo = ReserveMemo::default();
        let tail = table
            .completion(&mut s, &mut memo, &cfg, &speller)
            .unwrap_or_else(|| panic!("{prefix:?}: no completion"));
        let reserve = table.reserve(&mut s, &mut memo, &cfg, &speller);
        let mut text = prefix.as_bytes().to_vec();
        text.extend_from_slice(&tail);
        assert!(
            s.complete(&text),
            "{prefix:?} + {:?}",
            String::from_utf8_lossy(&tail)
        );
        let tokens = speller.segment(&tail).map_or(usize::MAX, |t| t.len());
        assert!(tokens as u32 <= reserve, "{prefix:?}: {tokens} > {reserve}");
    }
}

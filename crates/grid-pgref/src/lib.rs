//! PostgreSQL's own parser as the reference for the language (issue 20).
//!
//! Every statement the mask admits must parse in PostgreSQL, and the checker (which reads
//! statements with sqlparser to bind columns) must read every statement of the language
//! that PostgreSQL parses; Spider's gold queries parse in the language exactly when they
//! parse in PostgreSQL. The reference is libpg_query for PostgreSQL 15 — the server the
//! extension runs in — through the `pg_query` crate. It parses only (no catalog), which is
//! what "the statement parses" means here; binding and privileges are the checker's and,
//! later, the server's.
//!
//! The statements come from random walks of the language through the decode loop
//! ([`walks`]), from the reference endpoint's scripted and adversarial mocks, and from the
//! Spider gold. [`Differential`] judges them and keeps the tally the test asserts on and
//! the long run (`grid-pgref`) prints.

pub mod fixtures;
pub mod walks;

use std::collections::BTreeMap;
use std::sync::Arc;

use grid_core::checker;
use grid_core::{Policy, Session};
use grid_endpoint::backend::mock::{mix, AdversarialMock, ScriptedMock};
use grid_endpoint::backend::script::Script;
use grid_endpoint::model::{InProcess, SamplingPlan};
use serde_json::json;

/// Whether PostgreSQL 15's parser reads `sql` as exactly one statement.
pub fn postgres_parses(sql: &str) -> Result<(), String> {
    let parsed = pg_query::parse(sql).map_err(|e| e.to_string())?;
    match parsed.protobuf.stmts.len() {
        1 => Ok(()),
        n => Err(format!("{n} statements")),
    }
}

/// Whether the checker's parser reads `sql` as exactly one statement.
pub fn checker_parses(sql: &str) -> Result<(), String> {
    checker::parses(sql).map_err(|k| format!("{k:?}"))
}

/// One disagreement with the reference.
#[derive(Debug, Clone)]
pub struct Disagreement {
    /// Where the statement came from (`walk`, `mock:scripted`, `gold:<line>` ...).
    pub source: String,
    pub sql: String,
    pub what: &'static str,
    pub error: String,
}

/// The tally of a differential run.
#[derive(Debug, Default)]
pub struct Differential {
    /// Statements the language admitted, per source kind.
    pub admitted: BTreeMap<String, u64>,
    /// Spider gold lines: how many, how many PostgreSQL parses, how many the language
    /// parses, and how many both.
    pub gold: [u64; 4],
    /// The same for the grammar's example statements.
    pub examples: [u64; 4],
    pub disagreements: Vec<Disagreement>,
    /// Every statement judged, in order, with the language's and PostgreSQL 15's
    /// verdicts: `grid-pgref --dump` writes them for scripts/pg-parse-diff.sh, which has
    /// the PostgreSQL 15 and 18 servers parse the same statements (issue 37).
    pub judged: Vec<Judged>,
    /// Outputs the language admitted that are the model's decline (`CANNOT ANSWER
    /// 'reason'`, [`grid_core::statement::decline_of`]), per source kind: no SQL, so
    /// neither PostgreSQL nor the checker is asked (the pipeline never shows one to
    /// either), and not in `judged`.
    pub declines: BTreeMap<String, u64>,
}

/// One statement judged: where it came from, whether the language read it (a statement
/// the mask admitted is the language's by construction) and whether PostgreSQL 15's
/// parser did.
#[derive(Debug, Clone)]
pub struct Judged {
    pub source: String,
    pub sql: String,
    pub language: Result<(), String>,
    pub postgres: Result<(), String>,
}

impl Differential {
    fn kind(source: &str) -> String {
        source.split(':').take(2).collect::<Vec<_>>().join(":")
    }

    /// Judges a statement the language admitted: PostgreSQL must parse it, and then the
    /// checker must read it. A decline is counted, not judged.
    pub fn admitted(&mut self, source: &str, sql: &str) {
        if grid_core::statement::decline_of(sql).is_some() {
            *self.declines.entry(Self::kind(source)).or_default() += 1;
            return;
        }
        *self.admitted.entry(Self::kind(source)).or_default() += 1;
        let pg = postgres_parses(sql);
        self.judge(source, sql, Ok(()), &pg);
        if let Err(e) = pg {
            self.disagree(
                source,
                sql,
                "admitted by the mask, refused by PostgreSQL",
                e,
            );
            return;
        }
        if let Err(e) = checker_parses(sql) {
            self.disagree(
                source,
                sql,
                "admitted by the mask and parsed by PostgreSQL, refused by the checker as not parsing",
                e,
            );
        }
    }

    /// Judges a gold statement: the language parses it exactly when PostgreSQL does, and
    /// the checker reads what both parse.
    pub fn gold(&mut self, source: &str, sql: &str, language: Result<(), String>) {
        let pg = postgres_parses(sql);
        self.judge(source, sql, language.clone(), &pg);
        self.gold[0] += 1;
        self.gold[1] += u64::from(pg.is_ok());
        self.gold[2] += u64::from(language.is_ok());
        match (&pg, &language) {
            (Ok(()), Ok(())) => {
                self.gold[3] += 1;
                if let Err(e) = checker_parses(sql) {
                    self.disagree(
                        source,
                        sql,
                        "parsed by PostgreSQL and the language, refused by the checker",
                        e,
                    );
                }
            }
            (Ok(()), Err(e)) => self.disagree(
                source,
                sql,
                "parsed by PostgreSQL, refused by the language",
                e.clone(),
            ),
            (Err(e), Ok(())) => self.disagree(
                source,
                sql,
                "parsed by the language, refused by PostgreSQL",
                e.clone(),
            ),
            (Err(_), Err(_)) => {}
        }
    }

    /// [`Differential::admitted`] for each of `texts`.
    pub fn admitted_all(&mut self, source: &str, texts: &[String]) {
        for t in texts {
            self.admitted(source, t);
        }
    }

    fn judge(
        &mut self,
        source: &str,
        sql: &str,
        language: Result<(), String>,
        postgres: &Result<(), String>,
    ) {
        self.judged.push(Judged {
            source: source.to_string(),
            sql: sql.to_string(),
            language,
            postgres: postgres.clone(),
        });
    }

    fn disagree(&mut self, source: &str, sql: &str, what: &'static str, error: String) {
        self.disagreements.push(Disagreement {
            source: source.to_string(),
            sql: sql.to_string(),
            what,
            error,
        });
    }

    /// The tally as one JSON line.
    pub fn summary(&self) -> serde_json::Value {
        let admitted: u64 = self.admitted.values().sum();
        let count = |w: &str| {
            self.disagreements
                .iter()
                .filter(|d| d.what.starts_with(w))
                .count()
        };
        json!({
            "admitted": admitted,
            "admitted_by_source": self.admitted,
            "declines_by_source": self.declines,
            "postgres_refused_admitted": count("admitted by the mask, refused"),
            "checker_refused_parsed": count("admitted by the mask and parsed") + count("parsed by PostgreSQL and the language"),
            "examples": self.examples[0],
            "examples_both_parse": self.examples[3],
            "gold_lines": self.gold[0],
            "gold_postgres_parses": self.gold[1],
            "gold_language_parses": self.gold[2],
            "gold_both": self.gold[3],
            "gold_language_refused_postgres_parsed": count("parsed by PostgreSQL, refused"),
            "gold_postgres_refused_language_parsed": count("parsed by the language, refused"),
            "disagreements": self.disagreements.len(),
        })
    }
}

/// Judges `texts` for the dump only (`grid-pgref --probes`): each in the language of a
/// permissive schema over them (every word a name, as for the grammar's examples) and by
/// PostgreSQL 15's parser, with the source `probe:<line>`; no tally, no disagreement.
/// They are statements the versions are known to read differently, so that the dump's
/// readers check what is expected of 15 and 18 and not only what the run generates.
pub fn probes(d: &mut Differential, texts: &[(usize, String)]) {
    let dialects = fixtures::dialects();
    let (_, full) = &dialects[1];
    let sqls: Vec<String> = texts.iter().map(|(_, s)| s.clone()).collect();
    let role = fixtures::Role::new(
        "probes",
        full,
        &fixtures::permissive_schema(full, &sqls),
        Policy::default(),
    );
    for (line, sql) in texts {
        let language = Session::new(&role.lang)
            .check(sql.as_bytes())
            .map_err(|e| format!("{e:?}"));
        let pg = postgres_parses(sql);
        d.judge(&format!("probe:{line}"), sql, language, &pg);
    }
}

/// How much one run does.
#[derive(Clone, Debug)]
pub struct Budget {
    /// Random walks per role of the built-in schema.
    pub walks: u64,
    /// Spider databases whose languages are walked and mocked (from the first, with data).
    pub spider_dbs: usize,
    /// Random walks per Spider database.
    pub spider_walks: u64,
    /// Questions per Spider database the scripted mock answers.
    pub scripted: usize,
    /// Adversarial mock generations per language.
    pub adversarial: u64,
    /// Token budget of a generation (the reserve completes it).
    pub max_tokens: u32,
}

impl Budget {
    /// The CI run: about a minute on a 2-core machine.
    pub fn ci() -> Budget {
        Budget {
            walks: 300,
            spider_dbs: 4,
            spider_walks: 60,
            scripted: 12,
            adversarial: 12,
            max_tokens: 48,
        }
    }
}

/// One run: walks and mocks over the built-in schema's roles, the grammar's examples, and
/// with `data`, the Spider gold and walks and mocks over the first `budget.spider_dbs`
/// databases. `progress` is told what is being done.
pub fn run(
    budget: &Budget,
    seed: u64,
    data: Option<&std::path::Path>,
    progress: &mut dyn FnMut(&str),
) -> Differential {
    let mut d = Differential::default();

    let roles = fixtures::builtin_roles();
    let vocab = Arc::new(fixtures::sql_vocabulary(
        &roles[0].lang.dialect,
        &fixtures::words_of(roles.iter().map(|r| &r.lexicon)),
    ));
    let walks = walks::Walks::new(&vocab);
    for (k, role) in roles.iter().enumerate() {
        progress(&format!("walks and mocks of {}", role.name));
        let run = Generations {
            walks: &walks,
            vocab: &vocab,
            budget,
        };
        run.walks_and_adversary(&mut d, role, "", budget.walks, mix(seed, k as u64));
    }

    let dialects = fixtures::dialects();
    let (_, full) = &dialects[1];
    progress("the grammar's examples");
    let examples = fixtures::examples();
    let permissive = fixtures::Role::new(
        "examples",
        full,
        &fixtures::permissive_schema(full, &examples),
        Policy::default(),
    );
    judge_texts(&mut d, "example", &examples, |_| &permissive);
    d.examples = d.gold;
    d.gold = [0; 4];

    let Some(dir) = data else {
        return d;
    };
    let spider = fixtures::Spider::load(dir, full);
    progress("Spider gold");
    let mut langs: std::collections::HashMap<String, fixtures::Role> = Default::default();
    for (_, db) in &spider.gold {
        langs.entry(db.clone()).or_insert_with(|| {
            fixtures::Role::new(db, full, &spider.schemas[db], Policy::default())
        });
    }
    let (sqls, dbs): (Vec<String>, Vec<&String>) =
        spider.gold.iter().map(|(s, db)| (s.clone(), db)).unzip();
    judge_texts(&mut d, "gold", &sqls, |i| &langs[dbs[i]]);

    let (_, ext) = &dialects[0];
    let roles: Vec<fixtures::Role> = spider
        .databases()
        .into_iter()
        .take(budget.spider_dbs)
        .map(|db| fixtures::Role::new(&db, ext, &spider.schemas[&db], Policy::default()))
        .collect();
    let vocab = Arc::new(fixtures::sql_vocabulary(
        ext,
        &fixtures::words_of(roles.iter().map(|r| &r.lexicon)),
    ));
    let walks = walks::Walks::new(&vocab);
    let run = Generations {
        walks: &walks,
        vocab: &vocab,
        budget,
    };
    for (k, role) in roles.iter().enumerate() {
        progress(&format!("walks and mocks of {}", role.name));
        run.walks_and_adversary(
            &mut d,
            role,
            "spider:",
            budget.spider_walks,
            mix(seed, 1000 + k as u64),
        );
        run.scripted(&mut d, role, &spider.script(&role.name), seed);
    }
    d
}

/// Judges `texts` as gold: each against the language of `role_of(its index)`.
fn judge_texts<'r>(
    d: &mut Differential,
    source: &str,
    texts: &[String],
    role_of: impl Fn(usize) -> &'r fixtures::Role,
) {
    for (i, sql) in texts.iter().enumerate() {
        let role = role_of(i);
        let language = Session::new(&role.lang)
            .check(sql.as_bytes())
            .map_err(|e| format!("{e:?}"));
        d.gold(&format!("{source}:{}", i + 1), sql, language);
    }
}

/// Generations over one vocabulary, judged as admitted statements.
struct Generations<'a> {
    walks: &'a walks::Walks<'a>,
    vocab: &'a Arc<grid_vocab::Vocabulary>,
    budget: &'a Budget,
}

const PLAN: SamplingPlan = SamplingPlan {
    temperature: 0.8,
    top_k: Some(16),
};

impl Generations<'_> {
    /// `n` random walks of `role`, then the adversarial mock's generations.
    fn walks_and_adversary(
        &self,
        d: &mut Differential,
        role: &fixtures::Role,
        kind: &str,
        n: u64,
        seed: u64,
    ) {
        let texts = self.walks.run(&role.lang, n, seed, self.budget.max_tokens);
        d.admitted_all(&format!("walk:{kind}{}", role.name), &texts);
        let mut adv = InProcess::new(
            Arc::new(AdversarialMock::new(self.vocab.clone())),
            self.vocab.clone(),
            PLAN,
        )
        .expect("runtime");
        let prompts = vec![Vec::new(); self.budget.adversarial as usize];
        let texts =
            self.walks
                .generate(&role.lang, &mut adv, &prompts, seed, self.budget.max_tokens);
        d.admitted_all(&format!("mock:adversarial:{kind}{}", role.name), &texts);
    }

    /// The scripted mock answering the first questions of `script`.
    fn scripted(&self, d: &mut Differential, role: &fixtures::Role, script: &Script, seed: u64) {
        let prompts: Vec<Vec<u32>> = script
            .entries
            .iter()
            .take(self.budget.scripted)
            .map(|e| self.vocab.encode(&e.pattern))
            .collect();
        let mut scripted = InProcess::new(
            Arc::new(ScriptedMock::new(self.vocab.clone(), script.clone())),
            self.vocab.clone(),
            PLAN,
        )
        .expect("runtime");
        let texts = self.walks.generate(
            &role.lang,
            &mut scripted,
            &prompts,
            seed,
            4 * self.budget.max_tokens,
        );
        d.admitted_all(&format!("mock:scripted:{}", role.name), &texts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_is_postgres_15() {
        assert!(postgres_parses("SELECT x BETWEEN a <> b AND c FROM t").is_ok());
        assert!(postgres_parses("SELECT 1 FROM a JOIN b").is_err());
        // libpg_query 15, not 16: a subquery in FROM needs its alias, and `1x` is `1 AS x`
        // (the PostgreSQL 15 server refuses `1x` as trailing junk, as 16 does; the
        // language refuses it: scripts/pg-parse-diff.sh).
        assert!(postgres_parses("SELECT 1 FROM (SELECT 1)").is_err());
        assert!(postgres_parses("SELECT 1x").is_ok());
        assert!(postgres_parses("SELECT 1; SELECT 2").is_err());
        assert!(postgres_parses("SELECT 1;").is_ok());
        // Keyword type names are no function names in PostgreSQL's grammar.
        assert!(postgres_parses("SELECT date('2020-01-01')").is_ok());
        assert!(postgres_parses("SELECT timestamp('2020-01-01')").is_err());
        assert!(checker_parses("SELECT 1").is_ok());
    }
}

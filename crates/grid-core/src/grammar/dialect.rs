//! L1: the frozen dialect. Loads the grammar template and the lexeme spec, checks that they
//! agree, that the grammar is reduced and conflict-free, and builds the lexer automaton.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use blake2::digest::consts::U16;
use blake2::{Blake2b, Digest};

use super::cfg::Cfg;
use super::projection::project;
use super::spec::{DynKind, IdentCategory, LexSpec, LexiconKind, TermKind};
use super::table::LrTable;
use super::template;
use crate::error::{GridError, Result};
use crate::lexer::dfa::LexDfa;
use crate::policy::{Ban, Policy, Verb};
use crate::termset::TermSet;

/// An unquoted identifier as PostgreSQL scans it (its bytes ≥ 0x80 are letters). At most
/// 63 bytes (NAMEDATALEN - 1), as every identifier here: PostgreSQL truncates a longer
/// one, so two names the dialect tells apart could be one to the server (issue 16, found
/// by comparing the mocks' outputs with PostgreSQL's own lexer).
pub const UNQUOTED_IDENT: &str = r"[A-Za-z_\x80-\xFF][A-Za-z0-9_$\x80-\xFF]{0,62}";
/// An unquoted identifier of generated SQL: ASCII only. A model given PostgreSQL's
/// scanner could spell any bytes ≥ 0x80 into a free identifier (an alias), invalid UTF-8
/// included, which the server would refuse; names outside ASCII can still be quoted.
pub const ASCII_IDENT: &str = r"[A-Za-z_][A-Za-z0-9_$]{0,62}";
/// A double-quoted identifier, `""` standing for `"`: at most 63 bytes of name.
pub const QUOTED_IDENT: &str = r#""(?:[^"]|""){1,63}""#;
/// A double-quoted identifier of generated SQL: no control byte, not even a tab or a line
/// feed (a name is one line of a listing). Over bytes, so that `{1,63}` counts bytes; the
/// generated text ([`Shape::GENERATED`]) makes them whole characters.
pub const SAFE_QUOTED_IDENT: &str = r#""(?:[^"\x00-\x1f\x7f]|""){1,63}""#;

/// How a dialect spells what its grammar leaves to [`Dialect::load_with`]: identifiers, and
/// which text any lexeme may be.
#[derive(Clone, Copy, Debug)]
pub struct Shape<'a> {
    pub unquoted_ident: &'a str,
    pub quoted_ident: &'a str,
    /// With it, no lexeme holds these characters, and every lexeme is valid UTF-8
    /// ([`crate::text::generated_text_pattern`], [`LexDfa::build_with`]).
    pub hidden: Option<&'a [(char, char)]>,
}

impl Shape<'static> {
    /// PostgreSQL's own: the full dialect reads text people wrote (Spider, the grammar's
    /// examples) as PostgreSQL does, names of any bytes included; nothing is generated in
    /// it, and a curated example reaches a prompt only if the generated dialect admits it.
    pub const POSTGRES: Shape<'static> = Shape {
        unquoted_ident: UNQUOTED_IDENT,
        quoted_ident: QUOTED_IDENT,
        hidden: None,
    };
    /// Generated SQL's: ASCII unquoted names, and text that shows what it does: no
    /// control, format or separator character in a name or a literal, and only bytes that
    /// can still end a valid UTF-8 character (a byte the mask admitted could otherwise
    /// come back as U+FFFD).
    pub const GENERATED: Shape<'static> = Shape {
        unquoted_ident: ASCII_IDENT,
        quoted_ident: SAFE_QUOTED_IDENT,
        hidden: Some(crate::text::HIDDEN),
    };
}

/// See [`Dialect::builds`].
static BUILDS: AtomicU64 = AtomicU64::new(0);

/// The L1 grammar source shipped with the crate.
pub const POSTGRES_Y: &str = include_str!("../../../../grammars/postgres.y");
pub const POSTGRES_LEX: &str = include_str!("../../../../grammars/postgres.lex");

/// What the engine knows about every terminal id: grammar tokens `0..eof`, then end of
/// input (`eof`), then the ignored terminals.
#[derive(Clone, Debug)]
pub struct Terminals {
    pub names: Vec<String>,
    /// `None` for end of input.
    pub kinds: Vec<Option<TermKind>>,
    pub eof: u16,
    pub skip: TermSet,
    /// Terminals whose words come from an L3 allow-list, by list.
    pub lexicon: BTreeMap<LexiconKind, TermSet>,
    pub lexicon_all: TermSet,
    /// The terminals of the relation lexicons, whose words may be `schema.table`.
    pub relation: TermSet,
    /// Identifier terminals that refuse reserved words (and, for CTE references, relations).
    /// The bare labels are among them.
    pub free: TermSet,
    /// Identifier terminals that also refuse the words of `bare_label_denied`.
    pub bare_label: TermSet,
    /// Numeric literals: a lexeme boundary never falls between one and a letter or `_`.
    pub numeric: TermSet,
    /// Terminals every lexeme of which is a lexeme of another (`%within`: the decline's
    /// reason, a STRING): where one is not wanted, automaton states that differ only in
    /// whether it is still alive are alike to the mask's walk ([`crate::scan`]).
    pub within: TermSet,
    pub cte: TermSet,
    /// Terminals of the dynamic lexicon (names the statement introduced), by category. Their
    /// lexemes are identifiers; no static word is one (see [`crate::scope`]).
    pub dynamic: BTreeMap<DynKind, TermSet>,
    pub dynamic_all: TermSet,
}

impl Terminals {
    pub fn name(&self, t: u16) -> &str {
        self.names
            .get(usize::from(t))
            .map(String::as_str)
            .unwrap_or("?")
    }

    pub fn names_of(&self, s: &TermSet) -> Vec<&str> {
        s.iter().map(|t| self.name(t)).collect()
    }
}

/// The compiled L1.
#[derive(Debug)]
pub struct Dialect {
    pub spec: LexSpec,
    /// The template-expanded grammar; role projections start from it.
    pub cfg: Cfg,
    /// The L1 table, kept for its statistics and the conflict check it proved.
    pub table: LrTable,
    pub terms: Terminals,
    pub dfa: LexDfa,
    pub fingerprint: [u8; 16],
    /// Projected tables already built, by what a projection depends on.
    projections: Mutex<HashMap<ProjectionKey, Arc<LrTable>>>,
}

/// A projection depends on the policy's verbs and bans and on which allow-lists are empty.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ProjectionKey {
    verbs: Vec<Verb>,
    bans: Vec<Ban>,
    empty: Vec<LexiconKind>,
}

impl Dialect {
    /// [`Dialect::postgres_without_comments`], built once per process and shared. The
    /// extension builds it in the postmaster (`_PG_init` of the preloaded library), so
    /// that every backend and the worker inherit it through fork instead of building it
    /// at their first ask.
    pub fn generated() -> Result<Arc<Dialect>> {
        static GENERATED: OnceLock<std::result::Result<Arc<Dialect>, String>> = OnceLock::new();
        GENERATED
            .get_or_init(|| {
                Dialect::postgres_without_comments()
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .clone()
            .map_err(GridError::Grammar)
    }

    /// The dialect in `grammars/`.
    pub fn postgres() -> Result<Dialect> {
        Dialect::load(POSTGRES_Y, POSTGRES_LEX)
    }

    /// The dialect for generated statements: `postgres()` in which a comment is a
    /// lexeme that no parser state accepts. A model could hide any text in a comment (a
    /// forbidden name, an instruction to whoever runs the statement) that no grammar or
    /// privilege check sees, and a statement needs none. Comments still lex as PostgreSQL
    /// lexes them, so `1--1` is refused rather than read as `1 - -1`, which PostgreSQL
    /// would read as `1` and a comment.
    pub fn postgres_without_comments() -> Result<Dialect> {
        let mut d = Dialect::load_with(POSTGRES_Y, POSTGRES_LEX, Shape::GENERATED)?;
        for name in ["LINE_COMMENT", "BLOCK_COMMENT"] {
            let t = d
                .terms
                .names
                .iter()
                .position(|n| n == name)
                .ok_or_else(|| {
                    GridError::SpecMismatch(format!("the dialect has no {name} lexeme"))
                })?;
            d.terms.skip.remove(t as u16);
        }
        let mut h = Blake2b::<U16>::new();
        h.update(b"grid_pg/dialect/without-comments\0");
        h.update(d.fingerprint);
        d.fingerprint = h.finalize().into();
        Ok(d)
    }

    pub fn load(y_src: &str, lex_src: &str) -> Result<Dialect> {
        Dialect::load_with(y_src, lex_src, Shape::POSTGRES)
    }

    /// How many dialects this process has built (started to build): the extension's
    /// tests read it to prove that a backend builds none (docs/postgres.md).
    pub fn builds() -> u64 {
        BUILDS.load(Ordering::Relaxed)
    }

    /// [`Dialect::load`] with `shape`'s identifiers and text.
    pub fn load_with(y_src: &str, lex_src: &str, shape: Shape<'_>) -> Result<Dialect> {
        BUILDS.fetch_add(1, Ordering::Relaxed);
        let Shape {
            unquoted_ident,
            quoted_ident,
            hidden,
        } = shape;
        let text = hidden.map(crate::text::generated_text_pattern);
        let expanded = template::expand(y_src)?;
        let cfg = Cfg::from_yacc(&expanded)?;
        let useless = cfg.useless_symbols()?;
        if !useless.is_empty() {
            return Err(GridError::NotReduced(useless.join(", ")));
        }
        let spec = LexSpec::parse(lex_src)?;
        let terms = number_terminals(&cfg, &spec)?;
        let table = LrTable::build(&cfg)?;
        let mut patterns = Vec::new();
        for (id, kind) in terms.kinds.iter().enumerate() {
            let re = match kind {
                None => continue,
                Some(TermKind::Keyword { word }) => format!("(?i:{word})"),
                Some(TermKind::Token { regex })
                | Some(TermKind::Skip { regex })
                | Some(TermKind::Never { regex }) => regex.clone(),
                // A relation may be written `schema.table`, one lexeme, each part either way
                // (the word trie holds the pairs that exist, so no schema × table
                // product is ever spelled).
                Some(TermKind::Ident(IdentCategory::Lexicon(k))) if k.is_relation() => {
                    let part = format!("(?:{unquoted_ident}|{quoted_ident})");
                    format!("{part}(?:\\.{part})?")
                }
                Some(TermKind::Ident(_)) => format!("(?:{unquoted_ident}|{quoted_ident})"),
            };
            patterns.push((id as u16, re));
        }
        let dfa = LexDfa::build_with(&patterns, text.as_deref())?;
        check_skip_is_disjoint(&dfa, &terms)?;
        check_within(&dfa, &terms, &spec)?;
        let mut h = Blake2b::<U16>::new();
        h.update(expanded.as_bytes());
        h.update([0]);
        h.update(lex_src.as_bytes());
        // PostgreSQL's shape hashes as nothing, so that its fingerprint stays what it was;
        // each other part is tagged, so that no two shapes hash alike.
        if unquoted_ident != UNQUOTED_IDENT {
            h.update([0]);
            h.update(unquoted_ident.as_bytes());
        }
        if quoted_ident != QUOTED_IDENT {
            h.update(b"\0quoted\0");
            h.update(quoted_ident.as_bytes());
        }
        if let Some(t) = &text {
            h.update(b"\0text\0");
            h.update(t.as_bytes());
        }
        Ok(Dialect {
            spec,
            cfg,
            table,
            terms,
            dfa,
            fingerprint: h.finalize().into(),
            projections: Mutex::default(),
        })
    }

    /// The LR table of this dialect projected by `policy`, with the terminals of the `empty`
    /// allow-lists removed. Built once per distinct projection.
    pub fn projected_table(&self, policy: &Policy, empty: &[LexiconKind]) -> Result<Arc<LrTable>> {
        let key = ProjectionKey {
            verbs: policy.verbs.clone(),
            bans: policy.ban.clone(),
            empty: empty.to_vec(),
        };
        if let Some(t) = self
            .projections
            .lock()
            .ok()
            .and_then(|m| m.get(&key).cloned())
        {
            return Ok(t);
        }
        let table = Arc::new(LrTable::build(&project(self, policy, empty)?)?);
        if let Ok(mut m) = self.projections.lock() {
            m.insert(key, table.clone());
        }
        Ok(table)
    }

    pub fn is_reserved(&self, word: &str) -> bool {
        self.spec.is_reserved(word)
    }

    /// How many projections ([`Dialect::projected_table`]) this dialect keeps built.
    pub fn projections(&self) -> usize {
        self.projections.lock().map_or(0, |m| m.len())
    }
}

fn number_terminals(cfg: &Cfg, spec: &LexSpec) -> Result<Terminals> {
    let mut names = cfg.tokens.clone();
    let mut kinds = Vec::new();
    for t in &cfg.tokens {
        let d = spec.decl(t).ok_or_else(|| {
            GridError::SpecMismatch(format!("%token {t} has no lexeme declaration"))
        })?;
        if d.kind.is_lex_only() {
            return Err(GridError::SpecMismatch(format!(
                "{t} is a grammar token but declared SKIP or NEVER"
            )));
        }
        kinds.push(Some(d.kind.clone()));
    }
    for d in &spec.decls {
        if !d.kind.is_lex_only() && !cfg.tokens.contains(&d.name) {
            return Err(GridError::SpecMismatch(format!(
                "{} is declared in the lexeme spec but is not a %token",
                d.name
            )));
        }
    }
    let eof = names.len() as u16;
    names.push("$end".into());
    kinds.push(None);
    // After $end: the ignored terminals, then those no parser state takes.
    let mut skip = TermSet::EMPTY;
    for d in spec
        .decls
        .iter()
        .filter(|d| matches!(d.kind, TermKind::Skip { .. }))
    {
        skip.insert(names.len() as u16);
        names.push(d.name.clone());
        kinds.push(Some(d.kind.clone()));
    }
    for d in spec
        .decls
        .iter()
        .filter(|d| matches!(d.kind, TermKind::Never { .. }))
    {
        names.push(d.name.clone());
        kinds.push(Some(d.kind.clone()));
    }
    if names.len() > TermSet::CAPACITY {
        return Err(GridError::SpecMismatch(format!(
            "{} terminals exceed {}",
            names.len(),
            TermSet::CAPACITY
        )));
    }
    let mut lexicon: BTreeMap<LexiconKind, TermSet> = BTreeMap::new();
    let mut dynamic: BTreeMap<DynKind, TermSet> = BTreeMap::new();
    let (mut free, mut cte, mut bare_label) = (TermSet::EMPTY, TermSet::EMPTY, TermSet::EMPTY);
    for (i, k) in kinds.iter().enumerate() {
        match k {
            Some(TermKind::Ident(IdentCategory::Lexicon(l))) => {
                lexicon.entry(*l).or_default().insert(i as u16)
            }
            Some(TermKind::Ident(IdentCategory::Dynamic(d))) => {
                dynamic.entry(*d).or_default().insert(i as u16)
            }
            Some(TermKind::Ident(IdentCategory::Free)) => free.insert(i as u16),
            Some(TermKind::Ident(IdentCategory::BareLabel)) => {
                free.insert(i as u16);
                bare_label.insert(i as u16);
            }
            Some(TermKind::Ident(IdentCategory::Cte)) => cte.insert(i as u16),
            _ => {}
        }
    }
    let lexicon_all = lexicon.values().fold(TermSet::EMPTY, |a, s| a.union(s));
    let relation = lexicon
        .iter()
        .filter(|(k, _)| k.is_relation())
        .fold(TermSet::EMPTY, |a, (_, s)| a.union(s));
    let dynamic_all = dynamic.values().fold(TermSet::EMPTY, |a, s| a.union(s));
    let mut numeric = TermSet::EMPTY;
    for n in &spec.numeric {
        let t = names.iter().position(|x| x == n).ok_or_else(|| {
            GridError::SpecMismatch(format!("%numeric names {n}, which is no terminal"))
        })?;
        numeric.insert(t as u16);
    }
    let mut within = TermSet::EMPTY;
    for (narrow, _) in &spec.within {
        let t = names.iter().position(|x| x == narrow).ok_or_else(|| {
            GridError::SpecMismatch(format!("%within names {narrow}, which is no terminal"))
        })?;
        within.insert(t as u16);
    }
    Ok(Terminals {
        names,
        kinds,
        eof,
        skip,
        lexicon,
        lexicon_all,
        relation,
        free,
        bare_label,
        numeric,
        within,
        cte,
        dynamic,
        dynamic_all,
    })
}

/// Every `%within NARROW WIDE` holds on the automaton: wherever NARROW is still alive so is
/// WIDE, and wherever a lexeme is NARROW it is WIDE too.
fn check_within(dfa: &LexDfa, terms: &Terminals, spec: &LexSpec) -> Result<()> {
    for (narrow, wide) in &spec.within {
        let id = |n: &str| {
            terms
                .names
                .iter()
                .position(|x| x == n)
                .map(|t| t as u16)
                .ok_or_else(|| {
                    GridError::SpecMismatch(format!("%within names {n}, which is no terminal"))
                })
        };
        let (n, w) = (id(narrow)?, id(wide)?);
        for s in 0..dfa.n_states() as u32 {
            let broken = (dfa.live(s).contains(n) && !dfa.live(s).contains(w))
                || (dfa.accept(s).contains(n) && !dfa.accept(s).contains(w));
            if broken {
                return Err(GridError::SpecMismatch(format!(
                    "%within {narrow} {wide}: a lexeme of {narrow} is no {wide}"
                )));
            }
        }
    }
    Ok(())
}

/// An ignored lexeme must never also be a grammar lexeme, or the scanner could not tell
/// whether to hand it to the parser.
fn check_skip_is_disjoint(dfa: &LexDfa, terms: &Terminals) -> Result<()> {
    for s in 0..dfa.n_states() as u32 {
        let a = dfa.accept(s);
        if a.intersects(&terms.skip) && !a.minus(&terms.skip).is_empty() {
            return Err(GridError::Automaton(format!(
                "a lexeme is both ignored and a grammar terminal: {:?}",
                terms.names_of(a)
            )));
        }
    }
    Ok(())
}

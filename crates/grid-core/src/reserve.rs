//! The token-denominated reserve (termination): for a configuration, the number
//! of vocabulary tokens of a legal completion to ACCEPT, and that completion.
//!
//! Counting terminals would under-reserve (one identifier can span many tokens), so every
//! cost here is in tokens:
//!
//! * per terminal, a spelling `" " ‖ lexeme` and the fewest tokens that spell it
//!   ([`Speller::segment`]); the lexeme is the shortest the language's scanner accepts as
//!   that terminal (lexicon words included) and that a following space ends;
//! * per rule, the cheapest derivation (a fixpoint over the productions);
//! * per stack, summed along the stack: in the top state, finish one kernel item
//!   `A → α·β` (the cost of `β`), reduce to `A` on the entry `|α|` below, and continue
//!   from the stack that goto makes. In an LR automaton the top `|α|` entries of any
//!   stack ending in a state spell `α` for each of its kernel items, and the entry below
//!   has a goto on `A`, so each step is a derivation of the grammar. It is not always one
//!   the parser takes: where a conflict was resolved by precedence, the table shifts a
//!   terminal on which the derivation needs a reduction (issue 16: after `a INNER JOIN b
//!   JOIN c`, a qualifier-less inner join reduced before `ON` gave a completion whose `ON`
//!   the parser gave to the inner join, and the outer join was left without one). So every
//!   step is checked against the table itself: its terminals, then the first terminal of
//!   the step after it, are shifted on the real stack, which must end where the next step
//!   starts ([`ReserveTable::takes`]); a step the parser would read otherwise is never
//!   used. The cost is memoised per interned stack node ([`ReserveMemo`]), so a step costs
//!   the new nodes only;
//! * plus the remainder of the lexeme in progress: the shortest byte suffix that makes it a
//!   terminal some stack takes (or an ignored lexeme), or the rest of a name of the dynamic
//!   lexicon ([`crate::scope`]) that a stack takes there (no other terminal may finish a
//!   prefix of a name the statement introduced);
//! * where a qualifier of the dynamic lexicon is on top of a stack (or a qualifier and its
//!   dot), the dot and the cheapest column it may be followed by, before the stack's cost:
//!   no terminal of the grammar spells those ([`ReserveTable::qualified_rest`]).
//!
//! The reserve is the cost of one concrete completion, so it is never below the true
//! minimum; [`ReserveTable::completion`] returns that completion's bytes, which
//! [`Speller::segment`] spells in at most the reserve's number of tokens.
//!
//! A completion never begins the decline (`CANNOT ANSWER 'reason'`, the grammar's
//! [`DECLINE_RULE`]): no production that names it counts in a rule's cost, so where a
//! statement is still to be written the completion is the cheapest statement, whatever
//! the decline would cost. Only the model begins one; once begun (after `CANNOT`), the
//! walk from its stack finishes it like any other.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use rustc_hash::{FxHashMap, FxHashSet};

use crate::grammar::table::{LrTable, Sym};
use crate::language::Language;
use crate::lexer::dfa::DEAD;
use crate::lexer::words::WordTrie;
use crate::lexicon::quoted;
use crate::recognizer::{Config, Session};
use crate::scope::{spells_prefix, Word, NIL};

use crate::termset::TermSet;

/// A cost no completion reaches.
pub const UNREACHABLE: u32 = u32::MAX;

/// The rule of the decline (`grammars/postgres.y`), which no completion begins.
pub const DECLINE_RULE: &str = "decline_statement";

/// States the lexeme searches may visit (the scanner automaton is finite, but the product
/// with the word trie is large; the shortest spellings are found long before this).
const LEXEME_SEARCH_STATES: usize = 200_000;
const SUFFIX_SEARCH_STATES: usize = 20_000;

/// Lexemes per terminal (and byte order) whose token costs are compared: a lexicon
/// terminal has one per word, and the shortest word need not be the cheapest in tokens.
const LEXEMES_PER_TERMINAL: usize = 64;
/// Suffixes per terminal (and byte order) compared likewise.
const SUFFIXES_PER_TERMINAL: usize = 4;

/// Bytes a completion's lexemes are spelled with: printable ASCII but space.
const SPELLING_BYTES: std::ops::RangeInclusive<u8> = 0x21..=0x7e;

/// The bytes of UTF-8 beyond ASCII, tried after every ASCII byte: the generated dialect's
/// text stays valid UTF-8, so a lexeme in progress that stops inside a character (`"` and
/// the first byte of `名`) ends only through continuation bytes, and a name of the lexicon
/// spelled in other characters only through its own.
const UTF8_BYTES: std::ops::RangeInclusive<u8> = 0x80..=0xf4;

/// Spells byte strings in the fewest vocabulary tokens (special tokens excluded).
#[derive(Debug, Clone)]
pub struct Speller {
    /// Non-special token bytes → the lowest id spelling them.
    ids: FxHashMap<Vec<u8>, u32>,
    max_len: usize,
}

impl Speller {
    /// `tokens` yields `(id, bytes, is_special)`.
    pub fn new<'a>(tokens: impl Iterator<Item = (u32, &'a [u8], bool)>) -> Speller {
        let mut ids: FxHashMap<Vec<u8>, u32> = FxHashMap::default();
        let mut max_len = 0;
        for (id, bytes, special) in tokens {
            if special || bytes.is_empty() {
                continue;
            }
            max_len = max_len.max(bytes.len());
            ids.entry(bytes.to_vec())
                .and_modify(|e| *e = (*e).min(id))
                .or_insert(id);
        }
        Speller { ids, max_len }
    }

    /// The speller of a vocabulary.
    pub fn of(vocab: &grid_vocab::Vocabulary) -> Speller {
        Speller::new(vocab.iter().map(|(id, b)| (id, b, vocab.is_special(id))))
    }

    /// The fewest tokens whose bytes concatenate to `bytes` (ties: lowest ids, leftmost
    /// split), or `None` when no tokens spell it.
    pub fn segment(&self, bytes: &[u8]) -> Option<Vec<u32>> {
        let n = bytes.len();
        // best[i]: (tokens, last id, start of last token) for bytes[..i].
        let mut best: Vec<Option<(u32, u32, usize)>> = vec![None; n + 1];
        best[0] = Some((0, 0, 0));
        for i in 0..n {
            let Some((c, _, _)) = best[i] else { continue };
            for j in i + 1..=n.min(i + self.max_len) {
                if let Some(&id) = self.ids.get(&bytes[i..j]) {
                    let better = match best[j] {
                        None => true,
                        Some((cj, idj, _)) => c + 1 < cj || (c + 1 == cj && id < idj),
                    };
                    if better {
                        best[j] = Some((c + 1, id, i));
                    }
                }
            }
        }
        let mut out = Vec::new();
        let mut j = n;
        while j > 0 {
            let (_, id, i) = best[j]?;
            out.push(id);
            j = i;
        }
        out.reverse();
        Some(out)
    }

    /// `segment(bytes).len()`, or [`UNREACHABLE`].
    pub fn cost(&self, bytes: &[u8]) -> u32 {
        self.segment(bytes).map_or(UNREACHABLE, |s| s.len() as u32)
    }
}

/// How a stack's cost was reached: finish kernel item `(production, dot)` of its top state
/// and continue from `next` (or accept, when `next` is [`NIL`]). `first` is the first
/// terminal the completion from here spells ([`NO_TERMINAL`] when it spells none: the
/// stack accepts as it is).
#[derive(Clone, Copy, Debug)]
struct Step {
    cost: u32,
    prod: u32,
    dot: u16,
    next: u32,
    first: u16,
    /// The kernel item is finished by the derivations without a column reference
    /// ([`ReserveTable`], `scoped`).
    scoped: bool,
}

/// [`Step::first`] of a completion that spells no terminal.
const NO_TERMINAL: u16 = u16::MAX;

/// Per-session memo of stack costs (node ids belong to one session's arena).
///
/// Invariant: `stacks` holds only final costs. A cost computed while a cycle was cut at
/// a node still being computed (in `active`) depends on where the search entered the
/// cycle, so it is returned but not stored; only the node that entered the cycle stores
/// its cost, which no cut path can lower (a path through a node twice is never cheaper).
#[derive(Debug, Default)]
pub struct ReserveMemo {
    stacks: FxHashMap<u32, Step>,
    /// Nodes whose cost is being computed, with their depth in the search.
    active: FxHashMap<u32, usize>,
}

/// The per-language, per-vocabulary cost tables.
#[derive(Debug, Clone)]
pub struct ReserveTable {
    /// Per terminal: `" " ‖ lexeme` and its token cost (`None`: no spelling found).
    spelling: Vec<Option<(Vec<u8>, u32)>>,
    /// Per rule: cheapest derivation cost and its production; `[1]` without a column
    /// reference. A column reference stands in one form or another by the stack (a FROM
    /// to come or written, [`crate::qualifier`]), some of them the dynamic lexicon's, so
    /// where the parser does not take the cheapest derivation through one, a kernel item is
    /// finished by the other (an expression has constants).
    rule_cost: [Vec<u32>; 2],
    rule_prod: [Vec<u32>; 2],
    /// The ignored terminals (whitespace, comments).
    skip: TermSet,
    /// The dot of a qualified column.
    dot: Option<u16>,
    /// The suffix searches done over the table's language, shared by every generation
    /// over it: a role's asks pass the same lexemes in progress again and again, and a
    /// search inside the names of a wide table is the largest part of a step's reserve.
    suffixes: SuffixMemo,
}

/// [`shortest_suffixes`] by its arguments (scanner state, word trie state, wanted
/// terminals, bytes beyond ASCII), each the search's own result: exact, never stale
/// (a language is immutable). Only the language the table was built for (by its
/// fingerprint) is searched through it. Cleared when it holds [`SUFFIX_MEMO_MAX`]
/// searches.
#[derive(Debug)]
struct SuffixMemo {
    language: [u8; 16],
    searches: Mutex<FxHashMap<SuffixKey, Suffixes>>,
}

/// A suffix search's arguments: scanner state, word trie state, wanted terminals, bytes
/// beyond ASCII tried.
type SuffixKey = (u32, u32, TermSet, bool);

/// What a suffix search found: per terminal, its suffixes.
type Suffixes = Arc<[(u16, Vec<u8>)]>;

/// Most searches a [`SuffixMemo`] keeps.
const SUFFIX_MEMO_MAX: usize = 4096;

impl Clone for SuffixMemo {
    fn clone(&self) -> SuffixMemo {
        SuffixMemo::of(self.language)
    }
}

impl SuffixMemo {
    fn of(language: [u8; 16]) -> SuffixMemo {
        SuffixMemo {
            language,
            searches: Mutex::default(),
        }
    }

    fn get_or_search(
        &self,
        lang: &Language,
        (q, w): (u32, u32),
        wanted: &TermSet,
        utf8: bool,
    ) -> Suffixes {
        if lang.fingerprint != self.language {
            return shortest_suffixes(lang, q, w, wanted, utf8).into();
        }
        let key = (q, w, *wanted, utf8);
        // A poisoned lock only means another thread panicked between whole inserts: the
        // map is still sound.
        let searches = || self.searches.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = searches().get(&key) {
            return found.clone();
        }
        let found: Suffixes = shortest_suffixes(lang, q, w, wanted, utf8).into();
        let mut memo = searches();
        if memo.len() >= SUFFIX_MEMO_MAX {
            memo.clear();
        }
        memo.insert(key, found.clone());
        found
    }
}

/// The lexeme in progress finished as one terminal, and the stack that takes it.
#[derive(Clone, Debug)]
struct Finish {
    suffix: Vec<u8>,
    /// The stack after the lexeme (unchanged for an ignored lexeme).
    stack: u32,
    cost: u32,
}

impl ReserveTable {
    /// Builds the tables of `lang` for the vocabulary `speller` spells with.
    pub fn build(lang: &Language, speller: &Speller) -> ReserveTable {
        let table = &lang.table;
        let skip = lang.terms().skip;
        let spelling: Vec<Option<(Vec<u8>, u32)>> = shortest_lexemes(lang, speller)
            .into_iter()
            .map(|lx| {
                lx.and_then(|l| {
                    let mut b = vec![b' '];
                    b.extend_from_slice(&l);
                    let c = speller.cost(&b);
                    (c != UNREACHABLE).then_some((b, c))
                })
            })
            .collect();
        let term_cost = |t: u16| {
            spelling
                .get(usize::from(t))
                .and_then(|s| s.as_ref())
                .map_or(UNREACHABLE, |s| s.1)
        };
        let columnref = table.rule_names.iter().position(|n| n == "columnref");
        // The productions that begin a decline: no rule's cost counts them.
        let decline = table
            .rule_names
            .iter()
            .position(|n| n == DECLINE_RULE)
            .map(|r| Sym::Rule(r as u32));
        let derivations = |scoped: bool| {
            let mut rule_cost = vec![UNREACHABLE; table.n_rules];
            let mut rule_prod = vec![u32::MAX; table.n_rules];
            // Bellman–Ford style: costs only fall, and each fall is by at least 1.
            loop {
                let mut changed = false;
                for (p, rhs) in table.prod_rhs.iter().enumerate() {
                    let lhs = table.prod_lhs[p] as usize;
                    if scoped && Some(lhs) == columnref {
                        continue;
                    }
                    if decline.is_some_and(|d| rhs.contains(&d)) {
                        continue;
                    }
                    let c = rhs.iter().fold(0u32, |acc, s| {
                        let x = match *s {
                            Sym::Term(t) => term_cost(t),
                            Sym::Rule(r) => rule_cost[r as usize],
                        };
                        acc.saturating_add(x)
                    });
                    if c < rule_cost[lhs] {
                        rule_cost[lhs] = c;
                        rule_prod[lhs] = p as u32;
                        changed = true;
                    }
                }
                if !changed {
                    break;
                }
            }
            (rule_cost, rule_prod)
        };
        let (full_cost, full_prod) = derivations(false);
        let (scoped_cost, scoped_prod) = derivations(true);
        let (rule_cost, rule_prod) = ([full_cost, scoped_cost], [full_prod, scoped_prod]);
        let dot = lang
            .terms()
            .names
            .iter()
            .position(|n| n == "DOT")
            .map(|t| t as u16);
        ReserveTable {
            spelling,
            rule_cost,
            rule_prod,
            skip,
            dot,
            suffixes: SuffixMemo::of(lang.fingerprint),
        }
    }

    /// The spelling of terminal `t` (with its leading space) and its token cost.
    pub fn terminal(&self, t: u16) -> Option<(&[u8], u32)> {
        self.spelling
            .get(usize::from(t))?
            .as_ref()
            .map(|(b, c)| (b.as_slice(), *c))
    }

    fn term_cost(&self, t: u16) -> u32 {
        self.terminal(t).map_or(UNREACHABLE, |s| s.1)
    }

    fn symbols_cost(&self, syms: &[Sym], scoped: bool) -> u32 {
        let rule_cost = &self.rule_cost[usize::from(scoped)];
        syms.iter().fold(0u32, |acc, s| {
            acc.saturating_add(match *s {
                Sym::Term(t) => self.term_cost(t),
                Sym::Rule(r) => rule_cost[r as usize],
            })
        })
    }

    /// The cheapest completion cost of stack `node` (tokens to ACCEPT, lexemes only).
    pub fn stack_cost(&self, session: &mut Session<'_>, memo: &mut ReserveMemo, node: u32) -> u32 {
        self.stack_step(session, memo, node).cost
    }

    /// The cost reads states only: it is computed and memoised on the node's core (the
    /// values of the dynamic lexicon do not bear on it).
    fn stack_step(&self, session: &mut Session<'_>, memo: &mut ReserveMemo, node: u32) -> Step {
        let core = session.stacks.core(node);
        self.stack_step_at(session, memo, core, 0).0
    }

    /// The cost of `node` and the smallest depth of an active node the search cut a
    /// cycle at (`usize::MAX` when none): see [`ReserveMemo`].
    fn stack_step_at(
        &self,
        session: &mut Session<'_>,
        memo: &mut ReserveMemo,
        node: u32,
        depth: usize,
    ) -> (Step, usize) {
        let unreachable = Step {
            cost: UNREACHABLE,
            prod: u32::MAX,
            dot: 0,
            next: NIL,
            first: NO_TERMINAL,
            scoped: false,
        };
        if let Some(s) = memo.stacks.get(&node) {
            return (*s, usize::MAX);
        }
        // A chain of unit reductions back to a node being computed: never the cheapest.
        if let Some(&d) = memo.active.get(&node) {
            return (unreachable, d);
        }
        memo.active.insert(node, depth);
        let mut low = usize::MAX;
        let table = session.lang.table.clone();
        let state = session.stacks.state(node) as usize;
        let mut best = unreachable;
        let mut terms: Vec<u16> = Vec::new();
        for &(prod, dot) in &table.kernels[state] {
            let rhs = &table.prod_rhs[prod as usize];
            let beta = self.symbols_cost(&rhs[usize::from(dot)..], false);
            if beta == UNREACHABLE || beta >= best.cost {
                continue;
            }
            let lhs = table.prod_lhs[prod as usize];
            let (next, rest, then) = if lhs == table.start_rule {
                (NIL, 0, NO_TERMINAL)
            } else {
                let mut anc = node;
                for _ in 0..dot {
                    anc = session.stacks.parent(anc);
                    if anc == NIL {
                        break;
                    }
                }
                if anc == NIL {
                    continue;
                }
                let Some(g) = table.goto(session.stacks.state(anc), lhs) else {
                    continue;
                };
                let next = session.stacks.push_state(anc, g);
                let (step, cut) = self.stack_step_at(session, memo, next, depth + 1);
                low = low.min(cut);
                (next, step.cost, step.first)
            };
            // The cheapest derivation of the item's rest, else one without a column
            // reference, where the parser takes the first not (see `rule_cost`).
            for scoped in [false, true] {
                let beta = self.symbols_cost(&rhs[usize::from(dot)..], scoped);
                let cost = beta.saturating_add(rest);
                if beta == UNREACHABLE || cost >= best.cost {
                    break;
                }
                terms.clear();
                if self
                    .symbols_terms(&table, &rhs[usize::from(dot)..], scoped, &mut terms)
                    .is_none()
                    || !Self::takes(session, &table, node, &terms, next, then)
                {
                    continue;
                }
                best = Step {
                    cost,
                    prod,
                    dot,
                    next,
                    first: terms.first().copied().unwrap_or(then),
                    scoped,
                };
                break;
            }
        }
        memo.active.remove(&node);
        if low >= depth {
            memo.stacks.insert(node, best);
            (best, usize::MAX)
        } else {
            (best, low)
        }
    }

    /// The ways to finish the lexeme in progress, each with the stack it leaves and its
    /// total cost (suffix tokens + that stack's cost).
    fn finishes(
        &self,
        session: &mut Session<'_>,
        memo: &mut ReserveMemo,
        cfg: &Config,
        speller: &Speller,
    ) -> Vec<Finish> {
        let mut out = Vec::new();
        if cfg.scan.rem.is_empty() {
            for &s in &cfg.stacks {
                out.push(self.rest(session, memo, speller, Vec::new(), 0, s));
            }
            return out;
        }
        let wanted = self.skip.union(&session.allowed(cfg));
        // ASCII first; the bytes of other characters only where no ASCII suffix finishes
        // the lexeme (one stopped inside a character, or a name spelled in others), which
        // keeps every other step's search as small as it was.
        for utf8 in [false, true] {
            self.suffix_finishes(session, memo, cfg, speller, &wanted, utf8, &mut out);
            if out.iter().any(|f| f.cost != UNREACHABLE) {
                break;
            }
        }
        self.dynamic_finishes(session, memo, cfg, speller, &mut out);
        out
    }

    /// The finishes of the lexeme in progress through a suffix of the scanner's (see
    /// [`shortest_suffixes`]), bytes of other characters tried with `utf8`.
    #[allow(clippy::too_many_arguments)]
    fn suffix_finishes(
        &self,
        session: &mut Session<'_>,
        memo: &mut ReserveMemo,
        cfg: &Config,
        speller: &Speller,
        wanted: &TermSet,
        utf8: bool,
        out: &mut Vec<Finish>,
    ) {
        let lang = session.lang;
        let found = self
            .suffixes
            .get_or_search(lang, (cfg.scan.q, cfg.scan.w), wanted, utf8);
        for (t, suffix) in found.iter() {
            let t = *t;
            let suffix_cost = if suffix.is_empty() {
                0
            } else {
                speller.cost(suffix)
            };
            if suffix_cost == UNREACHABLE {
                continue;
            }
            for &s in &cfg.stacks {
                let next = if self.skip.contains(t) {
                    Some(s)
                } else if session.stacks.allowed(&lang.table, s).contains(t) {
                    session.stacks.shift(&lang.table, s, t)
                } else {
                    None
                };
                let Some(next) = next else { continue };
                out.push(self.rest(session, memo, speller, suffix.clone(), suffix_cost, next));
            }
        }
    }

    /// The finishes of the lexeme in progress as a name a dynamic terminal takes on one of
    /// the stacks: the rest of its spelling (a space after it ends it).
    fn dynamic_finishes(
        &self,
        session: &mut Session<'_>,
        memo: &mut ReserveMemo,
        cfg: &Config,
        speller: &Speller,
        out: &mut Vec<Finish>,
    ) {
        let lang = session.lang;
        let dynamic = lang.terms().dynamic_all;
        if !lang.sem.enabled() || !lang.dfa().live(cfg.scan.q).intersects(&dynamic) {
            return;
        }
        let reserved = |w: &str| lang.dialect.is_reserved(w);
        let rem = &cfg.scan.rem;
        for &s in &cfg.stacks {
            let a = session.stacks.allowed(&lang.table, s).intersect(&dynamic);
            for t in a.iter() {
                for n in session.stacks.visible(&lang.sem, s, t).iter() {
                    if !spells_prefix(rem, n, &reserved) {
                        continue;
                    }
                    let spelled = if rem.first() == Some(&b'"') {
                        quoted(n)
                    } else {
                        n.to_string()
                    };
                    let suffix = spelled.as_bytes()[rem.len()..].to_vec();
                    let suffix_cost = if suffix.is_empty() {
                        0
                    } else {
                        speller.cost(&suffix)
                    };
                    if suffix_cost == UNREACHABLE {
                        continue;
                    }
                    // With its value: a qualifier's columns are read from it.
                    let word = Word {
                        name: n.clone(),
                        key: n.clone(),
                    };
                    let Some(next) =
                        session
                            .stacks
                            .shift_valued(&lang.table, &lang.sem, s, t, Some(&word))
                    else {
                        continue;
                    };
                    out.push(self.rest(session, memo, speller, suffix, suffix_cost, next));
                }
            }
        }
    }

    /// The finish whose lexeme in progress ends with `suffix` (of `suffix_cost` tokens) and
    /// leaves the stack `next`: then the rest of a qualified column when one is being
    /// written ([`ReserveTable::qualified_rest`]), and the cost of the stack after it.
    fn rest(
        &self,
        session: &mut Session<'_>,
        memo: &mut ReserveMemo,
        speller: &Speller,
        mut suffix: Vec<u8>,
        suffix_cost: u32,
        next: u32,
    ) -> Finish {
        let (stack, extra) = match self.qualified_rest(session, speller, next) {
            Some((bytes, cost, after)) => {
                suffix.extend_from_slice(&bytes);
                (after, cost)
            }
            None => (next, 0),
        };
        let rest = self.stack_cost(session, memo, stack);
        Finish {
            suffix,
            stack,
            cost: suffix_cost.saturating_add(extra).saturating_add(rest),
        }
    }

    /// On a stack whose top is a qualifier of the dynamic lexicon, or a qualifier and its
    /// dot: the bytes that finish the qualified column (the dot when it is still to come,
    /// then the column of fewest tokens, ties to the first name), their token cost, and the
    /// stack after them. `None` on any other stack.
    fn qualified_rest(
        &self,
        session: &mut Session<'_>,
        speller: &Speller,
        node: u32,
    ) -> Option<(Vec<u8>, u32, u32)> {
        let lang = session.lang;
        let sem = &lang.sem;
        let qual_col = sem.qual_col()?;
        if !sem.in_qualified_column(session.stacks.state(node)) {
            return None;
        }
        let names = session.stacks.qualified_columns_on(sem, node);
        let table = &lang.table;
        let (mut bytes, mut cost, mut at) = (Vec::new(), 0u32, node);
        if let Some(dot) = self.dot {
            if session.stacks.allowed(table, node).contains(dot) {
                let (b, c) = self.terminal(dot)?;
                bytes.extend_from_slice(b);
                cost = c;
                at = session.stacks.shift(table, node, dot)?;
            }
        }
        let reserved = |w: &str| lang.dialect.is_reserved(w);
        let (column, c) = names
            .iter()
            .map(|n| {
                let spelled = if crate::lexicon::spells_unquoted(n, &reserved) {
                    format!(" {n}")
                } else {
                    format!(" {}", quoted(n))
                };
                let c = speller.cost(spelled.as_bytes());
                (spelled, c)
            })
            .filter(|(_, c)| *c != UNREACHABLE)
            .min_by_key(|(_, c)| *c)?;
        bytes.extend_from_slice(column.as_bytes());
        let after = session.stacks.shift(table, at, qual_col)?;
        Some((bytes, cost.saturating_add(c), after))
    }

    /// The reserve of `cfg`: the token cost of [`ReserveTable::completion`], or
    /// [`UNREACHABLE`] when none was found.
    pub fn reserve(
        &self,
        session: &mut Session<'_>,
        memo: &mut ReserveMemo,
        cfg: &Config,
        speller: &Speller,
    ) -> u32 {
        self.finishes(session, memo, cfg, speller)
            .iter()
            .map(|f| f.cost)
            .min()
            .unwrap_or(UNREACHABLE)
    }

    /// The bytes of the cheapest completion of `cfg` found (to append, then EOS).
    pub fn completion(
        &self,
        session: &mut Session<'_>,
        memo: &mut ReserveMemo,
        cfg: &Config,
        speller: &Speller,
    ) -> Option<Vec<u8>> {
        let finishes = self.finishes(session, memo, cfg, speller);
        let best = finishes
            .into_iter()
            .filter(|f| f.cost != UNREACHABLE)
            .min_by_key(|f| f.cost)?;
        let mut out = best.suffix;
        let mut node = best.stack;
        while node != NIL {
            let step = self.stack_step(session, memo, node);
            if step.cost == UNREACHABLE {
                return None;
            }
            let table = &session.lang.table;
            let rhs = &table.prod_rhs[step.prod as usize];
            self.spell_symbols(table, &rhs[usize::from(step.dot)..], step.scoped, &mut out)?;
            node = step.next;
        }
        Some(out)
    }

    /// Whether the parser reads the step from `node` as the walk does: it takes the
    /// terminals `terms` from `node`, and then `then` (the first terminal of the step after,
    /// [`NO_TERMINAL`] for none) lands on the stack that taking `then` from `next` gives, or
    /// with no terminal after, end of input is accepted.
    fn takes(
        session: &mut Session<'_>,
        table: &LrTable,
        node: u32,
        terms: &[u16],
        next: u32,
        then: u16,
    ) -> bool {
        let mut s = node;
        for &t in terms {
            // The allowed set may drop what the table would shift ([`crate::qualifier`]).
            if !session.stacks.allowed(table, s).contains(t) {
                return false;
            }
            match session.stacks.shift(table, s, t) {
                Some(n) => s = n,
                None => return false,
            }
        }
        if then == NO_TERMINAL {
            return session.stacks.simulate(table, s, table.eof);
        }
        if next == NIL {
            return false;
        }
        let here = session.stacks.shift(table, s, then);
        here.is_some() && here == session.stacks.shift(table, next, then)
    }

    /// The terminals of the cheapest spelling of `syms` (as [`ReserveTable::spell_symbols`]
    /// spells them), appended to `out`.
    fn symbols_terms(
        &self,
        table: &LrTable,
        syms: &[Sym],
        scoped: bool,
        out: &mut Vec<u16>,
    ) -> Option<()> {
        for s in syms {
            match *s {
                Sym::Term(t) => out.push(t),
                Sym::Rule(r) => {
                    let p = *self.rule_prod[usize::from(scoped)].get(r as usize)?;
                    if p == u32::MAX {
                        return None;
                    }
                    self.symbols_terms(table, &table.prod_rhs[p as usize], scoped, out)?;
                }
            }
        }
        Some(())
    }

    fn spell_symbols(
        &self,
        table: &LrTable,
        syms: &[Sym],
        scoped: bool,
        out: &mut Vec<u8>,
    ) -> Option<()> {
        for s in syms {
            match *s {
                Sym::Term(t) => out.extend_from_slice(self.terminal(t)?.0),
                Sym::Rule(r) => {
                    let p = *self.rule_prod[usize::from(scoped)].get(r as usize)?;
                    if p == u32::MAX {
                        return None;
                    }
                    // The cheapest production's symbols all cost less than the rule, so
                    // the recursion ends.
                    self.spell_symbols(table, &table.prod_rhs[p as usize], scoped, out)?;
                }
            }
        }
        Some(())
    }
}

/// The two byte orders the searches try: lower case first, then upper case first. Keywords
/// match either case, and vocabularies usually spell one of them in fewer tokens. With
/// `utf8`, the bytes of other characters after all of ASCII.
fn byte_orders(utf8: bool) -> [Vec<u8>; 2] {
    let other = || UTF8_BYTES.filter(move |_| utf8);
    let lower: Vec<u8> = (b'a'..=b'z')
        .chain(b'0'..=b'9')
        .chain(SPELLING_BYTES.filter(|b| !b.is_ascii_alphanumeric()))
        .chain(b'A'..=b'Z')
        .chain(other())
        .collect();
    let upper: Vec<u8> = (b'A'..=b'Z')
        .chain(b'0'..=b'9')
        .chain(SPELLING_BYTES.filter(|b| !b.is_ascii_alphanumeric()))
        .chain(b'a'..=b'z')
        .chain(other())
        .collect();
    [lower, upper]
}

/// Per terminal, the lexeme (bytes from [`SPELLING_BYTES`]) of fewest tokens among the
/// [`LEXEMES_PER_TERMINAL`] shortest ones of each byte order that the scanner gives that terminal for, and after
/// which a space ends the lexeme.
fn shortest_lexemes(lang: &Language, speller: &Speller) -> Vec<Option<Vec<u8>>> {
    let n = lang.table.n_terms;
    let mut found: Vec<Option<(Vec<u8>, u32)>> = vec![None; n];
    let start = (lang.dfa().start, WordTrie::ROOT);
    for order in byte_orders(false) {
        let mut count = vec![0usize; n];
        bfs(
            lang,
            start,
            LEXEME_SEARCH_STATES,
            &order,
            |q, w, cands, path| {
                if ends_at(lang, q, w, b' ') {
                    for t in cands.iter() {
                        let t = usize::from(t);
                        if t >= n || count[t] == LEXEMES_PER_TERMINAL {
                            continue;
                        }
                        count[t] += 1;
                        let mut spelled = vec![b' '];
                        spelled.extend_from_slice(path);
                        let c = speller.cost(&spelled);
                        if found[t].as_ref().is_none_or(|(_, old)| c < *old) {
                            found[t] = Some((path.to_vec(), c));
                        }
                    }
                }
                false
            },
        );
    }
    found.into_iter().map(|f| f.map(|(l, _)| l)).collect()
}

/// What must follow a lexeme that is `t` at `(q, w)` so that the completion's next byte
/// (a space) does not extend it: nothing, when a space ends it; for an ignored lexeme, a
/// newline when that ends it (a line comment), or nothing when a space keeps it the same
/// ignored lexeme (whitespace).
fn closing(lang: &Language, q: u32, w: u32, t: u16) -> Option<&'static [u8]> {
    if ends_at(lang, q, w, b' ') {
        return Some(b"");
    }
    if !lang.terms().skip.contains(t) {
        return None;
    }
    if ends_at(lang, q, w, b'\n') {
        return Some(b"\n");
    }
    let q2 = if q == DEAD {
        DEAD
    } else {
        lang.dfa().next(q, b' ')
    };
    lang.candidates(q2, lang.words.step(w, b' '))
        .contains(t)
        .then_some(b"")
}

/// Per terminal of `wanted`, the [`SUFFIXES_PER_TERMINAL`] shortest suffixes (per byte order) that ends the lexeme in
/// progress at `(q, w)` as that terminal, closing included.
fn shortest_suffixes(
    lang: &Language,
    q: u32,
    w: u32,
    wanted: &TermSet,
    utf8: bool,
) -> Vec<(u16, Vec<u8>)> {
    // Only a terminal live at the start can be a candidate of a state the search reaches
    // (liveness only shrinks along a path), so once each of those has its suffixes the
    // search is over: counting the others as well (the dynamic terminals, which no scanner
    // state accepts, or keywords no suffix of a name reaches) ran every search to its end.
    let remaining = wanted.intersect(&lang.live(q, w)).iter().count();
    suffix_search(lang, (q, w), wanted, utf8, remaining)
}

/// [`shortest_suffixes`], the search ending once `remaining` terminals have their
/// suffixes.
fn suffix_search(
    lang: &Language,
    (q, w): (u32, u32),
    wanted: &TermSet,
    utf8: bool,
    remaining: usize,
) -> Vec<(u16, Vec<u8>)> {
    let mut out: Vec<(u16, Vec<u8>)> = Vec::new();
    for order in byte_orders(utf8) {
        let mut count: FxHashMap<u16, usize> = FxHashMap::default();
        let mut full = 0;
        bfs(
            lang,
            (q, w),
            SUFFIX_SEARCH_STATES,
            &order,
            |q, w, cands, path| {
                for t in cands.intersect(wanted).iter() {
                    let c = count.entry(t).or_default();
                    if *c == SUFFIXES_PER_TERMINAL {
                        continue;
                    }
                    if let Some(close) = closing(lang, q, w, t) {
                        *c += 1;
                        if *c == SUFFIXES_PER_TERMINAL {
                            full += 1;
                        }
                        let mut s = path.to_vec();
                        s.extend_from_slice(close);
                        out.push((t, s));
                    }
                }
                full == remaining
            },
        );
    }
    out
}

/// Breadth-first search of the scanner from `start` over the bytes of `order` (in that
/// order), calling `visit(q, w, candidates, path)` for every reached state whose bytes are
/// a lexeme, shortest paths first, until `visit` returns true or `limit` states were
/// reached.
fn bfs(
    lang: &Language,
    start: (u32, u32),
    limit: usize,
    order: &[u8],
    mut visit: impl FnMut(u32, u32, TermSet, &[u8]) -> bool,
) {
    let mut seen: FxHashSet<(u32, u32)> = FxHashSet::default();
    // Paths are kept as parent links to keep the queue small.
    let mut nodes: Vec<((u32, u32), usize, u8)> = vec![(start, usize::MAX, 0)];
    let mut queue: VecDeque<usize> = VecDeque::from([0]);
    seen.insert(start);
    let path_of = |nodes: &Vec<((u32, u32), usize, u8)>, mut i: usize| {
        let mut p = Vec::new();
        while nodes[i].1 != usize::MAX {
            p.push(nodes[i].2);
            i = nodes[i].1;
        }
        p.reverse();
        p
    };
    while let Some(i) = queue.pop_front() {
        let (q, w) = nodes[i].0;
        let cands = lang.candidates(q, w);
        if !cands.is_empty() && visit(q, w, cands, &path_of(&nodes, i)) {
            return;
        }
        if nodes.len() > limit {
            continue;
        }
        for &b in order {
            let q2 = if q == DEAD {
                DEAD
            } else {
                lang.dfa().next(q, b)
            };
            let w2 = lang.words.step(w, b);
            // Only a live state is ever inserted, so one seen before is skipped without
            // its liveness (most bytes lead back to a few states of generic names).
            if seen.contains(&(q2, w2)) || lang.live(q2, w2).is_empty() {
                continue;
            }
            seen.insert((q2, w2));
            nodes.push(((q2, w2), i, b));
            queue.push_back(nodes.len() - 1);
        }
    }
}

/// Whether `byte` after the bytes that led to `(q, w)` ends the lexeme.
fn ends_at(lang: &Language, q: u32, w: u32, byte: u8) -> bool {
    let q2 = if q == DEAD {
        DEAD
    } else {
        lang.dfa().next(q, byte)
    };
    lang.live(q2, lang.words.step(w, byte)).is_empty()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::schema::{Schema, Table};
    use crate::{Dialect, Lexicon, Policy};

    /// The search that stops once the terminals live at the start have their suffixes
    /// finds exactly what the search run to its end finds, wherever a lexeme is in
    /// progress: in keywords, in names of a wide table, in qualified names, in literals.
    #[test]
    fn stopping_at_the_live_terminals_finds_what_the_whole_search_finds() {
        let d = Arc::new(Dialect::postgres_without_comments().expect("dialect"));
        let wide: Vec<String> = (0..300)
            .map(|i| format!("a_long_column_name_{i:03}"))
            .collect();
        let wide: Vec<&str> = wide.iter().map(String::as_str).collect();
        let schema = Schema {
            db_id: "reserve".into(),
            tables: vec![
                Table::with_columns("employees", &["id", "name", "dept", "employee_id"]),
                Table::with_columns("wide", &wide),
            ],
        };
        let policy = Policy::default();
        let reserved = |w: &str| d.is_reserved(w);
        let lexicon = Lexicon::from_schema(&schema, &policy, &reserved).expect("lexicon");
        let lang = Language::build(d.clone(), &policy, &lexicon).expect("language");
        let table = ReserveTable::build(&lang, &Speller::new(std::iter::empty()));
        let mut checked = 0;
        for prefix in [
            "SEL",
            "SELECT a_lo",
            "SELECT a_long_column_name_1",
            "SELECT a_long_column_name_12",
            "SELECT e",
            "SELECT employee",
            "SELECT employees.na",
            "SELECT x.a_long_col",
            "SELECT count(*) FROM wi",
            "SELECT * FROM employees WHERE name = 'ab",
            "SELECT * FROM employees WHERE id = 12",
            "SELECT * FROM employees AS e WHERE e.dep",
            "SELECT a_long_column_name_001 FROM wide ORDER BY a_long_column_name_00",
            "SELECT 1 AS total_co",
            "SELECT \"a_long_",
        ] {
            let mut session = Session::new(&lang);
            let mut cfg = session.start();
            session
                .feed(&mut cfg, prefix.as_bytes())
                .unwrap_or_else(|_| panic!("{prefix} is refused"));
            let wanted = table.skip.union(&session.allowed(&cfg));
            let (q, w) = (cfg.scan.q, cfg.scan.w);
            for utf8 in [false, true] {
                let whole = suffix_search(&lang, (q, w), &wanted, utf8, wanted.iter().count());
                assert_eq!(
                    shortest_suffixes(&lang, q, w, &wanted, utf8),
                    whole,
                    "{prefix} (utf8: {utf8})"
                );
                checked += usize::from(!whole.is_empty());
            }
        }
        assert!(checked >= 20, "only {checked} searches found a suffix");
    }
}

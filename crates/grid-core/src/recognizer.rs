//! The viable-prefix recognizer: the scanner and the parser stepped together, one byte at
//! a time.
//!
//! A configuration is a set of parser stacks plus the scan state of the one lexeme in
//! progress. The scanner runs the union automaton and the word trie in lockstep; when no
//! terminal can continue, it emits the longest lexeme it saw (maximal munch) and requeues
//! the rest. At an emission every candidate terminal that a stack can shift is shifted on
//! that stack (contextual resolution); when several can (`name` as a column, a qualifier or a
//! keyword), each becomes its own stack, and the next lexemes decide. Stacks are interned, so
//! equal interpretations merge.
//!
//! Two rules keep the scanner faithful to PostgreSQL's: a reserved word is never an
//! identifier (the word trie's deny lists), and a lexeme boundary never falls between two
//! word characters (`1ex` and `salariesx` are one word, so they are refused rather than split).
//!
//! A relation written `schema.table` is one lexeme, so that only pairs that exist can be
//! spelled. PostgreSQL reads the same bytes as three tokens and lets its grammar decide; here
//! the scanner asks, at the dot, whether the parser expects a relation (the stacks at the
//! lexeme's start, which are the stacks when the dot is read). Where it does, the dot joins
//! the word; elsewhere `hr.x` is a qualifier, a dot and a column, exactly as without
//! qualified words. No position of the grammar takes both a relation and a qualifier.
//!
//! Names the statement introduced (the dynamic lexicon, [`crate::scope`]) are words of no
//! trie: at an emission, a stack that can take a dynamic terminal takes it when the lexeme
//! spells one of the names its entries make visible there, and a lexeme in progress is
//! viable when it is still the prefix of one. The scan itself (lexeme boundaries, the trie)
//! never reads them: every such name is an identifier, which a free identifier already
//! keeps alive. The mask walks read the language without them ([`Dynamic::Off`]) and add
//! what they allow separately (see [`crate::mask`]).

use std::sync::Arc;

use rustc_hash::FxHashMap;
use smallvec::{smallvec, SmallVec};

use crate::language::Language;
use crate::lexer::dfa::DEAD;
use crate::lexer::words::OFF;
use crate::parser::Stacks;
use crate::scan::{scan_byte, splits, Scan, ScanHost, ScanStop, StopKind};
use crate::scope::{spells, spells_prefix, stored_key, stored_of, Name, Word};
use crate::termset::TermSet;

/// Whether the recognizer reads the dynamic lexicon: on for the language itself, off for
/// the mask walks, whose cached parts must not depend on the statement's own names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dynamic {
    On,
    Off,
}

/// What a [`Session::push_byte_with`] watcher is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scanned {
    /// A lexeme handed to the parser: its candidates, start offset and length.
    Lexeme {
        cands: TermSet,
        at: usize,
        len: usize,
    },
    /// The parser was asked whether the dot of a `schema.table` word joins it.
    Dot,
}

/// The recognizer as a scan host: lexemes go to the stacks, and the stacks answer at a dot.
struct Parse<'a, 'l, F> {
    session: &'a mut Session<'l>,
    stacks: &'a mut SmallVec<[u32; 4]>,
    watch: &'a mut F,
    dynamic: Dynamic,
}

impl<F: FnMut(Scanned)> ScanHost for Parse<'_, '_, F> {
    type Refused = TermSet;

    fn lexeme(&mut self, cands: TermSet, at: usize, bytes: &[u8]) -> Result<(), TermSet> {
        let taken = match self.dynamic {
            Dynamic::On => self.session.emit_text(self.stacks, cands, bytes),
            Dynamic::Off => self.session.emit_on(self.stacks, cands),
        };
        if !taken {
            return Err(cands);
        }
        if !cands.intersects(&self.session.lang.terms().skip) {
            let len = bytes.len();
            (self.watch)(Scanned::Lexeme { cands, at, len });
        }
        Ok(())
    }

    fn relation_expected(&mut self) -> Option<bool> {
        (self.watch)(Scanned::Dot);
        Some(self.session.relation_expected(self.stacks))
    }
}

/// A recognizer configuration: interned stacks (sorted, distinct) and the scan state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    pub stacks: SmallVec<[u32; 4]>,
    pub scan: Scan,
    /// Bytes consumed so far.
    pub offset: usize,
}

impl Config {
    /// `*self = other.clone()`, reusing `self`'s buffers and copying slices wholesale (the
    /// mask walk does this once per trie node).
    pub(crate) fn copy_from(&mut self, other: &Config) {
        let Config {
            stacks,
            scan:
                Scan {
                    q,
                    w,
                    rem,
                    last,
                    start,
                },
            offset,
        } = other;
        self.stacks.clear();
        self.stacks.extend_from_slice(stacks);
        self.scan.q = *q;
        self.scan.w = *w;
        self.scan.rem.clear();
        self.scan.rem.extend_from_slice(rem);
        self.scan.last = *last;
        self.scan.start = *start;
        self.offset = *offset;
    }
}

/// A failed recognition: where, why, and which terminals would have been allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stop {
    pub offset: usize,
    pub kind: StopKind,
    pub expected: TermSet,
}

/// How far the viability check follows a lexeme that could still be cut back to an earlier
/// accepting length (`1e` may become `1` then `e…`): bytes tried past the current ones, and
/// nested cut-backs.
const CUTBACK_BYTES: usize = 3;
const CUTBACK_NESTING: u32 = 2;

/// Makes `next` (sorted, without repeats) the stacks, unless it is empty: false then, and
/// `stacks` untouched.
fn replace_stacks(stacks: &mut SmallVec<[u32; 4]>, mut next: SmallVec<[u32; 4]>) -> bool {
    next.sort_unstable();
    next.dedup();
    if next.is_empty() {
        return false;
    }
    *stacks = next;
    true
}

/// One session over a language: owns the stack arena and its memos.
pub struct Session<'l> {
    pub lang: &'l Language,
    pub stacks: Stacks,
    /// This session's identity for memos kept outside it, whose entries read its stack ids
    /// (the masker's, [`crate::mask`]): one allocation per session, held as long as it lives.
    identity: Arc<()>,
    /// The stacks one stack becomes when a lexeme with these candidates is handed over
    /// (the per-node memo of contextual resolution).
    shifted: FxHashMap<(u32, TermSet), SmallVec<[u32; 4]>>,
    /// The stored name (and relation key) of each identifier lexeme handed over, by its
    /// bytes.
    words: FxHashMap<SmallVec<[u8; 24]>, Word>,
    /// The folded spellings of a set of names, with or without the column words
    /// ([`Session::dynamic_spellings`]).
    spellings: FxHashMap<(Arc<[Name]>, bool), Spellings>,
    /// Whether the search over cut-backs tries all 256 bytes rather than
    /// [`Session::cutback_bytes`]: the brute-force reference of
    /// [`Session::is_viable_by_every_byte`], off otherwise.
    every_byte: bool,
}

impl<'l> Session<'l> {
    pub fn new(lang: &'l Language) -> Session<'l> {
        Session {
            lang,
            stacks: Stacks::for_rule(lang.sem.rule()),
            identity: Arc::new(()),
            shifted: FxHashMap::default(),
            words: FxHashMap::default(),
            spellings: FxHashMap::default(),
            every_byte: false,
        }
    }

    /// See the field `identity`: a memo outside the session keys its entries by this
    /// allocation and keeps a `Weak` of it, so that no later session can take its address
    /// while the memo holds entries for this one.
    pub(crate) fn identity(&self) -> &Arc<()> {
        &self.identity
    }

    fn fresh_scan(&self, start: usize) -> Scan {
        Scan::fresh(self.lang, start)
    }

    pub fn start(&mut self) -> Config {
        let root = self.stacks.root(&self.lang.table);
        Config {
            stacks: smallvec![root],
            scan: self.fresh_scan(0),
            offset: 0,
        }
    }

    /// `A(κ)`: terminals some stack can take next (end of input included).
    pub fn allowed(&mut self, cfg: &Config) -> TermSet {
        self.allowed_on(&cfg.stacks)
    }

    /// Terminals some stack of `stacks` can take next.
    pub(crate) fn allowed_on(&mut self, stacks: &[u32]) -> TermSet {
        let mut a = TermSet::EMPTY;
        for &s in stacks {
            a = a.union(&self.stacks.allowed(&self.lang.table, s));
        }
        a
    }

    fn stop(&mut self, cfg: &Config, offset: usize, kind: StopKind) -> Stop {
        Stop {
            offset,
            kind,
            expected: self.allowed(cfg),
        }
    }

    /// Hands a finished lexeme with candidates `cands` and bytes `text` to the parser.
    fn emit(
        &mut self,
        cfg: &mut Config,
        cands: TermSet,
        at: usize,
        text: &[u8],
    ) -> Result<(), Stop> {
        if self.emit_text(&mut cfg.stacks, cands, text) {
            Ok(())
        } else {
            Err(self.stop(cfg, at, StopKind::Unexpected(cands)))
        }
    }

    /// Shifts a lexeme with candidates `cands` on `stacks` (contextual resolution: every
    /// candidate some stack can take). False, with `stacks` untouched, when no stack takes
    /// one. Ignored lexemes are not handed over and always succeed.
    pub(crate) fn emit_on(&mut self, stacks: &mut SmallVec<[u32; 4]>, cands: TermSet) -> bool {
        if cands.intersects(&self.lang.terms().skip) {
            return true;
        }
        let table = &self.lang.table;
        let mut next: SmallVec<[u32; 4]> = SmallVec::new();
        for &s in stacks.iter() {
            let shiftable = self.stacks.allowed(table, s).intersect(&cands);
            for t in shiftable.iter() {
                if let Some(n) = self.stacks.shift(table, s, t) {
                    next.push(n);
                }
            }
        }
        replace_stacks(stacks, next)
    }

    /// [`Session::emit_on`] for the language itself: the lexeme's bytes are kept on the
    /// stacks that take it ([`crate::scope`]), and a stack that can take a dynamic terminal
    /// takes it when `text` spells a name visible there. A name that a stack takes as a
    /// column (a column word of the lexicon, or `SCOPED_COL`) is not also an output or
    /// derived column there (same continuations and more, one stack fewer).
    pub(crate) fn emit_text(
        &mut self,
        stacks: &mut SmallVec<[u32; 4]>,
        cands: TermSet,
        text: &[u8],
    ) -> bool {
        let lang = self.lang;
        let sem = &lang.sem;
        if !sem.enabled() {
            return self.emit_on(stacks, cands);
        }
        if cands.intersects(&lang.terms().skip) {
            return true;
        }
        let shapes = self.dynamic_shapes(text);
        let word = self.word_of(text);
        let table = &lang.table;
        let mut next: SmallVec<[u32; 4]> = SmallVec::new();
        for &s in stacks.iter() {
            let a = self.stacks.allowed(table, s);
            for t in a.intersect(&cands).iter() {
                if let Some(n) = self.stacks.shift_valued(table, sem, s, t, Some(&word)) {
                    next.push(n);
                }
            }
            for t in self.dynamic_takes(s, &cands, text, &shapes).iter() {
                if let Some(n) = self.stacks.shift_valued(table, sem, s, t, Some(&word)) {
                    next.push(n);
                }
            }
        }
        replace_stacks(stacks, next)
    }

    /// The dynamic terminals among `shapes` (those whose lexeme shape `text` has) that the
    /// stack `s` takes for `text` (a lexeme with candidates `cands`): the ones it allows for
    /// which `text` spells a visible name, but for those a column stands in for
    /// ([`crate::scope::Semantics::column_like`]) where the stack takes `text` as a column:
    /// a column word of the lexicon it allows, or a name `SCOPED_COL` spells there.
    fn dynamic_takes(&mut self, s: u32, cands: &TermSet, text: &[u8], shapes: &TermSet) -> TermSet {
        let lang = self.lang;
        let sem = &lang.sem;
        let mut out = TermSet::EMPTY;
        if shapes.is_empty() {
            return out;
        }
        let reserved = |w: &str| lang.dialect.is_reserved(w);
        let allowed = self.stacks.allowed(&lang.table, s);
        let mut a = allowed.intersect(shapes);
        let columns = cands.intersect(&lang.column_terms());
        if allowed.intersects(&columns) {
            a = a.minus(&sem.column_like());
        }
        if let Some(t) = sem.scoped_col().filter(|&t| a.contains(t)) {
            let names = self.stacks.visible(sem, s, t);
            if names.iter().any(|n| spells(text, n, &reserved)) {
                out.insert(t);
                a = a.minus(&sem.column_like());
            }
            a.remove(t);
        }
        for t in a.iter() {
            let names = self.stacks.visible(sem, s, t);
            if names.iter().any(|n| spells(text, n, &reserved)) {
                out.insert(t);
            }
        }
        out
    }

    /// The dynamic terminals a lexeme with bytes `text` may be: those of its shape.
    fn dynamic_shapes(&self, text: &[u8]) -> TermSet {
        let lang = self.lang;
        if !lang.sem.enabled() {
            return TermSet::EMPTY;
        }
        lang.dfa()
            .accept(lang.dfa().run(text))
            .intersect(&lang.terms().dynamic_all)
    }

    /// The stored name of an identifier lexeme and its relation key, memoised by its bytes.
    fn word_of(&mut self, text: &[u8]) -> Word {
        if let Some(w) = self.words.get(text) {
            return w.clone();
        }
        let w = Word {
            name: stored_of(text),
            key: stored_key(text),
        };
        self.words.insert(SmallVec::from_slice(text), w.clone());
        w
    }

    /// Every name the next token could spell as a dynamic terminal, in each spelling it
    /// may take (folded), per stack of `cfg`: the names the values of the stack hold and
    /// its range variables' (qualifiers), which a lexeme anywhere in the token may spell;
    /// and, where a qualifier is on top (or a qualifier and its dot), the columns it may be
    /// followed by, which only a lexeme right after its dot may. A column or output name
    /// that is a column word of the lexicon is left out (see [`Session::emit_text`]): not a
    /// qualifier, nor a qualifier's column. A name the token itself introduces, or the
    /// lexeme in progress does, is usable only after a keyword (`ORDER BY`, `WHERE`, `ON`,
    /// `AS (SELECT`, ...), so a token using it holds two names
    /// ([`crate::trie::starts::TokenStarts::multi_using_own`]).
    pub(crate) fn dynamic_names(&mut self, cfg: &Config) -> DynamicNames {
        let mut out = DynamicNames::default();
        let lang = self.lang;
        for &s in &cfg.stacks {
            // Where bare columns are scoped, a column word of the lexicon is no column on
            // a stack after FROM: the language without the names does not allow it there.
            let column_like = lang.sem.scoped_col().is_none();
            for (names, column_like) in [
                (self.stacks.names_on(&lang.sem, s), column_like),
                (self.stacks.range_names_on(s), false),
            ] {
                if !names.is_empty() {
                    out.anywhere.push(self.spellings_of(names, column_like));
                }
            }
            let columns = self.stacks.qualified_columns_on(&lang.sem, s);
            if !columns.is_empty() {
                let dot = lang.sem.dot_to_come(self.stacks.state(s));
                out.qualified.push((self.spellings_of(columns, false), dot));
            }
        }
        out
    }

    /// The folded spellings of `names`, memoised; without the column words of the lexicon
    /// when `column_like`.
    fn spellings_of(&mut self, names: Arc<[Name]>, column_like: bool) -> Spellings {
        let key = (names, column_like);
        if let Some(sp) = self.spellings.get(&key) {
            return sp.clone();
        }
        let lang = self.lang;
        let reserved = |w: &str| lang.dialect.is_reserved(w);
        let columns = lang.column_terms();
        let mut sp: Vec<Vec<u8>> = Vec::new();
        for n in key.0.iter() {
            let q = crate::lexicon::quoted(n);
            if column_like
                && lang
                    .words
                    .accept(lang.words.walk(q.as_bytes()))
                    .intersects(&columns)
            {
                continue;
            }
            sp.push(q.to_ascii_lowercase().into_bytes());
            if crate::lexicon::spells_unquoted(n, &reserved) {
                sp.push(n.as_bytes().to_vec());
            }
        }
        sp.sort_unstable();
        sp.dedup();
        let sp: Spellings = sp.into();
        self.spellings.insert(key, sp.clone());
        sp
    }

    /// Whether a stack of `cfg` takes a dynamic terminal for the lexeme in progress as it
    /// would be handed over now (its longest accepted prefix).
    pub(crate) fn pending_is_dynamic(&mut self, cfg: &Config) -> bool {
        let Some((len, cands)) = cfg.scan.last else {
            return false;
        };
        let text = &cfg.scan.rem[..len as usize];
        let shapes = self.dynamic_shapes(text);
        if shapes.is_empty() {
            return false;
        }
        let text: SmallVec<[u8; 24]> = SmallVec::from_slice(text);
        cfg.stacks
            .iter()
            .any(|&s| !self.dynamic_takes(s, &cands, &text, &shapes).is_empty())
    }

    /// Bytes that end the lexeme in progress (no terminal continues it with them) and are
    /// not refused there for splitting a word; all false when none is in progress.
    pub(crate) fn ending_bytes(&mut self, cfg: &Config) -> [bool; 256] {
        let mut out = [false; 256];
        let lang = self.lang;
        let scan = &cfg.scan;
        let Some((len, cands)) = scan.last else {
            return out;
        };
        let len = len as usize;
        let mut relation: Option<bool> = None;
        for b in 0..=255u8 {
            let q2 = if scan.q == DEAD {
                DEAD
            } else {
                lang.dfa().next(scan.q, b)
            };
            let w2 = if lang.words.is_separator(scan.w, b) {
                let rel = *relation.get_or_insert_with(|| self.relation_expected(&cfg.stacks));
                if rel {
                    lang.words.step(scan.w, b)
                } else {
                    OFF
                }
            } else {
                lang.words.step(scan.w, b)
            };
            let next = scan.rem.get(len).copied().unwrap_or(b);
            out[usize::from(b)] =
                lang.live(q2, w2).is_empty() && !splits(lang, &cands, scan.rem[len - 1], next);
        }
        out
    }

    /// The configuration after the lexeme in progress ends on a byte that continues no
    /// terminal (its longest accepted prefix handed over, the rest scanned again), when
    /// that reads the dynamic lexicon: a stack takes a dynamic terminal for it, or it is a
    /// relation a stack takes (whose columns a bare reference may name once it is in
    /// scope, and no stack holds yet), or a name of `names` may begin in the rest. `None`
    /// otherwise, or when no stack takes it.
    pub(crate) fn lexeme_end(&mut self, cfg: &Config, names: &DynamicNames) -> Option<Config> {
        let (len, cands) = cfg.scan.last?;
        let len = len as usize;
        let relation = self.lang.sem.scoped_col().is_some() && {
            let r = cands.intersect(&self.lang.terms().relation);
            !r.is_empty() && self.allowed_on(&cfg.stacks).intersects(&r)
        };
        let dynamic = relation || self.pending_is_dynamic(cfg);
        let (text, tail) = cfg.scan.rem.split_at(len);
        let tail_name = (0..tail.len()).any(|i| {
            let part = &tail[i..];
            crate::trie::starts::starts_at(tail, i)
                && names
                    .all()
                    .any(|n| n.len() > part.len() && n[..part.len()].eq_ignore_ascii_case(part))
        });
        if !dynamic && !tail_name {
            return None;
        }
        let mut c = cfg.clone();
        let text: SmallVec<[u8; 24]> = SmallVec::from_slice(text);
        let tail: SmallVec<[u8; 24]> = SmallVec::from_slice(tail);
        if !self.emit_text(&mut c.stacks, cands, &text) {
            return None;
        }
        c.offset = cfg.scan.start + len;
        c.scan = self.fresh_scan(c.offset);
        self.feed(&mut c, &tail).ok()?;
        Some(c)
    }

    /// Whether the lexeme in progress of `scan` is still the prefix of a name a dynamic
    /// terminal may spell on one of `stacks`.
    fn dynamic_live(&mut self, stacks: &[u32], scan: &Scan) -> bool {
        let lang = self.lang;
        let sem = &lang.sem;
        if !sem.enabled() || scan.rem.is_empty() {
            return false;
        }
        let shapes = lang.dfa().live(scan.q).intersect(&lang.terms().dynamic_all);
        if shapes.is_empty() {
            return false;
        }
        let reserved = |w: &str| lang.dialect.is_reserved(w);
        for &s in stacks {
            let a = self.stacks.allowed(&lang.table, s).intersect(&shapes);
            for t in a.iter() {
                let names = self.stacks.visible(sem, s, t);
                if names.iter().any(|n| spells_prefix(&scan.rem, n, &reserved)) {
                    return true;
                }
            }
        }
        false
    }

    /// `cfg` with every stack replaced by its core (no values): what the mask walks, which
    /// read the language without the dynamic lexicon, start from.
    pub(crate) fn static_view(&self, cfg: &Config) -> Config {
        let mut stacks: SmallVec<[u32; 4]> =
            cfg.stacks.iter().map(|&s| self.stacks.core(s)).collect();
        stacks.sort_unstable();
        stacks.dedup();
        Config {
            stacks,
            scan: cfg.scan.clone(),
            offset: cfg.offset,
        }
    }

    /// [`Session::emit_on`] through the per-node memo: for the cached mask's class
    /// verdicts, which shift the same few lexemes on the same stacks step after step.
    pub(crate) fn emit_on_memo(&mut self, stacks: &mut SmallVec<[u32; 4]>, cands: TermSet) -> bool {
        if cands.intersects(&self.lang.terms().skip) {
            return true;
        }
        let table = &self.lang.table;
        let mut next: SmallVec<[u32; 4]> = SmallVec::new();
        for &s in stacks.iter() {
            if let Some(after) = self.shifted.get(&(s, cands)) {
                next.extend_from_slice(after);
                continue;
            }
            let mut after: SmallVec<[u32; 4]> = SmallVec::new();
            let shiftable = self.stacks.allowed(table, s).intersect(&cands);
            for t in shiftable.iter() {
                if let Some(n) = self.stacks.shift(table, s, t) {
                    after.push(n);
                }
            }
            next.extend_from_slice(&after);
            self.shifted.insert((s, cands), after);
        }
        replace_stacks(stacks, next)
    }

    /// Feeds bytes; on failure the configuration is left as it was before the failing byte.
    pub fn feed(&mut self, cfg: &mut Config, bytes: &[u8]) -> Result<(), Stop> {
        self.feed_in(cfg, bytes, Dynamic::On)
    }

    /// [`Session::feed`], reading the dynamic lexicon or not.
    pub(crate) fn feed_in(
        &mut self,
        cfg: &mut Config,
        bytes: &[u8],
        dynamic: Dynamic,
    ) -> Result<(), Stop> {
        for &b in bytes {
            let saved = cfg.clone();
            if let Err(e) = self.push_byte_with(cfg, b, dynamic, &mut |_| {}) {
                *cfg = saved;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Pushes one byte without saving the configuration first: on failure `cfg` is left
    /// half-updated and must be discarded (the mask walk pushes on a copy it owns).
    /// `watch` sees, in order, the candidate set of every lexeme handed to the parser
    /// (ignored lexemes are not handed over and not reported) and every dot of a
    /// `schema.table` word that the parser was asked about.
    pub(crate) fn push_byte_with(
        &mut self,
        cfg: &mut Config,
        byte: u8,
        dynamic: Dynamic,
        watch: &mut impl FnMut(Scanned),
    ) -> Result<(), Stop> {
        let lang = self.lang;
        let Config {
            stacks,
            scan,
            offset,
        } = cfg;
        let mut host = Parse {
            session: self,
            stacks,
            watch,
            dynamic,
        };
        let r = scan_byte(lang, scan, offset, byte, &mut host);
        match r {
            Ok(()) => Ok(()),
            Err(ScanStop::Scan { at, kind }) => Err(self.stop(cfg, at, kind)),
            Err(ScanStop::Lexeme { at, refused }) => {
                Err(self.stop(cfg, at, StopKind::Unexpected(refused)))
            }
            // The parser always answers.
            Err(ScanStop::Undecided) => Err(self.stop(cfg, cfg.offset, StopKind::NoLexeme)),
        }
    }

    /// Whether some stack of `stacks` expects a relation next.
    pub(crate) fn relation_expected(&mut self, stacks: &[u32]) -> bool {
        let a = self.allowed_on(stacks);
        self.lang.relation_expected(&a)
    }

    /// Whether some continuation of the bytes fed so far is a sentence.
    pub fn is_viable(&mut self, cfg: &Config) -> bool {
        self.viable_within(cfg, CUTBACK_NESTING, Dynamic::On)
    }

    /// [`Session::is_viable`] by brute force: the search over cut-backs tries every byte,
    /// not one of each class. The reference the classes are tested against; slow.
    pub fn is_viable_by_every_byte(&mut self, cfg: &Config) -> bool {
        self.every_byte = true;
        let v = self.viable_within(cfg, CUTBACK_NESTING, Dynamic::On);
        self.every_byte = false;
        v
    }

    /// [`Session::is_viable`], reading the dynamic lexicon or not.
    pub(crate) fn is_viable_in(&mut self, cfg: &Config, dynamic: Dynamic) -> bool {
        self.viable_within(cfg, CUTBACK_NESTING, dynamic)
    }

    fn viable_within(&mut self, cfg: &Config, nesting: u32, dynamic: Dynamic) -> bool {
        if cfg.stacks.is_empty() {
            return false;
        }
        if cfg.scan.rem.is_empty() {
            // The projected grammar is reduced, so every stack the parser reached extends to
            // a sentence, and every terminal has a spelling.
            return true;
        }
        let wanted = self.allowed(cfg).union(&self.lang.terms().skip);
        if self.lang.live(cfg.scan.q, cfg.scan.w).intersects(&wanted) {
            return true;
        }
        if dynamic == Dynamic::On && self.dynamic_live(&cfg.stacks, &cfg.scan) {
            return true;
        }
        match cfg.scan.last {
            Some((len, _)) if (len as usize) < cfg.scan.rem.len() && nesting > 0 => {
                // Whichever byte kills the lexeme, what comes before it is the same: the
                // lexeme cut back and handed over, and its tail scanned afresh.
                let mut cut = cfg.clone();
                if self.cut_back(&mut cut, dynamic).is_err() {
                    return false;
                }
                let bytes = self.cutback_bytes(cfg, &cut, dynamic);
                let at = (cfg.scan.q, cfg.scan.w);
                self.cutback_viable(&cfg.stacks, &cut, &bytes, at, 0, nesting - 1, dynamic)
            }
            _ => false,
        }
    }

    /// The bytes the search over cut-backs tries: one of each class the scanner cannot tell
    /// apart ([`Language::byte_reps`]) and, when it reads the dynamic lexicon, every byte
    /// that a name it may compare a lexeme with holds, in either case, and the quote. Such a
    /// comparison reads the bytes themselves, not their class (`total` and `totbl` scan
    /// alike, but only one spells a name the statement introduced); a byte outside them
    /// spells no such name, whichever of its class it is. The names are those on the
    /// stacks before and after the cut; the lexeme in progress's own bytes are added, for
    /// a name its tail may introduce.
    fn cutback_bytes(&mut self, cfg: &Config, cut: &Config, dynamic: Dynamic) -> Vec<u8> {
        let lang = self.lang;
        if self.every_byte {
            return (0..=255).collect();
        }
        let mut bytes = lang.byte_reps.clone();
        if dynamic == Dynamic::Off || !lang.sem.enabled() {
            return bytes;
        }
        let mut extra = [false; 256];
        let mut add = |b: u8| {
            for v in [b, b.to_ascii_lowercase(), b.to_ascii_uppercase()] {
                extra[usize::from(v)] = true;
            }
        };
        add(b'"');
        cfg.scan.rem.iter().for_each(|&b| add(b));
        for &s in cfg.stacks.iter().chain(cut.stacks.iter()) {
            let lists = [
                self.stacks.names_on(&lang.sem, s),
                self.stacks.range_names_on(s),
                self.stacks.qualified_columns_on(&lang.sem, s),
            ];
            for n in lists.iter().flat_map(|l| l.iter()) {
                n.bytes().for_each(&mut add);
            }
        }
        for &r in &lang.byte_reps {
            extra[usize::from(r)] = false;
        }
        bytes.extend((0..=255u8).filter(|&b| extra[usize::from(b)]));
        bytes
    }

    /// The lexeme in progress can only help by being cut back to its last accepting length,
    /// which happens when a later byte kills it. Tries every such byte of `bytes`
    /// ([`Session::cutback_bytes`]) after every short non-accepting detour. `fed` is the
    /// configuration once the lexeme is cut back ([`Session::cut_back`]) and the detour so
    /// far (`depth` bytes) fed after it; `(q, w)` is where the uncut lexeme's detour
    /// stands, on `stacks`. The detour is fed a byte at a time, so a detour that fails
    /// after the cut is dropped with every extension of it (feeding more bytes cannot
    /// undo a failure): a lexeme that dies only on a pair of bytes (a block comment on
    /// `/*`) would otherwise have every short detour through it tried in full.
    #[allow(clippy::too_many_arguments)]
    fn cutback_viable(
        &mut self,
        stacks: &[u32],
        fed: &Config,
        bytes: &[u8],
        (q, w): (u32, u32),
        depth: usize,
        nesting: u32,
        dynamic: Dynamic,
    ) -> bool {
        let lang = self.lang;
        for &b in bytes {
            let q2 = if q == DEAD {
                DEAD
            } else {
                lang.dfa().next(q, b)
            };
            let w2 = if lang.words.is_separator(w, b) && !self.relation_expected(stacks) {
                OFF
            } else {
                lang.words.step(w, b)
            };
            let kills = lang.live(q2, w2).is_empty();
            let detour = !kills
                && lang.candidates(q2, w2).is_empty()
                && depth < CUTBACK_BYTES
                && lang.dfa().dies_within(q2) < (CUTBACK_BYTES - depth) as u32;
            if !kills && !detour {
                continue;
            }
            let mut c = fed.clone();
            if self.feed_in(&mut c, &[b], dynamic).is_err() {
                continue;
            }
            let ok = if kills {
                self.viable_within(&c, nesting, dynamic)
            } else {
                self.cutback_viable(stacks, &c, bytes, (q2, w2), depth + 1, nesting, dynamic)
            };
            if ok {
                return true;
            }
        }
        false
    }

    /// Cuts the lexeme in progress back to its last accepting length, hands that lexeme
    /// over, and scans the rest afresh: what the scanner does when a byte kills the lexeme,
    /// without the byte. The lexeme must be longer than that length. On failure `c` must
    /// be dropped.
    fn cut_back(&mut self, c: &mut Config, dynamic: Dynamic) -> Result<(), Stop> {
        let start = c.scan.start;
        let Some((len, cands)) = c.scan.last else {
            return Err(self.stop(c, start, StopKind::NoLexeme));
        };
        let len = len as usize;
        if splits(self.lang, &cands, c.scan.rem[len - 1], c.scan.rem[len]) {
            return Err(self.stop(c, start, StopKind::SplitWord));
        }
        let tail: SmallVec<[u8; 24]> = SmallVec::from_slice(&c.scan.rem[len..]);
        let text: SmallVec<[u8; 24]> = SmallVec::from_slice(&c.scan.rem[..len]);
        let taken = match dynamic {
            Dynamic::On => self.emit_text(&mut c.stacks, cands, &text),
            Dynamic::Off => self.emit_on(&mut c.stacks, cands),
        };
        if !taken {
            return Err(self.stop(c, start, StopKind::Unexpected(cands)));
        }
        c.offset = start + len;
        c.scan = self.fresh_scan(c.offset);
        self.feed_in(c, &tail, dynamic)
    }

    /// Ends the input: finishes the lexeme in progress and asks whether ACCEPT is reached.
    pub fn finish(&mut self, cfg: &Config) -> Result<(), Stop> {
        let mut c = cfg.clone();
        loop {
            if c.scan.rem.is_empty() {
                break;
            }
            let start = c.scan.start;
            let now = self.lang.candidates(c.scan.q, c.scan.w);
            if !now.is_empty() {
                let text = c.scan.rem.clone();
                self.emit(&mut c, now, start, &text)?;
                c.scan = self.fresh_scan(c.offset);
                break;
            }
            self.cut_back(&mut c, Dynamic::On)?;
        }
        let table = &self.lang.table;
        for &s in &c.stacks {
            if self.stacks.accepts(table, s) {
                return Ok(());
            }
        }
        Err(self.stop(&c, c.offset, StopKind::Incomplete))
    }

    pub fn is_complete(&mut self, cfg: &Config) -> bool {
        self.finish(cfg).is_ok()
    }

    /// `viable(prefix)`: some continuation of `prefix` is a sentence of the language.
    pub fn viable(&mut self, prefix: &[u8]) -> bool {
        let mut c = self.start();
        self.feed(&mut c, prefix).is_ok() && self.is_viable(&c)
    }

    /// `complete(text)`: `text` is a sentence of the language.
    pub fn complete(&mut self, text: &[u8]) -> bool {
        self.check(text).is_ok()
    }

    /// Recognizes a whole statement, saying where and why it fails.
    pub fn check(&mut self, text: &[u8]) -> Result<(), Stop> {
        let mut c = self.start();
        self.feed(&mut c, text)?;
        self.finish(&c)
    }

    /// The lexemes of the statement `text` as the scanner hands them to the parser
    /// (ignored ones left out), in order: what PostgreSQL's own lexer must agree with
    /// (docs/security.md). An error when `text` is not a sentence.
    pub fn lexemes(&mut self, text: &[u8]) -> Result<Vec<Lexeme>, Stop> {
        self.check(text)?;
        let mut c = self.start();
        let mut out = Vec::new();
        // A space after a sentence ends its last lexeme (never a string or a quoted name
        // left open: the sentence is complete) and is itself ignored.
        for &b in text.iter().chain(b" ") {
            self.push_byte_with(&mut c, b, Dynamic::On, &mut |e| {
                if let Scanned::Lexeme { cands, at, len } = e {
                    out.push(Lexeme {
                        start: at,
                        end: at + len,
                        terms: cands,
                    });
                }
            })?;
        }
        Ok(out)
    }
}

/// Folded spellings of names, sorted and distinct.
pub(crate) type Spellings = Arc<[Vec<u8>]>;

/// The names a next token could spell as a dynamic terminal ([`Session::dynamic_names`]),
/// folded, as lists of sorted, distinct spellings.
#[derive(Default)]
pub(crate) struct DynamicNames {
    /// Names a lexeme anywhere in the token may spell (per stack).
    pub anywhere: SmallVec<[Spellings; 4]>,
    /// Columns a qualified reference may name, where a qualifier is on top of a stack (its
    /// dot still to come: `true`) or a qualifier and its dot: only a lexeme right after
    /// that dot may spell them.
    pub qualified: SmallVec<[(Spellings, bool); 2]>,
}

impl DynamicNames {
    /// Every spelling, of both kinds.
    pub fn all(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.anywhere
            .iter()
            .chain(self.qualified.iter().map(|(n, _)| n))
            .flat_map(|n| n.iter().map(Vec::as_slice))
    }
}

/// One lexeme of a statement: its byte range and its candidate terminals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lexeme {
    pub start: usize,
    pub end: usize,
    pub terms: TermSet,
}

//! The exact next-token mask `M(κ)`: every non-special token whose bytes keep the output a
//! viable prefix, plus EOS iff the output is a complete sentence.
//!
//! [`Masker::mask`] walks the token trie depth first, carrying one recognizer configuration
//! per depth. A byte the recognizer refuses, or one that leaves a prefix no sentence
//! extends, prunes the node's whole subtree (viability is monotone under extension). EOS is
//! decided only by [`Session::finish`], never by the trie; special tokens are never set.
//!
//! Each allowed token is classified for the cache of later work:
//!
//! * **CI** (context-independent): its verdict is a function of the remainder `r` (the
//!   lexeme in progress at `κ`) and the allowed set `A(σ)` alone, so it may be cached under
//!   `(r, A)`. Two cases: (a) feeding its bytes hands no lexeme to the parser (the bytes stay
//!   inside the current lexeme, or only ignored lexemes end) and the lexeme in progress can
//!   still become a terminal in `A` or an ignored one (or none is in progress): `yees`
//!   after `emplo`, `y`, `(`; (b) it hands exactly one lexeme to the parser, which takes it
//!   iff one of its candidates is in `A`, and what follows can only be, or still become, an
//!   ignored lexeme, which is viable on any stack: `yees ` after `emplo`.
//! * **CD** (context-dependent): everything else, i.e. the token completes a lexeme and goes
//!   on (`'),'`, `1;`, ` FROM` after a pending word), or its viability needed the recognizer
//!   to cut the lexeme in progress back to an earlier accepting length. Its verdict reads
//!   the stacks after the emissions. CD tokens are grouped into verdict-equivalence classes
//!   by [`CdKey`].
//! * **Exact**, a kind of CD: the token hands a lexeme over and then reads the dot of a
//!   `schema.table` word, whose scan depends on the stacks after that lexeme (see
//!   [`crate::recognizer`]). No walk without the stacks can follow it, so its verdict is the
//!   full check of its spelling, one class per token node. The cache's walk files every token
//!   below such a node this way, and so does the walk here, so that both give equal classes.

use std::sync::{Arc, Weak};

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::cache::key::scope_of;
use crate::cache::walk::{self, WalkStart};
use crate::cache::{CacheKey, CacheStats, CdCandidates, MaskCache, Namespace, Position, Scope};
use crate::cd_class::{CdClass, CdKey};
use crate::language::Language;
use crate::recognizer::{Config, Dynamic, DynamicNames, Scanned, Session};
use crate::scan::TrailKey;
use crate::termset::TermSet;
use crate::trie::names::{spelling_names, Lead};
use crate::trie::TokenTrie;

/// The longest forced run a singleton mask extends to.
pub const FORCED_MAX: usize = 16;

/// One step's mask over the ids of a vocabulary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mask {
    /// Bit `i % 32` of word `i / 32` is set when id `i` may be sampled. Special ids are never
    /// set, except EOS when `eos` is true.
    pub bits: Vec<u32>,
    /// Non-special ids allowed (EOS not counted).
    pub allowed: u32,
    /// Non-special ids blocked; `allowed + blocked` is the number of non-special ids.
    pub blocked: u32,
    /// EOS is allowed: the output so far is a complete sentence.
    pub eos: bool,
    /// When exactly one id is allowed and EOS is not, the run of ids forced from here:
    /// the first is that id, each next one the single id allowed after the ones before it,
    /// at most [`FORCED_MAX`].
    pub forced: Option<Vec<u32>>,
    /// Allowed ids that are context-independent (see the module documentation).
    pub ci: u32,
    /// Allowed ids that are context-dependent; `ci + cd == allowed`.
    pub cd: u32,
    /// The CD ids, grouped by verdict-equivalence class, classes in order of first
    /// appearance in the walk, ids ascending within a class.
    pub cd_classes: Vec<CdClass>,
    /// Trie nodes the walk pushed a byte for (its cost; 0 for the oracle).
    pub visited: u32,
}

impl Mask {
    /// An all-blocked mask over `n_ids` ids of which `n_special` are special.
    pub fn empty(n_ids: usize, n_special: usize) -> Mask {
        Mask {
            bits: vec![0; n_ids.div_ceil(32)],
            allowed: 0,
            blocked: (n_ids - n_special) as u32,
            eos: false,
            forced: None,
            ci: 0,
            cd: 0,
            cd_classes: Vec::new(),
            visited: 0,
        }
    }

    /// Makes `self` [`Mask::empty`] again, keeping its buffers.
    fn reset(&mut self, n_ids: usize, n_special: usize) {
        self.bits.clear();
        self.bits.resize(n_ids.div_ceil(32), 0);
        self.allowed = 0;
        self.blocked = (n_ids - n_special) as u32;
        self.eos = false;
        self.forced = None;
        self.ci = 0;
        self.cd = 0;
        self.cd_classes.clear();
        self.visited = 0;
    }

    #[inline]
    pub fn contains(&self, id: u32) -> bool {
        self.bits
            .get(id as usize / 32)
            .is_some_and(|w| w & (1 << (id % 32)) != 0)
    }

    #[inline]
    pub(crate) fn set(&mut self, id: u32) {
        self.bits[id as usize / 32] |= 1 << (id % 32);
    }

    /// Removes the non-special `id` from the allowed set (a rewind repair's ban); `false`,
    /// and no change, when it was not allowed. The counts and the CD classes follow it;
    /// a forced run no longer holds.
    pub fn remove(&mut self, id: u32) -> bool {
        if !self.contains(id) {
            return false;
        }
        self.bits[id as usize / 32] &= !(1 << (id % 32));
        self.allowed = self.allowed.saturating_sub(1);
        self.blocked += 1;
        self.forced = None;
        let class = self
            .cd_classes
            .iter()
            .position(|c| c.ids.binary_search(&id).is_ok());
        match class {
            Some(k) => {
                let c = &mut self.cd_classes[k];
                c.ids = c.ids.iter().copied().filter(|&i| i != id).collect();
                if c.ids.is_empty() {
                    self.cd_classes.remove(k);
                }
                self.cd = self.cd.saturating_sub(1);
            }
            None => self.ci = self.ci.saturating_sub(1),
        }
        true
    }

    /// Every id whose bit is set, ascending.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.bits.iter().enumerate().flat_map(|(w, &word)| {
            let mut bits = word;
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let b = bits.trailing_zeros();
                    bits &= bits - 1;
                    w as u32 * 32 + b
                })
            })
        })
    }

    /// The ids set here but not in `other`, and those set in `other` but not here.
    pub fn diff(&self, other: &Mask) -> (Vec<u32>, Vec<u32>) {
        let mut only_here = Vec::new();
        let mut only_there = Vec::new();
        let n = self.bits.len().max(other.bits.len());
        for w in 0..n {
            let a = self.bits.get(w).copied().unwrap_or(0);
            let b = other.bits.get(w).copied().unwrap_or(0);
            for bit in 0..32 {
                let m = 1u32 << bit;
                let id = w as u32 * 32 + bit;
                if a & m != 0 && b & m == 0 {
                    only_here.push(id);
                } else if b & m != 0 && a & m == 0 {
                    only_there.push(id);
                }
            }
        }
        (only_here, only_there)
    }

    /// The single allowed id, when exactly one is allowed and EOS is not.
    pub fn singleton(&self) -> Option<u32> {
        if self.eos || self.allowed != 1 {
            return None;
        }
        self.ids().next()
    }
}

/// Computes masks over one token trie; owns the walk's scratch space so that repeated
/// masks allocate little, and its memo of cut-back verdicts, per session (one masker serves
/// the sessions of many generations). Built [`Masker::with_cache`], it computes the same
/// masks through the shared mask cache.
pub struct Masker {
    trie: Arc<TokenTrie>,
    cache: Option<CacheState>,
    /// `frames[d]`: the configuration after the first `d` bytes of the current path.
    frames: Vec<Config>,
    /// Candidate sets emitted along the current path.
    log: Vec<TermSet>,
    /// `log_len[d]`: length of `log` at depth `d`.
    log_len: Vec<usize>,
    /// `exact[d]`: the path to depth `d` read the dot of a `schema.table` word after handing
    /// a lexeme over, so every token below is [`CdKey::Exact`].
    exact: Vec<bool>,
    /// Subtree ends of the nodes on the current path, root excluded.
    ends: Vec<usize>,
    /// The masks of a forced run's later steps, and the run itself, kept between calls so
    /// that a warm step allocates nothing.
    run_mask: Option<Mask>,
    run: Vec<u32>,
    /// Scratch of [`Masker::add_dynamic`]: the tokens to check in full.
    dynamic_nodes: Vec<u32>,
    /// Scratch of [`Masker::add_dynamic`]: where names may start in which tokens.
    dynamic_starts: Vec<(u32, u16)>,
    /// Scratch of [`Masker::add_dynamic`]: the tokens allowed without a check.
    dynamic_direct: Vec<u32>,
    /// Scratch of [`Masker::add_dynamic`]: the tokens that go on with the lexeme in progress.
    dynamic_going_on: Vec<u32>,
    /// The verdicts of CD classes that only a cut back can save, per session.
    cutback: CutbackMemo,
    /// Per language (by fingerprint): the tokens that may bring a relation into scope and
    /// name its columns bare after it ([`introducing_tokens`]).
    introducing: FxHashMap<[u8; 16], Arc<[u32]>>,
}

/// The first allowed id of a walk and the configuration after it, kept for forced runs.
type First = Option<(u32, Config)>;

/// The first allowed id of a walk and its trie node.
type FirstNode = Option<(u32, usize)>;

impl Masker {
    pub fn new(trie: Arc<TokenTrie>) -> Masker {
        Masker {
            trie,
            cache: None,
            frames: Vec::new(),
            log: Vec::new(),
            log_len: Vec::new(),
            exact: Vec::new(),
            ends: Vec::new(),
            run_mask: None,
            run: Vec::new(),
            dynamic_nodes: Vec::new(),
            dynamic_starts: Vec::new(),
            dynamic_direct: Vec::new(),
            dynamic_going_on: Vec::new(),
            cutback: CutbackMemo::default(),
            introducing: FxHashMap::default(),
        }
    }

    /// A masker whose masks go through `cache` (equal, bit for bit, to the uncached ones
    /// except for `visited`).
    pub fn with_cache(trie: Arc<TokenTrie>, cache: Arc<MaskCache>) -> Masker {
        let mut m = Masker::new(trie);
        m.cache = Some(CacheState {
            cache,
            ns: None,
            scopes: FxHashMap::default(),
            stats: CacheStats::default(),
            after: Vec::new(),
        });
        m
    }

    pub fn trie(&self) -> &Arc<TokenTrie> {
        &self.trie
    }

    /// Walks ahead the tails every statement of `lang` meets, in its namespace of the
    /// cache ([`MaskCache::warm`]); returns how many. Without a cache, nothing.
    pub fn warm(&self, lang: &Language) -> usize {
        self.cache
            .as_ref()
            .map_or(0, |c| c.cache.warm(lang, &self.trie))
    }

    /// This masker's cache hits and misses (`None` without a cache).
    pub fn cache_stats(&self) -> Option<CacheStats> {
        self.cache.as_ref().map(|c| c.stats)
    }

    /// `M(κ)` at `cfg`, with its forced run when it is a singleton.
    pub fn mask(&mut self, session: &mut Session<'_>, cfg: &Config) -> Mask {
        let mut m = self.empty_mask();
        self.mask_into(session, cfg, &mut m);
        m
    }

    /// [`Masker::mask`] into `out`, reusing its buffers (and the masker's): with the cache,
    /// a hit allocates nothing once the buffers have grown to their working size. `out` is
    /// any mask, of any vocabulary; it is overwritten.
    pub fn mask_into(&mut self, session: &mut Session<'_>, cfg: &Config, out: &mut Mask) {
        let mut run = match out.forced.take() {
            Some(run) => run,
            None => std::mem::take(&mut self.run),
        };
        run.clear();
        let mut first = self.walk_into(session, cfg, out);
        if out.singleton().is_none() {
            self.run = run;
            return;
        }
        let mut next = self.run_mask.take().unwrap_or_else(|| self.empty_mask());
        while let Some((id, after)) = first.take() {
            run.push(id);
            if run.len() == FORCED_MAX {
                break;
            }
            let f = self.walk_into(session, &after, &mut next);
            if next.singleton().is_some() {
                first = f;
            }
        }
        self.run_mask = Some(next);
        out.forced = Some(run);
    }

    /// `M(κ)` without the forced run.
    pub fn mask_once(&mut self, session: &mut Session<'_>, cfg: &Config) -> Mask {
        let mut m = self.empty_mask();
        self.walk_into(session, cfg, &mut m);
        m
    }

    fn empty_mask(&self) -> Mask {
        Mask::empty(self.trie.n_ids(), self.trie.special_ids().len())
    }

    fn walk_into(&mut self, session: &mut Session<'_>, cfg: &Config, m: &mut Mask) -> First {
        let trie = self.trie.clone();
        // The language without the dynamic lexicon, from the stacks' cores: a cached entry
        // or a walk, both exact for it; then what the statement's own names add. Without
        // dynamic terminals the cores are the stacks and nothing is added.
        let dynamic = session.lang.sem.enabled();
        let stat;
        let base = if dynamic {
            stat = session.static_view(cfg);
            &stat
        } else {
            cfg
        };
        let mut first = if self.cache.is_some() {
            self.cached(session, base, m)
        } else {
            let (fresh, first) = self.walk_live(session, base);
            *m = fresh;
            first
        };
        if dynamic && session.is_viable(cfg) {
            // The EOS gate reads the names too (`... ORDER BY total` ends there); without
            // them it can only say no where it says yes with them.
            let cut_back = cfg
                .scan
                .last
                .is_some_and(|(len, _)| len as usize != cfg.scan.rem.len());
            if !m.eos
                && (cut_back || session.pending_is_dynamic(cfg))
                && session.finish(cfg).is_ok()
            {
                m.eos = true;
                if let Some(e) = trie.eos_id() {
                    m.set(e);
                }
            }
            if let Some(f) = self.add_dynamic(session, cfg, m) {
                first = first.or(Some(f));
            }
        }
        // Exactly one token: the forced run continues from the configuration after it.
        let id = m.singleton()?;
        let (fid, node) = first?;
        if fid != id {
            return None;
        }
        let mut after = cfg.clone();
        session.feed(&mut after, &trie.spelling(node)).ok()?;
        Some((id, after))
    }

    /// Adds to `m`, the mask at `cfg` of the language without the dynamic lexicon (its EOS
    /// bit already right), the tokens that only the statement's own names allow, as one CD
    /// class ([`CdKey::Dynamic`]); returns the first of them with its node.
    ///
    /// Names change a token's verdict only through a lexeme that spells one, or the prefix
    /// of one, so the rest is as the static mask says (the names only add stacks, and
    /// viability is existential over stacks). Two kinds of token can read them:
    ///
    /// * a token whose first byte ends the lexeme in progress, when that lexeme is a name
    ///   some stack takes (or a name may begin in what a cut back scans again): the scan
    ///   hands the lexeme over as the configuration [`Session::lexeme_end`] computes, then
    ///   reads the token from there; so those tokens are exactly the ones of the mask there
    ///   (computed the same way, through the cache) whose first byte ends the lexeme;
    /// * a token in which a lexeme spelling a name (or its prefix, to the token's end) may
    ///   begin, or go on from the lexeme in progress: found by [`crate::trie::starts::TokenStarts`] for every name
    ///   the stacks hold, plus every token in which a name may use one that the lexeme in
    ///   progress or the token itself introduces
    ///   ([`crate::trie::starts::TokenStarts::multi_using_own`]), and each checked in full.
    ///   A token found by where a name begins in it is checked only when a stack may take
    ///   a dynamic terminal there ([`StartGate`]), and one cut short at a lone quote only
    ///   where `QUAL_COL` may follow: the stacks hold range variables' names at every
    ///   position after FROM, and without those two conditions most of the tokens they
    ///   find were checked only to be refused.
    fn add_dynamic(&mut self, session: &mut Session<'_>, cfg: &Config, m: &mut Mask) -> FirstNode {
        let trie = self.trie.clone();
        let starts = trie.starts();
        let names = session.dynamic_names(cfg);
        let mut extra: Vec<u32> = Vec::new();
        let mut first: FirstNode = None;
        if let Some(after) = session.lexeme_end(cfg, &names) {
            let ends = session.ending_bytes(cfg);
            let mut there = self.empty_mask();
            self.walk_into(session, &after, &mut there);
            for id in there.ids() {
                let Some(node) = starts.node_of(id) else {
                    continue;
                };
                if !m.contains(id) && ends[usize::from(starts.first_byte(id))] {
                    m.set(id);
                    extra.push(id);
                    first.get_or_insert((id, node));
                }
            }
        }
        let mut nodes = std::mem::take(&mut self.dynamic_nodes);
        nodes.clear();
        let mut found = std::mem::take(&mut self.dynamic_starts);
        found.clear();
        for n in names.anywhere.iter().flat_map(|n| n.iter()) {
            // A lone quote may begin any name: see below.
            let shortest = if n.first() == Some(&b'"') { 2 } else { 1 };
            starts.matching_starts(n, false, shortest, |node, at| found.push((node, at)));
        }
        let scoped = session.lang.sem.scoped_col().is_some();
        if (scoped || !session.lang.sem.column_words()) && !names.anywhere.is_empty() {
            // A token cut short at a lone quote: the names change its verdict only where no
            // static identifier stands beside a dynamic one. Where a FROM is still to come,
            // COLUMN_NAME stands wherever ALIAS_REF, DERIVED_COL and QUALIFIER may, and every
            // column word has a quoted spelling; QUAL_COL, which stands alone, is searched
            // below; SCOPED_COL stands alone too, where it stands.
            starts.ending_in_quote(|_| true, |node, at| found.push((node, at)));
        }
        let rem = &cfg.scan.rem;
        let direct = self.qualified_candidates(&names, rem, &mut nodes, &mut found);
        // Each start is kept only where a stack may take a dynamic terminal there.
        found.sort_unstable();
        found.dedup();
        let mut gate = StartGate::default();
        for &(node, at) in &found {
            if nodes.last() == Some(&node) {
                continue;
            }
            let ids = trie.ids(node as usize);
            let Some(id0) = ids.iter().next() else {
                continue;
            };
            if m.contains(id0) {
                continue;
            }
            let (before, name) = starts.spelling(node).split_at(usize::from(at));
            if !gate.admits(session, cfg, before) {
                continue;
            }
            if scoped && gate.spells_scoped(session, cfg, before, name) {
                for id in ids.iter() {
                    m.set(id);
                    extra.push(id);
                }
                first.get_or_insert((id0, node as usize));
            } else {
                nodes.push(node);
            }
        }
        self.dynamic_starts = found;
        // Tokens that go on with a name the lexeme in progress begins.
        let mut going_on = std::mem::take(&mut self.dynamic_going_on);
        going_on.clear();
        let anywhere = names.anywhere.iter().flat_map(|n| n.iter());
        for a in 0..rem.len() {
            if !crate::trie::starts::starts_at(rem, a) {
                continue;
            }
            let part = &rem[a..];
            for n in anywhere.clone() {
                if n.len() > part.len() && n[..part.len()].eq_ignore_ascii_case(part) {
                    starts.matching(&n[part.len()..], true, &mut going_on);
                }
            }
        }
        going_on.sort_unstable();
        going_on.dedup();
        for &node in &going_on {
            let ids = trie.ids(node as usize);
            let Some(id0) = ids.iter().next() else {
                continue;
            };
            if m.contains(id0) {
                continue;
            }
            if scoped && goes_on_scoped(session, cfg, starts.spelling(node)) {
                for id in ids.iter() {
                    m.set(id);
                    extra.push(id);
                }
                first.get_or_insert((id0, node as usize));
            } else {
                nodes.push(node);
            }
        }
        self.dynamic_going_on = going_on;
        starts.multi_using_own(rem, &mut nodes);
        if scoped {
            // A relation the token itself (or the lexeme in progress it goes on with) brings
            // into scope: its columns are on no stack yet.
            let lang = session.lang;
            let intro = self
                .introducing
                .entry(lang.fingerprint)
                .or_insert_with(|| introducing_tokens(lang, &trie))
                .clone();
            nodes.extend_from_slice(&intro);
        }
        nodes.sort_unstable();
        nodes.dedup();
        // Tokens that go on spelling a qualifier's column, unquoted, after what the stacks
        // take: allowed as they are (see `qualified_candidates`).
        for &node in &direct {
            let ids = trie.ids(node as usize);
            let Some(id0) = ids.iter().next() else {
                continue;
            };
            if m.contains(id0) {
                continue;
            }
            for id in ids.iter() {
                m.set(id);
                extra.push(id);
            }
            first.get_or_insert((id0, node as usize));
        }
        for &node in &nodes {
            let ids = trie.ids(node as usize);
            let Some(id0) = ids.iter().next() else {
                continue;
            };
            if m.contains(id0) {
                continue;
            }
            let mut c = cfg.clone();
            if session.feed(&mut c, starts.spelling(node)).is_ok() && session.is_viable(&c) {
                for id in ids.iter() {
                    m.set(id);
                    extra.push(id);
                }
                first.get_or_insert((id0, node as usize));
            }
        }
        self.dynamic_direct = direct;
        self.dynamic_nodes = nodes;
        if extra.is_empty() {
            return None;
        }
        extra.sort_unstable();
        let k = extra.len() as u32;
        m.cd += k;
        m.allowed += k;
        m.blocked -= k;
        m.cd_classes.push(CdClass {
            key: Arc::new(CdKey::Dynamic),
            ids: extra.into(),
        });
        first
    }

    /// The tokens a qualifier's columns may allow, where a qualifier (or a qualifier and its
    /// dot) is on top of a stack: only a lexeme right after that dot may spell one, so
    /// they are found by a walk of the token trie along the columns
    /// ([`crate::trie::names::spelling_names`]), in time proportional to the tokens that
    /// match (a wide relation has many columns), and nowhere else in a token.
    ///
    /// Returns the tokens allowed as they are: when nothing but blanks is in progress (or
    /// the dot, or the column itself, unquoted), a token of blanks, the dot if it is still
    /// to come, and the beginning of an unquoted spelling of a column (or, after a column in
    /// progress, what goes on with it) leaves a lexeme in progress that is a prefix of a name
    /// `QUAL_COL` takes on that stack: viable, as [`Session::is_viable`] finds it. The other
    /// candidates (quoted, or ending a column, or after a comment in progress) go to
    /// `nodes`, to be checked in full; those where a comment ends in the token, then blanks,
    /// before a column begins go to `found`, to pass the [`StartGate`] first.
    fn qualified_candidates(
        &mut self,
        names: &DynamicNames,
        rem: &[u8],
        nodes: &mut Vec<u32>,
        found: &mut Vec<(u32, u16)>,
    ) -> Vec<u32> {
        let mut direct = std::mem::take(&mut self.dynamic_direct);
        direct.clear();
        let trie = self.trie.clone();
        let starts = trie.starts();
        let blank = rem.iter().all(|b| b.is_ascii_whitespace());
        // A comment in progress, or what may become one.
        let comment =
            rem.starts_with(b"/*") || rem.starts_with(b"--") || rem == b"/" || rem == b"-";
        for (list, dot) in &names.qualified {
            let spelled: Vec<&[u8]> = list.iter().map(Vec::as_slice).collect();
            if blank {
                let lead = Lead { dot: *dot };
                spelling_names(&trie, &spelled, Some(lead), &mut direct, nodes);
            } else if comment {
                let mut all = std::mem::take(nodes);
                spelling_names(&trie, &spelled, Some(Lead { dot: *dot }), nodes, &mut all);
                nodes.append(&mut all);
            } else if *dot && rem == b"." {
                let lead = Lead { dot: false };
                spelling_names(&trie, &spelled, Some(lead), &mut direct, nodes);
            } else if !*dot {
                // The column in progress: the tokens that go on with it.
                let rests: Vec<&[u8]> = spelled
                    .iter()
                    .filter(|n| n.len() > rem.len() && n[..rem.len()].eq_ignore_ascii_case(rem))
                    .map(|n| &n[rem.len()..])
                    .collect();
                if rem.first() == Some(&b'"') {
                    // A quoted name's case is its own: the fold does not decide it.
                    let mut all = std::mem::take(nodes);
                    spelling_names(&trie, &rests, None, nodes, &mut all);
                    nodes.append(&mut all);
                } else {
                    spelling_names(&trie, &rests, None, &mut direct, nodes);
                }
                continue;
            }
            // A comment that ends in the token (and opens there, unless one is in progress)
            // before the column.
            for &(node, at) in starts.after_comment(!comment) {
                if begins_name(&spelled, &starts.spelling(node)[usize::from(at)..]) {
                    found.push((node, at));
                }
            }
        }
        direct
    }

    /// The mask from the cache entry of `cfg`'s key (built and published on a miss) and the
    /// live verdicts of its CD classes.
    fn cached(&mut self, session: &mut Session<'_>, cfg: &Config, m: &mut Mask) -> FirstNode {
        let trie = &*self.trie;
        m.reset(trie.n_ids(), trie.special_ids().len());
        let eos = session.finish(cfg).is_ok();
        if !session.is_viable_in(cfg, Dynamic::Off) {
            m.eos = eos;
            if let (true, Some(e)) = (eos, trie.eos_id()) {
                m.set(e);
            }
            return None;
        }
        let Some(state) = self.cache.as_mut() else {
            let (fresh, first) = self.walk_live(session, cfg);
            *m = fresh;
            return first;
        };
        let lang = session.lang;
        let scope = *state
            .scopes
            .entry(lang.fingerprint)
            .or_insert_with(|| scope_of(lang, trie.fingerprint()));
        let ns = match &state.ns {
            Some(ns) if ns.scope == scope && !ns.is_retired() => ns.clone(),
            _ => {
                let ns = state.cache.namespace(scope);
                state.ns = Some(ns.clone());
                ns
            }
        };
        let allowed = session.allowed(cfg);
        let key = CacheKey::of(lang, scope, &cfg.scan, allowed);
        let at = Position::of(lang, &allowed);
        let found = match ns.get(&key, at) {
            Ok(e) => e,
            // The key's kind is the position's by construction.
            Err(e) => panic!("mask cache: {e}"),
        };
        let hit = found.is_some();
        state.stats.hits += u64::from(hit);
        state.stats.misses += u64::from(!hit);
        state.cache.count(hit);
        let entry = match found {
            Some(e) => e,
            None => {
                let start = WalkStart {
                    lang,
                    scan: &cfg.scan,
                    offset: cfg.offset,
                    allowed,
                };
                let (e, visited) = walk::build(trie, &key, start, true, Some(ns.tails()));
                m.visited = visited;
                let e = match ns.publish(key, e) {
                    Ok(e) => e,
                    // Content addressing: a second payload for a key means the key misses
                    // something the walk read. Serving either would be unsound.
                    Err(e) => panic!("mask cache: {e}"),
                };
                // This step keeps its entry; the next one moves to a fresh namespace if
                // this one was retired.
                state.cache.enforce_budget();
                e
            }
        };
        m.bits.copy_from_slice(&entry.ci_bits);
        m.eos = eos;
        if let (true, Some(e)) = (eos, trie.eos_id()) {
            m.set(e);
        }
        m.ci = entry.ci_count;
        let mut first_node = None;
        // What the stacks take after each distinct emitted sequence: `None` until needed,
        // then `Some(None)` when they refuse it.
        let after = &mut state.after;
        after.clear();
        after.resize(entry.emissions.len(), None);
        for (class, &g) in entry.classes.iter().zip(entry.class_emission.iter()) {
            let pass = match *class.key {
                CdKey::Exact { .. } | CdKey::Dynamic => exact_verdict(session, cfg, &class.rep),
                CdKey::Scanned { .. } => {
                    let a = after[g as usize].get_or_insert_with(|| {
                        wanted_after(session, cfg, &entry.emissions[g as usize])
                    });
                    cd_verdict(session, cfg, class, a, &mut self.cutback)
                }
            };
            if !pass {
                continue;
            }
            for id in class.iter() {
                m.set(id);
            }
            m.cd += class.len() as u32;
            first_node.get_or_insert(class.rep_node);
            m.cd_classes.push(CdClass {
                key: class.key.clone(),
                ids: class.ids().clone(),
            });
        }
        m.allowed = m.ci + m.cd;
        m.blocked -= m.allowed;
        m.singleton()?;
        let n = entry.ci_first.or(first_node)?;
        Some((trie.token(n as usize)?, n as usize))
    }

    /// The mask of the language without the dynamic lexicon at `cfg` (stacks without
    /// values), by a walk of the whole trie, and its first allowed id with its node.
    fn walk_live(&mut self, session: &mut Session<'_>, cfg: &Config) -> (Mask, FirstNode) {
        let trie = &*self.trie;
        let mut out = Out {
            m: Mask::empty(trie.n_ids(), trie.special_ids().len()),
            classes: FxHashMap::default(),
            staged: Vec::new(),
            first: None,
        };
        out.m.eos = session.finish(cfg).is_ok();
        if out.m.eos {
            if let Some(e) = trie.eos_id() {
                out.m.set(e);
            }
        }
        if !session.is_viable_in(cfg, Dynamic::Off) {
            // Monotone: no extension of a dead prefix is viable.
            return out.finish();
        }
        let depth = trie.max_len() + 1;
        if self.frames.len() < depth {
            self.frames.resize(depth, cfg.clone());
            self.log_len.resize(depth, 0);
            self.exact.resize(depth, false);
        }
        let Masker {
            frames,
            log,
            log_len,
            exact,
            ends,
            ..
        } = self;
        frames[0].copy_from(cfg);
        log.clear();
        log_len[0] = 0;
        exact[0] = false;
        ends.clear();
        // The empty spelling (if a token has it) keeps the output as it is: viable, CI.
        out.record(trie, 0, None);
        let skip = session.lang.terms().skip;
        let n = trie.len();
        let mut i = 1;
        while i < n {
            while ends.last().is_some_and(|&e| i >= e) {
                ends.pop();
            }
            let d = ends.len() + 1;
            let (before, rest) = frames.split_at_mut(d);
            let f = &mut rest[0];
            f.copy_from(&before[d - 1]);
            log.truncate(log_len[d - 1]);
            out.m.visited += 1;
            let mut dot_after_hand_over = false;
            let pushed = session
                .push_byte_with(f, trie.byte(i), Dynamic::Off, &mut |e| match e {
                    Scanned::Lexeme { cands, .. } => log.push(cands),
                    Scanned::Dot => dot_after_hand_over |= !log.is_empty(),
                })
                .is_ok();
            // Viable without cutting the lexeme back: it can still become a terminal the
            // stacks take, or an ignored one (or no lexeme is in progress).
            let direct = pushed
                && (f.scan.rem.is_empty()
                    || session
                        .lang
                        .live(f.scan.q, f.scan.w)
                        .intersects(&session.allowed(f).union(&skip)));
            if !(direct || pushed && session.is_viable_in(f, Dynamic::Off)) {
                i += trie.size(i);
                continue;
            }
            log_len[d] = log.len();
            exact[d] = exact[d - 1] || dot_after_hand_over;
            if trie.token(i).is_some() && exact[d] {
                out.record(trie, i, Some(CdKey::Exact { node: i as u32 }));
            } else if trie.token(i).is_some() {
                let ci = direct
                    && match log.len() {
                        0 => true,
                        1 => {
                            f.scan.rem.is_empty()
                                || session.lang.live(f.scan.q, f.scan.w).intersects(&skip)
                        }
                        _ => false,
                    };
                let cd = (!ci).then(|| CdKey::Scanned {
                    emitted: log.iter().copied().collect(),
                    trail: TrailKey::of(session.lang, &f.scan),
                });
                out.record(trie, i, cd);
            }
            ends.push(i + trie.size(i));
            i += 1;
        }
        out.finish()
    }
}

/// The tokens in which a relation may come into scope and a bare reference name its
/// columns after it: a name lexeme of the token (or, at its first byte, the end of one the
/// lexeme in progress began) that spells the end of a relation's name, followed in the
/// token by another place where a name may begin. The columns of every relation the stacks
/// already hold are words of [`Session::dynamic_names`]; those of a relation written in
/// the token are not, so these tokens are checked in full wherever bare references are
/// scoped. A superset; in vocabularies whose tokens hold one word each, almost none.
fn introducing_tokens(lang: &Language, trie: &TokenTrie) -> Arc<[u32]> {
    // The relations' stored names, folded and reversed, sorted: a suffix of one is a prefix
    // of one of these.
    let mut reversed: Vec<Vec<u8>> = lang
        .sem
        .relation_names()
        .map(|n| n.bytes().rev().map(|b| b.to_ascii_lowercase()).collect())
        .collect();
    reversed.sort_unstable();
    reversed.dedup();
    let ends_a_relation = |text: &[u8]| {
        let r: SmallVec<[u8; 32]> = text.iter().rev().map(u8::to_ascii_lowercase).collect();
        let p = reversed.partition_point(|n| n.as_slice() < &r[..]);
        !text.is_empty() && reversed.get(p).is_some_and(|n| n.starts_with(&r))
    };
    let starts = trie.starts();
    let mut out = Vec::new();
    for &node in starts.multi() {
        let t = starts.spelling(node);
        let begins: SmallVec<[usize; 8]> = (0..t.len())
            .filter(|&i| crate::trie::starts::starts_at(t, i))
            .filter(|&i| crate::lexer::is_word_byte(t[i]) || t[i] == b'"')
            .collect();
        let brings = begins.iter().any(|&i| {
            let (inner, end) = if t[i] == b'"' {
                let close = t[i + 1..].iter().position(|&b| b == b'"');
                match close {
                    Some(k) => (&t[i + 1..i + 1 + k], i + 2 + k),
                    None => return false,
                }
            } else {
                let e = (i..t.len())
                    .find(|&k| !crate::lexer::is_word_byte(t[k]))
                    .unwrap_or(t.len());
                (&t[i..e], e)
            };
            ends_a_relation(inner) && begins.iter().any(|&j| j >= end)
        });
        if brings {
            out.push(node);
        }
    }
    out.into()
}

/// Whether a name may start after some bytes of a token ([`Masker::add_dynamic`]): a
/// necessary condition for the name to change the token's verdict, checked before the
/// token is, once per distinct bytes.
///
/// A name lexeme that begins after bytes `p` of a token is taken by the stacks there:
/// those of the output followed by `p` once the lexeme in progress is handed over (the
/// name's first byte ends it). Unless one of them allows a dynamic terminal, the name
/// cannot be one there, and the token's verdict is the static mask's unless another name
/// of it, found by its own start, changes it.
///
/// Where one of them allows `SCOPED_COL`, a token whose bytes from there are the beginning
/// of an unquoted spelling of a column it may name there, and nothing else, is allowed
/// without a check ([`StartGate::spells_scoped`]).
#[derive(Default)]
struct StartGate {
    /// The verdict after no bytes or only blanks (where the name's first byte ends the
    /// lexeme in progress just the same).
    blank: Option<bool>,
    /// The verdict after other bytes, by those bytes.
    after: FxHashMap<SmallVec<[u8; 16]>, bool>,
    /// The columns in scope after some bytes, by those bytes ([`scoped_after`]).
    scoped: FxHashMap<SmallVec<[u8; 16]>, Option<ScopedAfter>>,
}

impl StartGate {
    fn admits(&mut self, session: &mut Session<'_>, cfg: &Config, before: &[u8]) -> bool {
        if before
            .iter()
            .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            return *self
                .blank
                .get_or_insert_with(|| dynamic_may_start(session, cfg));
        }
        if let Some(&v) = self.after.get(before) {
            return v;
        }
        let mut c = cfg.clone();
        let v = session.feed(&mut c, before).is_ok() && dynamic_may_start(session, &c);
        self.after.insert(SmallVec::from_slice(before), v);
        v
    }

    /// Whether `name`, the rest of a token after its bytes `before`, is the beginning of an
    /// unquoted spelling of a column `SCOPED_COL` may name there (and nothing more): then,
    /// its first byte ending the lexeme in progress, the token leaves a lexeme in progress
    /// that is a prefix of a name a stack takes, which [`Session::is_viable`] finds viable.
    /// False when that is not known (the token is then checked in full).
    fn spells_scoped(
        &mut self,
        session: &mut Session<'_>,
        cfg: &Config,
        before: &[u8],
        name: &[u8],
    ) -> bool {
        if !unquoted_beginning(name) {
            return false;
        }
        if !self.scoped.contains_key(before) {
            let s = scoped_after(session, cfg, before);
            self.scoped.insert(SmallVec::from_slice(before), s);
        }
        let reserved = |w: &str| session.lang.dialect.is_reserved(w);
        self.scoped[before].as_ref().is_some_and(|s| {
            s.ends[usize::from(name[0])] && begins_scoped(&s.names, name, &reserved)
        })
    }
}

/// What a bare column name that begins after some bytes meets ([`scoped_after`]).
struct ScopedAfter {
    /// The bytes that end the lexeme in progress there (all, when none is in progress).
    ends: [bool; 256],
    /// The names `SCOPED_COL` may spell on each stack there that allows it.
    names: SmallVec<[Arc<[crate::scope::Name]>; 2]>,
}

/// The columns `SCOPED_COL` may name on the stacks after `cfg` and `before`, once the lexeme
/// in progress there is handed over whole; `None` when that is not known (bytes the
/// recognizer refuses, a lexeme that only a cut back could end) or no stack allows it.
fn scoped_after(session: &mut Session<'_>, cfg: &Config, before: &[u8]) -> Option<ScopedAfter> {
    let lang = session.lang;
    let t = lang.sem.scoped_col()?;
    let mut c = cfg.clone();
    session.feed(&mut c, before).ok()?;
    let mut stacks = c.stacks.clone();
    let mut ends = [true; 256];
    if !c.scan.rem.is_empty() {
        let (len, cands) = c.scan.last?;
        if len as usize != c.scan.rem.len() {
            return None;
        }
        ends = session.ending_bytes(&c);
        if !session.emit_text(&mut stacks, cands, &c.scan.rem) {
            return None;
        }
    }
    let mut names = SmallVec::new();
    for &s in &stacks {
        if session.stacks.allowed(&lang.table, s).contains(t) {
            let n = session.stacks.visible(&lang.sem, s, t);
            if !n.is_empty() {
                names.push(n);
            }
        }
    }
    (!names.is_empty()).then_some(ScopedAfter { ends, names })
}

/// Whether `s` is the beginning of an unquoted identifier, made of nothing else:
/// `[A-Za-z_][A-Za-z0-9_$]*`, not empty.
fn unquoted_beginning(s: &[u8]) -> bool {
    s.first()
        .is_some_and(|&b| b.is_ascii_alphabetic() || b == b'_')
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$')
}

/// Whether `s` ([`unquoted_beginning`]) folded is the beginning of a name of one of `lists`
/// (each sorted) that an unquoted spelling spells.
fn begins_scoped(
    lists: &[Arc<[crate::scope::Name]>],
    s: &[u8],
    reserved: &dyn Fn(&str) -> bool,
) -> bool {
    let f: SmallVec<[u8; 32]> = s.iter().map(u8::to_ascii_lowercase).collect();
    lists.iter().any(|names| {
        let p = names.partition_point(|n| n.as_bytes() < &f[..]);
        names[p..]
            .iter()
            .take_while(|n| n.as_bytes().starts_with(&f))
            .any(|n| crate::lexicon::spells_unquoted(n, reserved))
    })
}

/// Whether a token spelled `token`, going on with the lexeme in progress of `cfg`, leaves
/// the beginning of an unquoted spelling of a column `SCOPED_COL` may name on a stack of
/// `cfg` that allows it (the lexeme and the token made of nothing else): viable, as
/// [`StartGate::spells_scoped`]. False when that is not known.
fn goes_on_scoped(session: &mut Session<'_>, cfg: &Config, token: &[u8]) -> bool {
    let lang = session.lang;
    let Some(t) = lang.sem.scoped_col() else {
        return false;
    };
    let rem = &cfg.scan.rem;
    if !unquoted_beginning(rem)
        || !token
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$')
    {
        return false;
    }
    let mut name: SmallVec<[u8; 64]> = SmallVec::from_slice(rem);
    name.extend_from_slice(token);
    let reserved = |w: &str| lang.dialect.is_reserved(w);
    let mut lists: SmallVec<[Arc<[crate::scope::Name]>; 2]> = SmallVec::new();
    for &s in &cfg.stacks {
        if session.stacks.allowed(&lang.table, s).contains(t) {
            lists.push(session.stacks.visible(&lang.sem, s, t));
        }
    }
    begins_scoped(&lists, &name, &reserved)
}

/// Whether `s` (bytes of a token from where a name may begin) begins one of `names`
/// (folded, sorted): is cut short within one, or holds one whole and more (a superset).
fn begins_name(names: &[&[u8]], s: &[u8]) -> bool {
    let f: SmallVec<[u8; 32]> = s.iter().take(64).map(u8::to_ascii_lowercase).collect();
    let p = names.partition_point(|n| *n < &f[..]);
    names.get(p).is_some_and(|n| n.starts_with(&f))
        || (1..f.len()).any(|k| names.binary_search(&&f[..k]).is_ok())
}

/// Whether a lexeme beginning after `cfg` may be a dynamic terminal: some stack allows one
/// once the lexeme in progress is handed over. True when that is not known: the lexeme in
/// progress is not yet one, or only a cut back could end it.
fn dynamic_may_start(session: &mut Session<'_>, cfg: &Config) -> bool {
    let lang = session.lang;
    let dynamic = lang.terms().dynamic_all;
    let mut stacks = cfg.stacks.clone();
    if !cfg.scan.rem.is_empty() {
        match cfg.scan.last {
            Some((len, cands)) if len as usize == cfg.scan.rem.len() => {
                if !session.emit_text(&mut stacks, cands, &cfg.scan.rem) {
                    return false;
                }
            }
            _ => return true,
        }
    }
    stacks
        .iter()
        .any(|&s| session.allowed_on(&[s]).intersects(&dynamic))
}

/// A masker's handle on a shared cache.
struct CacheState {
    cache: Arc<MaskCache>,
    /// The namespace last used (re-fetched when the scope changes or it rolled over).
    ns: Option<Arc<Namespace>>,
    /// Scope per language fingerprint.
    scopes: FxHashMap<[u8; 16], Scope>,
    stats: CacheStats,
    /// Per emission group of the current entry, scratch kept across steps.
    after: Vec<Option<Option<After>>>,
}

/// The stacks reached from `cfg`'s by shifting `emitted` in turn, and `A ∪ skip` on them;
/// `None` when they refuse a lexeme.
fn wanted_after(session: &mut Session<'_>, cfg: &Config, emitted: &[TermSet]) -> Option<After> {
    let mut stacks = cfg.stacks.clone();
    for &c in emitted {
        if !session.emit_on_memo(&mut stacks, c) {
            return None;
        }
    }
    let wanted = session
        .allowed_on(&stacks)
        .union(&session.lang.terms().skip);
    Some((stacks, wanted))
}

type After = (SmallVec<[u32; 4]>, TermSet);

/// The verdict of a CD class on the live stacks of `cfg`, given `wanted` after its emitted
/// lexemes ([`wanted_after`]): they were taken, and the trailing lexeme is still viable.
/// One verdict decides the whole class (see [`CdKey`]).
fn cd_verdict(
    session: &mut Session<'_>,
    cfg: &Config,
    class: &CdCandidates,
    after: &Option<After>,
    memo: &mut CutbackMemo,
) -> bool {
    let (Some((stacks, wanted)), CdKey::Scanned { trail: t, .. }) = (after, &*class.key) else {
        return false;
    };
    if t.idle || t.live.intersects(wanted) {
        return true;
    }
    if t.cutback.is_none() {
        return false;
    }
    // Only a cut back to an earlier accepting length can help: the full check, on the
    // class's first token, once per (stacks, trail) in a session.
    let key = (stacks.clone(), t.clone());
    if let Some(&v) = memo.of(session.identity()).get(&key) {
        return v;
    }
    let mut c = cfg.clone();
    let v = session.feed_in(&mut c, &class.rep, Dynamic::Off).is_ok()
        && session.is_viable_in(&c, Dynamic::Off);
    memo.of(session.identity()).insert(key, v);
    v
}

/// The verdicts of CD classes that only a cut back can save ([`cd_verdict`]): by the stacks
/// after the class's emissions and its [`TrailKey`] (all the check reads), once per session.
/// Stack ids are a session's own, so each session has its map, found by the address of its
/// [`Session::identity`]; the `Weak` kept beside it holds that address for the session, and
/// says when the session is gone. Maps of sessions gone are dropped when a new one comes.
#[derive(Default)]
struct CutbackMemo {
    by_session: FxHashMap<usize, (Weak<()>, Verdicts)>,
}

type Verdicts = FxHashMap<(SmallVec<[u32; 4]>, TrailKey), bool>;

impl CutbackMemo {
    /// The map of the session whose [`Session::identity`] is `identity`.
    fn of(&mut self, identity: &Arc<()>) -> &mut Verdicts {
        let at = Arc::as_ptr(identity) as usize;
        if !self.by_session.contains_key(&at) {
            self.by_session.retain(|_, (w, _)| w.strong_count() > 0);
        }
        &mut self
            .by_session
            .entry(at)
            .or_insert_with(|| (Arc::downgrade(identity), Verdicts::default()))
            .1
    }
}

/// The verdict of a [`CdKey::Exact`] token spelled `bytes` at `cfg`: the full check.
fn exact_verdict(session: &mut Session<'_>, cfg: &Config, bytes: &[u8]) -> bool {
    let mut c = cfg.clone();
    session.feed_in(&mut c, bytes, Dynamic::Off).is_ok() && session.is_viable_in(&c, Dynamic::Off)
}

/// A walk's result under construction.
struct Out {
    m: Mask,
    /// Index in `staged` of each class key seen.
    classes: FxHashMap<CdKey, usize>,
    /// The CD classes in order of first appearance, ids in walk order; `finish` sorts them
    /// into `m.cd_classes`.
    staged: Vec<(CdKey, Vec<u32>)>,
    first: FirstNode,
}

impl Out {
    /// Allows the ids of `node` (if any): CI when `cd` is `None`, else in the class `cd`.
    /// Remembers the first id allowed, with its node.
    fn record(&mut self, trie: &TokenTrie, node: usize, cd: Option<CdKey>) {
        let ids = trie.ids(node);
        let Some(id0) = ids.iter().next() else {
            return;
        };
        let m = &mut self.m;
        if m.allowed == 0 {
            self.first = Some((id0, node));
        }
        for id in ids.iter() {
            m.set(id);
        }
        let k = ids.len() as u32;
        m.allowed += k;
        let Some(key) = cd else {
            m.ci += k;
            return;
        };
        m.cd += k;
        let c = match self.classes.get(&key) {
            Some(&c) => c,
            None => {
                let c = self.staged.len();
                self.classes.insert(key.clone(), c);
                self.staged.push((key, Vec::new()));
                c
            }
        };
        self.staged[c].1.extend(ids.iter());
    }

    fn finish(mut self) -> (Mask, FirstNode) {
        self.m.blocked -= self.m.allowed;
        self.m.cd_classes = self
            .staged
            .into_iter()
            .map(|(key, mut ids)| {
                ids.sort_unstable();
                CdClass {
                    key: Arc::new(key),
                    ids: ids.into(),
                }
            })
            .collect();
        (self.m, self.first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitset_helpers() {
        let mut a = Mask::empty(70, 2);
        assert_eq!((a.bits.len(), a.blocked), (3, 68));
        for id in [0, 31, 32, 69] {
            a.set(id);
        }
        assert_eq!(a.ids().collect::<Vec<_>>(), vec![0, 31, 32, 69]);
        assert!(a.contains(31) && !a.contains(30) && !a.contains(1000));
        let mut b = Mask::empty(70, 2);
        b.set(31);
        b.set(33);
        assert_eq!(a.diff(&b), (vec![0, 32, 69], vec![33]));
        b.allowed = 1;
        assert_eq!(b.singleton(), Some(31));
        b.eos = true;
        assert_eq!(b.singleton(), None, "EOS is a second choice");
    }

    #[test]
    fn cutback_memo_is_per_session() {
        let mut memo = CutbackMemo::default();
        let trail = TrailKey {
            idle: false,
            live: TermSet::singleton(2),
            cutback: None,
        };
        let key = (SmallVec::from_slice(&[7]), trail);
        let (a, b) = (Arc::new(()), Arc::new(()));
        memo.of(&a).insert(key.clone(), true);
        assert_eq!(memo.of(&b).get(&key), None, "another session's verdict");
        memo.of(&b).insert(key.clone(), false);
        assert_eq!(memo.of(&a).get(&key), Some(&true));
        drop(a);
        assert_eq!(memo.by_session.len(), 2, "kept until a new session comes");
        let c = Arc::new(());
        assert!(memo.of(&c).is_empty());
        assert_eq!(
            memo.by_session.len(),
            2,
            "the gone session's map is dropped"
        );
        assert_eq!(memo.of(&b).get(&key), Some(&false));
    }
}

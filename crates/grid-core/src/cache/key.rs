//! Cache keys: what a configuration's cacheable mask part is a function of.
//!
//! The CI bits and the CD candidate classes of a configuration `κ = (σ, r)` depend on the
//! stacks only through `A(σ)`, and on the language only through the scanner (dialect
//! automaton and the lexicons' word trie), never on the role's projection. So a key is the
//! remainder, `A`, and the *scope*: the dialect, lexicon and vocabulary fingerprints. Two
//! roles over one schema share entries (cross-role hits); two schemas never do (the CD
//! candidates of any position embed schema words).
//!
//! The remainder comes in two tiers:
//! * **T1**: the raw bytes `r`;
//! * **T2**: the scanner normal form `(q, w, last)`, where `last` is the longest accepted
//!   prefix's candidates, whether it ends in a word byte, and the bytes after it. The scan
//!   reads nothing else of `r`, so remainders with one normal form share an entry (`'abc`
//!   and `'xyz` inside a string literal). It is used only under the lexicon-visibility
//!   guard: no terminal whose words a lexicon or a deny list decides is still reachable
//!   from `q`.
//!
//! Identifier positions (some lexicon-decided terminal is in `A`) get [`IdentKey`], every
//! other position [`GenericKey`]: two types that never compare equal, so an entry built at
//! one kind of position cannot answer the other.

use smallvec::SmallVec;

use crate::language::Language;
use crate::lexer::is_word_byte;
use crate::scan::Scan;
use crate::termset::TermSet;

/// The dialect, lexicon and vocabulary an entry was built for; namespaces are per scope.
pub(crate) type Scope = [u8; 16];

/// The lexeme in progress, as a key holds it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Remainder {
    /// T1: the remainder bytes.
    Raw(SmallVec<[u8; 24]>),
    /// T2: the scanner normal form (see the module documentation).
    Normal {
        q: u32,
        w: u32,
        /// Candidates of the longest accepted prefix, whether its last byte is a word byte,
        /// and the bytes after it.
        last: Option<(TermSet, bool, SmallVec<[u8; 8]>)>,
    },
}

impl Remainder {
    /// The T2 form when the lexicon-visibility guard holds, else the T1 form.
    pub(crate) fn of(lang: &Language, scan: &Scan) -> Remainder {
        let t = lang.terms();
        let decided = t
            .lexicon_all
            .union(&t.free)
            .union(&t.cte)
            .union(&t.dynamic_all);
        if scan.rem.is_empty() || lang.dfa().live(scan.q).intersects(&decided) {
            return Remainder::Raw(scan.rem.clone());
        }
        let last = scan.last.as_ref().map(|&(len, c)| {
            let len = len as usize;
            (c, is_word_byte(scan.rem[len - 1]), scan.rem[len..].into())
        });
        Remainder::Normal {
            q: scan.q,
            w: scan.w,
            last,
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Remainder::Raw(r) => {
                out.push(1);
                put_bytes(out, r);
            }
            Remainder::Normal { q, w, last } => {
                out.push(2);
                out.extend_from_slice(&q.to_le_bytes());
                out.extend_from_slice(&w.to_le_bytes());
                match last {
                    None => out.push(0),
                    Some((c, word, v)) => {
                        out.push(1);
                        put_terms(out, c);
                        out.push(u8::from(*word));
                        put_bytes(out, v);
                    }
                }
            }
        }
    }
}

/// What both key types hold.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeyBody {
    pub(crate) scope: Scope,
    pub(crate) remainder: Remainder,
    /// `A(σ)`, end of input included.
    pub(crate) allowed: TermSet,
}

/// The key of a configuration at an identifier position.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IdentKey(pub KeyBody);

/// The key of a configuration at any other position.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GenericKey(pub KeyBody);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CacheKey {
    Ident(IdentKey),
    Generic(GenericKey),
}

/// Whether a position is an identifier position: what a lookup is checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    Ident,
    Generic,
}

impl Position {
    /// An identifier position is one where `A` holds a terminal whose words a lexicon or a
    /// deny list decides: its mask must come from the L3 word trie.
    pub fn of(lang: &Language, allowed: &TermSet) -> Position {
        let t = lang.terms();
        let decided = t
            .lexicon_all
            .union(&t.free)
            .union(&t.cte)
            .union(&t.dynamic_all);
        if allowed.intersects(&decided) {
            Position::Ident
        } else {
            Position::Generic
        }
    }
}

impl CacheKey {
    /// The key of a configuration with scan state `scan` and allowed set `allowed`.
    pub fn of(lang: &Language, scope: Scope, scan: &Scan, allowed: TermSet) -> CacheKey {
        let body = KeyBody {
            scope,
            remainder: Remainder::of(lang, scan),
            allowed,
        };
        match Position::of(lang, &allowed) {
            Position::Ident => CacheKey::Ident(IdentKey(body)),
            Position::Generic => CacheKey::Generic(GenericKey(body)),
        }
    }

    pub(crate) fn position(&self) -> Position {
        match self {
            CacheKey::Ident(_) => Position::Ident,
            CacheKey::Generic(_) => Position::Generic,
        }
    }

    pub(crate) fn body(&self) -> &KeyBody {
        match self {
            CacheKey::Ident(k) => &k.0,
            CacheKey::Generic(k) => &k.0,
        }
    }

    /// The canonical byte encoding hashed into entry ids.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.push(match self {
            CacheKey::Ident(_) => b'I',
            CacheKey::Generic(_) => b'G',
        });
        let b = self.body();
        out.extend_from_slice(&b.scope);
        b.remainder.encode(out);
        put_terms(out, &b.allowed);
    }
}

/// The scope of a language's entries over a vocabulary with fingerprint `vocab`.
pub fn scope_of(lang: &Language, vocab: &str) -> Scope {
    use blake2::digest::consts::U16;
    use blake2::{Blake2b, Digest};
    let mut h = Blake2b::<U16>::new();
    h.update(b"grid-mask-scope/1");
    h.update(lang.dialect.fingerprint);
    h.update(lang.lexicon_fingerprint);
    h.update((vocab.len() as u64).to_le_bytes());
    h.update(vocab.as_bytes());
    h.finalize().into()
}

pub(crate) fn put_terms(out: &mut Vec<u8>, t: &TermSet) {
    for w in t.words() {
        out.extend_from_slice(&w.to_le_bytes());
    }
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

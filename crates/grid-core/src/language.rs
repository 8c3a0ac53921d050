//! A compiled language: L1 projected by a policy (L2) and restricted by a lexicon (L3).
//! Immutable; every session over it shares it.

use std::sync::Arc;

use blake2::digest::consts::U16;
use blake2::{Blake2b, Digest};

use crate::error::{GridError, Result};
use crate::grammar::spec::LexiconKind;
use crate::grammar::table::LrTable;
use crate::grammar::{Dialect, Terminals};
use crate::lexer::dfa::{LexDfa, DEAD};
use crate::lexer::words::WordTrie;
use crate::lexicon::{qualified_spellings, spellings, Lexicon};
use crate::policy::Policy;
use crate::scope::Semantics;
use crate::termset::TermSet;

#[derive(Debug)]
pub struct Language {
    pub dialect: Arc<Dialect>,
    pub policy: Policy,
    pub table: Arc<LrTable>,
    pub words: WordTrie,
    /// The dynamic lexicon's rules for `table` ([`crate::scope`]).
    pub sem: Semantics,
    /// Dialect, policy and lexicon fingerprints combined.
    pub fingerprint: [u8; 16],
    pub lexicon_fingerprint: [u8; 16],
}

impl Language {
    pub fn build(dialect: Arc<Dialect>, policy: &Policy, lexicon: &Lexicon) -> Result<Language> {
        let empty: Vec<LexiconKind> = LexiconKind::ALL
            .iter()
            .copied()
            .filter(|k| lexicon.is_empty(*k))
            .collect();
        let table = dialect.projected_table(policy, &empty)?;
        let words = build_words(&dialect, lexicon)?;
        let sem = Semantics::build(&table, &dialect.terms);
        let lexicon_fingerprint = lexicon.fingerprint();
        let mut h = Blake2b::<U16>::new();
        h.update(dialect.fingerprint);
        h.update(policy.canonical_json().as_bytes());
        h.update(lexicon_fingerprint);
        Ok(Language {
            dialect,
            policy: policy.clone(),
            table,
            words,
            sem,
            fingerprint: h.finalize().into(),
            lexicon_fingerprint,
        })
    }

    pub fn terms(&self) -> &Terminals {
        &self.dialect.terms
    }

    pub fn dfa(&self) -> &LexDfa {
        &self.dialect.dfa
    }

    /// Terminals whose lexeme is exactly the bytes that led to `(q, w)`.
    #[inline]
    pub fn candidates(&self, q: u32, w: u32) -> TermSet {
        if q == DEAD {
            return TermSet::EMPTY;
        }
        let t = &self.dialect.terms;
        let a = self.dialect.dfa.accept(q);
        let lex = a.intersect(&t.lexicon_all).intersect(&self.words.accept(w));
        let denying = t.free.union(&t.cte);
        let free = a.intersect(&denying).minus(&self.words.deny(w));
        // The dynamic terminals have no static word: the recognizer adds them per stack.
        a.minus(&t.lexicon_all)
            .minus(&t.dynamic_all)
            .minus(&denying)
            .union(&lex)
            .union(&free)
    }

    /// The terminals of the column lexicon.
    pub fn column_terms(&self) -> TermSet {
        self.dialect
            .terms
            .lexicon
            .get(&LexiconKind::Column)
            .copied()
            .unwrap_or_default()
    }

    /// Whether a parser that can take `allowed` next expects a relation: then, and only
    /// then, a `schema.table` word is one lexeme (elsewhere `x.y` is a qualifier and a
    /// column, as before).
    #[inline]
    pub fn relation_expected(&self, allowed: &TermSet) -> bool {
        allowed.intersects(&self.dialect.terms.relation)
    }

    /// Terminals that some extension of the bytes that led to `(q, w)` would give.
    #[inline]
    pub fn live(&self, q: u32, w: u32) -> TermSet {
        if q == DEAD {
            return TermSet::EMPTY;
        }
        let t = &self.dialect.terms;
        let l = self.dialect.dfa.live(q);
        l.minus(&t.lexicon_all)
            .minus(&t.dynamic_all)
            .union(&l.intersect(&self.words.live(w)))
    }
}

/// The word trie for `lexicon`: every spelling of every allowed word (`schema.table` words
/// included), checked against its terminal's regular expression (W ⊆ R), and the deny lists
/// of the free identifiers.
fn build_words(dialect: &Dialect, lexicon: &Lexicon) -> Result<WordTrie> {
    let reserved = |w: &str| dialect.is_reserved(w);
    let terms = &dialect.terms;
    let mut trie = WordTrie::default();
    for (kind, ts) in &terms.lexicon {
        let bare = lexicon.words(*kind).flat_map(|w| spellings(w, &reserved));
        let qualified = lexicon
            .qualified(*kind)
            .flat_map(|q| qualified_spellings(q, &reserved));
        for sp in bare.chain(qualified) {
            let acc = dialect.dfa.accept(dialect.dfa.run(sp.as_bytes()));
            for t in ts.iter() {
                if !acc.contains(t) {
                    return Err(GridError::UnscannableWord {
                        word: sp.clone(),
                        category: kind.name().into(),
                        terminal: terms.name(t).into(),
                    });
                }
                trie.insert(sp.as_bytes(), Some(t), None);
            }
        }
    }
    for w in &dialect.spec.reserved {
        for t in terms.free.union(&terms.cte).iter() {
            trie.insert(w.as_bytes(), None, Some(t));
        }
    }
    for w in &dialect.spec.bare_label_denied {
        for t in terms.bare_label.iter() {
            trie.insert(w.as_bytes(), None, Some(t));
        }
    }
    for r in &lexicon.relations {
        for sp in spellings(r, &reserved) {
            for t in terms.cte.iter() {
                trie.insert(sp.as_bytes(), None, Some(t));
            }
        }
    }
    Ok(trie)
}

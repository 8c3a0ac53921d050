//! A compiled language: L1 projected by a policy (L2) and restricted by a lexicon (L3).
//! Immutable; every session over it shares it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use blake2::digest::consts::U16;
use blake2::{Blake2b, Digest};

use crate::error::{GridError, Result};
use crate::grammar::spec::LexiconKind;
use crate::grammar::table::LrTable;
use crate::grammar::{Dialect, Terminals};
use crate::lexer::dfa::{LexDfa, DEAD};
use crate::lexer::words::WordTrie;
use crate::lexer::{is_ident_start, is_word_byte};
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
    /// One byte of each class of bytes the scanner cannot tell apart: the same class in the
    /// lexer automaton, the same step in the word trie from every node (`steps_on` false
    /// for both, or the same byte), alike as word bytes and as an identifier's first byte
    /// (what may not follow a number), and the dot or not. Searches over continuations
    /// try these instead of all 256 bytes, with the same verdicts.
    pub byte_reps: Vec<u8>,
}

/// See [`Language::builds`].
static BUILDS: AtomicU64 = AtomicU64::new(0);

impl Language {
    /// How many languages this process has built (started to build): the extension's
    /// tests read it to prove that a backend builds none (docs/postgres.md).
    pub fn builds() -> u64 {
        BUILDS.load(Ordering::Relaxed)
    }

    pub fn build(dialect: Arc<Dialect>, policy: &Policy, lexicon: &Lexicon) -> Result<Language> {
        BUILDS.fetch_add(1, Ordering::Relaxed);
        let empty: Vec<LexiconKind> = LexiconKind::ALL
            .iter()
            .copied()
            .filter(|k| lexicon.is_empty(*k))
            .collect();
        let table = dialect.projected_table(policy, &empty)?;
        let words = build_words(&dialect, lexicon)?;
        let sem = Semantics::build(&table, &dialect.terms, lexicon);
        let lexicon_fingerprint = lexicon.fingerprint();
        let mut h = Blake2b::<U16>::new();
        h.update(dialect.fingerprint);
        h.update(policy.canonical_json().as_bytes());
        h.update(lexicon_fingerprint);
        let byte_reps = byte_reps(&dialect.dfa, &words);
        Ok(Language {
            dialect,
            policy: policy.clone(),
            table,
            words,
            sem,
            fingerprint: h.finalize().into(),
            lexicon_fingerprint,
            byte_reps,
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

fn byte_reps(dfa: &LexDfa, words: &WordTrie) -> Vec<u8> {
    let mut seen = rustc_hash::FxHashSet::default();
    (0..=255u8)
        .filter(|&b| {
            let in_trie = words.steps_on(b).then_some(b);
            let word = (is_word_byte(b), is_ident_start(b));
            seen.insert((dfa.class(b), in_trie, word, b == b'.'))
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Schema, Table};

    /// The class representatives stand for every byte: each byte moves every automaton
    /// state and every trie node exactly as one representative does, so a search over the
    /// representatives reaches the verdicts a search over all 256 bytes reaches.
    #[test]
    fn byte_reps_stand_for_every_byte() {
        let schema = Schema {
            db_id: "t".into(),
            tables: vec![
                Table::with_columns("Employees", &["id", "Name", "Rating_(millions)", "é"]),
                Table::with_columns("orders", &["id", "total"]),
            ],
        };
        let dialect = Arc::new(Dialect::postgres().expect("dialect"));
        let policy = Policy::default();
        let reserved = |w: &str| dialect.is_reserved(w);
        let lx = Lexicon::from_schema(&schema, &policy, &reserved).expect("lexicon");
        let lang = Language::build(dialect.clone(), &policy, &lx).expect("language");
        let dfa = lang.dfa();
        let alike = |b: u8, r: u8| {
            is_word_byte(b) == is_word_byte(r)
                && is_ident_start(b) == is_ident_start(r)
                && (b == b'.') == (r == b'.')
                && (0..dfa.n_states() as u32).all(|s| dfa.next(s, b) == dfa.next(s, r))
                && (0..lang.words.len() as u32).all(|n| {
                    lang.words.step(n, b) == lang.words.step(n, r)
                        && lang.words.is_separator(n, b) == lang.words.is_separator(n, r)
                })
        };
        for b in 0..=255u8 {
            assert!(
                lang.byte_reps.iter().any(|&r| alike(b, r)),
                "byte {b:#04x} behaves like no representative"
            );
        }
        assert!(lang.byte_reps.len() < 256, "no two bytes share a class");
    }
}

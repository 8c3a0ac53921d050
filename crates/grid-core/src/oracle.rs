//! The brute-force mask: every token tried on its own, from scratch. Deliberately simple and
//! slow; it is the reference the trie walk of [`crate::mask`] is tested against (in tests
//! and `grid replay --oracle-every`), never used to serve masks.

use grid_vocab::Vocabulary;

use crate::mask::Mask;
use crate::recognizer::{Config, Session};

/// For every non-special id `t`: allowed iff feeding `bytes(t)` to a copy of `cfg` succeeds
/// and leaves a viable prefix. EOS iff [`Session::finish`] succeeds at `cfg`. The CI/CD
/// counts and classes are not computed (zero, empty); `forced` is `None`.
pub fn oracle_mask(session: &mut Session<'_>, cfg: &Config, vocab: &Vocabulary) -> Mask {
    let mut m = Mask::empty(vocab.len(), vocab.special_ids().len());
    for (id, bytes) in vocab.iter() {
        if vocab.is_special(id) {
            continue;
        }
        let mut c = cfg.clone();
        if session.feed(&mut c, bytes).is_ok() && session.is_viable(&c) {
            m.set(id);
            m.allowed += 1;
        }
    }
    m.blocked -= m.allowed;
    m.eos = session.finish(cfg).is_ok();
    if m.eos {
        if let Some(e) = vocab.eos_id() {
            m.set(e);
        }
    }
    m
}

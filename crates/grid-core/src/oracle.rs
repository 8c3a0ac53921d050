//! The brute-force mask: every token tried on its own, from scratch. Deliberately simple and
//! slow; it is the reference the trie walk of [`crate::mask`] is tested against (in tests
//! and `grid replay --oracle-every`), never used to serve masks.

use grid_vocab::Vocabulary;

use crate::mask::Mask;
use crate::recognizer::{Config, Dynamic, Session};

/// For every non-special id `t`: allowed iff feeding `bytes(t)` to a copy of `cfg` succeeds
/// and leaves a viable prefix. EOS iff [`Session::finish`] succeeds at `cfg`. The CI/CD
/// counts and classes are not computed (zero, empty); `forced` is `None`.
pub fn oracle_mask(session: &mut Session<'_>, cfg: &Config, vocab: &Vocabulary) -> Mask {
    oracle_in(session, cfg, vocab, Dynamic::On)
}

/// [`oracle_mask`] of the language without the dynamic lexicon (the names the statement
/// introduced, [`crate::scope`]), from `cfg`'s stacks without their values: the part of
/// the mask that [`crate::mask`] decides by its trie walk and CD classes, before it adds,
/// token by token, what those names allow (EOS is [`Session::finish`] on those stacks).
pub fn static_oracle_mask(session: &mut Session<'_>, cfg: &Config, vocab: &Vocabulary) -> Mask {
    let base = session.static_view(cfg);
    oracle_in(session, &base, vocab, Dynamic::Off)
}

fn oracle_in(
    session: &mut Session<'_>,
    cfg: &Config,
    vocab: &Vocabulary,
    dynamic: Dynamic,
) -> Mask {
    let mut m = Mask::empty(vocab.len(), vocab.special_ids().len());
    for (id, bytes) in vocab.iter() {
        if vocab.is_special(id) {
            continue;
        }
        let mut c = cfg.clone();
        if session.feed_in(&mut c, bytes, dynamic).is_ok() && session.is_viable_in(&c, dynamic) {
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

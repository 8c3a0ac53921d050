//! Replay of a decode loop's audit log: recomputes, from the archived artifacts, what each
//! record commits to (configuration hash, mask entry id, blocked count) and whether the
//! recorded token is in the recomputed mask. Plugs into [`crate::audit::replay`].

use std::sync::Arc;

use grid_vocab::Vocabulary;
use thiserror::Error;

use super::commit::{config_hash, full_mask, mask_entry_id};
use super::fingerprints;
use crate::audit::{MaskCommit, RecomputeError, StepContext, Token};
use crate::language::Language;
use crate::mask::Masker;
use crate::recognizer::{Config, Session};
use crate::trie::TokenTrie;

/// The artifacts handed to the replay are not the ones the seal names.
#[derive(Debug, Error)]
#[error("generation {generation}: the archived {artifact} does not have the sealed fingerprint")]
pub struct ArtifactMismatch {
    pub(crate) generation: u64,
    pub(crate) artifact: &'static str,
}

/// The generation being replayed: its session and the configuration before `next_step`.
struct Current<'l> {
    generation: u64,
    next_step: u32,
    session: Session<'l>,
    cfg: Config,
}

/// Recomputes step commitments generation by generation, walking every mask afresh
/// (no forced-run shortcut, no cache), so the replay is independent of how the loop
/// obtained its masks.
pub struct Recomputer<'l> {
    masker: Masker,
    vocab: &'l Vocabulary,
    current: Option<Current<'l>>,
}

impl<'l> Recomputer<'l> {
    pub fn new(trie: Arc<TokenTrie>, vocab: &'l Vocabulary) -> Self {
        Recomputer {
            masker: Masker::new(trie),
            vocab,
            current: None,
        }
    }

    /// The commitment of step `ctx` in `lang` (the language the seal's fingerprints name).
    pub fn recompute(
        &mut self,
        lang: &'l Language,
        ctx: &StepContext<'_>,
    ) -> Result<MaskCommit, RecomputeError> {
        let fp = fingerprints(lang, self.vocab.fingerprint());
        let sealed = &ctx.seal.fingerprints;
        for (artifact, ok) in [
            ("grammar", fp.grammar == sealed.grammar),
            ("lexicons", fp.lexicons == sealed.lexicons),
            ("policy", fp.policy == sealed.policy),
            ("vocabulary", fp.vocabulary == sealed.vocabulary),
        ] {
            if !ok {
                return Err(Box::new(ArtifactMismatch {
                    generation: ctx.generation,
                    artifact,
                }));
            }
        }
        if !ctx.seal.mode.decode.masked() {
            // An unconstrained generation: the same full mask at every step, no
            // configuration (hash 0).
            let mask = full_mask(self.masker.trie());
            let eos_id = self.masker.trie().eos_id();
            return Ok(MaskCommit {
                config_hash: 0,
                mask_entry_id: mask_entry_id(&mask),
                blocked_count: mask.blocked,
                token_allowed: match ctx.token {
                    Token::Eos => true,
                    Token::Id(id) => mask.contains(id) && Some(id) != eos_id,
                },
            });
        }
        let in_step = self
            .current
            .as_ref()
            .is_some_and(|c| c.generation == ctx.generation && c.next_step == ctx.step);
        if !in_step {
            let mut session = Session::new(lang);
            let mut cfg = session.start();
            // The prefix holds the output's tokens only (no banned ones).
            for t in ctx.prefix {
                if let Token::Id(id) = t {
                    session
                        .feed(&mut cfg, self.vocab.token_bytes(*id))
                        .map_err(|e| format!("the recorded prefix is refused: {e:?}"))?;
                }
            }
            self.current = Some(Current {
                generation: ctx.generation,
                next_step: ctx.step,
                session,
                cfg,
            });
        }
        let Some(cur) = self.current.as_mut() else {
            return Err("no replay state".into());
        };
        let hash = config_hash(&cur.session, &cur.cfg);
        let mut mask = self.masker.mask_once(&mut cur.session, &cur.cfg);
        let eos_id = self.masker.trie().eos_id();
        for &id in ctx.banned {
            if Some(id) != eos_id {
                mask.remove(id);
            }
        }
        let token_allowed = match ctx.token {
            Token::Eos => mask.eos,
            Token::Id(id) => mask.contains(id) && Some(id) != eos_id,
        };
        if let Token::Id(id) = ctx.token {
            // A banned token is not part of the output: the configuration stays.
            if token_allowed && ctx.kind.emits() {
                cur.session
                    .feed(&mut cur.cfg, self.vocab.token_bytes(id))
                    .map_err(|e| format!("the recorded token {id} is refused: {e:?}"))?;
            }
        }
        cur.next_step += 1;
        Ok(MaskCommit {
            config_hash: hash,
            mask_entry_id: mask_entry_id(&mask),
            blocked_count: mask.blocked,
            token_allowed,
        })
    }
}

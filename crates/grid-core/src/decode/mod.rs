//! The decode loop (mode 1: grid owns the loop): many generations stepped as one batch.
//!
//! Each tick, for every live generation: its exact mask at the current configuration
//! (a generation whose mask is not computed this tick waits a round while the others
//! proceed; no approximate mask is ever used); then either the shortest legal
//! completion (when the budget is down to the reserve), a forced span (singleton mask), or
//! one token the model samples under the mask; the recognizer advances, and every token
//! (each interior token of a forced span too) gets an audit record. EOS is accepted only
//! when the mask's EOS bit is set, i.e. at ACCEPT.
//!
//! A loop is a [`Batch`]: generations join it between ticks ([`Decoder::admit`]) and each
//! is handed back, sealed, by the tick in which it stops ([`Decoder::tick`]), so none
//! waits for a longer neighbour. [`Decoder::run`] admits a fixed set at the first tick and
//! ticks until all have stopped.
//!
//! Termination. The budget `max_tokens` counts vocabulary tokens of the output
//! (EOS not included). The loop keeps the invariant `reserve(κ) ≤ budget left` at every
//! step: before it commits any token `t` (sampled or forced), it computes
//! `reserve(κ·t)` and, if that exceeds the budget left after `t`, discards `t` and writes
//! the completion from `κ` instead. So the trigger is `budget ≤ reserve + SAFETY` with
//! [`SAFETY`] = 0: a fixed margin would be needed only without this one-token look-ahead,
//! and none would be sound, since one token can open several nested constructs at once
//! (`((((`) and raise the reserve by more than any constant. The completion has at most
//! `reserve` tokens, so every non-error stop is a sentence within budget.

mod commit;
mod fair;
mod model;
mod replay;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use blake2::digest::consts::U16;
use blake2::{Blake2b, Digest};
use grid_vocab::Vocabulary;
use thiserror::Error;

use crate::audit::{
    from_hex, text_digest, AuditSink, ChainWriter, DecodeMode, Fingerprints, Mode, SealInput,
    SealMeta, StepInput, StepKind, StopReason, Token, WriteError,
};
use crate::language::Language;
use crate::mask::{Mask, Masker};
use crate::recognizer::{Config, Session};
use crate::reserve::{ReserveMemo, ReserveTable, Speller, UNREACHABLE};

pub use commit::MASK_ENTRY_TAG;
pub(crate) use commit::{config_hash, full_mask, mask_entry_id, singleton_mask};
pub use model::{Choice, Model, ModelError, ModelStep, StepModel};
pub use replay::{ArtifactMismatch, Recomputer};

/// Tokens kept in hand beyond the reserve when deciding to complete (see the module
/// documentation for why the look-ahead makes 0 sound).
pub(crate) const SAFETY: u32 = 0;

/// One generation to run.
#[derive(Debug, Clone)]
pub struct GenerationSpec<'l> {
    /// Unique in the audit log.
    pub id: u64,
    pub language: &'l Language,
    /// The reserve tables of `language` for the decoder's vocabulary.
    pub reserve: &'l ReserveTable,
    pub prompt: Vec<u32>,
    /// Most vocabulary tokens in the output (EOS not counted).
    pub max_tokens: u32,
    pub seed: u64,
    /// Request metadata for the seal (`sql_digest` is filled in by the loop).
    pub meta: SealMeta,
    /// No mask (an ablation): every non-special token and EOS are allowed at every step,
    /// the recognizer and the reserve are not consulted, and the budget cuts the output
    /// where it stands (stop `BudgetTruncated`). Sealed in decode mode `Unconstrained`;
    /// its records carry configuration hash 0 (there is no configuration).
    pub unconstrained: bool,
    /// A rewind repair (ignored when `unconstrained`): see [`Rewind`].
    pub rewind: Option<Rewind>,
}

/// A rewind repair: the generation starts from the repaired generation's own output up to
/// the reference the checker refused, and the token that generation chose there is taken
/// out of that step's mask, so the model continues with its next choice rather than
/// repeat the mistake.
///
/// Each token of `replay` is written only if it is in its step's exact mask and fits the
/// budget (recorded [`StepKind::Replayed`]; budget completion takes over as for any
/// token); then one [`StepKind::Banned`] record carries `ban`, and the steps at that
/// position are sampled from the exact mask without it. A replay can recompute every
/// record from the log alone, since the ban is on the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewind {
    pub replay: Vec<u32>,
    pub ban: u32,
}

/// Why a generation stopped with [`StopReason::Error`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error(
        "the budget of {max_tokens} tokens is below the reserve of the empty statement ({reserve})"
    )]
    BudgetBelowReserve { max_tokens: u32, reserve: u32 },
    #[error("step {step}: the mask is empty and EOS is shut (a dead end)")]
    DeadEnd { step: u32 },
    #[error("step {step}: no completion to ACCEPT was found")]
    NoCompletion { step: u32 },
    #[error("step {step}: the model chose token {token}, which the mask blocks")]
    OutsideMask { step: u32, token: u32 },
    #[error("step {step}: the model chose EOS, which the mask blocks")]
    EosRefused { step: u32 },
    #[error("step {step}: completion token {token} is not in the mask")]
    CompletionRefused { step: u32, token: u32 },
    #[error("step {step}: the recognizer refused token {token}")]
    Refused { step: u32, token: u32 },
    #[error("step {step}: token {token} of the rewound output is not in the mask")]
    ReplayRefused { step: u32, token: u32 },
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// How one generation ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub generation: u64,
    /// The output's token ids.
    pub tokens: Vec<u32>,
    /// The output's bytes.
    pub text: Vec<u8>,
    pub stop: StopReason,
    /// Set exactly when `stop` is [`StopReason::Error`].
    pub error: Option<DecodeError>,
    /// Tokens written by budget completion.
    pub completed_tokens: u32,
    /// Ticks the generation waited for its mask.
    pub deferred: u32,
}

/// Settings of the loop.
#[derive(Debug, Clone, Default)]
pub struct DecodeOptions {
    /// Most masks computed per tick; generations beyond wait a round. `None`: no limit.
    pub masks_per_tick: Option<usize>,
    /// Recorded in the seal's mode flags.
    pub cache: bool,
    /// Serve the least-served generations first: one whose steps have taken more than
    /// this beyond the least-served live one's skips ticks, up to [`HOLD_MAX`] at a time
    /// ([`fair`]). `None`: every live generation steps every tick.
    pub slice: Option<Duration>,
}

/// The fingerprints a seal records for `lang` and a vocabulary fingerprint.
pub fn fingerprints(lang: &Language, vocab_fingerprint: &str) -> Fingerprints {
    let b16 = |parts: &[&[u8]]| -> [u8; 16] {
        let mut h = Blake2b::<U16>::new();
        for p in parts {
            h.update(p);
        }
        h.finalize().into()
    };
    let policy = lang.policy.canonical_json();
    Fingerprints {
        grammar: b16(&[
            b"grid_pg/grammar/v1\0",
            &lang.dialect.fingerprint,
            policy.as_bytes(),
        ]),
        lexicons: lang.lexicon_fingerprint,
        policy: b16(&[b"grid_pg/policy/v1\0", policy.as_bytes()]),
        vocabulary: from_hex::<16>(vocab_fingerprint)
            .unwrap_or_else(|_| b16(&[b"grid_pg/vocabulary/v1\0", vocab_fingerprint.as_bytes()])),
    }
}

/// Per-generation state between ticks.
struct Live<'l> {
    spec: GenerationSpec<'l>,
    session: Session<'l>,
    memo: ReserveMemo,
    /// The last reserve computed and the configuration it is of: the check of a sampled
    /// token computes the reserve of the configuration the next step plans from, which
    /// would otherwise search the lexeme's suffixes a second time.
    reserved: Option<(Config, u32)>,
    /// The time its steps have taken, for the ticks' order ([`fair`]).
    service: fair::Service,
    cfg: Config,
    tokens: Vec<u32>,
    text: Vec<u8>,
    /// The mask at `cfg`, once computed.
    mask: Option<Mask>,
    completed: u32,
    deferred: u32,
    /// Whether the rewind's ban has been recorded and applied.
    banned: bool,
    /// Set when the generation has stopped (and been sealed).
    done: Option<(StopReason, Option<DecodeError>)>,
}

impl<'l> Live<'l> {
    fn new(spec: GenerationSpec<'l>) -> Live<'l> {
        let mut session = Session::new(spec.language);
        let cfg = session.start();
        Live {
            spec,
            session,
            memo: ReserveMemo::default(),
            reserved: None,
            service: fair::Service::default(),
            cfg,
            tokens: Vec::new(),
            text: Vec::new(),
            mask: None,
            completed: 0,
            deferred: 0,
            banned: false,
            done: None,
        }
    }

    /// The rewind's next token to write, while the output is shorter than its replay.
    fn to_replay(&self) -> Option<u32> {
        let r = self.spec.rewind.as_ref()?;
        r.replay.get(self.tokens.len()).copied()
    }

    /// The rewind's ban, when it is due at this step and not yet applied.
    fn ban_due(&self) -> Option<u32> {
        let r = self.spec.rewind.as_ref()?;
        (!self.banned && self.tokens.len() == r.replay.len()).then_some(r.ban)
    }

    fn into_outcome(self) -> Outcome {
        let (stop, error) = self.done.unwrap_or((StopReason::Error, None));
        Outcome {
            generation: self.spec.id,
            tokens: self.tokens,
            text: self.text,
            stop,
            error,
            completed_tokens: self.completed,
            deferred: self.deferred,
        }
    }
}

/// The generations of one decode loop between its ticks: [`Decoder::admit`] adds one (at
/// any tick), [`Decoder::tick`] steps them all once and hands back the outcomes of those
/// that stopped. A generation's masks, tokens and audit records depend only on its spec
/// and on the model's choices for it, never on when it was admitted or on its neighbours;
/// only the interleaving of records of different generations in the log does.
///
/// Lifetimes: the batch owns each admitted spec, and each live generation's
/// `Session<'l>` reads the spec's language at every step until it stops. So everything a
/// spec borrows (its `&'l Language` and `&'l ReserveTable`) must outlive the batch, not
/// just the call that admits it. The borrow checker enforces this: `'l` is fixed when the
/// batch is made, so a caller that builds languages while the loop runs keeps them in
/// storage declared before the batch that neither moves nor drops an element while the
/// batch lives (an append-only arena).
///
/// A batch is ticked by the decoder that admitted its generations (the masks are over its
/// vocabulary). After a [`WriteError`] the batch must be dropped: the generations in it
/// stay unsealed, as the audit chain requires of a write it refused.
#[derive(Default)]
pub struct Batch<'l> {
    /// Live generations, in the order the next tick visits them (those that waited for
    /// their mask first).
    live: Vec<Live<'l>>,
    /// Generations stopped at admission, handed back by the next tick.
    stopped: Vec<Outcome>,
}

impl<'l> Batch<'l> {
    pub fn new() -> Self {
        Self::default()
    }

    /// No live generation and no outcome left to hand back: the loop is over.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty() && self.stopped.is_empty()
    }

    /// The ids of the generations that have not stopped.
    pub fn generations(&self) -> impl Iterator<Item = u64> + '_ {
        self.live.iter().map(|g| g.spec.id)
    }

    /// Ends a tick: the generations that stopped leave (their outcomes are returned, in
    /// the order they stopped), and the next tick visits those that waited for their mask
    /// first, then those that were ready.
    fn retire(&mut self, waited: &[usize], ready: &[usize], stopped: &[usize]) -> Vec<Outcome> {
        let mut slots: Vec<Option<Live<'l>>> = std::mem::take(&mut self.live)
            .into_iter()
            .map(Some)
            .collect();
        let mut outcomes = std::mem::take(&mut self.stopped);
        outcomes.extend(
            stopped
                .iter()
                .filter_map(|&i| slots.get_mut(i)?.take())
                .map(Live::into_outcome),
        );
        self.live = waited
            .iter()
            .chain(ready)
            .filter_map(|&i| slots.get_mut(i)?.take())
            .filter(|g| g.done.is_none())
            .collect();
        // Every generation is in one of the lists; none is dropped if that ever changes.
        for g in slots.into_iter().flatten() {
            if g.done.is_some() {
                outcomes.push(g.into_outcome());
            } else {
                self.live.push(g);
            }
        }
        outcomes
    }
}

/// What a generation does this tick, once its mask is known.
enum Plan {
    Complete,
    /// A token of the rewind's replay.
    Replay(u32),
    /// The rewind's ban, then a sample.
    Ban(u32),
    /// Unconstrained, out of budget: the output stops where it stands.
    Truncate,
    Forced(Vec<u32>),
    Sample,
}

/// The decode loop over one vocabulary.
pub struct Decoder<'v> {
    vocab: &'v Vocabulary,
    masker: Masker,
    speller: &'v Speller,
    options: DecodeOptions,
}

impl<'v> Decoder<'v> {
    pub fn new(
        vocab: &'v Vocabulary,
        masker: Masker,
        speller: &'v Speller,
        options: DecodeOptions,
    ) -> Self {
        Decoder {
            vocab,
            masker,
            speller,
            options,
        }
    }

    fn n_special(&self) -> usize {
        self.masker.trie().special_ids().len()
    }

    fn n_ids(&self) -> usize {
        self.masker.trie().n_ids()
    }

    fn mode(&self, g: &Live<'_>) -> Mode {
        Mode {
            decode: if g.spec.unconstrained {
                DecodeMode::Unconstrained
            } else {
                DecodeMode::Mode1
            },
            cache: self.options.cache,
        }
    }

    /// Runs every generation to its stop, writing records and seals to `audit`, and
    /// returns the outcomes in the order of `specs`. `cancel(generation, tokens so far)`
    /// is asked once per tick per live generation. Only an audit write failure aborts the
    /// run. (All generations admitted at the first tick; see [`Decoder::tick`] for a loop
    /// that admits more as it goes.)
    pub fn run<'l, S: AuditSink>(
        &mut self,
        specs: &[GenerationSpec<'l>],
        model: &mut dyn Model,
        audit: &mut ChainWriter<S>,
        cancel: &mut dyn FnMut(u64, usize) -> bool,
    ) -> Result<Vec<Outcome>, WriteError> {
        let mut batch = Batch::new();
        for spec in specs {
            self.admit(&mut batch, spec.clone(), audit)?;
        }
        let mut outcomes = Vec::with_capacity(specs.len());
        while !batch.is_empty() {
            outcomes.extend(self.tick(&mut batch, model, audit, cancel)?);
        }
        // Ids are unique among open generations (`begin` refuses an open one).
        let position: HashMap<u64, usize> =
            specs.iter().enumerate().map(|(k, s)| (s.id, k)).collect();
        outcomes.sort_by_key(|o| position.get(&o.generation).copied());
        Ok(outcomes)
    }

    /// Begins `spec`'s generation in `batch`; its first step is taken at the next tick. A
    /// budget below the reserve of the empty statement stops it at once (sealed; its
    /// outcome comes with the next tick's).
    pub fn admit<'l, S: AuditSink>(
        &mut self,
        batch: &mut Batch<'l>,
        spec: GenerationSpec<'l>,
        audit: &mut ChainWriter<S>,
    ) -> Result<(), WriteError> {
        audit.begin(spec.id)?;
        let mut g = Live::new(spec);
        let cfg = g.cfg.clone();
        let r = if g.spec.unconstrained {
            0
        } else {
            self.reserve_of(&mut g, &cfg)
        };
        if r > g.spec.max_tokens {
            let e = DecodeError::BudgetBelowReserve {
                max_tokens: g.spec.max_tokens,
                reserve: r,
            };
            let mode = self.mode(&g);
            self.stop(&mut g, audit, mode, StopReason::Error, Some(e))?;
            batch.stopped.push(g.into_outcome());
        } else {
            batch.live.push(g);
        }
        Ok(())
    }

    /// One tick: every live generation of `batch` takes its next step (a token, a forced
    /// span or its completion; at most one model request for all of them), and the
    /// outcomes of the generations that stopped are returned at once (with those stopped
    /// at admission), sealed, in the order they stopped. `cancel(generation, tokens so
    /// far)` is asked once per live generation. Only an audit write failure returns `Err`.
    pub fn tick<'l, S: AuditSink>(
        &mut self,
        batch: &mut Batch<'l>,
        model: &mut dyn Model,
        audit: &mut ChainWriter<S>,
        cancel: &mut dyn FnMut(u64, usize) -> bool,
    ) -> Result<Vec<Outcome>, WriteError> {
        let mut stopped: Vec<usize> = Vec::new();
        let held = match self.options.slice {
            Some(slice) => {
                let mut services: Vec<&mut fair::Service> =
                    batch.live.iter_mut().map(|g| &mut g.service).collect();
                fair::holds(&mut services, slice, Instant::now())
            }
            None => Vec::new(),
        };
        let (ready, waited) = self.visit(&mut batch.live, &held, audit, cancel, &mut stopped)?;
        let to_sample = self.act(&mut batch.live, &ready, audit, &mut stopped)?;
        self.sample(&mut batch.live, &to_sample, model, audit, &mut stopped)?;
        Ok(batch.retire(&waited, &ready, &stopped))
    }

    /// Asks `cancel` of every live generation and computes the masks (up to
    /// `masks_per_tick`) of those not `held`; returns the generations ready to step and
    /// those that wait (held, or for their mask).
    fn visit<S: AuditSink>(
        &mut self,
        live: &mut [Live<'_>],
        held: &[bool],
        audit: &mut ChainWriter<S>,
        cancel: &mut dyn FnMut(u64, usize) -> bool,
        stopped: &mut Vec<usize>,
    ) -> Result<(Vec<usize>, Vec<usize>), WriteError> {
        let mut walks = 0usize;
        let mut ready: Vec<usize> = Vec::new();
        let mut waited: Vec<usize> = Vec::new();
        for (i, g) in live.iter_mut().enumerate() {
            if cancel(g.spec.id, g.tokens.len()) {
                let mode = self.mode(g);
                self.stop(g, audit, mode, StopReason::Cancelled, None)?;
                stopped.push(i);
                continue;
            }
            if held.get(i).copied().unwrap_or(false) {
                waited.push(i);
                continue;
            }
            if g.mask.is_none() && g.spec.unconstrained {
                g.mask = Some(full_mask(self.masker.trie()));
            }
            if g.mask.is_none() {
                if self.options.masks_per_tick.is_some_and(|m| walks >= m) {
                    g.deferred += 1;
                    waited.push(i);
                    continue;
                }
                walks += 1;
                let started = Instant::now();
                g.mask = Some(self.masker.mask(&mut g.session, &g.cfg));
                g.service.attained += started.elapsed();
            }
            ready.push(i);
        }
        Ok((ready, waited))
    }

    /// Takes the step of every ready generation that needs no model (completion, forced
    /// span, or an error); returns those that need a sample.
    fn act<S: AuditSink>(
        &mut self,
        live: &mut [Live<'_>],
        ready: &[usize],
        audit: &mut ChainWriter<S>,
        stopped: &mut Vec<usize>,
    ) -> Result<Vec<usize>, WriteError> {
        let mut to_sample: Vec<usize> = Vec::new();
        for &i in ready {
            let Some(g) = live.get_mut(i) else { continue };
            let started = Instant::now();
            let mode = self.mode(g);
            let mut plan = self.plan(g);
            if let Ok(Plan::Ban(id)) = plan {
                self.ban(g, id, audit)?;
                plan = self.plan(g);
            }
            match plan {
                Err(e) => self.stop(g, audit, mode, StopReason::Error, Some(e))?,
                Ok(Plan::Complete) => self.complete(g, audit, mode)?,
                Ok(Plan::Replay(t)) => self.replayed(g, t, audit, mode)?,
                // Applied above; a second is never planned.
                Ok(Plan::Ban(_)) => {}
                Ok(Plan::Forced(run)) => self.forced(g, &run, audit, mode)?,
                Ok(Plan::Truncate) => {
                    self.stop(g, audit, mode, StopReason::BudgetTruncated, None)?
                }
                Ok(Plan::Sample) => to_sample.push(i),
            }
            g.service.attained += started.elapsed();
            if g.done.is_some() {
                stopped.push(i);
            }
        }
        Ok(to_sample)
    }

    /// One model request for every generation in `to_sample`, and their steps.
    fn sample<S: AuditSink>(
        &mut self,
        live: &mut [Live<'_>],
        to_sample: &[usize],
        model: &mut dyn Model,
        audit: &mut ChainWriter<S>,
        stopped: &mut Vec<usize>,
    ) -> Result<(), WriteError> {
        if to_sample.is_empty() {
            return Ok(());
        }
        let entry_ids: Vec<[u8; 16]> = to_sample
            .iter()
            .map(|&i| {
                live.get(i)
                    .and_then(|g| g.mask.as_ref())
                    .map_or([0; 16], mask_entry_id)
            })
            .collect();
        let result = {
            let batch: Vec<ModelStep<'_>> = to_sample
                .iter()
                .zip(&entry_ids)
                .filter_map(|(&i, id)| {
                    let g = live.get(i)?;
                    Some(ModelStep {
                        generation: g.spec.id,
                        prompt: &g.spec.prompt,
                        generated: &g.tokens,
                        mask: g.mask.as_ref()?,
                        mask_entry_id: *id,
                        seed: g.spec.seed,
                    })
                })
                .collect();
            model.step(&batch)
        };
        for (k, &i) in to_sample.iter().enumerate() {
            let Some(g) = live.get_mut(i) else { continue };
            let mode = self.mode(g);
            let choice = match &result {
                Err(e) => Err(e.clone()),
                Ok(choices) => choices
                    .get(k)
                    .cloned()
                    .unwrap_or_else(|| Err(ModelError("the model answered too few steps".into()))),
            };
            match choice {
                Err(e) => self.stop(g, audit, mode, StopReason::Error, Some(e.into()))?,
                Ok(c) => {
                    let started = Instant::now();
                    self.take(g, c, entry_ids[k], audit, mode)?;
                    g.service.attained += started.elapsed();
                }
            }
            if g.done.is_some() {
                stopped.push(i);
            }
        }
        Ok(())
    }

    fn budget_left(g: &Live<'_>) -> u32 {
        g.spec.max_tokens.saturating_sub(g.tokens.len() as u32)
    }

    fn reserve_of(&self, g: &mut Live<'_>, cfg: &Config) -> u32 {
        // A configuration's stacks are interned in the generation's own session, so an
        // equal configuration is the same recognizer state, and its reserve the same.
        if let Some((c, r)) = &g.reserved {
            if c == cfg {
                return *r;
            }
        }
        let r = g
            .spec
            .reserve
            .reserve(&mut g.session, &mut g.memo, cfg, self.speller);
        g.reserved = Some((cfg.clone(), r));
        r
    }

    fn plan(&self, g: &mut Live<'_>) -> Result<Plan, DecodeError> {
        if g.spec.unconstrained {
            return Ok(if Self::budget_left(g) == 0 {
                Plan::Truncate
            } else {
                Plan::Sample
            });
        }
        let step = g.tokens.len() as u32;
        let cfg = g.cfg.clone();
        let r = self.reserve_of(g, &cfg);
        if r == UNREACHABLE {
            return Err(DecodeError::NoCompletion { step });
        }
        if Self::budget_left(g) <= r.saturating_add(SAFETY) {
            return Ok(Plan::Complete);
        }
        let Some(mask) = g.mask.as_ref() else {
            return Err(DecodeError::NoCompletion { step });
        };
        if let Some(t) = g.to_replay() {
            return if mask.contains(t) {
                Ok(Plan::Replay(t))
            } else {
                Err(DecodeError::ReplayRefused { step, token: t })
            };
        }
        if let Some(id) = g.ban_due() {
            return Ok(Plan::Ban(id));
        }
        if mask.allowed == 0 && !mask.eos {
            return Err(DecodeError::DeadEnd { step });
        }
        if let Some(run) = &mask.forced {
            return Ok(Plan::Forced(run.clone()));
        }
        Ok(Plan::Sample)
    }

    /// The configuration after `token`, when the reserve after it still fits the budget
    /// left after it. A token of the mask that the recognizer refuses is an error, never
    /// a reason to complete: the mask and the recognizer disagree.
    fn fits(&self, g: &mut Live<'_>, token: u32) -> Result<Option<Config>, DecodeError> {
        let mut next = g.cfg.clone();
        if g.session
            .feed(&mut next, self.vocab.token_bytes(token))
            .is_err()
        {
            return Err(DecodeError::Refused {
                step: g.tokens.len() as u32,
                token,
            });
        }
        let r = self.reserve_of(g, &next);
        let Some(left) = Self::budget_left(g).checked_sub(1) else {
            return Ok(None);
        };
        Ok((r != UNREACHABLE && r <= left).then_some(next))
    }

    fn record<S: AuditSink>(
        &self,
        g: &mut Live<'_>,
        audit: &mut ChainWriter<S>,
        mask: &Mask,
        entry: [u8; 16],
        token: Token,
        kind: StepKind,
    ) -> Result<(), WriteError> {
        let input = StepInput {
            config_hash: if g.spec.unconstrained {
                0
            } else {
                config_hash(&g.session, &g.cfg)
            },
            mask_entry_id: entry,
            token,
            blocked_count: mask.blocked,
            kind,
        };
        audit.step(g.spec.id, input)?;
        Ok(())
    }

    fn advance(&self, g: &mut Live<'_>, token: u32, next: Config) {
        g.tokens.push(token);
        g.text.extend_from_slice(self.vocab.token_bytes(token));
        g.cfg = next;
        g.mask = None;
    }

    /// Writes the rewind's next token, as the model wrote it in the repaired generation.
    fn replayed<S: AuditSink>(
        &mut self,
        g: &mut Live<'_>,
        t: u32,
        audit: &mut ChainWriter<S>,
        mode: Mode,
    ) -> Result<(), WriteError> {
        let Some(mask) = g.mask.take() else {
            return Ok(());
        };
        match self.fits(g, t) {
            Ok(Some(next)) => {
                let entry = mask_entry_id(&mask);
                self.record(g, audit, &mask, entry, Token::Id(t), StepKind::Replayed)?;
                self.advance(g, t, next);
                Ok(())
            }
            Ok(None) => {
                g.mask = Some(mask);
                self.complete(g, audit, mode)
            }
            Err(e) => self.stop(g, audit, mode, StopReason::Error, Some(e)),
        }
    }

    /// Records the rewind's ban under the exact mask and takes the token out of it. A
    /// token the mask does not hold is not recorded (there is nothing to take out), nor
    /// one the mask forces, nor the first token of the budget completion there.
    fn ban<S: AuditSink>(
        &mut self,
        g: &mut Live<'_>,
        id: u32,
        audit: &mut ChainWriter<S>,
    ) -> Result<(), WriteError> {
        g.banned = true;
        let Some(mut mask) = g.mask.take() else {
            return Ok(());
        };
        // A ban that would leave no choice (a forced token) is not made: the rewind then
        // goes on as the repaired generation did. Nor one of the token the completion
        // writes first: a sample that leaves too little budget falls back on the
        // completion from here, which the ban would refuse.
        let choice_left = mask.allowed > 1 || mask.eos;
        let completes_with = self.completion(g).and_then(|t| t.first().copied());
        if choice_left
            && mask.contains(id)
            && Some(id) != self.masker.trie().eos_id()
            && completes_with != Some(id)
        {
            let entry = mask_entry_id(&mask);
            self.record(g, audit, &mask, entry, Token::Id(id), StepKind::Banned)?;
            mask.remove(id);
        }
        g.mask = Some(mask);
        Ok(())
    }

    fn forced<S: AuditSink>(
        &mut self,
        g: &mut Live<'_>,
        run: &[u32],
        audit: &mut ChainWriter<S>,
        mode: Mode,
    ) -> Result<(), WriteError> {
        let Some(first) = g.mask.take() else {
            return Ok(());
        };
        for (k, &t) in run.iter().enumerate() {
            let mask = if k == 0 {
                first.clone()
            } else {
                singleton_mask(self.n_ids(), self.n_special(), t)
            };
            let next = match self.fits(g, t) {
                Ok(Some(next)) => next,
                Ok(None) => {
                    g.mask = Some(mask);
                    return self.complete(g, audit, mode);
                }
                Err(e) => return self.stop(g, audit, mode, StopReason::Error, Some(e)),
            };
            let entry = mask_entry_id(&mask);
            self.record(g, audit, &mask, entry, Token::Id(t), StepKind::Forced)?;
            self.advance(g, t, next);
        }
        Ok(())
    }

    fn take<S: AuditSink>(
        &mut self,
        g: &mut Live<'_>,
        choice: Choice,
        entry: [u8; 16],
        audit: &mut ChainWriter<S>,
        mode: Mode,
    ) -> Result<(), WriteError> {
        let step = g.tokens.len() as u32;
        let Some(mask) = g.mask.clone() else {
            return Ok(());
        };
        let eos_id = self.masker.trie().eos_id();
        let choice = match choice {
            Choice::Token(t) if Some(t) == eos_id => Choice::Eos,
            c => c,
        };
        match choice {
            Choice::Eos => {
                if !mask.eos {
                    return self.stop(
                        g,
                        audit,
                        mode,
                        StopReason::Error,
                        Some(DecodeError::EosRefused { step }),
                    );
                }
                self.record(g, audit, &mask, entry, Token::Eos, StepKind::Eos)?;
                self.stop(g, audit, mode, StopReason::Eos, None)
            }
            Choice::Token(t) => {
                if !mask.contains(t) {
                    let e = DecodeError::OutsideMask { step, token: t };
                    return self.stop(g, audit, mode, StopReason::Error, Some(e));
                }
                if g.spec.unconstrained {
                    self.record(g, audit, &mask, entry, Token::Id(t), StepKind::Sampled)?;
                    g.tokens.push(t);
                    g.text.extend_from_slice(self.vocab.token_bytes(t));
                    g.mask = None;
                    return Ok(());
                }
                match self.fits(g, t) {
                    Ok(Some(next)) => {
                        self.record(g, audit, &mask, entry, Token::Id(t), StepKind::Sampled)?;
                        self.advance(g, t, next);
                        Ok(())
                    }
                    // The sample would leave less budget than its reserve: it is dropped
                    // and the completion is written from here.
                    Ok(None) => self.complete(g, audit, mode),
                    Err(e) => self.stop(g, audit, mode, StopReason::Error, Some(e)),
                }
            }
        }
    }

    /// The tokens of the shortest completion from `g`'s configuration (`None` when the
    /// reserve tables know none, or the speller cannot segment it).
    fn completion(&self, g: &mut Live<'_>) -> Option<Vec<u32>> {
        let cfg = g.cfg.clone();
        g.spec
            .reserve
            .completion(&mut g.session, &mut g.memo, &cfg, self.speller)
            .and_then(|bytes| self.speller.segment(&bytes))
    }

    /// Writes the shortest completion found from the current configuration, then EOS.
    fn complete<S: AuditSink>(
        &mut self,
        g: &mut Live<'_>,
        audit: &mut ChainWriter<S>,
        mode: Mode,
    ) -> Result<(), WriteError> {
        let step = g.tokens.len() as u32;
        let Some(tokens) = self.completion(g) else {
            return self.stop(
                g,
                audit,
                mode,
                StopReason::Error,
                Some(DecodeError::NoCompletion { step }),
            );
        };
        for t in tokens {
            let step = g.tokens.len() as u32;
            let mask = match g.mask.take() {
                Some(m) => m,
                None => self.masker.mask_once(&mut g.session, &g.cfg),
            };
            let mut next = g.cfg.clone();
            if !mask.contains(t)
                || g.session
                    .feed(&mut next, self.vocab.token_bytes(t))
                    .is_err()
            {
                let e = DecodeError::CompletionRefused { step, token: t };
                return self.stop(g, audit, mode, StopReason::Error, Some(e));
            }
            let entry = mask_entry_id(&mask);
            self.record(
                g,
                audit,
                &mask,
                entry,
                Token::Id(t),
                StepKind::BudgetCompleted,
            )?;
            self.advance(g, t, next);
            g.completed += 1;
        }
        let mask = match g.mask.take() {
            Some(m) => m,
            None => self.masker.mask_once(&mut g.session, &g.cfg),
        };
        if !mask.eos {
            let step = g.tokens.len() as u32;
            return self.stop(
                g,
                audit,
                mode,
                StopReason::Error,
                Some(DecodeError::NoCompletion { step }),
            );
        }
        let entry = mask_entry_id(&mask);
        self.record(g, audit, &mask, entry, Token::Eos, StepKind::Eos)?;
        self.stop(g, audit, mode, StopReason::BudgetCompleted, None)
    }

    fn stop<S: AuditSink>(
        &self,
        g: &mut Live<'_>,
        audit: &mut ChainWriter<S>,
        mode: Mode,
        stop: StopReason,
        error: Option<DecodeError>,
    ) -> Result<(), WriteError> {
        let mut meta = g.spec.meta.clone();
        if stop.ends_with_eos() {
            // The digest of the statement returned, which is decoded strictly: bytes that
            // are not its text have none.
            meta.sql_digest = std::str::from_utf8(&g.text).ok().map(text_digest);
        }
        audit.seal(
            g.spec.id,
            SealInput {
                stop,
                fingerprints: fingerprints(g.spec.language, self.vocab.fingerprint()),
                mode,
                meta,
            },
        )?;
        g.mask = None;
        g.done = Some((stop, error));
        Ok(())
    }
}

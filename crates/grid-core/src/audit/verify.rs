//! The verifier: recomputes every chain of a log and reports the first error, located at
//! the entry where it shows.

use std::collections::HashMap;
use std::fmt;

use thiserror::Error;

use super::chain::Entry;
use super::hash::{seal_genesis, to_hex, Digest32};
use super::record::StepRecord;
use super::rules::{Progress, StepRule, StopRule};
use super::seal::{Head, Seal};

/// What the verifier accepts beyond a fully sealed log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyOptions {
    /// Accept generations without a seal (in flight, or interrupted by a crash): they are
    /// listed in [`Summary::incomplete`] instead of failing with [`Reason::Unsealed`].
    /// Their records are still fully checked.
    pub allow_incomplete: bool,
    /// The external anchor exported earlier: the log must still hold seal
    /// `head.seals - 1` with hash `head.hash`. Without it a dropped tail is undetectable.
    pub expected_head: Option<Head>,
}

/// A generation with records but no seal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incomplete {
    pub generation: u64,
    /// Records seen.
    pub steps: u64,
    /// Hash of the last record.
    pub(crate) last_hash: Digest32,
    /// Index of its first record in the log.
    pub first_entry: usize,
}

/// What a verified log holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Entries read.
    pub entries: usize,
    /// Sealed generations (= seals).
    pub generations: u64,
    /// Step records, of sealed and incomplete generations.
    pub steps: u64,
    /// Seals.
    pub seals: u64,
    /// The log's head, to export as the next external anchor.
    pub head: Head,
    /// Unsealed generations (only with `allow_incomplete`), by first record.
    pub incomplete: Vec<Incomplete>,
}

/// Where in the chains an error shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// A step record, with the generation and step it carries.
    Step { generation: u64, step: u32 },
    /// A seal, with the index and generation it carries.
    Seal { index: u64, generation: u64 },
    /// A generation as a whole, at the end of the log.
    Generation { generation: u64 },
    /// The seal chain as a whole, at the end of the log.
    End,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Site::Step { generation, step } => write!(f, "generation {generation}, step {step}"),
            Site::Seal { index, generation } => {
                write!(f, "seal {index} (generation {generation})")
            }
            Site::Generation { generation } => write!(f, "generation {generation}"),
            Site::End => write!(f, "end of log"),
        }
    }
}

/// What is wrong. Every reason but [`Reason::Unsealed`] means the log was altered (or
/// written by something that breaks the writer's invariants).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Reason {
    #[error("step hash mismatch: the record's fields do not hash to its hash (recomputed {})", to_hex(.recomputed))]
    StepHashMismatch { recomputed: Digest32 },
    #[error("broken link: prev_hash is not the hash of the generation's previous record (or its genesis)")]
    BrokenLink,
    #[error("missing step(s): expected step {expected}")]
    MissingSteps { expected: u64 },
    #[error("duplicate step: step already recorded, expected step {expected}")]
    DuplicateStep { expected: u64 },
    #[error("step after the generation's seal (seal {seal})")]
    StepAfterSeal { seal: u64 },
    #[error("{0}")]
    Step(StepRule),
    #[error("seal hash mismatch: the seal's fields do not hash to its hash (recomputed {})", to_hex(.recomputed))]
    SealHashMismatch { recomputed: Digest32 },
    #[error("missing seal(s): expected seal index {expected}")]
    MissingSeals { expected: u64 },
    #[error("duplicate seal index: expected seal index {expected}")]
    DuplicateSealIndex { expected: u64 },
    #[error("seal chain break: prev_seal_hash is not the hash of the previous seal (or the seal genesis)")]
    SealChainBreak,
    #[error("generation already sealed by seal {first}")]
    SealedTwice { first: u64 },
    #[error("seal step count mismatch: sealed {sealed} steps, the log holds {found}")]
    SealStepCount { sealed: u32, found: u64 },
    #[error(
        "seal last-hash mismatch: last_step_hash is not the hash of the generation's last record"
    )]
    SealLastHash,
    #[error("{0}")]
    Stop(StopRule),
    #[error("incomplete, not tampering: generation has {steps} step(s) and no seal")]
    Unsealed { steps: u64 },
    #[error("truncated: the external head expects {expected} seals, the log holds {found}")]
    Truncated { expected: u64, found: u64 },
    #[error("head mismatch: the seal chain at {seals} seal(s) does not end in the anchored hash {}", to_hex(.expected))]
    HeadMismatch { seals: u64, expected: Digest32 },
}

impl Reason {
    /// False only for [`Reason::Unsealed`]: an in-flight or crashed generation is
    /// incomplete, not evidence of tampering.
    pub fn is_tampering(&self) -> bool {
        !matches!(self, Reason::Unsealed { .. })
    }
}

/// The first error of a log.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{}{site}: {reason}", .entry.map(|e| format!("entry {e} (line {}), ", e + 1)).unwrap_or_default())]
pub struct VerifyError {
    /// 0-based index of the entry where it shows (the JSONL line is `entry + 1`); `None`
    /// for end-of-log findings (unsealed generation, truncation).
    pub entry: Option<usize>,
    pub site: Site,
    pub reason: Reason,
}

/// A streaming verifier: feed entries in log order with [`Verifier::push`], then call
/// [`Verifier::finish`]. Memory is one `Progress` per open generation plus one seal
/// index per sealed generation.
///
/// Checks, in this order, per step record: not after its generation's seal; step number
/// equals the generation's count so far (else missing or duplicate); hash recomputes;
/// `prev_hash` links; kind rules. Per seal: hash recomputes; index equals the seal count
/// so far (else missing or duplicate); `prev_seal_hash` links; generation not sealed
/// before; step count; last step hash; stop rules; the anchor, if this is the anchored
/// seal. At the end: the anchor is reached (else truncated); no unsealed generation
/// (unless allowed). After an error the verifier's state is unspecified: stop feeding.
#[derive(Debug)]
pub struct Verifier {
    opts: VerifyOptions,
    entries: usize,
    steps: u64,
    open: HashMap<u64, (Progress, usize)>,
    sealed: HashMap<u64, u64>,
    head: Head,
}

impl Verifier {
    pub fn new(opts: VerifyOptions) -> Verifier {
        Verifier {
            opts,
            entries: 0,
            steps: 0,
            open: HashMap::new(),
            sealed: HashMap::new(),
            head: Head::genesis(),
        }
    }

    /// Checks the next entry of the log.
    pub fn push(&mut self, entry: &Entry) -> Result<(), VerifyError> {
        let at = self.entries;
        let res = match entry {
            Entry::Step(r) => self.step(r, at),
            Entry::Seal(s) => self.seal(s),
        };
        self.entries += 1;
        res.map_err(|(site, reason)| VerifyError {
            entry: Some(at),
            site,
            reason,
        })
    }

    fn step(&mut self, r: &StepRecord, at: usize) -> Result<(), (Site, Reason)> {
        let site = Site::Step {
            generation: r.generation,
            step: r.step,
        };
        if let Some(&seal) = self.sealed.get(&r.generation) {
            return Err((site, Reason::StepAfterSeal { seal }));
        }
        let (p, _) = self
            .open
            .entry(r.generation)
            .or_insert_with(|| (Progress::genesis(r.generation), at));
        let step = u64::from(r.step);
        if step > p.next_step {
            return Err((
                site,
                Reason::MissingSteps {
                    expected: p.next_step,
                },
            ));
        }
        if step < p.next_step {
            return Err((
                site,
                Reason::DuplicateStep {
                    expected: p.next_step,
                },
            ));
        }
        let recomputed = r.compute_hash();
        if recomputed != r.hash {
            return Err((site, Reason::StepHashMismatch { recomputed }));
        }
        if r.prev_hash != p.tip {
            return Err((site, Reason::BrokenLink));
        }
        p.check_step(r.token, r.kind)
            .map_err(|rule| (site, Reason::Step(rule)))?;
        p.advance(r.hash, r.kind);
        self.steps += 1;
        Ok(())
    }

    fn seal(&mut self, s: &Seal) -> Result<(), (Site, Reason)> {
        let site = Site::Seal {
            index: s.index,
            generation: s.generation,
        };
        let recomputed = s.compute_hash();
        if recomputed != s.hash {
            return Err((site, Reason::SealHashMismatch { recomputed }));
        }
        let expected = self.head.seals;
        if s.index > expected {
            return Err((site, Reason::MissingSeals { expected }));
        }
        if s.index < expected {
            return Err((site, Reason::DuplicateSealIndex { expected }));
        }
        if s.prev_seal_hash != self.head.hash {
            return Err((site, Reason::SealChainBreak));
        }
        if let Some(&first) = self.sealed.get(&s.generation) {
            return Err((site, Reason::SealedTwice { first }));
        }
        let genesis = Progress::genesis(s.generation);
        let p = self.open.get(&s.generation).map_or(&genesis, |(p, _)| p);
        if u64::from(s.steps) != p.next_step {
            return Err((
                site,
                Reason::SealStepCount {
                    sealed: s.steps,
                    found: p.next_step,
                },
            ));
        }
        if s.last_step_hash != p.tip {
            return Err((site, Reason::SealLastHash));
        }
        p.check_stop(s.stop, s.mode)
            .map_err(|rule| (site, Reason::Stop(rule)))?;
        if let Some(h) = self.opts.expected_head {
            if h.seals == s.index.saturating_add(1) && h.hash != s.hash {
                return Err((
                    site,
                    Reason::HeadMismatch {
                        seals: h.seals,
                        expected: h.hash,
                    },
                ));
            }
        }
        self.open.remove(&s.generation);
        self.sealed.insert(s.generation, s.index);
        self.head = s.head();
        Ok(())
    }

    /// Ends the log: checks the anchor and unsealed generations, and summarises.
    pub fn finish(self) -> Result<Summary, VerifyError> {
        if let Some(h) = self.opts.expected_head {
            if h.seals > self.head.seals {
                return Err(VerifyError {
                    entry: None,
                    site: Site::End,
                    reason: Reason::Truncated {
                        expected: h.seals,
                        found: self.head.seals,
                    },
                });
            }
            // `seals == 0` is never reached by a seal: the anchor is the genesis constant.
            if h.seals == 0 && h.hash != seal_genesis() {
                return Err(VerifyError {
                    entry: None,
                    site: Site::End,
                    reason: Reason::HeadMismatch {
                        seals: 0,
                        expected: h.hash,
                    },
                });
            }
        }
        let mut incomplete: Vec<Incomplete> = self
            .open
            .iter()
            .map(|(&generation, (p, first))| Incomplete {
                generation,
                steps: p.next_step,
                last_hash: p.tip,
                first_entry: *first,
            })
            .collect();
        incomplete.sort_by_key(|i| i.first_entry);
        if !self.opts.allow_incomplete {
            if let Some(i) = incomplete.first() {
                return Err(VerifyError {
                    entry: None,
                    site: Site::Generation {
                        generation: i.generation,
                    },
                    reason: Reason::Unsealed { steps: i.steps },
                });
            }
        }
        Ok(Summary {
            entries: self.entries,
            generations: self.head.seals,
            steps: self.steps,
            seals: self.head.seals,
            head: self.head,
            incomplete,
        })
    }
}

/// Verifies a whole log in memory.
pub fn verify(entries: &[Entry], opts: &VerifyOptions) -> Result<Summary, VerifyError> {
    let mut v = Verifier::new(opts.clone());
    for e in entries {
        v.push(e)?;
    }
    v.finish()
}

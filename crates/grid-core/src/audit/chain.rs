//! The writer: appends step records and seals for many concurrent generations, keeping
//! each generation's chain and the global seal chain, and hands every finished entry to a
//! sink (memory, a JSONL file, or the extension's audit tables).

use std::collections::HashMap;

use thiserror::Error;

use super::hash::Digest32;
use super::record::{StepKind, StepRecord, Token};
use super::rules::{Progress, StepRule, StopRule};
use super::seal::{Fingerprints, Head, Mode, Seal, SealMeta, StopReason};

/// One line of the log: a step record or a seal, in the order they were appended.
// A seal is larger than a step (its optional verdict and prompt digest), but there is one
// per generation against hundreds of steps, and entries go to sinks by reference: boxing
// it would cost every reader a pointer for no memory that matters.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Step(StepRecord),
    Seal(Seal),
}

impl Entry {
    /// The generation the entry belongs to.
    pub fn generation(&self) -> u64 {
        match self {
            Entry::Step(r) => r.generation,
            Entry::Seal(s) => s.generation,
        }
    }
}

/// The error a sink reports; the writer passes it on unchanged.
pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

/// Where finished entries go. `append` must either store the entry durably (as durably as
/// the sink promises) or fail; the writer advances its chain state only after success,
/// so a failed append can be retried with the same input.
pub trait AuditSink {
    fn append(&mut self, entry: &Entry) -> Result<(), SinkError>;
}

/// The in-memory sink: the log is the vector.
impl AuditSink for Vec<Entry> {
    fn append(&mut self, entry: &Entry) -> Result<(), SinkError> {
        self.push(entry.clone());
        Ok(())
    }
}

/// What the decode loop knows about a step; the writer adds the generation, the step
/// number and the hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepInput {
    pub config_hash: u64,
    pub mask_entry_id: [u8; 16],
    pub token: Token,
    pub blocked_count: u32,
    pub kind: StepKind,
}

/// What the decode loop knows when a generation stops; the writer adds the index, the
/// step count and the hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealInput {
    pub stop: StopReason,
    pub fingerprints: Fingerprints,
    pub mode: Mode,
    pub meta: SealMeta,
}

/// A write the chain refuses. Nothing was appended when one is returned.
#[derive(Debug, Error)]
pub enum WriteError {
    #[error("generation {0} is already open")]
    AlreadyOpen(u64),
    #[error("generation {0} is not open (never begun, or already sealed)")]
    NotOpen(u64),
    #[error("generation {generation} has 2^32 steps already")]
    TooManySteps { generation: u64 },
    #[error("generation {generation}, step {step}: {rule}")]
    Step {
        generation: u64,
        step: u64,
        rule: StepRule,
    },
    #[error("generation {generation}: cannot seal: {rule}")]
    Stop { generation: u64, rule: StopRule },
    #[error("the seal chain is full")]
    TooManySeals,
    #[error("audit sink: {0}")]
    Sink(#[source] SinkError),
}

/// Appends records and seals, keeping every chain.
///
/// State: `open` maps each begun, unsealed generation to its `Progress`; `head` is the
/// global seal chain's head. Invariant: every entry handed to the sink satisfies the
/// verifier's rules given the entries handed before it (hashes computed here, links taken
/// from `open`/`head`, step and stop rules from `rules.rs`).
///
/// A `ChainWriter` is `Send` when its sink is; generations driven from several threads
/// share one writer behind a lock (appends are short and never block on the model).
/// Generation ids must be unique: the writer refuses to begin an open id, but does not
/// remember sealed ones (that would grow without bound); reuse of a sealed id is caught
/// by the verifier (a step or seal after the generation's seal).
#[derive(Debug)]
pub struct ChainWriter<S> {
    sink: S,
    open: HashMap<u64, Progress>,
    head: Head,
}

/// The in-memory audit log: a writer whose sink is a `Vec<Entry>`.
pub type AuditLog = ChainWriter<Vec<Entry>>;

impl AuditLog {
    /// An empty in-memory log.
    pub fn in_memory() -> AuditLog {
        ChainWriter::new(Vec::new())
    }

    /// Every entry so far, in append order.
    pub fn entries(&self) -> &[Entry] {
        &self.sink
    }
}

impl<S: AuditSink> ChainWriter<S> {
    /// A writer starting a new log (seal chain at genesis).
    pub fn new(sink: S) -> Self {
        Self::resume(sink, Head::genesis())
    }

    /// A writer continuing a log whose seal chain ends at `head` (e.g. read back from the
    /// audit table after a restart). Generations that were open when the previous writer
    /// stopped stay unsealed: the verifier reports them as incomplete.
    pub fn resume(sink: S, head: Head) -> Self {
        ChainWriter {
            sink,
            open: HashMap::new(),
            head,
        }
    }

    /// Opens a generation; its first record will chain from its genesis constant.
    pub fn begin(&mut self, generation: u64) -> Result<(), WriteError> {
        if self.open.contains_key(&generation) {
            return Err(WriteError::AlreadyOpen(generation));
        }
        self.open.insert(generation, Progress::genesis(generation));
        Ok(())
    }

    /// Appends the next step of an open generation and returns its hash.
    pub fn step(&mut self, generation: u64, input: StepInput) -> Result<Digest32, WriteError> {
        let p = self
            .open
            .get(&generation)
            .ok_or(WriteError::NotOpen(generation))?;
        let step =
            u32::try_from(p.next_step).map_err(|_| WriteError::TooManySteps { generation })?;
        p.check_step(input.token, input.kind)
            .map_err(|rule| WriteError::Step {
                generation,
                step: p.next_step,
                rule,
            })?;
        let mut rec = StepRecord {
            generation,
            step,
            config_hash: input.config_hash,
            mask_entry_id: input.mask_entry_id,
            token: input.token,
            blocked_count: input.blocked_count,
            kind: input.kind,
            prev_hash: p.tip,
            hash: [0; 32],
        };
        rec.hash = rec.compute_hash();
        let hash = rec.hash;
        self.sink
            .append(&Entry::Step(rec))
            .map_err(WriteError::Sink)?;
        if let Some(p) = self.open.get_mut(&generation) {
            p.advance(hash, input.kind);
        }
        Ok(hash)
    }

    /// Seals an open generation, appending its seal to the global chain; returns the new
    /// head. The generation is closed afterwards.
    pub fn seal(&mut self, generation: u64, input: SealInput) -> Result<Head, WriteError> {
        let p = self
            .open
            .get(&generation)
            .ok_or(WriteError::NotOpen(generation))?;
        p.check_stop(input.stop, input.mode)
            .map_err(|rule| WriteError::Stop { generation, rule })?;
        let steps =
            u32::try_from(p.next_step).map_err(|_| WriteError::TooManySteps { generation })?;
        if self.head.seals == u64::MAX {
            return Err(WriteError::TooManySeals);
        }
        let mut seal = Seal {
            index: self.head.seals,
            generation,
            stop: input.stop,
            steps,
            last_step_hash: p.tip,
            fingerprints: input.fingerprints,
            mode: input.mode,
            meta: input.meta,
            prev_seal_hash: self.head.hash,
            hash: [0; 32],
        };
        seal.hash = seal.compute_hash();
        let head = seal.head();
        self.sink
            .append(&Entry::Seal(seal))
            .map_err(WriteError::Sink)?;
        self.open.remove(&generation);
        self.head = head;
        Ok(head)
    }

    /// The seal chain's head: `(seal count, last seal hash)`, the external anchor.
    pub fn head(&self) -> Head {
        self.head
    }

    /// Generations begun and not yet sealed, in no particular order.
    pub fn open_generations(&self) -> impl Iterator<Item = u64> + '_ {
        self.open.keys().copied()
    }

    /// The sink.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// The sink, mutably (e.g. to flush it).
    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
    }

    /// Gives the sink back; open generations stay unsealed.
    pub fn into_sink(self) -> S {
        self.sink
    }
}

//! Verifying the audit store: its rows, merged back into one log in `entry` order, go
//! through grid-core's streaming `Verifier`; no hash is recomputed here.
//!
//! On top of the chains, each seal's question and SQL digests are checked against the
//! texts stored beside them (grid-core's `text_digest`), so that an edit of
//! `grid.generations.question` or `.final_sql` shows too; and once the chains hold, every
//! artifact a seal names must be in `grid.artifacts` (else the generation cannot be
//! replayed), every stored artifact must still have its content digest, every seal
//! with a prompt digest must find the prompt and the artifact contents it bound, and
//! every stored artifact must be one a seal binds (`artifacts`).

use std::collections::VecDeque;

use grid_core::audit::{text_digest, Entry, Head, Site, StepRecord, Verifier, VerifyOptions};
use pgrx::prelude::*;
use pgrx::spi::{SpiClient, SpiCursor, SpiHeapTupleData};

use super::artifacts;
use super::rows::{self, RowError, SealRow, SEAL_COLUMNS, STEP_COLUMNS};
use super::sink::StoreError;

/// Rows fetched per round trip of each cursor: bounds memory whatever the log's size.
const BATCH: i64 = 1000;

/// The first problem of the store, located as precisely as it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub generation: Option<i64>,
    pub step: Option<i32>,
    pub reason: String,
}

/// What `grid.verify_audit()` returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Rows (step records, seals, then feedback records) that passed before the first
    /// problem, or all rows.
    pub checked: i64,
    /// The first problem; `None` when the log verifies.
    pub finding: Option<Finding>,
    /// Generations with step records and no seal yet: in flight, or interrupted by a
    /// crash. Not a failure (the verifier still checked their records).
    pub unsealed: usize,
    /// Sealed generations without a prompt digest (written before prompts were
    /// sealed): their artifacts are checked for presence, not for content.
    pub unbound: i64,
}

/// One row read back: its log position and the entry it holds (or why it holds none).
struct Read {
    entry: i64,
    generation: Option<i64>,
    step: Option<i32>,
    value: Result<Item, RowError>,
}

enum Item {
    Step(StepRecord),
    Seal(Box<SealRow>),
}

/// One of the two tables, read in `entry` order through a cursor, a batch at a time.
struct Rows<'c> {
    cursor: SpiCursor<'c>,
    buffer: VecDeque<Read>,
    exhausted: bool,
    convert: fn(&SpiHeapTupleData<'_>) -> Read,
}

impl<'c> Rows<'c> {
    fn open(
        client: &SpiClient<'c>,
        query: &str,
        convert: fn(&SpiHeapTupleData<'_>) -> Read,
    ) -> Result<Rows<'c>, StoreError> {
        Ok(Rows {
            cursor: client.try_open_cursor(query, &[])?,
            buffer: VecDeque::new(),
            exhausted: false,
            convert,
        })
    }

    /// The next row's log position, fetching a batch when the buffer is empty.
    fn peek(&mut self) -> Result<Option<i64>, StoreError> {
        if self.buffer.is_empty() && !self.exhausted {
            let table = self.cursor.fetch(BATCH)?;
            let before = self.buffer.len();
            for row in table {
                self.buffer.push_back((self.convert)(&row));
            }
            self.exhausted = self.buffer.len() == before;
        }
        Ok(self.buffer.front().map(|r| r.entry))
    }

    fn pop(&mut self) -> Option<Read> {
        self.buffer.pop_front()
    }
}

fn read_step(row: &SpiHeapTupleData<'_>) -> Read {
    let (entry, generation) = rows::locate(row);
    Read {
        entry: entry.unwrap_or(i64::MIN),
        generation,
        step: rows::step_number(row),
        value: rows::step_from_row(row).map(Item::Step),
    }
}

fn read_seal(row: &SpiHeapTupleData<'_>) -> Read {
    let (entry, generation) = rows::locate(row);
    Read {
        entry: entry.unwrap_or(i64::MIN),
        generation,
        step: None,
        value: rows::seal_from_row(row).map(|s| Item::Seal(Box::new(s))),
    }
}

fn located(site: Site) -> (Option<i64>, Option<i32>) {
    match site {
        Site::Step { generation, step } => {
            (i64::try_from(generation).ok(), i32::try_from(step).ok())
        }
        Site::Seal { generation, .. } | Site::Generation { generation } => {
            (i64::try_from(generation).ok(), None)
        }
        Site::End => (None, None),
    }
}

/// The first text whose digest does not match its seal, if any.
fn text_mismatch(s: &SealRow) -> Option<&'static str> {
    let differs = |text: &Option<String>, digest: &Option<[u8; 32]>| match (text, digest) {
        (Some(t), Some(d)) => text_digest(t) != *d,
        (Some(_), None) | (None, Some(_)) => true,
        (None, None) => false,
    };
    if differs(&s.question, &s.seal.meta.question_digest) {
        Some("question does not match the sealed question_digest")
    } else if differs(&s.final_sql, &s.seal.meta.sql_digest) {
        Some("final_sql does not match the sealed sql_digest")
    } else {
        None
    }
}

/// Verifies the whole store as committed when it is called, against `expected_head` (the
/// seal chain's) and `expected_feedback_head` (the feedback chain's) if given.
pub fn verify_store(
    expected_head: Option<Head>,
    expected_feedback_head: Option<Head>,
) -> Result<Outcome, StoreError> {
    Spi::connect(|client| {
        // The seals first: each cursor reads its own snapshot, and the worker may commit
        // a generation between the two. Every seal the first snapshot holds then has its
        // steps in the second; steps whose seal came too late read as a generation in
        // flight, never as a seal without its steps.
        let mut seals = Rows::open(
            client,
            &format!("SELECT {SEAL_COLUMNS} FROM grid.generations ORDER BY entry"),
            read_seal,
        )?;
        let mut steps = Rows::open(
            client,
            &format!("SELECT {STEP_COLUMNS} FROM grid.audit_log ORDER BY entry"),
            read_step,
        )?;
        let mut verifier = Verifier::new(VerifyOptions {
            allow_incomplete: true,
            expected_head,
        });
        let mut checked: i64 = 0;
        loop {
            let next = match (steps.peek()?, seals.peek()?) {
                (None, None) => break,
                (Some(_), None) => steps.pop(),
                (None, Some(_)) => seals.pop(),
                (Some(a), Some(b)) => {
                    if a <= b {
                        steps.pop()
                    } else {
                        seals.pop()
                    }
                }
            };
            let Some(read) = next else { break };
            let fail = |reason: String| Outcome {
                checked,
                finding: Some(Finding {
                    generation: read.generation,
                    step: read.step,
                    reason,
                }),
                unsealed: 0,
                unbound: 0,
            };
            let (entry, texts) = match read.value {
                Err(e) => return Ok(fail(format!("malformed row (entry {}): {e}", read.entry))),
                Ok(Item::Step(r)) => (Entry::Step(r), None),
                Ok(Item::Seal(s)) => {
                    let mismatch = text_mismatch(&s);
                    (Entry::Seal(s.seal), mismatch)
                }
            };
            if let Err(e) = verifier.push(&entry) {
                let (generation, step) = located(e.site);
                return Ok(Outcome {
                    checked,
                    finding: Some(Finding {
                        generation,
                        step,
                        reason: format!("{}: {}", e.site, e.reason),
                    }),
                    unsealed: 0,
                    unbound: 0,
                });
            }
            if let Some(reason) = texts {
                return Ok(fail(format!(
                    "seal of generation {}: {reason}",
                    read.generation.unwrap_or(-1)
                )));
            }
            checked += 1;
        }
        match verifier.finish() {
            Ok(summary) => {
                if let Some((entry, generation, what)) = artifacts::first_missing()? {
                    // The chains hold: what is left is whether every seal can be replayed.
                    return Ok(Outcome {
                        checked: artifacts::rows_before(entry)?,
                        finding: Some(Finding {
                            generation: Some(generation),
                            step: None,
                            reason: format!(
                                "seal of generation {generation}: its {what} is missing from grid.artifacts"
                            ),
                        }),
                        unsealed: 0,
                        unbound: 0,
                    });
                }
                // And whether the artifacts are the contents the seals bound.
                let altered = match artifacts::first_altered_row()? {
                    Some(a) => Some(a),
                    None => artifacts::first_unbound()?,
                };
                if let Some(a) = altered {
                    return Ok(Outcome {
                        checked: artifacts::rows_before(a.entry)?,
                        finding: Some(Finding {
                            generation: a.generations.first().copied(),
                            step: None,
                            reason: a.reason,
                        }),
                        unsealed: 0,
                        unbound: 0,
                    });
                }
                // And whether every stored artifact is one a seal binds.
                if let (n @ 1.., Some(first)) = artifacts::unbound_rows()? {
                    return Ok(Outcome {
                        checked,
                        finding: Some(Finding {
                            generation: None,
                            step: None,
                            reason: format!(
                                "{n} row(s) of grid.artifacts are bound by no seal (stored by \
                                 hand, not by a generation), the first: the {first}"
                            ),
                        }),
                        unsealed: 0,
                        unbound: 0,
                    });
                }
                // And the feedback chain, which binds the seals verified above.
                let feedback = super::feedback::verify(client, expected_feedback_head)?;
                let checked = checked + feedback.checked;
                if feedback.finding.is_some() {
                    return Ok(Outcome {
                        checked,
                        finding: feedback.finding,
                        unsealed: 0,
                        unbound: 0,
                    });
                }
                Ok(Outcome {
                    checked,
                    finding: None,
                    unsealed: summary.incomplete.len(),
                    unbound: artifacts::unbound_generations()?,
                })
            }
            Err(e) => {
                let (generation, step) = located(e.site);
                Ok(Outcome {
                    checked,
                    finding: Some(Finding {
                        generation,
                        step,
                        reason: format!("{}: {}", e.site, e.reason),
                    }),
                    unsealed: 0,
                    unbound: 0,
                })
            }
        }
    })
}

//! `grid.replay(generation)`: recomputes one generation's masks from the archived
//! artifacts (the catalog snapshot and policy the role had, the vocabulary, the dialect)
//! and compares every step with what the log committed to. It answers "was the model
//! really allowed to say this?" long after the schema or the grants have changed.
//!
//! A seal with a prompt digest names the exact contents it bound: the replay reads those,
//! refuses when they are not stored or not what was bound, and refuses when the archived
//! prompt is not the one the archived snapshot renders for the question (so the snapshot
//! the masks replay from is the one the model was shown). A seal without one (written
//! before prompts were sealed) replays from what its fingerprints address, as before.

use grid_core::audit::{replay_generation, to_hex, StepRecord, StopReason};
use grid_core::catalog::CatalogSnapshot;
use grid_core::decode::Recomputer;
use pgrx::prelude::*;

use std::collections::BTreeMap;

use grid_ask::contents::{check_bound, check_listed, prompt_fingerprint, PromptRecord};
use grid_ask::replay::check_rendering;
use grid_ask::{Artifact, ArtifactKind};

use super::artifacts;
use super::rows::{self, SealRow, SEAL_COLUMNS, STEP_COLUMNS};
use super::sink::StoreError;

/// A generation's artifacts as loaded for its replay, and the prompt record its seal
/// bound (none in a seal written before prompts were sealed).
struct Loaded {
    record: Option<PromptRecord>,
    got: BTreeMap<ArtifactKind, Artifact>,
}

impl Loaded {
    fn document(&self, kind: ArtifactKind) -> Option<serde_json::Value> {
        self.got.get(&kind).and_then(|a| a.content_json.clone())
    }
}

/// How a replay ended.
pub struct Replayed {
    pub ok: bool,
    pub steps: i64,
    pub first_bad_step: Option<i32>,
    pub reason: Option<String>,
}

impl Replayed {
    fn refused(reason: impl Into<String>) -> Replayed {
        Replayed {
            ok: false,
            steps: 0,
            first_bad_step: None,
            reason: Some(reason.into()),
        }
    }
}

/// The generation's seal and steps as stored.
pub fn read(generation: i64) -> Result<(Option<SealRow>, Vec<StepRecord>), String> {
    Spi::connect(|client| {
        let seal = client
            .select(
                &format!("SELECT {SEAL_COLUMNS} FROM grid.generations WHERE generation = $1"),
                None,
                &[generation.into()],
            )
            .map_err(|e| e.to_string())?
            .next()
            .map(|row| rows::seal_from_row(&row).map_err(|e| e.to_string()))
            .transpose()?;
        let mut steps = Vec::new();
        for row in client
            .select(
                &format!(
                    "SELECT {STEP_COLUMNS} FROM grid.audit_log WHERE generation = $1 ORDER BY step"
                ),
                None,
                &[generation.into()],
            )
            .map_err(|e| e.to_string())?
        {
            steps.push(rows::step_from_row(&row).map_err(|e| e.to_string())?);
        }
        Ok((seal, steps))
    })
}

/// Why the stored verdict of the checker on `sql` (`grid.generations.refused`, not
/// hashed) is not the one the checker gives against the archived snapshot, if it is not.
/// For a decline (which the checker never sees) the stored verdict is the decline's
/// ([`grid_ask::record::recorded_refusal`]).
fn verdict_differs(
    generation: i64,
    sql: &str,
    snapshot: &CatalogSnapshot,
) -> Result<Option<String>, StoreError> {
    let stored: Option<String> = Spi::get_one_with_args(
        "SELECT refused FROM grid.generations WHERE generation = $1",
        &[generation.into()],
    )?;
    let recomputed = grid_ask::record::recorded_refusal(sql, snapshot);
    if stored == recomputed {
        return judged_inconsistency(generation, recomputed.is_some());
    }
    Ok((stored != recomputed).then(|| {
        format!(
            "the masks replay, but the checker's verdict on the final statement differs: \
             stored refused = {}, recomputed from the archived snapshot = {}",
            stored
                .as_deref()
                .map_or("NULL".to_string(), |s| format!("{s:?}")),
            recomputed
                .as_deref()
                .map_or("NULL".to_string(), |s| format!("{s:?}")),
        )
    }))
}

/// Why the judge's recorded verdict on `generation` (sealed; the judge cannot be run
/// again: it planned as the caller against the catalog of that moment) does not fit the
/// rest of the record, if it does not ([`grid_ask::judge::recorded_inconsistency`]:
/// only a statement the checker passed is judged, a verdict is canonical, only a failed
/// one is repaired). `refused`: whether the checker refuses the statement, recomputed.
fn judged_inconsistency(generation: i64, refused: bool) -> Result<Option<String>, StoreError> {
    let verdict: Option<String> = Spi::get_one_with_args(
        "SELECT verdict FROM grid.generations WHERE generation = $1",
        &[generation.into()],
    )?;
    let repaired = Spi::get_one_with_args::<bool>(
        "SELECT EXISTS (SELECT FROM grid.generations WHERE repair_of = $1)",
        &[generation.into()],
    )?
    .unwrap_or(false);
    Ok(
        grid_ask::judge::recorded_inconsistency(verdict.as_deref(), refused, repaired)
            .map(|why| format!("the masks replay, but {why}")),
    )
}

/// Replays `generation`.
pub fn replay(generation: i64) -> Result<Replayed, StoreError> {
    let (seal, steps) = match read(generation) {
        Ok(r) => r,
        Err(e) => return Ok(Replayed::refused(format!("unreadable rows: {e}"))),
    };
    let Some(seal) = seal else {
        let why = if steps.is_empty() {
            format!("no generation {generation} in the audit store")
        } else {
            format!("generation {generation} has no seal (in flight, or interrupted)")
        };
        return Ok(Replayed::refused(why));
    };
    let (final_sql, question) = (seal.final_sql, seal.question);
    let seal = seal.seal;
    if steps.is_empty() && seal.steps == 0 {
        // An ask that failed before its first step: nothing to recompute.
        return Ok(Replayed {
            ok: true,
            steps: 0,
            first_bad_step: None,
            reason: Some(format!(
                "generation {generation} has no steps (stop {})",
                seal.stop.name()
            )),
        });
    }
    let f = seal.fingerprints;
    let loaded = Spi::connect(|client| -> Result<Result<Loaded, String>, StoreError> {
        // A seal with a prompt digest names each content it bound; one without (written
        // before prompts were sealed) is replayed from what its fingerprints address.
        let (record, digest_of) = match &seal.meta.prompt_digest {
            None => (None, BTreeMap::new()),
            Some(d) => {
                let fp = prompt_fingerprint(d);
                let Some(prompt) = artifacts::load(client, ArtifactKind::Prompt, &fp, Some(d))?
                else {
                    return Ok(Err(format!(
                        "the prompt artifact {} is not in grid.artifacts",
                        to_hex(&fp)
                    )));
                };
                match check_bound(d, &prompt, |_| None) {
                    Ok(r) => {
                        let listed = r.artifacts.clone();
                        (Some(r), listed)
                    }
                    Err(e) => return Ok(Err(e.to_string())),
                }
            }
        };
        let mut got = BTreeMap::new();
        for kind in [
            ArtifactKind::Grammar,
            ArtifactKind::Lexicons,
            ArtifactKind::Vocabulary,
        ] {
            let fp = kind.of(&f).unwrap_or_default();
            let listed = digest_of.get(kind.name());
            let Some(a) = artifacts::load(client, kind, &fp, listed)? else {
                return Ok(Err(format!(
                    "the {} artifact {} {}is not in grid.artifacts",
                    kind.name(),
                    to_hex(&fp),
                    if listed.is_some() {
                        "with the content the seal bound "
                    } else {
                        ""
                    }
                )));
            };
            if let Some(r) = &record {
                if let Err(e) = check_listed(r, &a) {
                    return Ok(Err(e.to_string()));
                }
            }
            got.insert(kind, a);
        }
        Ok(Ok(Loaded { record, got }))
    })?;
    let loaded = match loaded {
        Ok(l) => l,
        Err(why) => return Ok(Replayed::refused(why)),
    };
    let (grammar, lexicons, vocabulary) = (
        loaded.document(ArtifactKind::Grammar),
        loaded.document(ArtifactKind::Lexicons),
        loaded
            .got
            .get(&ArtifactKind::Vocabulary)
            .and_then(|a| a.content.clone()),
    );
    let (Some(grammar), Some(lexicons), Some(vocabulary)) = (grammar, lexicons, vocabulary) else {
        return Ok(Replayed::refused(
            "an artifact of the generation has neither the document nor the bytes a replay reads",
        ));
    };
    let inputs = match grid_ask::replay::from_artifacts(&grammar, &lexicons, &vocabulary) {
        Ok(i) => i,
        Err(e) => return Ok(Replayed::refused(e)),
    };
    // The prompt the model was shown must be the one the archived snapshot renders.
    if let Some(record) = &loaded.record {
        let repair = Spi::get_one_with_args::<bool>(
            "SELECT repair_of IS NOT NULL FROM grid.generations WHERE generation = $1",
            &[generation.into()],
        )?
        .unwrap_or(false);
        if let Err(why) = check_rendering(
            record,
            &inputs.snapshot,
            &inputs.language.dialect,
            question.as_deref().unwrap_or_default(),
            repair,
        ) {
            return Ok(Replayed::refused(why));
        }
    }
    let (snapshot, language) = (&inputs.snapshot, &inputs.language);
    let mut rc = Recomputer::new(inputs.trie.clone(), &inputs.vocab);
    let replayed = replay_generation(&steps, &seal, &mut |ctx| rc.recompute(language, ctx));
    Ok(match replayed {
        Ok(n) => {
            let steps = i64::try_from(n).unwrap_or(i64::MAX);
            let verdict = match (seal.stop, final_sql) {
                (
                    StopReason::Eos | StopReason::BudgetCompleted | StopReason::BudgetTruncated,
                    Some(sql),
                ) => verdict_differs(generation, &sql, snapshot)?,
                _ => None,
            };
            Replayed {
                ok: verdict.is_none(),
                steps,
                first_bad_step: None,
                reason: verdict,
            }
        }
        Err(e) => {
            let step = match &e {
                grid_core::audit::ReplayError::Mismatch { step, .. }
                | grid_core::audit::ReplayError::TokenNotAllowed { step, .. }
                | grid_core::audit::ReplayError::Recompute { step, .. } => {
                    i32::try_from(*step).ok()
                }
                _ => None,
            };
            Replayed {
                ok: false,
                steps: i64::from(step.unwrap_or(0)),
                first_bad_step: step,
                reason: Some(e.to_string()),
            }
        }
    })
}

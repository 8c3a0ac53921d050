//! `grid.replay(generation)`: recomputes one generation's masks from the archived
//! artifacts (the catalog snapshot and policy the role had, the vocabulary, the dialect)
//! and compares every step with what the log committed to. It answers "was the model
//! really allowed to say this?" long after the schema or the grants have changed.

use grid_core::audit::{replay_generation, to_hex, StepRecord, StopReason};
use grid_core::catalog::CatalogSnapshot;
use grid_core::checker;
use grid_core::decode::Recomputer;
use pgrx::prelude::*;

use super::rows::{self, SealRow, SEAL_COLUMNS, STEP_COLUMNS};
use super::sink::StoreError;

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

/// An artifact's stored content: its bytes and its document, either may be absent.
type Content = (Option<Vec<u8>>, Option<serde_json::Value>);

fn artifact(kind: &str, fingerprint: &[u8; 16]) -> Result<Option<Content>, StoreError> {
    Spi::connect(|client| {
        let table = client.select(
            "SELECT content, content_json FROM grid.artifacts WHERE kind = $1 AND fingerprint = $2",
            None,
            &[kind.into(), fingerprint.to_vec().into()],
        )?;
        if table.is_empty() {
            return Ok(None);
        }
        let row = table.first();
        Ok(Some((
            row.get::<Vec<u8>>(1)?,
            row.get::<pgrx::JsonB>(2)?.map(|j| j.0),
        )))
    })
}

/// Why the stored verdict of the checker on `sql` (`grid.generations.refused`, not
/// hashed) is not the one the checker gives against the archived snapshot, if it is not.
fn verdict_differs(
    generation: i64,
    sql: &str,
    snapshot: &CatalogSnapshot,
) -> Result<Option<String>, StoreError> {
    let stored: Option<String> = Spi::get_one_with_args(
        "SELECT refused FROM grid.generations WHERE generation = $1",
        &[generation.into()],
    )?;
    let recomputed = grid_ask::record::refusal(&checker::check(sql, snapshot));
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
    let final_sql = seal.final_sql;
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
    let missing = |kind: &str, fp: &[u8; 16]| {
        Replayed::refused(format!(
            "the {kind} artifact {} is not in grid.artifacts",
            to_hex(fp)
        ))
    };
    let Some((_, Some(grammar))) = artifact("grammar", &f.grammar)? else {
        return Ok(missing("grammar", &f.grammar));
    };
    let Some((_, Some(lexicons))) = artifact("lexicons", &f.lexicons)? else {
        return Ok(missing("lexicons", &f.lexicons));
    };
    let Some((Some(vocabulary), _)) = artifact("vocabulary", &f.vocabulary)? else {
        return Ok(missing("vocabulary", &f.vocabulary));
    };
    let inputs = match grid_ask::replay::from_artifacts(&grammar, &lexicons, &vocabulary) {
        Ok(i) => i,
        Err(e) => return Ok(Replayed::refused(e)),
    };
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

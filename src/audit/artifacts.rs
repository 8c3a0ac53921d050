//! `grid.artifacts`: the inputs a replay needs (grammar, lexicons, policy, vocabulary),
//! content-addressed by the fingerprints the seals carry. Stored insert-if-absent: the
//! same fingerprint is the same content, so a second generation that uses an artifact
//! adds nothing.

use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;

use grid_ask::ArtifactKind;

use super::sink::StoreError;

/// Stores an artifact unless one of that kind and fingerprint is there already.
pub fn store(
    kind: ArtifactKind,
    fingerprint: [u8; 16],
    content: Option<Vec<u8>>,
    content_json: Option<serde_json::Value>,
) -> Result<(), StoreError> {
    let args: Vec<DatumWithOid> = vec![
        kind.name().into(),
        fingerprint.to_vec().into(),
        content.into(),
        content_json.map(pgrx::JsonB).into(),
    ];
    // DO NOTHING fires no UPDATE trigger: the append-only guard stays as it is.
    Spi::run_with_args(
        "INSERT INTO grid.artifacts (kind, fingerprint, content, content_json) \
         VALUES ($1, $2, $3, $4) ON CONFLICT (kind, fingerprint) DO NOTHING",
        &args,
    )?;
    Ok(())
}

/// The first seal, in append order, that names an artifact `grid.artifacts` lacks: its
/// log position, generation, and which artifact.
pub fn first_missing() -> Result<Option<(i64, i64, String)>, StoreError> {
    Spi::connect(|client| {
        let table = client.select(
            "SELECT g.entry, g.generation,
                    k.kind || ' artifact ' || pg_catalog.encode(k.fp, 'hex')
               FROM grid.generations g
              CROSS JOIN LATERAL (VALUES (1, 'grammar', g.grammar_fp),
                                         (2, 'lexicons', g.lexicons_fp),
                                         (3, 'policy', g.policy_fp),
                                         (4, 'vocabulary', g.vocabulary_fp)) AS k(n, kind, fp)
              WHERE NOT EXISTS (SELECT 1 FROM grid.artifacts a
                                 WHERE a.kind = k.kind AND a.fingerprint = k.fp)
              ORDER BY g.entry, k.n
              LIMIT 1",
            None,
            &[],
        )?;
        if table.is_empty() {
            return Ok(None);
        }
        let row = table.first();
        Ok(
            match (
                row.get::<i64>(1)?,
                row.get::<i64>(2)?,
                row.get::<String>(3)?,
            ) {
                (Some(entry), Some(generation), Some(what)) => Some((entry, generation, what)),
                _ => None,
            },
        )
    })
}

/// Rows of both log tables before log position `entry`.
pub fn rows_before(entry: i64) -> Result<i64, StoreError> {
    Ok(Spi::get_one_with_args::<i64>(
        "SELECT (SELECT count(*) FROM grid.audit_log WHERE entry < $1)
              + (SELECT count(*) FROM grid.generations WHERE entry < $1)",
        &[entry.into()],
    )?
    .unwrap_or(0))
}

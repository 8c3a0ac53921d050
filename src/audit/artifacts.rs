//! `grid.artifacts`: the inputs a replay needs (grammar, lexicons, policy, vocabulary) and
//! the prompt each generation showed, addressed by the fingerprints the seals carry and
//! by their content digests (grid-ask's `contents`). Stored insert-if-absent: the same
//! kind, fingerprint and content digest is the same content, so a second generation that
//! uses an artifact adds nothing.
//!
//! The checks `grid.verify_audit()` makes of them: every artifact a seal names is stored
//! ([`first_missing`]); every stored artifact's content still has the digest stored
//! beside it ([`first_altered_row`]); and every generation with a prompt digest finds
//! the prompt and the contents it bound ([`first_unbound`]).

use std::collections::HashMap;

use grid_ask::contents::{check_bound, content_digest, prompt_fingerprint};
use grid_ask::{Artifact, ArtifactKind, DigestedArtifact};
use grid_core::audit::{to_hex, Digest32, Fingerprints};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;

use super::sink::StoreError;

/// Rows fetched per round trip of a cursor.
const BATCH: i64 = 100;

/// Generations a finding names at most.
const NAMED: i64 = 20;

/// Stores an artifact with its content digest, unless that content is there already.
/// Whether it is is asked first: a language's artifacts are named by every seal over it,
/// and making the `jsonb` of a wide catalog's lexicons (megabytes) only for `ON CONFLICT`
/// to drop it held up every other ask's audit rows behind the worker's main thread.
pub fn store(a: &DigestedArtifact) -> Result<(), StoreError> {
    let key: Vec<DatumWithOid> = vec![
        a.kind.name().into(),
        a.fingerprint.to_vec().into(),
        a.digest().to_vec().into(),
    ];
    let stored = Spi::get_one_with_args::<bool>(
        "SELECT EXISTS (SELECT FROM grid.artifacts \
          WHERE kind = $1 AND fingerprint = $2 AND digest = $3)",
        &key,
    )?;
    if stored == Some(true) {
        return Ok(());
    }
    let args: Vec<DatumWithOid> = vec![
        a.kind.name().into(),
        a.fingerprint.to_vec().into(),
        a.content.clone().into(),
        a.content_json.clone().map(pgrx::JsonB).into(),
        a.digest().to_vec().into(),
    ];
    // DO NOTHING fires no UPDATE trigger: the append-only guard stays as it is. A
    // concurrent writer of the same content is why the conflict can still happen.
    Spi::run_with_args(
        "INSERT INTO grid.artifacts (kind, fingerprint, content, content_json, digest) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (kind, fingerprint, digest) DO NOTHING",
        &args,
    )?;
    Ok(())
}

/// The stored artifact of `kind` and `fingerprint` with content digest `digest` (as its
/// `digest` column says: the caller checks the content), or, for a seal that binds no
/// digest (`None`), the one stored first, a row written before digests preferred.
pub fn load(
    client: &SpiClient<'_>,
    kind: ArtifactKind,
    fingerprint: &[u8; 16],
    digest: Option<&Digest32>,
) -> Result<Option<Artifact>, StoreError> {
    let table = client.select(
        "SELECT content, content_json FROM grid.artifacts
          WHERE kind = $1 AND fingerprint = $2 AND ($3::bytea IS NULL OR digest = $3)
          ORDER BY digest IS NOT NULL, created_at LIMIT 1",
        None,
        &[
            kind.name().into(),
            fingerprint.to_vec().into(),
            digest.map(|d| d.to_vec()).into(),
        ],
    )?;
    if table.is_empty() {
        return Ok(None);
    }
    let row = table.first();
    Ok(Some(Artifact {
        kind,
        fingerprint: *fingerprint,
        content: row.get::<Vec<u8>>(1)?,
        content_json: row.get::<pgrx::JsonB>(2)?.map(|j| j.0),
    }))
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
                                         (4, 'vocabulary', g.vocabulary_fp),
                                         (5, 'prompt', pg_catalog.substring(g.prompt_digest, 1, 16)))
                    AS k(n, kind, fp)
              WHERE k.fp IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM grid.artifacts a
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

/// An artifact found altered: the generations that name it (in append order, the first
/// [`NAMED`]) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlteredArtifact {
    pub entry: i64,
    pub generations: Vec<i64>,
    pub reason: String,
}

/// The log position of the first generation that names the artifact, and the
/// generations that do, in append order (the first [`NAMED`]). With the artifact's
/// content digest, only the generations that bound that content (their prompt artifact
/// lists it, or, for a prompt, their prompt digest is it).
fn naming(
    client: &SpiClient<'_>,
    kind: ArtifactKind,
    fingerprint: &[u8; 16],
    digest: Option<&Digest32>,
) -> Result<(i64, Vec<i64>), StoreError> {
    let column = match kind {
        ArtifactKind::Grammar => "grammar_fp",
        ArtifactKind::Lexicons => "lexicons_fp",
        ArtifactKind::Policy => "policy_fp",
        ArtifactKind::Vocabulary => "vocabulary_fp",
        ArtifactKind::Prompt => "pg_catalog.substring(g.prompt_digest, 1, 16)",
    };
    let bound = if kind == ArtifactKind::Prompt {
        "g.prompt_digest = $2"
    } else {
        "EXISTS (SELECT 1 FROM grid.artifacts p
                  WHERE p.kind = 'prompt'
                    AND p.fingerprint = pg_catalog.substring(g.prompt_digest, 1, 16)
                    AND p.content_json -> 'artifacts' ->> $3 = pg_catalog.encode($2, 'hex'))"
    };
    let mut first = None;
    let mut generations = Vec::new();
    for row in client.select(
        &format!(
            "SELECT g.entry, g.generation FROM grid.generations g
              WHERE {column} = $1 AND ($2::bytea IS NULL OR {bound})
              ORDER BY g.entry LIMIT {NAMED}"
        ),
        None,
        &[
            fingerprint.to_vec().into(),
            digest.map(|d| d.to_vec()).into(),
            kind.name().into(),
        ],
    )? {
        if let (Some(entry), Some(g)) = (row.get::<i64>(1)?, row.get::<i64>(2)?) {
            first.get_or_insert(entry);
            generations.push(g);
        }
    }
    Ok((first.unwrap_or(i64::MAX), generations))
}

fn altered(
    client: &SpiClient<'_>,
    kind: ArtifactKind,
    fingerprint: &[u8; 16],
    digest: Option<&Digest32>,
    why: String,
) -> Result<AlteredArtifact, StoreError> {
    let (entry, generations) = naming(client, kind, fingerprint, digest)?;
    let named = if generations.is_empty() {
        "no generation names it".to_string()
    } else {
        format!(
            "named by generation(s) {}",
            generations
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    Ok(AlteredArtifact {
        entry,
        generations,
        reason: format!(
            "the {} artifact {} was altered: {why} ({named})",
            kind.name(),
            to_hex(fingerprint)
        ),
    })
}

/// A finding before the generations that name it are looked up: the artifact, the
/// content digest it was stored or bound with, and why it is altered.
type Suspect = (ArtifactKind, [u8; 16], Option<Digest32>, String);

/// The finding of `suspect`, with the generations that name it (looked up once no table
/// of a cursor is being read).
fn found(suspect: Option<Suspect>) -> Result<Option<AlteredArtifact>, StoreError> {
    let Some((kind, fingerprint, digest, why)) = suspect else {
        return Ok(None);
    };
    Spi::connect(|client| altered(client, kind, &fingerprint, digest.as_ref(), why)).map(Some)
}

fn b16(v: Option<Vec<u8>>) -> [u8; 16] {
    v.and_then(|v| <[u8; 16]>::try_from(v.as_slice()).ok())
        .unwrap_or_default()
}

fn b32(v: Option<Vec<u8>>) -> Option<Digest32> {
    v.and_then(|v| <[u8; 32]>::try_from(v.as_slice()).ok())
}

/// The first stored artifact whose content does not have the content digest stored
/// beside it: every row written with a digest is recomputed from its stored bytes,
/// whichever seal names it. Rows without a digest (written before digests were) are
/// checked through the seals that bind them ([`first_unbound`]), or not at all.
pub fn first_altered_row() -> Result<Option<AlteredArtifact>, StoreError> {
    let suspect = Spi::connect(|client| -> Result<Option<Suspect>, StoreError> {
        // Paged with queries of their own (not a cursor), so that every query of the
        // check reads the same state of the store.
        let mut offset: i64 = 0;
        loop {
            let mut batch: Vec<(Artifact, Vec<u8>)> = Vec::new();
            for row in client.select(
                "SELECT kind, fingerprint, content, content_json, digest FROM grid.artifacts
                  WHERE digest IS NOT NULL ORDER BY kind, fingerprint, digest
                  LIMIT $1 OFFSET $2",
                None,
                &[BATCH.into(), offset.into()],
            )? {
                let kind_name: Option<String> = row.get(1)?;
                let Some(kind) = kind_name.as_deref().and_then(ArtifactKind::from_name) else {
                    continue;
                };
                let a = Artifact {
                    kind,
                    fingerprint: b16(row.get::<Vec<u8>>(2)?),
                    content: row.get::<Vec<u8>>(3)?,
                    content_json: row.get::<pgrx::JsonB>(4)?.map(|j| j.0),
                };
                batch.push((a, row.get::<Vec<u8>>(5)?.unwrap_or_default()));
            }
            if batch.is_empty() {
                return Ok(None);
            }
            offset += BATCH;
            for (a, stored) in batch {
                let computed = content_digest(&a);
                if stored != computed {
                    return Ok(Some((
                        a.kind,
                        a.fingerprint,
                        b32(Some(stored.clone())),
                        format!(
                            "its content digest is {}, the digest stored with it {}",
                            to_hex(&computed),
                            to_hex(&stored)
                        ),
                    )));
                }
            }
        }
    })?;
    found(suspect)
}

/// The first generation, in append order, with a prompt digest whose prompt artifact or
/// artifacts are not the contents its seal bound: the prompt artifact must have the
/// sealed digest, and each artifact its fingerprints name must be stored with the
/// content digest the prompt artifact lists, and have it.
pub fn first_unbound() -> Result<Option<AlteredArtifact>, StoreError> {
    let suspect = Spi::connect(|client| -> Result<Option<Suspect>, StoreError> {
        // Content digests recomputed once per stored artifact.
        let mut checked: HashMap<(ArtifactKind, [u8; 16], Digest32), bool> = HashMap::new();
        let mut after: i64 = i64::MIN;
        loop {
            let mut batch: Vec<(Digest32, Fingerprints)> = Vec::new();
            for row in client.select(
                "SELECT prompt_digest, grammar_fp, lexicons_fp, policy_fp, vocabulary_fp, entry
                   FROM grid.generations WHERE prompt_digest IS NOT NULL AND entry > $1
                  ORDER BY entry LIMIT $2",
                None,
                &[after.into(), BATCH.into()],
            )? {
                if let Some(entry) = row.get::<i64>(6)? {
                    after = entry;
                }
                let Some(digest) = b32(row.get::<Vec<u8>>(1)?) else {
                    continue;
                };
                batch.push((
                    digest,
                    Fingerprints {
                        grammar: b16(row.get::<Vec<u8>>(2)?),
                        lexicons: b16(row.get::<Vec<u8>>(3)?),
                        policy: b16(row.get::<Vec<u8>>(4)?),
                        vocabulary: b16(row.get::<Vec<u8>>(5)?),
                    },
                ));
            }
            if batch.is_empty() {
                return Ok(None);
            }
            for (digest, f) in batch {
                let fp = prompt_fingerprint(&digest);
                let Some(prompt) = load(client, ArtifactKind::Prompt, &fp, Some(&digest))? else {
                    return Ok(Some((
                        ArtifactKind::Prompt,
                        fp,
                        Some(digest),
                        format!(
                            "no stored prompt artifact has the sealed prompt_digest {}",
                            to_hex(&digest)
                        ),
                    )));
                };
                let record = match check_bound(&digest, &prompt, |_| None) {
                    Ok(r) => r,
                    Err(e) => return Ok(Some((e.kind, e.fingerprint, Some(digest), e.why))),
                };
                for kind in ArtifactKind::ALL {
                    let Some(fingerprint) = kind.of(&f) else {
                        continue;
                    };
                    let Some(listed) = record.artifacts.get(kind.name()).copied() else {
                        continue;
                    };
                    let key = (kind, fingerprint, listed);
                    let ok = match checked.get(&key) {
                        Some(ok) => *ok,
                        None => {
                            let ok = load(client, kind, &fingerprint, Some(&listed))?
                                .is_some_and(|a| content_digest(&a) == listed);
                            checked.insert(key, ok);
                            ok
                        }
                    };
                    if !ok {
                        return Ok(Some((
                            kind,
                            fingerprint,
                            Some(listed),
                            format!(
                                "no stored {} artifact has the content digest {} that the \
                                 sealed prompt artifact {} lists",
                                kind.name(),
                                to_hex(&listed),
                                to_hex(&fp)
                            ),
                        )));
                    }
                }
            }
        }
    })?;
    found(suspect)
}

/// The artifact rows no seal binds, and the first of them as `kind fingerprint digest`.
/// A row is bound when a seal names its fingerprint and either its content digest is
/// a sealed prompt digest (a prompt) or listed by a sealed prompt artifact (the others),
/// or a seal without a prompt digest (sealed before prompts were) names its fingerprint
/// and would load it ([`load`]'s choice: the first stored, a row without a digest
/// preferred).
/// Artifacts are stored in the transaction of the seals that name them, so a row no
/// seal binds was added by hand: an auditor who reads a snapshot by its fingerprint
/// would find two.
pub fn unbound_rows() -> Result<(i64, Option<String>), StoreError> {
    // Joins, not a scan of the seals per row: a store holds many of both.
    const QUERY: &str = "
WITH sealed_fp AS (
    SELECT k.kind, k.fp, pg_catalog.bool_or(g.prompt_digest IS NULL) AS by_old_seal
      FROM grid.generations g
     CROSS JOIN LATERAL (VALUES ('grammar', g.grammar_fp), ('lexicons', g.lexicons_fp),
                                ('policy', g.policy_fp), ('vocabulary', g.vocabulary_fp),
                                ('prompt', pg_catalog.substring(g.prompt_digest, 1, 16)))
           AS k(kind, fp)
     WHERE k.fp IS NOT NULL
     GROUP BY k.kind, k.fp
),
listed AS (
    SELECT 'prompt' AS kind, g.prompt_digest AS digest
      FROM grid.generations g WHERE g.prompt_digest IS NOT NULL
    UNION
    SELECT e.key, pg_catalog.decode(e.value, 'hex')
      FROM grid.generations g
      JOIN grid.artifacts p ON p.kind = 'prompt' AND p.digest = g.prompt_digest
     CROSS JOIN LATERAL pg_catalog.jsonb_each_text(p.content_json -> 'artifacts') AS e
     WHERE e.value ~ '^[0-9a-f]{64}$'
),
row_ AS (
    SELECT a.kind, a.fingerprint, a.digest,
           pg_catalog.row_number() OVER (PARTITION BY a.kind, a.fingerprint
                                         ORDER BY a.digest IS NOT NULL, a.created_at) AS nth
      FROM grid.artifacts a
),
unbound AS (
    SELECT r.*
      FROM row_ r
      LEFT JOIN sealed_fp s ON s.kind = r.kind AND s.fp = r.fingerprint
     WHERE s.kind IS NULL
        OR NOT ((s.by_old_seal AND r.nth = 1)
                OR (r.digest IS NOT NULL
                    AND EXISTS (SELECT 1 FROM listed l
                                 WHERE l.kind = r.kind AND l.digest = r.digest)))
)
SELECT (SELECT count(*) FROM unbound),
       (SELECT u.kind || ' ' || pg_catalog.encode(u.fingerprint, 'hex') || ' (content digest '
               || coalesce(pg_catalog.encode(u.digest, 'hex'), 'none') || ')'
          FROM unbound u ORDER BY u.kind, u.fingerprint, u.digest NULLS FIRST LIMIT 1)";
    Spi::connect(|client| {
        let table = client.select(QUERY, Some(1), &[])?;
        if table.is_empty() {
            return Ok((0, None));
        }
        let row = table.first();
        Ok((row.get::<i64>(1)?.unwrap_or(0), row.get::<String>(2)?))
    })
}

/// Sealed generations without a prompt digest (written before prompts were sealed): their
/// artifacts are checked for presence only.
pub fn unbound_generations() -> Result<i64, StoreError> {
    Ok(
        Spi::get_one::<i64>("SELECT count(*) FROM grid.generations WHERE prompt_digest IS NULL")?
            .unwrap_or(0),
    )
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

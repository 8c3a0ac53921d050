//! What the audit records of an ask, made in this one place: each generation's seal with
//! who asked and what came out ([`SealToWrite`]), and the artifacts its fingerprints
//! name ([`Artifact`]), which a replay rebuilds the language from (`replay`).
//! An ask that fails before its generation begins is sealed too ([`unreached`]), so that
//! every ask is in the log.

use grid_core::audit::{
    text_digest, to_hex, ChainWriter, DecodeMode, Digest32, Entry, Fingerprints, Head, Mode, Seal,
    SealInput, SealMeta, StopReason,
};
use grid_core::catalog::CatalogSnapshot;
use grid_core::checker::Violation;
use grid_core::prompt::Prompt;
use grid_core::statement::{decline_of, Decline};
use grid_core::Dialect;
use grid_vocab::Vocabulary;

use std::sync::Arc;

use crate::contents::{Artifact, ArtifactKind, DigestedArtifact, PromptRecord, Rendering};
use crate::failure::Failure;
use crate::job::Job;
use crate::language::Compiled;

/// A seal to store, with who asked and the artifacts it names.
#[derive(Debug, Clone)]
pub struct SealToWrite {
    /// Chained from the genesis head: the host re-anchors it to its stored head
    /// ([`SealToWrite::anchored`]).
    pub seal: Seal,
    pub question: String,
    /// `current_user` of the ask (the seal's role binds it with `session_user`).
    pub current_user: String,
    pub final_sql: Option<String>,
    /// The checker's violations, when `final_sql` is not returned ([`refusal`]).
    pub refused: Option<String>,
    /// The generation this one repairs.
    pub repair_of: Option<u64>,
    /// Shared with the other seals over the same language ([`artifacts`]).
    pub artifacts: Vec<Arc<DigestedArtifact>>,
    /// When the ask reached the pipeline (seconds since the Unix epoch).
    pub started_at: f64,
}

impl SealToWrite {
    /// The seal chained after `head` (its index, previous hash and hash made anew).
    pub fn anchored(&self, head: Head) -> Seal {
        let mut seal = self.seal.clone();
        seal.index = head.seals;
        seal.prev_seal_hash = head.hash;
        seal.hash = seal.compute_hash();
        seal
    }
}

/// The seal's role: who asked, as `["<session_user>","<current_user>"]` (JSON), so that
/// both names are bound to the seal's hash (a `SET ROLE` changes the second).
pub fn sealed_role(session_user: &str, current_user: &str) -> String {
    serde_json::json!([session_user, current_user]).to_string()
}

/// The seal's metadata of an ask (the statement's digest is added when it stops, the
/// prompt's when it is sealed: [`with_prompt`]).
pub(crate) fn seal_meta(job: &Job) -> SealMeta {
    SealMeta {
        role: Some(sealed_role(&job.ask.session_user, &job.ask.current_user)),
        question_digest: Some(text_digest(&job.ask.question)),
        sql_digest: None,
        verdict: None,
        prompt_digest: None,
    }
}

/// `artifacts` (the fingerprinted ones) with the prompt artifact of `prompt` (rendered
/// with a DDL budget of `schema_bytes`; `None` when the model was never asked) added, and
/// the prompt digest the seal carries. `examples` are the curated examples the prompt
/// showed (none when the model was never asked); `decline`, whether it taught the
/// decline.
pub(crate) fn with_prompt(
    mut artifacts: Vec<Arc<DigestedArtifact>>,
    prompt: Option<(&Prompt, usize)>,
    rendering: Rendering,
    examples: &[crate::request::Example],
    decline: bool,
) -> (Vec<Arc<DigestedArtifact>>, Digest32) {
    let a = PromptRecord {
        decline,
        ..PromptRecord::new(prompt, rendering, &artifacts, examples)
    }
    .digested();
    let digest = *a.digest();
    artifacts.push(a);
    (artifacts, digest)
}

/// The checker's violations as messages display them.
pub(crate) fn reasons(violations: &[Violation]) -> Vec<String> {
    violations.iter().map(ToString::to_string).collect()
}

/// The checker's violations as a generation's record keeps them (and a replay recomputes
/// them): `None` when there are none.
pub(crate) fn refusal(violations: &[Violation]) -> Option<String> {
    (!violations.is_empty()).then(|| reasons(violations).join("; "))
}

/// A decline as a generation's record keeps it in place of the checker's violations
/// (`grid.generations.refused`: why `final_sql` was not returned): `declined: <reason>`.
/// So a decline is never one of the answers `grid.run(generation)` may run.
pub(crate) fn declined(d: &Decline) -> String {
    format!("declined: {}", d.reason)
}

/// Why a generation that wrote `output` gave no statement, as its record keeps it (and a
/// replay recomputes it from `output`, whose digest is sealed, and the archived
/// `snapshot`): [`declined`] for a decline (the checker is never asked about one), else
/// the checker's [`refusal`].
pub fn recorded_refusal(output: &str, snapshot: &CatalogSnapshot) -> Option<String> {
    match decline_of(output) {
        Some(d) => Some(declined(&d)),
        None => refusal(&grid_core::checker::check(output, snapshot)),
    }
}

/// The artifacts a replay of a generation over `c` and `vocab` needs, addressed by the
/// seal's fingerprints (the prompt is added by [`with_prompt`]), built and digested at
/// `c`'s first seal and kept with it. `vocab` is the one `c` was compiled for: a
/// compiled language is kept per vocabulary (`Languages`), so what is kept is what
/// [`build_artifacts`] would build now.
pub(crate) fn artifacts(c: &Compiled, vocab: &Vocabulary) -> Vec<Arc<DigestedArtifact>> {
    c.artifacts
        .get_or_init(|| {
            build_artifacts(c, vocab)
                .into_iter()
                .map(DigestedArtifact::new)
                .collect()
        })
        .clone()
}

/// The artifacts of [`artifacts`], built afresh.
fn build_artifacts(c: &Compiled, vocab: &Vocabulary) -> Vec<Artifact> {
    let f = &c.fingerprints;
    let policy = serde_json::from_str::<serde_json::Value>(&c.language.policy.canonical_json())
        .unwrap_or_default();
    let doc = |kind: ArtifactKind, content_json: serde_json::Value| Artifact {
        kind,
        fingerprint: kind.of(f).unwrap_or_default(),
        content: None,
        content_json: Some(content_json),
    };
    vec![
        doc(
            ArtifactKind::Grammar,
            serde_json::json!({
                "dialect": "postgres",
                "dialect_fingerprint": to_hex(&c.language.dialect.fingerprint),
                "policy": policy,
                "grid_pg": env!("CARGO_PKG_VERSION"),
            }),
        ),
        doc(
            ArtifactKind::Lexicons,
            serde_json::json!({
                "snapshot": serde_json::to_value(&c.snapshot).unwrap_or_default(),
                "base_policy": serde_json::from_str::<serde_json::Value>(&c.base.canonical_json()).unwrap_or_default(),
            }),
        ),
        doc(ArtifactKind::Policy, policy.clone()),
        Artifact {
            kind: ArtifactKind::Vocabulary,
            fingerprint: f.vocabulary,
            content: Some(vocab.to_served_json().into_bytes()),
            content_json: None,
        },
    ]
}

/// The seal of an ask that failed before its generation could begin (the endpoint or
/// the role's language could not be reached): no step, stop `error`, and artifacts that
/// say what was asked and why it went no further. Its fingerprints address those
/// artifacts: the dialect, the caller's snapshot and policy as sent, and the failure in
/// place of a vocabulary; its prompt artifact has no prompt and binds their contents.
/// `None` when the ask is not audited.
pub(crate) fn unreached(job: &Job, failure: &Failure, dialect: &Dialect) -> Option<SealToWrite> {
    if !job.ask.settings.audit.records() {
        return None;
    }
    let b16 = |parts: &[&[u8]]| -> [u8; 16] {
        let d = text_digest(
            &parts
                .iter()
                .map(|p| to_hex(p))
                .collect::<Vec<_>>()
                .join(":"),
        );
        let mut fp = [0u8; 16];
        fp.copy_from_slice(&d[..16]);
        fp
    };
    let docs = [
        serde_json::json!({
            "dialect": "postgres",
            "dialect_fingerprint": to_hex(&dialect.fingerprint),
            "grid_pg": env!("CARGO_PKG_VERSION"),
        }),
        serde_json::json!({
            "snapshot": job.ask.snapshot,
            "base_policy": job.ask.policy,
        }),
        job.ask.policy.clone().unwrap_or(serde_json::Value::Null),
        serde_json::json!({
            "unavailable": job.ask.settings.endpoint,
            "failure": failure.kind.name(),
            "reason": failure.message,
        }),
    ];
    let artifacts: Vec<Artifact> = ArtifactKind::ALL
        .into_iter()
        .zip(docs)
        .map(|(kind, doc)| Artifact {
            kind,
            fingerprint: b16(&[
                b"grid_pg/unreached/v1",
                kind.name().as_bytes(),
                doc.to_string().as_bytes(),
            ]),
            content: None,
            content_json: Some(doc),
        })
        .collect();
    let fingerprints = Fingerprints {
        grammar: artifacts[0].fingerprint,
        lexicons: artifacts[1].fingerprint,
        policy: artifacts[2].fingerprint,
        vocabulary: artifacts[3].fingerprint,
    };
    // No prompt was shown; the prompt artifact still binds the others' contents.
    let artifacts = artifacts.into_iter().map(DigestedArtifact::new).collect();
    let (artifacts, prompt_digest) = with_prompt(artifacts, None, Rendering::Flat, &[], false);
    let meta = SealMeta {
        prompt_digest: Some(prompt_digest),
        ..seal_meta(job)
    };
    let mut writer = ChainWriter::new(Vec::<Entry>::new());
    let id = job.ids[0];
    writer.begin(id).ok()?;
    writer
        .seal(
            id,
            SealInput {
                stop: StopReason::Error,
                fingerprints,
                mode: Mode {
                    decode: DecodeMode::Mode1,
                    cache: false,
                },
                meta,
            },
        )
        .ok()?;
    let seal = writer.into_sink().into_iter().find_map(|e| match e {
        Entry::Seal(s) => Some(s),
        Entry::Step(_) => None,
    })?;
    Some(SealToWrite {
        seal,
        question: job.ask.question.clone(),
        current_user: job.ask.current_user.clone(),
        final_sql: None,
        refused: None,
        repair_of: None,
        artifacts,
        started_at: job.started_at,
    })
}

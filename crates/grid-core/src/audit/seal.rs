//! The end of one generation: its seal, the global seal chain, and the head an auditor
//! keeps outside the database.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::hash::{from_hex, seal_genesis, tagged, to_hex, Digest32, HexError, SEAL_TAG};

/// Why a generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// EOS passed the gate: the output is a sentence. The last record has kind `Eos`.
    Eos,
    /// Mode 1: the budget reserve wrote the shortest legal completion and EOS. The last
    /// record has kind `Eos`.
    BudgetCompleted,
    /// Mode 2 (processor-only): the budget ran out and the output was cut where it stood;
    /// it may not be a sentence. This is the termination downgrade the seal records.
    BudgetTruncated,
    /// The generation failed (endpoint, internal error, …). No `Eos` record.
    Error,
    /// The caller cancelled (statement timeout, `pg_cancel_backend`). No `Eos` record.
    Cancelled,
}

impl StopReason {
    /// Canonical byte of the reason.
    pub(crate) fn code(self) -> u8 {
        match self {
            StopReason::Eos => 0,
            StopReason::BudgetCompleted => 1,
            StopReason::BudgetTruncated => 2,
            StopReason::Error => 3,
            StopReason::Cancelled => 4,
        }
    }

    /// The JSONL / SQL spelling.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Eos => "eos",
            StopReason::BudgetCompleted => "budget_completed",
            StopReason::BudgetTruncated => "budget_truncated",
            StopReason::Error => "error",
            StopReason::Cancelled => "cancelled",
        }
    }

    /// Every reason, in code order.
    pub const ALL: [StopReason; 5] = [
        StopReason::Eos,
        StopReason::BudgetCompleted,
        StopReason::BudgetTruncated,
        StopReason::Error,
        StopReason::Cancelled,
    ];

    /// Whether a generation that stopped this way ends with an `Eos` record.
    pub fn ends_with_eos(self) -> bool {
        matches!(self, StopReason::Eos | StopReason::BudgetCompleted)
    }
}

/// Who drove the decode loop (what the termination guarantee is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecodeMode {
    /// grid owns the loop: forced spans and budget completion are available; every
    /// non-error stop is a sentence.
    Mode1,
    /// Processor-only serving: the mask is applied by a logits processor that cannot
    /// append tokens; the termination guarantee weakens to EOS-only-at-ACCEPT.
    Mode2,
    /// No mask (an ablation, for measuring what the mask brings): every non-special token
    /// and EOS were allowed at every step, the budget cut the output where it stood. No
    /// guarantee holds for such a generation; the seal says so.
    Unconstrained,
}

impl DecodeMode {
    /// Canonical byte of the mode.
    pub(crate) fn code(self) -> u8 {
        match self {
            DecodeMode::Mode1 => 1,
            DecodeMode::Mode2 => 2,
            DecodeMode::Unconstrained => 3,
        }
    }

    /// The JSONL / SQL spelling.
    pub fn name(self) -> &'static str {
        match self {
            DecodeMode::Mode1 => "mode1",
            DecodeMode::Mode2 => "mode2",
            DecodeMode::Unconstrained => "unconstrained",
        }
    }

    /// Every mode, in code order.
    pub const ALL: [DecodeMode; 3] = [
        DecodeMode::Mode1,
        DecodeMode::Mode2,
        DecodeMode::Unconstrained,
    ];

    /// Whether the generation's tokens were chosen under the exact mask (mode 1 or 2).
    pub(crate) fn masked(self) -> bool {
        self != DecodeMode::Unconstrained
    }
}

/// The mode flags a seal records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mode {
    pub decode: DecodeMode,
    /// Whether masks were served through the mask cache (cache on ≡ cache off is tested,
    /// so this is for the record, not for replay).
    pub cache: bool,
}

/// BLAKE2b-128 fingerprints of the immutable inputs the generation was decoded under
/// (the keys of `grid.artifacts`, from which a replay fetches them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprints {
    /// The projected grammar (L1 dialect + L2 projection).
    pub grammar: [u8; 16],
    /// The schema lexicons (L3) as the calling role saw them.
    pub lexicons: [u8; 16],
    /// The policy (grants and per-role bans).
    pub policy: [u8; 16],
    /// The vocabulary (grid-vocab's fingerprint, 32 hex digits).
    pub vocabulary: [u8; 16],
}

/// Optional metadata about the request. Hashed like every other seal field, so it cannot
/// be added, removed or changed afterwards; absent and present-but-empty differ.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct SealMeta {
    /// Role that asked (`session_user`/`current_user` as the extension records it).
    pub role: Option<String>,
    /// [`crate::audit::text_digest`] of the question.
    pub question_digest: Option<Digest32>,
    /// [`crate::audit::text_digest`] of the final SQL text.
    pub sql_digest: Option<Digest32>,
    /// The judge's verdict on the final SQL text, as the host records it (the extension:
    /// PostgreSQL's EXPLAIN as the caller; canonical JSON such as `{"verdict":"pass"}`).
    /// Absent when no judge was asked (a generation that wrote no statement, or one the
    /// checker refused), and in every seal written before verdicts were recorded.
    pub verdict: Option<String>,
    /// [`crate::audit::artifact_digest`] of the generation's prompt artifact: the prompt
    /// the model was shown and the content digests of the artifacts the seal's fingerprints
    /// name. Absent in seals written before prompts were sealed (they hash as before).
    pub prompt_digest: Option<Digest32>,
}

/// The seal of one generation (`{"type":"seal"}` JSONL line).
///
/// Invariants of a well-formed log (kept by [`crate::audit::ChainWriter`], checked by
/// [`crate::audit::verify`]): seals appear in the log in `index` order `0, 1, 2, …`;
/// `prev_seal_hash` of seal 0 is [`crate::audit::seal_genesis`] and of seal `i > 0` the
/// `hash` of seal `i - 1`; the seal of `g` follows every step record of `g`, and `steps`
/// and `last_step_hash` are the count and the last hash of those records (the genesis
/// constant of `g` when there are none); each generation is sealed at most once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seal {
    /// Position in the global seal chain, from 0.
    pub index: u64,
    /// The sealed generation.
    pub generation: u64,
    pub stop: StopReason,
    /// Number of step records of the generation.
    pub steps: u32,
    /// Hash of the generation's last step record (its genesis constant if it has none).
    pub last_step_hash: Digest32,
    pub fingerprints: Fingerprints,
    pub mode: Mode,
    pub meta: SealMeta,
    /// Hash of the previous seal, or [`crate::audit::seal_genesis`].
    pub prev_seal_hash: Digest32,
    /// `compute_hash()` at the time of writing.
    pub hash: Digest32,
}

fn put_opt(out: &mut Vec<u8>, v: Option<&[u8]>, with_len: bool) {
    match v {
        None => out.push(0),
        Some(b) => {
            out.push(1);
            if with_len {
                out.extend_from_slice(&(b.len() as u64).to_le_bytes());
            }
            out.extend_from_slice(b);
        }
    }
}

impl Seal {
    /// The canonical encoding of every field except `hash`, in this order, little-endian:
    /// `u64 index ‖ u64 generation ‖ u8 stop ‖ u32 steps ‖ [32] last_step_hash ‖
    /// [16] grammar ‖ [16] lexicons ‖ [16] policy ‖ [16] vocabulary ‖ u8 decode mode ‖
    /// u8 cache ‖ role ‖ question_digest ‖ sql_digest ‖ [32] prev_seal_hash
    /// [‖ u8 2 ‖ verdict ‖ prompt_digest]`, where an absent option is `u8 0` and a present
    /// one `u8 1` followed by the value (the role and the verdict as `u64 length ‖ UTF-8
    /// bytes`, a digest as its 32 bytes). The verdict and the prompt digest, the fields
    /// added later, follow the marker `u8 2` only when either is present: a seal with
    /// neither (every seal written before they existed) keeps its encoding and its hash,
    /// and the encoding stays unambiguous, since all that precedes the marker is
    /// self-delimiting and so is all that follows it.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(256);
        b.extend_from_slice(&self.index.to_le_bytes());
        b.extend_from_slice(&self.generation.to_le_bytes());
        b.push(self.stop.code());
        b.extend_from_slice(&self.steps.to_le_bytes());
        b.extend_from_slice(&self.last_step_hash);
        let f = &self.fingerprints;
        for fp in [&f.grammar, &f.lexicons, &f.policy, &f.vocabulary] {
            b.extend_from_slice(fp);
        }
        b.push(self.mode.decode.code());
        b.push(u8::from(self.mode.cache));
        put_opt(&mut b, self.meta.role.as_deref().map(str::as_bytes), true);
        put_opt(
            &mut b,
            self.meta.question_digest.as_ref().map(|d| &d[..]),
            false,
        );
        put_opt(&mut b, self.meta.sql_digest.as_ref().map(|d| &d[..]), false);
        b.extend_from_slice(&self.prev_seal_hash);
        if self.meta.verdict.is_some() || self.meta.prompt_digest.is_some() {
            b.push(2);
            put_opt(
                &mut b,
                self.meta.verdict.as_deref().map(str::as_bytes),
                true,
            );
            put_opt(
                &mut b,
                self.meta.prompt_digest.as_ref().map(|d| &d[..]),
                false,
            );
        }
        b
    }

    /// `BLAKE2b-256("grid_pg/audit/seal/v1\0" ‖ encode())`.
    pub fn compute_hash(&self) -> Digest32 {
        tagged(SEAL_TAG, &[&self.encode()])
    }

    /// The head of the log once this seal is its last.
    pub fn head(&self) -> Head {
        Head {
            seals: self.index.saturating_add(1),
            hash: self.hash,
        }
    }
}

/// The external anchor: how many seals the log had and the hash of the last one.
///
/// An auditor exports it (`grid.audit_head()`, `grid audit verify`) and keeps it outside
/// the database. A later log is consistent with it iff the log still holds seal
/// `seals - 1` with hash `hash` (more seals may have been appended since). Without it,
/// dropping the last k seals and their generations' records leaves a log that is a
/// perfectly valid shorter chain: nothing inside the log can tell.
///
/// Text form: `<seals>:<64 hex digits>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Head {
    pub seals: u64,
    /// Hash of seal `seals - 1`, or [`crate::audit::seal_genesis`] when `seals == 0`.
    pub hash: Digest32,
}

impl Head {
    /// The head of an empty log.
    pub fn genesis() -> Head {
        Head {
            seals: 0,
            hash: seal_genesis(),
        }
    }
}

impl fmt::Display for Head {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.seals, to_hex(&self.hash))
    }
}

/// Why a string is not a head.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HeadParseError {
    #[error("a head is `<seals>:<64 hex digits>`")]
    Shape,
    #[error("seal count: {0}")]
    Count(#[from] std::num::ParseIntError),
    #[error("hash: {0}")]
    Hash(#[from] HexError),
}

impl FromStr for Head {
    type Err = HeadParseError;

    fn from_str(s: &str) -> Result<Head, HeadParseError> {
        let (n, h) = s.trim().split_once(':').ok_or(HeadParseError::Shape)?;
        Ok(Head {
            seals: n.parse()?,
            hash: from_hex(h)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seal() -> Seal {
        Seal {
            index: 0,
            generation: 1,
            stop: StopReason::Eos,
            steps: 3,
            last_step_hash: [1; 32],
            fingerprints: Fingerprints {
                grammar: [2; 16],
                lexicons: [3; 16],
                policy: [4; 16],
                vocabulary: [5; 16],
            },
            mode: Mode {
                decode: DecodeMode::Mode1,
                cache: true,
            },
            meta: SealMeta::default(),
            prev_seal_hash: seal_genesis(),
            hash: [0; 32],
        }
    }

    #[test]
    fn optional_metadata_is_hashed_unambiguously() {
        let a = seal();
        let b = Seal {
            meta: SealMeta {
                role: Some(String::new()),
                ..SealMeta::default()
            },
            ..seal()
        };
        let c = Seal {
            meta: SealMeta {
                question_digest: Some([0; 32]),
                ..SealMeta::default()
            },
            ..seal()
        };
        let d = Seal {
            meta: SealMeta {
                verdict: Some(String::new()),
                ..SealMeta::default()
            },
            ..seal()
        };
        assert_ne!(a.compute_hash(), b.compute_hash());
        assert_ne!(a.compute_hash(), c.compute_hash());
        assert_ne!(b.compute_hash(), c.compute_hash());
        for x in [&a, &b, &c] {
            assert_ne!(x.compute_hash(), d.compute_hash());
        }
    }

    #[test]
    fn a_seal_without_a_verdict_encodes_as_before_verdicts_existed() {
        let a = seal();
        let e = a.encode();
        assert_eq!(&e[e.len() - 32..], &a.prev_seal_hash);
        let v = Seal {
            meta: SealMeta {
                verdict: Some("{\"verdict\":\"pass\"}".into()),
                ..SealMeta::default()
            },
            ..seal()
        };
        assert!(v.encode().starts_with(&e));
    }

    #[test]
    fn prompt_digest_is_bound_and_absent_keeps_the_old_encoding() {
        let old = seal();
        let mut v1 = old.encode();
        // The encoding of a seal without a prompt digest ends with prev_seal_hash, as
        // before the field existed.
        assert!(v1.ends_with(&old.prev_seal_hash));
        let with = |d: [u8; 32]| Seal {
            meta: SealMeta {
                prompt_digest: Some(d),
                ..SealMeta::default()
            },
            ..seal()
        };
        let (a, b) = (with([7; 32]), with([8; 32]));
        assert_ne!(a.compute_hash(), old.compute_hash());
        assert_ne!(a.compute_hash(), b.compute_hash());
        // The marker, no verdict, the digest.
        v1.extend_from_slice(&[2, 0, 1]);
        v1.extend_from_slice(&[7; 32]);
        assert_eq!(a.encode(), v1);
        // A verdict and a digest both, in that order.
        let both = Seal {
            meta: SealMeta {
                verdict: Some("v".into()),
                prompt_digest: Some([7; 32]),
                ..SealMeta::default()
            },
            ..seal()
        };
        let mut v2 = old.encode();
        v2.extend_from_slice(&[2, 1]);
        v2.extend_from_slice(&1u64.to_le_bytes());
        v2.extend_from_slice(b"v");
        v2.push(1);
        v2.extend_from_slice(&[7; 32]);
        assert_eq!(both.encode(), v2);
    }

    #[test]
    fn head_text_round_trip() {
        let h = Head {
            seals: 12,
            hash: [0xab; 32],
        };
        assert_eq!(h.to_string().parse::<Head>(), Ok(h));
        assert_eq!("12".parse::<Head>(), Err(HeadParseError::Shape));
        assert!("x:00".parse::<Head>().is_err());
        assert!(format!("1:{}", "0".repeat(63)).parse::<Head>().is_err());
    }
}

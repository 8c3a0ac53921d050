//! The feedback chain: what an asker said of one of its generations (`right`, or `wrong`
//! with or without a corrected statement), each record hash-chained to the one before,
//! from a genesis constant of its own.
//!
//! It is a chain beside the seal chain, not inside it: a feedback record is written long
//! after its generation's seal, by another request, and the seal chain's records (steps
//! and seals, [`crate::audit::Verifier`]) keep their format. A record binds its
//! generation's seal by that seal's hash, so it cannot be moved to another generation, nor
//! survive an edit of the seal it names; and its head (`<records>:<hash>`, the same text
//! form as the seal chain's [`Head`]) is exported and checked like the seal chain's, so a
//! dropped tail shows against it.
//!
//! Record `i` carries `prev_hash` = hash of record `i - 1`, or [`feedback_genesis`] for
//! `i = 0`; its hash is `BLAKE2b-256("grid_pg/audit/feedback/v1\0" ‖ encode())`.

use std::fmt;

use thiserror::Error;

use super::hash::{tagged, to_hex, Digest32};
use super::seal::Head;

/// Domain tag of a feedback record's hash ([`FeedbackRecord::compute_hash`]).
pub const FEEDBACK_TAG: &[u8] = b"grid_pg/audit/feedback/v1\0";
/// Domain tag of the feedback chain's genesis constant ([`feedback_genesis`]).
pub const FEEDBACK_GENESIS_TAG: &[u8] = b"grid_pg/audit/feedback-genesis/v1\0";

/// The `prev_hash` of feedback record 0:
/// `BLAKE2b-256("grid_pg/audit/feedback-genesis/v1\0")`, and the hash of the head of an
/// empty feedback chain.
pub fn feedback_genesis() -> Digest32 {
    tagged(FEEDBACK_GENESIS_TAG, &[])
}

/// The head of an empty feedback chain: no record, the genesis constant.
pub fn feedback_genesis_head() -> Head {
    Head {
        seals: 0,
        hash: feedback_genesis(),
    }
}

/// What the asker said of the generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FeedbackVerdict {
    /// The statement returned is a right answer to the question.
    Right,
    /// It is not (or the ask was refused and should not have been); a corrected statement
    /// may come with it.
    Wrong,
}

impl FeedbackVerdict {
    /// Canonical byte of the verdict.
    pub(crate) fn code(self) -> u8 {
        match self {
            FeedbackVerdict::Right => 1,
            FeedbackVerdict::Wrong => 2,
        }
    }

    /// The SQL spelling.
    pub fn name(self) -> &'static str {
        match self {
            FeedbackVerdict::Right => "right",
            FeedbackVerdict::Wrong => "wrong",
        }
    }

    /// The verdict spelled `name` (ASCII case aside), if it is one.
    pub fn parse(name: &str) -> Option<FeedbackVerdict> {
        [FeedbackVerdict::Right, FeedbackVerdict::Wrong]
            .into_iter()
            .find(|v| v.name().eq_ignore_ascii_case(name))
    }
}

/// One feedback record (a row of `grid.feedback_log`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedbackRecord {
    /// Position in the feedback chain, from 0.
    pub index: u64,
    /// The generation the feedback is about.
    pub generation: u64,
    /// The hash of that generation's seal.
    pub seal_hash: Digest32,
    /// Who said it, as the seals record a role (`["<session_user>","<current_user>"]`).
    pub role: String,
    pub verdict: FeedbackVerdict,
    /// [`crate::audit::text_digest`] of the corrected statement, if one came with it.
    pub correction_digest: Option<Digest32>,
    /// Hash of the previous record, or [`feedback_genesis`].
    pub prev_hash: Digest32,
    /// `compute_hash()` at the time of writing.
    pub hash: Digest32,
}

impl FeedbackRecord {
    /// The record chained after `head` (of the feedback chain), its hash computed.
    pub fn chained(
        head: Head,
        generation: u64,
        seal_hash: Digest32,
        role: String,
        verdict: FeedbackVerdict,
        correction_digest: Option<Digest32>,
    ) -> FeedbackRecord {
        let mut r = FeedbackRecord {
            index: head.seals,
            generation,
            seal_hash,
            role,
            verdict,
            correction_digest,
            prev_hash: head.hash,
            hash: [0; 32],
        };
        r.hash = r.compute_hash();
        r
    }

    /// The canonical encoding of every field except `hash`, little-endian:
    /// `u64 index ‖ u64 generation ‖ [32] seal_hash ‖ u64 length ‖ UTF-8 role ‖
    /// u8 verdict ‖ correction_digest ‖ [32] prev_hash`, where an absent digest is `u8 0`
    /// and a present one `u8 1` followed by its 32 bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(128 + self.role.len());
        b.extend_from_slice(&self.index.to_le_bytes());
        b.extend_from_slice(&self.generation.to_le_bytes());
        b.extend_from_slice(&self.seal_hash);
        b.extend_from_slice(&(self.role.len() as u64).to_le_bytes());
        b.extend_from_slice(self.role.as_bytes());
        b.push(self.verdict.code());
        match &self.correction_digest {
            None => b.push(0),
            Some(d) => {
                b.push(1);
                b.extend_from_slice(d);
            }
        }
        b.extend_from_slice(&self.prev_hash);
        b
    }

    /// `BLAKE2b-256("grid_pg/audit/feedback/v1\0" ‖ encode())`.
    pub(crate) fn compute_hash(&self) -> Digest32 {
        tagged(FEEDBACK_TAG, &[&self.encode()])
    }

    /// The head of the feedback chain once this record is its last.
    pub(crate) fn head(&self) -> Head {
        Head {
            seals: self.index.saturating_add(1),
            hash: self.hash,
        }
    }
}

/// What is wrong with the feedback chain.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FeedbackReason {
    #[error("feedback hash mismatch: the record's fields do not hash to its hash (recomputed {})", to_hex(.recomputed))]
    HashMismatch { recomputed: Digest32 },
    #[error("missing feedback record(s): expected index {expected}")]
    Missing { expected: u64 },
    #[error("duplicate feedback index: expected index {expected}")]
    Duplicate { expected: u64 },
    #[error("feedback chain break: prev_hash is not the hash of the previous record (or the feedback genesis)")]
    ChainBreak,
    #[error(
        "truncated: the external feedback head expects {expected} records, the chain holds {found}"
    )]
    Truncated { expected: u64, found: u64 },
    #[error("head mismatch: the feedback chain at {records} record(s) does not end in the anchored hash {}", to_hex(.expected))]
    HeadMismatch { records: u64, expected: Digest32 },
}

/// The first error of the feedback chain: the record where it shows (`None` at the end
/// of the chain), and what.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct FeedbackError {
    /// The index and generation the record carries.
    pub(crate) at: Option<(u64, u64)>,
    pub(crate) reason: FeedbackReason,
}

impl fmt::Display for FeedbackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at {
            Some((index, generation)) => write!(
                f,
                "feedback {index} (generation {generation}): {}",
                self.reason
            ),
            None => write!(f, "end of the feedback chain: {}", self.reason),
        }
    }
}

/// A streaming verifier of the feedback chain: feed the records in index order with
/// [`FeedbackVerifier::push`], then call [`FeedbackVerifier::finish`]. Checks, per
/// record: the hash recomputes; the index is the count so far (else missing or
/// duplicate); `prev_hash` links; the anchor, if this is the anchored record. At the
/// end: the anchor is reached (else truncated). After an error, stop feeding.
#[derive(Debug)]
pub struct FeedbackVerifier {
    head: Head,
    expected: Option<Head>,
}

impl FeedbackVerifier {
    /// A verifier of a chain that must still hold `expected` (a head exported earlier),
    /// if given.
    pub fn new(expected: Option<Head>) -> FeedbackVerifier {
        FeedbackVerifier {
            head: feedback_genesis_head(),
            expected,
        }
    }

    /// Checks the next record.
    pub fn push(&mut self, r: &FeedbackRecord) -> Result<(), FeedbackError> {
        let fail = |reason| FeedbackError {
            at: Some((r.index, r.generation)),
            reason,
        };
        let recomputed = r.compute_hash();
        if recomputed != r.hash {
            return Err(fail(FeedbackReason::HashMismatch { recomputed }));
        }
        let expected = self.head.seals;
        if r.index > expected {
            return Err(fail(FeedbackReason::Missing { expected }));
        }
        if r.index < expected {
            return Err(fail(FeedbackReason::Duplicate { expected }));
        }
        if r.prev_hash != self.head.hash {
            return Err(fail(FeedbackReason::ChainBreak));
        }
        self.head = r.head();
        if let Some(anchor) = self.expected {
            if anchor.seals == self.head.seals && anchor.hash != self.head.hash {
                return Err(fail(FeedbackReason::HeadMismatch {
                    records: anchor.seals,
                    expected: anchor.hash,
                }));
            }
        }
        Ok(())
    }

    /// The chain's head, once every record was pushed; an error when the exported head
    /// is not reached.
    pub fn finish(self) -> Result<Head, FeedbackError> {
        if let Some(anchor) = self.expected {
            if anchor.seals > self.head.seals {
                return Err(FeedbackError {
                    at: None,
                    reason: FeedbackReason::Truncated {
                        expected: anchor.seals,
                        found: self.head.seals,
                    },
                });
            }
            if anchor.seals == 0 && anchor.hash != feedback_genesis() {
                return Err(FeedbackError {
                    at: None,
                    reason: FeedbackReason::HeadMismatch {
                        records: 0,
                        expected: anchor.hash,
                    },
                });
            }
        }
        Ok(self.head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::text_digest;

    fn chain(n: u64) -> Vec<FeedbackRecord> {
        let mut head = feedback_genesis_head();
        (0..n)
            .map(|i| {
                let verdict = if i % 2 == 0 {
                    FeedbackVerdict::Right
                } else {
                    FeedbackVerdict::Wrong
                };
                let correction = (i % 2 == 1).then(|| text_digest(&format!("SELECT {i}")));
                let r = FeedbackRecord::chained(
                    head,
                    10 + i,
                    [i as u8; 32],
                    format!("[\"s\",\"role{i}\"]"),
                    verdict,
                    correction,
                );
                head = r.head();
                r
            })
            .collect()
    }

    fn verify(records: &[FeedbackRecord], expected: Option<Head>) -> Result<Head, FeedbackError> {
        let mut v = FeedbackVerifier::new(expected);
        for r in records {
            v.push(r)?;
        }
        v.finish()
    }

    #[test]
    fn an_honest_chain_verifies_and_ends_in_its_head() {
        let records = chain(5);
        let head = verify(&records, None).expect("verifies");
        assert_eq!(head, records[4].head());
        assert_eq!(head.seals, 5);
        assert_eq!(verify(&records, Some(head)), Ok(head));
        assert_eq!(verify(&[], None), Ok(feedback_genesis_head()));
        assert_eq!(
            verify(&[], Some(feedback_genesis_head())),
            Ok(feedback_genesis_head())
        );
    }

    #[test]
    fn verdicts_parse_in_either_case_and_nothing_else() {
        assert_eq!(
            FeedbackVerdict::parse("right"),
            Some(FeedbackVerdict::Right)
        );
        assert_eq!(
            FeedbackVerdict::parse("WRONG"),
            Some(FeedbackVerdict::Wrong)
        );
        for bad in ["", "ok", " right", "rightly", "wrong "] {
            assert_eq!(FeedbackVerdict::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn every_field_is_bound() {
        let r = chain(1).remove(0);
        let edits: [fn(&mut FeedbackRecord); 7] = [
            |r| r.index += 1,
            |r| r.generation += 1,
            |r| r.seal_hash[0] ^= 1,
            |r| r.role.push('x'),
            |r| r.verdict = FeedbackVerdict::Wrong,
            |r| r.correction_digest = Some([0; 32]),
            |r| r.prev_hash[31] ^= 1,
        ];
        for edit in edits {
            let mut e = r.clone();
            edit(&mut e);
            assert_ne!(e.compute_hash(), r.hash, "{e:?}");
        }
        // Absent and present-but-zero digests differ; the role's length is bound.
        let mut a = r.clone();
        a.role = "ab".into();
        let mut b = r.clone();
        b.role = "a".into();
        assert_ne!(a.encode(), b.encode());
        assert_ne!(feedback_genesis(), crate::audit::seal_genesis());
    }

    #[test]
    fn an_edit_a_gap_a_copy_and_a_rechained_edit_are_found_where_they_are() {
        let records = chain(4);
        // An edit: that record's hash.
        let mut edited = records.clone();
        edited[1].verdict = FeedbackVerdict::Right;
        let e = verify(&edited, None).unwrap_err();
        assert_eq!(e.at, Some((1, 11)));
        assert!(matches!(e.reason, FeedbackReason::HashMismatch { .. }));
        // The same edit with its hash recomputed: the next record's link.
        edited[1].hash = edited[1].compute_hash();
        let e = verify(&edited, None).unwrap_err();
        assert_eq!(
            (e.at, e.reason),
            (Some((2, 12)), FeedbackReason::ChainBreak)
        );
        // A record deleted: the next one.
        let mut gap = records.clone();
        gap.remove(2);
        let e = verify(&gap, None).unwrap_err();
        assert_eq!(
            (e.at, e.reason),
            (Some((3, 13)), FeedbackReason::Missing { expected: 2 })
        );
        // A copy.
        let mut copy = records.clone();
        copy.insert(2, records[1].clone());
        let e = verify(&copy, None).unwrap_err();
        assert_eq!(
            (e.at, e.reason),
            (Some((1, 11)), FeedbackReason::Duplicate { expected: 2 })
        );
    }

    #[test]
    fn a_dropped_tail_shows_only_against_the_exported_head() {
        let records = chain(4);
        let head = records[3].head();
        assert!(verify(&records[..2], None).is_ok());
        let e = verify(&records[..2], Some(head)).unwrap_err();
        assert_eq!(
            (e.at, e.reason),
            (
                None,
                FeedbackReason::Truncated {
                    expected: 4,
                    found: 2
                }
            )
        );
        // A rewritten chain of the same length does not end in the exported hash.
        let mut other = chain(4);
        other[3] = FeedbackRecord::chained(
            other[2].head(),
            99,
            [9; 32],
            "x".into(),
            FeedbackVerdict::Right,
            None,
        );
        let e = verify(&other, Some(head)).unwrap_err();
        assert!(matches!(e.reason, FeedbackReason::HeadMismatch { .. }));
        // An empty chain against a head that is not the genesis one.
        let e = verify(
            &[],
            Some(Head {
                seals: 0,
                hash: [1; 32],
            }),
        )
        .unwrap_err();
        assert!(matches!(e.reason, FeedbackReason::HeadMismatch { .. }));
    }
}

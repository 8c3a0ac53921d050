//! The framed request/response protocol between backends and the mask worker, over the
//! worker's unix socket.
//!
//! A frame is `u32 big-endian length ‖ payload`, the payload one JSON object (a
//! [`Request`] from the backend, a [`Response`] from the worker). One request, one
//! response, in order, on a connection; except that an [`Request::Ask`] may be answered
//! with [`Response::Judge`] first (any number of times): the backend judges the statement
//! as the caller and sends [`Request::Verdict`] on the same connection, and the worker
//! goes on to the ask's answer; and with [`Response::Progress`] (any number of times),
//! which the backend only reports. Frames longer than [`MAX_FRAME`] are refused on both
//! sides before anything is allocated for them.

use grid_ask::{Answer, Ask, Candidate, Generated, Verdict};
use pgrx::PgSqlErrorCode;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::sqlstate::failure_sqlstate;
pub use super::sqlstate::{sqlstate_code, sqlstate_text};
pub use crate::audit::{FeedbackNote, SyntheticGeneration};

/// Largest payload either side accepts: room for a 1 MB question and its prompt.
pub const MAX_FRAME: usize = 16 << 20;

/// Most endpoints one [`Request::Warm`] prepares: each is a vocabulary kept in the worker.
pub const WARMED_MAX: usize = 8;

/// Longest delay a ping may ask for.
pub const MAX_PING_DELAY_MS: u32 = 60_000;

/// What a backend asks the worker. Serialized as one object whose first key, `type`,
/// names the variant; read by [`Request`]'s own `Deserialize`, which takes that first key.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    /// Answer with a [`Response::Pong`] carrying `nonce`, after `delay_ms` (at most
    /// [`MAX_PING_DELAY_MS`]; the delay lets tests show that a waiting backend can be
    /// cancelled).
    Ping { nonce: u64, delay_ms: u32 },
    /// Append one generation of given tokens to the audit store, in a transaction of the
    /// worker's own, and answer [`Response::Appended`] once it is committed.
    AppendSynthetic(SyntheticGeneration),
    /// Generate the SQL for a question (`grid.ask()`): everything the pipeline needs from
    /// the asking backend. The API key is not here: only the worker reads it, from its
    /// own configuration.
    Ask(Ask),
    /// The backend's verdict on the statement of its ask's [`Response::Judge`]: only
    /// accepted on that ask's connection, naming that ask, right after it.
    Verdict { ask: u64, verdict: Verdict },
    /// Whether a statement is in a role's language now (`grid.run(generation)`), answered
    /// with [`Response::Admitted`]: the snapshot and policy are taken as the caller, as
    /// for an ask; the worker checks against the language it keeps for them.
    Admits(Admits),
    /// Record that `grid.run` is about to run a generation's statement, in a transaction
    /// of the worker's own, answered with [`Response::Recorded`] once it is committed.
    RecordRun(RunRecord),
    /// Record what an asker said of one of its generations (`grid.feedback()`), chained
    /// in `grid.feedback_log` in a transaction of the worker's own, answered with
    /// [`Response::Noted`] once it is committed. The backend checked the caller and the
    /// correction as the caller; the worker checks the note against the store again.
    RecordFeedback(FeedbackNote),
    /// Prepare the vocabularies of the endpoints these `grid.endpoint` settings name, while
    /// no ask waits (the warm-up worker's, after a start), answered with
    /// [`Response::Warming`] at once; the server log says what each came to.
    Warm { endpoints: Vec<String> },
}

/// [`Request`]'s `type`.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum RequestType {
    Ping,
    AppendSynthetic,
    Ask,
    Verdict,
    Admits,
    RecordRun,
    RecordFeedback,
    Warm,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PingBody {
    nonce: u64,
    delay_ms: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VerdictBody {
    ask: u64,
    verdict: Verdict,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WarmBody {
    endpoints: Vec<String>,
}

/// Reads the `type` first and the variant from the rest of the object, as it streams by.
/// serde's derived reading of an internally tagged enum buffers the whole object first
/// (the tag might come last), and an ask's object holds the caller's catalog snapshot:
/// megabytes read twice on the socket thread, beside every other role's asks. The
/// worker's backends write `type` first (serde's tagged serialization does), so a request
/// whose first key is another is refused.
impl<'de> Deserialize<'de> for Request {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Request, D::Error> {
        struct Tagged;
        impl<'de> serde::de::Visitor<'de> for Tagged {
            type Value = Request;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a request: an object whose first key is \"type\"")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Request, A::Error> {
                use serde::de::Error as _;
                let key: Option<std::borrow::Cow<'de, str>> = map.next_key()?;
                if key.as_deref() != Some("type") {
                    return Err(A::Error::custom("a request's first key must be \"type\""));
                }
                let kind: RequestType = map.next_value()?;
                let rest = serde::de::value::MapAccessDeserializer::new(map);
                Ok(match kind {
                    RequestType::Ping => {
                        let b = PingBody::deserialize(rest)?;
                        Request::Ping {
                            nonce: b.nonce,
                            delay_ms: b.delay_ms,
                        }
                    }
                    RequestType::AppendSynthetic => {
                        Request::AppendSynthetic(SyntheticGeneration::deserialize(rest)?)
                    }
                    RequestType::Ask => Request::Ask(Ask::deserialize(rest)?),
                    RequestType::Verdict => {
                        let b = VerdictBody::deserialize(rest)?;
                        Request::Verdict {
                            ask: b.ask,
                            verdict: b.verdict,
                        }
                    }
                    RequestType::Admits => Request::Admits(Admits::deserialize(rest)?),
                    RequestType::RecordRun => Request::RecordRun(RunRecord::deserialize(rest)?),
                    RequestType::RecordFeedback => {
                        Request::RecordFeedback(FeedbackNote::deserialize(rest)?)
                    }
                    RequestType::Warm => Request::Warm {
                        endpoints: WarmBody::deserialize(rest)?.endpoints,
                    },
                })
            }
        }
        d.deserialize_map(Tagged)
    }
}

/// What an ask waits for, as the worker sees it (the backend adds the judge's turns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Handed to the pipeline, waiting for a decode loop.
    Queued,
    /// A decode loop took it: the role's language is compiled (unless kept) and the
    /// prompt rendered (by the endpoint, for some).
    Preparing,
    /// In its decode loop: the model evaluates the prompt before the first token.
    Prompt,
    /// The model writes the statement, token by token under the masks.
    Decoding,
    /// The first statement was refused: its repair's prompt is evaluated.
    RepairPrompt,
    /// The repair is written.
    RepairDecoding,
}

impl Stage {
    /// What an asker is told.
    pub fn says(self) -> &'static str {
        match self {
            Stage::Queued => "queued in the worker, waiting for a decode loop",
            Stage::Preparing => {
                "a decode loop took it: compiling the role's language if it is new, rendering the prompt"
            }
            Stage::Prompt => "the model is evaluating the prompt",
            Stage::Decoding => "the model is writing the statement",
            Stage::RepairPrompt => {
                "the first statement was refused; the model is evaluating the repair's prompt"
            }
            Stage::RepairDecoding => "the model is writing the repair",
        }
    }
}

/// A statement to check against a role's current language.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Admits {
    pub sql: String,
    /// As [`Ask::snapshot`] and [`Ask::policy`].
    pub snapshot: serde_json::Value,
    pub policy: Option<serde_json::Value>,
    pub current_user: String,
}

/// A run of a generation's statement by `grid.run` (a row of `grid.runs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRecord {
    pub generation: i64,
    pub session_user: String,
    pub current_user: String,
    /// `generation`, `asked` or `reused` (sql/audit.sql).
    pub called_as: String,
}

/// What the worker answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Response {
    Pong {
        nonce: u64,
        worker_pid: i32,
    },
    /// The generation is committed; `head` is the seal chain's head after it
    /// (`<seals>:<hash>`).
    Appended {
        generation: i64,
        head: String,
    },
    /// The SQL of a question, committed to the audit store with every step.
    Generated(Generated),
    /// Before the answer of an ask: judge this statement as the caller, and send
    /// [`Request::Verdict`].
    Judge(Candidate),
    /// Before the answer of an ask (any number of times): what the ask waits for now
    /// ([`Stage`]), for the backend to tell an asker who waits.
    Progress {
        stage: Stage,
    },
    /// The answer to [`Request::Admits`]: why the language or the checker refuses the
    /// statement, or `None` when both admit it.
    Admitted {
        refusal: Option<String>,
    },
    /// The run is recorded as row `run` of `grid.runs`.
    Recorded {
        run: i64,
    },
    /// The feedback is recorded as record `feedback` of `grid.feedback_log`.
    Noted {
        feedback: i64,
    },
    /// [`Request::Warm`]'s endpoints handed to the pipeline (the distinct ones, at most
    /// [`WARMED_MAX`]).
    Warming {
        queued: u32,
    },
    /// The request could not be served: the SQLSTATE the backend raises, and why.
    Error {
        sqlstate: String,
        message: String,
    },
}

impl Response {
    pub fn error(code: PgSqlErrorCode, message: impl Into<String>) -> Response {
        Response::Error {
            sqlstate: sqlstate_text(code),
            message: message.into(),
        }
    }

    /// The pipeline's answer, a failure with its SQLSTATE.
    pub fn of(answer: Answer) -> Response {
        match answer {
            Answer::Generated(g) => Response::Generated(g),
            Answer::Failed(f) => Response::error(failure_sqlstate(&f.kind), f.message),
        }
    }
}

/// A frame that cannot be sent or read.
#[derive(Debug, Error)]
pub enum ProtocolError {
    #[error("frame of {0} bytes exceeds the limit of {MAX_FRAME} bytes")]
    TooLarge(usize),
    #[error("malformed message: {0}")]
    Json(#[from] serde_json::Error),
    #[error("connection closed in the middle of a frame")]
    Truncated,
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

impl ProtocolError {
    /// The SQLSTATE of this failure: a frame over the cap is a limit, anything else a
    /// broken conversation.
    pub fn sqlstate(&self) -> PgSqlErrorCode {
        match self {
            ProtocolError::TooLarge(_) => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            ProtocolError::Json(_) | ProtocolError::Truncated => {
                PgSqlErrorCode::ERRCODE_PROTOCOL_VIOLATION
            }
            ProtocolError::Io(_) => PgSqlErrorCode::ERRCODE_CONNECTION_FAILURE,
        }
    }
}

/// The frame of `message`.
pub fn encode<T: Serialize>(message: &T) -> Result<Vec<u8>, ProtocolError> {
    let payload = serde_json::to_vec(message)?;
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|&n| n as usize <= MAX_FRAME)
        .ok_or(ProtocolError::TooLarge(payload.len()))?;
    let mut frame = Vec::with_capacity(4 + payload.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&payload);
    Ok(frame)
}

/// Reassembles frames from bytes that arrive in arbitrary pieces.
///
/// Invariant: `buffer` holds the bytes received and not yet returned as a frame.
#[derive(Debug, Default)]
pub struct FrameReader {
    buffer: Vec<u8>,
}

impl FrameReader {
    pub fn new() -> FrameReader {
        FrameReader::default()
    }

    /// Adds received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The next complete message, if its bytes have all arrived.
    pub fn next<T: for<'de> Deserialize<'de>>(&mut self) -> Result<Option<T>, ProtocolError> {
        let Some(header) = self.buffer.first_chunk::<4>() else {
            return Ok(None);
        };
        let len = u32::from_be_bytes(*header) as usize;
        if len > MAX_FRAME {
            return Err(ProtocolError::TooLarge(len));
        }
        if self.buffer.len() < 4 + len {
            return Ok(None);
        }
        let message = serde_json::from_slice(&self.buffer[4..4 + len])?;
        self.buffer.drain(..4 + len);
        Ok(Some(message))
    }

    /// The payload length the next frame's header declares, once its 4 bytes are here.
    pub fn declared_len(&self) -> Option<usize> {
        self.buffer
            .first_chunk::<4>()
            .map(|h| u32::from_be_bytes(*h) as usize)
    }

    /// Whether bytes of an incomplete frame are buffered.
    pub fn is_partial(&self) -> bool {
        !self.buffer.is_empty()
    }
}

/// Reads one message from a blocking stream; `None` at a clean end of stream.
pub fn read_blocking<T: for<'de> Deserialize<'de>>(
    stream: &mut impl std::io::Read,
    reader: &mut FrameReader,
) -> Result<Option<T>, ProtocolError> {
    read_blocking_seeing(stream, reader, |_| {})
}

/// [`read_blocking`], telling `declared` the frame's length as soon as its header is
/// here, before its payload is read (and again while the payload arrives).
pub fn read_blocking_seeing<T: for<'de> Deserialize<'de>>(
    stream: &mut impl std::io::Read,
    reader: &mut FrameReader,
    mut declared: impl FnMut(usize),
) -> Result<Option<T>, ProtocolError> {
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(len) = reader.declared_len() {
            declared(len);
        }
        if let Some(message) = reader.next()? {
            return Ok(Some(message));
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return if reader.is_partial() {
                Err(ProtocolError::Truncated)
            } else {
                Ok(None)
            };
        }
        reader.push(&chunk[..n]);
    }
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn the_declared_length_is_seen_before_the_payload_is_read() {
        let frame = encode(&Request::Ping {
            nonce: 1,
            delay_ms: 0,
        })
        .unwrap();
        let len = frame.len() - 4;
        // A stream that hands out 4 bytes a read: the payload takes several reads.
        struct Trickle<'a>(&'a [u8]);
        impl std::io::Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(4).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut seen = Vec::new();
        let mut stream = Trickle(&frame);
        let mut reader = FrameReader::new();
        let got = read_blocking_seeing::<Request>(&mut stream, &mut reader, |n| seen.push(n));
        assert!(matches!(got, Ok(Some(Request::Ping { nonce: 1, .. }))));
        // Once per read from the header on: the payload was still arriving at the first.
        assert_eq!(seen.len(), len.div_ceil(4) + 1, "{seen:?}");
        assert!(seen.iter().all(|&n| n == len));
        assert_eq!(FrameReader::new().declared_len(), None);
    }

    #[test]
    fn frames_survive_arbitrary_splits() {
        let a = Request::Ping {
            nonce: 7,
            delay_ms: 0,
        };
        let b = Request::Ping {
            nonce: u64::MAX,
            delay_ms: 5,
        };
        let mut bytes = encode(&a).unwrap();
        bytes.extend(encode(&b).unwrap());
        for split in 0..bytes.len() {
            let mut r = FrameReader::new();
            let mut got = Vec::new();
            for piece in [&bytes[..split], &bytes[split..]] {
                r.push(piece);
                while let Some(m) = r.next::<Request>().unwrap() {
                    got.push(m);
                }
            }
            assert_eq!(got, [a.clone(), b.clone()], "split at {split}");
            assert!(!r.is_partial());
        }
    }

    #[test]
    fn a_synthetic_generation_round_trips_and_unknown_fields_are_refused() {
        let g = Request::AppendSynthetic(SyntheticGeneration {
            question: Some("q".into()),
            final_sql: None,
            tokens: vec![1, 2],
            stop: Some("eos".into()),
            session_user: "s".into(),
            current_user: "c".into(),
            lock_timeout_ms: 10,
        });
        let mut r = FrameReader::new();
        r.push(&encode(&g).unwrap());
        assert_eq!(r.next::<Request>().unwrap(), Some(g));
        let forged = br#"{"type":"append_synthetic","tokens":[],"extra":1}"#;
        let mut r = FrameReader::new();
        r.push(&(forged.len() as u32).to_be_bytes());
        r.push(forged);
        assert!(matches!(r.next::<Request>(), Err(ProtocolError::Json(_))));
    }

    fn decoded(bytes: &[u8]) -> Result<Option<Request>, ProtocolError> {
        let mut r = FrameReader::new();
        r.push(&(bytes.len() as u32).to_be_bytes());
        r.push(bytes);
        r.next::<Request>()
    }

    /// Every request reads back as it was written, its `type` read first; a request whose
    /// first key is another, or with a field its variant lacks, is refused.
    #[test]
    fn every_request_round_trips_read_type_first() {
        let ask: Ask = serde_json::from_value(serde_json::json!({
            "question": "q", "snapshot": {"format": 1, "relations": []},
            "session_user": "s", "current_user": "c", "database": "d", "policy": null,
            "explain": false,
            "settings": {"endpoint": null, "model": null, "max_tokens": 64,
                         "temperature": 0.0, "timeout_ms": 1000, "audit": "full",
                         "ablation": {}, "fault": null, "judge": true},
            "examples": [], "offered": null
        }))
        .expect("an ask");
        let requests = [
            Request::Ping {
                nonce: 1,
                delay_ms: 2,
            },
            Request::Ask(ask),
            Request::Verdict {
                ask: 3,
                verdict: Verdict::Pass,
            },
            Request::Admits(Admits {
                sql: "SELECT 1".into(),
                snapshot: serde_json::json!({"format": 1}),
                policy: None,
                current_user: "c".into(),
            }),
            Request::RecordRun(RunRecord {
                generation: 4,
                session_user: "s".into(),
                current_user: "c".into(),
                called_as: "generation".into(),
            }),
            Request::RecordFeedback(FeedbackNote {
                generation: 5,
                session_user: "s".into(),
                current_user: "c".into(),
                verdict: "wrong".into(),
                corrected_sql: Some("SELECT 2".into()),
            }),
            Request::Warm {
                endpoints: vec!["http://x".into()],
            },
        ];
        for q in requests {
            let bytes = encode(&q).expect("encodes");
            let body = &bytes[4..];
            assert!(body.starts_with(br#"{"type":""#), "{q:?}");
            assert_eq!(decoded(body).expect("decodes"), Some(q.clone()));
            if matches!(
                q,
                Request::Ping { .. } | Request::Verdict { .. } | Request::Warm { .. }
            ) {
                let mut extra = body[..body.len() - 1].to_vec();
                extra.extend_from_slice(br#","x":1}"#);
                assert!(
                    matches!(decoded(&extra), Err(ProtocolError::Json(_))),
                    "{q:?} with a field it lacks"
                );
            }
        }
        for refused in [
            &br#"{"nonce":1,"type":"ping","delay_ms":0}"#[..],
            br#"{"type":"shutdown"}"#,
            br#"{}"#,
            br#"[]"#,
        ] {
            assert!(
                matches!(decoded(refused), Err(ProtocolError::Json(_))),
                "{}",
                String::from_utf8_lossy(refused)
            );
        }
    }

    #[test]
    fn oversized_and_malformed_frames_are_errors() {
        let mut r = FrameReader::new();
        r.push(&u32::MAX.to_be_bytes());
        assert!(matches!(
            r.next::<Request>(),
            Err(ProtocolError::TooLarge(_))
        ));

        let mut r = FrameReader::new();
        r.push(&3u32.to_be_bytes());
        r.push(b"{x}");
        assert!(matches!(r.next::<Request>(), Err(ProtocolError::Json(_))));

        let mut cut = &encode(&Response::error(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            "m",
        ))
        .unwrap()[..5];
        assert!(matches!(
            read_blocking::<Response>(&mut cut, &mut FrameReader::new()),
            Err(ProtocolError::Truncated)
        ));
    }
}

//! The JSONL form of a log (`grid generate --audit-out`): one JSON object per line, in
//! append order, `{"type":"step",…}` or `{"type":"seal",…}`; hashes, ids and
//! fingerprints as lowercase hex, `config_hash` as 16 hex digits (a u64 does not survive
//! every JSON reader as a number). The PostgreSQL audit tables mirror the same fields.
//!
//! ```text
//! {"type":"step","generation":7,"step":0,"config_hash":"0000000000000000",
//!  "mask_entry_id":"<32 hex>","token":42,"blocked_count":151000,"kind":"sampled",
//!  "prev_hash":"<64 hex>","hash":"<64 hex>"}
//! {"type":"seal","index":0,"generation":7,"stop":"eos","steps":12,
//!  "last_step_hash":"<64 hex>","fingerprints":{"grammar":"<32 hex>","lexicons":"…",
//!  "policy":"…","vocabulary":"…"},"mode":{"decode":"mode1","cache":true},
//!  "role":"analyst","question_digest":"<64 hex>","sql_digest":"<64 hex>",
//!  "prev_seal_hash":"<64 hex>","hash":"<64 hex>","prompt_digest":"<64 hex>"}
//! ```
//! (each object on one line). `token` is a number or the string `"eos"`; `role`,
//! `question_digest`, `sql_digest`, `prompt_digest` and `verdict` (the judge's, a string)
//! may be absent or null. Unknown fields are errors.

use std::io::{self, BufRead, Write};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::chain::{AuditSink, Entry, SinkError};
use super::hash::{from_hex, to_hex, HexError};
use super::record::{StepKind, StepRecord, Token};
use super::seal::{DecodeMode, Fingerprints, Mode, Seal, SealMeta, StopReason};

/// Why one line is not an entry.
#[derive(Debug, Error)]
pub enum LineError {
    #[error("read: {0}")]
    Io(#[from] io::Error),
    #[error("not UTF-8")]
    NotUtf8,
    #[error("empty line")]
    Empty,
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    #[error("field {field}: {source}")]
    Hex {
        field: &'static str,
        #[source]
        source: HexError,
    },
    #[error("field token: expected a u32 token id or \"eos\"")]
    TokenValue,
}

/// A malformed line, with its 1-based number.
#[derive(Debug, Error)]
#[error("line {line}: {error}")]
pub struct JsonlError {
    pub line: usize,
    #[source]
    pub error: LineError,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepWire {
    generation: u64,
    step: u32,
    config_hash: String,
    mask_entry_id: String,
    token: serde_json::Value,
    blocked_count: u32,
    kind: StepKind,
    prev_hash: String,
    hash: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FingerprintsWire {
    grammar: String,
    lexicons: String,
    policy: String,
    vocabulary: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModeWire {
    decode: DecodeMode,
    cache: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SealWire {
    index: u64,
    generation: u64,
    stop: StopReason,
    steps: u32,
    last_step_hash: String,
    fingerprints: FingerprintsWire,
    mode: ModeWire,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    question_digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sql_digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    verdict: Option<String>,
    prev_seal_hash: String,
    hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    prompt_digest: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum EntryWire {
    Step(StepWire),
    Seal(SealWire),
}

fn hex<const N: usize>(field: &'static str, s: &str) -> Result<[u8; N], LineError> {
    from_hex(s).map_err(|source| LineError::Hex { field, source })
}

fn token(v: &serde_json::Value) -> Result<Token, LineError> {
    if v.as_str() == Some("eos") {
        return Ok(Token::Eos);
    }
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .map(Token::Id)
        .ok_or(LineError::TokenValue)
}

fn to_wire(e: &Entry) -> EntryWire {
    match e {
        Entry::Step(r) => EntryWire::Step(StepWire {
            generation: r.generation,
            step: r.step,
            config_hash: to_hex(&r.config_hash.to_be_bytes()),
            mask_entry_id: to_hex(&r.mask_entry_id),
            token: match r.token {
                Token::Id(id) => serde_json::Value::from(id),
                Token::Eos => serde_json::Value::from("eos"),
            },
            blocked_count: r.blocked_count,
            kind: r.kind,
            prev_hash: to_hex(&r.prev_hash),
            hash: to_hex(&r.hash),
        }),
        Entry::Seal(s) => EntryWire::Seal(SealWire {
            index: s.index,
            generation: s.generation,
            stop: s.stop,
            steps: s.steps,
            last_step_hash: to_hex(&s.last_step_hash),
            fingerprints: FingerprintsWire {
                grammar: to_hex(&s.fingerprints.grammar),
                lexicons: to_hex(&s.fingerprints.lexicons),
                policy: to_hex(&s.fingerprints.policy),
                vocabulary: to_hex(&s.fingerprints.vocabulary),
            },
            mode: ModeWire {
                decode: s.mode.decode,
                cache: s.mode.cache,
            },
            role: s.meta.role.clone(),
            question_digest: s.meta.question_digest.map(|d| to_hex(&d)),
            sql_digest: s.meta.sql_digest.map(|d| to_hex(&d)),
            verdict: s.meta.verdict.clone(),
            prev_seal_hash: to_hex(&s.prev_seal_hash),
            hash: to_hex(&s.hash),
            prompt_digest: s.meta.prompt_digest.map(|d| to_hex(&d)),
        }),
    }
}

fn from_wire(w: EntryWire) -> Result<Entry, LineError> {
    Ok(match w {
        EntryWire::Step(r) => Entry::Step(StepRecord {
            generation: r.generation,
            step: r.step,
            config_hash: u64::from_be_bytes(hex("config_hash", &r.config_hash)?),
            mask_entry_id: hex("mask_entry_id", &r.mask_entry_id)?,
            token: token(&r.token)?,
            blocked_count: r.blocked_count,
            kind: r.kind,
            prev_hash: hex("prev_hash", &r.prev_hash)?,
            hash: hex("hash", &r.hash)?,
        }),
        EntryWire::Seal(s) => Entry::Seal(Seal {
            index: s.index,
            generation: s.generation,
            stop: s.stop,
            steps: s.steps,
            last_step_hash: hex("last_step_hash", &s.last_step_hash)?,
            fingerprints: Fingerprints {
                grammar: hex("fingerprints.grammar", &s.fingerprints.grammar)?,
                lexicons: hex("fingerprints.lexicons", &s.fingerprints.lexicons)?,
                policy: hex("fingerprints.policy", &s.fingerprints.policy)?,
                vocabulary: hex("fingerprints.vocabulary", &s.fingerprints.vocabulary)?,
            },
            mode: Mode {
                decode: s.mode.decode,
                cache: s.mode.cache,
            },
            meta: SealMeta {
                role: s.role,
                question_digest: s
                    .question_digest
                    .map(|d| hex("question_digest", &d))
                    .transpose()?,
                sql_digest: s.sql_digest.map(|d| hex("sql_digest", &d)).transpose()?,
                verdict: s.verdict,
                prompt_digest: s
                    .prompt_digest
                    .map(|d| hex("prompt_digest", &d))
                    .transpose()?,
            },
            prev_seal_hash: hex("prev_seal_hash", &s.prev_seal_hash)?,
            hash: hex("hash", &s.hash)?,
        }),
    })
}

/// The entry as one JSON object, without the newline.
pub fn to_line(entry: &Entry) -> Result<String, serde_json::Error> {
    serde_json::to_string(&to_wire(entry))
}

/// Writes the entry as one line, newline included.
pub(crate) fn write_line<W: Write>(mut w: W, entry: &Entry) -> io::Result<()> {
    serde_json::to_writer(&mut w, &to_wire(entry))?;
    w.write_all(b"\n")
}

/// Parses one line (without its newline).
pub(crate) fn parse_line(line: &str) -> Result<Entry, LineError> {
    if line.trim().is_empty() {
        return Err(LineError::Empty);
    }
    from_wire(serde_json::from_str(line)?)
}

/// Writes every entry, one line each.
pub fn write_jsonl<W: Write>(mut w: W, entries: &[Entry]) -> io::Result<()> {
    for e in entries {
        write_line(&mut w, e)?;
    }
    w.flush()
}

/// Streams entries from a JSONL reader, each with its 1-based line number. A final line
/// without a newline is read like any other; `\r\n` endings are accepted.
pub struct JsonlReader<R> {
    reader: R,
    line: usize,
    buf: Vec<u8>,
    failed: bool,
}

impl<R: BufRead> JsonlReader<R> {
    pub fn new(reader: R) -> Self {
        JsonlReader {
            reader,
            line: 0,
            buf: Vec::new(),
            failed: false,
        }
    }

    fn next_line(&mut self) -> Result<Option<Entry>, LineError> {
        self.buf.clear();
        if self.reader.read_until(b'\n', &mut self.buf)? == 0 {
            return Ok(None);
        }
        let mut bytes = &self.buf[..];
        if let Some(b) = bytes.strip_suffix(b"\n") {
            bytes = b.strip_suffix(b"\r").unwrap_or(b);
        }
        let text = std::str::from_utf8(bytes).map_err(|_| LineError::NotUtf8)?;
        parse_line(text).map(Some)
    }
}

impl<R: BufRead> Iterator for JsonlReader<R> {
    type Item = Result<(usize, Entry), JsonlError>;

    /// After the first error the reader stops (returns `None`).
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        self.line += 1;
        match self.next_line() {
            Ok(None) => None,
            Ok(Some(e)) => Some(Ok((self.line, e))),
            Err(error) => {
                self.failed = true;
                Some(Err(JsonlError {
                    line: self.line,
                    error,
                }))
            }
        }
    }
}

/// Reads a whole JSONL log; the first malformed line is an error.
pub fn read_jsonl<R: BufRead>(reader: R) -> Result<Vec<Entry>, JsonlError> {
    JsonlReader::new(reader)
        .map(|r| r.map(|(_, e)| e))
        .collect()
}

/// A sink writing one line per entry and flushing after each, so that a crash loses at
/// most the line being written (which then reads back as a malformed last line).
#[derive(Debug)]
pub struct JsonlSink<W: Write> {
    out: W,
}

impl<W: Write> JsonlSink<W> {
    pub fn new(out: W) -> Self {
        JsonlSink { out }
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W: Write> AuditSink for JsonlSink<W> {
    fn append(&mut self, entry: &Entry) -> Result<(), SinkError> {
        write_line(&mut self.out, entry)?;
        self.out.flush()?;
        Ok(())
    }
}

//! Tokenizer vocabularies as token bytes.
//!
//! The mask engine of grid_pg works on bytes: for every token id it needs the exact byte
//! string the token adds to the output, which ids are special (never sampled through the
//! mask; EOS enters only through the gate), which ids alias each other, and whether every
//! byte is reachable. This crate turns the vocabularies users actually serve into that
//! view — a [`Vocabulary`] — and encodes text into ids exactly as each model's own
//! tokenizer does (used to replay real SQL token by token).
//!
//! Adapters, one module each:
//!
//! | source | module | encoder |
//! | --- | --- | --- |
//! | HF `tokenizer.json` (BPE + ByteLevel), `vocab.json` + `merges.txt` | [`hf`] | regex, merges by merge rank |
//! | tiktoken rank file (Llama-3 `tokenizer.model`) | [`tiktoken`] | regex, merges by token rank |
//! | SentencePiece `.model` protobuf (Llama-2, Mistral) | [`sentencepiece`] | `▁`, merges by piece score, byte fallback |
//! | served JSON byte list | [`served`] | greedy longest match |
//!
//! ```no_run
//! let v = grid_vocab::Vocabulary::load("path/to/tokenizer/dir")?;
//! let ids = v.encode("SELECT name FROM singer");
//! assert_eq!(v.decode(&ids), b"SELECT name FROM singer");
//! # Ok::<(), grid_vocab::VocabError>(())
//! ```

mod bpe;
mod bytelevel;
mod cache;
pub mod error;
mod greedy;
pub mod hf;
mod load;
pub mod pretokenize;
mod protobuf;
pub mod sentencepiece;
pub mod served;
pub mod tiktoken;
mod vocab;

pub use error::{Result, VocabError};
pub use hf::{AddedToken, ByteLevelConfig};
pub use pretokenize::Normalization;
pub use served::served_json;
pub use vocab::{VocabKind, Vocabulary};

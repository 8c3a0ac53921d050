//! Typed errors of the vocabulary layer.

use std::path::PathBuf;

/// Everything that can go wrong while loading, building or serving a vocabulary.
///
/// Malformed input files never panic: every defect is reported as one of these variants,
/// naming the file (or in-memory source) and what was wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum VocabError {
    /// A file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A JSON document did not parse.
    #[error("{what}: invalid JSON: {source}")]
    Json {
        /// Which document (a path or a description such as "served vocabulary").
        what: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A document parsed but its content is not a valid vocabulary of its kind.
    #[error("{what}: {detail}")]
    Malformed {
        /// Which document (a path or a description).
        what: String,
        /// What was wrong, with a line number or token id where one helps.
        detail: String,
    },
    /// A well-formed tokenizer that this crate does not handle (for example a
    /// `tokenizer.json` whose model is WordPiece).
    #[error("unsupported tokenizer: {0}")]
    Unsupported(String),
    /// `Vocabulary::load` could not tell what a path holds.
    #[error("cannot tell the vocabulary format of {path}: {detail}")]
    UnknownFormat {
        /// The path given to `load`.
        path: PathBuf,
        /// What was looked for.
        detail: String,
    },
    /// A token id (special id, EOS, added token) lies outside the vocabulary.
    #[error("{what}: token id {id} is out of range (vocabulary has {len} tokens)")]
    IdOutOfRange {
        /// Where the id came from.
        what: String,
        /// The offending id.
        id: u64,
        /// Number of tokens.
        len: usize,
    },
    /// A pre-tokenizer regular expression did not compile.
    #[error("invalid pre-tokenizer pattern {pattern:?}: {detail}")]
    Regex {
        /// The pattern as given.
        pattern: String,
        /// The regex engine's message.
        detail: String,
    },
}

impl VocabError {
    pub(crate) fn malformed(what: impl Into<String>, detail: impl Into<String>) -> Self {
        VocabError::Malformed {
            what: what.into(),
            detail: detail.into(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        VocabError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn json(what: impl Into<String>, source: serde_json::Error) -> Self {
        VocabError::Json {
            what: what.into(),
            source,
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = VocabError> = std::result::Result<T, E>;

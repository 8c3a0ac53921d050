//! Errors of the engine's build steps. Recognition failures are not errors: they are
//! ordinary answers ([`crate::recognizer::Stop`]).

use thiserror::Error;

#[derive(Debug, Error)]
pub enum GridError {
    #[error("grammar template: {0}")]
    Template(String),

    #[error("grammar does not load: {0}")]
    Grammar(String),

    #[error("grammar has {sr} shift/reduce and {rr} reduce/reduce conflicts; fix the grammar:\n{detail}")]
    Conflicts {
        sr: usize,
        rr: usize,
        detail: String,
    },

    #[error("grammar is not reduced: {0}")]
    NotReduced(String),

    #[error("terminal numbering moved: {0}")]
    Numbering(String),

    #[error("lexeme spec, line {line}: {msg}")]
    LexSpec { line: usize, msg: String },

    #[error("lexeme spec and grammar disagree: {0}")]
    SpecMismatch(String),

    #[error("lexer automaton: {0}")]
    Automaton(String),

    #[error("policy: {0}")]
    Policy(String),

    #[error("the policy leaves an empty language: {0}")]
    EmptyLanguage(String),

    #[error("lexicon word {word:?} for {category} cannot be scanned by terminal {terminal}")]
    UnscannableWord {
        word: String,
        category: String,
        terminal: String,
    },

    #[error("schema: {0}")]
    Schema(String),

    #[error("{0}")]
    Io(#[from] std::io::Error),

    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}

pub type Result<T, E = GridError> = std::result::Result<T, E>;

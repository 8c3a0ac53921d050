//! The one error type of the `grid` commands: every way a command can fail, each with
//! the line `main` prints before it exits with status 2.

use grid_core::catalog::CatalogError;
use grid_core::trie::TrieError;
use grid_core::GridError;
use grid_vocab::VocabError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum CliError {
    #[error(transparent)]
    Grid(#[from] GridError),
    #[error("tokenizer: {0}")]
    Vocab(#[from] VocabError),
    #[error("catalog snapshot: {0}")]
    Catalog(#[from] CatalogError),
    #[error("token trie: {0}")]
    Trie(#[from] TrieError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("database {0:?} is not in the tables file")]
    UnknownDb(String),
    #[error("no questions given")]
    NoQuestions,
    /// An input file or argument that cannot be used as given.
    #[error("{0}")]
    Input(String),
    #[error("audit log: {0}")]
    Audit(String),
    #[error("llguidance: {0}")]
    Llguidance(String),
    /// Arguments that do not go together.
    #[error("{0}")]
    Usage(String),
}

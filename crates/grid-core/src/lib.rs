//! The grid_pg engine: the dialect grammar (L1), role projections (L2), schema lexicons
//! (L3), and the viable-prefix recognizer that decides them byte by byte. No PostgreSQL.

pub mod audit;
pub mod cache;
pub mod catalog;
pub mod cd_class;
pub mod checker;
pub mod decode;
pub mod error;
pub mod grammar;
pub mod language;
pub mod lexer;
pub mod lexicon;
pub mod mask;
pub mod message;
pub mod oracle;
pub mod parser;
pub mod policy;
pub mod prompt;
pub mod recognizer;
pub mod registry;
pub mod reserve;
pub mod scan;
pub mod schema;
pub mod scope;
pub mod statement;
pub mod termset;
pub mod trie;

pub use error::{GridError, Result};
pub use grammar::Dialect;
pub use language::Language;
pub use lexicon::Lexicon;
pub use policy::Policy;
pub use recognizer::{Config, Session, Stop};
pub use scan::StopKind;
pub use schema::Schema;
pub use termset::TermSet;

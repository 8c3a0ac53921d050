//! The grid_pg engine: the dialect grammar (L1), role projections (L2), schema lexicons
//! (L3), and the viable-prefix recognizer that decides them byte by byte. No PostgreSQL.
//!
//! The modules, in four groups; each uses only modules listed before it, so nothing
//! points back (`tests/core/modules.rs` fails on an import cycle). A lower module that
//! needs something of a higher one defines a trait for it ([`scope::StackView`],
//! `scan::ScanHost`) and the higher one implements it. Modules named without a link are
//! internal (`pub(crate)`).
//!
//! **Build**: from a dialect, a role and a schema to a compiled language.
//! - `error`: errors of the build steps.
//! - `termset`: fixed-width sets of terminal ids.
//! - [`text`]: characters that hide what text does; the statement's text, strictly
//!   decoded; prompt text, escaped.
//! - [`schema`]: relations and columns, by the names PostgreSQL stores.
//! - [`policy`]: what a role may write and which clauses it may not use.
//! - `lexer`: the scanner's automata and PostgreSQL's word bytes.
//! - [`grammar`]: L1 and L2, the dialect grammar and its role projections.
//! - [`lexicon`]: L3, the names each identifier category allows and their spellings.
//! - `qualifier`: which form of a qualified column stands on a parser stack.
//! - [`scope`]: the dynamic lexicon's rules: names the statement itself introduces.
//! - `language`: L1 projected by a policy and restricted by a lexicon.
//! - [`catalog`]: one role's catalog snapshot, read into its schema, policy and language.
//! - [`trie`]: a vocabulary's tokens as a byte trie, and where names start in them.
//! - [`registry`]: single-flight sharing of compiled languages and tries by fingerprint.
//!
//! **Recognize**: one byte at a time, whether the output can still become a sentence.
//! - `scan`: the byte scanner (maximal munch), hosted by whoever takes its lexemes.
//! - [`parser`]: interned parser stacks and the terminals each allows next.
//! - [`recognizer`]: [`Session`], the scanner and the parser stepped together.
//!
//! **Mask**: per step, which tokens keep the output viable.
//! - [`cd_class`]: the verdict classes of context-dependent tokens.
//! - [`cache`]: the write-back mask cache, with its stack-free walk.
//! - [`mask`]: [`mask::Masker`], the exact mask by a walk of the trie or through the cache.
//! - [`oracle`]: the brute-force mask the walk is tested against.
//! - [`reserve`]: the tokens a legal completion still needs (termination).
//!
//! **Run**: generations, their checks and their record.
//! - [`message`]: ASCII-only text for messages that reach a client.
//! - [`statement`]: what a generated statement writes.
//! - [`checker`]: column privileges, checked after the parse.
//! - [`prompt`]: the prompt, from the role's schema and the question.
//! - [`audit`]: the hash-chained record of every step and seal.
//! - [`decode`]: the decode loop, many generations stepped as one batch.

pub mod audit;
pub mod cache;
pub mod catalog;
pub mod cd_class;
pub mod checker;
pub mod decode;
pub(crate) mod error;
pub mod grammar;
pub(crate) mod language;
pub(crate) mod lexer;
pub mod lexicon;
pub mod mask;
pub mod message;
pub mod oracle;
pub mod parser;
pub mod policy;
pub mod prompt;
pub(crate) mod qualifier;
pub mod recognizer;
pub mod registry;
pub mod reserve;
pub(crate) mod scan;
pub mod schema;
pub mod scope;
pub mod statement;
pub(crate) mod termset;
pub mod text;
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

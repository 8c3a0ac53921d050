//! The scanner's two automata (the union of terminal languages and the word trie) and the
//! byte classes of PostgreSQL's lexer that decide where a lexeme may end.

pub(crate) mod dfa;
pub(crate) mod words;

/// Whether PostgreSQL's lexer reads `b` as part of a word (an identifier, keyword or number
/// goes on): a lexeme never ends between two such bytes.
pub(crate) fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// Whether `b` may begin an identifier (what PostgreSQL 15 refuses right after a number).
pub(crate) fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

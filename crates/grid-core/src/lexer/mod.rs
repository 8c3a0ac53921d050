//! The scanner's two automata: the union of terminal languages and the word trie.

pub mod dfa;
pub mod words;

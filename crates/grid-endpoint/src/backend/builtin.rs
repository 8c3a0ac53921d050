//! The built-in vocabulary of the mocks: every single byte, common SQL words with and
//! without a leading space, and an EOS token. It lets the reference endpoint and the
//! extension run a mock with no tokenizer file (a demo on a machine without model data);
//! masks over it are as exact as over any real vocabulary.

use grid_vocab::{VocabError, Vocabulary};

/// The EOS token's text.
pub(crate) const BUILTIN_EOS: &str = "<|endoftext|>";

const WORDS: &[&str] = &[
    "SELECT", "FROM", "WHERE", "JOIN", "ON", "AND", "OR", "NOT", "GROUP", "BY", "ORDER", "LIMIT",
    "AS", "INSERT", "INTO", "VALUES", "UPDATE", "SET", "DELETE", "DISTINCT", "HAVING", "ASC",
    "DESC", "IN", "LIKE", "IS", "NULL", "BETWEEN", "count", "sum", "avg", "max", "min", "COUNT",
    "SUM", "AVG", "MAX", "MIN", "id", "name",
];

/// The built-in vocabulary: ids 0–255 are the bytes, then the words (each bare and with
/// a leading space), then EOS.
pub fn builtin_vocabulary() -> Result<Vocabulary, VocabError> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for w in WORDS {
        tokens.push(w.as_bytes().to_vec());
        tokens.push(format!(" {w}").into_bytes());
    }
    let eos = u32::try_from(tokens.len()).unwrap_or(u32::MAX);
    tokens.push(BUILTIN_EOS.as_bytes().to_vec());
    Vocabulary::from_served(tokens, &[eos], Some(eos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_vocabulary_spells_any_text_and_ends_with_eos() {
        let v = builtin_vocabulary().expect("builtin vocabulary");
        assert_eq!(v.len(), 256 + 2 * WORDS.len() + 1);
        assert_eq!(v.eos_id(), Some(v.len() as u32 - 1));
        let text = "SELECT name FROM employees WHERE id = 7 -- é";
        assert_eq!(v.decode(&v.encode(text)), text.as_bytes());
        // Words are found: fewer tokens than bytes.
        assert!(v.encode(text).len() < text.len());
        // Stable across builds: the fingerprint is what endpoint and extension compare.
        assert_eq!(
            v.fingerprint(),
            builtin_vocabulary().expect("again").fingerprint()
        );
    }
}

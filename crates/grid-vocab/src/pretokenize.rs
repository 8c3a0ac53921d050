//! Pre-tokenization: Unicode normalization, then regex splitting into words.
//!
//! Byte-level BPE and tiktoken encoders never merge across the pieces produced here;
//! each piece ("pre-token word") is encoded on its own, which is also what makes a
//! per-word cache valid.

use std::borrow::Cow;

use fancy_regex::Regex;
use unicode_normalization::UnicodeNormalization;

use crate::error::{Result, VocabError};

/// GPT-2's pre-tokenizer pattern (also used by HF `ByteLevel` with `use_regex: true`).
pub const GPT2_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// Qwen2 / Qwen2.5 / Qwen3's pre-tokenizer pattern (single digits).
pub const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Llama-3's (and cl100k's) pre-tokenizer pattern (digits in runs of up to three).
pub const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Unicode normalization applied to the whole text before splitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Normalization {
    /// Text is used as given (GPT-2, Llama-3).
    #[default]
    None,
    /// Canonical composition (Qwen2/2.5).
    Nfc,
    /// Compatibility composition.
    Nfkc,
    /// Canonical decomposition.
    Nfd,
    /// Compatibility decomposition.
    Nfkd,
}

impl Normalization {
    /// Applies the normalization; borrows when nothing needs to change.
    pub fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let changed: Option<String> = match self {
            Normalization::None => None,
            Normalization::Nfc => Some(text.nfc().collect()).filter(|s: &String| s != text),
            Normalization::Nfkc => Some(text.nfkc().collect()).filter(|s: &String| s != text),
            Normalization::Nfd => Some(text.nfd().collect()).filter(|s: &String| s != text),
            Normalization::Nfkd => Some(text.nfkd().collect()).filter(|s: &String| s != text),
        };
        match changed {
            Some(s) => Cow::Owned(s),
            None => Cow::Borrowed(text),
        }
    }
}

/// How the parts of the text that no regex match covers are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gaps {
    /// Kept as pieces of their own (Hugging Face `Split` with behavior `Isolated`).
    Keep,
    /// Dropped (tiktoken encodes only the regex matches).
    Drop,
}

/// A pre-tokenizer: a normalization, then regexes applied in sequence (each one splits
/// every piece the previous one produced), each match becoming a piece.
///
/// Splitting never fails: should the backtracking engine give up on a pathological
/// input (its backtrack limit), the rest of the current piece is kept whole.
#[derive(Debug)]
pub struct PreTokenizer {
    /// Applied to the whole text first.
    normalization: Normalization,
    /// The splitting regexes, outermost first, with their source patterns.
    regexes: Vec<(String, Regex)>,
    /// What happens to unmatched text.
    gaps: Gaps,
}

impl PreTokenizer {
    /// Compiles a pre-tokenizer from patterns applied in sequence.
    pub fn new(patterns: &[&str], normalization: Normalization, gaps: Gaps) -> Result<Self> {
        let mut regexes = Vec::with_capacity(patterns.len());
        for p in patterns {
            let re = Regex::new(p).map_err(|e| VocabError::Regex {
                pattern: (*p).to_string(),
                detail: e.to_string(),
            })?;
            regexes.push(((*p).to_string(), re));
        }
        Ok(PreTokenizer {
            normalization,
            regexes,
            gaps,
        })
    }

    /// The patterns, outermost first.
    pub fn patterns(&self) -> impl Iterator<Item = &str> {
        self.regexes.iter().map(|(p, _)| p.as_str())
    }

    /// The normalization applied before splitting.
    pub fn normalization(&self) -> Normalization {
        self.normalization
    }

    /// Normalizes `text`.
    pub fn normalize<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.normalization.apply(text)
    }

    /// Splits already-normalized text into pieces, in order.
    pub fn split<'a>(&self, text: &'a str) -> Vec<&'a str> {
        let mut pieces = vec![text];
        for (_, re) in &self.regexes {
            let mut next = Vec::with_capacity(pieces.len() * 2);
            for piece in pieces {
                split_one(re, piece, self.gaps, &mut next);
            }
            pieces = next;
        }
        pieces.retain(|p| !p.is_empty());
        pieces
    }
}

fn split_one<'a>(re: &Regex, text: &'a str, gaps: Gaps, out: &mut Vec<&'a str>) {
    let mut last = 0;
    for m in re.find_iter(text) {
        match m {
            Ok(m) => {
                if m.start() > last && gaps == Gaps::Keep {
                    out.push(&text[last..m.start()]);
                }
                if m.end() > m.start() {
                    out.push(m.as_str());
                }
                last = m.end();
            }
            Err(_) => break,
        }
    }
    if last < text.len() {
        // Either an unmatched tail or the rest after the engine gave up.
        out.push(&text[last..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_splits_like_gpt2() {
        let p = PreTokenizer::new(&[GPT2_PATTERN], Normalization::None, Gaps::Keep).unwrap();
        assert_eq!(
            p.split("Hello  world's 123\n\n x"),
            vec!["Hello", " ", " world", "'s", " 123", "\n\n", " x"]
        );
    }

    #[test]
    fn llama3_groups_digits_by_three_and_qwen_by_one() {
        let l = PreTokenizer::new(&[LLAMA3_PATTERN], Normalization::None, Gaps::Drop).unwrap();
        assert_eq!(l.split("12345"), vec!["123", "45"]);
        let q = PreTokenizer::new(&[QWEN2_PATTERN], Normalization::Nfc, Gaps::Keep).unwrap();
        assert_eq!(q.split("12345"), vec!["1", "2", "3", "4", "5"]);
        assert_eq!(q.split("IT'S"), vec!["IT", "'S"]);
        assert_eq!(q.normalize("cafe\u{301}"), "caf\u{e9}");
    }

    #[test]
    fn bad_pattern_is_an_error() {
        assert!(matches!(
            PreTokenizer::new(&["(unclosed"], Normalization::None, Gaps::Keep),
            Err(VocabError::Regex { .. })
        ));
    }
}

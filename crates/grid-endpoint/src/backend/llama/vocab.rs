//! The served vocabulary of a GGUF model, from its tokenizer's tokens as llama.cpp
//! reads them (bytes and kind per id).
//!
//! * Served ids are `0..n`, `n` one past the last token that is not *unused*: a model's
//!   logits row is often longer than its tokenizer (Qwen2.5: 151,936 rows for 151,665
//!   tokens; the GGUF fills the gap with unused `[PAD…]` entries). Those rows are never
//!   served, so no mask can admit them.
//! * Kinds: as the GGUF file declares them (`tokenizer.ggml.token_type`), not as
//!   llama.cpp adjusts them when loading.
//! * Special ids: every token that is not a normal one (control tokens, user-defined or
//!   added tokens, the unknown token, unused holes inside the range), as
//!   `grid_vocab` does for a Hugging Face tokenizer (all added tokens are special), so a
//!   Qwen GGUF serves the same vocabulary, with the same fingerprint, as its
//!   `tokenizer.json` with the same EOS.
//! * EOS: the chat template's end of turn (llama.cpp's EOT, `<|im_end|>` for Qwen),
//!   else the model's EOS.

use grid_vocab::Vocabulary;

/// How a tokenizer entry is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// Ordinary text (byte tokens included): maskable.
    Normal,
    /// Control, user-defined/added or unknown: special, never in a mask.
    Special,
    /// A placeholder (padding): not served when trailing, special and empty inside.
    Unused,
}

impl TokenKind {
    /// The kind of a token type as a GGUF file declares it ([`super::gguf`]).
    pub fn from_gguf(ty: i32) -> TokenKind {
        use super::gguf::token_type::*;
        match ty {
            NORMAL | BYTE => TokenKind::Normal,
            UNUSED => TokenKind::Unused,
            _ => TokenKind::Special,
        }
    }
}

/// The vocabulary of `tokens` (bytes and kind per id) with end-of-turn `eot` and EOS
/// `eos` (llama.cpp's ids; negative or out of range means none), or the `eos_override`
/// id. See the module documentation.
pub fn served_vocabulary(
    tokens: Vec<(Vec<u8>, TokenKind)>,
    eot: i64,
    eos: i64,
    eos_override: Option<u32>,
) -> Result<Vocabulary, String> {
    let n = tokens
        .iter()
        .rposition(|(_, k)| *k != TokenKind::Unused)
        .map_or(0, |i| i + 1);
    if n == 0 {
        return Err("the model's tokenizer has no tokens".into());
    }
    let valid = |id: i64| (0..n as i64).contains(&id).then_some(id as u32);
    let end = match eos_override {
        Some(id) if (id as usize) < n => Some(id),
        Some(id) => return Err(format!("--eos {id} is not a token of the model (0..{n})")),
        None => valid(eot).or(valid(eos)),
    };
    let mut special = Vec::new();
    let mut bytes = Vec::with_capacity(n);
    for (id, (b, kind)) in tokens.into_iter().take(n).enumerate() {
        match kind {
            TokenKind::Normal => bytes.push(b),
            TokenKind::Special => {
                special.push(id as u32);
                bytes.push(b);
            }
            TokenKind::Unused => {
                special.push(id as u32);
                bytes.push(Vec::new());
            }
        }
    }
    Vocabulary::from_served(bytes, &special, end).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(s: &str, k: TokenKind) -> (Vec<u8>, TokenKind) {
        (s.as_bytes().to_vec(), k)
    }

    #[test]
    fn padding_is_not_served_and_added_tokens_are_special() {
        use TokenKind::*;
        let tokens = vec![
            tok("a", Normal),
            tok("b", Normal),
            tok("", Unused),
            tok("<|im_end|>", Special),
            tok("<tool>", Special),
            tok("[PAD5]", Unused),
            tok("[PAD6]", Unused),
        ];
        let v = served_vocabulary(tokens.clone(), 3, 99, None).unwrap();
        assert_eq!(v.len(), 5);
        assert_eq!(v.special_ids(), &[2, 3, 4]);
        assert_eq!(v.eos_id(), Some(3));
        assert_eq!(v.token_bytes(2), b"");
        assert_eq!(v.token_bytes(3), b"<|im_end|>");
        // No EOT: the model's EOS; an override wins; a bad override is refused.
        assert_eq!(
            served_vocabulary(tokens.clone(), -1, 4, None)
                .unwrap()
                .eos_id(),
            Some(4)
        );
        assert_eq!(
            served_vocabulary(tokens.clone(), -1, -1, None)
                .unwrap()
                .eos_id(),
            None
        );
        assert_eq!(
            served_vocabulary(tokens.clone(), 3, 4, Some(4))
                .unwrap()
                .eos_id(),
            Some(4)
        );
        assert!(served_vocabulary(tokens, 3, 4, Some(5)).is_err());
        assert!(served_vocabulary(vec![tok("", Unused)], 0, 0, None).is_err());
    }
}

//! Tokenizer vocabularies as token bytes.

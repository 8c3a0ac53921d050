//! `Vocabulary::load`: one entry point that tells the format from what the path holds.

use std::path::Path;

use serde_json::Value;

use crate::error::{Result, VocabError};
use crate::hf::{load_vocab_merges, tokenizer_json_value};
use crate::sentencepiece::parse_sentencepiece;
use crate::served::served_value;
use crate::tiktoken::{load_tiktoken, looks_like_tiktoken};
use crate::vocab::Vocabulary;

impl Vocabulary {
    /// Loads a vocabulary from `path`, which may be
    ///
    /// * a directory holding `tokenizer.json`, or `vocab.json` + `merges.txt` (with
    ///   `added_tokens.json` when present), or `tokenizer.model` (in that order);
    /// * a Hugging Face `tokenizer.json` file (a JSON object with `"model"`);
    /// * a served-vocabulary JSON file (a JSON object with `"tokens"`, see
    ///   [`crate::served`]);
    /// * a `vocab.json` file with `merges.txt` beside it;
    /// * a `tokenizer.model` file of either kind, told apart by content, not name: tiktoken
    ///   text (first line `base64 rank`, `special_tokens.json` beside it read when present)
    ///   or a SentencePiece protobuf.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let meta = std::fs::metadata(path).map_err(|e| VocabError::io(path, e))?;
        if meta.is_dir() {
            return load_dir(path);
        }
        load_file(path)
    }
}

fn load_dir(dir: &Path) -> Result<Vocabulary> {
    let tj = dir.join("tokenizer.json");
    if tj.is_file() {
        return load_file(&tj);
    }
    let (vj, mt) = (dir.join("vocab.json"), dir.join("merges.txt"));
    if vj.is_file() && mt.is_file() {
        let added = dir.join("added_tokens.json");
        return load_vocab_merges(&vj, &mt, added.is_file().then_some(added.as_path()), None);
    }
    let tm = dir.join("tokenizer.model");
    if tm.is_file() {
        return load_file(&tm);
    }
    Err(VocabError::UnknownFormat {
        path: dir.to_path_buf(),
        detail: "directory has no tokenizer.json, vocab.json + merges.txt, or tokenizer.model"
            .into(),
    })
}

fn load_file(path: &Path) -> Result<Vocabulary> {
    let data = std::fs::read(path).map_err(|e| VocabError::io(path, e))?;
    let what = path.display().to_string();
    let first = data.iter().copied().find(|b| !b.is_ascii_whitespace());
    if first == Some(b'{') {
        let doc: Value = serde_json::from_slice(&data).map_err(|e| VocabError::json(&what, e))?;
        if doc.get("model").is_some_and(Value::is_object) {
            return tokenizer_json_value(&doc, &what);
        }
        if doc.get("tokens").is_some_and(Value::is_array) {
            return served_value(&doc, &what);
        }
        if let Some(dir) = path.parent() {
            let mt = dir.join("merges.txt");
            if mt.is_file() {
                drop(doc);
                let added = dir.join("added_tokens.json");
                return load_vocab_merges(
                    path,
                    &mt,
                    added.is_file().then_some(added.as_path()),
                    None,
                );
            }
        }
        return Err(VocabError::UnknownFormat {
            path: path.to_path_buf(),
            detail: "JSON object with neither \"model\" (tokenizer.json) nor \"tokens\" (served vocabulary), and no merges.txt beside it".into(),
        });
    }
    if looks_like_tiktoken(&data) {
        drop(data);
        return load_tiktoken(path, None);
    }
    if data.first() == Some(&0x0a) {
        return parse_sentencepiece(&data, &what);
    }
    Err(VocabError::UnknownFormat {
        path: path.to_path_buf(),
        detail: "neither JSON, a tiktoken rank file, nor a SentencePiece protobuf".into(),
    })
}

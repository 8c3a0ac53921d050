//! `Vocabulary::load`: one entry point that tells the format from what the path holds.

use std::path::Path;

use serde::de::{IgnoredAny, MapAccess, SeqAccess};
use serde::Deserialize;
use serde_json::Value;

use crate::error::{Result, VocabError};
use crate::hf::{load_vocab_merges, parse_tokenizer_json};
use crate::sentencepiece::parse_sentencepiece;
use crate::served::served_value;
use crate::tiktoken::{load_tiktoken, looks_like_tiktoken};
use crate::vocab::Vocabulary;

impl Vocabulary {
    /// Loads a vocabulary from `path`, which may be
    ///
    /// * a directory holding `tokenizer.json`, or `vocab.json` + `merges.txt` (with
    ///   `added_tokens.json` when present), or `tokenizer.model` (in that order; a
    ///   `tokenizer.json` this crate does not support, such as a SentencePiece-style one,
    ///   gives way to a `tokenizer.model` beside it);
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

/// The JSON type of a value, read without keeping it.
#[derive(Debug, PartialEq, Eq)]
enum Shape {
    Object,
    Array,
    Other,
}

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Shape;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<Shape, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Shape::Object)
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> std::result::Result<Shape, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Shape::Array)
            }
            fn visit_bool<E>(self, _: bool) -> std::result::Result<Shape, E> {
                Ok(Shape::Other)
            }
            fn visit_i64<E>(self, _: i64) -> std::result::Result<Shape, E> {
                Ok(Shape::Other)
            }
            fn visit_u64<E>(self, _: u64) -> std::result::Result<Shape, E> {
                Ok(Shape::Other)
            }
            fn visit_f64<E>(self, _: f64) -> std::result::Result<Shape, E> {
                Ok(Shape::Other)
            }
            fn visit_str<E>(self, _: &str) -> std::result::Result<Shape, E> {
                Ok(Shape::Other)
            }
            fn visit_unit<E>(self) -> std::result::Result<Shape, E> {
                Ok(Shape::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// What a JSON file's top-level `model` and `tokens` keys hold.
#[derive(Deserialize)]
struct Sniff {
    #[serde(default)]
    model: Option<Shape>,
    #[serde(default)]
    tokens: Option<Shape>,
}

fn load_dir(dir: &Path) -> Result<Vocabulary> {
    let tj = dir.join("tokenizer.json");
    let tm = dir.join("tokenizer.model");
    if tj.is_file() {
        return match load_file(&tj) {
            // A SentencePiece-style tokenizer.json (Llama-2, Mistral repositories) next
            // to the model it was converted from: use the model.
            Err(VocabError::Unsupported(_)) if tm.is_file() => load_file(&tm),
            r => r,
        };
    }
    let (vj, mt) = (dir.join("vocab.json"), dir.join("merges.txt"));
    if vj.is_file() && mt.is_file() {
        let added = dir.join("added_tokens.json");
        return load_vocab_merges(&vj, &mt, added.is_file().then_some(added.as_path()), None);
    }
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
        let text = String::from_utf8(data)
            .map_err(|_| VocabError::malformed(&what, "JSON file is not UTF-8"))?;
        let sniff: Sniff = serde_json::from_str(&text).map_err(|e| VocabError::json(&what, e))?;
        if sniff.model == Some(Shape::Object) {
            return parse_tokenizer_json(&text, &what);
        }
        if sniff.tokens == Some(Shape::Array) {
            let doc: Value = serde_json::from_str(&text).map_err(|e| VocabError::json(&what, e))?;
            return served_value(&doc, &what);
        }
        if let Some(dir) = path.parent() {
            let mt = dir.join("merges.txt");
            if mt.is_file() {
                drop(text);
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

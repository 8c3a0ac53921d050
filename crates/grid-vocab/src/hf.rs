//! Byte-level BPE adapters: Hugging Face `tokenizer.json`, and `vocab.json` +
//! `merges.txt` (+ `added_tokens.json`).

use std::path::Path;

use rustc_hash::FxHashMap;
use serde::Deserialize;
use serde_json::Value;

use crate::bpe::{ByteLevelEncoder, MergeTable};
use crate::bytelevel::{byte_to_char, CharToByte};
use crate::cache::WordCache;
use crate::error::{Result, VocabError};
use crate::pretokenize::{
    Gaps, Normalization, PreTokenizer, GPT2_PATTERN, LLAMA3_PATTERN, QWEN2_PATTERN,
};
use crate::vocab::{Encoder, Parts, VocabKind, Vocabulary};

/// Special-token texts taken as end-of-sequence, in order of preference.
const EOS_NAMES: &[&str] = &[
    "<|endoftext|>",
    "<|end_of_text|>",
    "</s>",
    "<|im_end|>",
    "<|eot_id|>",
    "<eos>",
    "<|end|>",
];

/// How a byte-level BPE tokenizer splits and normalizes text; `tokenizer.json` carries
/// this, `vocab.json` + `merges.txt` do not (see [`ByteLevelConfig::guess`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByteLevelConfig {
    /// Pre-tokenizer regexes applied in sequence (HF `Split` … then `ByteLevel`'s own).
    pub patterns: Vec<String>,
    /// Unicode normalization of the whole text.
    pub normalization: Normalization,
    /// HF `ByteLevel.add_prefix_space`.
    pub add_prefix_space: bool,
    /// HF `BPE.ignore_merges`: a word that is a token is emitted whole.
    pub ignore_merges: bool,
}

impl ByteLevelConfig {
    /// GPT-2: its regex, no normalization.
    pub fn gpt2() -> Self {
        ByteLevelConfig {
            patterns: vec![GPT2_PATTERN.into()],
            normalization: Normalization::None,
            add_prefix_space: false,
            ignore_merges: false,
        }
    }

    /// Qwen2 / Qwen2.5 / Qwen3: single-digit regex, NFC.
    pub fn qwen2() -> Self {
        ByteLevelConfig {
            patterns: vec![QWEN2_PATTERN.into()],
            normalization: Normalization::Nfc,
            add_prefix_space: false,
            ignore_merges: false,
        }
    }

    /// Llama-3 `tokenizer.json`: three-digit regex, `ignore_merges`.
    pub fn llama3() -> Self {
        ByteLevelConfig {
            patterns: vec![LLAMA3_PATTERN.into()],
            normalization: Normalization::None,
            add_prefix_space: false,
            ignore_merges: true,
        }
    }

    /// The configuration for a `vocab.json` + `merges.txt` pair, told from its added
    /// tokens: Qwen's when `<|im_start|>` is among them, GPT-2's otherwise.
    pub fn guess(added: &[AddedToken]) -> Self {
        if added.iter().any(|t| t.content == "<|im_start|>") {
            Self::qwen2()
        } else {
            Self::gpt2()
        }
    }
}

/// A token added on top of the BPE vocabulary (`added_tokens` of `tokenizer.json`,
/// `added_tokens.json`). All added tokens are special for masking, whatever their
/// `special` flag says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedToken {
    /// Its id.
    pub id: u32,
    /// Its text.
    pub content: String,
}

fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| VocabError::io(path, e))
}

fn as_id(v: &Value, what: &str, key: &str) -> Result<u32> {
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| VocabError::malformed(what, format!("id of {key:?} is not a u32: {v}")))
}

/// The entries of a `vocab.json` object `{token: id}` in file order, read straight from
/// the text (no generic JSON map). A JSON array (a unigram `vocab`) reads as `is_map:
/// false`.
struct VocabEntries {
    entries: Vec<(String, Value)>,
    is_map: bool,
}

impl<'de> Deserialize<'de> for VocabEntries {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = VocabEntries;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a vocabulary object {token: id}")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<VocabEntries, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    entries.push((k, v));
                }
                Ok(VocabEntries {
                    entries,
                    is_map: true,
                })
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<VocabEntries, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(VocabEntries {
                    entries: Vec::new(),
                    is_map: false,
                })
            }
        }
        d.deserialize_any(V)
    }
}

impl VocabEntries {
    fn into_ids(self, what: &str) -> Result<Vec<(String, u32)>> {
        if !self.is_map {
            return Err(VocabError::malformed(
                what,
                "vocabulary is not a JSON object",
            ));
        }
        self.entries
            .into_iter()
            .map(|(k, id)| {
                let id = as_id(&id, what, &k)?;
                Ok((k, id))
            })
            .collect()
    }
}

/// Parses `merges.txt` text into pairs, in rank order.
pub(crate) fn parse_merges_txt(text: &str, what: &str) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() || (n == 0 && line.starts_with("#version")) {
            continue;
        }
        let mut parts = line.split(' ');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(a), Some(b), None) if !a.is_empty() && !b.is_empty() => {
                out.push((a.to_string(), b.to_string()))
            }
            _ => {
                return Err(VocabError::malformed(
                    what,
                    format!(
                        "line {}: a merge must be two tokens separated by one space: {line:?}",
                        n + 1
                    ),
                ))
            }
        }
    }
    Ok(out)
}

fn parse_merges_json(v: &Value, what: &str) -> Result<Vec<(String, String)>> {
    let arr = v
        .as_array()
        .ok_or_else(|| VocabError::malformed(what, "model.merges is not an array"))?;
    let mut out = Vec::with_capacity(arr.len());
    for (i, m) in arr.iter().enumerate() {
        let pair = match m {
            Value::String(s) => {
                let mut parts = s.split(' ');
                match (parts.next(), parts.next(), parts.next()) {
                    (Some(a), Some(b), None) => Some((a.to_string(), b.to_string())),
                    _ => None,
                }
            }
            Value::Array(a) if a.len() == 2 => match (&a[0], &a[1]) {
                (Value::String(x), Value::String(y)) => Some((x.clone(), y.clone())),
                _ => None,
            },
            _ => None,
        };
        out.push(
            pair.ok_or_else(|| {
                VocabError::malformed(what, format!("merge {i} is not a pair: {m}"))
            })?,
        );
    }
    Ok(out)
}

/// Parses `added_tokens.json`: either `[{"id":…,"content":…,…}]` (as Qwen ships it, and
/// `tokenizer.json`'s `added_tokens`) or `{"content": id}`.
pub(crate) fn parse_added_tokens(v: &Value, what: &str) -> Result<Vec<AddedToken>> {
    match v {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let content = t.get("content").and_then(Value::as_str).ok_or_else(|| {
                    VocabError::malformed(what, format!("added token {i} has no content"))
                })?;
                let id = t.get("id").ok_or_else(|| {
                    VocabError::malformed(what, format!("added token {i} has no id"))
                })?;
                Ok(AddedToken {
                    id: as_id(id, what, content)?,
                    content: content.to_string(),
                })
            })
            .collect(),
        Value::Object(map) => map
            .iter()
            .map(|(k, id)| {
                Ok(AddedToken {
                    id: as_id(id, what, k)?,
                    content: k.clone(),
                })
            })
            .collect(),
        _ => Err(VocabError::malformed(
            what,
            "added tokens are neither a list nor an object",
        )),
    }
}

/// Builds a byte-level BPE vocabulary from its parts.
///
/// `vocab` maps token strings (in GPT-2's byte ↔ unicode spelling) to ids; `merges` are
/// in rank order; `added` tokens become special. Ids no entry defines become special
/// with empty bytes. When there are no added tokens, a vocabulary entry
/// `<|endoftext|>` (GPT-2's `vocab.json`) is special.
pub fn byte_level_from_parts(
    vocab: Vec<(String, u32)>,
    merges: Vec<(String, String)>,
    added: Vec<AddedToken>,
    config: ByteLevelConfig,
    what: &str,
) -> Result<Vocabulary> {
    build(vocab, merges, added, config, true, what)
}

fn build(
    vocab: Vec<(String, u32)>,
    merges: Vec<(String, String)>,
    added: Vec<AddedToken>,
    config: ByteLevelConfig,
    exact: bool,
    what: &str,
) -> Result<Vocabulary> {
    if vocab.is_empty() {
        return Err(VocabError::malformed(what, "empty vocabulary"));
    }
    let max_id = vocab
        .iter()
        .map(|(_, id)| *id)
        .chain(added.iter().map(|t| t.id))
        .max()
        .unwrap_or(0);
    let len = max_id as usize + 1;
    if len > vocab.len() + added.len() + (1 << 20) {
        return Err(VocabError::malformed(
            what,
            format!(
                "ids up to {max_id} for only {} tokens",
                vocab.len() + added.len()
            ),
        ));
    }
    let inv = CharToByte::new();
    let mut tokens: Vec<Option<Vec<u8>>> = vec![None; len];
    let mut by_str: FxHashMap<&str, u32> = FxHashMap::default();
    for (s, id) in &vocab {
        let slot = &mut tokens[*id as usize];
        if slot.is_some() {
            return Err(VocabError::malformed(
                what,
                format!("id {id} is given to two tokens (one is {s:?})"),
            ));
        }
        *slot = Some(inv.decode(s));
        by_str.insert(s.as_str(), *id);
    }
    let mut special: Vec<u32> = Vec::new();
    for t in &added {
        tokens[t.id as usize] = Some(t.content.as_bytes().to_vec());
        special.push(t.id);
    }
    if added.is_empty() {
        if let Some(&id) = by_str.get("<|endoftext|>") {
            special.push(id);
        }
    }
    let mut eos = None;
    'names: for name in EOS_NAMES {
        for &id in &special {
            if tokens[id as usize].as_deref() == Some(name.as_bytes()) {
                eos = Some(id);
                break 'names;
            }
        }
    }
    let tokens: Vec<Vec<u8>> = tokens
        .into_iter()
        .enumerate()
        .map(|(id, t)| {
            t.unwrap_or_else(|| {
                special.push(id as u32);
                Vec::new()
            })
        })
        .collect();

    let fwd = byte_to_char();
    let mut byte_ids = [None; 256];
    for (b, c) in fwd.iter().enumerate() {
        let mut buf = [0u8; 4];
        byte_ids[b] = by_str.get(&*c.encode_utf8(&mut buf)).copied();
    }
    let mut table = MergeTable::default();
    for (rank, (a, b)) in merges.iter().enumerate() {
        let lookup = |s: &str| by_str.get(s).copied();
        let merged = format!("{a}{b}");
        match (lookup(a), lookup(b), lookup(&merged)) {
            (Some(x), Some(y), Some(z)) => table.insert(x, y, rank as u32, z),
            _ => {
                return Err(VocabError::malformed(
                    what,
                    format!(
                        "merge {} ({a:?} {b:?}) uses a token missing from the vocabulary",
                        rank + 1
                    ),
                ))
            }
        }
    }
    let special_set: rustc_hash::FxHashSet<u32> = special.iter().copied().collect();
    let whole_words = config.ignore_merges.then(|| {
        vocab
            .iter()
            .filter(|(_, id)| !special_set.contains(id))
            .map(|(s, id)| (inv.decode(s), *id))
            .collect()
    });
    let patterns: Vec<&str> = config.patterns.iter().map(String::as_str).collect();
    let pre = PreTokenizer::new(&patterns, config.normalization, Gaps::Keep)?;
    let encoder = ByteLevelEncoder {
        pre,
        add_prefix_space: config.add_prefix_space,
        byte_ids,
        merges: table,
        whole_words,
        cache: WordCache::default(),
    };
    Vocabulary::assemble(
        Parts {
            kind: VocabKind::ByteLevelBpe,
            tokens,
            special,
            eos,
            encoder: Encoder::Tokenizer(Box::new(encoder)),
            encoding_exact: exact,
            dummy_prefix: false,
        },
        what,
    )
}

/// Loads `vocab.json` + `merges.txt` (+ `added_tokens.json` when given), with the
/// configuration guessed by [`ByteLevelConfig::guess`] unless `config` is given.
pub fn load_vocab_merges(
    vocab_path: &Path,
    merges_path: &Path,
    added_path: Option<&Path>,
    config: Option<ByteLevelConfig>,
) -> Result<Vocabulary> {
    let what = vocab_path.display().to_string();
    let vtext = read_text(vocab_path)?;
    let vocab = serde_json::from_str::<VocabEntries>(&vtext)
        .map_err(|e| VocabError::json(&what, e))?
        .into_ids(&what)?;
    let mwhat = merges_path.display().to_string();
    let merges = parse_merges_txt(&read_text(merges_path)?, &mwhat)?;
    let added = match added_path {
        Some(p) => {
            let awhat = p.display().to_string();
            let a: Value =
                serde_json::from_str(&read_text(p)?).map_err(|e| VocabError::json(&awhat, e))?;
            parse_added_tokens(&a, &awhat)?
        }
        None => Vec::new(),
    };
    let config = config.unwrap_or_else(|| ByteLevelConfig::guess(&added));
    build(vocab, merges, added, config, true, &what)
}

/// What a `tokenizer.json` says about splitting and normalizing.
struct HfPipeline {
    config: ByteLevelConfig,
    byte_level: bool,
    exact: bool,
}

fn read_normalizer(v: &Value, p: &mut HfPipeline) {
    match v.get("type").and_then(Value::as_str) {
        None if v.is_null() => {}
        Some("NFC") => p.config.normalization = Normalization::Nfc,
        Some("NFKC") => p.config.normalization = Normalization::Nfkc,
        Some("NFD") => p.config.normalization = Normalization::Nfd,
        Some("NFKD") => p.config.normalization = Normalization::Nfkd,
        Some("Sequence") => {
            let items = v.get("normalizers").and_then(Value::as_array);
            for n in items.into_iter().flatten() {
                read_normalizer(n, p);
            }
        }
        _ => p.exact = false,
    }
}

fn read_pre_tokenizer(v: &Value, p: &mut HfPipeline, what: &str) -> Result<()> {
    match v.get("type").and_then(Value::as_str) {
        None if v.is_null() => {}
        Some("ByteLevel") => {
            p.byte_level = true;
            if v.get("add_prefix_space").and_then(Value::as_bool) == Some(true) {
                p.config.add_prefix_space = true;
            }
            if v.get("use_regex").and_then(Value::as_bool).unwrap_or(true) {
                p.config.patterns.push(GPT2_PATTERN.into());
            }
        }
        Some("Split") => {
            let pattern = v.get("pattern");
            let regex = pattern.and_then(|x| x.get("Regex")).and_then(Value::as_str);
            let behavior = v
                .get("behavior")
                .and_then(Value::as_str)
                .unwrap_or("Isolated");
            let invert = v.get("invert").and_then(Value::as_bool).unwrap_or(false);
            match regex {
                Some(r) if behavior == "Isolated" && !invert => p.config.patterns.push(r.to_string()),
                _ => {
                    return Err(VocabError::Unsupported(format!(
                        "{what}: Split pre-tokenizer {pattern:?} with behavior {behavior} (invert {invert})"
                    )))
                }
            }
        }
        Some("Sequence") => {
            let items = v.get("pretokenizers").and_then(Value::as_array);
            for n in items.into_iter().flatten() {
                read_pre_tokenizer(n, p, what)?;
            }
        }
        _ => p.exact = false,
    }
    Ok(())
}

/// The top level of a `tokenizer.json`, read without building a generic JSON tree for
/// the (large) vocabulary.
#[derive(Deserialize)]
struct RawTokenizer {
    model: RawModel,
    #[serde(default)]
    normalizer: Value,
    #[serde(default)]
    pre_tokenizer: Value,
    #[serde(default)]
    added_tokens: Value,
}

#[derive(Deserialize)]
struct RawModel {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    vocab: Option<VocabEntries>,
    #[serde(default)]
    merges: Option<Value>,
    #[serde(default)]
    ignore_merges: Option<bool>,
    #[serde(default)]
    continuing_subword_prefix: Option<String>,
    #[serde(default)]
    end_of_word_suffix: Option<String>,
}

/// Parses a Hugging Face `tokenizer.json` document (model type BPE with a `ByteLevel`
/// pre-tokenizer).
pub fn parse_tokenizer_json(text: &str, what: &str) -> Result<Vocabulary> {
    let doc: RawTokenizer = serde_json::from_str(text).map_err(|e| VocabError::json(what, e))?;
    let model = doc.model;
    match model.kind.as_deref() {
        Some("BPE") => {}
        None if model.merges.is_some() => {}
        Some(t) => {
            return Err(VocabError::Unsupported(format!(
                "{what}: model type {t}, not BPE"
            )))
        }
        None => {
            return Err(VocabError::Unsupported(format!(
                "{what}: model without type or merges"
            )))
        }
    }
    for (key, v) in [
        (
            "continuing_subword_prefix",
            &model.continuing_subword_prefix,
        ),
        ("end_of_word_suffix", &model.end_of_word_suffix),
    ] {
        if let Some(s) = v.as_deref().filter(|s| !s.is_empty()) {
            return Err(VocabError::Unsupported(format!(
                "{what}: BPE with {key} {s:?}"
            )));
        }
    }
    let mut p = HfPipeline {
        config: ByteLevelConfig {
            patterns: Vec::new(),
            normalization: Normalization::None,
            add_prefix_space: false,
            ignore_merges: model.ignore_merges.unwrap_or(false),
        },
        byte_level: false,
        exact: true,
    };
    read_normalizer(&doc.normalizer, &mut p);
    read_pre_tokenizer(&doc.pre_tokenizer, &mut p, what)?;
    if !p.byte_level {
        return Err(VocabError::Unsupported(format!(
            "{what}: BPE without a ByteLevel pre-tokenizer (a SentencePiece-style tokenizer.json; load its tokenizer.model instead)"
        )));
    }
    let vocab = model
        .vocab
        .ok_or_else(|| VocabError::malformed(what, "model has no vocab"))?
        .into_ids(what)?;
    let merges = match &model.merges {
        Some(m) => parse_merges_json(m, what)?,
        None => Vec::new(),
    };
    let added = match &doc.added_tokens {
        Value::Null => Vec::new(),
        a => parse_added_tokens(a, what)?,
    };
    build(vocab, merges, added, p.config, p.exact, what)
}

/// Loads a Hugging Face `tokenizer.json` file.
pub fn load_tokenizer_json(path: &Path) -> Result<Vocabulary> {
    parse_tokenizer_json(&read_text(path)?, &path.display().to_string())
}

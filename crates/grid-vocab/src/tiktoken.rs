//! tiktoken rank files (`base64-token rank` per line), e.g. Llama-3's `tokenizer.model`,
//! with an optional `special_tokens.json` beside them.

use std::borrow::Cow;
use std::path::Path;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::cache::WordCache;
use crate::error::{Result, VocabError};
use crate::pretokenize::{Gaps, Normalization, PreTokenizer, LLAMA3_PATTERN};
use crate::vocab::{Encode, Encoder, Parts, VocabKind, Vocabulary};

/// Special-token names taken as end-of-sequence, in order of preference.
const EOS_NAMES: &[&str] = &["<|end_of_text|>", "<|endoftext|>", "</s>", "<|eot_id|>"];

/// Special tokens of a tiktoken vocabulary and its split pattern.
///
/// `special_tokens.json` is either `{"special_tokens": {name: id, …}, "pat_str": "…"}`
/// (what sits beside Llama-3's `tokenizer.model` here) or a flat `{name: id, …}` map.
/// Without `pat_str` the Llama-3 / cl100k pattern is used.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TiktokenSpecials {
    /// `(name, id)` pairs.
    pub tokens: Vec<(String, u32)>,
    /// The pre-tokenizer pattern, when given.
    pub pat_str: Option<String>,
}

impl TiktokenSpecials {
    /// Parses `special_tokens.json` text.
    pub fn parse(text: &str, what: &str) -> Result<Self> {
        let doc: Value = serde_json::from_str(text).map_err(|e| VocabError::json(what, e))?;
        let obj = doc
            .as_object()
            .ok_or_else(|| VocabError::malformed(what, "not a JSON object"))?;
        let (map, pat_str) = match obj.get("special_tokens") {
            Some(Value::Object(m)) => (
                m,
                obj.get("pat_str").and_then(Value::as_str).map(String::from),
            ),
            Some(_) => {
                return Err(VocabError::malformed(
                    what,
                    "special_tokens is not an object",
                ))
            }
            None => (obj, None),
        };
        let mut tokens = Vec::with_capacity(map.len());
        for (name, id) in map {
            let id = id
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| {
                    VocabError::malformed(what, format!("id of {name:?} is not a u32: {id}"))
                })?;
            tokens.push((name.clone(), id));
        }
        tokens.sort_by_key(|t| t.1);
        Ok(TiktokenSpecials { tokens, pat_str })
    }
}

/// Whether `data` looks like a tiktoken rank file: its first line is `base64 digits`.
pub(crate) fn looks_like_tiktoken(data: &[u8]) -> bool {
    let first = data.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let first = first.strip_suffix(b"\r").unwrap_or(first);
    let mut parts = first.split(|&b| b == b' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(tok), Some(rank), None) => {
            !tok.is_empty()
                && tok
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(b))
                && !rank.is_empty()
                && rank.iter().all(u8::is_ascii_digit)
        }
        _ => false,
    }
}

/// Parses rank-file text into `(bytes, rank)` pairs.
pub(crate) fn parse_ranks(text: &str, what: &str) -> Result<Vec<(Vec<u8>, u32)>> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = |d: &str| VocabError::malformed(what, format!("line {}: {d}: {line:?}", n + 1));
        let mut parts = line.split_whitespace();
        let (Some(tok), Some(rank), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad("expected `base64 rank`"));
        };
        let bytes = STANDARD
            .decode(tok)
            .map_err(|e| bad(&format!("bad base64 ({e})")))?;
        let rank: u32 = rank.parse().map_err(|_| bad("rank is not a u32"))?;
        out.push((bytes, rank));
    }
    if out.is_empty() {
        return Err(VocabError::malformed(what, "no ranks"));
    }
    Ok(out)
}

/// Encoder of a tiktoken vocabulary (`Encoding.encode_ordinary`).
#[derive(Debug)]
pub(crate) struct TiktokenEncoder {
    pre: PreTokenizer,
    /// Regular token bytes → rank (= id).
    ranks: FxHashMap<Vec<u8>, u32>,
    cache: WordCache,
}

impl Encode for TiktokenEncoder {
    fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        for piece in self.pre.split(text) {
            self.cache
                .encode_into(piece.as_bytes(), &mut out, |w, out| {
                    self.encode_piece(w, out)
                });
        }
        out
    }

    /// tiktoken does not normalize.
    fn normalize<'a>(&self, text: &'a str) -> Cow<'a, str> {
        Cow::Borrowed(text)
    }
}

impl TiktokenEncoder {
    fn rank(&self, b: &[u8]) -> u32 {
        self.ranks.get(b).copied().unwrap_or(u32::MAX)
    }

    /// tiktoken's `byte_pair_encode`: a piece that is a token is emitted whole; otherwise
    /// repeatedly merge the adjacent pair whose concatenation has the lowest rank
    /// (leftmost on ties). Bytes without a rank (impossible in a byte-complete file)
    /// are skipped.
    fn encode_piece(&self, piece: &[u8], out: &mut Vec<u32>) {
        if let Some(&id) = self.ranks.get(piece) {
            out.push(id);
            return;
        }
        if piece.len() < 2 {
            return;
        }
        // parts[i] = (start, rank of merging part i with part i+1)
        let mut parts: Vec<(usize, u32)> = Vec::with_capacity(piece.len() + 1);
        for i in 0..piece.len() - 1 {
            parts.push((i, self.rank(&piece[i..i + 2])));
        }
        parts.push((piece.len() - 1, u32::MAX));
        parts.push((piece.len(), u32::MAX));
        let get_rank = |parts: &[(usize, u32)], i: usize| {
            if i + 3 < parts.len() {
                self.rank(&piece[parts[i].0..parts[i + 3].0])
            } else {
                u32::MAX
            }
        };
        loop {
            let mut min = (u32::MAX, 0usize);
            for (i, &(_, r)) in parts[..parts.len() - 1].iter().enumerate() {
                if r < min.0 {
                    min = (r, i);
                }
            }
            if min.0 == u32::MAX {
                break;
            }
            let i = min.1;
            if i > 0 {
                parts[i - 1].1 = get_rank(&parts, i - 1);
            }
            parts[i].1 = get_rank(&parts, i);
            parts.remove(i + 1);
        }
        for w in parts.windows(2) {
            if let Some(&id) = self.ranks.get(&piece[w[0].0..w[1].0]) {
                out.push(id);
            }
        }
    }
}

/// Builds a tiktoken vocabulary from rank-file text and optional specials.
///
/// Ids are ranks; specials take their own ids (Llama-3: 128000..=128255). Ids neither
/// defines are special with empty bytes. EOS is `<|end_of_text|>` or `<|endoftext|>`.
pub fn parse_tiktoken(
    text: &str,
    specials: Option<TiktokenSpecials>,
    what: &str,
) -> Result<Vocabulary> {
    let ranks = parse_ranks(text, what)?;
    let specials = specials.unwrap_or_default();
    let max_id = ranks
        .iter()
        .map(|r| r.1)
        .chain(specials.tokens.iter().map(|t| t.1))
        .max()
        .unwrap_or(0);
    let count = ranks.len() + specials.tokens.len();
    if max_id as usize >= count + (1 << 20) {
        return Err(VocabError::malformed(
            what,
            format!("ids up to {max_id} for only {count} tokens"),
        ));
    }
    let mut tokens: Vec<Option<Vec<u8>>> = vec![None; max_id as usize + 1];
    let mut map: FxHashMap<Vec<u8>, u32> = FxHashMap::default();
    map.reserve(ranks.len());
    for (bytes, rank) in ranks {
        if tokens[rank as usize].is_some() {
            return Err(VocabError::malformed(
                what,
                format!("rank {rank} appears twice"),
            ));
        }
        tokens[rank as usize] = Some(bytes.clone());
        map.insert(bytes, rank);
    }
    let mut special = Vec::with_capacity(specials.tokens.len());
    for (name, id) in &specials.tokens {
        if tokens[*id as usize].is_some() {
            return Err(VocabError::malformed(
                what,
                format!("special {name:?} reuses id {id}"),
            ));
        }
        tokens[*id as usize] = Some(name.as_bytes().to_vec());
        special.push(*id);
    }
    let eos = EOS_NAMES
        .iter()
        .find_map(|n| specials.tokens.iter().find(|t| t.0 == *n).map(|t| t.1));
    let tokens = tokens
        .into_iter()
        .enumerate()
        .map(|(id, t)| {
            t.unwrap_or_else(|| {
                special.push(id as u32);
                Vec::new()
            })
        })
        .collect();
    let pattern = specials.pat_str.as_deref().unwrap_or(LLAMA3_PATTERN);
    let pre = PreTokenizer::new(&[pattern], Normalization::None, Gaps::Drop)?;
    let encoder = TiktokenEncoder {
        pre,
        ranks: map,
        cache: WordCache::default(),
    };
    Vocabulary::assemble(
        Parts {
            kind: VocabKind::Tiktoken,
            tokens,
            special,
            eos,
            encoder: Encoder::Tokenizer(Box::new(encoder)),
            encoding_exact: true,
            dummy_prefix: false,
        },
        what,
    )
}

/// Loads a tiktoken rank file; `specials` defaults to `special_tokens.json` in the same
/// folder when that exists.
pub fn load_tiktoken(path: &Path, specials: Option<&Path>) -> Result<Vocabulary> {
    let what = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| VocabError::io(path, e))?;
    let beside = path.parent().map(|d| d.join("special_tokens.json"));
    let sp_path = specials
        .map(Path::to_path_buf)
        .or(beside.filter(|p| p.is_file()));
    let sp = match sp_path {
        Some(p) => {
            let t = std::fs::read_to_string(&p).map_err(|e| VocabError::io(&p, e))?;
            Some(TiktokenSpecials::parse(&t, &p.display().to_string())?)
        }
        None => None,
    };
    parse_tiktoken(&text, sp, &what)
}

//! The served-vocabulary format: a vocabulary as a model endpoint serves it, as plain
//! byte strings.
//!
//! ```json
//! {"tokens": ["IQ==", "Ig==", …], "special": [50256], "eos": 50256}
//! ```
//!
//! * `tokens`: for every id `0..n` in order, the token's bytes, base64 (standard
//!   alphabet, with padding; the empty string for an empty token).
//! * `special`: ids of special (control/added) tokens, ascending; optional, default `[]`.
//! * `eos`: the end-of-sequence id, or `null`/absent when there is none. EOS is always
//!   treated as special, whether or not `special` lists it.
//!
//! Unknown keys are ignored, so an endpoint may add its own (a model name, say).
//! [`served_json`] writes exactly these three keys, compactly, `special` ascending and
//! deduplicated, `eos` after `special`, so equal vocabularies give equal documents.
//! A served vocabulary has the fingerprint of the tokenizer it was served from, but no
//! tokenizer: its `encode` is greedy longest match.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::Serialize;
use serde_json::Value;

use crate::error::{Result, VocabError};
use crate::vocab::{Encoder, Parts, VocabKind, Vocabulary};

#[derive(Serialize)]
struct ServedOut<'a> {
    tokens: Vec<String>,
    special: &'a [u32],
    eos: Option<u32>,
}

/// Writes the served-vocabulary JSON of `tokens` (bytes of ids `0..n`), `special` ids and
/// `eos`. Pure: the output depends only on the arguments.
pub fn served_json<'a>(
    tokens: impl IntoIterator<Item = &'a [u8]>,
    special: &[u32],
    eos: Option<u32>,
) -> String {
    let mut special = special.to_vec();
    special.sort_unstable();
    special.dedup();
    let out = ServedOut {
        tokens: tokens.into_iter().map(|t| STANDARD.encode(t)).collect(),
        special: &special,
        eos,
    };
    // Serializing strings and integers cannot fail.
    serde_json::to_string(&out).unwrap_or_default()
}

fn id_of(v: &Value, len: usize, what: &str, field: &str) -> Result<u32> {
    let n = v
        .as_u64()
        .ok_or_else(|| VocabError::malformed(what, format!("{field}: {v} is not a token id")))?;
    match u32::try_from(n) {
        Ok(id) if (id as usize) < len => Ok(id),
        _ => Err(VocabError::IdOutOfRange {
            what: format!("{what}: {field}"),
            id: n,
            len,
        }),
    }
}

/// Parses an already parsed served-vocabulary document.
pub(crate) fn served_value(doc: &Value, what: &str) -> Result<Vocabulary> {
    let tokens = doc
        .get("tokens")
        .and_then(Value::as_array)
        .ok_or_else(|| VocabError::malformed(what, "no \"tokens\" array"))?;
    let mut bytes = Vec::with_capacity(tokens.len());
    for (i, t) in tokens.iter().enumerate() {
        let s = t
            .as_str()
            .ok_or_else(|| VocabError::malformed(what, format!("token {i} is not a string")))?;
        bytes.push(
            STANDARD
                .decode(s)
                .map_err(|e| VocabError::malformed(what, format!("token {i}: bad base64 ({e})")))?,
        );
    }
    let len = bytes.len();
    let special = match doc.get("special") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| id_of(v, len, what, "special"))
            .collect::<Result<Vec<_>>>()?,
        Some(_) => return Err(VocabError::malformed(what, "\"special\" is not an array")),
    };
    let eos = match doc.get("eos") {
        None | Some(Value::Null) => None,
        Some(v) => Some(id_of(v, len, what, "eos")?),
    };
    Vocabulary::from_served(bytes, &special, eos)
}

impl Vocabulary {
    /// A vocabulary from plain token bytes (ids `0..tokens.len()`), special ids and EOS.
    pub fn from_served(tokens: Vec<Vec<u8>>, special: &[u32], eos: Option<u32>) -> Result<Self> {
        Vocabulary::assemble(
            Parts {
                kind: VocabKind::Served,
                tokens,
                special: special.to_vec(),
                eos,
                encoder: Encoder::Greedy(Default::default()),
                encoding_exact: false,
                dummy_prefix: false,
            },
            "served vocabulary",
        )
    }

    /// Parses served-vocabulary JSON (see [the module documentation](crate::served)).
    pub fn from_served_json(text: &str) -> Result<Self> {
        let doc: Value =
            serde_json::from_str(text).map_err(|e| VocabError::json("served vocabulary", e))?;
        served_value(&doc, "served vocabulary")
    }

    /// This vocabulary as served-vocabulary JSON; `from_served_json` of it has the same
    /// bytes, specials, EOS and fingerprint.
    pub fn to_served_json(&self) -> String {
        served_json(
            self.iter().map(|(_, b)| b),
            self.special_ids(),
            self.eos_id(),
        )
    }
}

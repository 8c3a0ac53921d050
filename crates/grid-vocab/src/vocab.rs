//! The `Vocabulary` type: token bytes, specials, EOS, fingerprint, aliases, encoding.

use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;

use blake2::digest::consts::U16;
use blake2::{Blake2b, Digest};
use rustc_hash::FxHashMap;

use crate::error::{Result, VocabError};
use crate::greedy::GreedyEncoder;

/// Which adapter a vocabulary came from (and so which encoder it carries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VocabKind {
    /// Byte-level BPE: Hugging Face `tokenizer.json`, or `vocab.json` + `merges.txt`.
    ByteLevelBpe,
    /// tiktoken rank file (`base64 rank` lines), e.g. Llama-3's `tokenizer.model`.
    Tiktoken,
    /// SentencePiece `ModelProto` (`.model` protobuf), e.g. Llama-2, Mistral.
    SentencePiece,
    /// A plain list of token byte strings served by a model endpoint (see [`crate::served`]).
    Served,
}

impl fmt::Display for VocabKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            VocabKind::ByteLevelBpe => "byte-level BPE",
            VocabKind::Tiktoken => "tiktoken",
            VocabKind::SentencePiece => "SentencePiece",
            VocabKind::Served => "served",
        })
    }
}

/// A source's own tokenizer, as its adapter builds it: what [`Vocabulary::encode`] and
/// [`Vocabulary::normalize`] run. A trait, so that this module names none of the
/// adapters (each of which builds a [`Vocabulary`]).
pub(crate) trait Encode: Send + Sync {
    fn encode(&self, text: &str) -> Vec<u32>;

    /// The text as the encoder sees it (see [`Vocabulary::normalize`]).
    fn normalize<'a>(&self, text: &'a str) -> Cow<'a, str>;
}

/// The encoder a vocabulary carries.
pub(crate) enum Encoder {
    /// The source's tokenizer (byte-level BPE, tiktoken, SentencePiece).
    Tokenizer(Box<dyn Encode>),
    /// No tokenizer is known (served vocabularies): greedy longest match, built lazily.
    Greedy(OnceLock<GreedyEncoder>),
}

/// What an adapter hands to [`Vocabulary::assemble`].
pub(crate) struct Parts {
    pub(crate) kind: VocabKind,
    /// Bytes of every id `0..len`; ids absent from the source file are empty here and
    /// listed in `special` by the adapter.
    pub(crate) tokens: Vec<Vec<u8>>,
    /// Special ids, any order, duplicates allowed.
    pub(crate) special: Vec<u32>,
    pub(crate) eos: Option<u32>,
    pub(crate) encoder: Encoder,
    /// Whether `encode` reproduces the model's tokenizer (false when the source uses a
    /// normalization or model type this crate only approximates).
    pub(crate) encoding_exact: bool,
    /// SentencePiece's dummy-prefix space: `encode` puts a space before the text.
    pub(crate) dummy_prefix: bool,
}

/// A tokenizer vocabulary seen as bytes: for every token id `0..len()` the exact byte
/// string the token stands for, plus which ids are special and which is EOS.
///
/// Data layout: all token byte strings are stored back to back in one buffer; token `i`
/// is `bytes[offsets[i]..offsets[i + 1]]`. Derived facts (alias classes,
/// byte-completeness, fingerprint) are computed once at construction; a vocabulary is
/// immutable and `Send + Sync`.
///
/// * **Special ids** are control/added tokens (GPT-2 and Qwen `<|endoftext|>`, Qwen
///   `<|im_start|>`/`<|im_end|>` and every other added token, Llama-3's 256 reserved ids,
///   SentencePiece UNKNOWN and CONTROL pieces, ids a file leaves undefined). They are
///   excluded from masking; their bytes are their literal text (empty for undefined ids).
///   EOS is always special.
/// * **Alias classes** group ≥ 2 non-special ids with identical bytes (e.g. SentencePiece
///   `a` and `<0x61>`); masks are over ids, so a mask admitting one must admit all.
/// * **Byte-complete** means each byte value 0..=255 is the whole spelling of some single
///   non-special token, so any byte string can be produced.
/// * **Fingerprint**: BLAKE2b-128 (lowercase hex) over the canonical serialization
///   `"grid-vocab/v1\0"`, `u64le len`, for each id `u32le byte length ‖ bytes`,
///   `u64le n_special`, each special id ascending as `u32le`, then `0x00` (no EOS) or
///   `0x01 ‖ u32le eos`. It depends on nothing but bytes, specials and EOS, so a served
///   copy of a vocabulary has the same fingerprint as the tokenizer it came from.
pub struct Vocabulary {
    kind: VocabKind,
    /// All token bytes, back to back.
    bytes: Vec<u8>,
    /// `len() + 1` offsets into `bytes`.
    offsets: Vec<usize>,
    /// Special ids, ascending, unique.
    special: Vec<u32>,
    /// `is_special[id]`.
    is_special: Vec<bool>,
    eos: Option<u32>,
    /// Alias classes: each ascending, classes ordered by first id.
    aliases: Vec<Vec<u32>>,
    /// Byte values that no single non-special token spells.
    missing_bytes: Vec<u8>,
    /// Lowercase hex BLAKE2b-128.
    fingerprint: String,
    encoder: Encoder,
    encoding_exact: bool,
    dummy_prefix: bool,
}

impl fmt::Debug for Vocabulary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vocabulary")
            .field("kind", &self.kind)
            .field("len", &self.len())
            .field("special", &self.special.len())
            .field("eos", &self.eos)
            .field("alias_classes", &self.aliases.len())
            .field("byte_complete", &self.is_byte_complete())
            .field("fingerprint", &self.fingerprint)
            .finish()
    }
}

impl Vocabulary {
    /// Builds a vocabulary from an adapter's parts, validating ids and computing the
    /// derived facts.
    pub(crate) fn assemble(parts: Parts, what: &str) -> Result<Self> {
        let Parts {
            kind,
            tokens,
            mut special,
            eos,
            encoder,
            encoding_exact,
            dummy_prefix,
        } = parts;
        let len = tokens.len();
        if u32::try_from(len).is_err() {
            return Err(VocabError::malformed(
                what,
                format!("{len} tokens is too many"),
            ));
        }
        if let Some(e) = eos {
            special.push(e);
        }
        special.sort_unstable();
        special.dedup();
        if let Some(&bad) = special.iter().find(|&&id| id as usize >= len) {
            return Err(VocabError::IdOutOfRange {
                what: format!("{what}: special/EOS id"),
                id: u64::from(bad),
                len,
            });
        }
        let mut is_special = vec![false; len];
        for &id in &special {
            is_special[id as usize] = true;
        }
        let mut offsets = Vec::with_capacity(len + 1);
        let mut bytes = Vec::with_capacity(tokens.iter().map(Vec::len).sum());
        offsets.push(0);
        for t in &tokens {
            bytes.extend_from_slice(t);
            offsets.push(bytes.len());
        }
        drop(tokens);
        let mut v = Vocabulary {
            kind,
            bytes,
            offsets,
            special,
            is_special,
            eos,
            aliases: Vec::new(),
            missing_bytes: Vec::new(),
            fingerprint: String::new(),
            encoder,
            encoding_exact,
            dummy_prefix,
        };
        v.derive();
        Ok(v)
    }

    /// Computes aliases, byte coverage and the fingerprint.
    fn derive(&mut self) {
        let mut groups: FxHashMap<&[u8], Vec<u32>> = FxHashMap::default();
        let mut covered = [false; 256];
        for id in 0..self.len() as u32 {
            if self.is_special[id as usize] {
                continue;
            }
            let b = self.token_bytes(id);
            if b.len() == 1 {
                covered[usize::from(b[0])] = true;
            }
            groups.entry(b).or_default().push(id);
        }
        let mut aliases: Vec<Vec<u32>> = groups.into_values().filter(|g| g.len() >= 2).collect();
        aliases.sort_unstable_by_key(|g| g[0]);
        self.aliases = aliases;
        self.missing_bytes = (0..=255u8).filter(|&b| !covered[usize::from(b)]).collect();
        self.fingerprint = self.compute_fingerprint();
    }

    fn compute_fingerprint(&self) -> String {
        let mut h = Blake2b::<U16>::new();
        h.update(b"grid-vocab/v1\0");
        h.update((self.len() as u64).to_le_bytes());
        for id in 0..self.len() as u32 {
            let b = self.token_bytes(id);
            h.update((b.len() as u32).to_le_bytes());
            h.update(b);
        }
        h.update((self.special.len() as u64).to_le_bytes());
        for &id in &self.special {
            h.update(id.to_le_bytes());
        }
        match self.eos {
            None => h.update([0u8]),
            Some(e) => {
                h.update([1u8]);
                h.update(e.to_le_bytes());
            }
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Number of token ids (`0..len()` are all valid).
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True for a vocabulary without tokens.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Which adapter produced this vocabulary.
    pub fn kind(&self) -> VocabKind {
        self.kind
    }

    /// The bytes of token `id`.
    ///
    /// # Panics
    /// If `id >= len()`, like slice indexing; use [`Vocabulary::get`] for a checked lookup.
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        let i = id as usize;
        &self.bytes[self.offsets[i]..self.offsets[i + 1]]
    }

    /// The bytes of token `id`, or `None` when out of range.
    pub fn get(&self, id: u32) -> Option<&[u8]> {
        ((id as usize) < self.len()).then(|| self.token_bytes(id))
    }

    /// Iterates `(id, bytes)` over all ids.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        (0..self.len() as u32).map(move |id| (id, self.token_bytes(id)))
    }

    /// Special ids (control/added tokens, EOS), ascending.
    pub fn special_ids(&self) -> &[u32] {
        &self.special
    }

    /// Whether `id` is special (out-of-range ids are not).
    pub fn is_special(&self, id: u32) -> bool {
        self.is_special.get(id as usize).copied().unwrap_or(false)
    }

    /// The special id whose text is `name` (e.g. `"<|im_end|>"`), if any.
    pub fn special_id(&self, name: &str) -> Option<u32> {
        self.special
            .iter()
            .copied()
            .find(|&id| self.token_bytes(id) == name.as_bytes())
    }

    /// The end-of-sequence id, when the source names one.
    pub fn eos_id(&self) -> Option<u32> {
        self.eos
    }

    /// The same vocabulary with another EOS (e.g. `<|im_end|>` for a Qwen chat model).
    /// The new EOS becomes special; the fingerprint changes accordingly.
    pub fn with_eos(mut self, eos: u32) -> Result<Self> {
        if eos as usize >= self.len() {
            return Err(VocabError::IdOutOfRange {
                what: "with_eos".into(),
                id: u64::from(eos),
                len: self.len(),
            });
        }
        self.eos = Some(eos);
        if let Err(pos) = self.special.binary_search(&eos) {
            self.special.insert(pos, eos);
            self.is_special[eos as usize] = true;
        }
        self.derive();
        Ok(self)
    }

    /// BLAKE2b-128 hex of the canonical serialization (see the type's documentation).
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Groups of ≥ 2 non-special ids with identical bytes; each ascending, ordered by
    /// their smallest id.
    pub fn alias_classes(&self) -> &[Vec<u32>] {
        &self.aliases
    }

    /// Whether every byte value is spelled by some single non-special token.
    pub fn is_byte_complete(&self) -> bool {
        self.missing_bytes.is_empty()
    }

    /// The byte values no single non-special token spells (empty iff byte-complete).
    pub fn missing_bytes(&self) -> &[u8] {
        &self.missing_bytes
    }

    /// Whether [`Vocabulary::encode`] reproduces the source tokenizer exactly. False for
    /// served vocabularies (no tokenizer is known: greedy longest match) and for sources
    /// using a normalization or model type that is only approximated (SentencePiece
    /// unigram models or precompiled normalization rules, unusual HF normalizers).
    pub fn encoding_is_exact(&self) -> bool {
        self.encoding_exact
    }

    /// Whether `encode` prepends SentencePiece's dummy-prefix space: then for non-empty
    /// text `decode(encode(s)) == " " + s`, which is also what the model emits first.
    pub fn adds_dummy_prefix(&self) -> bool {
        self.dummy_prefix
    }

    /// The text as the encoder sees it: Unicode normalization (NFC for Qwen) and, for
    /// SentencePiece, whitespace handling and the dummy-prefix space (with `▁` shown as a
    /// space). For an exact encoder over a byte-complete vocabulary,
    /// `decode(encode(s)) == normalize(s)`.
    pub fn normalize<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match &self.encoder {
            Encoder::Tokenizer(e) => e.normalize(text),
            Encoder::Greedy(_) => Cow::Borrowed(text),
        }
    }

    /// Concatenated bytes of `ids`; special tokens contribute their literal text and
    /// out-of-range ids nothing.
    pub fn decode(&self, ids: &[u32]) -> Vec<u8> {
        let mut out = Vec::new();
        for &id in ids {
            if let Some(b) = self.get(id) {
                out.extend_from_slice(b);
            }
        }
        out
    }

    /// Token ids of plain `text`, exactly as the model's own tokenizer produces them:
    ///
    /// * byte-level BPE: normalization (NFC for Qwen), pre-tokenizer regex, merges by
    ///   merge rank (Hugging Face `tokenizers`, no special tokens added);
    /// * tiktoken: regex, merges by token rank (`Encoding.encode_ordinary`);
    /// * SentencePiece: whitespace escaped to `▁`, dummy-prefix `▁` (when the model sets
    ///   `add_dummy_prefix`), user-defined pieces matched whole, BPE merges by piece
    ///   score, byte fallback to `<0xNN>` pieces; no BOS/EOS (`sp.encode(text)`);
    /// * served: greedy longest match over non-special tokens (no tokenizer is known).
    ///
    /// Special/added token texts inside `text` are *not* recognised (they are encoded as
    /// ordinary text), except SentencePiece user-defined pieces, which SentencePiece
    /// itself always matches.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        match &self.encoder {
            Encoder::Tokenizer(e) => e.encode(text),
            Encoder::Greedy(cell) => cell
                .get_or_init(|| {
                    GreedyEncoder::new(self.iter().filter(|&(id, _)| !self.is_special(id)))
                })
                .encode(text.as_bytes()),
        }
    }
}
